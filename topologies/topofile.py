"""The run's topology file: what the SM reads (docs/topology-file.md, checked by ``ibsm.topology``).

The launcher knows things the fabric graph does not: where each switch's P4Runtime server listens, the
partitions and their security modes, the routing. :func:`topology_document` joins them into one JSON
document; :func:`partitions_round_robin` is the default partition layout.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ibsec import addressing
from ibsec.names import CPU_PORT, SECURITY_MODES

from .fabrics import Fabric, HostInfo

SUBNET = 0x0001
SM_MAC = "02:00:00:ff:ff:fe"
ROUTINGS = ("deterministic", "adaptive")


def sm_gid() -> str:
    """The SM's well-known GID: a MAC-derived GUID outside the host index range, in our subnet."""
    return addressing.make_gid(SUBNET, addressing.mac_to_guid(SM_MAC))


@dataclass(frozen=True)
class PartitionSpec:
    """A partition: its 15-bit P_Key base, the member hosts (full members) and its security mode."""

    name: str
    pkey: int
    members: tuple[str, ...]
    security: str = "none"

    @property
    def full_pkey(self) -> int:
        """The P_Key a full member puts on the wire (membership bit 15 set)."""
        return 0x8000 | self.pkey


def partitions_round_robin(hosts: Sequence[HostInfo], count: int, security: str) -> list[PartitionSpec]:
    """``count`` partitions p1..pN (P_Key bases 0x0001..), host i in partition i mod N, so every partition
    spans the fabric and its traffic crosses the upper levels. ``security`` is one mode for all, or a
    comma-separated list that partition n takes its mode from (n mod the list's length)."""
    modes = security.split(",")
    bad = [m for m in modes if m not in SECURITY_MODES]
    if bad:
        raise ValueError(f"security mode {bad[0]!r}: expected one of {', '.join(SECURITY_MODES)}")
    return [PartitionSpec(f"p{n + 1}", n + 1, tuple(h.name for h in hosts if h.index % count == n),
                          modes[n % len(modes)]) for n in range(count)]


def host_gid(host: HostInfo) -> str:
    return addressing.host_gid(host.index, SUBNET)


def topology_document(fabric: Fabric, addresses: Mapping[str, str], partitions: Sequence[PartitionSpec],
                      routing: str = "deterministic") -> dict[str, Any]:
    """The SM's topology document; ``addresses`` maps each switch to its P4Runtime HOST:PORT."""
    if routing not in ROUTINGS:
        raise ValueError(f"routing must be one of {', '.join(ROUTINGS)}")
    hosts = fabric.hosts()
    guid = {h.name: addressing.host_guid(h.index) for h in hosts}
    switches = []
    for device_id, sw in enumerate(fabric.switches(), start=1):
        entry: dict[str, Any] = {"name": sw.name, "address": addresses[sw.name], "device_id": device_id,
                                 "cpu_port": CPU_PORT, "ports": list(sw.ports)}
        if sw.level is not None:
            entry["level"] = sw.level
        if sw.coord is not None:
            entry["coord"] = list(sw.coord)
        switches.append(entry)
    doc: dict[str, Any] = {
        "format": "ibsec-topology",
        "version": 1,
        "name": fabric.name,
        "kind": fabric.kind,
        "routing": routing,
        "sm": {"gid": sm_gid()},
        "switches": switches,
        "links": [{"a": list(link.a), "b": list(link.b)} for link in fabric.links()],
        "hosts": [{"name": h.name, "switch": h.switch, "port": h.port, "guid": f"{guid[h.name]:#018x}",
                   "lid": addressing.host_lid(h.index), "gid": host_gid(h)} for h in hosts],
        "partitions": [{"name": p.name, "pkey": f"{p.pkey:#06x}", "security": p.security,
                        "members": [{"guid": f"{guid[m]:#018x}", "membership": "full"} for m in p.members]}
                       for p in partitions],
    }
    if fabric.dimensions:
        doc["dimensions"] = list(fabric.dimensions)
    return doc


def write_json(path: Path, doc: Any, mode: int = 0o644) -> None:
    """Write ``doc`` as indented JSON with ``mode`` set before any byte lands (key files need 0600)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    os.fchmod(fd, mode)
    with os.fdopen(fd, "w") as out:
        json.dump(doc, out, indent=2)
        out.write("\n")
