"""The native engine under AddressSanitizer and UndefinedBehaviorSanitizer (p4switch.native.fuzz): mutated,
truncated, garbage and jumbo frames through p4src/main.p4 and the test programs with every table, profile,
parser value set, group, session and meter filled at random and refilled while frames run; no sanitizer
report, no leak, no internal error. A program's own STF frames join the seeds, so the passes its cases reach
(resubmit and recirculate with clones and multicast) run mutated too. A short run (the long one, 1,000,000
frames, is in docs/native-engine.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from p4switch.engine.switch import read_program
from p4switch.frontend.cli import compile_file
from p4switch.native import fuzz

TESTS = Path(__file__).resolve().parents[1]
PROGRAMS = [TESTS.parents[1] / "p4src" / "main.p4", TESTS / "programs" / "features.p4",
            TESTS / "conformance" / "replication.p4", TESTS / "conformance" / "selector.p4",
            TESTS / "conformance" / "header_stacks.p4", TESTS / "conformance" / "passes_with_clones.p4",
            TESTS / "conformance" / "value_sets.p4", TESTS / "conformance" / "varbit.p4",
            TESTS / "conformance" / "varbit_fields.p4"]
FRAMES = {"main.p4": 20_000}


@pytest.mark.parametrize("source", PROGRAMS, ids=[p.name for p in PROGRAMS])
def test_mutated_frames_under_sanitizers(source: Path) -> None:
    frames = FRAMES.get(source.name, 5_000)
    seeds = fuzz.default_seeds() + fuzz.stf_frames(source.with_suffix(".stf"))
    result = fuzz.run(read_program(compile_file(source).ir_json()), frames, seed=2024, seeds=seeds)
    assert result.returncode == 0, result.report
    assert result.frames == frames and result.internal_errors == 0
    assert result.parser_errors > 0 and result.outputs > 0  # short frames refused, others forwarded
    assert (result.passes > 0) == (source.name == "passes_with_clones.p4")
