"""Small builders of p4switch IR (docs/p4switch-ir.md) for engine tests that do not go through the
front end: expressions, statements and a v1model program skeleton."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

Json = dict[str, Any]

PROGRAMS = Path(__file__).resolve().parents[1] / "programs"


def bit(w: int) -> Json:
    return {"k": "bit", "w": w}


def sint(w: int) -> Json:
    return {"k": "int", "w": w}


BOOL: Json = {"k": "bool"}


def const(value: Any, t: Json) -> Json:
    return {"op": "const", "value": value, "type": t}


def var(name: str, t: Json) -> Json:
    return {"op": "var", "name": name, "type": t}


def member(e: Json, name: str, t: Json) -> Json:
    return {"op": "member", "expr": e, "field": name, "type": t}


def binary(op: str, a: Json, b: Json, t: Json | None = None) -> Json:
    return {"op": "binary", "operator": op, "left": a, "right": b, "type": t or a["type"]}


def unary(op: str, a: Json) -> Json:
    return {"op": "unary", "operator": op, "expr": a, "type": a["type"]}


def cast(e: Json, t: Json) -> Json:
    return {"op": "cast", "expr": e, "type": t}


def slice_(e: Json, hi: int, lo: int) -> Json:
    return {"op": "slice", "expr": e, "hi": hi, "lo": lo, "type": bit(hi - lo + 1)}


def concat(a: Json, b: Json) -> Json:
    return {"op": "concat", "left": a, "right": b, "type": bit(a["type"]["w"] + b["type"]["w"])}


def assign(lhs: Json, rhs: Json) -> Json:
    return {"s": "assign", "lhs": lhs, "rhs": rhs, "src": "test:1:1"}


def header_type(fields: list[tuple[str, int]]) -> Json:
    return {
        "fields": [{"name": n, "w": w, "signed": False} for n, w in fields],
        "bits": sum(w for _, w in fields),
        "controller_header": None,
    }


def standard_metadata() -> Json:
    base = json.loads((PROGRAMS / "l2fwd.json").read_text())
    return base["structs"]["standard_metadata_t"]  # type: ignore[no-any-return]


HDR = {"k": "struct", "name": "headers_t"}
META = {"k": "struct", "name": "metadata_t"}
SM = {"k": "struct", "name": "standard_metadata_t"}


def hdr(name: str, htype: str) -> Json:
    return member(var("hdr", HDR), name, {"k": "header", "name": htype})


def field(hname: str, htype: str, fname: str, w: int) -> Json:
    return member(hdr(hname, htype), fname, bit(w))


def meta(name: str, t: Json) -> Json:
    return member(var("meta", META), name, t)


def sm(name: str, w: int) -> Json:
    return member(var("standard_metadata", SM), name, bit(w))


def control(name: str, body: list[Json], locals_: list[Json] | None = None) -> Json:
    return {
        "name": name,
        "src": "test:1:1",
        "params": [
            {"name": "hdr", "dir": "inout", "type": HDR},
            {"name": "meta", "dir": "inout", "type": META},
            {"name": "standard_metadata", "dir": "inout", "type": SM},
        ],
        "locals": locals_ or [],
        "body": body,
    }


def checksum_control(name: str, body: list[Json]) -> Json:
    return {
        "name": name,
        "src": "test:1:1",
        "params": [
            {"name": "hdr", "dir": "inout", "type": HDR},
            {"name": "meta", "dir": "inout", "type": META},
        ],
        "locals": [],
        "body": body,
    }


def program(
    headers: dict[str, list[tuple[str, int]]],
    header_order: list[tuple[str, str]],
    states: list[Json],
    ingress: list[Json],
    egress: list[Json] | None = None,
    metadata: list[tuple[str, Json]] | None = None,
    actions: list[Json] | None = None,
    tables: list[Json] | None = None,
    externs: list[Json] | None = None,
    digests: list[Json] | None = None,
    verify: list[Json] | None = None,
    compute: list[Json] | None = None,
    ingress_locals: list[Json] | None = None,
) -> Json:
    """A v1model program: headers (type -> fields), the headers struct members (name, type) emitted in
    that order, parser states, ingress/egress bodies and the rest."""
    no_action: Json = {
        "name": "NoAction",
        "control": None,
        "src": "core.p4:1:1",
        "params": [],
        "locals": [],
        "body": [],
    }
    deparser = {
        "name": "Deparser",
        "src": "test:1:1",
        "params": [
            {"name": "packet", "dir": "none", "type": {"k": "packet_out"}},
            {"name": "hdr", "dir": "in", "type": HDR},
        ],
        "locals": [],
        "body": [{"s": "emit", "header": hdr(n, t), "src": "test:1:1"} for n, t in header_order],
    }
    return {
        "format": "p4switch-ir",
        "version": 1,
        "source": "test.p4",
        "errors": [
            "NoError",
            "PacketTooShort",
            "NoMatch",
            "StackOutOfBounds",
            "HeaderTooShort",
            "ParserTimeout",
            "ParserInvalidArgument",
            "BadVersion",
        ],
        "enums": {
            "HashAlgorithm": [
                "crc32",
                "crc32_custom",
                "crc16",
                "crc16_custom",
                "random",
                "identity",
                "csum16",
                "xor16",
            ]
        },
        "headers": {name: header_type(fields) for name, fields in headers.items()},
        "structs": {
            "headers_t": {
                "fields": [{"name": n, "type": {"k": "header", "name": t}} for n, t in header_order]
            },
            "metadata_t": {"fields": [{"name": n, "type": t} for n, t in (metadata or [])]},
            "standard_metadata_t": standard_metadata(),
        },
        "externs": externs or [],
        "actions": [no_action] + (actions or []),
        "tables": tables or [],
        "parsers": [
            {
                "name": "Parser",
                "src": "test:1:1",
                "params": [
                    {"name": "packet", "dir": "none", "type": {"k": "packet_in"}},
                    {"name": "hdr", "dir": "out", "type": HDR},
                    {"name": "meta", "dir": "inout", "type": META},
                    {"name": "standard_metadata", "dir": "inout", "type": SM},
                ],
                "locals": [],
                "states": states,
            }
        ],
        "controls": [
            checksum_control("Verify", verify or []),
            control("Ingress", ingress, ingress_locals),
            control("Egress", egress or []),
            checksum_control("Compute", compute or []),
            deparser,
        ],
        "digests": digests or [],
        "pipeline": {
            "arch": "v1model",
            "parser": "Parser",
            "verify_checksum": "Verify",
            "ingress": "Ingress",
            "egress": "Egress",
            "compute_checksum": "Compute",
            "deparser": "Deparser",
            "headers_type": "headers_t",
            "metadata_type": "metadata_t",
        },
    }


def state(name: str, body: list[Json], transition: Json) -> Json:
    return {"name": name, "src": "test:1:1", "body": body, "transition": transition}


def extract(hname: str, htype: str) -> Json:
    return {"s": "extract", "header": hdr(hname, htype), "src": "test:1:1"}


def goto(target: str) -> Json:
    return {"kind": "goto", "next": target}


def select(keys: list[Json], cases: list[tuple[list[Json], str]]) -> Json:
    return {"kind": "select", "keys": keys, "cases": [{"keysets": ks, "next": n} for ks, n in cases]}


def action(name: str, params: list[tuple[str, int]], body: list[Json]) -> Json:
    return {
        "name": name,
        "control": "Ingress",
        "src": "test:1:1",
        "params": [{"name": n, "type": bit(w)} for n, w in params],
        "locals": [],
        "body": body,
    }


def table(
    name: str,
    keys: list[tuple[str, str, Json]],
    actions: list[str],
    default: str = "NoAction",
    default_args: list[int] | None = None,
    const_default: bool = False,
    **extra: Any,
) -> Json:
    t = {
        "name": name,
        "control": "Ingress",
        "src": "test:1:1",
        "keys": [{"name": n, "match": kind, "type": e["type"], "expr": e} for n, kind, e in keys],
        "actions": [{"name": a, "scope": "all"} for a in actions],
        "default_action": {"name": default, "args": default_args or [], "const": const_default},
        "entries": [],
        "entries_const": False,
        "size": 1024,
        "direct_counter": None,
        "direct_meter": None,
        "implementation": None,
    }
    t.update(extra)
    return t


def call(fn: str, args: list[Json], **extra: Any) -> Json:
    return {"s": "call", "fn": fn, "args": args, "src": "test:1:1", **extra}


def to_json(ir: Json) -> str:
    return json.dumps(ir)
