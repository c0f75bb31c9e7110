"""A small IPv4 router in IR, built without the front end, exercising the v1model pipeline: parser select
and verify, checksum verify/update, lpm table with a direct counter, multicast, clone, digest, counter,
register, meter and hash."""

from __future__ import annotations

from typing import Any

from p4switch.tests.engine.irbuild import (
    BOOL,
    SM,
    Json,
    action,
    assign,
    binary,
    bit,
    call,
    const,
    extract,
    field,
    goto,
    hdr,
    meta,
    program,
    select,
    sm,
    state,
    table,
    var,
)

ETH = [("dst", 48), ("src", 48), ("ether_type", 16)]
IPV4 = [
    ("version", 4),
    ("ihl", 4),
    ("diffserv", 8),
    ("total_len", 16),
    ("identification", 16),
    ("flags", 3),
    ("frag_offset", 13),
    ("ttl", 8),
    ("protocol", 8),
    ("checksum", 16),
    ("src", 32),
    ("dst", 32),
]
LEARN_ETHER_TYPE = 0x9999


def eth(name: str) -> Json:
    return field("ethernet", "ethernet_t", name, dict(ETH)[name])


def ip(name: str) -> Json:
    return field("ipv4", "ipv4_t", name, dict(IPV4)[name])


def is_valid(name: str, htype: str) -> Json:
    return {"op": "is_valid", "expr": hdr(name, htype), "type": BOOL}


def ipv4_fields_but_checksum() -> list[Json]:
    return [ip(n) for n, _ in IPV4 if n != "checksum"]


def method(instance: str, name: str, args: list[Json]) -> Json:
    return {"s": "method", "instance": instance, "method": name, "args": args, "src": "router:1:1"}


def router_ir() -> dict[str, Any]:
    states = [
        state(
            "start",
            [extract("ethernet", "ethernet_t")],
            select(
                [eth("ether_type")],
                [
                    ([{"kind": "exact", "value": 0x0800}], "parse_ipv4"),
                    ([{"kind": "mask", "value": 0x8800, "mask": 0xFF00}], "accept"),
                    ([{"kind": "range", "low": 0x9000, "high": 0x9FFF}], "accept"),
                ],
            ),
        ),
        state(
            "parse_ipv4",
            [
                extract("ipv4", "ipv4_t"),
                {
                    "s": "verify",
                    "cond": binary("==", ip("version"), const(4, bit(4)), BOOL),
                    "error": "BadVersion",
                    "src": "router:2:1",
                },
            ],
            goto("accept"),
        ),
    ]
    verify = [
        call(
            "verify_checksum",
            [is_valid("ipv4", "ipv4_t"), ip("checksum")],
            algorithm="csum16",
            data=ipv4_fields_but_checksum(),
        )
    ]
    compute = [
        call(
            "update_checksum",
            [is_valid("ipv4", "ipv4_t"), ip("checksum")],
            algorithm="csum16",
            data=ipv4_fields_but_checksum(),
        )
    ]
    drop = call("mark_to_drop", [var("standard_metadata", SM)])
    actions = [
        action("Ingress.set_port", [("port", 9)], [assign(sm("egress_spec", 9), var("port", bit(9)))]),
        action("Ingress.drop", [], [drop]),
        action("Ingress.flood", [("group", 16)], [assign(sm("mcast_grp", 16), var("group", bit(16)))]),
        action(
            "Ingress.mirror",
            [("port", 9), ("session", 32)],
            [
                assign(sm("egress_spec", 9), var("port", bit(9))),
                call("clone", [var("session", bit(32))], clone_type="I2E"),
            ],
        ),
    ]
    all_actions = ["Ingress.set_port", "Ingress.drop", "Ingress.flood", "Ingress.mirror"]
    tables = [
        table(
            "Ingress.routes",
            [("hdr.ipv4.dst", "lpm", ip("dst"))],
            all_actions,
            default="Ingress.drop",
            direct_counter="Ingress.route_hits",
        )
    ]
    externs: list[Json] = [
        {"kind": "direct_counter", "name": "Ingress.route_hits", "unit": "both", "table": "Ingress.routes"},
        {"kind": "counter", "name": "Ingress.port_pkts", "size": 16, "unit": "both"},
        {"kind": "register", "name": "Ingress.last_ttl", "size": 16, "type": bit(8)},
        {"kind": "meter", "name": "Ingress.port_meter", "size": 16, "unit": "packets"},
    ]
    digests = [
        {"name": "learn_t", "fields": [{"name": "src", "type": bit(48)}, {"name": "port", "type": bit(9)}]}
    ]
    ingress = [
        method(
            "Ingress.port_pkts", "count", [{"op": "cast", "expr": sm("ingress_port", 9), "type": bit(32)}]
        ),
        {
            "s": "if",
            "cond": binary("==", eth("ether_type"), const(LEARN_ETHER_TYPE, bit(16)), BOOL),
            "then": [
                {
                    "s": "digest",
                    "digest": "learn_t",
                    "receiver": 1,
                    "fields": [eth("src"), sm("ingress_port", 9)],
                    "src": "router:3:1",
                },
                drop,
            ],
            "else": [],
            "src": "router:3:1",
        },
        {
            "s": "if",
            "cond": binary("==", sm("checksum_error", 1), const(1, bit(1)), BOOL),
            "then": [drop],
            "else": [
                {
                    "s": "if",
                    "cond": is_valid("ipv4", "ipv4_t"),
                    "then": [
                        method(
                            "Ingress.port_meter",
                            "execute_meter",
                            [
                                {"op": "cast", "expr": sm("ingress_port", 9), "type": bit(32)},
                                meta("colour", bit(8)),
                            ],
                        ),
                        {"s": "apply", "table": "Ingress.routes", "src": "router:4:1"},
                        assign(ip("ttl"), binary("-", ip("ttl"), const(1, bit(8)))),
                        method(
                            "Ingress.last_ttl",
                            "write",
                            [{"op": "cast", "expr": sm("ingress_port", 9), "type": bit(32)}, ip("ttl")],
                        ),
                        call(
                            "hash",
                            [meta("flow_hash", bit(16)), const(0, bit(16)), const(0, bit(32))],
                            algorithm="crc16",
                            data=[ip("src"), ip("dst")],
                        ),
                    ],
                    "else": [],
                    "src": "router:5:1",
                }
            ],
            "src": "router:6:1",
        },
        {
            "s": "if",
            "cond": binary("==", meta("colour", bit(8)), const(2, bit(8)), BOOL),
            "then": [drop],
            "else": [],
            "src": "router:7:1",
        },
    ]
    egress = [
        {
            "s": "if",
            "cond": binary("==", sm("instance_type", 32), const(1, bit(32)), BOOL),
            "then": [assign(eth("ether_type"), const(0xCCCC, bit(16)))],
            "else": [],
            "src": "router:8:1",
        },
        {
            "s": "if",
            "cond": binary("!=", sm("egress_rid", 16), const(0, bit(16)), BOOL),
            "then": [assign(eth("src"), {"op": "cast", "expr": sm("egress_rid", 16), "type": bit(48)})],
            "else": [],
            "src": "router:9:1",
        },
    ]
    return program(
        {"ethernet_t": ETH, "ipv4_t": IPV4},
        [("ethernet", "ethernet_t"), ("ipv4", "ipv4_t")],
        states,
        ingress,
        egress=egress,
        metadata=[("colour", bit(8)), ("flow_hash", bit(16))],
        actions=actions,
        tables=tables,
        externs=externs,
        digests=digests,
        verify=verify,
        compute=compute,
    )
