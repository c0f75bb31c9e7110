"""The typed IR's one JSON serializer: exact round trips of every program we compile and of hand-built IR,
defaults for the fields a writer may leave out, and errors that name the path of a bad value."""

from __future__ import annotations

import copy
import functools
import json
from pathlib import Path
from typing import Any

import pytest

from p4switch import ir
from p4switch.frontend import compile_file
from p4switch.tests.engine.router import router_ir

TESTS = Path(__file__).resolve().parents[1]
REPO = TESTS.parents[1]
SOURCES = (
    sorted((TESTS / "programs").glob("*.p4"))
    + sorted((TESTS / "conformance").glob("*.p4"))
    + [TESTS / "runtime" / "programs" / "runtime_features.p4", REPO / "p4src" / "main.p4"]
)


@functools.cache
def compiled_json(path: Path) -> str:
    return compile_file(path).ir_json()


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.name)
def test_every_compiled_program_round_trips_exactly(path: Path) -> None:
    text = compiled_json(path)
    program = ir.from_json(json.loads(text))
    assert ir.to_json(program) == json.loads(text)
    assert ir.from_json(ir.to_json(program)) == program


def test_the_json_is_what_the_docs_describe() -> None:
    doc = json.loads(compiled_json(TESTS / "programs" / "l2fwd.p4"))
    program = ir.from_json(doc)
    assert (doc["format"], doc["version"]) == (ir.FORMAT, ir.VERSION)
    assert isinstance(program.pipeline, ir.Pipeline) and program.pipeline.ingress == "L2Ingress"
    assert program.headers["ethernet_t"].fields[0] == ir.HeaderField("dst_addr", 48, False)
    table = next(t for t in program.tables if t.name == "L2Ingress.dmac")
    assert table.keys[0].type == ir.TBit(48) and isinstance(table.keys[0].expr, ir.Member)
    assert doc["tables"][0]["keys"][0]["expr"]["op"] == "member"
    assert "support_timeout" not in doc["tables"][0]  # left out while False


def test_hand_built_ir_gets_the_defaults_of_the_fields_it_leaves_out() -> None:
    """The engine tests write IR by hand without p4info ids or an action param's `var`."""
    program = ir.from_json(router_ir())
    action = next(a for a in program.actions if a.params)
    assert action.p4info_id == 0 and all(p.var == p.name for p in action.params)
    assert ir.from_json(ir.to_json(program)) == program


def test_optional_statement_fields_are_written_only_when_set() -> None:
    stmt = ir.Call("mark_to_drop", args=(ir.Var("sm", ir.TStruct("standard_metadata_t")),), src="p.p4:3:5")
    assert ir.node_to_json(stmt) == {
        "s": "call",
        "fn": "mark_to_drop",
        "args": [{"op": "var", "name": "sm", "type": {"k": "struct", "name": "standard_metadata_t"}}],
        "src": "p.p4:3:5",
    }
    hashed = ir.Call("hash", algorithm="crc16", args=(), data=(), src="p.p4:4:5")
    assert ir.node_to_json(hashed)["data"] == [] and "clone_type" not in ir.node_to_json(hashed)
    assert ir.node_from_json(ir.Stmt, ir.node_to_json(hashed)) == hashed


def test_if_and_mux_write_else_without_the_underscore() -> None:
    b = ir.TBool()
    mux = ir.Mux(ir.Const(True, b), ir.Const(1, ir.TBit(8)), ir.Const(2, ir.TBit(8)), ir.TBit(8))
    assert set(ir.node_to_json(mux)) == {"op", "cond", "then", "else", "type"}
    branch = ir.If(ir.Const(True, b), (ir.Exit("a:1:1"),), (ir.Return("a:2:1"),), "a:1:1")
    assert ir.node_to_json(branch)["else"] == [{"s": "return", "src": "a:2:1"}]
    assert ir.node_from_json(ir.Stmt, ir.node_to_json(branch)) == branch


def test_each_union_has_the_kinds_of_the_docs() -> None:
    kinds = {base: set(ir._union(base)) for base in (ir.Type, ir.Expr, ir.Stmt, ir.ExternInstance)}
    assert kinds[ir.Type] == {
        "bit", "int", "varbit", "bool", "header", "struct", "stack", "error", "enum", "packet_in",
        "packet_out",
    }  # fmt: skip
    assert kinds[ir.Expr] == {
        "const", "var", "member", "index", "dyn_index", "slice", "concat", "cast", "unary", "binary", "mux",
        "is_valid", "lookahead", "table_hit", "table_miss",
    }  # fmt: skip
    assert kinds[ir.Stmt] == {
        "assign", "if", "apply", "switch", "exit", "return", "set_valid", "set_invalid", "extract",
        "advance", "verify", "emit", "call", "method", "digest",
    }  # fmt: skip
    assert kinds[ir.ExternInstance] == {
        "counter", "direct_counter", "meter", "direct_meter", "register", "action_profile", "action_selector",
        "value_set",
    }  # fmt: skip


UNIONS = (ir.Type, ir.Expr, ir.Stmt, ir.Transition, ir.Keyset, ir.EntryMatch, ir.ExternInstance)


def test_every_kind_of_every_union_round_trips() -> None:
    """One sample per kind (the compiled programs do not use them all)."""
    b8, t = ir.TBit(8), ir.TBool()
    x = ir.Var("x", b8)
    samples: list[Any] = [
        ir.Lookahead(ir.TInt(4)),
        ir.TableMiss("C.t", t),
        ir.Index(ir.Var("s", ir.TStack("h_t", 3)), 2, ir.THeader("h_t")),
        ir.DynIndex(ir.Var("s", ir.TStack("h_t", 3)), x, ir.THeader("h_t")),
        ir.Cast(ir.Const(-1, ir.TInt(8)), b8),
        ir.Concat(x, x, ir.TBit(16)),
        ir.Unary("~", x, b8),
        ir.Const("NoMatch", ir.TError()),
        ir.Const("crc16", ir.TEnum("HashAlgorithm")),
        ir.Switch("C.t", (ir.SwitchCase(("C.a",), ()), ir.SwitchCase(None, (ir.Exit(),))), "a:1:1"),
        ir.Digest("d_t", 1, (x,), "a:1:1"),
        ir.MethodCall("C.r", "write", (x, x), "a:1:1"),
        ir.Verify(ir.Const(False, t), "StackOutOfBounds", "a:1:1"),
        ir.Extract(ir.Var("h", ir.THeader("v_t")), "a:1:1", ir.Cast(x, ir.TBit(32))),
        ir.HeaderType((ir.HeaderField("a", 8), ir.HeaderField("opt", 32, varbit=True)), 8),
        ir.Var("v", ir.TVarbit(32)),
        ir.Select(
            (x,),
            (
                ir.SelectCase((ir.KeysetMask(0x10, 0xF0),), "s1"),
                ir.SelectCase((ir.KeysetRange(1, 5),), "s2"),
                ir.SelectCase((ir.KeysetValueSet("P.pvs"),), "s3"),
                ir.SelectCase((ir.KeysetDefault(),), "accept"),
            ),
        ),
        ir.Entry((ir.MatchLpm(0x0A000000, 8), ir.MatchDontCare()), ir.EntryAction("C.a", (1,)), 3, "a:1:1"),
        ir.DirectMeter("C.dm", "bytes", "C.t", b8, "a:1:1", 7),
        ir.ActionSelector("C.sel", "crc16", 64, 16, 8, ("C.t",), "a:1:1", 9),
        ir.ValueSet("P.pvs", 4, (16, 8), "a:1:1", 3),
    ]
    for node in samples:
        base = next((b for b in UNIONS if isinstance(node, b)), type(node))
        assert ir.node_from_json(base, json.loads(json.dumps(ir.node_to_json(node)))) == node


def test_a_node_equals_only_a_node_of_its_kind() -> None:
    assert ir.TBit(8) != ir.TInt(8)
    assert ir.TableHit("t", ir.TBool()) != ir.TableMiss("t", ir.TBool())
    assert hash(ir.Member(ir.Var("h", ir.TStruct("s")), "f", ir.TBit(1))) == hash(
        ir.Member(ir.Var("h", ir.TStruct("s")), "f", ir.TBit(1))
    )


def bad(doc: dict[str, Any], message: str) -> None:
    with pytest.raises(ir.IRFormatError) as info:
        ir.from_json(doc)
    assert str(info.value) == message


def test_bad_json_is_refused_with_the_path_of_the_bad_value() -> None:
    good = json.loads(compiled_json(TESTS / "programs" / "l2fwd.p4"))
    doc = copy.deepcopy(good)
    doc["controls"][1]["body"][0]["cond"] = {"op": "bogus"}
    bad(doc, "controls[1].body[0].cond: unknown Expr op 'bogus'")
    doc = copy.deepcopy(good)
    doc["tables"][0]["size"] = "big"
    bad(doc, "tables[0].size: expected int, got 'big'")
    doc = copy.deepcopy(good)
    doc["tables"][0]["entries_const"] = 1
    bad(doc, "tables[0].entries_const: expected bool, got 1")
    doc = copy.deepcopy(good)
    del doc["parsers"][0]["states"][0]["transition"]
    bad(doc, "parsers[0].states[0]: ParserState has no 'transition'")
    doc = copy.deepcopy(good)
    doc["headers"]["ethernet_t"]["fields"] = {}
    bad(doc, "headers.ethernet_t.fields: expected an array, got {}")
    bad(
        {**good, "version": 0},
        f"p4switch IR version 0 is not this p4switch's version {ir.VERSION}: "
        "compile the program again with this p4switch-cc",
    )
    bad({"format": "bmv2"}, "program is not p4switch IR JSON (format != 'p4switch-ir')")
