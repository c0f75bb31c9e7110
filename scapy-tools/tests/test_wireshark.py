"""Our Wireshark dissector (ibsec/wireshark/ibsec.lua) read back with tshark, field by field.

Frames are built by the wire library (layers, transport.seal, mad_auth, the agent's frame builder) in
every security mode and every MAD kind, written to a pcap and read with ``tshark -X lua_script:...
-T fields``; every value must equal what the wire library put on the wire or computed (tag, ICRC,
extended PSN, nonce). Needs tshark (scripts/setup.sh installs it); skipped with the reason without it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from ibsec import addressing, icrc, keybatch, keys, mad_auth, opcodes, rocev2, transport
from ibsec import layers as L
from ibsec import wireshark as ws
from ibsec.agent import cm
from ibsec.builder import Builder, gid_bytes
from ibsec.marking import DdpmLayout, FatTreeLayout, Kind
from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether
from scapy.packet import Packet, Raw
from scapy.utils import wrpcap

pytestmark = pytest.mark.skipif(shutil.which("tshark") is None,
                                reason="tshark is not installed (scripts/setup.sh installs it)")

A_GID, B_GID = addressing.host_gid(1, 0x10), addressing.host_gid(2, 0x10)
MF = 0x0800000006
"""Every frame's destination carries marks: the ICRC and the tags must not see them."""
PAYLOAD = bytes(range(40))
"""At least 16 bytes: Wireshark 4.0's RPC-over-RDMA guess throws on shorter clear payloads (its bug)."""
KEY = bytes(range(16))
CA_KEY = bytes(range(100, 116))


def base(src: str = A_GID, dst: str = B_GID, mf: int = MF, sport: int = 0xC001) -> Packet:
    return (Ether(src=addressing.host_mac(1), dst=addressing.host_mac(2))
            / IPv6(src=src, dst=addressing.mf_set(dst, mf)) / UDP(sport=sport, chksum=0))


def read(tmp_path: Path, frames: list[bytes], fields: list[str], **prefs: str) -> list[dict[str, list[str]]]:
    capture = tmp_path / f"frames-{len(list(tmp_path.iterdir()))}.pcap"
    wrpcap(str(capture), [Ether(f) for f in frames])
    got = ws.read_fields(capture, [*fields, "_ws.malformed"], {f"ibsec.{k}": v for k, v in prefs.items()})
    assert len(got) == len(frames)
    assert [g["_ws.malformed"] for g in got] == [[]] * len(frames)
    return got


def one(frame: dict[str, list[str]], field: str) -> str | None:
    values = frame[field]
    assert len(values) <= 1, (field, values)
    return values[0] if values else None


def sealed(code: int, mode: int, dqpn: int, psn: int, direction: int = 0) -> tuple[bytes, int]:
    """A frame of opcode ``code`` in ``mode`` and the extended PSN the wire library sealed it with."""
    op = opcodes.lookup(code)
    pkt = base() / L.BTH(opcode=code, pkey=0x8001, dqpn=dqpn, psn=psn, ackreq=1)
    for ext in op.headers:
        pkt = pkt / (L.DETH(qkey=0x11111111, srcqp=0x77) if ext is opcodes.Ext.DETH else L.EXT_LAYERS[ext]())
    pkt = pkt / Raw(PAYLOAD if op.has_payload else b"")
    sender = transport.Sender(transport.Mode(mode), os.urandom(12), direction)
    frame = transport.seal(bytes(pkt), KEY if mode else None, sender)
    return frame, sender.last_epsn or 0


TRANSPORT_FIELDS = ["ibsec.mode", "ibsec.sth.tag", "ibsec.tag32", "ibsec.icrc", "ibsec.icrc.good",
                    "ibsec.epsn", "ibsec.response", "ibsec.ciphertext", "ibsec.payload", "ibsec.mf",
                    "frame.protocols"]


def test_every_mode_shows_its_mode_sth_tag_icrc_and_extended_psn(tmp_path: Path) -> None:
    names = ["RC_SEND_ONLY", "RC_RDMA_WRITE_ONLY", "RC_ACKNOWLEDGE", "UD_SEND_ONLY",
             "RC_SEND_ONLY_WITH_IMMEDIATE"]
    cases = [(mode, opcodes.BY_NAME[name]) for mode in range(5) for name in names]
    built = [sealed(op.code, mode, 0x100 + i, 0xABC000 + i) for i, (mode, op) in enumerate(cases)]
    got = read(tmp_path, [f for f, _ in built], TRANSPORT_FIELDS)
    for (mode, op), (frame, epsn), g in zip(cases, built, got, strict=True):
        end = rocev2.locate(frame).headers_end
        where = f"{op.name} mode {mode}"
        assert one(g, "ibsec.mode") == str(mode), where
        assert one(g, "ibsec.mf") == f"0x{MF:016x}", where
        assert one(g, "ibsec.sth.tag") == (frame[end:end + 16].hex() if mode >= 2 else None), where
        assert one(g, "ibsec.tag32") == (frame[-4:].hex() if mode == 1 else None), where
        if mode == 1:  # the ICRC field holds the tag: no ICRC to show or check
            assert g["ibsec.icrc"] == [] and g["ibsec.icrc.good"] == [], where
        else:
            assert one(g, "ibsec.icrc") == f"0x{int.from_bytes(frame[-4:], 'little'):08x}", where
            assert one(g, "ibsec.icrc.good") == "1" and icrc.verify(frame), where
        if mode:
            assert one(g, "ibsec.epsn") == str(epsn), where
            assert one(g, "ibsec.response") == ("1" if transport.is_response(op) else "0"), where
            body = frame[end + (16 if mode >= 2 else 0):-4]
            shown = one(g, "ibsec.ciphertext" if mode <= 2 else "ibsec.payload")
            assert shown == (body.hex() if body else None), where
            assert "rpcordma" not in (one(g, "frame.protocols") or ""), where  # ciphertext is no RPC
        else:
            assert g["ibsec.epsn"] == [] and g["ibsec.sth.tag"] == [], where


def test_every_opcode_puts_the_sth_right_after_its_headers(tmp_path: Path) -> None:
    codes = sorted(opcodes.OPCODES)
    built = [sealed(code, 2, 0x200 + i, 7)[0] for i, code in enumerate(codes)]
    got = read(tmp_path, built, ["ibsec.sth.tag", "ibsec.icrc.good"])
    for code, frame, g in zip(codes, built, got, strict=True):
        end = rocev2.locate(frame).headers_end
        assert one(g, "ibsec.sth.tag") == frame[end:end + 16].hex(), opcodes.lookup(code).name
        assert one(g, "ibsec.icrc.good") == "1", opcodes.lookup(code).name


def test_a_reserved_mode_and_a_bad_icrc_are_flagged(tmp_path: Path) -> None:
    frame, _ = sealed(0x04, 2, 0x300, 1)
    reserved = bytearray(frame)
    reserved[14 + 40 + 8 + 8] = 0x70  # mode 7
    corrupt = frame[:-5] + bytes([frame[-5] ^ 1]) + frame[-4:]
    got = read(tmp_path, [bytes(reserved), corrupt], ["ibsec.mode", "ibsec.icrc.good", "_ws.expert.message"])
    assert one(got[0], "ibsec.mode") == "7"
    assert any("Reserved security mode" in m for m in got[0]["_ws.expert.message"])
    assert one(got[1], "ibsec.icrc.good") == "0"
    assert any(m.startswith("ICRC 0x") for m in got[1]["_ws.expert.message"])


# ---- a connection: direction bit, extended PSN and nonce from the CM exchange ----------------------------


def cm_frame(src: str, dst: str, body: Packet, attr: int) -> bytes:
    mad = L.MAD(mgmt_class=L.MgmtClass.CM, method=L.Method.SEND, attribute_id=attr, transaction_id=1) / body
    return bytes(base(src, dst, mf=0) / L.BTH(dqpn=1, pkey=0x8001) / L.DETH(qkey=L.GSI_QKEY, srcqp=1) / mad)


def test_a_connection_gives_direction_extended_psn_and_nonce(tmp_path: Path) -> None:
    """RC in mode 2: A sends REQ (QPN, its contribution to N0), B answers REP (QPN, its contribution);
    A's SENDs cross a PSN wrap and B acknowledges them. Each side's pcap (one direction, as a switch port's
    _in/_out pcap) and the two merged must all show the direction bit and extended PSN the wire library
    sealed with; the nonce, from N0 = both contributions xored, only where both CM messages are."""
    qpn_a, qpn_b, psn_a, psn_b = 0x1234, 0x5678, 0xFFFFFE, 0x10
    n0_a, n0_b = os.urandom(12), os.urandom(12)
    req = cm_frame(A_GID, B_GID, L.CmReq(local_comm_id=0xAA, service_id=0x1B5EC00000000001, local_qpn=qpn_a,
                                         starting_psn=psn_a, partition_key=0x8001,
                                         private_data=L.IbsecPrivateData(secmode=2, n0=n0_a)), L.CmAttr.REQ)
    rep = cm_frame(B_GID, A_GID, L.CmRep(local_comm_id=0xBB, remote_comm_id=0xAA, local_qpn=qpn_b,
                                         starting_psn=psn_b,
                                         private_data=L.IbsecPrivateData(secmode=2, n0=n0_b)), L.CmAttr.REP)
    a = Builder(bytes.fromhex("020000000001"), gid_bytes(A_GID))
    b = Builder(bytes.fromhex("020000000002"), gid_bytes(B_GID))
    n0 = transport.connection_n0(n0_a, n0_b)
    tx_a = transport.Sender(transport.Mode.STH_AEAD, n0, 0)
    tx_b = transport.Sender(transport.Mode.STH_AEAD, n0, 1)
    a_frames, b_frames, expected = [], [], {}
    for i in range(4):
        psn = (psn_a + i) & 0xFFFFFF
        send = transport.seal(a.plain(B_GID, "RC_SEND_ONLY", 0x8001, qpn_b, psn, PAYLOAD, ackreq=True,
                                      src_qp=qpn_a), KEY, tx_a)
        ack = transport.seal(b.plain(A_GID, "RC_ACKNOWLEDGE", 0x8001, qpn_a, psn, b"", src_qp=qpn_b,
                                     aeth=(0, i + 1)), KEY, tx_b)
        assert tx_a.last_epsn is not None and tx_b.last_epsn is not None
        expected[send] = ("0", tx_a.last_epsn, transport.make_nonce(n0, 0, tx_a.last_epsn, False))
        expected[ack] = ("1", tx_b.last_epsn, transport.make_nonce(n0, 1, tx_b.last_epsn, True))
        a_frames.append(send)
        b_frames.append(ack)
    assert [expected[f][1] for f in a_frames] == [0xFFFFFE, 0xFFFFFF, 0x1000000, 0x1000001]
    fields = ["ibsec.direction", "ibsec.epsn", "ibsec.nonce", "ibsec.n0", "ibsec.cm.n0", "ibsec.cm.secmode"]
    merged = [req, rep] + [f for pair in zip(a_frames, b_frames, strict=True) for f in pair]
    for capture in ([req, *a_frames], [rep, *b_frames], merged):
        got = read(tmp_path, capture, fields)
        exchange = [g for f, g in zip(capture, got, strict=True) if f not in expected]
        assert all(one(g, "ibsec.cm.secmode") == "2" for g in exchange)
        assert {one(g, "ibsec.cm.n0") for g in exchange} <= {n0_a.hex(), n0_b.hex()}
        both = capture is merged
        for frame, g in zip(capture, got, strict=True):
            if frame in expected:
                direction, epsn, nonce = expected[frame]
                assert (one(g, "ibsec.direction"), one(g, "ibsec.epsn"), one(g, "ibsec.nonce")) == \
                    (direction, str(epsn), nonce.hex() if both else None)
                assert one(g, "ibsec.n0") == (n0.hex() if both else None)


def test_a_ud_peer_resolved_by_sidr_gives_direction_and_nonce(tmp_path: Path) -> None:
    qpn_a, qpn_b, n0_a, n0_b = 0x2222, 0x3333, os.urandom(12), os.urandom(12)
    private = bytes(L.IbsecPrivateData(secmode=3, n0=n0_a)) + cm.UD_EXTRA.pack(qpn_a, 0x1111, 5)
    req = cm_frame(A_GID, B_GID, L.CmSidrReq(request_id=9, partition_key=0x8001,
                                             service_id=0x1B5EC00000000000, private_data=private),
                   L.CmAttr.SIDR_REQ)
    answer = bytes(L.IbsecPrivateData(secmode=3, n0=n0_b)) + cm.UD_EXTRA.pack(qpn_b, 0x1111, 7)
    rep = cm_frame(B_GID, A_GID, L.CmSidrRep(request_id=9, qpn=qpn_b, qkey=0x1111,
                                             service_id=0x1B5EC00000000000, private_data=answer),
                   L.CmAttr.SIDR_REP)
    n0 = transport.connection_n0(n0_a, n0_b)
    tx = transport.Sender(transport.Mode.STH_AUTH, n0, 0)
    send = transport.seal(bytes(base() / L.BTH(opcode=0x64, pkey=0x8001, dqpn=qpn_b, psn=5)
                                / L.DETH(qkey=0x1111, srcqp=qpn_a) / Raw(PAYLOAD)), KEY, tx)
    got = read(tmp_path, [req, rep, send], ["ibsec.cm.qpn", "ibsec.cm.qkey", "ibsec.cm.psn", "ibsec.cm.scope",
                                            "ibsec.direction", "ibsec.nonce", "ibsec.payload"])
    assert (one(got[0], "ibsec.cm.qpn"), one(got[0], "ibsec.cm.qkey"), one(got[0], "ibsec.cm.psn")) == \
        ("0x002222", "0x00001111", "0x000005")
    assert one(got[0], "ibsec.cm.scope") == "0"
    assert one(got[2], "ibsec.direction") == "0"
    assert one(got[2], "ibsec.nonce") == transport.make_nonce(n0, 0, 5).hex()
    assert one(got[2], "ibsec.payload") == PAYLOAD.hex()


# ---- every MAD kind ---------------------------------------------------------------------------------------


def mad_frame(mad: Packet, src: str = A_GID, dst: str = B_GID) -> bytes:
    pkt = base(src, dst, mf=0x3) / L.BTH(dqpn=1, pkey=0xFFFF) / L.DETH(qkey=L.GSI_QKEY, srcqp=1) / mad
    return bytes(mad_auth.sign_packet(CA_KEY, pkt))


def trailer(frame: bytes) -> tuple[str, str]:
    return frame[-4 - 28:-4 - 16].hex(), frame[-4 - 16:-4].hex()


MAD_FIELDS = [
    "ibsec.mad_auth.nonce", "ibsec.mad_auth.tag", "ibsec.vendor.attribute", "ibsec.vendor.status",
    "ibsec.vendor.ack", "ibsec.keydist.key_type", "ibsec.keydist.owner_count", "ibsec.keydist.pkey",
    "ibsec.keydist.key_id", "ibsec.keydist.owner", "ibsec.keydist.wrapped_key", "ibsec.keybatch.version",
    "ibsec.keybatch.count", "ibsec.keybatch.length", "ibsec.keybatch.nonce", "ibsec.keybatch.wrapped",
    "ibsec.pkeytable.block",
    "ibsec.pkeytable.port", "ibsec.pkeytable.num_entries", "ibsec.pkeytable.pkey",
    "ibsec.pkeytable.full_member", "ibsec.pkeytable.secmode", "ibsec.notice.ext_version",
    "ibsec.notice.recv_port", "ibsec.mf",
    "ibsec.sectrap.lid", "ibsec.sectrap.qp", "ibsec.sectrap.mac_failures", "ibsec.sectrap.replays",
    "ibsec.sectrap.pkey", "ibsec.sectrap.secmode", "ibsec.sectrap.key_retired", "ibsec.sectrap.peer_gid",
    "ibsec.sectrap.peer_qp", "ibsec.cm.version", "ibsec.cm.secmode", "ibsec.cm.n0", "ibsec.cm.wrapped_key",
    "ibsec.cm.scope", "infiniband.mad.attributeid", "_ws.expert.message",
]


def test_every_mad_kind_decodes_field_by_field(tmp_path: Path) -> None:
    ca_sk = keys.Key.generate(keys.KeyType.CA_SK, (1,))
    p_sk = keys.Key.generate(keys.KeyType.P_SK, (0x8001,))
    wrapped = keys.wrap_key(ca_sk, p_sk)
    batch_header = L.vendor_header(L.VendorAttr.KEY_BATCH, 15)
    batch_body = keybatch.seal(ca_sk, batch_header, [keys.Key.generate(keys.KeyType.SM_SK), p_sk], 1)
    sk_blob, n0 = os.urandom(keys.WRAPPED_KEY_LEN), os.urandom(12)
    private = L.IbsecPrivateData(secmode=4, n0=n0, wrapped_key=sk_blob)
    vendor = L.MgmtClass.IBSEC_VENDOR
    ntc = {"lid1": 1, "lid2": 3, "key": 0x7BAD, "qp1": 0x11, "qp2": 0x22, "gid1": A_GID, "gid2": B_GID}
    mads = {
        "trap 257": L.MAD(transaction_id=1) / L.SMP() / L.Notice(
            trap_number=257, issuer_lid=3, data_details=L.Ntc257258(**ntc), issuer_gid=B_GID, recv_port=1,
            mf=0x2AAAAAAAAA),
        "trap 258": L.MAD(transaction_id=2) / L.SMP() / L.Notice(
            trap_number=258, issuer_lid=3, data_details=L.Ntc257258(**ntc), issuer_gid=B_GID, recv_port=2,
            mf=0x15),
        "security trap": L.MAD(transaction_id=3) / L.SMP() / L.Notice(
            is_generic=0, issuer_gid=B_GID, data_details=L.SecurityTrapDetails(
                lid=3, qp=0x42, mac_failures=100, replays=7, pkey=0x8002, secmode=1, key_retired=1,
                peer_gid=A_GID, peer_qp=0x99)),
        "CM REQ": L.MAD(transaction_id=4) / L.CmReq(local_comm_id=5, service_id=0x1B5EC00000000002,
                                                    local_qpn=0x123, private_data=private),
        "CM REP": L.MAD(transaction_id=5) / L.CmRep(local_comm_id=6, remote_comm_id=5, local_qpn=0x456,
                                                    private_data=L.IbsecPrivateData(secmode=4, n0=n0)),
        "CM RTU": L.MAD(transaction_id=6) / L.CmRtu(local_comm_id=5, remote_comm_id=6),
        "CM REJ": L.MAD(transaction_id=7) / L.CmRej(local_comm_id=5, remote_comm_id=6, reason=28),
        "CM DREQ": L.MAD(transaction_id=8) / L.CmDreq(local_comm_id=5, remote_comm_id=6,
                                                      remote_qpn_eecn=0x456),
        "CM DREP": L.MAD(transaction_id=9) / L.CmDrep(local_comm_id=6, remote_comm_id=5),
        "CM SIDR_REQ": L.MAD(transaction_id=10) / L.CmSidrReq(
            request_id=1, service_id=0x1B5EC00000000001,
            private_data=bytes(private) + cm.UD_EXTRA.pack(0x321, 0x1111, 9)),
        "CM SIDR_REP": L.MAD(transaction_id=11) / L.CmSidrRep(
            request_id=1, qpn=0x654, service_id=0x1B5EC00000000001,
            private_data=bytes(L.IbsecPrivateData(secmode=4, n0=n0)) + cm.UD_EXTRA.pack(0x654, 0x1111, 3)),
        "key distribution": L.MAD(transaction_id=12) / L.KeyDistribution(
            key_type=p_sk.type, owners=list(p_sk.owner), pkey=0x8001, key_id=3, wrapped_key=wrapped),
        "key distribution ack": L.MAD(transaction_id=12, r=1, method=L.Method.GET) / L.KeyDistribution(
            key_type=p_sk.type, owners=list(p_sk.owner), pkey=0x8001, key_id=3),
        "key rejected": L.MAD(mgmt_class=vendor, transaction_id=13, r=1, method=L.Method.GET,
                              status=L.MadStatus.KEY_REJECTED, attribute_id=L.VendorAttr.KEY_DISTRIBUTION)
        / L.KeyDistribution(key_type=keys.KeyType.CA_SK_IJ, owners=[1, 2], key_id=4),
        "key batch": L.MAD(batch_header + batch_body),
        "key batch ack": L.MAD(L.vendor_header(L.VendorAttr.KEY_BATCH, 15, response=True)
                               + keybatch.ack_body(batch_body)),
        "P_Key table": L.MAD(transaction_id=14) / L.PKeyTable(
            block=1, port=1, pkeys=[L.pkey_entry(0x7FFF), L.pkey_entry(0x0002, False), L.pkey_entry(0x0003)],
            secmodes=[0, 3, 4]),
        "P_Key table ack": L.MAD(transaction_id=14, r=1, method=L.Method.GET) / L.PKeyTable(
            block=1, port=1, pkeys=[L.pkey_entry(0x7FFF)], secmodes=[0]),
    }
    built = {name: mad_frame(mad) for name, mad in mads.items()}
    got = dict(zip(built, read(tmp_path, list(built.values()), MAD_FIELDS), strict=True))
    for name, frame in built.items():  # every one of them carries its authentication trailer
        shown = (one(got[name], "ibsec.mad_auth.nonce"), one(got[name], "ibsec.mad_auth.tag"))
        assert shown == trailer(frame), name
        assert mad_auth.verify_packet(CA_KEY, Ether(frame)) is not None
    trap = got["trap 257"]
    assert (one(trap, "ibsec.notice.ext_version"), one(trap, "ibsec.notice.recv_port")) == ("1", "1")
    assert trap["ibsec.mf"] == ["0x0000000000000003", "0x0000002aaaaaaaaa"]  # the frame's own MF, the trap's
    assert one(got["trap 258"], "ibsec.notice.recv_port") == "2" and got["trap 258"]["ibsec.mf"][1] == \
        "0x0000000000000015"
    sec = got["security trap"]
    names = ("lid", "qp", "mac_failures", "replays", "pkey", "secmode", "key_retired", "peer_gid", "peer_qp")
    assert [one(sec, f"ibsec.sectrap.{f}") for f in names] == \
        ["3", "0x000042", "100", "7", "0x8002", "1", "1", A_GID, "0x000099"]
    for name in ("CM REQ", "CM SIDR_REQ"):
        assert [one(got[name], f"ibsec.cm.{f}") for f in ("version", "secmode", "n0", "wrapped_key")] == \
            ["1", "4", n0.hex(), sk_blob.hex()], name
    assert one(got["CM REQ"], "ibsec.cm.scope") == "2" and one(got["CM SIDR_REQ"], "ibsec.cm.scope") == "1"
    assert [one(got["CM REP"], f"ibsec.cm.{f}") for f in ("secmode", "n0", "wrapped_key")] == \
        ["4", n0.hex(), bytes(64).hex()]
    for name in ("CM RTU", "CM REJ", "CM DREQ", "CM DREP"):
        assert got[name]["ibsec.cm.version"] == [] and one(got[name], "infiniband.mad.attributeid"), name
    dist, ack, rejected = got["key distribution"], got["key distribution ack"], got["key rejected"]
    names = ("key_type", "owner_count", "pkey", "key_id", "wrapped_key")
    assert [one(dist, f"ibsec.keydist.{f}") for f in names] == \
        [str(int(keys.KeyType.P_SK)), "1", "0x8001", "3", wrapped.hex()]
    assert dist["ibsec.keydist.owner"] == [f"{0x8001:032x}"]
    assert (one(dist, "ibsec.vendor.attribute"), one(dist, "ibsec.vendor.ack")) == ("0x0010", "0")
    assert (one(ack, "ibsec.vendor.ack"), one(ack, "ibsec.keydist.wrapped_key")) == ("1", bytes(64).hex())
    assert one(rejected, "ibsec.vendor.status") == "0x0100"
    assert rejected["ibsec.keydist.owner"] == [f"{1:032x}", f"{2:032x}"]
    batch, batch_ack = got["key batch"], got["key batch ack"]
    names = ("version", "count", "length", "nonce", "wrapped")
    assert [one(batch, f"ibsec.keybatch.{f}") for f in names] == \
        ["1", "2", "52", batch_body[4:16].hex(), batch_body[16:16 + 52 + 16].hex()]
    assert (one(batch, "ibsec.vendor.attribute"), one(batch, "ibsec.vendor.ack")) == ("0x0012", "0")
    assert [one(batch_ack, f"ibsec.keybatch.{f}") for f in ("count", "length")] == ["2", "0"]
    assert batch_ack["ibsec.keybatch.wrapped"] == [] and one(batch_ack, "ibsec.vendor.ack") == "1"
    table = got["P_Key table"]
    assert [one(table, f"ibsec.pkeytable.{f}") for f in ("block", "port", "num_entries")] == ["1", "1", "3"]
    assert table["ibsec.pkeytable.pkey"] == ["0xffff", "0x0002", "0x8003"]
    assert table["ibsec.pkeytable.full_member"] == ["1", "0", "1"]
    assert table["ibsec.pkeytable.secmode"] == ["0", "3", "4"]
    assert one(got["P_Key table ack"], "ibsec.vendor.ack") == "1"
    assert not any(m.startswith(("Acknowledgement echoes", "Security mode above")) for g in got.values()
                   for m in g["_ws.expert.message"])


def test_a_table_with_a_reserved_mode_and_an_ack_echoing_key_bytes_are_flagged(tmp_path: Path) -> None:
    table = L.MAD(transaction_id=1) / L.PKeyTable(port=1, pkeys=[L.pkey_entry(1)], secmodes=[7])
    echo = L.MAD(transaction_id=2, r=1, method=L.Method.GET) / L.KeyDistribution(
        key_type=keys.KeyType.P_SK, owners=[1], wrapped_key=b"\x01" * 64)
    header = L.vendor_header(L.VendorAttr.KEY_BATCH, 3, response=True)
    batch_echo = L.MAD(header + keybatch.seal(keys.Key.generate(keys.KeyType.CA_SK, (1,)), header,
                                              [keys.Key.generate(keys.KeyType.SM_SK)], 1))
    got = read(tmp_path, [mad_frame(table), mad_frame(echo), mad_frame(batch_echo)], ["_ws.expert.message"])
    assert any("Security mode above 4" in m for m in got[0]["_ws.expert.message"])
    assert any("echoes key bytes" in m for m in got[1]["_ws.expert.message"])
    assert any("echoes key bytes" in m for m in got[2]["_ws.expert.message"])


# ---- the marking field without a topology file: digits and vectors from the preferences -------------------


def test_marking_preferences_decode_digits_and_vectors(tmp_path: Path) -> None:
    tree = FatTreeLayout(ports=4, levels=3)
    mf_tree = tree.encode([(0, 2), (1, 1), (2, 3)])
    mesh = DdpmLayout(Kind.MESH, (8, 8))
    mf_mesh = mesh.pack((-3, 5), host_port=2)
    tree_frame = bytes(base(mf=mf_tree) / L.BTH(opcode=0x04, dqpn=5) / Raw(PAYLOAD))
    mesh_frame = bytes(base(mf=mf_mesh) / L.BTH(opcode=0x04, dqpn=5) / Raw(PAYLOAD))
    fields = ["ibsec.mf", "ibsec.mf.scheme", "ibsec.mf.level", "ibsec.mf.digit", "ibsec.mf.component",
              "ibsec.mf.vector", "ibsec.mf.host_port"]
    got = read(tmp_path, [tree_frame], fields, marking="port-marking", ports="4")
    assert one(got[0], "ibsec.mf") == f"0x{mf_tree:016x}" and one(got[0], "ibsec.mf.level") == "2"
    assert got[0]["ibsec.mf.digit"] == ["2", "1", "3"]  # levels 0, 1, 2
    got = read(tmp_path, [mesh_frame], fields, marking="ddpm-mesh", dimensions="2", host_bits="4")
    decoded = [one(got[0], f"ibsec.mf.{f}") for f in ("scheme", "vector", "host_port")]
    assert decoded == ["ddpm", "(-3, 5)", "2"]
    assert got[0]["ibsec.mf.component"] == ["-3", "5"]
    got = read(tmp_path, [mesh_frame], fields)  # no preference: the raw MF only
    assert one(got[0], "ibsec.mf") == f"0x{mf_mesh:016x}" and got[0]["ibsec.mf.scheme"] == []


def test_install_puts_the_plugin_where_tshark_loads_it(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """``make wireshark`` for a user whose home is tmp_path: tshark started by that user knows ibsec."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    target = ws.install()
    assert target.is_relative_to(tmp_path) and target.read_bytes() == ws.PLUGIN.read_bytes()
    assert target.stat().st_mode & 0o777 == 0o644
    protocols = subprocess.run([ws.tshark(), "-G", "protocols"], capture_output=True, text=True, timeout=120,
                               check=True).stdout
    assert "ibsec" in [line.split("\t")[-1] for line in protocols.splitlines()]  # name, short name, filter
