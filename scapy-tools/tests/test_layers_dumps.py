"""Hand-checked byte dumps: one packet of each kind, the expected bytes written from the IBA layouts.

Each expected dump is spelled field by field from the spec (comments give the field and its bits), not
copied from the layers' output. Transport dumps start at the BTH and stop before the ICRC, which is
checked separately with ibsec.icrc; MAD dumps are the 256 (+28) bytes of the UD payload.
"""

from __future__ import annotations

from ibsec import icrc
from ibsec import layers as L
from ibsec.keys import KeyType
from scapy.layers.l2 import Ether
from scapy.packet import Raw
from test_layers import roce_frame


def hexbytes(*parts: str) -> bytes:
    return bytes.fromhex("".join(parts).replace(" ", ""))


def transport_bytes(*layers: object) -> bytes:
    """Bytes from the BTH to just before the ICRC of a full frame; checks the frame's ICRC on the way."""
    frame = bytes(roce_frame(*layers))  # type: ignore[arg-type]
    assert icrc.verify(frame)
    return frame[14 + 40 + 8:-4]


def test_rc_send_only() -> None:
    got = transport_bytes(L.BTH(opcode=0x04, solicited=1, pkey=0x8001, dqpn=0x12, ackreq=1, psn=0x100),
                          Raw(b"\x01\x02\x03\x04"))
    assert got == hexbytes(
        "04",        # OpCode RC SEND Only
        "80",        # SE=1 M=0 PadCnt=00 TVer=0000
        "8001",      # P_Key
        "00",        # FECN BECN Resv6
        "000012",    # DestQP
        "80",        # AckReq=1, security mode 000, Resv4
        "000100",    # PSN
        "01020304",  # payload
    )


def test_rdma_write_only() -> None:
    got = transport_bytes(L.BTH(opcode=0x0A, dqpn=0x34, ackreq=1, psn=5),
                          L.RETH(va=0x00007F0012345000, rkey=0xDEADBEEF, dmalen=8), Raw(b"ABCDEFGH"))
    assert got == hexbytes(
        "0a 00 ffff 00 000034 80 000005",  # BTH: RC RDMA WRITE Only, default P_Key
        "00007f0012345000",  # RETH VA
        "deadbeef",  # RETH R_Key
        "00000008",  # RETH DMA Length
        "4142434445464748",
    )


def test_ack() -> None:
    got = transport_bytes(L.BTH(opcode=0x11, dqpn=0x56, psn=0x105), L.AETH(syndrome=0x1F, msn=3))
    assert got == hexbytes("11 00 ffff 00 000056 00 000105", "1f 000003")  # BTH, AETH: syndrome, MSN


def test_ud_send_only() -> None:
    got = transport_bytes(L.BTH(opcode=0x64, dqpn=0xABCD, psn=1), L.DETH(qkey=0x11111111, srcqp=2),
                          Raw(b"hi!!"))
    assert got == hexbytes("64 00 ffff 00 00abcd 00 000001", "11111111 00 000002", "68692121")


def test_sth_packet_mode_2_and_mode_4_with_ackreq() -> None:
    tag = bytes(range(16))
    got = transport_bytes(L.BTH(opcode=0x04, secmode=L.SecMode.STH_AEAD, dqpn=7, psn=9), L.STH(tag=tag),
                          Raw(b"\xaa" * 4))
    assert got == hexbytes(
        "04 00 ffff 00 000007",
        "20",  # A=0, security mode 010 (sth-aead), Resv4 0000
        "000009",
        "000102030405060708090a0b0c0d0e0f",  # STH: 128-bit tag
        "aaaaaaaa",
    )
    mode4 = bytes(L.BTH(secmode=L.SecMode.STH_HDR, ackreq=1))
    assert mode4[8] == 0b1_100_0000


def test_cm_req() -> None:
    req = L.MAD(transaction_id=0x0102030405060708) / L.CmReq(
        local_comm_id=0x11223344, service_id=0x1234, local_ca_guid=0x000000FFFE000001,
        local_qpn=0x123, responder_resources=4, initiator_depth=4,
        remote_cm_response_timeout=20, end_to_end_flow_control=1,
        starting_psn=0xABC, local_cm_response_timeout=20, retry_count=7,
        path_mtu=3, rnr_retry_count=7, max_cm_retries=15,
        primary_local_lid=1, primary_remote_lid=2, primary_local_gid="fec0::1", primary_remote_gid="fec0::2",
        primary_flow_label=0x12345, primary_packet_rate=3, primary_hop_limit=64, primary_subnet_local=1,
        primary_local_ack_timeout=14,
        private_data=L.IbsecPrivateData(secmode=2, n0=bytes(range(1, 13)), wrapped_key=b"\x5a" * 64))
    assert bytes(req) == hexbytes(
        "01 07 02 03",  # BaseVersion 1, MgmtClass CM, ClassVersion 2, R=0 Method Send
        "0000 0000",  # Status, ClassSpecific
        "0102030405060708",  # TransactionID
        "0010 0000 00000000",  # AttributeID ConnectRequest, Reserved, AttributeModifier
        "11223344 00000000",  # Local Communication ID, Reserved
        "0000000000001234",  # ServiceID
        "000000fffe000001",  # Local CA GUID
        "00000000 00000000",  # Reserved, Local Q_Key
        "000123 04",  # Local QPN, Responder Resources
        "000000 04",  # Local EECN, Initiator Depth
        "000000 a1",  # Remote EECN; timeout 10100, service RC 00, E2E flow control 1
        "000abc a7",  # Starting PSN; local CM response timeout 10100, retry count 111
        "ffff",  # Partition Key
        "37",  # Path MTU 0011, RDC 0, RNR retry 111
        "f0",  # Max CM retries 1111, SRQ 0, extended transport 000
        "0001 0002",  # primary local / remote LID
        "fec00000000000000000000000000001",
        "fec00000000000000000000000000002",
        "12345003",  # flow label 0x12345, reserved 000000, packet rate 000011
        "00 40",  # traffic class, hop limit
        "08",  # SL 0000, subnet local 1, reserved 000
        "70",  # local ACK timeout 01110, reserved 000
        "00" * 44,  # alternate path
        "01 02 0000",  # PrivateData: version 1, mode sth-aead, reserved
        "0102030405060708090a0b0c",  # N0
        "5a" * 64,  # wrapped session key
        "00" * 12,  # rest of the 92 bytes
    )


def test_trap_257() -> None:
    trap = L.MAD(transaction_id=0x42) / L.SMP() / L.Notice(
        trap_number=257, issuer_lid=3, notice_count=1,
        data_details=L.Ntc257258(lid1=1, lid2=3, key=0x8001, sl=0, qp1=0x11, qp2=0x22,
                                 gid1="fec0::10:0:ff:fe00:1", gid2="fec0::10:0:ff:fe00:3"),
        issuer_gid="fec0::10:0:ff:fe00:3", recv_port=1, mf=0x2AAAAAAAAA)
    assert bytes(trap) == hexbytes(
        "01 01 01 05 0000 0000",  # SubnMgt LID routed, version 1, Trap
        "0000000000000042",
        "0002 0000 00000000",  # AttributeID Notice
        "00" * 8,  # M_Key
        "00" * 32,  # reserved
        "82",  # IsGeneric 1, Type 2 (security)
        "000001",  # ProducerType CA
        "0101",  # TrapNumber 257
        "0003",  # IssuerLID
        "0001",  # NoticeToggle 0, NoticeCount 1
        "0000 0001 0003",  # DataDetails: reserved, LID1, LID2
        "00008001",  # the bad P_Key
        "00 000011",  # SL 0000 reserved 0000, QP1
        "00 000022",  # reserved, QP2
        "fec00000000000100000 00fffe000001",  # GID1
        "fec00000000000100000 00fffe000003",  # GID2
        "00000000",  # reserved end of DataDetails
        "fec00000000000100000 00fffe000003",  # IssuerGID
        "01 01",  # ibsec extension: version 1, receiving port 1
        "002aaaaaaaaa",  # reserved 10 bits, MF 38 bits
        "00" * 104,
    )


def test_key_distribution_mad_with_trailer() -> None:
    mad = L.MAD(transaction_id=7) / L.KeyDistribution(
        key_type=KeyType.P_SK, owners=[0x8001], pkey=0x8001, key_id=7, wrapped_key=b"\xc3" * 64,
    ) / L.MadAuth(nonce=b"\x01" * 12, tag=b"\x02" * 16)
    assert bytes(mad) == hexbytes(
        "01 0e 01 02 0000 0000",  # our vendor class 0x0E, version 1, Set
        "0000000000000007",
        "0010 0000 00000000",  # AttributeID KeyDistribution
        "03 01 8001",  # key type P_SK, one owner, P_Key
        "00000007",  # key id
        "00" * 14 + "8001",  # owner 0
        "00" * 48,  # owners 1-3 unused
        "c3" * 64,  # wrapped key
        "00" * 96,  # reserved
        "01" * 12, "02" * 16,  # authentication trailer: nonce, tag
    )


def test_pinned_ud_mad_frame_dissects() -> None:
    frame = roce_frame(L.BTH(opcode=0x64, dqpn=1), L.DETH(qkey=L.GSI_QKEY, srcqp=1),
                       L.MAD() / L.SMP() / L.Notice())
    parsed = Ether(bytes(frame))
    assert parsed[L.DETH].qkey == 0x80010000 and parsed[L.Notice].trap_number == 257
