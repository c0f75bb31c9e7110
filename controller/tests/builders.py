"""Topology documents built in code, for routing tests on sizes the example files do not cover."""

from __future__ import annotations

import itertools
from typing import Any

from ibsec import addressing as A

from .conftest import DATA

SM_GID = A.make_gid(1, A.mac_to_guid("02:00:00:ff:ff:fe"))
_ = DATA


def _host(i: int, switch: str, port: int) -> dict[str, Any]:
    return {"name": f"h{i}", "switch": switch, "port": port, "guid": f"{A.host_guid(i):#x}",
            "lid": A.host_lid(i), "gid": A.host_gid(i, 1)}


def _doc(kind: str, switches: list[dict[str, Any]], links: list[dict[str, Any]], hosts: list[dict[str, Any]],
         **extra: Any) -> dict[str, Any]:
    return {"format": "ibsec-topology", "version": 1, "kind": kind, "sm": {"gid": SM_GID},
            "switches": switches, "links": links, "hosts": hosts, **extra}


def fat_tree(k: int) -> dict[str, Any]:
    """The 3-level k-ary fat tree (k pods of k/2 edge and k/2 aggregation switches, (k/2)^2 cores)."""
    half = k // 2
    switches, links, hosts = [], [], []
    ports: dict[str, int] = {}

    def add(name: str, level: int) -> None:
        switches.append({"name": name, "address": "127.0.0.1:1", "level": level,
                         "ports": list(range(1, k + 1))})
        ports[name] = 0

    def link(a: str, b: str) -> None:
        ports[a] += 1
        ports[b] += 1
        links.append({"a": [a, ports[a]], "b": [b, ports[b]]})

    for pod in range(k):
        for i in range(half):
            add(f"e{pod}_{i}", 0)
            for _ in range(half):
                ports[f"e{pod}_{i}"] += 1
                hosts.append(_host(len(hosts), f"e{pod}_{i}", ports[f"e{pod}_{i}"]))
        for i in range(half):
            add(f"a{pod}_{i}", 1)
            for j in range(half):
                link(f"a{pod}_{i}", f"e{pod}_{j}")
    for c in range(half * half):
        add(f"c{c}", 2)
        for pod in range(k):
            link(f"c{c}", f"a{pod}_{c // half}")
    return _doc("fat-tree", switches, links, hosts)


def grid(kind: str, dims: tuple[int, ...], routing: str = "deterministic", hosts_per_switch: int = 1,
         host_bits: int = 4) -> dict[str, Any]:
    """A mesh, torus or hypercube with ``hosts_per_switch`` hosts on every switch."""
    coords = list(itertools.product(*(range(k) for k in dims)))
    name = {c: f"s{'_'.join(map(str, c))}" for c in coords}
    nports = hosts_per_switch + 2 * len(dims)
    switches = [{"name": name[c], "address": "127.0.0.1:1", "coord": list(c),
                 "ports": list(range(1, nports + 1))} for c in coords]
    used = {c: hosts_per_switch for c in coords}
    links = []
    for c in coords:
        for d, k in enumerate(dims):
            if c[d] + 1 < k or (kind == "torus" and k > 2):
                n = list(c)
                n[d] = (c[d] + 1) % k
                peer = tuple(n)
                used[c] += 1
                used[peer] += 1
                links.append({"a": [name[c], used[c]], "b": [name[peer], used[peer]]})
    hosts = [_host(i * hosts_per_switch + j, name[c], j + 1)
             for i, c in enumerate(coords) for j in range(hosts_per_switch)]
    return _doc(kind, switches, links, hosts, dimensions=list(dims), routing=routing, host_bits=host_bits)
