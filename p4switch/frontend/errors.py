"""Source positions and the one exception type the front end raises for bad P4 input."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Pos:
    """A position in an original source file (1-based line and column)."""

    file: str
    line: int
    col: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


UNKNOWN_POS = Pos("<unknown>", 0, 0)


class P4Error(Exception):
    """A user-facing compile error: printed as `file:line:col: message` and exit code 1."""

    def __init__(self, pos: Pos, message: str) -> None:
        super().__init__(f"{pos}: {message}")
        self.pos = pos
        self.message = message


def unsupported(pos: Pos, construct: str) -> P4Error:
    """The error for a valid P4_16 construct that p4switch does not implement."""
    return P4Error(pos, f"{construct} is not supported by p4switch")


def type_error(pos: Pos, message: str) -> P4Error:
    """The error for a program that is not valid P4_16 (names, types, widths)."""
    return P4Error(pos, f"error: {message}")
