"""Loading programs: what the engine refuses (with the source position) and the switch lock."""

from __future__ import annotations

import json
import threading

import pytest

from p4switch.engine import loader
from p4switch.engine.api import (
    ActionCall,
    EntryNotFound,
    Exact,
    InvalidEntry,
    ProgramError,
    TableEntry,
    UnknownName,
)
from p4switch.engine.switch import V1Switch
from p4switch.tests.engine.irbuild import (
    PROGRAMS,
    assign,
    call,
    const,
    extract,
    goto,
    hdr,
    member,
    program,
    sm,
    state,
    var,
)
from p4switch.tests.engine.router import router_ir

START = [state("start", [], goto("accept"))]
SM_VAR = var("standard_metadata", {"k": "struct", "name": "standard_metadata_t"})


def test_not_ir_json_is_refused() -> None:
    with pytest.raises(ProgramError, match="not valid JSON"):
        loader.load(b"{nope")
    with pytest.raises(ProgramError, match="format"):
        loader.load(json.dumps({"format": "bmv2"}))
    with pytest.raises(ProgramError, match="version 2"):
        loader.load(json.dumps({"format": "p4switch-ir", "version": 2}))


@pytest.mark.parametrize("fn", ["resubmit", "recirculate"])
def test_resubmit_and_recirculate_are_refused_with_their_position(fn: str) -> None:
    stmt = call(fn, [SM_VAR])
    stmt["src"] = "prog.p4:12:9"
    with pytest.raises(ProgramError, match=f"prog.p4:12:9: {fn} is not supported by p4switch"):
        loader.load(json.dumps(program({}, [], START, [stmt])))


def test_custom_crc_hash_is_refused() -> None:
    result = {
        "op": "member",
        "expr": var("meta", {"k": "struct", "name": "metadata_t"}),
        "field": "h",
        "type": {"k": "bit", "w": 16},
    }
    stmt = call(
        "hash",
        [result, const(0, {"k": "bit", "w": 16}), const(0, {"k": "bit", "w": 32})],
        algorithm="crc16_custom",
        data=[],
    )
    with pytest.raises(ProgramError, match="crc16_custom is not supported by p4switch"):
        loader.load(json.dumps(program({}, [], START, [stmt], metadata=[("h", {"k": "bit", "w": 16})])))


def test_table_writes_while_packets_flow_never_half_apply() -> None:
    """The runtime writes from gRPC threads while the packet thread runs: the lock keeps every lookup
    consistent (a frame is either forwarded by the entry or dropped by the default, nothing else)."""
    switch = loader.load((PROGRAMS / "l2fwd.json").read_bytes())
    entry = TableEntry({"hdr.ethernet.dst_addr": Exact(2)}, ActionCall("L2Ingress.forward", {"port": 4}))
    frame = bytes.fromhex("0000000000020000000000010800") + bytes(50)
    stop = threading.Event()
    outcomes: set[tuple[int, ...]] = set()

    def packets() -> None:
        while not stop.is_set():
            outcomes.add(tuple(port for port, _ in switch.process(1, frame)))

    worker = threading.Thread(target=packets)
    worker.start()
    try:
        for _ in range(300):
            switch.table_insert("L2Ingress.dmac", entry)
            switch.table_delete("L2Ingress.dmac", entry)
    finally:
        stop.set()
        worker.join()
    assert outcomes <= {(4,), ()}
    assert "internal_error" not in switch.stats


def test_one_entry_is_read_by_its_key() -> None:
    switch = loader.load((PROGRAMS / "l2fwd.json").read_bytes())
    for mac in range(1, 200):
        switch.table_insert("L2Ingress.dmac", TableEntry({"hdr.ethernet.dst_addr": Exact(mac)},
                                                          ActionCall("L2Ingress.forward", {"port": mac % 7})))
    key = TableEntry({"hdr.ethernet.dst_addr": Exact(100)}, ActionCall("NoAction"))
    assert switch.table_entry("L2Ingress.dmac", key).action == ActionCall("L2Ingress.forward", {"port": 2})
    switch.table_delete("L2Ingress.dmac", key)
    with pytest.raises(EntryNotFound):
        switch.table_entry("L2Ingress.dmac", key)
    with pytest.raises(InvalidEntry, match="mandatory"):
        switch.table_entry("L2Ingress.dmac", TableEntry({}, ActionCall("NoAction")))
    with pytest.raises(UnknownName):
        switch.table_entry("L2Ingress.nope", key)


def test_generated_source_is_kept_for_debugging() -> None:
    switch = loader.load(json.dumps(router_ir()))
    assert isinstance(switch, V1Switch) and "def PARSER_Parser" in switch.source


def test_p4_names_that_clash_with_python_or_generated_code_round_trip() -> None:
    fields = [("class", 8), ("copy", 8), ("pack", 8), ("x_", 8), ("x", 8), ("__y", 8), ("valid__", 8)]
    ir = program(
        {"odd_t": fields},
        [("odd", "odd_t")],
        [state("start", [extract("odd", "odd_t")], goto("accept"))],
        [
            assign(
                member(hdr("odd", "odd_t"), "copy", {"k": "bit", "w": 8}), const(0x42, {"k": "bit", "w": 8})
            ),
            assign(sm("egress_spec", 9), const(3, {"k": "bit", "w": 9})),
        ],
    )
    switch = loader.load(json.dumps(ir))
    assert switch.process(0, bytes([1, 2, 3, 4, 5, 6, 7, 8])) == [(3, bytes([1, 0x42, 3, 4, 5, 6, 7, 8]))]


def test_a_header_made_valid_in_ingress_starts_zeroed_and_invalid_ones_are_not_emitted() -> None:
    fields = [("f1", 8), ("f2", 8)]
    ingress = [
        {"s": "set_valid", "header": hdr("b", "b_t"), "src": "t:1:1"},
        assign(member(hdr("b", "b_t"), "f2", {"k": "bit", "w": 8}), const(7, {"k": "bit", "w": 8})),
        {"s": "set_invalid", "header": hdr("a", "a_t"), "src": "t:2:1"},
        assign(sm("egress_spec", 9), const(1, {"k": "bit", "w": 9})),
    ]
    ir = program(
        {"a_t": fields, "b_t": fields},
        [("a", "a_t"), ("b", "b_t")],
        [state("start", [extract("a", "a_t")], goto("accept"))],
        ingress,
    )
    switch = loader.load(json.dumps(ir))
    assert switch.process(0, bytes([9, 9, 5])) == [(1, bytes([0, 7, 5]))]
