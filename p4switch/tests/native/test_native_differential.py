"""The two engines side by side (p4switch.native.differential): the same random tables, profiles, groups,
sessions, meters and registers from each program's P4Info, the same random and mutated frames, and
identical output frames, ports, digests, counters, direct counters, registers and statistics. A short
run over p4src/main.p4 and every test program (the long one is in docs/native-engine.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from p4switch.native import differential

FALLBACKS = differential.NOT_NATIVE
PROGRAMS = [p for p in differential.default_programs() if p.name not in FALLBACKS]
FRAMES = {"main.p4": 4000}


@pytest.mark.parametrize("name", sorted(FALLBACKS))
def test_a_program_the_native_engine_cannot_run_falls_back_with_its_reason(name: str) -> None:
    source = next(p for p in differential.default_programs() if p.name == name)
    outcome = differential.run_program(source, 10, seed=11)
    assert outcome.engine == "python" and outcome.frames == 0
    note = outcome.differences[0]
    assert "not run on the native engine" in note and FALLBACKS[name] in note


@pytest.mark.parametrize("source", PROGRAMS, ids=[p.name for p in PROGRAMS])
def test_engines_give_identical_results(source: Path) -> None:
    frames = FRAMES.get(source.name, 1000)
    outcome = differential.run_program(source, frames, seed=11)
    assert outcome.engine == "native"
    assert outcome.frames == frames
    assert not outcome.differences, "\n".join(d[:600] for d in outcome.differences[:5])
