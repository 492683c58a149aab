"""Argument types the replay's commands share (argparse `type=`): a bad value is named by its
flag in argparse's own error, before any work starts."""

from __future__ import annotations

import argparse


def seed(text: str) -> int:
    """A seed: numpy's generators take integers >= 0 only (a negative one ended in numpy's
    "expected non-negative integer", which did not say which argument)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {value}")
    return value
