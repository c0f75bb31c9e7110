"""The `const` declarations of p4src/include/defines.p4, read by name so no test re-types a number.

The P4Info carries ids and widths but not the program's constants (drop reasons, parser error indexes,
partition modes, the CPU port); defines.p4 writes each once and this module reads them from there.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

DEFINES = Path(__file__).resolve().parents[2] / "p4src" / "include" / "defines.p4"
_CONST = re.compile(r"^\s*const\s+\w+(?:<\d+>)?\s+(\w+)\s*=\s*(0x[0-9a-fA-F_]+|\d+)\s*;", re.MULTILINE)


@cache
def constants(path: Path = DEFINES) -> dict[str, int]:
    """Every integer constant of defines.p4, by name."""
    return {name: int(value.replace("_", ""), 0) for name, value in _CONST.findall(path.read_text())}


def const(name: str) -> int:
    """One constant of defines.p4; KeyError names it if the P4 source has no such constant."""
    return constants()[name]
