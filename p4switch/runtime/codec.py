"""P4Runtime byte strings and table entries <-> the engine's ints and dataclasses.

Byte strings follow the P4Runtime "Bytestrings" rules: the canonical (shortest) form is what we send, and
any width with leading zero bytes is accepted on input as long as the value fits the P4Info bit width.
Every check that the specification attaches to a match kind is done here, so the engine only ever sees
well-formed entries."""

from __future__ import annotations

from finsy.proto import p4i, p4r

from p4switch.engine import api as engine
from p4switch.runtime.errors import invalid, unimplemented
from p4switch.runtime.p4info import Field, P4InfoIndex, Table

MatchType = p4i.MatchField.MatchType


def decode_uint(value: bytes, width: int, what: str) -> int:
    """The unsigned int in ``value``; INVALID_ARGUMENT when empty or wider than ``width`` bits."""
    if not value:
        raise invalid(f"empty byte string for {what}")
    number = int.from_bytes(value, "big")
    if number >> width:
        raise invalid(f"bad {what} width: value needs {number.bit_length()} bits, field has {width}")
    return number


def encode_uint(number: int) -> bytes:
    """The canonical byte string: the shortest that holds the value (at least one byte)."""
    return number.to_bytes(max(1, (number.bit_length() + 7) // 8), "big")


# ------------------------------------------------------------------------------------ match fields


def decode_match(table: Table, matches: list[p4r.FieldMatch]) -> dict[str, engine.Match]:
    """The engine's match dict for a TableEntry.match list, with every specification check."""
    result: dict[str, engine.Match] = {}
    for fm in matches:
        spec = table.fields.get(fm.field_id)
        if spec is None:
            raise invalid(f"unknown match field id {fm.field_id} in table {table.name}")
        if spec.name in result:
            raise invalid(f"match field {spec.name} given twice")
        result[spec.name] = _decode_field(spec, fm)
    for spec in table.fields.values():
        if spec.match_type == MatchType.EXACT and spec.name not in result:
            raise invalid(f"exact match field {spec.name} missing")
    return result


_KIND_NAMES: dict[int, str] = {
    MatchType.EXACT: "exact", MatchType.TERNARY: "ternary", MatchType.LPM: "lpm",
    MatchType.RANGE: "range", MatchType.OPTIONAL: "optional",
}


def _decode_field(spec: Field, fm: p4r.FieldMatch) -> engine.Match:
    kind = fm.WhichOneof("field_match_type")
    expected = _KIND_NAMES.get(spec.match_type)
    if kind != expected:
        raise invalid(f"match field {spec.name} is {expected}, got {kind}")
    what = f"match field {spec.name}"
    width = spec.bitwidth
    if kind == "exact":
        return engine.Exact(decode_uint(fm.exact.value, width, what))
    if kind == "optional":
        return engine.Optional_(decode_uint(fm.optional.value, width, what))
    if kind == "ternary":
        value = decode_uint(fm.ternary.value, width, what)
        mask = decode_uint(fm.ternary.mask, width, what)
        if mask == 0:
            raise invalid(f"{what}: a zero mask is a don't care, omit the field")
        if value & ~mask:
            raise invalid(f"{what}: ternary value has bits outside the mask")
        return engine.Ternary(value, mask)
    if kind == "lpm":
        value = decode_uint(fm.lpm.value, width, what)
        plen = fm.lpm.prefix_len
        if not 0 < plen <= width:
            raise invalid(f"{what}: prefix length {plen} not in 1..{width} (0 is a don't care: omit it)")
        if value & ((1 << (width - plen)) - 1):
            raise invalid(f"{what}: lpm value has bits beyond the prefix length {plen}")
        return engine.Lpm(value, plen)
    low = decode_uint(fm.range.low, width, what)
    high = decode_uint(fm.range.high, width, what)
    if low > high:
        raise invalid(f"{what}: range low {low} > high {high}")
    if low == 0 and high == (1 << width) - 1:
        raise invalid(f"{what}: full range is a don't care, omit the field")
    return engine.Range(low, high)


def encode_match(table: Table, match: dict[str, engine.Match]) -> list[p4r.FieldMatch]:
    by_name = {f.name: f for f in table.fields.values()}
    result = []
    for name, value in match.items():
        fm = p4r.FieldMatch(field_id=by_name[name].id)
        match value:
            case engine.Exact(v):
                fm.exact.value = encode_uint(v)
            case engine.Optional_(v):
                fm.optional.value = encode_uint(v)
            case engine.Ternary(v, m):
                if m == 0:
                    continue
                fm.ternary.value, fm.ternary.mask = encode_uint(v), encode_uint(m)
            case engine.Lpm(v, plen):
                if plen == 0:
                    continue
                fm.lpm.value, fm.lpm.prefix_len = encode_uint(v), plen
            case engine.Range(lo, hi):
                fm.range.low, fm.range.high = encode_uint(lo), encode_uint(hi)
        result.append(fm)
    return sorted(result, key=lambda f: f.field_id)


# ---------------------------------------------------------------------------------------- actions


def decode_action(index: P4InfoIndex, table: Table | None, action: p4r.Action, *,
                  default: bool = False) -> engine.ActionCall:
    """An Action message as an ActionCall; ``table`` None for action profile members."""
    info = index.table_action(table, action.action_id, default=default) if table else \
        index.action(action.action_id)
    params: dict[str, int] = {}
    for param in action.params:
        spec = info.params.get(param.param_id)
        if spec is None:
            raise invalid(f"unknown parameter id {param.param_id} of action {info.name}")
        if spec.name in params:
            raise invalid(f"parameter {spec.name} of action {info.name} given twice")
        params[spec.name] = decode_uint(param.value, spec.bitwidth, f"action parameter {spec.name}")
    missing = [p.name for p in info.params.values() if p.name not in params]
    if missing:
        raise invalid(f"action {info.name} is missing parameters {', '.join(missing)}")
    return engine.ActionCall(info.name, params)


def encode_action(index: P4InfoIndex, call: engine.ActionCall) -> p4r.Action:
    info = next((a for a in index.actions.values() if a.name == call.name), None)
    if info is None:
        raise invalid(f"engine action {call.name} is not in the P4Info")
    by_name = {p.name: p for p in info.params.values()}
    params = [p4r.Action.Param(param_id=by_name[name].id, value=encode_uint(value))
              for name, value in call.params.items()]
    return p4r.Action(action_id=info.id, params=sorted(params, key=lambda p: p.param_id))


# ---------------------------------------------------------------------------------- table entries


def decode_key(index: P4InfoIndex, msg: p4r.TableEntry) -> tuple[Table, dict[str, engine.Match], int]:
    """Table, match and priority: the key of an entry, checked as the specification asks."""
    table = index.table(msg.table_id)
    if msg.is_default_action:
        if msg.match or msg.priority:
            raise invalid("the default entry has no match fields and priority 0")
        return table, {}, 0
    if not table.fields:
        raise invalid(f"table {table.name} has no key: only its default entry can be written")
    match = decode_match(table, list(msg.match))
    if table.needs_priority and msg.priority <= 0:
        raise invalid(f"table {table.name} needs a priority > 0 (ternary/range/optional key)")
    if not table.needs_priority and msg.priority != 0:
        raise invalid(f"table {table.name} takes no priority (exact/lpm key)")
    return table, match, msg.priority


def decode_table_action(index: P4InfoIndex, table: Table, msg: p4r.TableEntry
                        ) -> engine.ActionCall | engine.MemberRef | engine.GroupRef:
    kind = msg.action.WhichOneof("type")
    indirect = table.implementation_id != 0
    if kind == "action" and not indirect:
        return decode_action(index, table, msg.action.action, default=msg.is_default_action)
    if kind == "action_profile_member_id" and indirect:
        return engine.MemberRef(msg.action.action_profile_member_id)
    if kind == "action_profile_group_id" and indirect:
        if not index.profile(table.implementation_id).with_selector:
            raise invalid(f"table {table.name}: groups need an action selector")
        return engine.GroupRef(msg.action.action_profile_group_id)
    raise invalid(f"table {table.name} is {'indirect' if indirect else 'direct'}: action {kind} not allowed")


def decode_meter_config(cfg: p4r.MeterConfig) -> engine.MeterConfig:
    if cfg.eburst:
        raise invalid("eburst is only for srTCM meters; v1model meters are two-rate three-colour")
    if min(cfg.cir, cfg.cburst, cfg.pir, cfg.pburst) < 0:
        raise invalid("meter rates and bursts must not be negative")
    return engine.MeterConfig(cfg.cir, cfg.cburst, cfg.pir, cfg.pburst)


def encode_meter_config(cfg: engine.MeterConfig) -> p4r.MeterConfig:
    return p4r.MeterConfig(cir=cfg.cir, cburst=cfg.cburst, pir=cfg.pir, pburst=cfg.pburst)


EntryKey = tuple[str, frozenset[tuple[str, engine.Match]], int]
"""(table, match, priority): what identifies a table entry"""


def entry_key(table: Table, match: dict[str, engine.Match], priority: int) -> EntryKey:
    return table.name, frozenset(match.items()), priority


def direct_state(table: Table, msg: p4r.TableEntry
                 ) -> tuple[tuple[int, int] | None, engine.MeterConfig | None]:
    """The direct counter data and meter config an entry sets (None: not given, or no such resource)."""
    counter = (msg.counter_data.byte_count, msg.counter_data.packet_count) \
        if msg.HasField("counter_data") and table.direct_counter_id else None
    meter = decode_meter_config(msg.meter_config) if msg.HasField("meter_config") and table.direct_meter_id \
        else None
    return counter, meter


def decode_entry(index: P4InfoIndex, msg: p4r.TableEntry) -> tuple[Table, engine.TableEntry]:
    """A whole TableEntry for INSERT/MODIFY (the action must be set)."""
    if msg.is_const:
        raise invalid("is_const must be false in a write")
    table, match, priority = decode_key(index, msg)
    if msg.idle_timeout_ns:
        if table.idle_timeout:
            raise unimplemented(f"table {table.name}: idle timeouts are not supported by p4switch")
        raise invalid(f"table {table.name} has no idle timeout: idle_timeout_ns must be 0")
    action = decode_table_action(index, table, msg)
    counter, meter = direct_state(table, msg)
    return table, engine.TableEntry(match, action, priority, counter_data=counter, meter_config=meter)


def encode_entry(index: P4InfoIndex, table: Table, entry: engine.TableEntry, *,
                 counter: bool, meter: bool) -> p4r.TableEntry:
    """The TableEntry message for an engine entry; direct resources only when the reader asked."""
    msg = p4r.TableEntry(table_id=table.id, priority=entry.priority, is_default_action=entry.is_default,
                         is_const=entry.is_const)
    msg.match.extend(encode_match(table, entry.match))
    match entry.action:
        case engine.ActionCall():
            msg.action.action.CopyFrom(encode_action(index, entry.action))
        case engine.MemberRef(member_id):
            msg.action.action_profile_member_id = member_id
        case engine.GroupRef(group_id):
            msg.action.action_profile_group_id = group_id
    if counter and table.direct_counter_id and entry.counter_data is not None:
        msg.counter_data.byte_count, msg.counter_data.packet_count = entry.counter_data
    if meter and table.direct_meter_id and entry.meter_config is not None:
        msg.meter_config.CopyFrom(encode_meter_config(entry.meter_config))
    return msg
