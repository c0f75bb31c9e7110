"""GID fields, MF bit positions (DESIGN section 2) and the host LID/GUID/MAC conventions."""

import ipaddress

import pytest
from hypothesis import given
from hypothesis import strategies as st
from ibsec import addressing as A
from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether


def test_mf_all_ones_touches_exactly_dst_addr_bits_117_to_80() -> None:
    marked = A.gid_to_int(A.mf_set(bytes(16), A.MF_MAX))
    bits = {i for i in range(128) if marked >> i & 1}
    assert bits == set(range(80, 118))


def test_mf_mask_in_bytes() -> None:
    # bits 117..80: low 6 bits of byte 1, bytes 2..5 fully, none of byte 6
    assert A.MF_MASK.to_bytes(16, "big").hex() == "003fffffffff" + "00" * 10


def test_make_gid_layout() -> None:
    gid = A.make_gid(0x1234, 0x0011223344556677)
    assert gid == "fec0::1234:11:2233:4455:6677"
    assert A.make_gid(1, 2, site_local=False) == "fe80:0:0:1::2"
    parts = A.parse_gid(gid)
    assert (parts.kind, parts.mf, parts.subnet, parts.guid) == (
        A.PrefixKind.SITE_LOCAL, 0, 0x1234, 0x0011223344556677)


def test_mf_set_on_text_bytes_and_packet_agree() -> None:
    gid = A.make_gid(7, A.host_guid(3))
    mf = 0x2A_BCDE_F012
    text = A.mf_set(gid, mf)
    raw = A.mf_set(ipaddress.IPv6Address(gid).packed, mf)
    pkt = A.mf_set(Ether() / IPv6(dst=gid) / UDP(), mf)
    assert ipaddress.IPv6Address(text).packed == raw
    assert pkt[IPv6].dst == text
    assert A.mf_get(text) == A.mf_get(raw) == A.mf_get(pkt) == mf
    assert A.parse_gid(text).subnet == 7 and A.parse_gid(text).guid == A.host_guid(3)
    assert A.mf_clear(text) == gid


def test_mf_set_leaves_original_packet_alone() -> None:
    pkt = IPv6(dst=A.make_gid(1, 1)) / UDP()
    A.mf_set(pkt, 5)
    assert A.mf_get(pkt) == 0


def test_mf_out_of_range_and_packet_without_ipv6() -> None:
    with pytest.raises(ValueError):
        A.mf_set(bytes(16), A.MF_MAX + 1)
    with pytest.raises(ValueError, match="IPv6"):
        A.mf_get(Ether())


@pytest.mark.parametrize("addr, markable", [
    ("fe80::1", True), ("febf:ffff::1", True), ("fec0::1", True), ("feff::1", True),
    ("fe7f::1", False), ("ff02::1", False), ("2001:db8::1", False), ("::1", False),
])
def test_is_markable(addr: str, markable: bool) -> None:
    assert A.is_markable(addr) is markable


def test_mask_mf_only_for_markable() -> None:
    other = A.mf_set("2001:db8::1", 9)
    assert A.mask_mf(ipaddress.IPv6Address(other).packed) == ipaddress.IPv6Address(other).packed
    marked = A.mf_set(A.make_gid(1, 2), 9)
    assert A.mask_mf(ipaddress.IPv6Address(marked).packed) == ipaddress.IPv6Address(
        A.make_gid(1, 2)).packed


@given(st.integers(0, (1 << 10) - 1), st.integers(0, A.MF_MAX), st.integers(0, 0xFFFF),
       st.integers(0, (1 << 64) - 1))
def test_gid_round_trip(prefix: int, mf: int, subnet: int, guid: int) -> None:
    gid = A.Gid(prefix, mf, subnet, guid)
    assert A.parse_gid(str(gid)) == gid
    assert A.parse_gid(gid.to_bytes()) == gid
    assert A.mf_get(str(gid)) == mf


def test_host_conventions() -> None:
    assert A.host_mac(5) == "02:00:00:00:00:05"
    assert A.host_guid(5) == 0x000000FFFE000005
    assert A.guid_to_mac(A.host_guid(0x123456)) == "02:00:00:12:34:56"
    assert A.mac_to_guid("00:02:c9:01:02:03") == 0x0202C9FFFE010203
    assert A.host_lid(0) == 1
    assert A.host_gid(5, 0x10) == "fec0::10:0:ff:fe00:5"
    with pytest.raises(ValueError):
        A.host_lid(0xBFFF)
    with pytest.raises(ValueError):
        A.guid_to_mac(0x0011223344556677)


def test_marking_a_frame_flips_only_the_mf_bits_of_the_destination() -> None:
    frame = Ether() / IPv6(src=A.host_gid(1, 7), dst=A.host_gid(2, 7)) / UDP(dport=4791, chksum=0)
    before = bytes(frame)
    after = bytes(A.mf_set(frame, A.MF_MAX))
    diff = int.from_bytes(before, "big") ^ int.from_bytes(after, "big")
    dst_lsb = 8 * (len(before) - (14 + 24 + 16))  # bit index of dst_addr[0] in the frame
    assert diff == A.MF_MASK << dst_lsb
