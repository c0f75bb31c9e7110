"""Bad input never crashes the engine: 130,000 random and mutated frames through the test programs
(p4switch/tests/programs, the engine's router) and p4src/main.p4 with the benchmark's entries; every
frame is counted, none raises."""

from __future__ import annotations

import json
import logging
import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from p4switch.engine import loader
from p4switch.engine.api import TRACE, ActionCall, Exact, Lpm, Switch, TableEntry
from p4switch.frontend.cli import compile_file
from p4switch.tests.engine.bench import main_p4_switch, rocev2_frame
from p4switch.tests.engine.irbuild import PROGRAMS
from p4switch.tests.engine.router import router_ir
from p4switch.tests.engine.test_engine_pipeline import frame


def mutated_frames(seeds: list[bytes], count: int, rng: random.Random) -> Iterator[bytes]:
    """Random garbage, truncations, bit flips, byte overwrites and extensions of valid frames."""
    for i in range(count):
        kind = i % 5
        base = bytearray(rng.choice(seeds))
        if kind == 0:
            yield rng.randbytes(rng.randrange(0, 160))
        elif kind == 1:
            yield bytes(base[: rng.randrange(0, len(base) + 1)])
        elif kind == 2:
            for _ in range(rng.randrange(1, 8)):
                base[rng.randrange(len(base))] ^= 1 << rng.randrange(8)
            yield bytes(base)
        elif kind == 3:
            at = rng.randrange(len(base))
            base[at : at + 4] = rng.randbytes(4)
            yield bytes(base[: rng.randrange(1, len(base) + 1)])
        else:
            yield bytes(base) + rng.randbytes(rng.randrange(0, 64))


def fuzz(switch: Switch, seeds: list[bytes], count: int, ports: tuple[int, ...] = tuple(range(8))) -> None:
    """``count`` frames through ``switch``, every one: bounded by the count, however slow the machine (how
    fast the engine is, is `make bench`'s to say)."""
    rng = random.Random(2024)
    for data in mutated_frames(seeds, count, rng):
        for port, out in switch.process(rng.choice(ports), data):
            assert 0 <= port < 512 and isinstance(out, bytes)
    assert switch.stats["rx"] == count
    assert "internal_error" not in switch.stats
    assert switch.stats.get("parser_error:PacketTooShort", 0) > 0


def test_fuzz_router_and_l2fwd_with_random_and_mutated_frames() -> None:
    router = loader.load(json.dumps(router_ir()))
    router.table_insert(
        "Ingress.routes",
        TableEntry({"hdr.ipv4.dst": Lpm(0, 1)}, ActionCall("Ingress.mirror", {"port": 1, "session": 1})),
    )
    router.table_insert(
        "Ingress.routes",
        TableEntry({"hdr.ipv4.dst": Lpm(0x80000000, 1)}, ActionCall("Ingress.flood", {"group": 1})),
    )
    router.clone_session_set(1, [(7, 0)], packet_length_bytes=40)
    router.mcast_group_set(1, [(2, 1), (3, 2)])
    seeds = [frame("10.0.0.1"), frame("200.1.1.1"), frame()[:34]]
    fuzz(router, seeds, 50_000)
    l2 = loader.load((PROGRAMS / "l2fwd.json").read_bytes())
    l2.table_insert(
        "L2Ingress.dmac",
        TableEntry({"hdr.ethernet.dst_addr": Exact(2)}, ActionCall("L2Ingress.forward", {"port": 1})),
    )
    fuzz(l2, seeds, 10_000)


@pytest.mark.parametrize("source", sorted(PROGRAMS.glob("*.p4")), ids=lambda p: p.stem)
def test_fuzz_every_test_program(source: Path) -> None:
    """The front end's test programs, with their declared defaults only."""
    switch = loader.load(compile_file(source).ir_json())
    seeds = [frame("10.0.0.1"), rocev2_frame(128), frame()[:30]]
    fuzz(switch, seeds, 10_000)


def test_fuzz_main_p4_with_mutated_rocev2_frames() -> None:
    switch = main_p4_switch()
    seeds = [rocev2_frame(128), rocev2_frame(300), b"\x00\x02" + rocev2_frame(100), frame()]
    fuzz(switch, seeds, 40_000, ports=(0, 1, 2, 255))


class FormattingHandler(logging.Handler):
    """Formats every record (as a file handler would), so a bad trace format string shows up."""

    def __init__(self) -> None:
        super().__init__(level=TRACE)
        self.lines = 0

    def emit(self, record: logging.LogRecord) -> None:
        record.getMessage()
        self.lines += 1


def test_fuzz_with_trace_logging_on() -> None:
    """Trace lines are formatted for every kind of frame without an internal error."""
    log = logging.getLogger("p4switch.test.fuzz_trace")
    log.propagate = False
    log.setLevel(TRACE)
    handler = FormattingHandler()
    log.addHandler(handler)
    try:
        switch = main_p4_switch()
        switch.log = log
        seeds = [rocev2_frame(128), b"\x00\x02" + rocev2_frame(100), frame()]
        fuzz(switch, seeds, 3_000, ports=(0, 1, 255))
        assert handler.lines > 3_000
    finally:
        log.removeHandler(handler)
