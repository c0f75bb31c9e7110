"""Parser of STF test files: p4c's format (testdata/p4_16_samples/*.stf, as p4c's BMv2 test runner reads
them) with p4switch's additions. p4switch/tests/conformance/README.md has examples; p4switch/conformance
runs them.

p4c's commands (names may be the control-plane names or suffixes of them, as p4c's runner resolves them):

    add <table> [<priority>] <field>:<value> ... <action>(<param>:<value>, ...) [= <entry id>]
    setdefault <table> <action>(<param>:<value>, ...)
    packet <port> <hex>                send a frame
    expect <port> [<hex> [$]]          expect a frame ('*' = any nibble; '$' = exactly this long,
                                       otherwise it may be longer); no hex: any frames on that port
    check_counter <counter>(<index> | <entry id>) [packets|bytes <op> <n>]
    wait                               let the frames sent so far go through
    remove all
    mc_mgrp_create <group>, mc_node_create <rid> <port> ..., mc_node_update <node> <port> ...,
    mc_node_associate <group> <node>   (nodes are numbered from 0 in creation order, as BMv2's)
    mirroring_add <session> <port>, mirroring_add_mc <session> <group>, mirroring_delete <session>
    counter_write <counter> <index> <packets> <bytes>, register_write <register> <index> <value>,
    register_reset <register>, meter_set_rates <meter> <index> <rate>:<burst> <rate>:<burst>,
    meter_array_set_rates <meter> <rate>:<burst> <rate>:<burst>     (rates per microsecond, as BMv2)
    mirroring_get, counter_read, register_read, meter_get_rates      (reads: nothing to check)

p4switch's additions:

    add ... member(<id>) | group(<id>)
    member <profile> <member_id> <action>(<param>:<value>, ...)
    group <profile> <group_id> <member_id>[*<weight>] ...
    mcast <group_id> <port>[:<rid>] ...
    clone_session <session_id> <port>[:<rid>] ... [truncate <bytes>]
    meter <meter> <index> <cir> <cburst> <pir> <pburst>     (rates per second)
    direct_meter <table> <entry_number> <cir> <cburst> <pir> <pburst>   (entry number: 1 = first `add`)
    register_write <register> <index> <value>
    value_set <value_set> <member> ...  set a parser value set's members (a member: <v>, or <v1>,<v2>,...
                                       one value per field of a struct value set)
    clock <seconds>                    advance the (injected) clock
    check_counter <counter> <index> [packets <n>] [bytes <n>]
    check_direct_counter <table> <entry_number> [packets <n>] [bytes <n>]
    check_register <register> <index> <value>
    check_digest <digest_name> <field>:<value> ...
    check_stat <name> <value>          engine stats only (the in-process driver)

Match values: ``0x0a000001``, ``10``, ``0b101``, ``10.0.0.1``, ``00:11:22:33:44:55``; p4c's ternary
``0x0a**`` ('*' digits are wildcards); ternary ``<v>&&&<mask>``, lpm ``<v>/<prefix_len>``, range
``<low>..<high>``, wildcard ``*`` (field left out). How a plain value becomes the field's match kind
differs between p4c's runner (``p4c_match``: a mask or prefix as long as the digits written) and
p4switch's (``coerce``: the whole field); ``Command.match_text`` keeps what was written.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
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
    match_text: dict[str, str] = field(default_factory=dict)
    action: ActionCall | MemberRef | GroupRef | None = None
    entry_id: str = ""
    name: str = ""
    index: int = 0
    port: int = 0
    data: bytes = b""
    pattern: str = ""
    exact_length: bool = False  # expect ... $
    any_frame: bool = False  # expect <port> alone
    values: dict[str, int] = field(default_factory=dict)
    compare: str = "=="  # check_counter's operator
    replicas: list[tuple[int, int]] = field(default_factory=list)
    members: list[tuple[int, int]] = field(default_factory=list)
    ports: list[int] = field(default_factory=list)
    meter: MeterConfig | None = None
    seconds: float = 0.0
    truncate: int = 0
    tuples: list[tuple[int, ...]] = field(default_factory=list)  # value_set's members


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


_DIGITS = re.compile(r"0([xXbBoO])([0-9a-fA-F*]+)")
_DIGIT_BITS = {"x": 4, "b": 1, "o": 3}


def _wildcard_digits(text: str) -> tuple[int, int, int] | None:
    """``0x12**``-style constants: (value, mask, bits written), '*' digits masked out; else None."""
    m = _DIGITS.fullmatch(text)
    if m is None:
        return None
    bits = _DIGIT_BITS[m.group(1).lower()]
    digits = m.group(2)
    base = 1 << bits
    value = int(digits.replace("*", "0"), base)
    mask = int("".join("0" if d == "*" else format(base - 1, "x") for d in digits), base)
    return value, mask, bits * len(digits)


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
        return Lpm(parse_int(value), parse_int(plen))
    if "*" in text:
        digits = _wildcard_digits(text)
        if digits is None:
            raise ValueError(f"bad match value {text!r}")
        return Ternary(digits[0] & digits[1], digits[1])
    return Exact(parse_int(text))


def coerce(match: Match, kind: str, width: int) -> Match:
    """Turn a plain value (Exact) into the field's match kind, over the whole field (p4switch's files)."""
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


def p4c_match(text: str, match: Match, kind: str, width: int) -> Match:
    """Turn a plain value into the field's match kind as p4c's BMv2 runner does (bmv2stf.py): a ternary
    mask covers the digits written (``0x1234`` masks 16 bits, ``0x12**`` 8), an lpm prefix is as long
    as the digits written; a decimal value covers the whole field."""
    digits = _wildcard_digits(text)
    if not isinstance(match, Exact) or digits is None or kind not in ("ternary", "lpm"):
        return coerce(match, kind, width)
    value, _, bits = digits
    if kind == "ternary":
        return Ternary(value & ((1 << bits) - 1), (1 << bits) - 1)
    return Lpm(value, min(bits, width))


_CALL = re.compile(r"^([\w.$\[\]]+)\((.*)\)$")


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


def _bmv2_rates(words: list[str]) -> MeterConfig:
    """BMv2's `<rate>:<burst> <rate>:<burst>` (committed, then peak; rates per microsecond)."""
    if len(words) != 2:
        raise ValueError("expected two <rate>:<burst> pairs")
    (cir, cburst), (pir, pburst) = (w.split(":") for w in words)
    return MeterConfig(round(float(cir) * 1e6), parse_int(cburst), round(float(pir) * 1e6), parse_int(pburst))


def _add(cmd: Command, rest: str, words: list[str]) -> None:
    # the action is the trailing name(...) call; it may contain spaces after commas
    start = rest.index("(")
    end = rest.rindex(")")
    head = rest[:start].split()
    cmd.action = parse_action(head[-1] + rest[start : end + 1])
    tail = rest[end + 1 :].split()
    if tail:
        if tail[0] != "=" or len(tail) != 2:
            raise ValueError(f"unexpected {' '.join(tail)!r} after the action")
        cmd.entry_id = tail[1]
    cmd.table = head[0]
    fields = head[1:-1]
    if fields and re.fullmatch(r"\d+", fields[0]):
        cmd.priority = int(fields.pop(0))
    for item in fields:
        name, _, value = item.partition(":")
        match = parse_match(value)
        cmd.match_text[name] = value
        if match is not None:
            cmd.match[name] = match


def _setdefault(cmd: Command, rest: str, words: list[str]) -> None:
    cmd.table = words[0]
    cmd.action = parse_action("".join(words[1:]))


def _member(cmd: Command, rest: str, words: list[str]) -> None:
    cmd.name, cmd.index = words[0], parse_int(words[1])
    cmd.action = parse_action("".join(words[2:]))


def _group(cmd: Command, rest: str, words: list[str]) -> None:
    cmd.name, cmd.index = words[0], parse_int(words[1])
    for word in words[2:]:
        member, _, weight = word.partition("*")
        cmd.members.append((parse_int(member), parse_int(weight) if weight else 1))


def _mcast(cmd: Command, rest: str, words: list[str]) -> None:
    cmd.index = parse_int(words[0])
    cmd.replicas = _replicas(words[1:])


def _clone_session(cmd: Command, rest: str, words: list[str]) -> None:
    cmd.index = parse_int(words[0])
    ports = words[1:]
    if "truncate" in ports:
        at = ports.index("truncate")
        cmd.truncate = parse_int(ports[at + 1])
        ports = ports[:at]
    cmd.replicas = _replicas(ports)


def _meter_cmd(cmd: Command, rest: str, words: list[str]) -> None:
    cmd.name, cmd.index = words[0], parse_int(words[1])
    cmd.meter = _meter(words[2:6])


def _register_value(cmd: Command, rest: str, words: list[str]) -> None:
    cmd.name, cmd.index = words[0], parse_int(words[1])
    cmd.values = {"value": parse_int(words[2])}


def _value_set(cmd: Command, rest: str, words: list[str]) -> None:
    cmd.name = words[0]
    cmd.tuples = [tuple(parse_int(v) for v in w.split(",")) for w in words[1:]]


def _packet(cmd: Command, rest: str, words: list[str]) -> None:
    cmd.port, cmd.data = parse_int(words[0]), parse_hex(" ".join(words[1:]))


def _expect(cmd: Command, rest: str, words: list[str]) -> None:
    cmd.port = parse_int(words[0])
    text = "".join(words[1:]).lower()
    cmd.any_frame = not text
    cmd.exact_length = text.endswith("$")
    cmd.pattern = text.rstrip("$")
    if not re.fullmatch(r"[0-9a-f*]*", cmd.pattern) or len(cmd.pattern) % 2:
        raise ValueError("expected frame must be hex digits or '*', whole bytes")


_P4C_CHECK = re.compile(
    r"([\w.$\[\]]+)\s*\(\s*([\w$]+)\s*\)\s*(?:(packets|bytes)\s*(==|!=|<=|<|>=|>)\s*(\w+))?"
)


def _check_counter(cmd: Command, rest: str, words: list[str]) -> None:
    m = _P4C_CHECK.fullmatch(rest)
    if m is None:  # p4switch's form: <counter> <index> [packets <n>] [bytes <n>]
        cmd.name, cmd.index = words[0], parse_int(words[1])
        cmd.values = _counts(words[2:])
        return
    cmd.name, index, unit, cmd.compare, count = m.groups()
    if re.fullmatch(r"\d+|0[xX][0-9a-fA-F]+", index):
        cmd.index = parse_int(index)
    else:
        cmd.entry_id = index.removeprefix("$")  # `$A` names the entry added with `= A`
    cmd.values = {unit: parse_int(count)} if unit else {"packets": 0}


def _counts_cmd(cmd: Command, rest: str, words: list[str]) -> None:
    cmd.name, cmd.index = words[0], parse_int(words[1])
    cmd.values = _counts(words[2:])


def _digest(cmd: Command, rest: str, words: list[str]) -> None:
    cmd.name = words[0]
    for item in words[1:]:
        key, _, value = item.partition(":")
        cmd.values[key] = parse_int(value)


def _mc_node(cmd: Command, rest: str, words: list[str]) -> None:
    cmd.index = parse_int(words[0])
    cmd.ports = [parse_int(w) for w in words[1:]]


def _numbers(*keys: str) -> Callable[[Command, str, list[str]], None]:
    """A command of numbers only: the first is ``index``, the others ``values`` under ``keys``."""

    def parse(cmd: Command, rest: str, words: list[str]) -> None:
        if len(words) != len(keys) + 1:
            raise ValueError(f"expected {len(keys) + 1} numbers")
        cmd.index = parse_int(words[0])
        cmd.values = {k: parse_int(w) for k, w in zip(keys, words[1:], strict=True)}

    return parse


def _named(*keys: str) -> Callable[[Command, str, list[str]], None]:
    """<name> followed by numbers: ``index`` (if keys name it) and ``values``."""

    def parse(cmd: Command, rest: str, words: list[str]) -> None:
        if len(words) != len(keys) + 1:
            raise ValueError(f"expected a name and {len(keys)} numbers")
        cmd.name = words[0]
        numbers = {k: parse_int(w) for k, w in zip(keys, words[1:], strict=True)}
        cmd.index = numbers.pop("index", 0)
        cmd.values = numbers

    return parse


def _meter_rates(cmd: Command, rest: str, words: list[str]) -> None:
    cmd.name, cmd.index = words[0], parse_int(words[1])
    cmd.meter = _bmv2_rates(words[2:])


def _meter_array_rates(cmd: Command, rest: str, words: list[str]) -> None:
    cmd.name = words[0]
    cmd.meter = _bmv2_rates(words[1:])


def _nothing(cmd: Command, rest: str, words: list[str]) -> None:
    return None


def _clock(cmd: Command, rest: str, words: list[str]) -> None:
    cmd.seconds = float(words[0])


def _stat(cmd: Command, rest: str, words: list[str]) -> None:
    cmd.name, cmd.values = words[0], {"value": parse_int(words[1])}


_COMMANDS: dict[str, Callable[[Command, str, list[str]], None]] = {
    "add": _add,
    "setdefault": _setdefault,
    "member": _member,
    "group": _group,
    "mcast": _mcast,
    "clone_session": _clone_session,
    "meter": _meter_cmd,
    "direct_meter": _meter_cmd,
    "register_write": _register_value,
    "check_register": _register_value,
    "value_set": _value_set,
    "clock": _clock,
    "packet": _packet,
    "expect": _expect,
    "check_counter": _check_counter,
    "check_direct_counter": _counts_cmd,
    "check_digest": _digest,
    "check_stat": _stat,
    "wait": _nothing,
    "remove": _nothing,
    "mc_mgrp_create": _numbers(),
    "mc_node_create": _mc_node,
    "mc_node_update": _mc_node,
    "mc_node_associate": _numbers("node"),
    "mirroring_add": _numbers("port"),
    "mirroring_add_mc": _numbers("group"),
    "mirroring_delete": _numbers(),
    "mirroring_get": _numbers(),
    "counter_read": _named("index"),
    "counter_write": _named("index", "packets", "bytes"),
    "register_read": _named("index"),
    "register_reset": _named(),
    "meter_get_rates": _named("index"),
    "meter_set_rates": _meter_rates,
    "meter_array_set_rates": _meter_array_rates,
}


def parse_line(text: str, number: int) -> Command | None:
    text = text.split("#", 1)[0].strip()
    if not text:
        return None
    kind, _, rest = text.partition(" ")
    kind = kind.lower()
    parser = _COMMANDS.get(kind)
    if parser is None:
        raise ValueError(f"unknown command {kind!r}")
    cmd = Command(kind, number)
    rest = rest.strip()
    parser(cmd, rest, rest.split())
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


def frame_matches(pattern: str, frame: bytes, exact_length: bool = True) -> bool:
    """True if every non-'*' nibble of the pattern equals the frame's; the frame must be exactly as long
    (``exact_length``, p4switch's files and p4c's ``$``) or at least as long (p4c without ``$``)."""
    data = frame.hex()
    if len(data) < len(pattern) or (exact_length and len(data) != len(pattern)):
        return False
    return all(p in ("*", d) for p, d in zip(pattern, data, strict=False))
