"""Small BMv2 JSON documents built in the tests (BMv2's docs/JSON_format.md), so that the loader is
tested on every construct without p4c: a v1model skeleton and helpers for its type-value objects."""

from __future__ import annotations

import copy
from typing import Any

STANDARD_METADATA = [
    ["ingress_port", 9, False],
    ["egress_spec", 9, False],
    ["egress_port", 9, False],
    ["instance_type", 32, False],
    ["packet_length", 32, False],
    ["enq_timestamp", 32, False],
    ["enq_qdepth", 19, False],
    ["deq_timedelta", 32, False],
    ["deq_qdepth", 19, False],
    ["ingress_global_timestamp", 48, False],
    ["egress_global_timestamp", 48, False],
    ["mcast_grp", 16, False],
    ["egress_rid", 16, False],
    ["checksum_error", 1, False],
    ["parser_error", 32, False],
    ["priority", 3, False],
    ["_padding", 3, False],
]
ERRORS = [
    ["NoError", 0],
    ["PacketTooShort", 1],
    ["NoMatch", 2],
    ["StackOutOfBounds", 3],
    ["HeaderTooShort", 4],
    ["ParserTimeout", 5],
    ["ParserInvalidArgument", 6],
]


def field(header: str, name: str) -> dict[str, Any]:
    return {"type": "field", "value": [header, name]}


def hexv(value: int, bytes_: int = 1) -> dict[str, Any]:
    return {"type": "hexstr", "value": ("-" if value < 0 else "") + "0x" + f"{abs(value):0{2 * bytes_}x}"}


def expr(op: str, left: Any, right: Any, **more: Any) -> dict[str, Any]:
    return {"type": "expression", "value": {"op": op, "left": left, "right": right, **more}}


def prim(op: str, *params: Any, line: int = 0) -> dict[str, Any]:
    p: dict[str, Any] = {"op": op, "parameters": list(params)}
    if line:
        p["source_info"] = {"filename": "t.p4", "line": line, "column": 5, "source_fragment": op}
    return p


def assign(dst: Any, src: Any) -> dict[str, Any]:
    return prim("assign", dst, src)


def header(name: str) -> dict[str, Any]:
    return {"type": "header", "value": name}


def egress_spec(value: Any) -> dict[str, Any]:
    return assign(field("standard_metadata", "egress_spec"), value)


def program(
    header_types: dict[str, list[list[Any]]],
    headers: dict[str, str],
    states: list[dict[str, Any]],
    actions: list[dict[str, Any]],
    ingress: dict[str, Any],
    deparse: list[str],
    metadata: dict[str, list[list[Any]]] | None = None,
    **more: Any,
) -> dict[str, Any]:
    """A v1model program: header types by name, header instances (name -> type), the parser's states
    (the first is the start state), actions (ids in order), the ingress pipeline and the deparser."""
    types = [
        {"name": "scalars_0", "id": 0, "fields": (metadata or {}).get("scalars", [])},
        {"name": "standard_metadata", "id": 1, "fields": STANDARD_METADATA},
    ]
    types += [{"name": n, "id": i + 2, "fields": f} for i, (n, f) in enumerate(header_types.items())]
    instances = [
        {"name": "scalars", "id": 0, "header_type": "scalars_0", "metadata": True},
        {"name": "standard_metadata", "id": 1, "header_type": "standard_metadata", "metadata": True},
    ]
    instances += [
        {"name": n, "id": i + 2, "header_type": t, "metadata": False}
        for i, (n, t) in enumerate(headers.items())
    ]
    doc: dict[str, Any] = {
        "__meta__": {"version": [2, 23], "compiler": "p4switch/tests/bmv2json/bmv2doc.py"},
        "header_types": types,
        "headers": instances,
        "header_stacks": [],
        "header_unions": [],
        "header_union_stacks": [],
        "field_lists": [],
        "errors": ERRORS,
        "enums": [],
        "parsers": [{"name": "parser", "id": 0, "init_state": states[0]["name"], "parse_states": states}],
        "parse_vsets": [],
        "deparsers": [{"name": "deparser", "id": 0, "order": deparse}],
        "meter_arrays": [],
        "counter_arrays": [],
        "register_arrays": [],
        "calculations": [],
        "learn_lists": [],
        "actions": numbered(actions),
        "pipelines": [
            dict(ingress, name="ingress", id=0),
            {
                "name": "egress",
                "id": 1,
                "init_table": None,
                "tables": [],
                "action_profiles": [],
                "conditionals": [],
            },
        ],
        "checksums": [],
        "extern_instances": [],
        "field_aliases": [],
    }
    doc.update(more)
    return copy.deepcopy(doc)


def numbered(actions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Actions with their ids (their positions)."""
    return [dict(a, id=i) for i, a in enumerate(actions)]


def state(
    name: str, ops: list[Any], key: list[Any] | None = None, transitions: list[Any] | None = None
) -> dict[str, Any]:
    return {
        "name": name,
        "id": 0,
        "parser_ops": ops,
        "transition_key": key or [],
        "transitions": transitions or [case(None, None)],
    }


def extract(name: str, kind: str = "regular") -> dict[str, Any]:
    return {"op": "extract", "parameters": [{"type": kind, "value": name}]}


def case(value: str | None, next_state: str | None, mask: str | None = None) -> dict[str, Any]:
    return {
        "type": "default" if value is None else "hexstr",
        "value": value,
        "mask": mask,
        "next_state": next_state,
    }


def action(name: str, prims: list[Any], params: list[tuple[str, int]] | None = None) -> dict[str, Any]:
    return {
        "name": name,
        "runtime_data": [{"name": n, "bitwidth": w} for n, w in params or []],
        "primitives": prims,
    }


def table(
    name: str,
    action_ids: list[int],
    action_names: list[str],
    keys: list[Any] | None = None,
    default: int | None = None,
    nexts: dict[str, Any] | None = None,
    **more: Any,
) -> dict[str, Any]:
    t: dict[str, Any] = {
        "name": name,
        "id": 0,
        "key": keys or [],
        "match_type": "exact",
        "type": "simple",
        "max_size": 64,
        "with_counters": False,
        "support_timeout": False,
        "direct_meters": None,
        "action_ids": action_ids,
        "actions": action_names,
        "base_default_next": None,
        "next_tables": nexts if nexts is not None else {a: None for a in action_names},
    }
    if default is not None:
        t["default_entry"] = {
            "action_id": default,
            "action_const": False,
            "action_data": [],
            "action_entry_const": False,
        }
    t.update(more)
    return t


def pipeline(init: str | None, tables: list[Any], conditionals: list[Any] | None = None) -> dict[str, Any]:
    return {"init_table": init, "tables": tables, "action_profiles": [], "conditionals": conditionals or []}


def run_action(action_id: int, name: str) -> dict[str, Any]:
    """The table p4c makes for an action called directly in a control: keyless, const default."""
    return table(f"tbl_{name.split('.')[-1]}", [action_id], [name], default=action_id)
