"""The v1model pipeline end to end through Switch.process(): parsing and parser errors, checksums,
lpm forwarding, multicast with egress_rid, I2E clones with truncation, digests, counters, registers,
meters and the TRACE log."""

from __future__ import annotations

import json
import logging

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from p4switch.engine import loader
from p4switch.engine.api import (
    TRACE,
    ActionCall,
    Lpm,
    MeterConfig,
    Switch,
    TableEntry,
    UnknownName,
)
from p4switch.tests.engine.router import LEARN_ETHER_TYPE, router_ir

ROUTES = "Ingress.routes"


class FakeClock:
    def __init__(self) -> None:
        self.now = 10.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def router(clock: FakeClock) -> Switch:
    sw = loader.load(json.dumps(router_ir()), clock=clock)
    sw.table_insert(
        ROUTES, TableEntry({"hdr.ipv4.dst": Lpm(0x0A000000, 8)}, ActionCall("Ingress.set_port", {"port": 2}))
    )
    sw.table_insert(
        ROUTES, TableEntry({"hdr.ipv4.dst": Lpm(0x0A010000, 16)}, ActionCall("Ingress.set_port", {"port": 3}))
    )
    return sw


def frame(dst: str = "10.1.2.3", ttl: int = 64, version: int = 4) -> bytes:
    pkt = Ether(dst="00:00:00:00:00:02", src="00:00:00:00:00:01") / IP(
        src="192.168.0.1", dst=dst, ttl=ttl, version=version
    )
    return bytes(pkt / UDP(sport=1234, dport=4791) / (b"x" * 20))


def test_routes_longest_prefix_decrements_ttl_and_fixes_checksum(router: Switch) -> None:
    ((port, out),) = router.process(1, frame("10.1.2.3"))
    assert port == 3
    ip = Ether(out)[IP]
    assert ip.ttl == 63
    expected = IP(bytes(ip))
    del expected.chksum
    assert ip.chksum == IP(bytes(expected)).chksum
    assert router.process(1, frame("10.9.9.9"))[0][0] == 2
    assert router.process(1, frame("11.0.0.1")) == []  # default action drop
    assert router.direct_counter_read(
        ROUTES, TableEntry({"hdr.ipv4.dst": Lpm(0x0A010000, 16)}, ActionCall("Ingress.set_port", {"port": 3}))
    ) == (len(frame()), 1)
    assert router.counter_read("Ingress.port_pkts", 1)[1] == 3
    assert router.register_read("Ingress.last_ttl", 1) == 63
    assert router.stats["rx"] == 3 and router.stats["tx"] == 2 and router.stats["dropped"] == 1


def test_bad_checksum_sets_checksum_error(router: Switch) -> None:
    bad = bytearray(frame())
    bad[24] ^= 0xFF  # IPv4 header checksum
    assert router.process(1, bytes(bad)) == []


def test_parser_errors_are_counted_and_the_packet_still_reaches_ingress(router: Switch) -> None:
    # ipv4 too short: ethernet is valid, ipv4 is not, so no route applies and egress_spec stays 0;
    # the unparsed bytes go out again as payload
    short = frame()[:20]
    assert router.process(1, short) == [(0, short)]
    assert router.stats["parser_error:PacketTooShort"] == 1
    # verify() fails after the extract: the header stays valid, as in BMv2
    assert [p for p, _ in router.process(1, frame(version=6))] == [3]
    assert router.stats["parser_error:BadVersion"] == 1
    other = bytes(Ether(dst="00:00:00:00:00:02", type=0x1234) / (b"y" * 30))
    assert router.process(1, other) == [(0, other)]
    assert router.stats["parser_error:NoMatch"] == 1
    for ether_type in (0x88B5, 0x9ABC):  # the mask and the range case accept
        router.process(1, bytes(Ether(type=ether_type) / (b"y" * 30)))
    assert router.stats["parser_error:NoMatch"] == 1


def test_multicast_copies_carry_their_egress_rid(router: Switch) -> None:
    router.table_insert(
        ROUTES, TableEntry({"hdr.ipv4.dst": Lpm(0xE0000000, 4)}, ActionCall("Ingress.flood", {"group": 7}))
    )
    router.mcast_group_set(7, [(4, 0), (5, 0x11), (6, 0x22)])
    out = router.process(1, frame("224.0.0.9"))
    assert [p for p, _ in out] == [4, 5, 6]
    assert [Ether(f).src for _, f in out] == ["00:00:00:00:00:01", "00:00:00:00:00:11", "00:00:00:00:00:22"]
    assert all(Ether(f)[IP].ttl == 63 for _, f in out)


def test_ingress_clone_is_the_received_packet_truncated(router: Switch) -> None:
    router.table_insert(
        ROUTES,
        TableEntry(
            {"hdr.ipv4.dst": Lpm(0xC0000000, 8)}, ActionCall("Ingress.mirror", {"port": 2, "session": 5})
        ),
    )
    router.clone_session_set(5, [(9, 0)], packet_length_bytes=30)
    original = frame("192.0.0.1")
    out = dict(router.process(1, original))
    assert set(out) == {2, 9}
    assert Ether(out[2])[IP].ttl == 63
    clone = out[9]
    assert len(clone) == 30
    assert clone[12:14] == b"\xcc\xcc"  # egress saw instance_type INGRESS_CLONE
    assert clone[14:30] == original[14:30]  # as received: ttl not decremented


def test_digest_reaches_the_sink(router: Switch) -> None:
    got: list[tuple[str, list[tuple[str, int]]]] = []
    router.digest_sink = lambda name, fields: got.append((name, fields))
    learn = Ether(src="00:00:00:00:aa:bb", dst="ff:ff:ff:ff:ff:ff", type=LEARN_ETHER_TYPE) / (b"z" * 40)
    assert router.process(3, bytes(learn)) == []
    assert got == [("learn_t", [("src", 0xAABB), ("port", 3)])]
    assert router.stats["digest"] == 1


def test_meter_drops_red_packets_until_tokens_refill(router: Switch, clock: FakeClock) -> None:
    router.meter_set("Ingress.port_meter", 1, MeterConfig(cir=1, cburst=1, pir=2, pburst=2))
    sent = [len(router.process(1, frame())) for _ in range(4)]
    assert sent == [1, 1, 0, 0]  # green, yellow, red, red
    clock.now += 1.0
    assert len(router.process(1, frame())) == 1


def test_trace_log_shows_parser_tables_actions_and_decision(
    router: Switch, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(TRACE, logger="p4switch.engine"):
        router.process(1, frame("10.1.2.3"))
    text = caplog.text
    for expected in (
        "parser: state start",
        "extracted hdr.ipv4",
        "table Ingress.routes: hit hdr.ipv4.dst:0xa010000/16 -> Ingress.set_port(port:0x3)",
        "action Ingress.set_port(port:0x3)",
        "egress decision: unicast port 3",
    ):
        assert expected in text
    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger="p4switch.engine"):
        router.process(1, frame())
    assert "parser" not in caplog.text


def test_unknown_names_raise(router: Switch) -> None:
    with pytest.raises(UnknownName):
        router.table_entries("Ingress.nope")
    with pytest.raises(UnknownName):
        router.counter_read("nope", 0)
