"""A whole fabric in this process, for tests and benchmarks of the SM: software switches wired in memory.

Each switch is the software target's own device and P4Runtime gRPC service (the code of the `p4switch`
process, without AF_PACKET ports): a frame a switch sends on a linked port goes straight into the peer
switch; a frame sent on a host port goes to that host's receiver (an in-process host agent) or queue.
The SM talks to it over real gRPC exactly as to `p4switch` processes. Also here: frames as a host agent
builds them (traps signed with a CA key, P_Key floods with a forged source), for tests and benchmarks.
"""

from __future__ import annotations

import contextlib
import json
import logging
import queue
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from ibsec import addressing, keys, layers, mad_auth, names
from ibsec.builder import Builder
from ibsec.polling import poll_until
from ibsm.events import read_events
from ibsm.topology import Host, Topology, load_topology
from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from p4switch.runtime.device import Device
from p4switch.runtime.server import P4RuntimeService, serve


@dataclass
class InProcessFabric:
    """The in-process switches of a topology and where frames to hosts go (topologies.fabrics.Fabric is a
    fabric's description; this is one running in this process)."""

    topo: Topology
    path: Path
    devices: dict[str, Device]
    host_rx: dict[str, queue.Queue[bytes]] = field(default_factory=dict)
    servers: dict[str, tuple[grpc.Server, P4RuntimeService]] = field(default_factory=dict)
    receivers: dict[str, Callable[[bytes], None]] = field(default_factory=dict)
    taps: dict[str, list[bytes]] = field(default_factory=dict)

    def attach(self, host: str, receive: Callable[[bytes], None]) -> None:
        """Frames to ``host`` go to ``receive`` (a host agent) instead of its queue."""
        self.receivers[host] = receive

    def tap(self, host: str) -> list[bytes]:
        """From now on, every frame ``host`` sends is also kept in the returned list (a capture)."""
        return self.taps.setdefault(host, [])

    def send_from_host(self, host: str, frame: bytes) -> None:
        """``host`` puts ``frame`` on its cable."""
        if host in self.taps:
            self.taps[host].append(frame)
        spec = next(h for h in self.topo.hosts if h.name == host)
        self.devices[spec.switch].process(spec.port, frame)

    def entries(self, switch: str, table: str) -> list[Any]:
        device = self.devices[switch]
        assert device.switch is not None
        return list(device.switch.table_entries(table))

    def restart(self, switch: str, down: Callable[[], object] = lambda: None) -> float:
        """``switch`` restarts empty: its gRPC server stops, ``down()`` runs (e.g. to wait until the SM
        saw the loss), then a fresh device answers on the same address. The wall time it answered."""
        server, service = self.servers[switch]
        service.close()
        server.stop(grace=None).wait(5)
        down()
        old = self.devices[switch]
        self.devices[switch] = _device(switch, old.device_id, old.cpu_port)
        _wire(self, switch)
        service = P4RuntimeService(self.devices[switch], self.devices[switch].log)
        address = self.topo.switch(switch).address
        server, port = serve(service, address, max_workers=8)
        if not port:
            raise RuntimeError(f"{switch}: {address} is taken")
        self.servers[switch] = (server, service)
        return time.time()


def _device(name: str, device_id: int, cpu_port: int | None) -> Device:
    return Device(device_id, cpu_port, logging.getLogger(f"sw.{name}"))


def _wire(fabric: InProcessFabric, name: str) -> None:
    peers = {port: (peer, peer_port) for port, peer, peer_port in fabric.topo.neighbours(name)}
    hosts = {h.port: h.name for h in fabric.topo.hosts_on(name)}

    def transmit(port: int, frame: bytes) -> None:
        if port in peers:
            peer, peer_port = peers[port]
            fabric.devices[peer].process(peer_port, frame)
        elif port in hosts:
            receive = fabric.receivers.get(hosts[port])
            if receive is not None:
                receive(frame)
            else:
                fabric.host_rx[hosts[port]].put(frame)

    fabric.devices[name].transmit = transmit


@contextlib.contextmanager
def inprocess_fabric(source: Path, workdir: Path) -> Iterator[InProcessFabric]:
    """Start one in-process switch per switch of ``source`` and write the topology with their addresses."""
    doc = json.loads(source.read_text())
    devices: dict[str, Device] = {}
    servers: dict[str, tuple[grpc.Server, P4RuntimeService]] = {}
    try:
        for sw in doc["switches"]:
            device = _device(sw["name"], sw.get("device_id", 1), sw.get("cpu_port", names.CPU_PORT))
            service = P4RuntimeService(device, device.log)
            server, port = serve(service, "127.0.0.1:0", max_workers=8)
            devices[sw["name"]] = device
            servers[sw["name"]] = (server, service)
            sw["address"] = f"127.0.0.1:{port}"
        path = workdir / "topology.json"
        path.write_text(json.dumps(doc))
        fabric = InProcessFabric(load_topology(path), path, devices, servers=servers)
        fabric.host_rx = {h.name: queue.Queue() for h in fabric.topo.hosts}
        for name in devices:
            _wire(fabric, name)
        yield fabric
    finally:
        for server, service in servers.values():
            service.close()
            server.stop(grace=None).wait(5)


SM_START_TIMEOUT = 180.0  # seconds for sm run to program every switch (a loaded 2-core machine is slow)


@contextlib.contextmanager
def sm_process(fab: InProcessFabric, workdir: Path, store: keys.KeyStore, *extra: str
               ) -> Iterator[subprocess.Popen[bytes]]:
    """``sm run`` on the in-process fabric, in its own process as deployed, until it has programmed
    every switch; stopped with SIGTERM on exit. ``extra``: more ``sm run`` options."""
    store.save(workdir / "sm.keys")
    events = workdir / "events.jsonl"
    start = time.time()
    argv = [sys.executable, "-m", "ibsm.cli", "run", "--topology", str(fab.path), "--run-dir", str(workdir),
            "--keys", str(workdir / "sm.keys"), *extra]
    with open(workdir / "sm.out", "ab") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
    try:
        def ready() -> bool:
            return any(e["event"] == "fabric-ready" and e["wall"] >= start for e in events_of(events))

        if not poll_until(lambda: ready() or proc.poll() is not None, SM_START_TIMEOUT) or not ready():
            output = (workdir / "sm.out").read_text()[-2000:]
            raise RuntimeError(f"sm did not program the fabric: {output}")
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def events_of(path: Path) -> list[dict[str, Any]]:
    """The events an SM wrote to ``path`` so far (none before it made the file)."""
    return list(read_events(path)) if path.exists() else []


# -------------------------------------------------------------------------------------------------------
# frames as host agents build them
# -------------------------------------------------------------------------------------------------------

_last_tid = [0]


def next_tid() -> int:
    """A TransactionID as an agent makes it: the time in nanoseconds, strictly increasing."""
    _last_tid[0] = max(_last_tid[0] + 1, time.time_ns())
    return _last_tid[0]


def ca_keys(topo: Topology) -> keys.KeyStore:
    store = keys.KeyStore()
    for host in topo.hosts:
        store.enroll(host.guid)
    return store


def trap_257(topo: Topology, victim: Host, key: keys.Key, *, bad_pkey: int, claimed_gid: str, mf: int,
             tid: int | None = None) -> bytes:
    """The frame ``victim``'s agent sends to the SM after a packet with ``bad_pkey`` from ``claimed_gid``."""
    notice = layers.bad_key_notice(layers.TRAP_BAD_PKEY, lid=victim.lid, gid=victim.gid, key=bad_pkey,
                                   src_gid=claimed_gid, src_qp=0, dst_qp=1, mf=mf)
    return sealed_mad(topo, victim, key, layers.trap_mad(notice, next_tid() if tid is None else tid))


def sealed_mad(topo: Topology, sender: Host, key: keys.Key, mad: bytes) -> bytes:
    """``mad`` from ``sender`` to the SM, authenticated under ``sender``'s CA key."""
    mac = bytes.fromhex(addressing.guid_to_mac(sender.guid).replace(":", ""))
    builder = Builder(mac, addressing.parse_gid(sender.gid).to_bytes())
    payload = mad_auth.seal(key.material, mad, sender.gid)
    return builder.mad_frame(topo.sm_gid, 0xFFFF, payload)


def flood_frame(topo: Topology, claimed: str, victim: str, pkey: int) -> bytes:
    """One packet of a P_Key flood: a UD SEND with ``pkey`` whose source GID is forged as ``claimed``'s
    (a host's name, or ``"SM"`` for the SM's own GID)."""
    hosts = {h.name: h for h in topo.hosts}
    source = topo.sm_gid if claimed == "SM" else hosts[claimed].gid
    return bytes(Ether(src=addressing.guid_to_mac(addressing.parse_gid(source).guid),
                       dst=addressing.guid_to_mac(hosts[victim].guid))
                 / IPv6(src=source, dst=hosts[victim].gid)
                 / UDP(sport=0xC000, dport=4791)
                 / layers.BTH(opcode=0x64, pkey=pkey, dqpn=0x10, psn=1)
                 / layers.DETH(qkey=0x1111, srcqp=2) / Raw(b"x" * 16))
