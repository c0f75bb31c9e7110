"""P4Info parity: p4switch-cc's P4Info against p4c's, object by object.

Objects are matched by name (a table with the same name in both, then its id, alias, annotations, match
fields, action refs, size, ... compared); what the P4Runtime specification leaves free is ignored: the
order of objects, of match fields and params (matched by id), of action refs (by id) and of annotations,
and empty messages written or left out.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from finsy.proto import p4i
from google.protobuf import json_format, text_format

_TOP_BY_NAME = (
    "tables",
    "actions",
    "action_profiles",
    "counters",
    "direct_counters",
    "meters",
    "direct_meters",
    "controller_packet_metadata",
    "value_sets",
    "registers",
    "digests",
)
_BY_ID = ("match_fields", "action_refs", "params", "metadata")
_UNORDERED = ("annotations", "table_ids", "structured_annotations", "doc")


def read_text(path: Path) -> Any:
    """A P4Info text file (as p4c's --p4runtime-files writes it)."""
    return text_format.Parse(path.read_text(), p4i.P4Info())


def normalize(value: Any, key: str = "") -> Any:
    """Lists keyed or sorted as the comparison wants them; empty values dropped."""
    if isinstance(value, dict):
        out = {k: normalize(v, k) for k, v in value.items()}
        return {k: v for k, v in out.items() if v not in ({}, [], None)}
    if isinstance(value, list):
        items = [normalize(v) for v in value]
        if key in _TOP_BY_NAME:
            return {item.get("preamble", {}).get("name", str(i)): item for i, item in enumerate(items)}
        if key in _BY_ID:
            return {f"id {item.get('id', i)}": item for i, item in enumerate(items)}
        if key == "externs":
            return {item.get("extern_type_name", str(i)): item for i, item in enumerate(items)}
        if key == "instances":
            return {item.get("preamble", {}).get("name", str(i)): item for i, item in enumerate(items)}
        if key in _UNORDERED:
            return sorted(items, key=repr)
        return items
    return value


def as_dict(message: Any) -> dict[str, Any]:
    raw = json_format.MessageToDict(message, preserving_proto_field_name=True)
    normalized: dict[str, Any] = normalize(raw)
    return normalized


def differences(ours: Any, theirs: Any) -> list[str]:
    """Every difference between two P4Info messages, one line each (empty when they agree)."""
    out: list[str] = []
    _compare(as_dict(ours), as_dict(theirs), "", out)
    return out


def _compare(ours: Any, theirs: Any, path: str, out: list[str]) -> None:
    if isinstance(ours, dict) and isinstance(theirs, dict):
        for key in sorted(set(ours) | set(theirs), key=str):
            where = f"{path}[{key!r}]" if not _is_field(key) else f"{path}.{key}" if path else key
            if key not in theirs:
                out.append(f"{where}: only in p4switch-cc's: {_short(ours[key])}")
            elif key not in ours:
                out.append(f"{where}: only in p4c's: {_short(theirs[key])}")
            else:
                _compare(ours[key], theirs[key], where, out)
    elif ours != theirs:
        out.append(f"{path}: p4switch-cc {_short(ours)}, p4c {_short(theirs)}")


def _is_field(key: str) -> bool:
    return key.isidentifier() and key.islower()


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 200 else text[:197] + "..."
