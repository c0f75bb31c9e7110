"""The two engines side by side (p4switch.native.differential): the same random tables, profiles, groups,
sessions, meters and registers from each program's P4Info, the same random and mutated frames, and
identical output frames, ports, digests, counters, direct counters, registers and statistics. A short
run over p4src/main.p4 and every test program (the long one is in docs/native-engine.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from p4switch.native import differential

PROGRAMS = differential.default_programs()
FRAMES = {"main.p4": 4000}


@pytest.mark.parametrize("source", PROGRAMS, ids=[p.name for p in PROGRAMS])
def test_engines_give_identical_results(source: Path) -> None:
    frames = FRAMES.get(source.name, 1000)
    outcome = differential.run_program(source, frames, seed=11)
    assert outcome.engine == "native"
    assert outcome.frames == frames
    assert not outcome.differences, "\n".join(d[:600] for d in outcome.differences[:5])
