"""The front end is the list of passes in p4switch.frontend.PASSES: each adds its result to the
compilation for the passes after it, and compile_file runs them all."""

from __future__ import annotations

from p4switch import ir
from p4switch.frontend import PASSES, Compilation, compile_file
from p4switch.tests.frontend.conftest import PROGRAMS


def test_each_pass_leaves_its_result_for_the_next() -> None:
    c = Compilation(PROGRAMS / "l2fwd.p4")
    done = {}
    for step in PASSES:
        step.run(c)
        done[step.name] = step
    assert list(done) == [
        "preprocess", "parse", "declarations", "v1switch", "parsers", "controls", "program", "ids", "p4info"
    ]  # fmt: skip
    assert "header ethernet_t" in c.text and c.tree.data == "start"
    assert "ethernet_t" in c.fe.decls.headers
    assert c.v1switch.pipeline.ingress == "L2Ingress"
    assert [p.name for p in c.parsers] == ["L2Parser"]
    assert [b.name for b in c.controls][2] == "L2Egress"
    (table,) = c.program.tables
    assert isinstance(table.keys[0].expr, ir.Member) and table.p4info_id == c.ids[(0x02, "L2Ingress.dmac")]
    assert [t.preamble.id for t in c.p4info.tables] == [table.p4info_id]


def test_compile_file_is_the_passes_in_order() -> None:
    c = Compilation(PROGRAMS / "l2fwd.p4")
    for step in PASSES:
        step.run(c)
    compiled = compile_file(PROGRAMS / "l2fwd.p4")
    assert compiled.program == c.program and compiled.p4info == c.p4info
