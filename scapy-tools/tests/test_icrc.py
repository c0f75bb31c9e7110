"""ICRC: equal to scapy.contrib.roce's on unmarked packets, blind to variant fields, strict on framing."""

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from ibsec import addressing, icrc, opcodes, rocev2
from scapy.contrib.roce import BTH
from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Dot1Q, Ether
from scapy.packet import Packet, Raw

SITE_SRC = addressing.host_gid(1, subnet=7)
SITE_DST = addressing.host_gid(2, subnet=7)
GLOBAL_DST = "2001:db8::2"


def _frame(dst: str = SITE_DST, opcode: int = 0x04, body: bytes = b"payload!", **ipv6: Any) -> Packet:
    return (Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")
            / IPv6(src=SITE_SRC, dst=dst, **ipv6)
            / UDP(sport=49152, dport=4791, chksum=0)
            / BTH(opcode=opcode, pkey=0x8001, dqpn=0x12, psn=0xABCDEF)
            / Raw(body))


@given(
    opcode=st.sampled_from(sorted(opcodes.OPCODES)),
    body=st.binary(min_size=0, max_size=300),
    tc=st.integers(0, 255), fl=st.integers(0, (1 << 20) - 1), hlim=st.integers(0, 255),
    markable=st.booleans(),
)
def test_unmarked_icrc_equals_scapy(
    opcode: int, body: bytes, tc: int, fl: int, hlim: int, markable: bool
) -> None:
    length = opcodes.header_length(opcode) - opcodes.BTH_LEN
    dst = SITE_DST if markable else GLOBAL_DST
    wire = bytes(_frame(dst, opcode, bytes(length) + body, tc=tc, fl=fl, hlim=hlim))
    assert icrc.compute(rocev2.locate(wire)) == wire[-4:]  # scapy's BTH.post_build wrote these
    assert icrc.verify(wire)


def test_vlan_tagged_frame() -> None:
    pkt = _frame()
    wire = bytes(Ether(src=pkt.src, dst=pkt.dst) / Dot1Q(vlan=5) / pkt[IPv6])
    assert rocev2.locate(wire).ip == 18
    assert icrc.verify(wire)


def _rewrite(pkt: Packet, **fields: int) -> bytes:
    """Change header fields of a built frame and keep its ICRC bytes (what a switch does)."""
    wire = bytes(pkt)
    changed = Ether(wire)
    for name, value in fields.items():
        layer = changed[BTH] if name in ("fecn", "becn", "resv6") else changed[IPv6]
        if name == "chksum":
            layer = changed[UDP]
        setattr(layer, name, value)
    changed[BTH].icrc = int.from_bytes(wire[-4:], "big")
    return bytes(changed)


@pytest.mark.parametrize("fields", [{"hlim": 1}, {"tc": 0xB8}, {"fl": 0xFFFFF}, {"fecn": 1, "becn": 1},
                                    {"resv6": 0x3F}, {"chksum": 0x1234}])
def test_variant_fields_do_not_change_the_icrc(fields: dict[str, int]) -> None:
    assert icrc.verify(_rewrite(_frame(), **fields))


def _marked(wire: bytes, mf: int) -> bytes:
    """The frame with MF set in its destination GID and its ICRC bytes untouched, as a switch marks it."""
    dst = 14 + 24
    return wire[:dst] + addressing.mf_set(wire[dst:dst + 16], mf) + wire[dst + 16:]


def test_mf_bits_are_variant_only_for_markable_destinations() -> None:
    for mf in (1, 0x2A_5555_5555, addressing.MF_MAX):
        assert icrc.verify(_marked(bytes(_frame()), mf))
    assert not icrc.verify(_marked(bytes(_frame(GLOBAL_DST)), 1))


def test_invariant_fields_change_the_icrc() -> None:
    wire = bytes(_frame())
    # source GID, UDP source port, P_Key, PSN, payload
    for offset in (14 + 8, 14 + 40, 14 + 48 + 2, 14 + 48 + 11, len(wire) - 5):
        tampered = bytearray(wire)
        tampered[offset] ^= 0x01
        assert not icrc.verify(bytes(tampered))
        assert icrc.verify(icrc.with_icrc(bytes(tampered)))


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda w: w[:12] + b"\x08\x00" + w[14:], "not IPv6"),
        (lambda w: w[:14 + 6] + b"\x06" + w[14 + 7:], "not UDP"),
        (lambda w: w[:14 + 42] + b"\x00\x01" + w[14 + 44:], "not RoCEv2"),
        (lambda w: w + b"\x00", "disagree"),
        (lambda w: w[:70], "too short"),
        (lambda w: w[:14 + 48] + b"\x15" + w[14 + 49:], "reserved"),
    ],
)
def test_malformed_frames_are_refused(mutate: Callable[[bytes], bytes], message: str) -> None:
    wire = mutate(bytes(_frame()))
    with pytest.raises(rocev2.Malformed, match=message):
        assert rocev2.locate(wire).headers_end


@pytest.mark.parametrize("opcode", [0x04, 0x0B, 0x64])
def test_icrc_continued_from_masked_headers_is_the_same(opcode: int) -> None:
    body = bytes(opcodes.header_length(opcode) - opcodes.BTH_LEN) + b"some payload"
    found = rocev2.locate(_marked(bytes(_frame(opcode=opcode, body=body)), 0x3F))
    headers = icrc.masked(found, found.headers_end)
    assert headers[:8] == b"\xff" * 8 and len(headers) == 8 + 40 + 8 + opcodes.header_length(opcode)
    assert icrc.compute(found, headers) == icrc.compute(found) == found.data[-4:]
