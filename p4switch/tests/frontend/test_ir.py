"""The IR has what the engine relies on (docs/p4switch-ir.md): typed, folded, resolved, qualified."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from p4switch.frontend.cli import Compiled, compile_file
from p4switch.tests.frontend.conftest import PROGRAMS, REPO

IR = dict[str, Any]


def walk(node: Any) -> Iterator[IR]:
    if isinstance(node, dict):
        yield node
        for v in node.values():
            yield from walk(v)
    elif isinstance(node, list):
        for v in node:
            yield from walk(v)


def exprs(node: Any) -> Iterator[IR]:
    return (n for n in walk(node) if "op" in n)


def block(ir: IR, name: str) -> IR:
    return next(b for b in ir["controls"] + ir["parsers"] if b["name"] == name)


def apply_body(prog: Compiled) -> list[IR]:
    return block(prog.ir, "I")["body"]  # type: ignore[no-any-return]


def assigns(stmts: list[IR]) -> list[tuple[str, Any]]:
    """(lhs as text, rhs constant or rhs op) of the assignments in a statement list."""
    return [(text(s["lhs"]), s["rhs"].get("value", s["rhs"]["op"])) for s in stmts if s["s"] == "assign"]


def text(e: IR) -> str:
    if e["op"] == "var":
        return str(e["name"])
    if e["op"] == "member":
        return f"{text(e['expr'])}.{e['field']}"
    if e["op"] == "slice":
        return f"{text(e['expr'])}[{e['hi']}:{e['lo']}]"
    if e["op"] == "index":
        return f"{text(e['expr'])}[{e['index']}]"
    return str(e["op"])


PROGRAM_FILES = sorted(PROGRAMS.glob("*.p4")) + [REPO / "p4src" / "main.p4"]


@functools.cache
def compiled(path: Path) -> Compiled:
    """Each program is compiled once per test session (the tests only read the result)."""
    return compile_file(path)


@pytest.mark.parametrize("path", PROGRAM_FILES, ids=lambda p: p.name)
def test_every_expression_is_typed_with_a_width(path: Path) -> None:
    ir = compiled(path).ir
    for e in exprs(ir):
        t = e.get("type")
        assert t is not None, e
        assert t["k"] in ("bit", "int", "bool", "header", "struct", "stack", "error", "enum"), e
        if t["k"] in ("bit", "int"):
            assert t["w"] > 0
        if e["op"] == "const" and t["k"] == "bit":
            assert 0 <= e["value"] < 1 << t["w"], e
        if e["op"] == "const" and t["k"] == "int":
            assert -(1 << (t["w"] - 1)) <= e["value"] < 1 << (t["w"] - 1), e
        if e["op"] == "binary" and e["operator"] not in ("<<", ">>"):
            assert e["left"]["type"] == e["right"]["type"], e


@pytest.mark.parametrize("path", PROGRAM_FILES, ids=lambda p: p.name)
def test_names_resolve(path: Path) -> None:
    """Every var is a param/local of its block or action; every table action and default exists."""
    ir = compiled(path).ir
    actions = {a["name"]: a for a in ir["actions"]}
    blocks = {b["name"]: b for b in ir["controls"] + ir["parsers"]}
    for b in blocks.values():
        names = {p["name"] for p in b["params"]} | {v["name"] for v in b["locals"]}
        assert {e["name"] for e in exprs(b) if e["op"] == "var"} <= names
    for a in actions.values():
        names = {p["var"] for p in a["params"]} | {v["name"] for v in a["locals"]}
        if a["control"]:
            blk = blocks[a["control"]]
            names |= {p["name"] for p in blk["params"]} | {v["name"] for v in blk["locals"]}
        assert {e["name"] for e in exprs(a["body"]) if e["op"] == "var"} <= names
    externs = {e["name"] for e in ir["externs"]}
    for t in ir["tables"]:
        listed = {a["name"] for a in t["actions"]}
        assert listed <= set(actions)
        assert t["default_action"]["name"] in listed
        assert t["implementation"] in externs | {None}
    for s in walk(ir):
        if s.get("s") == "method":
            assert s["instance"] in externs
        if s.get("s") in ("apply", "switch") or s.get("op") in ("table_hit", "table_miss"):
            assert s["table"] in {t["name"] for t in ir["tables"]}


def test_the_project_program_compiles_with_qualified_names() -> None:
    prog = compiled(REPO / "p4src" / "main.p4")
    ir = prog.ir
    assert ir["pipeline"]["arch"] == "v1model"
    assert set(ir["pipeline"]) >= {"parser", "ingress", "egress", "deparser", "headers_type", "metadata_type"}
    ingress = ir["pipeline"]["ingress"]
    assert all(t["name"].startswith(ingress + ".") for t in ir["tables"])
    assert {t.preamble.name for t in prog.p4info.tables} == {t["name"] for t in ir["tables"]}


def test_constants_fold_with_wraparound(ingress: Callable[[str], Compiled]) -> None:
    prog = ingress("""    const bit<8> BASE = 250;
    apply {
        meta.m8 = BASE + 10;
        meta.m8 = (bit<8>) 300;
        meta.m16 = 3 * 2 - 7;
        meta.m8 = (bit<8>) (-8s1 >> 1);
        meta.m16 = (16w1 ++ 8w2)[15:0];
        meta.m8 = 8w200 |+| 100;
        meta.m8 = 8w5 |-| 6;
        meta.m16 = BASE == 250 ? 16w1 : 16w2;
    }""")
    assert assigns(apply_body(prog)) == [
        ("meta.m8", 4),
        ("meta.m8", 44),
        ("meta.m16", 0xFFFF),
        ("meta.m8", 0xFF),
        ("meta.m16", 0x0102),
        ("meta.m8", 255),
        ("meta.m8", 0),
        ("meta.m16", 1),
    ]


def test_literals_take_the_type_of_their_context(ingress: Callable[[str], Compiled]) -> None:
    prog = ingress("    apply { meta.m16 = meta.m16 + 1; if (hdr.eth.type_ == 0x800) { meta.m8 = 1; } }")
    add, cond = apply_body(prog)[0]["rhs"], apply_body(prog)[1]["cond"]
    assert add["right"] == {"op": "const", "value": 1, "type": {"k": "bit", "w": 16}}
    assert cond["right"] == {"op": "const", "value": 0x800, "type": {"k": "bit", "w": 16}}


def test_constant_conditions_keep_one_branch(ingress: Callable[[str], Compiled]) -> None:
    prog = ingress("    apply { if (1 > 2) { meta.m8 = 1; } else { meta.m8 = 2; } }")
    assert [(s["s"], s["rhs"]["value"]) for s in apply_body(prog)] == [("assign", 2)]


def test_direct_action_calls_are_inlined_with_copy_in_copy_out(ingress: Callable[[str], Compiled]) -> None:
    prog = ingress("""    action bump(inout bit<8> v, bit<8> by) { v = v + by; }
    apply { bump(meta.m8, 3); }""")
    body = apply_body(prog)
    assert assigns(body) == [("v", "member"), ("by", 3), ("v", "binary"), ("meta.m8", "var")]
    assert {v["name"] for v in block(prog.ir, "I")["locals"]} == {"v", "by"}
    assert prog.ir["actions"] == []  # no table uses it


def test_sub_controls_are_inlined_and_named_by_instance(compile_text: Callable[..., Compiled]) -> None:
    from p4switch.tests.frontend.conftest import TEMPLATE

    sub = """control Sub(inout headers_t h, in bit<8> x) {
    counter(4, CounterType.packets) c;
    action hit() { h.eth.type_ = 1; }
    table t { key = { h.eth.dst: exact; } actions = { hit; } }
    apply { t.apply(); c.count((bit<32>) x); }
}
"""
    src = TEMPLATE.replace("control I(", sub + "control I(").replace(
        "{BODY}", "    Sub() inner;\n    apply { inner.apply(hdr, meta.m8 + 1); }"
    )
    ir = compile_file_from(compile_text, src)
    (table,) = ir["tables"]
    assert (table["name"], table["control"]) == ("I.inner.t", "I")
    assert table["keys"][0]["expr"]["expr"]["expr"] == {
        "op": "var",
        "name": "hdr",
        "type": {"k": "struct", "name": "headers_t"},
    }
    assert [e["name"] for e in ir["externs"]] == ["I.inner.c"]
    assert [a["name"] for a in ir["actions"]] == ["I.inner.hit", "NoAction"]
    body = block(ir, "I")["body"]
    assert [s["s"] for s in body] == ["assign", "apply", "method"]  # x is an expression: copied in
    assert body[0]["lhs"]["name"] == "x"


def compile_file_from(compile_text: Callable[..., Compiled], src: str) -> IR:
    return compile_text(src).ir


def test_parser_select_keysets(features: Compiled) -> None:
    parser = block(features.ir, "FParser")
    states = {s["name"]: s for s in parser["states"]}
    assert parser["states"][0]["name"] == "start"
    vlan = states["parse_vlan0"]["transition"]
    assert [k["op"] for k in vlan["keys"]] == ["member", "lookahead"]
    assert vlan["cases"] == [
        {"keysets": [{"kind": "exact", "value": 0x8100}, {"kind": "default"}], "next": "parse_vlan1"},
        {
            "keysets": [
                {"kind": "mask", "value": 0x88B5, "mask": 0xFFFF},
                {"kind": "range", "low": 0x100, "high": 0x1FF},
            ],
            "next": "parse_probe",
        },
        {"keysets": [{"kind": "default"}, {"kind": "default"}], "next": "accept"},
    ]
    assert states["parse_ethernet"]["transition"]["cases"][0]["keysets"] == [
        {"kind": "exact", "value": 0x8100}
    ]
    assert [s["s"] for s in states["parse_probe"]["body"]] == ["assign", "verify", "extract"]
    assert states["parse_probe"]["body"][1]["error"] == "BadVersion"


def test_table_entries_and_priorities(features: Compiled) -> None:
    acl = next(t for t in features.ir["tables"] if t["name"] == "FIngress.acl")
    # `priority = 10:` / `priority = 20:` do not reorder the entries: p4c's BMv2 back end numbers them by
    # position, so the first entry wins (the larger engine priority)
    assert [(e["priority"], e["action"]["name"]) for e in acl["entries"]] == [
        (2, "FIngress.to_cpu"),
        (1, "FIngress.drop"),
    ]
    assert acl["entries"][0]["match"] == [
        {"kind": "dont_care"},
        {"kind": "range", "low": 0x800, "high": 0x8FF},
        {"kind": "lpm", "value": 0xFFFF00000000, "prefix_len": 16},
    ]
    assert acl["default_action"] == {"name": "NoAction", "args": [], "const": True}
    assert not acl["entries_const"]


def test_implicit_priorities_follow_entry_order() -> None:
    ir = compile_file(PROGRAMS / "basic_router.p4").ir
    dscp = next(t for t in ir["tables"] if t["name"] == "MyIngress.dscp_class")
    assert [e["priority"] for e in dscp["entries"]] == [3, 2, 1]  # the first entry wins
    assert dscp["entries"][1]["match"] == [
        {"kind": "ternary", "value": 0x08, "mask": 0x38},
        {"kind": "range", "low": 17, "high": 17},
    ]
    assert dscp["keys"][0]["expr"]["op"] == "slice" and dscp["entries_const"]


def test_switch_and_emit_flattening(features: Compiled) -> None:
    ingress = block(features.ir, "FIngress")
    switch = next(s for s in ingress["body"] if s["s"] == "switch")
    assert [c["actions"] for c in switch["cases"]] == [["FIngress.set_port"], ["FIngress.drop"]]
    deparser = block(features.ir, "FDeparser")
    assert [text(s["header"]) for s in deparser["body"]] == [
        "hdr.packet_in",
        "hdr.ethernet",
        "hdr.vlan[0]",
        "hdr.vlan[1]",
        "hdr.probe",
    ]


def test_digest_clone_and_hash_statements(features: Compiled) -> None:
    stmts = list(walk(features.ir["actions"] + features.ir["controls"]))
    digest = next(s for s in stmts if s.get("s") == "digest")
    assert (digest["digest"], digest["receiver"], [text(f) for f in digest["fields"]]) == (
        "learn_t",
        1,
        ["meta.learn.src", "meta.learn.port"],
    )
    clone = next(s for s in stmts if s.get("fn") == "clone_preserving_field_list")
    assert (clone["clone_type"], clone["field_list"]) == ("I2E", [["flow_hash"]])
    hashed = next(s for s in stmts if s.get("fn") == "hash")
    assert hashed["algorithm"] == "crc16" and [text(d) for d in hashed["data"]] == [
        "hdr.ethernet.src",
        "hdr.ethernet.dst",
    ]


def test_ir_loads_into_the_engine(features: Compiled) -> None:
    from p4switch.engine import loader

    for path in PROGRAM_FILES:
        loader.load(compiled(path).ir_json().encode())


def test_switch_on_a_value_becomes_an_if_chain(ingress: Callable[[str], Compiled]) -> None:
    prog = ingress("""    apply {
        switch (meta.m8) {
            1: 2: { meta.m16 = 12; }
            3: { meta.m16 = 3; }
            default: { meta.m16 = 0; }
        }
    }""")
    copy, chain = apply_body(prog)
    assert (copy["lhs"]["name"], text(copy["rhs"])) == ("switch_value", "meta.m8")
    cond = chain["cond"]
    assert (cond["operator"], cond["left"]["right"]["value"], cond["right"]["right"]["value"]) == ("||", 1, 2)
    assert assigns(chain["then"]) == [("meta.m16", 12)]
    inner = chain["else"][0]
    assert inner["cond"]["right"]["value"] == 3
    assert assigns(inner["then"]) == [("meta.m16", 3)] and assigns(inner["else"]) == [("meta.m16", 0)]


def test_stack_push_pop_size_and_header_sizes(compile_text: Callable[..., Compiled]) -> None:
    from p4switch.tests.frontend.conftest import TEMPLATE

    src = TEMPLATE.replace(
        "struct headers_t { eth_t eth; }", "struct headers_t { eth_t eth; eth_t[3] s; }"
    ).replace(
        "{BODY}",
        "    apply { hdr.s.push_front(1); hdr.s.pop_front(2); meta.m8 = (bit<8>) hdr.s.size;"
        " meta.m16 = (bit<16>) hdr.eth.minSizeInBytes(); }",
    )
    body = block(compile_text(src).ir, "I")["body"]
    moves = [
        (s["s"], text(s.get("lhs") or s["header"]), text(s["rhs"]) if "rhs" in s else None) for s in body
    ]
    assert moves[:6] == [
        ("assign", "hdr.s[2]", "hdr.s[1]"),
        ("assign", "hdr.s[1]", "hdr.s[0]"),
        ("set_invalid", "hdr.s[0]", None),
        ("assign", "hdr.s[0]", "hdr.s[2]"),
        ("set_invalid", "hdr.s[1]", None),
        ("set_invalid", "hdr.s[2]", None),
    ]
    assert assigns(body[6:]) == [("meta.m8", 3), ("meta.m16", 14)]


def test_an_instance_may_shadow_a_type_name(compile_text: Callable[..., Compiled]) -> None:
    """`PacketOutCtl() packet_out;` then `packet_out.apply(...)`: packet_out is also core.p4's extern type."""
    from p4switch.tests.frontend.conftest import TEMPLATE

    sub = "control Sub(inout headers_t h) { apply { h.eth.type_ = 7; } }\n"
    src = TEMPLATE.replace("control I(", sub + "control I(").replace(
        "{BODY}", "    Sub() packet_out;\n    apply { packet_out.apply(hdr); }"
    )
    assert assigns(block(compile_text(src).ir, "I")["body"]) == [("hdr.eth.type_", 7)]


def test_a_literal_conditional_takes_the_width_of_its_target(ingress: Callable[[str], Compiled]) -> None:
    prog = ingress(
        "    apply { meta.m16 = hdr.eth.isValid() ? 1 : 2; meta.m8 = (bit<8>) (meta.m8 == 0 ? 5 : 6); }"
    )
    first, second = apply_body(prog)
    for stmt, width in ((first, 16), (second, 8)):
        mux = stmt["rhs"]
        assert mux["op"] == "mux" and mux["type"] == {"k": "bit", "w": width}
        assert mux["then"]["type"] == mux["else"]["type"] == {"k": "bit", "w": width}


def test_lookahead_of_header_fields_slices_one_lookahead() -> None:
    ir = compile_file(PROGRAMS / "calc_lookahead.p4").ir
    start = block(ir, "P")["states"][0]
    keys = start["transition"]["keys"]
    assert [(k["op"], k["expr"]["op"], k["expr"]["type"]["w"], k["hi"], k["lo"]) for k in keys] == [
        ("slice", "lookahead", 128, 127, 120),
        ("slice", "lookahead", 128, 119, 112),
        ("slice", "lookahead", 128, 111, 104),
    ]
    assert start["transition"]["cases"][0]["keysets"] == [
        {"kind": "exact", "value": v} for v in (0x50, 0x34, 1)
    ]


def test_stack_next_and_last_unroll_the_parser_loop() -> None:
    ir = compile_file(PROGRAMS / "source_routing.p4").ir
    states = {s["name"]: s for s in block(ir, "P")["states"]}
    assert list(states) == [
        "start",
        "parse_srcRouting",
        "parse_srcRouting@1",
        "parse_srcRouting@2",
        "parse_srcRouting@3",
    ]
    for i in range(3):
        state = states["parse_srcRouting" + (f"@{i}" if i else "")]
        assert text(state["body"][0]["header"]) == f"hdr.srcRoutes[{i}]"  # .next
        assert state["body"][1]["rhs"]["value"] == i  # .lastIndex after the extract
        assert text(state["transition"]["keys"][0]["expr"]) == f"hdr.srcRoutes[{i}]"  # .last
        assert [c["next"] for c in state["transition"]["cases"]] == ["accept", f"parse_srcRouting@{i + 1}"]
    overflow = states["parse_srcRouting@3"]
    assert overflow["body"][0]["s"] == "verify" and overflow["body"][0]["error"] == "StackOutOfBounds"
    assert overflow["transition"] == {"kind": "goto", "next": "reject"}


def test_annotated_block_statement(ingress: Callable[[str], Compiled]) -> None:
    prog = ingress(
        "    register<bit<8>>(1) r;\n    apply { @atomic { r.read(meta.m8, 0); r.write(0, meta.m8 + 1); } }"
    )
    assert [s["method"] for s in apply_body(prog)] == ["read", "write"]


def test_type_parameter_names_are_free_outside_their_declarations(
    compile_text: Callable[..., Compiled],
) -> None:
    """v1model declares hash<O, T, D, M>: a program may still call its constants T and M."""
    from p4switch.tests.frontend.conftest import TEMPLATE

    src = "const bit<8> T = 5;\nconst bit<8> M = 7;\n" + TEMPLATE.replace(
        "{BODY}", "    apply { meta.m8 = T + M; }"
    )
    assert assigns(block(compile_text(src).ir, "I")["body"]) == [("meta.m8", 12)]
