"""p4switch.bmv2json on BMv2 JSON written here (bmv2doc.py and data/): each construct loaded and run
through the engine, packets in and out; and what it refuses, named with where."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from p4switch import bmv2json, program
from p4switch.bmv2json.parsers import split
from p4switch.engine import api as engine
from p4switch.engine.api import ActionCall, Exact, Switch, TableEntry
from p4switch.engine.externs import HASH_ALGORITHMS
from p4switch.tests.bmv2json import bmv2doc as b

DATA = Path(__file__).parent / "data"
H_T = {"h_t": [["a", 8, False], ["b", 8, False], ["c", 16, False]]}


def load(doc: dict[str, Any]) -> Switch:
    return program.load(json.dumps(doc).encode(), logging.getLogger("test"))


def one_header(
    actions: list[Any], ingress: dict[str, Any], states: list[Any] | None = None, **more: Any
) -> Switch:
    """A program of one header h (a: 8, b: 8, c: 16 bits) extracted and emitted."""
    return load(
        b.program(
            more.pop("types", H_T),
            more.pop("headers", {"h": "h_t"}),
            states or [b.state("start", [b.extract("h")])],
            actions,
            ingress,
            more.pop("deparse", ["h"]),
            **more,
        )
    )


def sent(sw: Switch, data: bytes, port: int = 1) -> list[tuple[int, bytes]]:
    return sw.process(port, data + b"payload")


def test_hand_written_l2fwd_forwards_by_table_and_drops_the_rest() -> None:
    sw = program.load((DATA / "l2fwd.bmv2.json").read_bytes(), logging.getLogger("test"))
    dst = bytes.fromhex("02000000000b")
    sw.table_insert(
        "L2Ingress.dmac",
        TableEntry(
            {"hdr.ethernet.dst_addr": Exact(int(dst.hex(), 16))}, ActionCall("L2Ingress.forward", {"port": 3})
        ),
    )
    frame = dst + bytes(6) + b"\x08\x00" + b"data"
    assert sw.process(1, frame) == [(3, frame)]
    assert sw.process(1, bytes(6) + bytes(6) + b"\x08\x00") == []  # default action drop
    assert sw.process(1, b"short") == []  # ethernet invalid: tbl_drop


def test_arithmetic_is_bmv2s_unbounded_then_truncated_to_the_field() -> None:
    # c = (a + b) & 0xffff; a = two_comp_mod(a - b, 8) & 0xff (negative wraps); b = a ^ 0xff
    total = b.expr("&", b.expr("+", b.field("h", "a"), b.field("h", "b")), b.hexv(0xFFFF, 2))
    diff = b.expr(
        "&",
        b.expr("two_comp_mod", b.expr("-", b.field("h", "a"), b.field("h", "b")), b.hexv(8)),
        b.hexv(0xFF),
    )
    act = b.action(
        "ingress.calc",
        [
            b.assign(b.field("h", "c"), total),
            b.assign(b.field("h", "a"), diff),
            b.assign(b.field("h", "b"), b.expr("^", b.field("h", "a"), b.hexv(0xFF))),
            b.egress_spec(b.hexv(2, 2)),
        ],
    )
    sw = one_header([act], b.pipeline("tbl_calc", [b.run_action(0, "ingress.calc")]))
    assert sent(sw, bytes([3, 5, 0, 0])) == [(2, bytes([254, 1, 0, 8]) + b"payload")]


@pytest.mark.parametrize("op", ["resubmit", "recirculate"])
def test_resubmit_and_recirculate_keep_their_field_list(op: str) -> None:
    """n = n + 1, then again while n == 1 (with field list 1 = {n}), then h.a = n: the second pass sees
    the n the first one kept, so the packet leaves once with a = 2 (without the list it would loop)."""
    n = b.field("scalars", "meta_t.n")
    cond = b.expr("b2d", None, b.expr("==", n, b.hexv(1)))
    act = b.action(
        "ingress.again",
        [
            b.assign(n, b.expr("&", b.expr("+", n, b.hexv(1)), b.hexv(0xFF))),
            b.egress_spec(b.hexv(2, 2)),
            b.prim("_jump_if_zero", cond, b.hexv(4, 4)),
            b.prim(op, b.hexv(1)),
            b.assign(b.field("h", "a"), n),
        ],
    )
    pipeline = b.pipeline("tbl_again", [b.run_action(0, "ingress.again")])
    doc = b.program(H_T, {"h": "h_t"}, [b.state("start", [b.extract("h")])], [act],
                    b.pipeline(None, []) if op == "recirculate" else pipeline, ["h"],
                    metadata={"scalars": [["meta_t.n", 8, False]]})
    if op == "recirculate":
        doc["pipelines"][1] = {**pipeline, "name": "egress"}
    doc["field_lists"] = [{"id": 1, "name": "field_list1", "elements": [n]}]
    port = 0 if op == "recirculate" else 2  # egress_spec set in egress does not move the packet
    assert sent(load(doc), bytes([0, 0, 0, 0])) == [(port, bytes([2, 0, 0, 0]) + b"payload")]


def test_action_if_else_from_jumps() -> None:
    # if (h.a == 1) { egress 2 } else { egress 3 }; then b = 7 in both
    cond = b.expr("b2d", None, b.expr("==", b.field("h", "a"), b.hexv(1)))
    act = b.action(
        "ingress.pick",
        [
            b.prim("_jump_if_zero", cond, b.hexv(3, 4)),
            b.egress_spec(b.hexv(2, 2)),
            b.prim("_jump", b.hexv(4, 4)),
            b.egress_spec(b.hexv(3, 2)),
            b.assign(b.field("h", "b"), b.hexv(7)),
        ],
    )
    sw = one_header([act], b.pipeline("tbl_pick", [b.run_action(0, "ingress.pick")]))
    assert sent(sw, bytes([1, 0, 0, 0])) == [(2, bytes([1, 7, 0, 0]) + b"payload")]
    assert sent(sw, bytes([9, 0, 0, 0])) == [(3, bytes([9, 7, 0, 0]) + b"payload")]


def test_conditionals_and_hit_miss_and_action_run_make_one_structured_body() -> None:
    set_port = b.action("ingress.set_port", [b.egress_spec({"type": "runtime_data", "value": 0})], [("p", 9)])
    mark = b.action("ingress.mark", [b.assign(b.field("h", "b"), b.hexv(0x55))])
    other = b.action("ingress.other", [b.assign(b.field("h", "b"), b.hexv(0x66))])
    t = b.table(
        "ingress.t",
        [0, 1],
        ["ingress.set_port", "ingress.mark"],
        keys=[{"match_type": "exact", "name": "h.a", "target": ["h", "a"], "mask": None}],
        default=1,
        nexts={"ingress.set_port": "node_c", "ingress.mark": "tbl_other"},
    )
    cond = {
        "name": "node_c",
        "id": 0,
        "expression": b.expr("==", b.field("h", "c"), b.hexv(1, 2)),
        "true_next": "tbl_other",
        "false_next": None,
    }
    sw = one_header(
        [set_port, mark, other], b.pipeline("ingress.t", [t, b.run_action(2, "ingress.other")], [cond])
    )
    sw.table_insert("ingress.t", TableEntry({"h.a": Exact(1)}, ActionCall("ingress.set_port", {"p": 4})))
    assert sent(sw, bytes([1, 0, 0, 1])) == [(4, bytes([1, 0x66, 0, 1]) + b"payload")]  # hit, c == 1
    assert sent(sw, bytes([1, 0, 0, 2])) == [(4, bytes([1, 0, 0, 2]) + b"payload")]  # hit, c != 1
    assert sent(sw, bytes([2, 0, 0, 1])) == [(0, bytes([2, 0x66, 0, 1]) + b"payload")]  # miss: mark, other


def test_const_entries_keep_bmv2s_priority_order() -> None:
    """BMv2: the smallest priority number wins; p4switch: the largest. 0x0f/0x0f (prio 1) beats
    0x00/0x00 (prio 2)."""
    set_port = b.action("ingress.set_port", [b.egress_spec({"type": "runtime_data", "value": 0})], [("p", 9)])
    nothing = b.action("NoAction", [])
    entries = [
        {
            "match_key": [{"match_type": "ternary", "key": "0x00", "mask": "0x00"}],
            "action_entry": {"action_id": 0, "action_data": ["0x0005"]},
            "priority": 2,
        },
        {
            "match_key": [{"match_type": "ternary", "key": "0x0f", "mask": "0x0f"}],
            "action_entry": {"action_id": 0, "action_data": ["0x0006"]},
            "priority": 1,
        },
    ]
    t = b.table(
        "ingress.t",
        [0, 1],
        ["ingress.set_port", "NoAction"],
        default=1,
        entries=entries,
        match_type="ternary",
        keys=[{"match_type": "ternary", "name": "h.a", "target": ["h", "a"], "mask": None}],
    )
    sw = one_header([set_port, nothing], b.pipeline("ingress.t", [t]))
    assert [p for p, _ in sent(sw, bytes([0xFF, 0, 0, 0]))] == [6]
    assert [p for p, _ in sent(sw, bytes([0xF0, 0, 0, 0]))] == [5]
    with pytest.raises(engine.EngineError):  # const entries: the table is immutable, as in BMv2
        sw.table_insert(
            "ingress.t",
            TableEntry({"h.a": engine.Ternary(1, 1)}, ActionCall("ingress.set_port", {"p": 1}), 3),
        )


def stack_doc(parse_next: list[Any]) -> dict[str, Any]:
    """h (a, b, c) then a stack s of 2 (a, b, c) extracted while the last one's a is not 0."""
    doc = b.program(
        H_T,
        {"h": "h_t", "s[0]": "h_t", "s[1]": "h_t"},
        parse_next,
        [],
        b.pipeline(None, []),
        ["h", "s[0]", "s[1]"],
    )
    doc["header_stacks"] = [{"name": "s", "id": 0, "header_type": "h_t", "size": 2, "header_ids": [3, 4]}]
    return doc


def test_parser_stack_unrolled_by_position_with_masked_select_and_lookahead() -> None:
    states = [
        b.state(
            "start",
            [b.extract("h")],
            [{"type": "lookahead", "value": [0, 8]}],
            [b.case("0x80", "parse_s", "0x80"), b.case(None, None)],
        ),
        b.state(
            "parse_s",
            [b.extract("s", "stack")],
            [{"type": "stack_field", "value": ["s", "a"]}],
            [b.case("0x00", None), b.case(None, "parse_s")],
        ),
    ]
    doc = stack_doc(states)
    doc["actions"] = b.numbered(
        [b.action("ingress.out", [b.assign(b.field("s[0]", "b"), b.hexv(0x44)), b.egress_spec(b.hexv(1, 2))])]
    )
    doc["pipelines"][0].update(b.pipeline("tbl_out", [b.run_action(0, "ingress.out")]))
    sw = load(doc)
    h, s0, s1 = bytes([0, 1, 0, 0]), bytes([0x81, 2, 0, 0]), bytes([0, 3, 0, 0])
    assert sw.process(0, h + s0 + s1 + b"rest") == [(1, h + bytes([0x81, 0x44, 0, 0]) + s1 + b"rest")]
    assert sw.process(0, h + bytes([0x7F, 2, 0, 0])) == [(1, h + bytes([0x7F, 2, 0, 0]))]  # not a stack
    sw.process(0, h + s0 * 3)  # a third element: StackOutOfBounds
    assert sw.stats.get("parser_error:StackOutOfBounds") == 1


def test_stack_element_chosen_at_run_time_and_push() -> None:
    """s[h.a].b = 0x77 (dereference_header_stack of a field), then push_front(1)."""
    elem = b.expr("dereference_header_stack", {"type": "header_stack", "value": "s"}, b.field("h", "a"))
    doc = stack_doc([b.state("start", [b.extract("h"), b.extract("s", "stack"), b.extract("s", "stack")])])
    doc["actions"] = b.numbered(
        [
            b.action(
                "ingress.act",
                [
                    b.assign(b.expr("access_field", elem, 1), b.hexv(0x77)),
                    b.prim("push", {"type": "header_stack", "value": "s"}, b.hexv(1)),
                    b.egress_spec(b.hexv(1, 2)),
                ],
            )
        ]
    )
    doc["pipelines"][0].update(b.pipeline("tbl_act", [b.run_action(0, "ingress.act")]))
    sw = load(doc)
    s0, s1 = bytes([5, 5, 5, 5]), bytes([6, 6, 6, 6])
    assert sw.process(0, bytes([1, 0, 0, 0]) + s0 + s1) == [
        (1, bytes([1, 0, 0, 0]) + s0)
    ]  # s[1].b, pushed out
    assert sw.process(0, bytes([0, 0, 0, 0]) + s0 + s1) == [(1, bytes(4) + bytes([5, 0x77, 5, 5]))]
    assert sw.process(0, bytes([7, 0, 0, 0]) + s0 + s1) == [(1, bytes([7, 0, 0, 0]) + s0)]  # out of bounds


def test_union_member_made_valid_invalidates_its_siblings() -> None:
    types = {"h_t": H_T["h_t"], "g_t": [["x", 16, False]]}
    doc = b.program(
        types,
        {"h": "h_t", "u.h": "h_t", "u.g": "g_t"},
        [b.state("start", [b.extract("h"), b.extract("u.h")])],
        [],
        b.pipeline(None, []),
        ["h", "u.h", "u.g"],
    )
    doc["header_union_types"] = [{"name": "U", "id": 0, "headers": [["h", "h_t"], ["g", "g_t"]]}]
    doc["header_unions"] = [{"name": "u", "id": 0, "union_type": "U", "header_ids": [3, 4]}]
    valid_u = b.expr("valid_union", None, {"type": "header_union", "value": "u"})
    doc["actions"] = b.numbered(
        [
            b.action(
                "ingress.swap",
                [
                    b.prim("add_header", b.header("u.g")),
                    b.assign(b.field("u.g", "x"), b.hexv(0xABCD, 2)),
                    b.assign(b.field("h", "a"), b.expr("b2d", None, valid_u)),
                    b.egress_spec(b.hexv(1, 2)),
                ],
            )
        ]
    )
    doc["pipelines"][0].update(b.pipeline("tbl_swap", [b.run_action(0, "ingress.swap")]))
    sw = load(doc)
    assert sw.process(0, bytes(4) + bytes([1, 2, 3, 4])) == [(1, bytes([1, 0, 0, 0]) + b"\xab\xcd")]


def test_checksum_hash_counter_and_register() -> None:
    types = {"h_t": H_T["h_t"]}
    calc = {"name": "calc", "id": 0, "algo": "csum16", "input": [b.field("h", "a"), b.field("h", "b")]}
    hash_calc = {"name": "calc_0", "id": 1, "algo": "crc16", "input": [b.field("h", "a")]}
    act = b.action(
        "ingress.act",
        [
            b.prim(
                "modify_field_with_hash_based_offset",
                b.field("h", "b"),
                b.hexv(0),
                {"type": "calculation", "value": "calc_0"},
                b.hexv(256, 4),
            ),
            b.prim("count", {"type": "counter_array", "value": "ingress.cnt"}, b.hexv(1, 4)),
            b.prim(
                "register_write",
                {"type": "register_array", "value": "ingress.reg"},
                b.hexv(0, 4),
                b.field("h", "a"),
            ),
            b.egress_spec(b.hexv(1, 2)),
        ],
    )
    sw = load(
        b.program(
            types,
            {"h": "h_t"},
            [b.state("start", [b.extract("h")])],
            [act],
            b.pipeline("tbl_act", [b.run_action(0, "ingress.act")]),
            ["h"],
            calculations=[calc, hash_calc],
            checksums=[
                {
                    "name": "cksum",
                    "id": 0,
                    "target": ["h", "c"],
                    "type": "generic",
                    "calculation": "calc",
                    "verify": False,
                    "update": True,
                    "if_cond": None,
                }
            ],
            counter_arrays=[{"name": "ingress.cnt", "id": 0, "size": 4, "is_direct": False}],
            register_arrays=[{"name": "ingress.reg", "id": 0, "size": 2, "bitwidth": 8}],
        )
    )
    out = sw.process(0, bytes([0x12, 0, 0, 0]))
    b_value = HASH_ALGORITHMS["crc16"](b"\x12") % 256  # base 0 + crc16(h.a) % 256
    checksum = ~((0x12 << 8) | b_value) & 0xFFFF
    assert out == [(1, bytes([0x12, b_value]) + checksum.to_bytes(2, "big"))]
    assert sw.counter_read("ingress.cnt", 1)[1] == 1
    assert sw.register_read("ingress.reg", 0) == 0x12


@pytest.mark.parametrize(
    ("change", "construct", "where"),
    [
        (
            lambda d: d.update(
                extern_instances=[{"name": "x", "id": 0, "type": "my_extern", "attribute_values": []}]
            ),
            "extern my_extern",
            "extern_instances",
        ),
        (
            lambda d: (
                d["parsers"][0]["parse_states"][0]["transitions"].insert(
                    0, {"type": "parse_vset", "value": "pvs", "mask": "0x0f", "next_state": None}
                )
                or d["parsers"][0]["parse_states"][0].update(transition_key=[b.field("h", "a")])
                or d.update(parse_vsets=[{"name": "pvs", "id": 0, "compressed_bitwidth": 8}])
            ),
            "a value set transition with a mask",
            "parse_states (start)",
        ),
        (
            lambda d: d["header_types"][2].update(fields=[*H_T["h_t"], ["v", "*"]], max_length=8),
            "extract of a header with a varbit field by its length_exp",
            "parse_states (start).parser_ops[0]",
        ),
        (
            lambda d: (
                d["header_types"][2].update(fields=[*H_T["h_t"], ["v", "*"]], max_length=8)
                or d["parsers"][0]["parse_states"][0].update(parser_ops=[extract_vl("h", b.hexv(8))])
                or d["actions"][0]["primitives"].append(b.assign(b.field("h", "a"), b.field("h", "v")))
            ),
            "a varbit field used other than extracted, emitted or copied (assign_VL)",
            "actions (ingress.a)",
        ),
        (
            lambda d: d["actions"][0]["primitives"].append(
                b.prim("assign_union_stack", b.field("h", "a"), b.field("h", "b"), line=12)
            ),
            "header_union stack assignment",
            "t.p4:12:5",
        ),
        (
            lambda d: d["actions"][0]["primitives"].append(b.prim("_jump", b.hexv(0, 4), line=13)),
            "a _jump that is not the else of an if",
            "t.p4:13:5",
        ),
        (
            lambda d: d["actions"][0]["primitives"].append(b.prim("truncate", b.hexv(4, 4))),
            "truncate",
            "actions[0] (ingress.a).primitives[1]",
        ),
    ],
)
def test_unsupported_constructs_are_refused_naming_construct_and_where(
    change: Any, construct: str, where: str
) -> None:
    doc = b.program(
        H_T,
        {"h": "h_t"},
        [b.state("start", [b.extract("h")])],
        [b.action("ingress.a", [b.egress_spec(b.hexv(1, 2))])],
        b.pipeline("tbl_a", [b.run_action(0, "ingress.a")]),
        ["h"],
    )
    change(doc)
    with pytest.raises(bmv2json.Unsupported) as err:
        bmv2json.load(doc)
    assert err.value.construct == construct and where in err.value.where
    with pytest.raises(engine.ProgramError, match=f"BMv2 JSON: .*{construct.split()[0]}.* is not supported"):
        load(doc)


def test_not_v1model_and_malformed_documents_are_refused() -> None:
    doc = b.program(H_T, {"h": "h_t"}, [b.state("start", [b.extract("h")])], [], b.pipeline(None, []), ["h"])
    doc["headers"] = doc["headers"][:1] + doc["headers"][2:]
    with pytest.raises(engine.ProgramError, match="no standard_metadata instance"):
        load(doc)
    doc = b.program(
        H_T, {"h": "h_t"}, [b.state("start", [b.extract("nothing")])], [], b.pipeline(None, []), ["h"]
    )
    with pytest.raises(engine.ProgramError, match="unknown header instance 'nothing'"):
        load(doc)
    with pytest.raises(bmv2json.BMv2JsonError, match=r"BMv2 JSON version \[3, 0\]"):
        bmv2json.load({**doc, "__meta__": {"version": [3, 0]}})


def extract_vl(header: str, length: Any) -> dict[str, Any]:
    """extract_VL: ``header`` with its varbit field ``length`` bits long."""
    return {"op": "extract_VL", "parameters": [{"type": "regular", "value": header}, length]}


def test_varbit_extracted_with_its_length_copied_and_emitted_at_that_length() -> None:
    """varbit.p4's program laid out as p4c-bm2-ss does: v.opt (varbit<160>: v_t's max_length 22 bytes
    less its 16 fixed bits) extracted with l.bits, copied by assign_VL into the metadata instance
    `saved` (p4c's struct$varbit160 for a varbit struct member) and from there into w.opt; l, v, w
    emitted, each varbit at its current length."""
    types: dict[str, list[list[Any]]] = {
        "len_t": [["bits", 8, False]],
        "v_t": [["before", 8, False], ["opt", "*"], ["after", 8, False]],
        "w_t": [["tag", 8, False], ["opt", "*"]],
    }
    bits = b.field("l", "bits")
    doc = b.program(
        types,
        {"l": "len_t", "v": "v_t", "w": "w_t"},
        [b.state("start", [b.extract("l"), extract_vl("v", {"type": "expression", "value": bits})])],
        [
            b.action(
                "ingress.copy",
                [
                    b.prim("assign_VL", b.field("saved", "field"), b.field("v", "opt")),
                    b.prim("add_header", b.header("w")),
                    b.assign(b.field("w", "tag"), b.hexv(0xAA)),
                    b.prim("assign_VL", b.field("w", "opt"), b.field("saved", "field")),
                    b.egress_spec(b.hexv(1, 2)),
                ],
            )
        ],
        b.pipeline("tbl_copy", [b.run_action(0, "ingress.copy")]),
        ["l", "v", "w"],
    )
    doc["header_types"][3]["max_length"] = 22
    doc["header_types"][4]["max_length"] = 21
    doc["header_types"].append(
        {"name": "struct$varbit160", "id": 5, "fields": [["field", "*"]], "max_length": 20}
    )
    doc["headers"].append({"name": "saved", "id": 5, "header_type": "struct$varbit160", "metadata": True})
    sw = load(doc)
    payload = bytes(range(0xF0, 0xFE))
    # 16 bits of opt, then none
    assert sw.process(0, bytes.fromhex("10 01 1122 33") + payload) == [
        (1, bytes.fromhex("10 01 1122 33 aa 1122") + payload)
    ]
    assert sw.process(0, bytes.fromhex("00 01 33") + payload) == [(1, bytes.fromhex("00 01 33 aa") + payload)]
    # longer than varbit<160>, not whole bytes, past the end of the packet: v stays invalid and its
    # bytes stay payload; w gets the empty opt of the unextracted v
    for frame, error in (
        (bytes.fromhex("a8 01 1122334455 66"), "HeaderTooShort"),
        (bytes.fromhex("0c 01 1122 33"), "ParserInvalidArgument"),
        (bytes.fromhex("a0 01 1122"), "PacketTooShort"),
    ):
        assert sw.process(0, frame + payload) == [(1, frame[:1] + b"\xaa" + frame[1:] + payload)]
        assert sw.stats.get(f"parser_error:{error}") == 1


def test_value_sets_match_the_whole_key_and_take_their_members_from_the_control_plane() -> None:
    """ports (bit<16>, h.c) and pairs (two keys h.a, h.b: one field each, as p4c's P4Info lists the
    members of a struct value set); the parser marks which matched in scalars.flags, copied to h.c."""
    flags = b.field("scalars", "flags")

    def mark(bit: int) -> dict[str, Any]:
        return {"op": "set", "parameters": [flags, b.expr("|", flags, b.hexv(bit))]}

    def vset(name: str, next_state: str) -> dict[str, Any]:
        return {"type": "parse_vset", "value": name, "mask": None, "next_state": next_state}

    port_cases = [vset("p.ports", "in_ports"), b.case(None, "pairs")]
    pair_cases = [vset("p.pairs", "in_pairs"), b.case(None, None)]
    states = [
        b.state("start", [b.extract("h")], [b.field("h", "c")], port_cases),
        b.state("in_ports", [mark(1)], [], [b.case(None, "pairs")]),
        b.state("pairs", [], [b.field("h", "a"), b.field("h", "b")], pair_cases),
        b.state("in_pairs", [mark(2)]),
    ]
    sw = one_header(
        [b.action("ingress.out", [b.assign(b.field("h", "c"), flags), b.egress_spec(b.hexv(1, 2))])],
        b.pipeline("tbl_out", [b.run_action(0, "ingress.out")]),
        states,
        metadata={"scalars": [["flags", 8, False]]},
        parse_vsets=[
            {"name": "p.ports", "id": 0, "compressed_bitwidth": 16, "max_size": 2},
            {"name": "p.pairs", "id": 1, "compressed_bitwidth": 16},
        ],
    )
    assert sent(sw, bytes([0x77, 0x01, 0x00, 0x50])) == [(1, bytes([0x77, 0x01, 0, 0]) + b"payload")]
    sw.value_set_set("p.ports", [(0x50,), (0x1BB,)])
    sw.value_set_set("p.pairs", [(0x77, 0x01)])
    assert sent(sw, bytes([0x77, 0x01, 0x00, 0x50])) == [(1, bytes([0x77, 0x01, 0, 3]) + b"payload")]
    assert sent(sw, bytes([0x78, 0x01, 0x01, 0xBB])) == [(1, bytes([0x78, 0x01, 0, 1]) + b"payload")]
    assert sent(sw, bytes([0x77, 0x02, 0x00, 0x51])) == [(1, bytes([0x77, 0x02, 0, 0]) + b"payload")]
    with pytest.raises(engine.InvalidEntry, match="at most 2 members"):
        sw.value_set_set("p.ports", [(1,), (2,), (3,)])
    with pytest.raises(engine.InvalidEntry, match="does not fit"):
        sw.value_set_set("p.pairs", [(0x77,)])


def test_malformed_varbits_and_value_sets_are_refused() -> None:
    doc = b.program(H_T, {"h": "h_t"}, [b.state("start", [b.extract("h")])], [], b.pipeline(None, []), ["h"])
    doc["header_types"][2]["fields"].append(["v", "*"])
    with pytest.raises(bmv2json.BMv2JsonError, match=r"h_t\.v.*needs the header type's max_length"):
        bmv2json.load(doc)
    doc["header_types"][2]["max_length"] = 2  # less than the fixed 32 bits
    with pytest.raises(bmv2json.BMv2JsonError, match="at least its fixed 32 bits"):
        bmv2json.load(doc)
    start = b.state("start", [extract_vl("h", b.hexv(8))])
    doc = b.program(H_T, {"h": "h_t"}, [start], [], b.pipeline(None, []), ["h"])
    with pytest.raises(bmv2json.BMv2JsonError, match="extract_VL of a header without a variable-length"):
        bmv2json.load(doc)
    vset = {"type": "parse_vset", "value": "pvs", "mask": None, "next_state": None}
    start = b.state("start", [b.extract("h")], [b.field("h", "c")], [vset])
    doc = b.program(H_T, {"h": "h_t"}, [start], [], b.pipeline(None, []), ["h"])
    with pytest.raises(bmv2json.BMv2JsonError, match="unknown parse_vset 'pvs'"):
        bmv2json.load(doc)
    doc["parse_vsets"] = [{"name": "pvs", "id": 0, "compressed_bitwidth": 8}]
    with pytest.raises(bmv2json.BMv2JsonError, match="parse_vset pvs holds 8-bit values, the key has 16"):
        bmv2json.load(doc)


def test_select_values_are_split_per_byte_padded_key() -> None:
    assert split(0x0ABA03, [12, 2]) == [0xABA, 0x3]  # BMv2's own example
    assert split(0x01FF, [1, 8]) == [1, 0xFF]


def test_union_stack_extracts_the_next_element() -> None:
    """u.next.g then u.next.h: u[0].g and u[1].h, emitted in the deparser's order."""
    types = {"h_t": H_T["h_t"], "g_t": [["x", 16, False]]}
    names = {"u[0].h": "h_t", "u[0].g": "g_t", "u[1].h": "h_t", "u[1].g": "g_t"}
    ops = [{"op": "extract", "parameters": [{"type": "union_stack", "value": ["u", m]}]} for m in ("g", "h")]
    doc = b.program(
        types,
        names,
        [b.state("start", ops)],
        [b.action("ingress.out", [b.egress_spec(b.hexv(1, 2))])],
        b.pipeline("tbl_out", [b.run_action(0, "ingress.out")]),
        list(names),
    )
    doc["header_union_types"] = [{"name": "U", "id": 0, "headers": [["h", "h_t"], ["g", "g_t"]]}]
    doc["header_unions"] = [
        {"name": f"u[{i}]", "id": i, "union_type": "U", "header_ids": [2 + 2 * i, 3 + 2 * i]}
        for i in range(2)
    ]
    doc["header_union_stacks"] = [
        {"name": "u", "id": 0, "union_type": "U", "size": 2, "header_union_ids": [0, 1]}
    ]
    sw = load(doc)
    assert sw.process(0, b"\xab\xcd" + bytes([1, 2, 3, 4])) == [(1, bytes([0xAB, 0xCD, 1, 2, 3, 4]))]
    sw.process(0, b"\xab\xcd")  # the second element too short
    assert sw.stats.get("parser_error:PacketTooShort") == 1
