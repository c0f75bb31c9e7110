"""Command-line option types with ranges, shared by ``sm``, ``ibsec-agent`` and ``ibsec-fabric``.

argparse's ``type=int`` and ``type=float`` take ``-5`` for a rate, ``nan`` or ``inf`` for a period and
``99999`` for a 16-bit field, and the process starts with a value that makes no sense. These types refuse
such a value while the command line is parsed, before anything starts: argparse prints
``error: argument --punt-rate: -5 is outside 1..1000000000`` and exits with status 2.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable


def integer(low: int, high: int) -> Callable[[str], int]:
    """An integer (decimal or 0x...) within ``low..high``."""

    def parse(text: str) -> int:
        try:
            value = int(text, 0)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{text} is outside {_bound(low)}..{_bound(high)}")
        return value

    parse.__name__ = "integer"  # what argparse names in its own messages
    return parse


def number(low: float, high: float, *, above: bool = False) -> Callable[[str], float]:
    """A finite number within ``low..high``; ``above``: strictly greater than ``low``."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"{text} is not a finite number")
        if value < low or value > high or (above and value == low):
            where = f"more than {low:g} and at most {high:g}" if above else f"within {low:g}..{high:g}"
            raise argparse.ArgumentTypeError(f"{text} is not {where}")
        return value

    parse.__name__ = "number"
    return parse


def _bound(value: int) -> str:
    return f"{value:#x}" if value >= 0xFFFF and (value + 1) & value == 0 else str(value)
