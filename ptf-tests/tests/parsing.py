"""Parsing: every RoCEv2 packet kind is parsed and forwarded byte for byte; truncated frames are dropped
and counted by parser error, never forwarded half-parsed."""

from __future__ import annotations

from ibsec.layers import EXT_LAYERS
from ibsec.opcodes import BTH_LEN, OPCODES, Service
from ibsec.rocev2 import BTH_AT
from ibsec_test import (
    IbsecTest,
    build_ack,
    build_mad,
    build_plain_ipv6,
    build_rc_send,
    build_rdma_write,
    build_roce,
    build_sth_packet,
    build_ud_send,
    gid,
)
from scapy.packet import Packet

IN_PORT, OUT_PORT = 1, 2
BTH_END = BTH_AT + BTH_LEN
"""Offset of the first byte after the BTH in a RoCEv2 frame."""


class ParsingTest(IbsecTest):
    """A fabric port in, one route out: the packet's only path through the switch."""

    def setUp(self) -> None:
        super().setUp()
        self.add_fabric_ports(IN_PORT)
        self.add_route(gid(0x20), OUT_PORT)

    def check_forwarded_unchanged(self, packet: Packet | bytes) -> None:
        frame = bytes(packet)
        self.send(IN_PORT, frame)
        self.verify_forwarded(frame, OUT_PORT)

    def check_truncated_dropped(self, frame: bytes) -> None:
        too_short = self.parser_errors("PACKET_TOO_SHORT")
        dropped = self.drops("PARSER_ERROR")
        self.send(IN_PORT, frame)
        self.verify_dropped()
        self.assertEqual(self.parser_errors("PACKET_TOO_SHORT"), too_short + 1)
        self.assertEqual(self.drops("PARSER_ERROR"), dropped + 1)


class EveryPacketKindForwarded(ParsingTest):
    """RC SEND (BTH, payload), RDMA WRITE with immediate (RETH, ImmDt), ACK (AETH), UD SEND (DETH), a MAD on
    QP1 (DETH, MAD header), security modes 2-4 (STH) and plain IPv6 are parsed and leave byte for byte as
    they came: the deparser writes every parsed header back in wire order."""

    def runTest(self) -> None:
        kinds = {
            "RC SEND": build_rc_send(),
            "RDMA WRITE": build_rdma_write(),
            "ACK": build_ack(),
            "UD SEND": build_ud_send(),
            "MAD": build_mad(),
            "STH mode 2": build_sth_packet(sec_mode=2),
            "STH mode 3": build_sth_packet(sec_mode=3),
            "STH mode 4": build_sth_packet(sec_mode=4),
            "plain IPv6": build_plain_ipv6(),
        }
        for kind, packet in kinds.items():
            with self.subTest(kind=kind):
                self.check_forwarded_unchanged(packet)


class TruncatedHeadersDropped(ParsingTest):
    """A frame that ends inside the BTH or inside the extension header its opcode announces (RETH/ImmDt,
    AETH, DETH, the MAD header on QP1, the STH of modes 2-4) is dropped and counted as PacketTooShort."""

    def runTest(self) -> None:
        cases = {
            "BTH": (build_rc_send(), BTH_END - 1),
            "RETH+ImmDt": (build_rdma_write(), BTH_END + 16 + 3),
            "AETH": (build_ack(), BTH_END + 3),
            "DETH": (build_ud_send(), BTH_END + 7),
            "MAD": (build_mad(), BTH_END + 8 + 23),
            "STH": (build_sth_packet(), BTH_END + 15),
        }
        for name, (packet, length) in cases.items():
            with self.subTest(header=name):
                self.check_truncated_dropped(bytes(packet)[:length])


class TruncationDependsOnOpcodeModeAndQp(ParsingTest):
    """The same short lengths are whole packets when the opcode, security mode or QP announces no more:
    the parser follows the BTH, it does not guess."""

    def runTest(self) -> None:
        self.check_forwarded_unchanged(bytes(build_sth_packet(sec_mode=0))[:BTH_END + 15])
        self.check_forwarded_unchanged(bytes(build_mad(dest_qp=2))[:BTH_END + 8 + 23])


class TruncatedIpv6Dropped(ParsingTest):
    """A frame that ends inside the IPv6 header is dropped and counted too."""

    def runTest(self) -> None:
        self.check_truncated_dropped(bytes(build_plain_ipv6())[:14 + 30])


class EveryOpcodeOfTheOpcodeTable(ParsingTest):
    """For every RC, UC and UD opcode of scapy-tools/ibsec/opcodes.py the parser extracts exactly the
    extension headers the table lists: the whole packet leaves unchanged, and the same packet cut one byte
    short of its last extension header is dropped as PacketTooShort. (RD and CNP are forwarded on the BTH
    alone and not listed here.)"""

    def runTest(self) -> None:
        for opcode in OPCODES.values():
            if opcode.service not in (Service.RC, Service.UC, Service.UD) or not opcode.headers:
                continue
            with self.subTest(opcode=opcode.name):
                frame = bytes(build_roce(opcode.code, *(EXT_LAYERS[ext]() for ext in opcode.headers)))
                self.check_forwarded_unchanged(frame)
                self.check_truncated_dropped(frame[:BTH_END + sum(ext.length for ext in opcode.headers) - 1])
