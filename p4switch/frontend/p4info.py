"""P4Info (p4.config.v1) from the lowered program, with ids and names as p4c assigns them.

Ids: the resource type prefix (P4Ids.Prefix of p4info.proto) in the top byte; `@id(n)` is honoured (the
prefix is added when n has none); otherwise the low 24 bits are the Jenkins one-at-a-time hash of the fully
qualified name, probing upwards on a collision, which reproduces p4c's ids (e.g. "MyIngress.ipv4_lpm" ->
37375156 as in the p4lang tutorials) and keeps them stable across runs. (p4c releases before 2020 kept
only 16 bits of the hash, so p4info files from old tutorials show smaller ids.)
"""

from __future__ import annotations

from typing import Any

from finsy.proto import p4i, p4t

from p4switch.frontend.elaborate import Elaborator
from p4switch.frontend.errors import Pos, type_error

ACTION, TABLE, CONTROLLER_HEADER = 0x01, 0x02, 0x04
ACTION_PROFILE, COUNTER, DIRECT_COUNTER, METER, DIRECT_METER, REGISTER, DIGEST = range(0x11, 0x18)

_EXTERN_PREFIX = {
    "counter": COUNTER,
    "direct_counter": DIRECT_COUNTER,
    "meter": METER,
    "direct_meter": DIRECT_METER,
    "register": REGISTER,
    "action_profile": ACTION_PROFILE,
    "action_selector": ACTION_PROFILE,
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


def applied_tables(ir: dict[str, Any]) -> set[str]:
    """The tables the controls apply (in statements, conditions or other applied tables' keys): p4c
    leaves the others, and what only they use, out of P4Info."""
    keys = {t["name"]: t["keys"] for t in ir["tables"]}
    found: set[str] = set()
    todo: list[Any] = [c["body"] for c in ir["controls"]]
    while todo:
        node = todo.pop()
        if isinstance(node, dict):
            applied = node.get("s") in ("apply", "switch") or node.get("op") in ("table_hit", "table_miss")
            if applied and node["table"] not in found:
                found.add(node["table"])
                todo.append(keys[node["table"]])
            todo.extend(node.values())
        elif isinstance(node, list):
            todo.extend(node)
    return found


def _pos(obj: dict[str, Any]) -> Pos:
    file, line, col = obj.get("src", "?:0:0").rsplit(":", 2)
    return Pos(file, int(line), int(col))


def build(ir: dict[str, Any], elab: Elaborator) -> p4i.P4Info:
    """Build the P4Info and write the assigned ids back into the IR objects (`p4info_id`)."""
    alloc = IdAllocator()
    for a in ir["actions"]:
        alloc.request(ACTION, a["name"], _explicit_id(elab.action_annos.get(a["name"], {})), _pos(a))
    for name in dict.fromkeys(elab.called_actions):
        alloc.request(ACTION, name, _explicit_id(elab.action_annos.get(name, {})), Pos(ir["source"], 1, 1))
    for t in ir["tables"]:
        alloc.request(TABLE, t["name"], _explicit_id(elab.table_annos.get(t["name"], {})), _pos(t))
    for e in ir["externs"]:
        alloc.request(
            _EXTERN_PREFIX[e["kind"]], e["name"], _explicit_id(elab.extern_annos.get(e["name"], {})), _pos(e)
        )
    for d in ir["digests"]:
        alloc.request(DIGEST, d["name"], None, Pos(ir["source"], 1, 1))
    controller_headers = {name: h for name, h in ir["headers"].items() if h["controller_header"]}
    for name in controller_headers:  # p4c hashes the header type name for these ids
        alloc.request(CONTROLLER_HEADER, name, _explicit_id(elab.header_annos[name]), Pos(ir["source"], 1, 1))
    ids = alloc.assign()
    every = (
        [a["name"] for a in ir["actions"]]
        + elab.called_actions
        + [t["name"] for t in ir["tables"]]
        + [e["name"] for e in ir["externs"]]
    )
    alias = aliases(every)

    def preamble(msg: Any, prefix: int, name: str) -> None:
        msg.preamble.id = ids[(prefix, name)]
        msg.preamble.name = name
        msg.preamble.alias = alias.get(name, name)

    info = p4i.P4Info()
    info.pkg_info.arch = "v1model"
    hidden = {a for a, annos in elab.action_annos.items() if "hidden" in annos}
    hidden |= {t["name"] for t in ir["tables"] if "hidden" in elab.table_annos.get(t["name"], {})}
    # as p4c: the tables applied, the actions they use or a control body calls, the resources they use
    listed = {t["name"] for t in ir["tables"] if t["name"] in applied_tables(ir) and t["name"] not in hidden}
    used = {a["name"] for t in ir["tables"] if t["name"] in listed for a in t["actions"]}
    for a in ir["actions"]:
        a["p4info_id"] = ids[(ACTION, a["name"])]
        if a["name"] in used - hidden:
            msg = info.actions.add()
            preamble(msg, ACTION, a["name"])
            annotate(msg.preamble, elab.action_annos.get(a["name"], {}))
            for i, p in enumerate(a["params"], 1):
                param = msg.params.add(id=i, name=p["name"], bitwidth=p["type"].get("w", 1))
                annotate(param, elab.param_annos[a["name"]][i - 1])
    for name in dict.fromkeys(elab.called_actions):
        if name not in used | hidden:  # called from a control body: no parameters (p4c removes them)
            msg = info.actions.add()
            preamble(msg, ACTION, name)
            annotate(msg.preamble, elab.action_annos.get(name, {}))
    ext_id = {e["name"]: ids[(_EXTERN_PREFIX[e["kind"]], e["name"])] for e in ir["externs"]}
    for t in ir["tables"]:
        t["p4info_id"] = ids[(TABLE, t["name"])]
        if t["name"] in listed:
            _table(info.tables.add(), t, ids, ext_id, preamble, hidden, elab)
    for e in ir["externs"]:
        e["p4info_id"] = ext_id[e["name"]]
        if not e["kind"].startswith("direct_") or e["table"] in listed:
            _extern(info, e, ids, preamble, elab, listed)
    for d in ir["digests"]:
        msg = info.digests.add()
        preamble(msg, DIGEST, d["name"])
        msg.type_spec.struct.name = d["name"]
        struct = info.type_info.structs[d["name"]]
        for f in d["fields"]:
            struct.members.add(name=f["name"]).type_spec.bitstring.bit.bitwidth = f["type"]["w"]
    for name, h in controller_headers.items():
        msg = info.controller_packet_metadata.add()
        msg.preamble.id = ids[(CONTROLLER_HEADER, name)]
        msg.preamble.name = msg.preamble.alias = h["controller_header"]
        annotate(msg.preamble, elab.header_annos[name])
        for i, f in enumerate(h["fields"], 1):
            msg.metadata.add(id=i, name=f["name"], bitwidth=f["w"])
    info.type_info.SetInParent()  # p4c writes it, empty or not
    return info


def _table(
    msg: Any,
    t: dict[str, Any],
    ids: dict[tuple[int, str], int],
    ext_id: dict[str, int],
    preamble: Any,
    hidden: set[str],
    elab: Elaborator,
) -> None:
    preamble(msg, TABLE, t["name"])
    annotate(msg.preamble, elab.table_annos.get(t["name"], {}))
    key_annos = elab.key_annos.get(t["name"], [{}] * len(t["keys"]))
    keys = [(k, annos) for k, annos in zip(t["keys"], key_annos, strict=True) if k["match"] != "selector"]
    for i, (k, annos) in enumerate(keys, 1):
        field = msg.match_fields.add(
            id=i, name=k["name"], bitwidth=k["type"]["w"], match_type=_MATCH[k["match"]]
        )
        annotate(field, annos)
    for a in (a for a in t["actions"] if a["name"] not in hidden):
        ref = msg.action_refs.add(id=ids[(ACTION, a["name"])], scope=_SCOPE[a["scope"]])
        # as written in the actions list; the NoAction the front end adds is @defaultonly
        implicit: dict[str, list[Any]] = {} if a["scope"] == "all" else {a["scope"].replace("_", ""): []}
        annotate(ref, elab.action_ref_annos.get((t["name"], a["name"]), implicit))
    if t["default_action"]["const"]:
        msg.const_default_action_id = ids[(ACTION, t["default_action"]["name"])]
    if t["implementation"]:
        msg.implementation_id = ext_id[t["implementation"]]
    for res in (t["direct_counter"], t["direct_meter"]):
        if res:
            msg.direct_resource_ids.append(ext_id[res])
    msg.size = t["size"]
    msg.is_const_table = t["entries_const"]
    msg.has_initial_entries = bool(t["entries"])
    if t.get("support_timeout"):
        msg.idle_timeout_behavior = p4i.Table.NOTIFY_CONTROL


def _extern(
    info: p4i.P4Info,
    e: dict[str, Any],
    ids: dict[tuple[int, str], int],
    preamble: Any,
    elab: Elaborator,
    tables: set[str],
) -> None:
    kind = e["kind"]
    prefix = _EXTERN_PREFIX[kind]
    annos = elab.extern_annos.get(e["name"], {})
    if kind in ("action_profile", "action_selector"):
        msg = info.action_profiles.add()
        preamble(msg, prefix, e["name"])
        annotate(msg.preamble, {k: v for k, v in annos.items() if k != "max_group_size"})  # it has a field
        msg.table_ids.extend(ids[(TABLE, t)] for t in e["tables"] if t in tables)
        msg.with_selector = kind == "action_selector"
        msg.size = e["size"]
        if msg.with_selector and elab.extern_annos.get(e["name"], {}).get("max_group_size"):
            msg.max_group_size = e["max_group_size"]  # p4c writes it only when annotated
    elif kind in _COUNTER_OR_METER:
        field, units = _COUNTER_OR_METER[kind]
        msg = getattr(info, field).add()
        preamble(msg, prefix, e["name"])
        annotate(msg.preamble, annos)
        msg.spec.unit = units[e["unit"]]
        if not kind.startswith("direct_"):
            msg.size = e["size"]
        elif e["table"]:
            msg.direct_table_id = ids[(TABLE, e["table"])]
    elif kind == "register":
        msg = info.registers.add()
        preamble(msg, prefix, e["name"])
        annotate(msg.preamble, annos)
        msg.type_spec.bitstring.bit.bitwidth = e["type"]["w"]
        msg.size = e["size"]


__all__ = ["build", "name_hash", "aliases", "p4t"]
