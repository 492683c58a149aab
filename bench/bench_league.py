"""`python -m bench league`: the league over the shared traces that exist (../shared/traces next
to the checkout; skipped without it) on reference-70b, every policy at each trace's two frozen rate
scales, with a start-up sweep at the lower scale, on 2 local processes; prints the tables
(league.md's Markdown), the runtime in wall and CPU seconds and the machine's load.

Its target: the whole league in <= 10 minutes on 2 cores.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from replay.league import LeagueSpec, league
from replay.league.markdown import markdown
from replay.league.sources import SHARED_TRACES, sources
from replay.scenariofile import get_scenario

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "traces"
STARTUPS_S = (30.0, 60.0, 120.0, 240.0, 600.0)  # where the SLO collapses, up to 10 minutes
WORKERS = 2
TARGET_S = 600.0


def main() -> None:
    if not SHARED.is_dir():
        print(f"bench league: skipped, no shared traces at {SHARED}")
        return
    paths = [SHARED / name for name in SHARED_TRACES if (SHARED / name).is_file()]
    if not paths:
        print(f"bench league: skipped, none of {', '.join(SHARED_TRACES)} in {SHARED}")
        return
    spec = LeagueSpec(
        tuple(sources(paths)),
        (get_scenario("reference-70b"),),
        startups_s=STARTUPS_S,
        workers=WORKERS,
    )
    start = time.perf_counter()
    doc = league(spec, progress=sys.stderr.isatty())
    wall = time.perf_counter() - start
    print(markdown(doc))
    cases = len(doc["rows"])
    load = os.getloadavg()[0]
    verdict = "met" if wall <= TARGET_S else "NOT met"
    print(
        f"league: {cases} cases on {WORKERS} processes in {wall:.0f} s wall, "
        f"{doc['cpu_seconds']:.0f} CPU-s (target <= {TARGET_S:.0f} s: {verdict}; load average {load:.1f})"
    )


if __name__ == "__main__":
    main()
