"""An index over one P4Info: every P4Runtime id resolved to the fully qualified name the engine API takes,
with the bit widths needed to decode and encode byte strings. Built once per pipeline config."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypeVar

import grpc
from finsy.proto import p4i, p4t

from p4switch.runtime.errors import P4RuntimeError, invalid, not_found

T = TypeVar("T")

MatchType = p4i.MatchField.MatchType


@dataclass(frozen=True)
class Field:
    """A match field, action parameter, packet metadata or digest member: id, name and width."""

    id: int
    name: str
    bitwidth: int
    match_type: int = 0


@dataclass(frozen=True)
class Action:
    id: int
    name: str
    params: dict[int, Field]


@dataclass(frozen=True)
class Table:
    id: int
    name: str
    fields: dict[int, Field]
    actions: dict[int, int]
    """action id -> ActionRef scope (TABLE_AND_DEFAULT, TABLE_ONLY, DEFAULT_ONLY)"""
    const_default_action_id: int
    implementation_id: int
    direct_counter_id: int
    direct_meter_id: int
    is_const: bool
    size: int
    idle_timeout: bool = False
    """the table notifies the controller of idle entries (p4switch does not implement it)"""

    @property
    def needs_priority(self) -> bool:
        """P4Runtime: priority is required (> 0) iff a field is ternary, range or optional."""
        kinds = {MatchType.TERNARY, MatchType.RANGE, MatchType.OPTIONAL}
        return any(f.match_type in kinds for f in self.fields.values())


@dataclass(frozen=True)
class Profile:
    id: int
    name: str
    table_ids: tuple[int, ...]
    with_selector: bool
    max_group_size: int


@dataclass(frozen=True)
class ValueSet:
    """A parser value set: id, name, most members, and the fields of a member (one for bit<W>)."""

    id: int
    name: str
    size: int
    fields: tuple[Field, ...]


@dataclass(frozen=True)
class Array:
    """An indexed extern (counter, meter, register) or a direct one (``table_id`` set)."""

    id: int
    name: str
    size: int
    bitwidth: int = 0
    table_id: int = 0


@dataclass(frozen=True)
class Digest:
    id: int
    name: str
    members: tuple[Field, ...]
    is_struct: bool


@dataclass
class P4InfoIndex:
    """Lookups by id (raising NOT_FOUND for unknown ids) over one P4Info message."""

    p4info: p4i.P4Info
    tables: dict[int, Table] = field(default_factory=dict)
    actions: dict[int, Action] = field(default_factory=dict)
    profiles: dict[int, Profile] = field(default_factory=dict)
    counters: dict[int, Array] = field(default_factory=dict)
    direct_counters: dict[int, Array] = field(default_factory=dict)
    meters: dict[int, Array] = field(default_factory=dict)
    direct_meters: dict[int, Array] = field(default_factory=dict)
    registers: dict[int, Array] = field(default_factory=dict)
    value_sets: dict[int, ValueSet] = field(default_factory=dict)
    digests: dict[int, Digest] = field(default_factory=dict)
    digest_ids: dict[str, int] = field(default_factory=dict)
    packet_in: tuple[Field, ...] = ()
    packet_out: tuple[Field, ...] = ()

    @classmethod
    def build(cls, info: p4i.P4Info) -> P4InfoIndex:
        index = cls(info)
        for table in info.tables:
            index.tables[table.preamble.id] = _table(table, info)
        for action in info.actions:
            params = {p.id: Field(p.id, p.name, p.bitwidth) for p in action.params}
            index.actions[action.preamble.id] = Action(action.preamble.id, action.preamble.name, params)
        for prof in info.action_profiles:
            index.profiles[prof.preamble.id] = Profile(
                prof.preamble.id, prof.preamble.name, tuple(prof.table_ids), prof.with_selector,
                prof.max_group_size)
        for counter in info.counters:
            pre = counter.preamble
            index.counters[pre.id] = Array(pre.id, pre.name, counter.size)
        for meter in info.meters:
            index.meters[meter.preamble.id] = Array(meter.preamble.id, meter.preamble.name, meter.size)
        for dc in info.direct_counters:
            index.direct_counters[dc.preamble.id] = Array(dc.preamble.id, dc.preamble.name, 0,
                                                          table_id=dc.direct_table_id)
        for dm in info.direct_meters:
            index.direct_meters[dm.preamble.id] = Array(dm.preamble.id, dm.preamble.name, 0,
                                                        table_id=dm.direct_table_id)
        for reg in info.registers:
            width = reg.type_spec.bitstring.bit.bitwidth or reg.type_spec.bitstring.int.bitwidth
            index.registers[reg.preamble.id] = Array(reg.preamble.id, reg.preamble.name, reg.size, width)
        for vs in info.value_sets:
            fields = tuple(Field(m.id, m.name, m.bitwidth) for m in vs.match)
            index.value_sets[vs.preamble.id] = ValueSet(vs.preamble.id, vs.preamble.name, vs.size, fields)
        for dig in info.digests:
            index.digests[dig.preamble.id] = _digest(dig, info)
            index.digest_ids[dig.preamble.name] = dig.preamble.id
        for cpm in info.controller_packet_metadata:
            fields = tuple(Field(m.id, m.name, m.bitwidth) for m in cpm.metadata)
            if cpm.preamble.name == "packet_in":
                index.packet_in = fields
            elif cpm.preamble.name == "packet_out":
                index.packet_out = fields
        return index

    def table(self, table_id: int) -> Table:
        return _lookup(self.tables, table_id, "table")

    def action(self, action_id: int) -> Action:
        return _lookup(self.actions, action_id, "action")

    def profile(self, profile_id: int) -> Profile:
        return _lookup(self.profiles, profile_id, "action profile")

    def counter(self, counter_id: int) -> Array:
        return _lookup(self.counters, counter_id, "counter")

    def meter(self, meter_id: int) -> Array:
        return _lookup(self.meters, meter_id, "meter")

    def register(self, register_id: int) -> Array:
        return _lookup(self.registers, register_id, "register")

    def value_set(self, value_set_id: int) -> ValueSet:
        return _lookup(self.value_sets, value_set_id, "value set")

    def digest(self, digest_id: int) -> Digest:
        return _lookup(self.digests, digest_id, "digest")

    def table_action(self, table: Table, action_id: int, *, default: bool) -> Action:
        """The action by id, checked against the table's action list and the ActionRef scope."""
        action = self.action(action_id)
        scope = table.actions.get(action_id)
        if scope is None:
            raise invalid(f"action {action.name} is not an action of table {table.name}")
        if default and scope == p4i.ActionRef.TABLE_ONLY:
            raise P4RuntimeError(grpc.StatusCode.PERMISSION_DENIED,
                                 f"action {action.name} is @tableonly in table {table.name}")
        if not default and scope == p4i.ActionRef.DEFAULT_ONLY:
            raise invalid(f"action {action.name} is @defaultonly in table {table.name}")
        return action


def _lookup(items: dict[int, T], item_id: int, kind: str) -> T:
    try:
        return items[item_id]
    except KeyError:
        raise not_found(f"unknown {kind} id {item_id:#x}") from None


def _table(table: p4i.Table, info: p4i.P4Info) -> Table:
    direct_counters = {dc.preamble.id for dc in info.direct_counters}
    direct_meters = {dm.preamble.id for dm in info.direct_meters}
    counter_id = next((i for i in table.direct_resource_ids if i in direct_counters), 0)
    meter_id = next((i for i in table.direct_resource_ids if i in direct_meters), 0)
    return Table(
        id=table.preamble.id,
        name=table.preamble.name,
        fields={f.id: Field(f.id, f.name, f.bitwidth, f.match_type) for f in table.match_fields},
        actions={ref.id: ref.scope for ref in table.action_refs},
        const_default_action_id=table.const_default_action_id,
        implementation_id=table.implementation_id,
        direct_counter_id=counter_id,
        direct_meter_id=meter_id,
        is_const=table.is_const_table,
        size=table.size,
        idle_timeout=table.idle_timeout_behavior == p4i.Table.NOTIFY_CONTROL,
    )


def _digest(dig: p4i.Digest, info: p4i.P4Info) -> Digest:
    """Members of the digest's type: a named struct, a tuple or a single bitstring."""
    spec = dig.type_spec
    kind = spec.WhichOneof("type_spec")
    if kind == "struct":
        struct = info.type_info.structs[spec.struct.name]
        members = tuple(
            Field(i + 1, m.name, _width(m.type_spec)) for i, m in enumerate(struct.members))
        return Digest(dig.preamble.id, dig.preamble.name, members, True)
    if kind == "tuple":
        members = tuple(Field(i + 1, f"f{i}", _width(m)) for i, m in enumerate(spec.tuple.members))
        return Digest(dig.preamble.id, dig.preamble.name, members, True)
    return Digest(dig.preamble.id, dig.preamble.name, (Field(1, "value", _width(spec)),), False)


def _width(spec: p4t.P4DataTypeSpec) -> int:
    if spec.WhichOneof("type_spec") == "bool":
        return 1
    bits = spec.bitstring
    return bits.bit.bitwidth or bits.int.bitwidth or bits.varbit.max_bitwidth
