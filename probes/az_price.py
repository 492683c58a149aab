"""Replay a case with the bursts' priced hold at another budget (a probe, not a policy).

`.venv/bin/python probes/az_price.py BUDGET -- <infscale replay compare args>`: burstprice.BUDGET
(times the SLO's tail) set to BUDGET in this process; `wall` instead of a number: main's wall hold
(latecurve's curves never read). The rest of probes/az_knocks.py's knocks are not applied here.
"""

from __future__ import annotations

import sys

from autoscaler.policy import burstprice, latecurve

arg = sys.argv[1]
argv = sys.argv[sys.argv.index("--") + 1 :]
if arg == "wall":
    _curve = latecurve.curve_for  # what the Lookahead asks (with its specs' number)

    def _none(*args):  # type: ignore[no-untyped-def]
        key, _ = _curve(*args)
        return key, None

    latecurve.curve_for = _none
else:
    burstprice.BUDGET = float(arg)  # type: ignore[misc]

from infscale.cli import main  # noqa: E402

sys.exit(main(["replay", "compare", *argv]))
