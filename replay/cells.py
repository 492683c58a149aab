"""Table cells as text, shared by the replay's report (report.py) and the league's tables
(league/markdown.py): a missing figure (None or NaN) reads "n/a"."""

from __future__ import annotations

import math
from typing import Any


def ms(x: Any) -> str:
    """Seconds as whole milliseconds."""
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x * 1000:.0f} ms"
