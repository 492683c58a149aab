"""Argument types the replay's commands (and the benches) share (argparse `type=`): a bad value is
named by its flag in argparse's own error, before any work starts."""

from __future__ import annotations

import argparse
from collections.abc import Callable


def non_negative_int(noun: str) -> Callable[[str], int]:
    """An integer >= 0, the error naming what it counts as `noun` ("a count of decisions")."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {noun} >= 0, got {text!r}") from None
        if value < 0:
            raise argparse.ArgumentTypeError(f"expected {noun} >= 0, got {value}")
        return value

    return parse


# numpy's generators take seeds >= 0 only (a negative one ended in numpy's "expected non-negative
# integer", which did not say which argument)
seed = non_negative_int("an integer")
