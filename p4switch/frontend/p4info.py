"""P4Info (p4.config.v1) from the lowered program, with ids and names as p4c assigns them.

Ids: the resource type prefix (P4Ids.Prefix of p4info.proto) in the top byte; `@id(n)` is honoured (the
prefix is added when n has none); otherwise the low 24 bits are the Jenkins one-at-a-time hash of the fully
qualified name, probing upwards on a collision, which reproduces p4c's ids (e.g. "MyIngress.ipv4_lpm" ->
37375156 as in the p4lang tutorials) and keeps them stable across runs. (p4c releases before 2020 kept
only 16 bits of the hash, so p4info files from old tutorials show smaller ids.)
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from finsy.proto import p4i, p4t

from p4switch import ir
from p4switch.frontend.errors import Pos, type_error

ACTION, TABLE, VALUE_SET, CONTROLLER_HEADER = 0x01, 0x02, 0x03, 0x04
ACTION_PROFILE, COUNTER, DIRECT_COUNTER, METER, DIRECT_METER, REGISTER, DIGEST = range(0x11, 0x18)

_EXTERN_PREFIX = {
    "counter": COUNTER,
    "direct_counter": DIRECT_COUNTER,
    "meter": METER,
    "direct_meter": DIRECT_METER,
    "register": REGISTER,
    "action_profile": ACTION_PROFILE,
    "action_selector": ACTION_PROFILE,
    "value_set": VALUE_SET,
}
_MATCH = {
    "exact": p4i.MatchField.EXACT,
    "ternary": p4i.MatchField.TERNARY,
    "lpm": p4i.MatchField.LPM,
    "range": p4i.MatchField.RANGE,
    "optional": p4i.MatchField.OPTIONAL,
}
_COUNTER_UNIT = {
    "packets": p4i.CounterSpec.PACKETS,
    "bytes": p4i.CounterSpec.BYTES,
    "both": p4i.CounterSpec.BOTH,
}
_METER_UNIT = {"packets": p4i.MeterSpec.PACKETS, "bytes": p4i.MeterSpec.BYTES}
_COUNTER_OR_METER: dict[str, tuple[str, dict[str, Any]]] = {
    "counter": ("counters", _COUNTER_UNIT),
    "direct_counter": ("direct_counters", _COUNTER_UNIT),
    "meter": ("meters", _METER_UNIT),
    "direct_meter": ("direct_meters", _METER_UNIT),
}
_SCOPE = {
    "all": p4i.ActionRef.TABLE_AND_DEFAULT,
    "table_only": p4i.ActionRef.TABLE_ONLY,
    "default_only": p4i.ActionRef.DEFAULT_ONLY,
}


def name_hash(name: str) -> int:
    """Jenkins' one-at-a-time hash (32 bits), the function p4c uses for P4Runtime ids."""
    h = 0
    for byte in name.encode():
        h = (h + byte) & 0xFFFFFFFF
        h = (h + (h << 10)) & 0xFFFFFFFF
        h ^= h >> 6
    h = (h + (h << 3)) & 0xFFFFFFFF
    h ^= h >> 11
    return (h + (h << 15)) & 0xFFFFFFFF


class IdAllocator:
    """Assigns ids: explicit @id values first, then hashed names with linear probing on collision."""

    def __init__(self) -> None:
        self.used: set[int] = set()
        self.ids: dict[tuple[int, str], int] = {}
        self._pending: list[tuple[int, str]] = []

    def request(self, prefix: int, name: str, explicit: Any, pos: Pos) -> None:
        if explicit is None:
            self._pending.append((prefix, name))
            return
        value = int(explicit)
        if value >> 24 == 0:
            value |= prefix << 24
        elif value >> 24 != prefix:
            raise type_error(
                pos, f"@id({explicit}) of {name} does not have the resource prefix {prefix:#04x}"
            )
        if value in self.used:
            raise type_error(pos, f"@id({explicit}) of {name} is used twice")
        self.used.add(value)
        self.ids[(prefix, name)] = value

    def assign(self) -> dict[tuple[int, str], int]:
        for prefix, name in self._pending:
            if (prefix, name) in self.ids:
                continue
            low = name_hash(name) & 0xFFFFFF
            while (prefix << 24 | low) in self.used:
                low = (low + 1) & 0xFFFFFF
            self.used.add(prefix << 24 | low)
            self.ids[(prefix, name)] = prefix << 24 | low
        return self.ids


def aliases(names: list[str]) -> dict[str, str]:
    """The shortest dot-separated suffix of each name that no other name ends with (p4c's alias)."""
    out = {}
    for name in names:
        parts = name.split(".")
        for k in range(1, len(parts) + 1):
            cand = ".".join(parts[-k:])
            if not any(o != name and (o == cand or o.endswith("." + cand)) for o in names):
                out[name] = cand
                break
        else:
            out[name] = name
    return out


def _explicit_id(annos: dict[str, list[Any]]) -> Any:
    ids = annos.get("id")
    return ids[0] if ids else None


_NOT_ANNOTATIONS = ("name", "id", "brief", "description")
"""annotations p4c does not copy into P4Info: they are the name, the id and the documentation"""


def annotate(msg: Any, annos: dict[str, list[Any]]) -> None:
    """Annotations and documentation as p4c writes them (`@name`, `@name("text", 3)`) into a P4Info
    message with ``annotations`` and ``doc``; one whose argument is not a literal is left out."""
    for name, args in annos.items():
        if name in _NOT_ANNOTATIONS or any(arg is None for arg in args):
            continue
        rendered = ", ".join(f'"{arg}"' if isinstance(arg, str) else str(arg) for arg in args)
        msg.annotations.append(f"@{name}({rendered})" if args else f"@{name}")
    for field in ("brief", "description"):
        text = annos.get(field)
        if text and isinstance(text[0], str):
            setattr(msg.doc, field, text[0])


def applied_tables(program: ir.Program) -> set[str]:
    """The tables the controls apply (in statements, conditions or other applied tables' keys): p4c
    leaves the others, and what only they use, out of P4Info."""
    keys = {t.name: t.keys for t in program.tables}
    found: set[str] = set()
    todo: list[Any] = [s for c in program.controls for s in c.body]
    while todo:
        node = todo.pop()
        if isinstance(node, ir.Apply | ir.Switch | ir.TableHit | ir.TableMiss) and node.table not in found:
            found.add(node.table)
            todo.extend(keys[node.table])
        todo.extend(ir.children(node))
    return found


def _pos(src: str) -> Pos:
    file, line, col = (src or "?:0:0").rsplit(":", 2)
    return Pos(file, int(line), int(col))


Ids = dict[tuple[int, str], int]
Annos = dict[str, list[Any]]


@dataclass(frozen=True)
class Extras:
    """What P4Info needs that the IR does not carry: annotations by qualified name (of the header type
    for headers; of the table, one per key, for keys; of the action, one per parameter, for params), and
    the actions control bodies call directly (inlined, so not in the IR's actions; p4c lists them), the
    field names of struct value sets."""

    actions: dict[str, Annos]
    tables: dict[str, Annos]
    externs: dict[str, Annos]
    headers: dict[str, Annos]
    keys: dict[str, list[Annos]]
    params: dict[str, list[Annos]]
    action_refs: dict[tuple[str, str], Annos]  # (table, action): the annotations of an actions-list item
    called_actions: list[str]
    value_set_fields: dict[str, list[str]]  # the field names of a value set of a struct type
    type_names: dict[
        str, list[str]
    ]  # the `type` (or serializable enum) names of a table's keys, an action's params, a header's fields
    new_types: dict[str, tuple[int, Annos]]  # each `type` declaration of bit<W>: W and its annotations
    ser_enums: dict[str, tuple[int, dict[str, int]]]  # each serializable enum: its width and members
    unlisted: set[str]  # extern instances p4c leaves out (declared through a typedef name)


def assign_ids(program: ir.Program, x: Extras) -> tuple[ir.Program, Ids]:
    """The ids pass: every control-plane object gets its P4Runtime id; returns the program with the ids
    of its actions, tables and extern instances (`p4info_id`), and all the ids by (prefix, name)."""
    ids = _allocate(program, x)
    program = replace(
        program,
        actions=tuple(replace(a, p4info_id=ids[(ACTION, a.name)]) for a in program.actions),
        tables=tuple(replace(t, p4info_id=ids[(TABLE, t.name)]) for t in program.tables),
        externs=tuple(_with_id(e, ids[(_EXTERN_PREFIX[e.tag], e.name)]) for e in program.externs),
    )
    return program, ids


def _with_id(inst: ir.ExternInstance, p4info_id: int) -> ir.ExternInstance:
    concrete: Any = inst  # every kind of extern instance is a dataclass with a p4info_id
    return replace(concrete, p4info_id=p4info_id)  # type: ignore[no-any-return]


def _allocate(program: ir.Program, x: Extras) -> Ids:
    alloc = IdAllocator()
    for a in program.actions:
        alloc.request(ACTION, a.name, _explicit_id(x.actions.get(a.name, {})), _pos(a.src))
    for name in dict.fromkeys(x.called_actions):
        alloc.request(ACTION, name, _explicit_id(x.actions.get(name, {})), Pos(program.source, 1, 1))
    for t in program.tables:
        alloc.request(TABLE, t.name, _explicit_id(x.tables.get(t.name, {})), _pos(t.src))
    for e in program.externs:
        explicit = _explicit_id(x.externs.get(e.name, {}))
        alloc.request(_EXTERN_PREFIX[e.tag], e.name, explicit, _pos(e.src))
    for d in program.digests:
        alloc.request(DIGEST, d.name, None, Pos(program.source, 1, 1))
    for name, h in program.headers.items():  # p4c hashes the header type name for these ids
        if h.controller_header:
            explicit = _explicit_id(x.headers[name])
            alloc.request(CONTROLLER_HEADER, name, explicit, Pos(program.source, 1, 1))
    return alloc.assign()


def build(program: ir.Program, x: Extras, ids: Ids) -> p4i.P4Info:
    """The P4Info pass: the P4Info message of a program whose ids are assigned."""
    every = [a.name for a in program.actions] + x.called_actions + [t.name for t in program.tables]
    alias = aliases(every + [e.name for e in program.externs])

    def preamble(msg: Any, prefix: int, name: str) -> None:
        msg.preamble.id = ids[(prefix, name)]
        msg.preamble.name = name
        msg.preamble.alias = alias.get(name, name)

    info = p4i.P4Info()
    info.pkg_info.arch = "v1model"
    hidden = {a for a, annos in x.actions.items() if "hidden" in annos}
    hidden |= {t.name for t in program.tables if "hidden" in x.tables.get(t.name, {})}
    # as p4c: the tables applied, the actions they use or a control body calls, the resources they use
    applied = applied_tables(program)
    listed = {t.name for t in program.tables if t.name in applied and t.name not in hidden}
    used = {a.name for t in program.tables if t.name in listed for a in t.actions}
    for a in program.actions:
        if a.name in used - hidden:
            msg = info.actions.add()
            preamble(msg, ACTION, a.name)
            annotate(msg.preamble, x.actions.get(a.name, {}))
            for i, p in enumerate(a.params, 1):
                param = msg.params.add(id=i, name=p.name, bitwidth=ir.width(p.type))
                annotate(param, x.params[a.name][i - 1])
                _type_name(info, param, x, a.name, i - 1)
    for name in dict.fromkeys(x.called_actions):
        if name not in used | hidden:  # called from a control body: no parameters (p4c removes them)
            msg = info.actions.add()
            preamble(msg, ACTION, name)
            annotate(msg.preamble, x.actions.get(name, {}))
    ext_id = {e.name: e.p4info_id for e in program.externs}
    for t in program.tables:
        if t.name in listed:
            _table(info, t, ids, ext_id, preamble, hidden, x)
    for e in program.externs:
        if e.name in x.unlisted:
            continue
        if not isinstance(e, ir.DirectCounter | ir.DirectMeter) or e.table in listed:
            _extern(info, e, ids, preamble, x, listed)
    for d in program.digests:
        msg = info.digests.add()
        preamble(msg, DIGEST, d.name)
        if d.name not in program.structs:  # digest of a list: p4c's type is a tuple
            for f in d.fields:
                msg.type_spec.tuple.members.add().bitstring.bit.bitwidth = ir.width(f.type)
            continue
        msg.type_spec.struct.name = d.name
        struct = info.type_info.structs[d.name]
        for f in d.fields:
            struct.members.add(name=f.name).type_spec.bitstring.bit.bitwidth = ir.width(f.type)
    for name, h in program.headers.items():
        if not h.controller_header:
            continue
        msg = info.controller_packet_metadata.add()
        msg.preamble.id = ids[(CONTROLLER_HEADER, name)]
        msg.preamble.name = msg.preamble.alias = h.controller_header
        annotate(msg.preamble, x.headers[name])
        for i, hf in enumerate(h.fields, 1):
            _type_name(info, msg.metadata.add(id=i, name=hf.name, bitwidth=hf.w), x, name, i - 1)
    if any(isinstance(k.type, ir.TError) for t in program.tables if t.name in listed for k in t.keys):
        info.type_info.error.members.extend(program.errors)  # p4c describes the error type a key uses
    info.type_info.SetInParent()  # p4c writes it, empty or not
    return info


def _type_name(info: p4i.P4Info, msg: Any, x: Extras, owner: str, i: int) -> None:
    """The `type` a param, match field or metadata was declared with, as p4c names it (and lists the type
    in type_info.new_types: its bit<W>, or its @p4runtime_translation)."""
    names = x.type_names.get(owner, [])
    name = names[i] if i < len(names) else ""
    if name in x.ser_enums:  # p4c describes the enum in type_info but names no type on the field
        _ser_enum(info, name, *x.ser_enums[name])
    if not name or name not in x.new_types:
        return
    msg.type_name.name = name
    width, annos = x.new_types[name]
    translation = annos.get("p4runtime_translation")
    if translation:  # the controller sees the translated width, as p4c writes it
        msg.bitwidth = int(translation[1])
    if name in info.type_info.new_types:  # listed by an earlier reference
        return
    new = info.type_info.new_types[name]
    if translation:
        new.translated_type.uri = str(translation[0])
        new.translated_type.sdn_bitwidth = int(translation[1])
    else:
        new.original_type.bitstring.bit.bitwidth = width
    annotate(new, {k: v for k, v in annos.items() if k != "p4runtime_translation"})


def _ser_enum(info: p4i.P4Info, name: str, width: int, members: dict[str, int]) -> None:
    """type_info.serializable_enums[name]: the underlying bit<W> and each member's value in W bits."""
    if name in info.type_info.serializable_enums:
        return
    enum = info.type_info.serializable_enums[name]
    enum.underlying_type.bitwidth = width
    for member, value in members.items():
        enum.members.add(name=member, value=(value % (1 << width)).to_bytes((width + 7) // 8, "big"))


def _table(
    info: p4i.P4Info,
    t: ir.Table,
    ids: Ids,
    ext_id: dict[str, int],
    preamble: Any,
    hidden: set[str],
    x: Extras,
) -> None:
    msg = info.tables.add()
    preamble(msg, TABLE, t.name)
    annotate(msg.preamble, x.tables.get(t.name, {}))
    key_annos = x.keys.get(t.name, [{}] * len(t.keys))
    keys = [(k, annos) for k, annos in zip(t.keys, key_annos, strict=True) if k.match != "selector"]
    for i, (k, annos) in enumerate(keys, 1):
        width = 0 if isinstance(k.type, ir.TError) else ir.width(k.type)  # p4c gives an error none
        field = msg.match_fields.add(id=i, name=k.name, bitwidth=width, match_type=_MATCH[k.match])
        annotate(field, annos)
        _type_name(info, field, x, t.name, t.keys.index(k))
    for a in (a for a in t.actions if a.name not in hidden):
        ref = msg.action_refs.add(id=ids[(ACTION, a.name)], scope=_SCOPE[a.scope])
        # as written in the actions list; the NoAction the front end adds is @defaultonly
        implicit: dict[str, list[Any]] = {} if a.scope == "all" else {a.scope.replace("_", ""): []}
        annotate(ref, x.action_refs.get((t.name, a.name), implicit))
    if t.default_action.const:
        msg.const_default_action_id = ids[(ACTION, t.default_action.name)]
    if t.implementation:
        msg.implementation_id = ext_id[t.implementation]
    for res in (t.direct_counter, t.direct_meter):
        if res:
            msg.direct_resource_ids.append(ext_id[res])
    msg.size = t.size
    msg.is_const_table = t.entries_const
    msg.has_initial_entries = bool(t.entries)
    if t.support_timeout:
        msg.idle_timeout_behavior = p4i.Table.NOTIFY_CONTROL


def _extern(
    info: p4i.P4Info, e: ir.ExternInstance, ids: Ids, preamble: Any, x: Extras, tables: set[str]
) -> None:
    prefix = _EXTERN_PREFIX[e.tag]
    annos = x.externs.get(e.name, {})
    if isinstance(e, ir.ActionProfile | ir.ActionSelector):
        msg = info.action_profiles.add()
        preamble(msg, prefix, e.name)
        annotate(msg.preamble, {k: v for k, v in annos.items() if k != "max_group_size"})  # it has a field
        msg.table_ids.extend(ids[(TABLE, t)] for t in e.tables if t in tables)
        msg.with_selector = isinstance(e, ir.ActionSelector)
        msg.size = e.size
        if isinstance(e, ir.ActionSelector) and annos.get("max_group_size"):
            msg.max_group_size = e.max_group_size  # p4c writes it only when annotated
    elif isinstance(e, ir.Counter | ir.DirectCounter | ir.Meter | ir.DirectMeter):
        field, units = _COUNTER_OR_METER[e.tag]
        msg = getattr(info, field).add()
        preamble(msg, prefix, e.name)
        annotate(msg.preamble, annos)
        msg.spec.unit = units[e.unit]
        if isinstance(e, ir.Counter | ir.Meter):
            msg.size = e.size
        elif e.table:
            msg.direct_table_id = ids[(TABLE, e.table)]
    elif isinstance(e, ir.ValueSet):
        msg = info.value_sets.add()
        preamble(msg, prefix, e.name)
        annotate(msg.preamble, annos)
        for i, w in enumerate(e.widths):
            match = msg.match.add()
            match.id = i + 1
            if x.value_set_fields.get(e.name):
                match.name = x.value_set_fields[e.name][i]
            match.bitwidth = w
            match.match_type = p4i.MatchField.EXACT
        msg.size = e.size
    elif isinstance(e, ir.Register):
        msg = info.registers.add()
        preamble(msg, prefix, e.name)
        annotate(msg.preamble, annos)
        msg.type_spec.bitstring.bit.bitwidth = ir.width(e.type)
        msg.size = e.size


__all__ = ["Extras", "annotate", "applied_tables", "assign_ids", "build", "name_hash", "aliases", "p4t"]
