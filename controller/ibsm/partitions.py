"""Partitions: OpenSM's ``partitions.conf``, read as OpenSM reads it; P_Key tables and valid P_Keys.

An administrator's existing file works, with the meaning OpenSM gives it (opensm/osm_prtn_config.c)::

    Default=0x7fff, ipoib, mtu=5 : ALL=full, SELF=full ;      # IPoIB broadcast group created
    storage = 0x0a01, defmember=full, secmode=sth-aead :       # secmode= is our extension
        mgid=ff12:401b::1, sl=1                                # a multicast group of the partition
        0x000000fffe000000, 0x000000fffe000002=limi ;          # any prefix of full, limited, both
    : ALL_CAS ;                                                # no name, no P_Key: one is generated

Definitions end with ``;`` and may span lines after the ``:`` (a newline separates members like a comma);
``#`` starts a comment anywhere. The name and the P_Key are optional (a missing P_Key is generated as
OpenSM does: the lowest free one from 0x0001, or the P_Key of an earlier partition of the same name);
definitions of one P_Key merge under the first name, and :func:`parse_partitions` returns one partition
per P_Key, the default partition (0x7FFF) always first. Flags, keywords and memberships may be shortened
to any prefix, as OpenSM matches them. What OpenSM only logs (an unknown flag or membership, a bad flag
value, a multicast group it skips) is a warning with line:column; what makes OpenSM refuse the file (no
``:``, a P_Key or GUID that is not a number) raises :class:`PartitionError` with line:column.

Membership is the P_Key's top bit (0x8000 = full member) in every table entry the SM writes; as OpenSM
(without ``allow_both_pkeys``) a port listed twice in a partition keeps the membership listed last, and
``both`` is a full membership.
"""

from __future__ import annotations

import ipaddress
import logging
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ibsec import addressing, configfile
from ibsec.names import SECURITY_MODES
from lark import Lark, Token, Tree, UnexpectedInput, UnexpectedToken

from .topology import Host, McGroup, Member, Partition, Topology

FULL_MEMBER = 0x8000
PKEY_BASE = 0x7FFF
DEFAULT_PKEY = 0x7FFF
MANAGEMENT_PKEYS = (0xFFFF, 0x7FFF)
"""The default partition, full and limited: MADs (traps, key distribution) travel in it, so every
valid-P_Key list carries it or a filter policy would cut the SM off from its hosts."""
IPOIB_QKEY = 0x0B1B  # OpenSM's Q_Key of IP groups when none is given
DEFAULT_SCOPE = 2  # link local
BROADCAST_MGID = bytes.fromhex("ff12401bffff000000000000ffffffff")  # P_Key bits filled per partition
IP_SIGNATURES = (b"\x40\x1b", b"\x60\x1b")  # IPv4 and IPv6 over IB
KEYWORDS = ("ALL", "ALL_CAS", "ALL_SWITCHES", "ALL_ROUTERS", "SELF")  # OpenSM's order of prefix matching
HOST_KEYWORDS = ("ALL", "ALL_CAS")  # every host of our fabrics is a channel adapter port
MEMBERSHIPS = ("full", "both", "limited")

_GRAMMAR = r"""
start: (definition | _NL)* open_definition?
definition: header ":" _body SEMI
open_definition: header ":" _body
header: NAME? pkey? (COMMA hflag?)*
pkey: EQ HVALUE?
hflag: NAME (EQ HVALUE?)?
_body: _sep* (port _sep+ | group _NL _sep*)* (port | group)?
_sep: _NL | ","
port: NAME (EQ PVALUE?)?
group: MGID (COMMA gflag?)*
gflag: NAME (EQ PVALUE?)?

NAME: /[^=,:;#\s](?:[^=,:;#\n]*[^=,:;#\s])?/
HVALUE: /[^,:;#\s](?:[^,:;#\n]*[^,:;#\s])?/
PVALUE: /[^,;#\s](?:[^,;#\n]*[^,;#\s])?/
MGID.2: /mgid[ \t\r]*=[^,;#\n]*/
EQ: "="
COMMA: ","
SEMI: ";"
_NL: /\n/
COMMENT: /#[^\n]*/
%ignore COMMENT
%ignore /[ \t\r]+/
"""
# Tokens are OpenSM's: text between delimiters, white space around it trimmed (a name may hold spaces).
# The header must end with ':' on its own line (OpenSM looks for it there); an mgid= line takes the rest
# of its line as the group's flags.

log = logging.getLogger(__name__)
_PARSER = Lark(_GRAMMAR, parser="lalr", propagate_positions=True)
_NUMBER = re.compile(r"0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*")


class PartitionError(ValueError):
    """A partitions.conf that cannot be used; the message names the line and column."""


Warn = Callable[[str], None]


@dataclass(frozen=True)
class _FlagSpec:
    """A multicast group flag: its field, the values it may take, what OpenSM does with a bad one."""

    field: str
    low: int
    high: int
    zero_when_bad: bool = False  # Q_Key, TClass: "requires valid value - using '0'" (others: skipped)
    strict: bool = False  # sl, FlowLabel: trailing text makes the value bad (others: read the number)


_GROUP_FLAGS = {  # in OpenSM's order: a prefix means the first flag it begins
    "mtu": _FlagSpec("mtu", 1, 5),  # IBTA MTU codes: 1 = 256 ... 5 = 4096 bytes
    "rate": _FlagSpec("rate", 1, 63),  # IBTA rate codes (6 bits)
    "scope": _FlagSpec("scopes", 1, 15),
    "Q_Key": _FlagSpec("qkey", 0, 0xFFFFFFFF, zero_when_bad=True),
    "TClass": _FlagSpec("tclass", 0, 0xFF, zero_when_bad=True),
    "sl": _FlagSpec("sl", 0, 15, strict=True),
    "FlowLabel": _FlagSpec("flow_label", 0, 0xFFFFF, strict=True),
}


@dataclass(frozen=True)
class _Flags:
    """Multicast group flags: a definition's (its broadcast group's, its groups' defaults) or a group's."""

    mtu: int = 4
    rate: int = 3
    sl: int = 0
    scopes: frozenset[int] = frozenset()  # none: one group, link local
    qkey: int = 0  # 0: IPOIB_QKEY for IP groups
    tclass: int = 0
    flow_label: int = 0


@dataclass
class _Definition:
    """What one definition (up to its ';') says about the members and groups it adds."""

    index: int
    flags: _Flags = _Flags()
    membership: tuple[bool, bool] = (False, False)  # (full, both) of members without one: limited
    indx0: bool = False
    ipoib: bool = False
    security: int | None = None


@dataclass
class _Building:
    """A partition while the file is read: every definition of its P_Key adds to it."""

    name: str
    pkey: int
    where: str  # "line N", or "OpenSM's default partition"
    members: list[Member] = field(default_factory=list)
    groups: list[McGroup] = field(default_factory=list)
    security: int | None = None
    security_line: int = 0
    ipoib: bool = False
    sl: int = 0
    defined: bool = False

    def partition(self) -> Partition:
        """The partition as read; OpenSM's default rule ``ALL=limited, SELF=full`` if never defined."""
        members = self.members if self.defined else [Member("ALL", False), Member("SELF", True)]
        return Partition(self.name, self.pkey, tuple(members), self.security or 0, self.ipoib, self.sl,
                         tuple(self.groups))


def _c_number(text: str) -> tuple[int | None, str]:
    """C's ``strtoul(text, &end, 0)``, as OpenSM reads numbers: (value or None, the text after it)."""
    match = _NUMBER.match(text)
    if match is None:
        return None, text
    digits = match.group()
    base = 16 if digits[:2].lower() == "0x" else 8 if digits.startswith("0") else 10
    return int(digits, base), text[match.end():]


def _prefixed(text: str, words: Iterable[str]) -> str | None:
    """The first of ``words`` that starts with ``text`` (OpenSM's ``strncmp(text, word, strlen(text))``)."""
    return next((w for w in words if text and w.startswith(text)), None)


class _Reader:
    """Walks the parse tree definition by definition, doing what OpenSM does with each."""

    def __init__(self, source: str, warn: Warn) -> None:
        self.source = source
        self.warn_to = warn
        self.parts = {DEFAULT_PKEY: _Building("Default", DEFAULT_PKEY, "OpenSM's default partition")}
        self.generated = 0  # OpenSM's global_pkey_counter
        self.groups: dict[str, _Building] = {}  # MGID -> partition that created it
        self.count = 0

    def at(self, where: Token | Tree[Token], message: str) -> str:
        """``message`` prefixed with the file, line and column of ``where``."""
        place = where if isinstance(where, Token) else where.meta
        return f"{self.source}:{place.line}:{place.column}: {message}"

    def warn(self, where: Token | Tree[Token], message: str) -> None:
        self.warn_to(self.at(where, message))

    def error(self, where: Token | Tree[Token], message: str) -> PartitionError:
        return PartitionError(self.at(where, message))

    # ------------------------------------------------------------------------------------ definitions

    def definition(self, tree: Tree[Token]) -> None:
        header, *body = tree.children
        assert isinstance(header, Tree)
        conf = _Definition(self.count)
        self.count += 1
        name, pkey = self._header(header, conf)
        part = self._create(tree, name, pkey, conf)
        for item in body:
            if isinstance(item, Tree) and item.data == "port":
                self._port(part, conf, item)
            elif isinstance(item, Tree) and item.data == "group":
                self._group(part, conf, item)
        if tree.data == "open_definition":
            self.warn_to(f"{self.source}:{tree.meta.end_line}:{tree.meta.end_column}: partition "
                         f"{part.name}: no ';' before the end of the file (OpenSM ends it there)")

    def _header(self, header: Tree[Token], conf: _Definition) -> tuple[Token | None, Tree[Token] | None]:
        """The name and P_Key of a definition; its flags go into ``conf``."""
        name = next((c for c in header.children if isinstance(c, Token) and c.type == "NAME"), None)
        pkey = next((c for c in header.children if isinstance(c, Tree) and c.data == "pkey"), None)
        flagged = [c for c in header.children if c is not name and c is not pkey]
        for flag, value in self._flags(flagged, "partition"):
            flags = self._group_flag(conf.flags, flag, value)
            if flags is None:
                self._partition_flag(conf, flag, value)
            else:
                conf.flags = flags
        return name, pkey

    def _flags(self, children: Sequence[Token | Tree[Token]], what: str
               ) -> Iterator[tuple[Token, Token | None]]:
        """(flag, value) of each ``, flag[=value]``; an empty one is warned about, as OpenSM does."""
        for i, child in enumerate(children):
            if isinstance(child, Tree):
                yield _pair(child)
            elif not (i + 1 < len(children) and isinstance(children[i + 1], Tree)):
                self.warn(child, f"empty {what} flag - ignored")

    def _partition_flag(self, conf: _Definition, flag: Token, value: Token | None) -> None:
        if str(flag) == "secmode":
            conf.security = self._security(flag, value)
        elif _prefixed(str(flag), ("ipoib",)):
            conf.ipoib = True
        elif _prefixed(str(flag), ("defmember",)):
            if value is None:
                self.warn(flag, "defmember needs a value (full, limited or both) - ignored")
            else:
                conf.membership = self._membership(value, "defmember", "ignored", conf.membership)
        elif str(flag) == "indx0":
            conf.indx0 = True
        else:
            self.warn(flag, f"unknown partition flag {str(flag)!r} - ignored")

    def _security(self, flag: Token, value: Token | None) -> int:
        """Our extension ``secmode=``: a mode name or number; anything else is refused."""
        text = str(value) if value is not None else ""
        if text.isdigit() and int(text) < len(SECURITY_MODES):
            return int(text)
        if text in SECURITY_MODES:
            return SECURITY_MODES.index(text)
        raise self.error(flag, f"secmode={text}: expected one of {', '.join(SECURITY_MODES)} or 0-4")

    def _membership(self, value: Token, what: str, fallback: str, otherwise: tuple[bool, bool]
                    ) -> tuple[bool, bool]:
        """(full, both) of a membership word, any prefix of full, both or limited (OpenSM's order)."""
        text = str(value)
        if text == "":  # strncmp with length 0 matches "full" first
            self.warn(value, f"{what}=: empty membership, read as full (as OpenSM)")
            return True, False
        word = _prefixed(text, MEMBERSHIPS)
        if word is None:
            self.warn(value, f"{what}={text}: not full, limited or both - {fallback}")
            return otherwise
        return word != "limited", word == "both"

    def _group_flag(self, flags: _Flags, flag: Token, value: Token | None) -> _Flags | None:
        """OpenSM's parse_group_flag: ``flags`` with this flag applied, or None if it is not a group flag."""
        word = _prefixed(str(flag), _GROUP_FLAGS)
        if word is None:
            return None
        spec = _GROUP_FLAGS[word]
        number = self._flag_value(word, spec, flag, value)
        if number is None and not spec.zero_when_bad:
            return flags
        number = number or 0
        changed: dict[str, Any] = {spec.field: flags.scopes | {number} if spec.field == "scopes" else number}
        return replace(flags, **changed)

    def _flag_value(self, word: str, spec: _FlagSpec, flag: Token, value: Token | None) -> int | None:
        """The flag's number, or None (warned) where OpenSM finds it bad."""
        text = str(value) if value is not None else ""
        number, rest = _c_number(text)
        if number is None or (rest and spec.strict) or not spec.low <= number <= spec.high:
            self.warn(value or flag, f"{word}={text}: needs a value in {spec.low}-{spec.high:#x} - "
                                     f"{'using 0' if spec.zero_when_bad else 'skipped'}")
            return None
        if rest:
            self.warn(value or flag, f"{word}={text}: suspicious value, read as {number} (as OpenSM)")
        return number

    def _create(self, definition: Tree[Token], name_token: Token | None, pkey_tree: Tree[Token] | None,
                conf: _Definition) -> _Building:
        """OpenSM's partition_create: find or make the partition, then its IPoIB broadcast group."""
        name = str(name_token) if name_token is not None else ""
        number_token: Token | None = None
        if pkey_tree is not None:
            number_token = _value(pkey_tree.children)
            if number_token is None:
                raise self.error(pkey_tree, "empty P_Key")
        elif name[:1].isdigit():  # "0x8001 : ALL ;": the only word is the P_Key
            number_token, name = name_token, ""
        pkey = self._pkey(number_token) if number_token is not None else 0
        part = self._find(definition, name, pkey)
        part.defined = True
        part.sl = conf.flags.sl  # as OpenSM: each definition sets its partition's SL
        if conf.security is not None:
            if part.security is not None and part.security != conf.security:
                raise self.error(definition, f"partition {part.name} ({part.pkey:#06x}): secmode differs "
                                             f"from the one given on line {part.security_line}")
            part.security, part.security_line = conf.security, definition.meta.line
        if conf.ipoib:
            part.ipoib = True
            mgid = BROADCAST_MGID[:4] + (part.pkey | FULL_MEMBER).to_bytes(2, "big") + BROADCAST_MGID[6:]
            self._add_groups(definition, part, mgid, replace(conf.flags, qkey=conf.flags.qkey or IPOIB_QKEY))
        return part

    def _pkey(self, token: Token) -> int:
        value, rest = _c_number(str(token))
        if value is None or rest:
            raise self.error(token, f"P_Key {token}: not a number")
        if value > 0xFFFF:
            self.warn(token, f"P_Key {token} does not fit 16 bits: OpenSM keeps {value & 0xFFFF:#06x}")
        return value & PKEY_BASE

    def _find(self, definition: Tree[Token], name: str, pkey: int) -> _Building:
        """The partition of ``pkey`` (or of ``name`` when no P_Key is given), made if new."""
        if not pkey:
            named = next((p for p in self.parts.values() if name and p.name == name), None)
            if named is not None:
                return named
            pkey = self._generate(definition)
        part = self.parts.get(pkey)
        if part is None:
            part = _Building(name or f"{pkey:04x}", pkey, f"line {definition.meta.line}")
            self.parts[pkey] = part
        elif name and name != part.name:
            self.warn(definition, f"P_Key {pkey:#06x} is already partition {part.name} ({part.where}): "
                                  f"{name} merged into it")
        return part

    def _generate(self, definition: Tree[Token]) -> int:
        """OpenSM's generate_pkey: the next unused P_Key after the last one generated in this file."""
        while self.generated < DEFAULT_PKEY - 1:
            self.generated += 1
            if self.generated not in self.parts:
                return self.generated
        raise self.error(definition, "no P_Key left to generate")

    # ------------------------------------------------------------------------------------ members

    def _port(self, part: _Building, conf: _Definition, port: Tree[Token]) -> None:
        """OpenSM's partition_add_port: a GUID or keyword (any prefix), its membership or defmember's."""
        name, value = _pair(port)
        text = str(name)
        if _prefixed(text, ("NONE",)):
            return
        full, both = conf.membership
        if value is not None:
            full, both = self._membership(value, text, "read as limited", (False, False))
        word = _prefixed(text, KEYWORDS)
        guid: int | str
        if word is not None:
            guid = word
        else:
            number, rest = _c_number(text)
            if not number or rest:
                raise self.error(name, f"{text}: expected a port GUID, {', '.join(KEYWORDS)} or NONE")
            if number >> 64:
                raise self.error(name, f"{text}: a port GUID has 64 bits")
            guid = number
        part.members.append(Member(guid, full, both, conf.indx0, conf.index))

    # ------------------------------------------------------------------------------------ groups

    def _group(self, part: _Building, conf: _Definition, group: Tree[Token]) -> None:
        """OpenSM's mgroup_create: an ``mgid=`` line, its flags defaulting to its definition's."""
        mgid_token = group.children[0]
        assert isinstance(mgid_token, Token)
        text = str(mgid_token).split("=", 1)[1].strip()
        mgid = _multicast_gid(text)
        if mgid is None:
            self.warn(mgid_token, f"mgid {text}: not a multicast GID - group skipped")
            return
        flags = replace(conf.flags, tclass=0)  # OpenSM's groups inherit every flag but TClass
        for flag, value in self._flags(group.children[1:], "multicast group"):
            applied = self._group_flag(flags, flag, value)
            if applied is None:
                self.warn(flag, f"unknown multicast group flag {str(flag)!r} - ignored")
            flags = applied or flags
        if mgid[2:4] in IP_SIGNATURES:
            if not self._ip_group_fits(part, conf, mgid, flags, mgid_token):
                return
            mgid = mgid[:4] + (part.pkey | FULL_MEMBER).to_bytes(2, "big") + mgid[6:]
            flags = replace(flags, qkey=flags.qkey or IPOIB_QKEY)
        self._add_groups(mgid_token, part, mgid, flags)

    def _ip_group_fits(self, part: _Building, conf: _Definition, mgid: bytes, flags: _Flags,
                       token: Token) -> bool:
        """OpenSM's checks of an IP group: its P_Key bits, and the rate and MTU of the broadcast group."""
        bits = int.from_bytes(mgid[4:6], "big")
        text = ipaddress.IPv6Address(mgid)
        if mgid != BROADCAST_MGID and bits not in (0, part.pkey | FULL_MEMBER):
            self.warn(token, f"mgid {text}: P_Key bits {bits:#06x} are neither 0 nor the partition's "
                             f"{part.pkey | FULL_MEMBER:#06x} - group skipped")
            return False
        for what, mine, broadcast in (("rate", flags.rate, conf.flags.rate),
                                      ("mtu", flags.mtu, conf.flags.mtu)):
            if mine != broadcast:
                self.warn(token, f"mgid {text}: IP group {what} {mine} differs from the partition's "
                                 f"{what} {broadcast} - group skipped")
                return False
        return True

    def _add_groups(self, where: Token | Tree[Token], part: _Building, mgid: bytes, flags: _Flags) -> None:
        """One group per scope (link local if none), the scope written into the MGID, each MGID once."""
        for scope in sorted(flags.scopes) or [DEFAULT_SCOPE]:
            raw = bytes([mgid[0], (mgid[1] & 0xF0) | scope]) + mgid[2:]
            text = str(ipaddress.IPv6Address(raw))
            owner = self.groups.get(text)
            if owner is not None:
                if owner is not part:
                    self.warn(where, f"mgid {text} is already a group of partition {owner.name} - "
                                     "kept there")
                continue
            self.groups[text] = part
            part.groups.append(McGroup(text, part.pkey | FULL_MEMBER, flags.qkey, flags.mtu, flags.rate,
                                       flags.sl, scope, flags.tclass, flags.flow_label))


def _multicast_gid(text: str) -> bytes | None:
    """The 16 bytes of a multicast GID written as an IPv6 address (as inet_pton reads it), else None."""
    try:
        raw = ipaddress.IPv6Address(text).packed if "%" not in text else b""
    except ValueError:
        return None
    return raw if raw[:1] == b"\xff" else None


def _value(children: Sequence[Token | Tree[Token]]) -> Token | None:
    """The value token after ``=`` (None when there is no value)."""
    return next((c for c in children if isinstance(c, Token) and c.type in ("HVALUE", "PVALUE")), None)


def _pair(tree: Tree[Token]) -> tuple[Token, Token | None]:
    """(name, value) of ``name[=value]``; an ``=`` with nothing after it is an empty value, as in OpenSM."""
    name = tree.children[0]
    assert isinstance(name, Token)
    value = _value(tree.children)
    if value is None and len(tree.children) > 1:  # "name=": OpenSM sees the empty string
        equals = tree.children[1]
        assert isinstance(equals, Token)
        value = Token("PVALUE", "", start_pos=equals.end_pos, line=equals.end_line, column=equals.end_column)
    return name, value


def _explain(err: UnexpectedInput, text: str) -> str:
    """A syntax error in the words of the file format."""
    if isinstance(err, UnexpectedToken) and "COLON" in err.expected and \
            err.token.type in ("_NL", "$END", "SEMI"):
        return "expected ':' after the partition definition, on the same line (Name=PKey,flags : members ;)"
    return f"syntax error near {err.get_context(text).splitlines()[0].strip()!r}"


def parse_partitions(text: str, source: str = "partitions.conf", warn: Warn | None = None) -> list[Partition]:
    """One partition per P_Key, the default partition first, as OpenSM reads ``text``.

    Raises :class:`PartitionError` (line:column) where OpenSM refuses the file; what OpenSM only logs goes
    to ``warn`` (default: this module's logger), also with line:column.
    """
    try:
        tree = _PARSER.parse(text)
    except UnexpectedInput as err:
        raise PartitionError(f"{source}:{err.line}:{err.column}: {_explain(err, text)}") from None
    reader = _Reader(source, warn or log.warning)
    for definition in tree.children:
        assert isinstance(definition, Tree)
        reader.definition(definition)
    return [part.partition() for part in reader.parts.values()]


def load_partitions(path: str | Path, warn: Warn | None = None) -> list[Partition]:
    path = Path(path)
    try:
        text = configfile.read_text(path)  # unreadable or not UTF-8: file:line:column and why
    except configfile.ConfigFileError as err:
        raise PartitionError(str(err)) from None
    return parse_partitions(text, str(path), warn)


def check_partitions(partitions: Sequence[Partition], topo: Topology) -> None:
    """Every member GUID names a host of the topology (or the SM) and no P_Key is defined twice.

    OpenSM ignores a port it does not find (it may come later); our fabric is fixed by its topology
    file, so a GUID no host has is a mistake, refused before the SM writes anything."""
    seen: dict[int, str] = {}
    sm_guid = addressing.parse_gid(topo.sm_gid).guid
    for part in partitions:
        if part.pkey in seen:
            raise PartitionError(f"partition {part.name}: P_Key {part.pkey:#06x} is already "
                                 f"{seen[part.pkey]}")
        seen[part.pkey] = part.name
        for member in part.members:
            if isinstance(member.guid, int) and member.guid != sm_guid and \
                    topo.host_by_guid(member.guid) is None:
                raise PartitionError(f"partition {part.name}: no host has port GUID {member.guid:#018x}")


# ---------------------------------------------------------------------------------------------------------
# what the partitions mean for the fabric's ports
# ---------------------------------------------------------------------------------------------------------


@dataclass
class _Port:
    """One host port's partitions as the definitions leave them: {P_Key: full?}, and index 0."""

    full: dict[int, bool] = field(default_factory=lambda: {DEFAULT_PKEY: False})
    index0: int | None = None

    def table(self) -> list[int]:
        entries = {pkey: pkey | (FULL_MEMBER if full else 0) for pkey, full in self.full.items()}
        first = [entries.pop(self.index0)] if self.index0 in entries else []
        return first + sorted(entries.values())


def _covered(topo: Topology, member: Member) -> list[Host]:
    if member.guid in HOST_KEYWORDS:
        return list(topo.hosts)
    return [h for h in topo.hosts if h.guid == member.guid]


def _ports(topo: Topology, partitions: Iterable[Partition]) -> dict[str, _Port]:
    """Replay every member in file order, as OpenSM adds ports: the last membership of a port in a
    partition wins; index 0 goes to the last partition that asked for it (``indx0``), and leaves it when
    a later definition of that partition adds the port without ``indx0``. Every host starts as a limited
    member of the default partition (OpenSM's ``ALL=limited``): the SM's MADs travel there."""
    ports = {h.name: _Port() for h in topo.hosts}
    added = sorted(((m.definition, p.pkey, m) for p in partitions for m in p.members), key=lambda a: a[0])
    for _, pkey, member in added:
        for host in _covered(topo, member):
            port = ports[host.name]
            port.full[pkey] = member.full
            if member.indx0:
                port.index0 = pkey
            elif port.index0 == pkey:
                port.index0 = None
    return ports


def pkey_tables(topo: Topology, partitions: Iterable[Partition]) -> dict[str, list[int]]:
    """Each host's P_Key table: ``pkey | 0x8000`` for full members, ``pkey`` for limited ones; the
    ``indx0`` partition's entry first, the others in ascending order."""
    return {name: port.table() for name, port in _ports(topo, partitions).items()}


def members_of(topo: Topology, part: Partition) -> dict[str, str]:
    """Host name -> "full" or "limited" for the hosts in ``part`` (with the default partition's rule)."""
    ports = _ports(topo, [part])
    return {name: "full" if port.full[part.pkey] else "limited"
            for name, port in sorted(ports.items()) if part.pkey in port.full}


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


def describe(topo: Topology, partitions: Sequence[Partition]) -> list[dict[str, Any]]:
    """What ``sm partitions`` reports: each partition, its members as written and as the hosts hold
    them, and its multicast groups."""
    ports = _ports(topo, partitions)
    out = []
    for part in partitions:
        hosts = {name: "full" if port.full[part.pkey] else "limited"
                 for name, port in sorted(ports.items()) if part.pkey in port.full}
        out.append({
            "name": part.name, "pkey": f"{part.pkey:#06x}", "secmode": SECURITY_MODES[part.security],
            "ipoib": part.ipoib, "sl": part.sl, "members": [_member_text(m) for m in part.members],
            "hosts": hosts, "index0": sorted(n for n, p in ports.items() if p.index0 == part.pkey),
            "groups": [{"mgid": g.mgid, "pkey": f"{g.pkey:#06x}", "qkey": f"{g.qkey:#010x}", "mtu": g.mtu,
                        "rate": g.rate, "sl": g.sl, "scope": g.scope, "tclass": g.tclass,
                        "flow_label": f"{g.flow_label:#07x}"} for g in part.groups],
        })
    return out


def _member_text(member: Member) -> str:
    word = member.guid if isinstance(member.guid, str) else f"{member.guid:#018x}"
    return f"{word}={'both' if member.both else 'full' if member.full else 'limited'}" + \
        (" indx0" if member.indx0 else "")
