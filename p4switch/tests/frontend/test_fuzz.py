"""Mutated programs never crash the front end: each compiles or fails with a positioned P4Error."""

from __future__ import annotations

import random
import re
from pathlib import Path

from p4switch.frontend.cli import compile_file
from p4switch.frontend.errors import P4Error
from p4switch.tests.frontend.conftest import PROGRAMS

_WORD = re.compile(r"[A-Za-z_]\w*|\d+|[^\w\s]")


def mutate(text: str, rng: random.Random) -> str:
    """Delete, replace or duplicate one token (a name, a number or a punctuation mark)."""
    tokens = list(_WORD.finditer(text))
    victim, donor = rng.choice(tokens), rng.choice(tokens).group(0)
    op = rng.randrange(3)
    if op == 0:
        return text[: victim.start()] + text[victim.end() :]
    if op == 1:
        return text[: victim.start()] + donor + text[victim.end() :]
    return text[: victim.start()] + donor + " " + text[victim.start() :]


def test_mutated_programs_compile_or_fail_cleanly(tmp_path: Path) -> None:
    rng = random.Random(2026)
    sources = [(PROGRAMS / name).read_text() for name in ("basic_router.p4", "features.p4")]
    outcomes = {"compiled": 0, "error": 0}
    for i in range(40):
        path = tmp_path / f"m{i}.p4"
        path.write_text(mutate(rng.choice(sources), rng))
        try:
            compile_file(path)
            outcomes["compiled"] += 1
        except P4Error as exc:
            assert exc.pos.line > 0 and exc.message, exc
            outcomes["error"] += 1
    assert outcomes["compiled"] > 0 and outcomes["error"] > 0
