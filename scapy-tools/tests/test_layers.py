"""Scapy layers: round trips (hypothesis), dissection by the opcode table, STH and MAD binding, ICRC."""

from __future__ import annotations

import ipaddress
import struct
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ibsec import addressing, icrc, opcodes
from ibsec import layers as L
from ibsec.keys import Key, KeyType, unwrap_key, wrap_key
from scapy.contrib import roce
from scapy.fields import (
    BitEnumField,
    BitField,
    ConditionalField,
    Field,
    FieldLenField,
    FieldListField,
    IP6Field,
    MultipleTypeField,
    StrFixedLenField,
    TrailerField,
)
from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether
from scapy.packet import Packet, Raw

SRC_GID = addressing.host_gid(1, 0x10)
DST_GID = addressing.host_gid(2, 0x10)


def roce_frame(*upper: Packet, dst: str = DST_GID) -> Packet:
    """Ether / IPv6 / UDP 4791 / the given layers."""
    pkt: Packet = Ether(src=addressing.host_mac(1), dst=addressing.host_mac(2)) / IPv6(
        src=SRC_GID, dst=dst) / UDP(sport=49152)
    for layer in upper:
        pkt = pkt / layer
    return pkt


def reparse(pkt: Packet) -> Packet:
    return Ether(bytes(pkt))


def field_values(pkt: Packet, names: Any) -> dict[str, Any]:
    """Field values by name, GIDs as IPv6Address (scapy prints some as '::0.1.0.0')."""
    return {name: normalized(pkt.getfieldval(name)) for name in names}


def normalized(value: Any) -> Any:
    return ipaddress.IPv6Address(value) if isinstance(value, str) else value


# ------------------------------------------------------------------------------------------------
# Generic round trip: random values for every plain field of a layer
# ------------------------------------------------------------------------------------------------


def field_strategy(field: Field[Any, Any]) -> st.SearchStrategy[Any] | None:
    """Values a field can carry on the wire, or None for fields with their own tests."""
    if isinstance(field, (BitField, BitEnumField)):
        return st.integers(0, (1 << field.size) - 1)
    if isinstance(field, IP6Field):
        return st.integers(0, (1 << 128) - 1).map(lambda v: str(ipaddress.IPv6Address(v)))
    if isinstance(field, StrFixedLenField):
        size = field.length_from(None)
        return st.binary(min_size=size, max_size=size)
    if isinstance(field, L.XInt128Field):
        return st.integers(0, (1 << 128) - 1)
    if isinstance(field, (ConditionalField, MultipleTypeField, FieldListField, FieldLenField, TrailerField,
                          L.ZeroFillField, L.FixedPacketField)):
        return None
    return st.integers(0, (1 << (8 * struct.calcsize(field.fmt))) - 1)


FLAT_LAYERS = [L.BTH, L.RDETH, L.DETH, L.RETH, L.AtomicETH, L.AtomicAckETH, L.ImmDt, L.IETH, L.AETH,
               L.STH, L.MAD, L.MadAuth, L.SMP, L.Ntc257258, L.SecurityTrapDetails, L.IbsecPrivateData,
               L.CmReq, L.CmRep, L.CmRtu, L.CmRej, L.CmDreq, L.CmDrep, L.CmSidrReq, L.CmSidrRep]


def random_fields(cls: type[Packet]) -> st.SearchStrategy[dict[str, Any]]:
    strategies = {f.name: s for f in cls.fields_desc if (s := field_strategy(f)) is not None}
    return st.fixed_dictionaries(strategies)


@pytest.mark.parametrize("cls", FLAT_LAYERS, ids=lambda c: c.__name__)
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_layer_round_trips_random_fields(cls: type[Packet], data: st.DataObject) -> None:
    values = data.draw(random_fields(cls))
    built = bytes(cls(**values))
    parsed = cls(built)
    assert field_values(parsed, values) == {k: normalized(v) for k, v in values.items()}
    assert bytes(parsed) == built


@pytest.mark.parametrize("cls, size", [
    (L.RDETH, 4), (L.DETH, 8), (L.RETH, 16), (L.AtomicETH, 28), (L.AtomicAckETH, 8), (L.ImmDt, 4),
    (L.IETH, 4), (L.AETH, 4), (L.STH, 16), (L.MadAuth, 28), (L.SMP, 40), (L.Ntc257258, 54),
    (L.SecurityTrapDetails, 54), (L.IbsecPrivateData, 80), (L.Notice, 192),
])
def test_header_sizes(cls: type[Packet], size: int) -> None:
    assert len(cls()) == size


@pytest.mark.parametrize("ext", list(opcodes.Ext), ids=lambda e: e.name)
def test_extension_layer_lengths_match_opcode_table(ext: opcodes.Ext) -> None:
    assert len(L.EXT_LAYERS[ext]()) == ext.length


@pytest.mark.parametrize("cls, private_data", [
    (L.CmReq, 92), (L.CmRep, 196), (L.CmRtu, 224), (L.CmRej, 148), (L.CmDreq, 220), (L.CmDrep, 224),
    (L.CmSidrReq, 216), (L.CmSidrRep, 136),
])
def test_cm_messages_fill_the_mad_and_private_data_sizes(cls: type[Packet], private_data: int) -> None:
    pkt = cls()
    assert len(pkt) == L.MAD_DATA_LEN
    offset = len(pkt) - private_data
    marker = bytes(range(1, private_data + 1))
    if cls in (L.CmReq, L.CmRep):
        pkt.private_data = Raw(marker)
    else:
        pkt.private_data = marker
    assert bytes(pkt)[offset:] == marker


# ------------------------------------------------------------------------------------------------
# Dissection by the opcode table
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("op", list(opcodes.OPCODES.values()), ids=lambda o: o.name)
def test_every_opcode_dissects_its_extension_headers_in_wire_order(op: opcodes.Opcode) -> None:
    layers: list[Packet] = [L.BTH(opcode=op.code, dqpn=0x20)]
    layers += [L.EXT_LAYERS[ext]() for ext in op.headers]
    layers.append(Raw(b"\xa5" * 8))
    parsed = reparse(roce_frame(*layers))
    after_bth = [type(layer) for layer in parsed[L.BTH].payload.iterpayloads()]
    assert after_bth == [L.EXT_LAYERS[ext] for ext in op.headers] + [Raw]
    assert parsed[Raw].load == b"\xa5" * 8


@pytest.mark.parametrize("mode", list(L.SecMode))
def test_sth_follows_the_last_extension_header_in_modes_2_to_4(mode: L.SecMode) -> None:
    tag = bytes(range(16))
    parsed = reparse(roce_frame(L.BTH(opcode=0x0B, secmode=mode), L.RETH(rkey=9), L.ImmDt(immdt=7),
                                Raw(tag + b"data")))
    kinds = [type(layer) for layer in parsed[L.BTH].payload.iterpayloads()]
    if mode in L.STH_MODES:
        assert kinds == [L.RETH, L.ImmDt, L.STH, Raw]
        assert parsed[L.STH].tag == tag and parsed[Raw].load == b"data"
    else:
        assert kinds == [L.RETH, L.ImmDt, Raw]


def test_secmode_is_bth_byte_8_bits_6_to_4() -> None:
    for mode in range(8):
        for ackreq in (0, 1):
            byte8 = bytes(L.BTH(secmode=mode, ackreq=ackreq))[8]
            assert byte8 == (ackreq << 7) | (mode << 4)
            assert L.BTH(bytes(L.BTH(secmode=mode, ackreq=ackreq))).secmode == mode


def test_our_bth_is_found_as_scapy_roce_bth() -> None:
    parsed = reparse(roce_frame(L.BTH(opcode=0x04), Raw(b"abcd")))
    assert isinstance(parsed[roce.BTH], L.BTH)
    assert parsed[roce.BTH].secmode == 0


def test_mad_only_on_ud_to_qp1() -> None:
    mad = L.MAD(mgmt_class=0x04) / Raw(b"\x00" * L.MAD_DATA_LEN)
    to_qp1 = reparse(roce_frame(L.BTH(opcode=0x64, dqpn=1), L.DETH(qkey=L.GSI_QKEY), mad))
    to_qp2 = reparse(roce_frame(L.BTH(opcode=0x64, dqpn=2), L.DETH(qkey=L.GSI_QKEY), mad))
    rc_qp1 = reparse(roce_frame(L.BTH(opcode=0x04, dqpn=1), mad))
    assert to_qp1.haslayer(L.MAD)
    assert not to_qp2.haslayer(L.MAD) and not rc_qp1.haslayer(L.MAD)


def test_building_fills_opcode_and_mad_header_from_bindings() -> None:
    assert L.BTH() / L.RETH() is not None
    assert (L.BTH() / L.RETH()).opcode == opcodes.BY_NAME["RC_RDMA_WRITE_ONLY"].code
    assert (L.BTH() / L.DETH()).opcode == opcodes.BY_NAME["UD_SEND_ONLY"].code
    assert (L.BTH() / L.AETH()).opcode == opcodes.BY_NAME["RC_ACKNOWLEDGE"].code
    mad = L.MAD(bytes(L.MAD() / L.CmRtu()))
    assert (mad.mgmt_class, mad.class_version, mad.method, mad.attribute_id) == (0x07, 2, 3, 0x0014)


def test_mad_class_version_can_be_forced_and_body_is_padded() -> None:
    forced = bytes(L.MAD(mgmt_class=0x07, class_version=9) / Raw(b"x"))
    assert len(forced) == L.MAD_LEN and forced[2] == 9 and forced[24:] == b"x" + b"\x00" * 231


def test_mad_auth_trailer_comes_after_256_bytes() -> None:
    pkt = L.MAD() / L.CmDrep(local_comm_id=5) / L.MadAuth(nonce=b"n" * 12, tag=b"t" * 16)
    raw = bytes(pkt)
    assert len(raw) == L.MAD_LEN + 28 and raw[L.MAD_LEN:] == b"n" * 12 + b"t" * 16
    parsed = L.MAD(raw)
    assert parsed[L.CmDrep].local_comm_id == 5 and parsed[L.MadAuth].tag == b"t" * 16


# ------------------------------------------------------------------------------------------------
# ICRC
# ------------------------------------------------------------------------------------------------


def test_icrc_of_unmarked_packet_equals_scapy_roce() -> None:
    ours = roce_frame(L.BTH(opcode=0x0A, dqpn=5, psn=7), L.RETH(va=1, rkey=2, dmalen=4), Raw(b"abcd"))
    theirs = roce_frame(roce.BTH(opcode=0x0A, dqpn=5, psn=7),
                        Raw(bytes(L.RETH(va=1, rkey=2, dmalen=4)) + b"abcd"))
    assert bytes(ours) == bytes(theirs)
    assert icrc.verify(bytes(ours))


def test_icrc_ignores_mf_bits_and_can_be_forced_bad() -> None:
    pkt = roce_frame(L.BTH(opcode=0x04, dqpn=5), Raw(b"abcd"))
    marked = addressing.mf_set(pkt, addressing.MF_MAX)
    assert bytes(marked)[-4:] == bytes(pkt)[-4:] and icrc.verify(bytes(marked))
    forced = roce_frame(L.BTH(opcode=0x04, dqpn=5, icrc=0x12345678), Raw(b"abcd"))
    assert bytes(forced)[-4:] == b"\x12\x34\x56\x78" and not icrc.verify(bytes(forced))


def test_dissected_packet_rebuilds_byte_for_byte() -> None:
    pkt = roce_frame(L.BTH(opcode=0x64, dqpn=1), L.DETH(qkey=L.GSI_QKEY, srcqp=1), L.MAD(transaction_id=3),
                     L.KeyDistribution(key_type=KeyType.P_SK, owners=[0x8001]),
                     L.MadAuth(nonce=b"\x01" * 12, tag=b"\x02" * 16))
    raw = bytes(pkt)
    assert bytes(Ether(raw)) == raw and icrc.verify(raw)


# ------------------------------------------------------------------------------------------------
# Attributes with lists and sub-structures
# ------------------------------------------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 0xFFFF), st.integers(0, 255)), max_size=32), st.integers(0, 0xFFFF),
       st.integers(0, 255))
def test_pkey_table_round_trip(entries: list[tuple[int, int]], block: int, port: int) -> None:
    pkeys, modes = [pk for pk, _ in entries], [mode for _, mode in entries]
    raw = bytes(L.PKeyTable(block=block, port=port, pkeys=pkeys, secmodes=modes))
    assert len(raw) == L.MAD_DATA_LEN
    parsed = L.PKeyTable(raw)
    assert (parsed.block, parsed.port, parsed.num_entries, parsed.pkeys, parsed.secmodes) == (
        block, port, len(pkeys), pkeys, modes)


def test_pkey_table_bytes_follow_the_documented_layout() -> None:
    """docs/wire-format.md: block, port, count, 32 x P_Key, 32 x mode byte, 132 reserved bytes."""
    table = L.PKeyTable(block=1, port=1, pkeys=[0xFFFF, 0x8001, 0x0002], secmodes=[0, 2, 4])
    expected = (
        bytes([0x00, 0x01, 0x01, 0x03])  # block 1, port 1, 3 entries
        + bytes([0xFF, 0xFF, 0x80, 0x01, 0x00, 0x02]) + bytes(29 * 2)  # P_Keys, unused slots zero
        + bytes([0x00, 0x02, 0x04]) + bytes(29)  # one mode byte per entry, same order
        + bytes(132)
    )
    assert bytes(table) == expected
    assert bytes(L.MAD(transaction_id=5) / table)[24 + 68 : 24 + 71] == bytes([0, 2, 4])  # MAD offset 92


def test_pkey_table_without_modes_means_mode_0() -> None:
    """A table built by a sender that knows no modes (reserved bytes zero) dissects as mode 0 throughout."""
    legacy = L.PKeyTable(pkeys=[0x8001, 0x0002])
    assert L.PKeyTable(bytes(legacy)).secmodes == [0, 0]


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(list(KeyType)), st.lists(st.integers(0, (1 << 128) - 1), max_size=4),
       st.integers(0, 0xFFFF), st.integers(0, 0xFFFFFFFF), st.binary(min_size=64, max_size=64))
def test_key_distribution_round_trip(key_type: KeyType, owners: list[int], pkey: int, key_id: int,
                                     blob: bytes) -> None:
    raw = bytes(L.KeyDistribution(key_type=key_type, owners=owners, pkey=pkey, key_id=key_id,
                                  wrapped_key=blob))
    assert len(raw) == L.MAD_DATA_LEN
    parsed = L.KeyDistribution(raw)
    assert (parsed.key_type, parsed.owners, parsed.pkey, parsed.key_id, parsed.wrapped_key) == (
        key_type, owners, pkey, key_id, blob)


def test_hostile_counts_keep_fixed_offsets() -> None:
    dist = L.KeyDistribution(bytes(L.KeyDistribution(owner_count=255, owners=[1, 2], wrapped_key=b"K" * 64)))
    assert dist.owner_count == 255 and dist.owners[:2] == [1, 2] and dist.wrapped_key == b"K" * 64
    table = L.PKeyTable(bytes(L.PKeyTable(num_entries=200, pkeys=[0x8001])))
    assert table.num_entries == 200 and len(table.pkeys) == L.PKEY_BLOCK_ENTRIES
    assert table.pkeys[0] == 0x8001 and len(table.secmodes) == L.PKEY_BLOCK_ENTRIES
    assert table.reserved == bytes(132)


def test_key_distribution_carries_a_key_that_unwraps() -> None:
    kek = Key.generate(KeyType.CA_SK, (2,))
    p_sk = Key.generate(KeyType.P_SK, (0x8001,), length=32)
    mad = L.MAD(transaction_id=1) / L.KeyDistribution(key_type=p_sk.type, owners=list(p_sk.owner),
                                                      pkey=0x8001, wrapped_key=wrap_key(kek, p_sk))
    got = L.MAD(bytes(mad))[L.KeyDistribution]
    assert unwrap_key(kek, got.wrapped_key, KeyType(got.key_type), got.owners) == p_sk


@settings(max_examples=25, deadline=None)
@given(random_fields(L.Ntc257258), st.integers(0, addressing.MF_MAX), st.integers(0, 255))
def test_trap_257_round_trip_with_extension(details: dict[str, Any], mf: int, port: int) -> None:
    pkt = L.MAD() / L.SMP() / L.Notice(trap_number=L.TRAP_BAD_PKEY, data_details=L.Ntc257258(**details),
                                       mf=mf, recv_port=port)
    parsed = L.MAD(bytes(pkt))
    notice = parsed[L.Notice]
    assert isinstance(notice.data_details, L.Ntc257258)
    assert field_values(notice.data_details, details) == {k: normalized(v) for k, v in details.items()}
    assert (notice.mf, notice.recv_port, notice.ext_version) == (mf, port, L.NOTICE_EXT_VERSION)


def test_security_trap_is_a_vendor_notice() -> None:
    notice = L.Notice(is_generic=0, data_details=L.SecurityTrapDetails(qp=0x42, mac_failures=100,
                                                                       replays=3, key_retired=1))
    parsed = L.MAD(bytes(L.MAD(transaction_id=9) / L.SMP() / notice))[L.Notice]
    raw = bytes(notice)
    assert raw[0] == 0x02 and raw[1:4] == L.IBSEC_VENDOR_ID.to_bytes(3, "big")
    assert raw[4:6] == L.IBSEC_TRAP_SECURITY.to_bytes(2, "big")
    assert isinstance(parsed.data_details, L.SecurityTrapDetails)
    details = parsed.data_details
    assert (details.qp, details.mac_failures, details.replays, details.key_retired) == (0x42, 100, 3, 1)


def test_other_notices_keep_raw_details() -> None:
    notice = L.Notice(trap_number=128, data_details=b"\x11" * 54)
    assert L.Notice(bytes(notice)).data_details == b"\x11" * 54


def test_cm_req_private_data_carries_n0_and_wrapped_key() -> None:
    req = L.MAD() / L.CmReq(private_data=L.IbsecPrivateData(secmode=2, n0=b"N" * 12, wrapped_key=b"W" * 64))
    parsed = L.MAD(bytes(req))[L.CmReq].private_data
    assert (parsed.secmode, parsed.n0, parsed.wrapped_key) == (2, b"N" * 12, b"W" * 64)


def test_pkey_entry_membership_bit() -> None:
    assert L.pkey_entry(0x0001) == 0x8001
    assert L.pkey_entry(0x8001, full_member=False) == 0x0001
