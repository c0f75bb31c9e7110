"""Parser of the conformance case files (.stf, after p4c's STF test format).

Format (one command a line, ``#`` starts a comment; p4switch/tests/conformance/README.md has examples):

    add <table> [<priority>] <field>:<match> ... <action>(<param>:<value>, ...)
    add <table> [<priority>] <field>:<match> ... member(<id>) | group(<id>)
    setdefault <table> <action>(<param>:<value>, ...)
    member <profile> <member_id> <action>(<param>:<value>, ...)
    group <profile> <group_id> <member_id>[*<weight>] ...
    mcast <group_id> <port>[:<rid>] ...
    clone_session <session_id> <port>[:<rid>] ... [truncate <bytes>]
    meter <meter> <index> <cir> <cburst> <pir> <pburst>
    direct_meter <table> <entry_number> <cir> <cburst> <pir> <pburst>   (entry number: 1 = first `add`)
    register_write <register> <index> <value>
    clock <seconds>                    advance the (injected) clock
    packet <port> <hex>                send a frame
    expect <port> <hex>                expect a frame on that port ('*' = any nibble, spaces ignored)
    check_counter <counter> <index> [packets <n>] [bytes <n>]
    check_direct_counter <table> <entry_number> [packets <n>] [bytes <n>]
    check_register <register> <index> <value>
    check_digest <digest_name> <field>:<value> ...
    check_stat <name> <value>          engine stats only (the in-process driver)

Match values: ``0x0a000001``, ``10``, ``0b101``, ``10.0.0.1``, ``00:11:22:33:44:55``; ternary
``<v>&&&<mask>``, lpm ``<v>/<prefix_len>``, range ``<low>..<high>``, wildcard ``*`` (field left out).
A plain value means an exact match; the driver turns it into the table's match kind with ``coerce``.
Expectations are matched per port in order at the end of the file; frames nobody expects fail the case
(so a packet without ``expect`` must be dropped).
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field
from pathlib import Path

from p4switch.engine.api import (
    ActionCall,
    Exact,
    GroupRef,
    Lpm,
    Match,
    MemberRef,
    MeterConfig,
    Optional_,
    Range,
    Ternary,
)


class StfError(ValueError):
    """A malformed line: the message names file:line."""


@dataclass
class Command:
    """One line: ``kind`` is the first word; ``line`` its number for error messages."""

    kind: str
    line: int
    table: str = ""
    priority: int = 0
    match: dict[str, Match] = field(default_factory=dict)
    action: ActionCall | MemberRef | GroupRef | None = None
    name: str = ""
    index: int = 0
    port: int = 0
    data: bytes = b""
    pattern: str = ""
    values: dict[str, int] = field(default_factory=dict)
    replicas: list[tuple[int, int]] = field(default_factory=list)
    members: list[tuple[int, int]] = field(default_factory=list)
    meter: MeterConfig | None = None
    seconds: float = 0.0
    truncate: int = 0


def parse_int(text: str) -> int:
    """0x.., 0b.., decimal, dotted IPv4, colon-separated MAC, IPv6."""
    text = text.strip()
    if re.fullmatch(r"\d+\.\d+\.\d+\.\d+", text):
        return int(ipaddress.IPv4Address(text))
    if re.fullmatch(r"([0-9a-fA-F]{2}:){5}[0-9a-fA-F]{2}", text):
        return int(text.replace(":", ""), 16)
    if ":" in text:
        return int(ipaddress.IPv6Address(text))
    return int(text, 0)


def parse_match(text: str) -> Match | None:
    if text == "*":
        return None
    if "&&&" in text:
        value, mask = text.split("&&&")
        return Ternary(parse_int(value) & parse_int(mask), parse_int(mask))
    if ".." in text:
        low, high = text.split("..")
        return Range(parse_int(low), parse_int(high))
    if "/" in text:
        value, plen = text.rsplit("/", 1)
        return Lpm(parse_int(value), int(plen))
    return Exact(parse_int(text))


def coerce(match: Match, kind: str, width: int) -> Match:
    """Turn a plain value (Exact) into the field's match kind."""
    if not isinstance(match, Exact) or kind == "exact":
        return match
    if kind == "optional":
        return Optional_(match.value)
    if kind == "ternary":
        return Ternary(match.value, (1 << width) - 1)
    if kind == "lpm":
        return Lpm(match.value, width)
    if kind == "range":
        return Range(match.value, match.value)
    return match


_CALL = re.compile(r"^([\w.$]+)\((.*)\)$")


def parse_action(text: str) -> ActionCall | MemberRef | GroupRef:
    m = _CALL.match(text.replace(" ", ""))
    if m is None:
        raise ValueError(f"expected an action call name(param:value, ...), got {text!r}")
    name, inner = m.groups()
    if name in ("member", "group"):
        ident = parse_int(inner)
        return MemberRef(ident) if name == "member" else GroupRef(ident)
    params = {}
    for item in filter(None, inner.split(",")):
        key, _, value = item.partition(":")
        params[key] = parse_int(value)
    return ActionCall(name, params)


def parse_hex(text: str) -> bytes:
    return bytes.fromhex("".join(text.split()))


def _counts(words: list[str]) -> dict[str, int]:
    values = {}
    for key, value in zip(words[::2], words[1::2], strict=False):
        if key not in ("packets", "bytes"):
            raise ValueError(f"expected packets/bytes, got {key!r}")
        values[key] = parse_int(value)
    return values


def _replicas(words: list[str]) -> list[tuple[int, int]]:
    out = []
    for word in words:
        port, _, rid = word.partition(":")
        out.append((parse_int(port), parse_int(rid) if rid else 0))
    return out


def _meter(words: list[str]) -> MeterConfig:
    cir, cburst, pir, pburst = (parse_int(w) for w in words)
    return MeterConfig(cir, cburst, pir, pburst)


def parse_line(text: str, number: int) -> Command | None:
    text = text.split("#", 1)[0].strip()
    if not text:
        return None
    kind, _, rest = text.partition(" ")
    rest = rest.strip()
    words = rest.split()
    cmd = Command(kind, number)
    if kind == "add":
        # the action is the trailing name(...) call; it may contain spaces after commas
        start = rest.index("(")
        head = rest[:start].split()
        cmd.action = parse_action(head[-1] + rest[start:])
        cmd.table = head[0]
        fields = head[1:-1]
        if fields and re.fullmatch(r"\d+", fields[0]):
            cmd.priority = int(fields.pop(0))
        for item in fields:
            name, _, value = item.partition(":")
            match = parse_match(value)
            if match is not None:
                cmd.match[name] = match
    elif kind == "setdefault":
        cmd.table = words[0]
        cmd.action = parse_action("".join(words[1:]))
    elif kind == "member":
        cmd.name, cmd.index = words[0], parse_int(words[1])
        cmd.action = parse_action("".join(words[2:]))
    elif kind == "group":
        cmd.name, cmd.index = words[0], parse_int(words[1])
        for word in words[2:]:
            member, _, weight = word.partition("*")
            cmd.members.append((parse_int(member), parse_int(weight) if weight else 1))
    elif kind == "mcast":
        cmd.index = parse_int(words[0])
        cmd.replicas = _replicas(words[1:])
    elif kind == "clone_session":
        cmd.index = parse_int(words[0])
        ports = words[1:]
        if "truncate" in ports:
            at = ports.index("truncate")
            cmd.truncate = parse_int(ports[at + 1])
            ports = ports[:at]
        cmd.replicas = _replicas(ports)
    elif kind in ("meter", "direct_meter"):
        cmd.name, cmd.index = words[0], parse_int(words[1])
        cmd.meter = _meter(words[2:6])
    elif kind in ("register_write", "check_register"):
        cmd.name, cmd.index = words[0], parse_int(words[1])
        cmd.values = {"value": parse_int(words[2])}
    elif kind == "clock":
        cmd.seconds = float(words[0])
    elif kind == "packet":
        cmd.port, cmd.data = parse_int(words[0]), parse_hex(" ".join(words[1:]))
    elif kind == "expect":
        cmd.port = parse_int(words[0])
        cmd.pattern = "".join(words[1:]).rstrip("$").lower()
        if not re.fullmatch(r"[0-9a-f*]*", cmd.pattern) or len(cmd.pattern) % 2:
            raise ValueError("expected frame must be hex digits or '*', whole bytes")
    elif kind in ("check_counter", "check_direct_counter"):
        cmd.name, cmd.index = words[0], parse_int(words[1])
        cmd.values = _counts(words[2:])
    elif kind == "check_digest":
        cmd.name = words[0]
        for item in words[1:]:
            key, _, value = item.partition(":")
            cmd.values[key] = parse_int(value)
    elif kind == "check_stat":
        cmd.name, cmd.values = words[0], {"value": parse_int(words[1])}
    else:
        raise ValueError(f"unknown command {kind!r}")
    return cmd


def parse(text: str, filename: str = "<stf>") -> list[Command]:
    commands = []
    for number, line in enumerate(text.splitlines(), 1):
        try:
            cmd = parse_line(line, number)
        except (ValueError, IndexError) as exc:
            raise StfError(f"{filename}:{number}: {exc}") from None
        if cmd is not None:
            commands.append(cmd)
    return commands


def load(path: Path) -> list[Command]:
    return parse(path.read_text(), str(path))


def frame_matches(pattern: str, frame: bytes) -> bool:
    """True if the frame has exactly the pattern's length and every non-'*' nibble equals."""
    data = frame.hex()
    return len(data) == len(pattern) and all(p in ("*", d) for p, d in zip(pattern, data, strict=True))
