"""Vocabulary for the ibsec-fabric data plane tests: add_<table>_entry, build_<packet>, verify_<effect>.

Tests speak in the SM's terms (host ports, down-port digits, DDPM deltas, partition modes, routes) and
this layer turns them into P4Runtime entities by name; the marking operands come from
scapy-tools/ibsec/marking.py, the same codecs the SM and the traceback use.
"""

from __future__ import annotations

import itertools
import time
from typing import Any

from base_test import P4RuntimeTest
from ibsec import icrc, rocev2
from ibsec.addressing import MF_BITS, MF_MAX, MF_MSB, gid_to_int, make_gid, mf_get, mf_set
from ibsec.layers import AETH, BTH, DETH, MAD, RETH, STH, ImmDt, Method, MgmtClass
from ibsec.marking import FatTreeLayout, Kind, PortEntry
from ibsec.names import p4_const as const
from ptf import ptfutils, testutils
from ptf.mask import Mask
from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether
from scapy.packet import Packet, Raw

GID_BITS = 128
MF_MSB_OFFSET = GID_BITS - 1 - MF_MSB
"""Bit offset of the MF's first bit inside the destination GID (bit 127 comes first on the wire)."""
HOST_MAC = "02:00:00:00:00:01"
FABRIC_MAC = "02:00:00:00:00:02"
SUBNET = 0x0001


def gid(guid: int, subnet: int = SUBNET, mf: int = 0) -> str:
    """A site-local GID of our fabric."""
    return make_gid(subnet, guid, site_local=True, mf=mf)


def dst_id(address: str) -> int:
    """dst_addr[79:0] of a GID: what routes and the SM punt entry match."""
    return gid_to_int(address) & ((1 << 80) - 1)


class IbsecTest(P4RuntimeTest):
    """Base of every data-plane test of p4src/main.p4."""

    def setUp(self) -> None:
        super().setUp()
        self._ids = itertools.count(1)

    # ---- port roles -------------------------------------------------------------------------------------

    def add_port_roles_table_entry(self, port: int, action: str, **params: int) -> None:
        """One port's role: seed_host_mark(mf_seed), mark_down_port(mark_mask, mark_value) or keep_mark."""
        self.insert_table_entry("port_roles_table", {"standard_metadata.ingress_port": port}, action, params)

    def add_host_port(self, port: int, mf_seed: int = 0) -> None:
        """A host-facing port that replaces the MF with ``mf_seed``."""
        self.add_port_roles_table_entry(port, "seed_host_mark", mf_seed=mf_seed)

    def add_fabric_ports(self, *ports: int) -> None:
        """Ports that leave the MF as it arrives (links between switches, fat-tree up-ports)."""
        for port in ports:
            self.add_port_roles_table_entry(port, "keep_mark")

    def add_down_port(self, port: int, layout: FatTreeLayout, level: int, digit: int) -> None:
        """A fat-tree down-port of a level-``level`` switch, numbered ``digit`` by the SM."""
        entry = layout.down_port_entry(level, digit)
        self.add_port_roles_table_entry(port, "mark_down_port", mark_mask=entry.mask, mark_value=entry.addend)

    # ---- partitions -------------------------------------------------------------------------------------

    def add_partition_mode_table_entry(self, port: int, mode: str) -> None:
        """Put ``port`` in mode "invalid" (invalid-list) or "valid" (valid-list); no entry means off."""
        action = {"invalid": "filter_invalid_list", "valid": "filter_valid_list"}[mode]
        self.insert_table_entry("partition_mode_table", {"standard_metadata.ingress_port": port}, action)

    def add_invalid_pkeys_entry(self, port: int, pkey: int) -> None:
        """An Invalid_P_Key_Table entry."""
        self.insert_table_entry("invalid_pkeys", {"standard_metadata.ingress_port": port,
                                                  "hdr.bth.p_key": pkey}, "reject_pkey")

    def add_valid_pkeys_entry(self, port: int, pkey: int) -> None:
        """A partition table entry: ``pkey`` may enter on ``port``."""
        self.insert_table_entry("valid_pkeys", {"standard_metadata.ingress_port": port,
                                                "hdr.bth.p_key": pkey}, "NoAction")

    # ---- SM punt ----------------------------------------------------------------------------------------

    def add_sm_punt_table_entry(self, sm_gid: str) -> None:
        """Send packets addressed to ``sm_gid`` to the CPU port."""
        self.insert_table_entry("sm_punt_table", {"meta.dst_id": dst_id(sm_gid)}, "punt_to_sm")

    def set_punt_meter(self, port: int, rate: int, burst: int) -> None:
        """Cap PacketIns from ``port`` at ``rate`` packets/s with bursts of ``burst`` packets."""
        self.set_meter("sm_punt_meter", port, cir=rate, cburst=burst, pir=rate, pburst=burst)

    # ---- routing ----------------------------------------------------------------------------------------

    def add_route(self, destination: str, port: int, prefix_len: int = 80) -> None:
        """routes_table: ``destination``'s subnet id and GUID (first ``prefix_len`` bits) to one port."""
        match = {"meta.dst_id": (dst_id(destination), prefix_len)}
        self.insert_table_entry("routes_table", match, "forward", {"port": port})

    def add_group_route(self, destination: str, ports: list[int], prefix_len: int = 80) -> int:
        """routes_table: ``destination`` to a new group over ``ports`` (ECMP or adaptive), its members in
        route_groups_table (member i: ``ports[i]``); returns the group's id."""
        group = next(self._ids)
        for member, port in enumerate(ports):
            members = {"meta.route_group": group, "meta.route_member": member}
            self.insert_table_entry("route_groups_table", members, "forward", {"port": port})
        match = {"meta.dst_id": (dst_id(destination), prefix_len)}
        params = {"group": group, "members": len(ports)}
        self.insert_table_entry("routes_table", match, "forward_to_group", params)
        return group

    def add_offsite_routes_table_entry(self, prefix: str, prefix_len: int, port: int) -> None:
        """A route for destinations outside the site (whole 128-bit address)."""
        match = {"hdr.ipv6.dst_addr": (gid_to_int(prefix), prefix_len)}
        self.insert_table_entry("offsite_routes_table", match, "forward", {"port": port})

    def add_non_ipv6_table_entry(self, ether_type: int, port: int) -> None:
        """Let one non-IPv6 EtherType through to ``port``."""
        match = {"hdr.ethernet.ether_type": ether_type}
        self.insert_table_entry("non_ipv6_table", match, "forward", {"port": port})

    def set_spread_per_packet(self) -> None:
        """Adaptive routing: groups spread every packet, not every flow."""
        self.set_default_action("spread_mode_table", "spread_per_packet")

    # ---- DDPM -------------------------------------------------------------------------------------------

    def add_ddpm_delta_table_entry(self, port: int, kind: Kind, entry: PortEntry) -> None:
        """The delta of the link behind egress ``port`` (DdpmLayout.port_entry)."""
        match = {"standard_metadata.egress_spec": port}
        if kind is Kind.HYPERCUBE:
            self.insert_table_entry("ddpm_delta_table", match, "flip_distance",
                                    {"dimension_bit": entry.addend})
        else:
            self.insert_table_entry("ddpm_delta_table", match, "add_distance",
                                    {"addend": entry.addend, "field_mask": entry.mask})

    # ---- counters ---------------------------------------------------------------------------------------

    def drops(self, reason: str) -> int:
        """IbsecIngress.drops for DROP_<reason>."""
        return self.read_counter("drops", const(f"DROP_{reason}"))

    def parser_errors(self, error: str) -> int:
        """IbsecIngress.parser_errors for PARSER_ERROR_<error>."""
        return self.read_counter("parser_errors", const(f"PARSER_ERROR_{error}"))

    def pkey_violations(self, port: int) -> int:
        """The Ingress P_Key Violation Counter of ``port``."""
        return self.read_counter("pkey_violations", port)

    def partition_lookups(self, port: int) -> int:
        """Partition-table lookups made for packets from ``port``."""
        return self.read_counter("partition_lookups", port)

    # ---- verification -----------------------------------------------------------------------------------

    def send(self, port: int, frame: Packet | bytes) -> None:
        """Send one frame into the switch on ``port``."""
        testutils.send_packet(self, port, bytes(frame))

    def verify_forwarded(self, frame: Packet | bytes, port: int) -> None:
        """Exactly ``frame`` leaves on ``port`` and nothing else leaves."""
        testutils.verify_packet(self, bytes(frame), port)
        testutils.verify_no_other_packets(self)

    def verify_forwarded_any_mark(self, frame: Packet | bytes, port: int) -> None:
        """``frame`` leaves on ``port`` whatever the switch wrote into its MF (and so its UDP checksum):
        for tests about forwarding and filtering, not marking."""
        expected = Mask(bytes(frame))
        expected.set_do_not_care(rocev2.DST_GID_AT.start * 8 + MF_MSB_OFFSET, MF_BITS)
        expected.set_do_not_care(rocev2.UDP_CHECKSUM_AT.start * 8, 16)
        testutils.verify_packet(self, expected, port)
        testutils.verify_no_other_packets(self)

    def verify_dropped(self) -> None:
        """Nothing leaves the switch."""
        testutils.verify_no_other_packets(self)

    def verify_forwarded_any(self, frame: Packet | bytes, ports: list[int]) -> int:
        """``frame`` leaves on one of ``ports``: which one. (Call verify_dropped() after a batch to check
        that no copies left too.)"""
        index, _ = testutils.verify_packet_any_port(self, bytes(frame), ports)
        return ports[index]

    def receive_on(self, port: int) -> bytes:
        """The next frame the switch sends on ``port`` (fails the test when none comes within ptf's
        default timeout, the one every positive verify waits)."""
        result = testutils.dp_poll(self, port_number=port, timeout=ptfutils.default_timeout)
        self.assertIsInstance(result, self.dataplane.PollSuccess, f"no frame on port {port}")
        return bytes(result.packet)

    def receive_on_any(self, ports: list[int]) -> bytes:
        """The next frame the switch sends on one of ``ports``, waiting on all of them at once (frames on
        other ports are not this call's business, as with :meth:`receive_on`)."""
        deadline = time.monotonic() + ptfutils.default_timeout
        while (left := deadline - time.monotonic()) > 0:
            result = testutils.dp_poll(self, timeout=left)
            if isinstance(result, self.dataplane.PollSuccess) and result.port in ports:
                return bytes(result.packet)
        raise self.failureException(f"nothing left on {ports}")

    def verify_marked(self, out: bytes, sent: bytes, mf: int, where: str) -> None:
        """``out`` is ``sent`` with MF ``mf`` (UDP checksum zeroed if it changed), and its ICRC, which
        treats MF bits as zeros, still holds."""
        self.assertEqual(out, with_mf(sent, mf), where)
        self.assertTrue(icrc.verify(out), f"{where}: ICRC broken by marking")

    def hop(self, frame: bytes, in_port: int, out_port: int) -> bytes:
        """Send ``frame`` in on ``in_port`` and return what leaves on ``out_port`` (nothing else may)."""
        self.send(in_port, frame)
        out = self.receive_on(out_port)
        testutils.verify_no_other_packets(self)
        return out


# ---- packets -----------------------------------------------------------------------------------------


def build_roce(opcode: int, *extension: Packet, payload: bytes = b"", src: str | None = None,
               dst: str | None = None, pkey: int = 0xFFFF, dest_qp: int = 0x12, sec_mode: int = 0,
               psn: int = 1, flow_label: int = 0) -> Packet:
    """A RoCEv2 frame: Ether / IPv6 / UDP 4791 / BTH / extension headers / payload / ICRC (ibsec.layers)."""
    packet = (Ether(src=HOST_MAC, dst=FABRIC_MAC)
              / IPv6(src=src or gid(0x10), dst=dst or gid(0x20), fl=flow_label, hlim=64)
              / UDP(sport=0xC000, dport=const("ROCEV2_UDP_PORT"), chksum=0)
              / BTH(opcode=opcode, pkey=pkey, dqpn=dest_qp, secmode=sec_mode, psn=psn, ackreq=1))
    for header in extension:
        packet = packet / header
    return packet / Raw(payload) if payload else packet


def build_rc_send(**kw: Any) -> Packet:
    """RC SEND Only: BTH and payload."""
    return build_roce(const("OP_RC_SEND_ONLY"), payload=b"rc-send-payload!", **kw)


def build_rdma_write(**kw: Any) -> Packet:
    """RC RDMA WRITE Only with immediate: BTH, RETH, ImmDt, payload."""
    return build_roce(const("OP_RC_WRITE_ONLY_IMM"), RETH(va=0x1000, rkey=0x1234, dmalen=32),
                      ImmDt(immdt=0xABCD), payload=b"w" * 32, **kw)


def build_ack(**kw: Any) -> Packet:
    """RC Acknowledge: BTH and AETH."""
    return build_roce(const("OP_RC_ACKNOWLEDGE"), AETH(syndrome=0, msn=7), **kw)


def build_ud_send(**kw: Any) -> Packet:
    """UD SEND Only: BTH, DETH, payload."""
    return build_roce(const("OP_UD_SEND_ONLY"), DETH(qkey=0x11111111, srcqp=0x20),
                      payload=b"ud-datagram", **kw)


def build_mad(**kw: Any) -> Packet:
    """A 256-byte MAD on QP1: UD SEND Only with DETH (Q_Key 0x80010000) and a trap's MAD header."""
    kw.setdefault("dest_qp", const("GSI_QP"))
    return build_roce(const("OP_UD_SEND_ONLY"), DETH(qkey=0x80010000, srcqp=1),
                      MAD(mgmt_class=MgmtClass.SUBN_ADM, method=Method.TRAP, transaction_id=0x42,
                          attribute_id=0x0002), **kw)


def build_sth_packet(sec_mode: int = 2, **kw: Any) -> Packet:
    """RC SEND Only in a secure transport mode: BTH, STH (16-byte tag), payload."""
    return build_roce(const("OP_RC_SEND_ONLY"), STH(tag=bytes(range(16))), payload=b"ciphertext",
                      sec_mode=sec_mode, **kw)


def build_plain_ipv6(dst: str | None = None, dport: int = 5000) -> Packet:
    """IPv6/UDP that is not RoCEv2."""
    return (Ether(src=HOST_MAC, dst=FABRIC_MAC) / IPv6(src=gid(0x10), dst=dst or gid(0x20))
            / UDP(sport=1234, dport=dport) / Raw(b"not roce"))


def build_non_ipv6(ether_type: int = 0x0806) -> Packet:
    """A frame of another EtherType (ARP by default)."""
    return Ether(src=HOST_MAC, dst="ff:ff:ff:ff:ff:ff", type=ether_type) / Raw(b"\0" * 46)


def frame_mf(frame: bytes) -> int:
    """The MF of a frame's destination GID."""
    return mf_get(frame[rocev2.DST_GID_AT])


def with_mf(frame: bytes, mf: int) -> bytes:
    """``frame`` as a switch leaves it after writing ``mf``: a changed MF zeroes the UDP checksum."""
    if not 0 <= mf <= MF_MAX:
        raise ValueError("MF out of range")
    if frame_mf(frame) == mf:
        return frame
    out = bytearray(frame)
    out[rocev2.DST_GID_AT] = mf_set(frame[rocev2.DST_GID_AT], mf)
    out[rocev2.UDP_CHECKSUM_AT] = bytes(2)
    return bytes(out)
