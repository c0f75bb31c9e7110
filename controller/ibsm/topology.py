"""The topology file (docs/topology-file.md): read, check field by field, and model the fabric.

The launcher writes one JSON file per run; the SM reads it and nothing else to know the fabric. Every
check names the first bad field by its path (``switches[1].ports[0]``, ``hosts[3].gid``), so a wrong file
stops the SM with one clear line instead of a traceback half way through programming the switches.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ibsec import addressing, configfile
from ibsec.names import CPU_PORT, SECURITY_MODES

FORMAT = "ibsec-topology"
VERSION = 1
KINDS = ("fat-tree", "mesh", "torus", "hypercube")
ROUTINGS = ("deterministic", "adaptive")
MAX_PORT = 510  # 9-bit ports; 511 is the drop port
MAX_TCP_PORT = 65535


class TopologyError(ValueError):
    """The topology file is wrong; the message starts with the path of the first bad field (``field``),
    and, once :func:`load_topology` adds them, with the file and the line."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class Switch:
    """One P4 switch: where its P4Runtime server listens, its ports and its place in the topology."""

    name: str
    address: str
    device_id: int
    ports: tuple[int, ...]
    cpu_port: int = CPU_PORT
    level: int | None = None  # fat tree: 0 = leaf
    coord: tuple[int, ...] | None = None  # mesh, torus, hypercube


@dataclass(frozen=True)
class Link:
    """A cable between two switch ports."""

    a: tuple[str, int]
    b: tuple[str, int]


@dataclass(frozen=True)
class Host:
    """A host port: where it is attached and its addresses."""

    name: str
    switch: str
    port: int
    guid: int
    lid: int
    gid: str


@dataclass(frozen=True)
class Member:
    """A partition member (a port GUID, or a keyword such as ALL or SELF) and its membership."""

    guid: int | str  # an int GUID, or "ALL", "ALL_CAS", "ALL_SWITCHES", "ALL_ROUTERS", "SELF"
    full: bool
    both: bool = False  # "both" was asked: full and limited (OpenSM without allow_both_pkeys: full)
    indx0: bool = False  # the partition's P_Key goes to index 0 of this port's table
    definition: int = field(default=0, compare=False)  # which definition of partitions.conf added it:
    # OpenSM applies them in file order, and index 0 is decided across partitions in that order


@dataclass(frozen=True)
class McGroup:
    """A multicast group a partitions.conf creates (``ipoib`` broadcast group or an ``mgid=`` line)."""

    mgid: str  # as OpenSM creates it: the partition's P_Key in an IP group's MGID, the scope nibble set
    pkey: int  # the partition's P_Key with the full-member bit, as in the MCMemberRecord
    qkey: int
    mtu: int = 4  # IBTA codes: 4 = 2048 bytes
    rate: int = 3  # IBTA codes: 3 = 10 Gb/s
    sl: int = 0
    scope: int = 2  # 2 = link local
    tclass: int = 0
    flow_label: int = 0


@dataclass(frozen=True)
class Partition:
    """One partition: its 15-bit P_Key base, members and security mode (DESIGN 3, Nexus per partition)."""

    name: str
    pkey: int  # the 15-bit base; membership lives in bit 15 of each member's table entry
    members: tuple[Member, ...]
    security: int = 0
    ipoib: bool = False
    sl: int = 0
    groups: tuple[McGroup, ...] = ()


@dataclass(frozen=True)
class Topology:
    """The whole fabric as the SM sees it."""

    name: str
    kind: str
    routing: str
    switches: tuple[Switch, ...]
    links: tuple[Link, ...]
    hosts: tuple[Host, ...]
    partitions: tuple[Partition, ...]
    sm_gid: str
    dimensions: tuple[int, ...] = ()
    host_bits: int = 4
    source: Path | None = field(default=None, compare=False)

    def switch(self, name: str) -> Switch:
        for sw in self.switches:
            if sw.name == name:
                return sw
        raise KeyError(f"no switch {name!r}")

    def host_by_guid(self, guid: int) -> Host | None:
        return next((h for h in self.hosts if h.guid == guid), None)

    def host_at(self, switch: str, port: int) -> Host | None:
        return next((h for h in self.hosts if h.switch == switch and h.port == port), None)

    def hosts_on(self, switch: str) -> list[Host]:
        return sorted((h for h in self.hosts if h.switch == switch), key=lambda h: h.port)

    def neighbours(self, switch: str) -> Iterator[tuple[int, str, int]]:
        """(local port, peer switch, peer port) of every link of ``switch``."""
        for link in self.links:
            if link.a[0] == switch:
                yield link.a[1], link.b[0], link.b[1]
            if link.b[0] == switch:
                yield link.b[1], link.a[0], link.a[1]


# ---------------------------------------------------------------------------------------------------------
# checking
# ---------------------------------------------------------------------------------------------------------


def _fail(path: str, message: str) -> TopologyError:
    return TopologyError(f"{path}: {message}", path)


def _get(obj: dict[str, Any], key: str, kind: type | tuple[type, ...], path: str, default: Any = ...) -> Any:
    where = f"{path}.{key}" if path else key
    if key not in obj:
        if default is ...:
            raise _fail(where, "missing")
        return default
    value = obj[key]
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise _fail(where, f"expected {names}, got {type(value).__name__} {value!r}")
    return value


def _int(value: Any, path: str, low: int, high: int) -> int:
    """An int given as a number or a "0x..." string, within [low, high]."""
    if isinstance(value, str):
        try:
            value = int(value, 0)
        except ValueError:
            raise _fail(path, f"not an integer: {value!r}") from None
    if not isinstance(value, int) or isinstance(value, bool):
        raise _fail(path, f"expected an integer, got {value!r}")
    if not low <= value <= high:
        raise _fail(path, f"{value} outside {low}..{high}")
    return value


def _list(obj: dict[str, Any], key: str, path: str, default: Any = ...) -> list[Any]:
    value: list[Any] = _get(obj, key, list, path, default)
    return value


def _objects(obj: dict[str, Any], key: str, check: Callable[[dict[str, Any], str], Any]) -> list[Any]:
    out = []
    for i, item in enumerate(_list(obj, key, "")):
        path = f"{key}[{i}]"
        if not isinstance(item, dict):
            raise _fail(path, f"expected an object, got {item!r}")
        out.append(check(item, path))
    return out


def _gid(value: Any, path: str) -> str:
    if not isinstance(value, str):
        raise _fail(path, f"expected a GID string, got {value!r}")
    try:
        gid = addressing.parse_gid(value)
    except ValueError:
        raise _fail(path, f"not an IPv6 address: {value!r}") from None
    if gid.kind is addressing.PrefixKind.OTHER or gid.mf:
        raise _fail(path, f"{value} must be in fec0::/10 or fe80::/10 with a zero marking field")
    return str(ipaddress.IPv6Address(value))


def _switch(obj: dict[str, Any], path: str) -> Switch:
    name = _get(obj, "name", str, path)
    address = _get(obj, "address", str, path)
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit() or not 1 <= int(port) <= MAX_TCP_PORT:
        raise _fail(f"{path}.address", f"expected HOST:PORT with a TCP port in 1..{MAX_TCP_PORT}, "
                    f"got {address!r}")
    ports = _list(obj, "ports", path)
    numbers = tuple(_int(p, f"{path}.ports[{i}]", 1, MAX_PORT) for i, p in enumerate(ports))
    if len(set(numbers)) != len(numbers):
        raise _fail(f"{path}.ports", "a port number appears twice")
    cpu_port = _int(obj.get("cpu_port", CPU_PORT), f"{path}.cpu_port", 1, MAX_PORT)
    if cpu_port in numbers:
        raise _fail(f"{path}.ports", f"port {cpu_port} is the CPU port")
    level = obj.get("level")
    coord = obj.get("coord")
    return Switch(
        name=name,
        address=address,
        device_id=_int(obj.get("device_id", 1), f"{path}.device_id", 0, (1 << 64) - 1),
        ports=numbers,
        cpu_port=cpu_port,
        level=None if level is None else _int(level, f"{path}.level", 0, 7),
        coord=None if coord is None else tuple(
            _int(c, f"{path}.coord[{i}]", 0, 1 << 20) for i, c in enumerate(_get(obj, "coord", list, path))),
    )


def _link(obj: dict[str, Any], path: str) -> Link:
    ends = []
    for end in ("a", "b"):
        value = _get(obj, end, list, path)
        if len(value) != 2 or not isinstance(value[0], str):
            raise _fail(f"{path}.{end}", f"expected [switch name, port], got {value!r}")
        ends.append((value[0], _int(value[1], f"{path}.{end}[1]", 1, MAX_PORT)))
    return Link(ends[0], ends[1])


def _host(obj: dict[str, Any], path: str) -> Host:
    guid = _int(_get(obj, "guid", (str, int), path), f"{path}.guid", 1, (1 << 64) - 1)
    gid = _gid(_get(obj, "gid", str, path), f"{path}.gid")
    if addressing.parse_gid(gid).guid != guid:
        raise _fail(f"{path}.gid", f"{gid} does not end in the host's GUID {guid:#018x}")
    return Host(
        name=_get(obj, "name", str, path),
        switch=_get(obj, "switch", str, path),
        port=_int(_get(obj, "port", int, path), f"{path}.port", 1, MAX_PORT),
        guid=guid,
        lid=_int(_get(obj, "lid", int, path), f"{path}.lid", addressing.LID_MIN, addressing.LID_UNICAST_MAX),
        gid=gid,
    )


def _member(value: Any, path: str, default_full: bool) -> Member:
    if isinstance(value, str) and value in ("ALL", "SELF"):
        return Member(value, default_full)
    if isinstance(value, dict):
        full = _get(value, "membership", str, path, "full" if default_full else "limited")
        if full not in ("full", "limited"):
            raise _fail(f"{path}.membership", f"expected full or limited, got {full!r}")
        guid = _get(value, "guid", (str, int), path)
        target = guid if guid in ("ALL", "SELF") else _int(guid, f"{path}.guid", 1, (1 << 64) - 1)
        return Member(target, full == "full")
    return Member(_int(value, path, 1, (1 << 64) - 1), default_full)


def _partition(obj: dict[str, Any], path: str) -> Partition:
    defmember = _get(obj, "defmember", str, path, "limited")
    if defmember not in ("full", "limited"):
        raise _fail(f"{path}.defmember", f"expected full or limited, got {defmember!r}")
    security = _get(obj, "security", str, path, "none")
    if security not in SECURITY_MODES:
        raise _fail(f"{path}.security", f"expected one of {', '.join(SECURITY_MODES)}, got {security!r}")
    members = _list(obj, "members", path)
    return Partition(
        name=_get(obj, "name", str, path),
        pkey=_int(_get(obj, "pkey", (str, int), path), f"{path}.pkey", 1, 0x7FFF),
        members=tuple(_member(m, f"{path}.members[{i}]", defmember == "full") for i, m in enumerate(members)),
        security=SECURITY_MODES.index(security),
    )


def parse_topology(doc: Any, source: Path | None = None) -> Topology:
    """Check a decoded topology document and build the model; raises :class:`TopologyError`."""
    if not isinstance(doc, dict):
        raise _fail("(top)", "expected a JSON object")
    if doc.get("format") != FORMAT:
        raise _fail("format", f"expected {FORMAT!r}, got {doc.get('format')!r}")
    if doc.get("version") != VERSION:
        raise _fail("version", f"expected {VERSION}, got {doc.get('version')!r}")
    kind = _get(doc, "kind", str, "")
    if kind not in KINDS:
        raise _fail("kind", f"expected one of {', '.join(KINDS)}, got {kind!r}")
    routing = _get(doc, "routing", str, "", "deterministic")
    if routing not in ROUTINGS:
        raise _fail("routing", f"expected one of {', '.join(ROUTINGS)}, got {routing!r}")
    sm = _get(doc, "sm", dict, "")
    sm_gid = _gid(_get(sm, "gid", str, "sm"), "sm.gid")
    try:
        addressing.guid_to_mac(addressing.parse_gid(sm_gid).guid)
    except ValueError:
        raise _fail("sm.gid", f"{sm_gid}: the GUID must be a MAC-derived EUI-64 (ff:fe in the middle), "
                    "agents address the SM's MAC from it") from None
    dims = tuple(_int(d, f"dimensions[{i}]", 2, 1 << 20)
                 for i, d in enumerate(_list(doc, "dimensions", "", [])))
    topo = Topology(
        name=_get(doc, "name", str, "", source.stem if source else "fabric"),
        kind=kind,
        routing=routing,
        switches=tuple(_objects(doc, "switches", _switch)),
        links=tuple(_objects(doc, "links", _link)) if "links" in doc else (),
        hosts=tuple(_objects(doc, "hosts", _host)),
        partitions=tuple(_objects(doc, "partitions", _partition)) if "partitions" in doc else (),
        sm_gid=sm_gid,
        dimensions=dims,
        host_bits=_int(doc.get("host_bits", 4), "host_bits", 0, 37),
        source=source,
    )
    _check_references(topo)
    _check_places(topo)
    return topo


def _check_references(topo: Topology) -> None:
    """Names are unique, every link and host names an existing switch port, no port is used twice."""
    names: dict[str, int] = {}
    for i, sw in enumerate(topo.switches):
        if sw.name in names:
            raise _fail(f"switches[{i}].name", f"{sw.name!r} already names switches[{names[sw.name]}]")
        names[sw.name] = i
    if not topo.switches:
        raise _fail("switches", "the fabric has no switch")
    used: dict[tuple[str, int], str] = {}

    def use(end: tuple[str, int], path: str) -> None:
        sw_name, port = end
        if sw_name not in names:
            raise _fail(path, f"no switch named {sw_name!r}")
        if port not in topo.switches[names[sw_name]].ports:
            raise _fail(path, f"switch {sw_name} has no port {port}")
        if end in used:
            raise _fail(path, f"{sw_name} port {port} is already used by {used[end]}")
        used[end] = path

    for i, link in enumerate(topo.links):
        use(link.a, f"links[{i}].a")
        use(link.b, f"links[{i}].b")
    seen: dict[str, str] = {}
    for i, host in enumerate(topo.hosts):
        use((host.switch, host.port), f"hosts[{i}].switch")
        for what, value in (("name", host.name), ("guid", str(host.guid)), ("lid", f"lid{host.lid}")):
            if value in seen:
                raise _fail(f"hosts[{i}].{what}", f"{value} already used by {seen[value]}")
            seen[value] = f"hosts[{i}]"
    for i, part in enumerate(topo.partitions):
        for j, member in enumerate(part.members):
            if isinstance(member.guid, int) and topo.host_by_guid(member.guid) is None:
                raise _fail(f"partitions[{i}].members[{j}]", f"no host has GUID {member.guid:#018x}")


def _check_places(topo: Topology) -> None:
    """Fat trees need a level per switch, the others a coordinate inside ``dimensions``."""
    for i, sw in enumerate(topo.switches):
        if topo.kind == "fat-tree":
            if sw.level is None:
                raise _fail(f"switches[{i}].level", "missing (a fat tree needs every switch's level)")
            continue
        if not topo.dimensions:
            raise _fail("dimensions", f"missing (a {topo.kind} needs the switches per dimension)")
        if topo.kind == "hypercube" and any(k != 2 for k in topo.dimensions):
            raise _fail("dimensions", "a hypercube has 2 switches per dimension, "
                        f"got {list(topo.dimensions)}")
        if sw.coord is None:
            raise _fail(f"switches[{i}].coord", f"missing (a {topo.kind} needs every switch's coordinate)")
        if len(sw.coord) != len(topo.dimensions) or any(
                not 0 <= c < k for c, k in zip(sw.coord, topo.dimensions, strict=False)):
            raise _fail(f"switches[{i}].coord", f"{list(sw.coord)} is not inside {list(topo.dimensions)}")
    coords = [sw.coord for sw in topo.switches if sw.coord is not None]
    if len(set(coords)) != len(coords):
        raise _fail("switches", "two switches share a coordinate")


def load_topology(path: str | Path) -> Topology:
    """Read and check a topology file; every error is a :class:`TopologyError` naming the file and,
    where the file has it, the line (``topology.json:12: switches[0].address: ...``)."""
    path = Path(path)
    try:
        doc, text = configfile.load_file(path)
    except configfile.ConfigFileError as err:  # unreadable, not UTF-8, not JSON, numbers out of range
        raise TopologyError(str(err)) from None
    try:
        return parse_topology(doc, path)
    except TopologyError as err:
        line = configfile.line_of(text, err.field) if err.field else None
        raise TopologyError(f"{path}:{line}: {err}" if line else f"{path}: {err}", err.field) from None
