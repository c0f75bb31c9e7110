"""Partitions: OpenSM's ``partitions.conf`` grammar, P_Key tables per host, valid P_Keys per switch port.

An InfiniBand administrator's existing file works::

    # comment
    Default=0x7fff, ipoib, defmember=full : ALL ;
    compute=0x0001, secmode=sth-aead : 0x000000fffe000000=full, 0x000000fffe000002, SELF ;

``Name=PKey[,flag[=value]]... : member[=full|limited|both], ... ;`` where a member is a port GUID, ALL
(every host port), ALL_CAS (the same), or SELF (the SM's own port). Flags OpenSM knows but that mean nothing
here (ipoib, mtu, rate, sl, scope, indx0, ...) are accepted and ignored; ``defmember`` sets the membership
of members without one (default limited, as OpenSM); ``secmode`` is our extension: the partition's
security mode (none, icrc-mac, sth-aead, sth-auth, sth-hdr, or 0-4). Membership is the P_Key's top bit
(0x8000 = full member) in every table entry the SM writes.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from lark import Lark, Token, Transformer, UnexpectedInput

from .topology import SECURITY_MODES, Member, Partition, Topology

FULL_MEMBER = 0x8000
PKEY_BASE = 0x7FFF
DEFAULT_PKEY = 0x7FFF
MANAGEMENT_PKEYS = (0xFFFF, 0x7FFF)
"""The default partition, full and limited: MADs (traps, key distribution) travel in it, so every
valid-P_Key list carries it or a filter policy would cut the SM off from its hosts."""

_GRAMMAR = r"""
start: (partition | _NL)*
partition: header ":" members? ";"
header: NAME "=" NUMBER ("," flag)*
flag: NAME ("=" value)?
value: NAME | NUMBER
members: member ("," member)*
member: (NUMBER | NAME) ("=" NAME)?

NAME: /[A-Za-z_][A-Za-z0-9_.\-]*/
NUMBER: /0x[0-9A-Fa-f]+|[0-9]+/
COMMENT: /#[^\n]*/
_NL: /\n/
%ignore COMMENT
%ignore /[ \t\r]+/
%ignore /\\\n/
%ignore _NL
"""

_PARSER = Lark(_GRAMMAR, parser="lalr", propagate_positions=True)
_KEYWORDS = ("ALL", "ALL_CAS", "SELF", "ALL_SWITCHES", "ALL_ROUTERS")


class PartitionError(ValueError):
    """A partitions.conf that cannot be used; the message names the line and column."""


_Header = tuple[Token, Token, dict[str, str | None]]


class _Build(Transformer[Token, list[Partition]]):
    def __init__(self, source: str) -> None:
        super().__init__()
        self.source = source

    def start(self, items: list[Partition | Token]) -> list[Partition]:
        return [p for p in items if isinstance(p, Partition)]

    def value(self, items: list[Token]) -> str:
        return str(items[0])

    def flag(self, items: list[Token | str]) -> tuple[str, str | None]:
        return str(items[0]), (str(items[1]) if len(items) > 1 else None)

    def header(self, items: list[Token | tuple[str, str | None]]) -> _Header:
        name, pkey, *flags = items
        assert isinstance(name, Token) and isinstance(pkey, Token)
        return name, pkey, dict(f for f in flags if isinstance(f, tuple))

    def member(self, items: list[Token]) -> tuple[Token, str | None]:
        return items[0], (str(items[1]) if len(items) > 1 else None)

    def members(self, items: list[tuple[Token, str | None]]) -> list[tuple[Token, str | None]]:
        return items

    def partition(self, items: list[object]) -> Partition:
        header: _Header = items[0]  # type: ignore[assignment]
        name, pkey, flags = header
        listed: list[tuple[Token, str | None]] = items[1] if len(items) > 1 else []  # type: ignore[assignment]
        defmember = flags.get("defmember") or "limited"
        if defmember not in ("full", "limited", "both"):
            raise self._error(name, f"defmember={defmember}: expected full, limited or both")
        secmode = flags.get("secmode") or "none"
        if secmode.isdigit() and int(secmode) in SECURITY_MODES.values():
            security = int(secmode)
        elif secmode in SECURITY_MODES:
            security = SECURITY_MODES[secmode]
        else:
            raise self._error(name, f"secmode={secmode}: expected one of {', '.join(SECURITY_MODES)} or 0-4")
        members = tuple(self._member(token, membership or defmember) for token, membership in listed)
        return Partition(str(name), int(str(pkey), 0) & PKEY_BASE, members, security)

    def _member(self, token: Token, membership: str) -> Member:
        if membership not in ("full", "limited", "both"):
            raise self._error(token, f"{token}={membership}: expected full, limited or both")
        full = membership != "limited"
        if token.type == "NAME":
            if str(token) not in _KEYWORDS:
                raise self._error(token, f"{token}: expected a port GUID, ALL, ALL_CAS or SELF")
            word = "ALL" if str(token) in ("ALL", "ALL_CAS") else str(token)
            return Member(word, full)
        return Member(int(str(token), 0), full)

    def _error(self, token: Token, message: str) -> PartitionError:
        return PartitionError(f"{self.source}:{token.line}:{token.column}: {message}")


def parse_partitions(text: str, source: str = "partitions.conf") -> list[Partition]:
    """The partitions of a partitions.conf text; raises :class:`PartitionError` with line:column."""
    try:
        tree = _PARSER.parse(text)
    except UnexpectedInput as err:
        raise PartitionError(f"{source}:{err.line}:{err.column}: syntax error near "
                             f"{err.get_context(text).splitlines()[0].strip()!r}") from None
    try:
        return _Build(source).transform(tree)
    except Exception as err:  # lark wraps errors raised in callbacks
        cause = getattr(err, "orig_exc", err)
        if isinstance(cause, PartitionError):
            raise cause from None
        raise


def load_partitions(path: str | Path) -> list[Partition]:
    path = Path(path)
    try:
        return parse_partitions(path.read_text(), str(path))
    except OSError as err:
        raise PartitionError(f"{path}: cannot read: {err.strerror}") from None


def check_partitions(partitions: Sequence[Partition], topo: Topology) -> None:
    """Every member GUID names a host of the topology and no P_Key is defined twice."""
    seen: dict[int, str] = {}
    for part in partitions:
        if part.pkey in seen:
            raise PartitionError(f"partition {part.name}: P_Key {part.pkey:#06x} is already "
                                 f"{seen[part.pkey]}")
        seen[part.pkey] = part.name
        for member in part.members:
            if isinstance(member.guid, int) and topo.host_by_guid(member.guid) is None:
                raise PartitionError(f"partition {part.name}: no host has port GUID {member.guid:#018x}")


def pkey_tables(topo: Topology, partitions: Iterable[Partition]) -> dict[str, list[int]]:
    """Each host's P_Key table: ``pkey | 0x8000`` for full members, ``pkey`` for limited ones.

    Every host is at least a limited member of the default partition (0x7FFF), whatever the file says:
    the SM's MADs travel there with 0xFFFF, and a table without it would make the host trap them.
    """
    tables: dict[str, dict[int, bool]] = {h.name: {DEFAULT_PKEY: False} for h in topo.hosts}
    for part in partitions:
        for member in part.members:
            if member.guid == "SELF":
                continue
            hosts = topo.hosts if member.guid == "ALL" else [h for h in topo.hosts if h.guid == member.guid]
            for host in hosts:
                table = tables[host.name]
                table[part.pkey] = table.get(part.pkey, False) or member.full
    return {name: sorted(pk | (FULL_MEMBER if full else 0) for pk, full in table.items())
            for name, table in tables.items()}


def members_of(topo: Topology, part: Partition) -> list[str]:
    """Host names in a partition (whatever their membership)."""
    return sorted(name for name, table in pkey_tables(topo, [part]).items() if table)


def valid_pkeys(topo: Topology, tables: dict[str, list[int]]) -> dict[tuple[str, int], frozenset[int]]:
    """The P_Keys each switch port may carry: a host port its host's table, a fabric port any host's
    entry; both with the management partition. What valid-list mode (DT, IF, SIF's switch) checks."""
    every = frozenset(MANAGEMENT_PKEYS).union(*tables.values())
    out: dict[tuple[str, int], frozenset[int]] = {}
    for sw in topo.switches:
        for port in sw.ports:
            host = topo.host_at(sw.name, port)
            out[(sw.name, port)] = (frozenset(MANAGEMENT_PKEYS).union(tables[host.name])
                                    if host is not None else every)
    return out
