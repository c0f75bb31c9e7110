"""The native engine through the engine API: a program runs in C with its tables, counters, meters, registers
and parser value sets there; what it cannot run (or a machine without a C compiler) runs on the Python engine
with the reason said once; hostile frames take PacketTooShort; digests, log_msg, assertions and random() reach
Python as the Python engine gives them."""

from __future__ import annotations

import logging
import random
from pathlib import Path

import pytest

from p4switch.conformance.driver import ManualClock
from p4switch.engine import loader, native
from p4switch.engine.api import ActionCall, Exact, InvalidEntry, MeterConfig, TableEntry
from p4switch.frontend.cli import compile_file
from p4switch.native import build
from p4switch.native.fuzz import default_seeds

TESTS = Path(__file__).resolve().parents[1]
COUNTERS = TESTS / "conformance" / "counters_meters.p4"
VALUE_SETS = TESTS / "conformance" / "value_sets.p4"

PROGRAM = """
#include <core.p4>
#include <v1model.p4>
header eth_t { bit<48> dst; bit<48> src; bit<16> type; }
header wide_t { bit<%(wide)d> value; }
struct headers_t { eth_t eth; wide_t wide; }
struct learn_t { bit<48> src; int<8> delta; bit<1> flag; }
struct meta_t { learn_t learn; bit<16> draw; int<8> delta; }
parser P(packet_in packet, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { packet.extract(hdr.eth); packet.extract(hdr.wide); transition accept; }
}
control V(inout headers_t hdr, inout meta_t meta) { apply { } }
control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        meta.delta = (int<8>)hdr.eth.type[7:0] - 8s3;
        meta.learn.src = hdr.eth.src;
        meta.learn.delta = meta.delta;
        meta.learn.flag = hdr.eth.type == 16w0x1234 ? 1w1 : 1w0;
        digest<learn_t>(1, meta.learn);
        log_msg("delta {} type {}", { meta.delta, hdr.eth.type });
        assert(hdr.eth.type != 16w0xdead);
        random(meta.draw, 16w10, 16w1000);
        hdr.eth.type = meta.draw;
        sm.egress_spec = 2;
    }
}
control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control C(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out packet, in headers_t hdr) { apply { packet.emit(hdr.eth); packet.emit(hdr.wide); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"""


def compiled(tmp_path: Path, wide: int) -> str:
    source = tmp_path / f"events{wide}.p4"
    source.write_text(PROGRAM % {"wide": wide})
    return compile_file(source).ir_json()


def eth(ether_type: int, src: int = 0x0200000000AA) -> bytes:
    return bytes(6) + src.to_bytes(6, "big") + ether_type.to_bytes(2, "big") + bytes(range(16)) + b"payload"


def test_a_program_runs_in_c_with_its_counters_meters_and_registers_there() -> None:
    clock = ManualClock()
    switch = loader.load(compile_file(COUNTERS).ir_json(), clock=clock, engine="native")
    assert switch.engine == "native" and switch.engine_note is None
    assert '#include "np_switch.h"' in str(getattr(switch, "source", ""))
    dst = 0x0200000000B2
    switch.table_insert("CountIngress.t_count", TableEntry({"hdr.ethernet.dst": Exact(dst)},
                                                           ActionCall("CountIngress.counted")))
    switch.meter_set("CountIngress.m", 0, MeterConfig(1, 1, 2, 2))
    frame = dst.to_bytes(6, "big") + bytes(6) + b"\x88\xb5" + bytes(4) + b"tail"
    colors = [switch.process(3, frame)[0][1][14] for _ in range(4)]
    assert colors == [0, 1, 2, 2]  # two-rate three-colour: GREEN, then YELLOW, then RED, no time passes
    assert switch.counter_read("CountIngress.port_counter", 3) == (4 * len(frame), 4)
    assert switch.register_read("CountIngress.reg", 0) == 4
    (entry,) = switch.table_entries("CountIngress.t_count")
    assert entry.counter_data == (4 * len(frame), 4)  # the direct counter, read from C
    switch.counter_write("CountIngress.port_counter", 3, 7, 1)
    switch.register_write("CountIngress.reg", 0, 0x1FFFF)  # reduced to the register's 16 bits
    assert switch.counter_read("CountIngress.port_counter", 3) == (7, 1)
    assert switch.register_read("CountIngress.reg", 0) == 0xFFFF
    ((_, out),) = switch.process(3, frame)
    assert out[16:18] == b"\x00\x00"  # 0xffff + 1 wraps in the packet's bit<16>
    assert switch.stats == {"rx": 5, "tx": 5}


def test_parser_value_set_members_live_in_c() -> None:
    switch = loader.load(compile_file(VALUE_SETS).ir_json(), engine="native")
    assert isinstance(switch, native.NativeSwitch)
    frame = bytes.fromhex("77005001") + bytes(14)  # kind 0x77, port 0x50, tag 1
    assert switch.process(0, frame)[0][1][0] == 0  # the empty sets match nothing
    switch.value_set_set("VsParser.ports", [(0x50,), (0x1BB,), (0x50,)])  # a repeated member is kept once
    switch.value_set_set("VsParser.pairs", [(0x77, 0x01)])
    words = switch.ffi.new("uint64_t[]", 8)
    index = switch.native.gen.value_sets["VsParser.ports"]
    assert switch.lib.np_value_set_get(switch.native.sw, index, words, 4) == 2
    assert sorted([(words[0], words[1]), (words[2], words[3])]) == [(0x50, 0), (0x1BB, 0)]  # low, high
    assert switch.value_set_get("VsParser.ports") == [(0x50,), (0x1BB,)]
    assert switch.process(0, frame)[0][1][0] == 3  # in both sets: the port and the (kind, tag) pair
    with pytest.raises(InvalidEntry, match="at most 2"):
        switch.value_set_set("VsParser.pairs", [(1, 2), (3, 4), (5, 6)])
    assert switch.value_set_get("VsParser.pairs") == [(0x77, 0x01)]  # refused: C keeps what it had
    switch.value_set_set("VsParser.ports", [])
    assert switch.process(0, frame)[0][1][0] == 2


def test_what_the_c_back_end_lacks_runs_on_python_with_the_reason_logged_once(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    ir_json = compiled(tmp_path, 160)  # a 160-bit field: wider than the C back end's values
    caplog.set_level(logging.WARNING, logger="p4switch.engine")
    switches = [loader.load(ir_json, engine="native") for _ in range(2)]
    assert all(s.engine == "python" for s in switches)
    assert "wider than 128 bits" in str(switches[0].engine_note)
    assert [r.getMessage() for r in caplog.records].count(str(switches[0].engine_note)) == 1
    ((port, out),) = switches[0].process(1, eth(0x0800) + bytes(4))
    assert port == 2 and out[:12] == eth(0x0800)[:12]


def test_without_a_c_compiler_the_python_engine_runs_and_says_why(monkeypatch: pytest.MonkeyPatch,
                                                                  tmp_path: Path) -> None:
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    monkeypatch.setenv("P4SWITCH_CACHE", str(tmp_path / "cache"))
    build.toolchain.cache_clear()
    try:
        switch = loader.load(compile_file(COUNTERS).ir_json(), engine="native")
    finally:
        build.toolchain.cache_clear()
    assert switch.engine == "python"
    assert "no C compiler found" in str(switch.engine_note)
    assert switch.process(1, bytes(18))


def test_hostile_frames_take_packet_too_short_as_on_the_python_engine() -> None:
    ir_json = compile_file(TESTS.parents[1] / "p4src" / "main.p4").ir_json()
    engines = [loader.load(ir_json, engine=e) for e in ("python", "native")]
    assert engines[1].engine == "native"
    roce = default_seeds()[0]
    for cut in range(len(roce) + 1):  # every prefix of a RoCEv2 frame, and a jumbo frame
        frame = roce[:cut]
        assert engines[0].process(1, frame) == engines[1].process(1, frame)
    jumbo = roce + bytes(9000)
    assert engines[0].process(1, jumbo) == engines[1].process(1, jumbo)
    stats = engines[1].stats
    assert stats["parser_error:PacketTooShort"] > 10 and "internal_error" not in stats
    assert stats == {k: v for k, v in engines[0].stats.items() if v}


class Lines(logging.Handler):
    """Every message of the logger it is the only handler of: the test reads its own loggers whatever an
    earlier test of the suite did to the "p4switch" logger (the CLI's logs.setup stops propagation there)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def test_digests_log_lines_assertions_and_random_match_the_python_engine(tmp_path: Path) -> None:
    ir_json = compiled(tmp_path, 128)  # the widest values the C back end takes
    runs = {}
    for engine in ("python", "native"):
        log, sink = logging.getLogger(f"p4switch.test.events.{engine}"), Lines()
        log.handlers[:], log.propagate = [sink], False
        log.setLevel(logging.INFO)
        switch = loader.load(ir_json, log=log, rng=random.Random(7), engine=engine)
        assert switch.engine == engine
        digests: list[tuple[str, list[tuple[str, int]]]] = []
        switch.digest_sink = lambda name, fields, d=digests: d.append((name, fields))
        outs = [switch.process(1, eth(t) + bytes(16)) for t in (0x0800, 0x1234, 0xDE01, 0xDEAD)]
        runs[engine] = (outs, digests, sink.lines, switch.stats)
    assert runs["python"] == runs["native"]
    outs, digests, lines, stats = runs["native"]
    assert digests[1] == ("learn_t", [("src", 0x0200000000AA), ("delta", 0x31), ("flag", 1)])
    assert digests[2][1][1] == ("delta", -2)  # int<8> 0x01 - 3
    assert "log_msg: delta -2 type 56833" in lines
    assert any(line.startswith("assertion failed at") for line in lines) and stats["assert_failed"] == 1
    draws = [int.from_bytes(o[0][1][12:14], "big") for o in outs]
    assert all(10 <= d <= 1000 for d in draws) and len(set(draws)) > 1


def test_a_compiled_program_is_taken_from_the_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("P4SWITCH_CACHE", str(tmp_path))
    program = compile_file(COUNTERS).ir_json()
    loader.load(program, engine="native")
    libraries = sorted(tmp_path.glob("np_prog-*.so"))
    assert len(libraries) == 1
    before = libraries[0].stat().st_mtime_ns
    native._libraries.clear()
    loader.load(program, engine="native")
    assert sorted(tmp_path.glob("np_prog-*.so")) == libraries and libraries[0].stat().st_mtime_ns == before
