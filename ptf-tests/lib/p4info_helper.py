"""Names to ids and values to bytes for one P4Info: nothing in the tests re-types an id or a width.

Every entity is found by its fully qualified name, its alias, or a unique dotted suffix of its name
(``invalid_pkeys`` finds ``IbsecIngress.partition.invalid_pkeys``), so the tests read like the P4 source
and still work with any compiler's naming of the enclosing controls.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from finsy.proto import p4i, p4r
from google.protobuf import text_format

ENTITY_KINDS = ("tables", "actions", "action_profiles", "counters", "meters", "registers",
                "controller_packet_metadata", "direct_counters", "direct_meters")


Match = int | tuple[int, int]
"""An exact value, an (lpm value, prefix length) or a (ternary value, mask) pair."""


class P4InfoError(LookupError):
    """A name the P4Info does not have (or has more than once)."""


def encode(value: int, bitwidth: int) -> bytes:
    """P4Runtime's canonical bytestring: big-endian, no leading zero bytes, at least one byte."""
    if not 0 <= value < (1 << bitwidth):
        raise ValueError(f"{value:#x} does not fit in {bitwidth} bits")
    return value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big")


def decode(data: bytes) -> int:
    """An integer from a P4Runtime bytestring."""
    return int.from_bytes(data, "big")


def _find(items: Iterable[Any], name: str, what: str) -> Any:
    items = list(items)
    exact = [i for i in items if name in (i.preamble.name, i.preamble.alias)]
    found = exact or [i for i in items if i.preamble.name.endswith("." + name)]
    if len(found) != 1:
        raise P4InfoError(f"{what} {name!r}: {len(found)} matches in the P4Info")
    return found[0]


class P4InfoHelper:
    """Lookups in one P4Info message."""

    def __init__(self, p4info: Any) -> None:
        self.p4info = p4info

    @classmethod
    def from_file(cls, path: str | Path) -> P4InfoHelper:
        """Read a text-format P4Info (what `make build` writes)."""
        message = p4i.P4Info()
        text_format.Parse(Path(path).read_text(), message)
        return cls(message)

    def entity(self, kind: str, name: str) -> Any:
        """The P4Info entry of ``kind`` (one of ENTITY_KINDS) called ``name``."""
        return _find(getattr(self.p4info, kind), name, kind.rstrip("s"))

    def id(self, kind: str, name: str) -> int:
        """The id of ``kind`` ``name``."""
        return int(self.entity(kind, name).preamble.id)

    def name(self, kind: str, entity_id: int) -> str:
        """The fully qualified name of the entity with ``entity_id``."""
        for item in getattr(self.p4info, kind):
            if item.preamble.id == entity_id:
                return str(item.preamble.name)
        raise P4InfoError(f"no {kind} with id {entity_id}")

    def match_field(self, table: str, field: str) -> Any:
        """The match field ``field`` of ``table`` (by its name as in the P4 key, e.g. ``meta.dst_id``)."""
        for mf in self.entity("tables", table).match_fields:
            if mf.name == field or mf.name.endswith("." + field):
                return mf
        raise P4InfoError(f"table {table!r} has no match field {field!r}")

    def action_param(self, action: str, param: str) -> Any:
        """The parameter ``param`` of ``action``."""
        for p in self.entity("actions", action).params:
            if p.name == param:
                return p
        raise P4InfoError(f"action {action!r} has no parameter {param!r}")

    def packet_metadata(self, header: str, field: str) -> Any:
        """A field of the packet_in / packet_out controller header."""
        for m in self.entity("controller_packet_metadata", header).metadata:
            if m.name == field:
                return m
        raise P4InfoError(f"controller header {header!r} has no field {field!r}")

    # ---- P4Runtime entities by name ---------------------------------------------------------------------

    def field_match(self, table: str, field: str, value: Match) -> Any:
        """A FieldMatch of the kind the P4Info declares for ``field``."""
        info = self.match_field(table, field)
        width, kind = info.bitwidth, info.match_type
        fm = p4r.FieldMatch(field_id=info.id)
        if kind == info.EXACT and isinstance(value, int):
            fm.exact.value = encode(value, width)
        elif kind == info.LPM and isinstance(value, tuple):
            prefix_value = value[0] & ~((1 << (width - value[1])) - 1)
            fm.lpm.value, fm.lpm.prefix_len = encode(prefix_value, width), value[1]
        elif kind == info.TERNARY and isinstance(value, tuple):
            fm.ternary.value, fm.ternary.mask = encode(value[0] & value[1], width), encode(value[1], width)
        else:
            raise ValueError(f"{table}.{field}: match kind {kind} does not take {value!r}")
        return fm

    def action(self, name: str, params: Mapping[str, int] | None = None) -> Any:
        """A p4r.Action with its parameters encoded to their P4Info widths."""
        return p4r.Action(action_id=self.id("actions", name), params=[
            p4r.Action.Param(param_id=(info := self.action_param(name, key)).id,
                             value=encode(value, info.bitwidth))
            for key, value in (params or {}).items()])

    def table_entry(self, table: str, match: Mapping[str, Match], action: str | None = None,
                    params: Mapping[str, int] | None = None, *, default: bool = False) -> Any:
        """A p4r.Entity holding one table entry (with its action, or none: a match for Read or Delete)."""
        entry = p4r.TableEntry(table_id=self.id("tables", table), is_default_action=default,
                               match=[self.field_match(table, f, v) for f, v in match.items()])
        if action is not None:
            entry.action.action.CopyFrom(self.action(action, params))
        return p4r.Entity(table_entry=entry)

    def counter_cell(self, name: str, index: int) -> Any:
        """A p4r.Entity naming one cell of an indexed counter (for Read)."""
        return p4r.Entity(counter_entry=p4r.CounterEntry(counter_id=self.id("counters", name),
                                                         index=p4r.Index(index=index)))
