"""Our Wireshark dissector traces marking fields with a run's topology.json, as the SM does.

For each fabric the launcher builds, frames from every host to every other carry the MF the switches
would have written; tshark with ``-o ibsec.topology:topology.json -o ibsec.at_receiver:TRUE`` (a capture
of the receiver's port) must name the same switch, port and host as the SM's traceback
(``ibsm.fabric.trace``), also for frames whose source GID lies, and for the MF a receiver puts in its
bad-P_Key trap (traced whatever the capture). Elsewhere on the path nothing is traced: the MF is not
complete there. Needs tshark; skipped with the reason without it.
"""

from __future__ import annotations

import itertools
import shutil
from pathlib import Path

import pytest
from ibsec import addressing, mad_auth
from ibsec import layers as L
from ibsec import wireshark as ws
from ibsec.marking import Kind
from ibsm.fabric import FabricPlan, plan_fabric, trace
from ibsm.topology import Host, Topology, load_topology
from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether
from scapy.packet import Raw
from scapy.utils import wrpcap

from topologies import fabrics, topofile

pytestmark = pytest.mark.skipif(shutil.which("tshark") is None,
                                reason="tshark is not installed (scripts/setup.sh installs it)")

FABRICS = {
    "fat-tree-k2-l3": lambda: fabrics.fat_tree(2, 3),
    "fat-tree-k4-l2": lambda: fabrics.fat_tree(4, 2),
    "mesh-4x4": lambda: fabrics.grid("mesh", (4, 4)),
    "torus-4x4": lambda: fabrics.grid("torus", (4, 4)),
    "mesh3d-3x2x2": lambda: fabrics.grid("mesh", (3, 2, 2)),
    "hypercube-3": lambda: fabrics.hypercube(3),
}
ETHER = Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")  # given: no neighbour lookup per frame
FIELDS = ["ibsec.traced_host", "ibsec.traced_switch", "ibsec.traced_port", "ibsec.claimed_host",
          "ibsec.receiver", "ibsec.mf.scheme", "_ws.expert.message"]


def topology_file(tmp_path: Path, fabric: fabrics.Fabric) -> Path:
    addresses = {sw.name: f"127.0.0.1:{50000 + i}" for i, sw in enumerate(fabric.switches())}
    doc = topofile.topology_document(fabric, addresses, topofile.partitions_round_robin(
        fabric.hosts(), 2, "sth-aead"))
    path = tmp_path / "topology.json"
    topofile.write_json(path, doc)
    return path


def marks(topo: Topology, plan: FabricPlan, source: Host, receiver: Host) -> int:
    """The MF a packet from ``source`` carries when it reaches ``receiver`` (what the switches write)."""
    if plan.fat_tree is not None:
        tree, src, dst = plan.fat_tree, plan.addresses[source.name], plan.addresses[receiver.name]
        differ = [level for level in range(tree.levels) if tree.digit(src, level) != tree.digit(dst, level)]
        return tree.encode(tree.marks_of(src, max(differ, default=0)))  # it turns at the highest difference
    assert plan.ddpm is not None
    here, there = topo.switch(source.switch).coord or (), topo.switch(receiver.switch).coord or ()
    if plan.ddpm.kind is Kind.HYPERCUBE:
        vector = tuple(s ^ d for s, d in zip(here, there, strict=True))
    else:
        vector = tuple(d - s for s, d in zip(here, there, strict=True))
    return plan.ddpm.pack(vector, plan.host_index[source.name])


def frame(src_gid: str, receiver: Host, mf: int) -> bytes:
    ip = IPv6(src=src_gid, dst=addressing.mf_set(receiver.gid, mf))
    bth = L.BTH(opcode=0x04, dqpn=0x42, pkey=0x8001)
    return bytes(ETHER / ip / UDP(sport=0xC001, chksum=0) / bth / Raw(bytes(32)))


@pytest.mark.parametrize("name", list(FABRICS))
def test_the_dissector_traces_every_host_as_the_sm_does(tmp_path: Path, name: str) -> None:
    path = topology_file(tmp_path, FABRICS[name]())
    topo = load_topology(path)
    plan = plan_fabric(topo)
    cases, built = [], []
    for i, (source, receiver) in enumerate(itertools.permutations(topo.hosts, 2)):
        mf = marks(topo, plan, source, receiver)
        assert trace(topo, plan, receiver, mf).host == source.name  # the SM's reading: the oracle
        liar = topo.hosts[(topo.hosts.index(source) + 1) % len(topo.hosts)] if i % 2 else source
        cases.append((source, receiver, liar))
        built.append(frame(liar.gid, receiver, mf))
    capture = tmp_path / "marked.pcap"
    wrpcap(str(capture), [Ether(f) for f in built])
    got = ws.read_fields(capture, FIELDS, {"ibsec.topology": str(path), "ibsec.at_receiver": "TRUE"})
    scheme = "port-marking" if plan.fat_tree else "ddpm"
    for (source, receiver, liar), g in zip(cases, got, strict=True):
        where = f"{source.name} -> {receiver.name}"
        assert (g["ibsec.traced_host"], g["ibsec.traced_switch"], g["ibsec.traced_port"]) == \
            ([source.name], [source.switch], [str(source.port)]), where
        assert g["ibsec.mf.scheme"] == [scheme], where
        assert g["ibsec.receiver"] == [f"{receiver.name} on {receiver.switch}"], where
        assert g["ibsec.claimed_host"] == [liar.name], where
        spoofed = [m for m in g["_ws.expert.message"] if m.startswith("claims ")]
        said = f"claims {liar.name}, traced to {source.name} ({source.switch} port {source.port})"
        assert spoofed == ([said] if liar is not source else []), where


def test_a_bad_pkey_trap_traces_the_offending_packet_to_its_true_source(tmp_path: Path) -> None:
    path = topology_file(tmp_path, fabrics.fat_tree(2, 3))
    topo = load_topology(path)
    plan = plan_fabric(topo)
    attacker, claimed, victim = topo.hosts[7], topo.hosts[1], topo.hosts[0]
    mf = marks(topo, plan, attacker, victim)
    notice = L.Notice(trap_number=257, issuer_lid=victim.lid, issuer_gid=victim.gid, recv_port=1, mf=mf,
                      data_details=L.Ntc257258(lid1=claimed.lid, lid2=victim.lid, key=0x7BAD,
                                               gid1=claimed.gid, gid2=victim.gid))
    sm_gid = topofile.sm_gid()
    pkt = (ETHER / IPv6(src=victim.gid, dst=sm_gid) / UDP(sport=0xC001, chksum=0) / L.BTH(dqpn=1)
           / L.DETH(qkey=L.GSI_QKEY, srcqp=1) / L.MAD(transaction_id=1) / L.SMP() / notice)
    capture = tmp_path / "trap.pcap"
    wrpcap(str(capture), [mad_auth.sign_packet(bytes(16), pkt)])
    got = ws.read_fields(capture, FIELDS, {"ibsec.topology": str(path)})[0]
    assert got["ibsec.traced_host"] == [attacker.name]  # the trap's own frame goes to the SM: no host there
    assert got["ibsec.claimed_host"] == [victim.name, claimed.name]  # the trap's sender, the spoofed GID1
    assert f"claims {claimed.name}, traced to {attacker.name} ({attacker.switch} port {attacker.port})" in \
        got["_ws.expert.message"]


def test_an_unusable_topology_file_is_said_and_the_raw_mf_still_shown(tmp_path: Path) -> None:
    bad = tmp_path / "topology.json"
    bad.write_text('{"format": "ibsec-topology", "hosts": [')
    host = Host("h0", "s0", 1, 1, 1, addressing.host_gid(0, 1))
    capture = tmp_path / "one.pcap"
    wrpcap(str(capture), [Ether(frame(addressing.host_gid(1, 1), host, 0x15))])
    got = ws.read_fields(capture, ["ibsec.mf", *FIELDS], {"ibsec.topology": str(bad)})[0]
    assert got["ibsec.mf"] == ["0x0000000000000015"] and got["ibsec.traced_host"] == []
    assert any("topology.json" in m for m in got["_ws.expert.message"])


def test_frames_captured_inside_the_fabric_are_not_traced(tmp_path: Path) -> None:
    """Before its turn a packet's MF lacks the levels above (here h7's packet to h0 has only its leaf's
    mark): read as at the receiver it would name h6, so without ibsec.at_receiver nothing is traced."""
    path = topology_file(tmp_path, fabrics.fat_tree(2, 3))
    topo = load_topology(path)
    plan = plan_fabric(topo)
    assert plan.fat_tree is not None
    source, receiver = topo.hosts[7], topo.hosts[0]
    leaf_only = plan.fat_tree.encode(plan.fat_tree.marks_of(plan.addresses[source.name], 0))
    capture = tmp_path / "inside.pcap"
    wrpcap(str(capture), [Ether(frame(source.gid, receiver, leaf_only))])
    inside = ws.read_fields(capture, ["ibsec.mf.digit", *FIELDS], {"ibsec.topology": str(path)})[0]
    assert inside["ibsec.mf.digit"] == [str(plan.addresses[source.name][-1])]  # the marks so far, decoded
    assert inside["ibsec.traced_host"] == []
    assert not any(m.startswith("claims") for m in inside["_ws.expert.message"])
    prefs = {"ibsec.topology": str(path), "ibsec.at_receiver": "TRUE"}
    wrong = trace(topo, plan, receiver, leaf_only).host
    assert ws.read_fields(capture, FIELDS, prefs)[0]["ibsec.traced_host"] == [wrong] != [source.name]
