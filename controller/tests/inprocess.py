"""A whole fabric in this process: one p4switch P4Runtime server per switch, links wired in memory.

Each switch is the software target's own device and gRPC service (the same code as the `p4switch`
process, without AF_PACKET ports): a frame a switch sends on a linked port goes straight into the peer
switch; a frame sent on a host port lands in that host's queue. Fast enough for unit tests of the SM's
P4Runtime behaviour; the same tests' scenarios run against real processes in test_processes.py.
"""

from __future__ import annotations

import contextlib
import json
import logging
import queue
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from ibsm.topology import Topology, load_topology

from p4switch.runtime.device import Device
from p4switch.runtime.server import P4RuntimeService, serve


@dataclass
class Fabric:
    topo: Topology
    path: Path
    devices: dict[str, Device]
    host_rx: dict[str, queue.Queue[bytes]] = field(default_factory=dict)
    servers: dict[str, tuple[grpc.Server, P4RuntimeService]] = field(default_factory=dict)
    receivers: dict[str, Callable[[bytes], None]] = field(default_factory=dict)

    def attach(self, host: str, receive: Callable[[bytes], None]) -> None:
        """Frames to ``host`` go to ``receive`` (a host agent) instead of its queue."""
        self.receivers[host] = receive

    def send_from_host(self, host: str, frame: bytes) -> None:
        """``host`` puts ``frame`` on its cable."""
        spec = next(h for h in self.topo.hosts if h.name == host)
        self.devices[spec.switch].process(spec.port, frame)

    def entries(self, switch: str, table: str) -> list[Any]:
        device = self.devices[switch]
        assert device.switch is not None
        return list(device.switch.table_entries(table))


def _wire(fabric: Fabric, name: str) -> None:
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
def inprocess_fabric(source: Path, workdir: Path) -> Iterator[Fabric]:
    """Start one in-process switch per switch of ``source`` and write the topology with their addresses."""
    doc = json.loads(source.read_text())
    devices: dict[str, Device] = {}
    servers: dict[str, tuple[grpc.Server, P4RuntimeService]] = {}
    try:
        for sw in doc["switches"]:
            log = logging.getLogger(f"sw.{sw['name']}")
            device = Device(sw.get("device_id", 1), sw.get("cpu_port", 255), log)
            service = P4RuntimeService(device, device.log)
            server, port = serve(service, "127.0.0.1:0", max_workers=8)
            devices[sw["name"]] = device
            servers[sw["name"]] = (server, service)
            sw["address"] = f"127.0.0.1:{port}"
        path = workdir / "topology.json"
        path.write_text(json.dumps(doc))
        fabric = Fabric(load_topology(path), path, devices, servers=servers)
        fabric.host_rx = {h.name: queue.Queue() for h in fabric.topo.hosts}
        for name in devices:
            _wire(fabric, name)
        yield fabric
    finally:
        for server, service in servers.values():
            service.close()
            server.stop(grace=None).wait(5)
