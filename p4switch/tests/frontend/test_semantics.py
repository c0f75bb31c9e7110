"""Lowerings the front end does itself (unrolled stacks, inlining, value switches, lookahead fields), checked
by running packets through the engine: what goes out is what the P4 source means."""

from __future__ import annotations

import struct
from collections.abc import Callable

from p4switch.engine import loader
from p4switch.engine.api import ActionCall, Exact, Switch, TableEntry
from p4switch.frontend.cli import Compiled, compile_file
from p4switch.frontend.errors import P4Error
from p4switch.tests.frontend.conftest import PROGRAMS, TEMPLATE

ETH = bytes.fromhex("020000000002020000000001")


def load(prog: Compiled) -> Switch:
    return loader.load(prog.ir_json().encode())


def test_source_routing_pops_one_hop_per_switch() -> None:
    switch = load(compile_file(PROGRAMS / "source_routing.p4"))
    hops = struct.pack(">HH", 0x0002, 0x8003)  # port 2, then port 3 with bottom-of-stack
    (out,) = switch.process(1, ETH + b"\x12\x34" + hops + b"DATA")
    assert out == (2, ETH + b"\x12\x34" + struct.pack(">H", 0x8003) + b"DATA")
    too_deep = b"".join(struct.pack(">H", port) for port in (1, 2, 3, 4))
    switch.process(1, ETH + b"\x12\x34" + too_deep)
    assert switch.stats["parser_error:StackOutOfBounds"] == 1


def test_calculator_reads_lookahead_fields_and_const_entries() -> None:
    switch = load(compile_file(PROGRAMS / "calc_lookahead.p4"))

    def calc(op: int, a: int, b: int) -> list[tuple[int, bytes]]:
        return switch.process(
            4, ETH + b"\x12\x34" + bytes([0x50, 0x34, 0x01, op]) + struct.pack(">III", a, b, 0)
        )

    assert [(port, struct.unpack(">I", frame[-4:])[0]) for port, frame in calc(0x2B, 7, 5)] == [(4, 12)]
    assert [(port, struct.unpack(">I", frame[-4:])[0]) for port, frame in calc(0x2D, 5, 7)] == [
        (4, 2**32 - 2)
    ]
    assert calc(0x2A, 1, 1) == []  # no entry: const default drop


def test_inlined_inout_action_and_value_switch(compile_text: Callable[..., Compiled]) -> None:
    body = """    action swap(inout bit<48> a, inout bit<48> b) { bit<48> t = a; a = b; b = t; }
    action to_port(bit<9> port) { sm.egress_spec = port; }
    table ports { key = { hdr.eth.type_: exact; } actions = { to_port; } }
    apply {
        swap(hdr.eth.dst, hdr.eth.src);
        switch (hdr.eth.type_) {
            0x0800: 0x86dd: { sm.egress_spec = 1; }
            0x1234: { ports.apply(); }
            default: { mark_to_drop(sm); }
        }
    }"""
    switch = load(compile_text(TEMPLATE.replace("{BODY}", body)))
    switch.table_insert(
        "I.ports",
        TableEntry(match={"hdr.eth.type_": Exact(0x1234)}, action=ActionCall("I.to_port", {"port": 7})),
    )
    swapped = ETH[6:] + ETH[:6]
    for ether_type, port in ((0x0800, 1), (0x86DD, 1), (0x1234, 7)):
        frame = ETH + ether_type.to_bytes(2, "big") + b"payload"
        assert switch.process(0, frame) == [(port, swapped + frame[12:])]
    assert switch.process(0, ETH + b"\x99\x99payload") == []


def test_functions_are_inlined_with_their_values() -> None:
    switch = load(compile_file(PROGRAMS / "functions.p4"))
    ((port, frame),) = switch.process(1, ETH + b"\x12\x34" + b"payload")
    # type_ = add3(0x1234, 2) + 100 = 0x1234 * 2 + 2 + 1 + 100; twice(type_) > 5 sends it to port 3
    assert (port, frame[12:14]) == (3, (0x1234 * 2 + 103).to_bytes(2, "big"))
    switch.process(1, ETH + b"\x12\x35" + b"payload")  # is_special() is false: the parser rejects
    assert switch.stats["parser_reject"] == 1


def test_a_parser_state_without_transition_rejects(compile_text: Callable[..., Compiled]) -> None:
    """P4_16 12.5: a state with no transition statement goes to reject (p4lang/tutorials' calc skeleton
    has one; p4c accepts it with a warning)."""
    parser = """    state start { pk.extract(hdr.eth); transition select(hdr.eth.type_) {
        0x1234: undecided; default: accept; } }
    state undecided { /* a TODO left empty */ }"""
    text = TEMPLATE.replace("    state start { pk.extract(hdr.eth); transition accept; }", parser)
    switch = load(compile_text(text.replace("{BODY}", "    apply { sm.egress_spec = 2; }")))
    assert [port for port, _ in switch.process(1, ETH + b"\x08\x00payload")] == [2]
    assert switch.stats.get("parser_reject", 0) == 0
    switch.process(1, ETH + b"\x12\x34payload")
    assert switch.stats["parser_reject"] == 1


ACCEPTED_AS_P4C = """#include <core.p4>
#include <v1model.p4>
#ifdef _V1_MODEL_P4_
const bool checked = static_assert(V1MODEL_VERSION >= 20180101, "v1model too old");
header eth_t { bit<48> dst; bit<48> src; bit<16> type_; }
struct headers_t { eth_t eth; }
struct meta_t { }
register<bit<16>>(4) seen;
parser P(packet_in pk, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    const bit<16> CUSTOM = 0x88b5;
    state start { pk.extract(hdr.eth); transition select(hdr.eth.type_) { CUSTOM: custom; default: plain; } }
    state custom { transition select() { default: accept; } }
    state plain { sm.egress_spec = 3; transition accept; }
}
control C(inout headers_t hdr, inout meta_t meta) { apply { } }
control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    const bit<16> SMALL = 0x0100;
    action to(bit<9> port) { sm.egress_spec = port; }
    table by_valid {
        key = { hdr.eth.isValid(): exact; hdr.eth.type_: exact; }
        actions = { to; }
        const entries = { (true, 0x88b5): to(2); (true, SMALL): to(4); }
    }
    table empty { key = { } actions = { } }
    apply {
        static_assert(true);
        empty.apply();
        by_valid.apply();
        seen.write(0, hdr.eth.type_);
    }
}
control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control D(packet_out pk, in headers_t hdr) { apply { pk.emit(hdr); } }
V1Switch(P(), C(), I(), E(), C(), D()) main;
#endif
"""


def test_constructs_p4c_accepts(compile_text: Callable[..., Compiled]) -> None:
    """p4c's include guards, static_assert, an empty select, constants of the parser and control in
    keysets and entries, true/false for validity keys, a table with no actions, a top-level register."""
    prog = compile_text(ACCEPTED_AS_P4C)
    switch = load(prog)
    assert switch.process(1, ETH + b"\x88\xb5")[0][0] == 2
    assert switch.process(1, ETH + b"\x01\x00")[0][0] == 4
    assert switch.register_read("seen", 0) == 0x0100
    assert [r.preamble.name for r in prog.p4info.registers] == ["seen"]
    empty = next(t for t in prog.ir["tables"] if t["name"] == "I.empty")
    assert empty["actions"] == [{"name": "NoAction", "scope": "default_only"}]


def test_a_failing_static_assert_stops_the_compile(compile_error: Callable[..., P4Error]) -> None:
    error = compile_error(TEMPLATE.replace("{BODY}", 'apply { static_assert(1 > 2, "one is not more"); }'))
    assert "static assertion failed: one is not more" in str(error)
