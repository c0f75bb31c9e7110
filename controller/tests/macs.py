"""Trap frames built the way the host agent builds them (its frame builder, CA-key trailer)."""

from __future__ import annotations

import itertools

from ibsec import addressing, keys, layers, mad_auth
from ibsec.agent.frames import Builder
from ibsm.topology import Host, Topology
from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether
from scapy.packet import Packet, Raw

_tids = itertools.count(1000)


def ca_keys(topo: Topology) -> keys.KeyStore:
    store = keys.KeyStore()
    for host in topo.hosts:
        store.enroll(host.guid)
    return store


def trap_257(topo: Topology, victim: Host, key: keys.Key, *, bad_pkey: int, claimed_gid: str, mf: int,
             tid: int | None = None) -> bytes:
    """The frame ``victim``'s agent sends to the SM after a packet with ``bad_pkey`` from ``claimed_gid``."""
    notice = layers.Notice(
        is_generic=1, type=layers.NoticeType.SECURITY, producer_type=layers.PRODUCER_CA,
        trap_number=layers.TRAP_BAD_PKEY, issuer_lid=victim.lid,
        data_details=layers.Ntc257258(lid1=0, lid2=victim.lid, key=bad_pkey, qp1=0, qp2=1, gid1=claimed_gid,
                                      gid2=victim.gid),
        issuer_gid=victim.gid, recv_port=1, mf=mf)
    return sealed_mad(topo, victim, key, layers.MAD(
        mgmt_class=layers.MgmtClass.SUBN_LID, method=layers.Method.TRAP, attribute_id=layers.ATTR_NOTICE,
        transaction_id=next(_tids) if tid is None else tid) / layers.SMP() / notice)


def sealed_mad(topo: Topology, sender: Host, key: keys.Key, mad: Packet) -> bytes:
    mac = bytes.fromhex(addressing.guid_to_mac(sender.guid).replace(":", ""))
    builder = Builder(mac, addressing.parse_gid(sender.gid).to_bytes())
    payload = mad_auth.seal(key.material, bytes(mad)[: layers.MAD_LEN], sender.gid)
    return builder.mad_frame(topo.sm_gid, 0xFFFF, payload)


def flood_frame(topo: Topology, claimed: str, victim: str, pkey: int) -> bytes:
    """One packet of a P_Key flood: a UD SEND with ``pkey`` whose source GID is forged as ``claimed``'s."""
    hosts = {h.name: h for h in topo.hosts}
    return bytes(Ether(src=addressing.guid_to_mac(hosts[claimed].guid),
                       dst=addressing.guid_to_mac(hosts[victim].guid))
                 / IPv6(src=hosts[claimed].gid, dst=hosts[victim].gid)
                 / UDP(sport=0xC000, dport=4791)
                 / layers.BTH(opcode=0x64, pkey=pkey, dqpn=0x10, psn=1)
                 / layers.DETH(qkey=0x1111, srcqp=2) / Raw(b"x" * 16))
