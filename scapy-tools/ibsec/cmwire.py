"""CM MADs as bytes on the agent's fast path (and for the tools that flood or fuzz it): the fields the CM
decides on, read and written at their IBA offsets (chapter 12.6) without Scapy.

Anyone can send CM MADs, so reading one must cost little: a flood of spoofed REQs dissected by Scapy
(several milliseconds each) kept a member's REQ waiting behind it for tens of seconds. ``ibsec.layers``
stays the definition of the formats (tools, tests, docs); ``test_cmwire`` checks this module against it
field by field, both ways.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from ibsec import layers

IBSEC_SERVICE_ID = 0x1B5E_C000_0000_0000
"""The ServiceID of our CM REQs; the low bytes carry the key scope and, for UD, the wanted QPN."""

HEADER = struct.Struct("!BBBBHHQHHI")  # the 24-byte MAD common header (IBA 13.4.2)
BODY = layers.MAD_HEADER_LEN
PRIVATE = struct.Struct("!BBH12s64s")  # IbsecPrivateData: version, secmode, reserved, n0, wrapped key

# (offset in the 232-byte body, bytes) of each field we read or write, by attribute
FIELDS: dict[int, dict[str, tuple[int, int]]] = {
    layers.CmAttr.REQ: {"local_comm_id": (0, 4), "service_id": (8, 8), "local_ca_guid": (16, 8),
                        "qpn": (32, 3), "psn": (44, 3), "pkey": (48, 2), "local_lid": (52, 2),
                        "local_gid": (56, 16), "remote_gid": (72, 16), "private": (140, 92)},
    layers.CmAttr.REP: {"local_comm_id": (0, 4), "remote_comm_id": (4, 4), "qpn": (12, 3), "psn": (20, 3),
                        "local_ca_guid": (28, 8), "private": (36, 196)},
    layers.CmAttr.RTU: {"local_comm_id": (0, 4), "remote_comm_id": (4, 4)},
    layers.CmAttr.REJ: {"local_comm_id": (0, 4), "remote_comm_id": (4, 4), "status": (10, 2)},
    layers.CmAttr.DREQ: {"local_comm_id": (0, 4), "remote_comm_id": (4, 4), "qpn": (8, 3)},
    layers.CmAttr.DREP: {"local_comm_id": (0, 4), "remote_comm_id": (4, 4)},
    layers.CmAttr.SIDR_REQ: {"local_comm_id": (0, 4), "pkey": (4, 2), "service_id": (8, 8),
                             "private": (16, 216)},
    layers.CmAttr.SIDR_REP: {"local_comm_id": (0, 4), "status": (4, 1), "qpn": (8, 3), "service_id": (12, 8),
                             "qkey": (20, 4), "private": (96, 136)},
}
"""``local_comm_id`` is SIDR's RequestID, ``status`` REJ's reason, ``qpn`` DREQ's remote QPN."""


@dataclass(frozen=True)
class Message:
    """A CM MAD's attribute, transaction id and the fields of :data:`FIELDS` (zero where absent)."""

    attr: int
    tid: int = 0
    local_comm_id: int = 0
    remote_comm_id: int = 0
    service_id: int = 0
    local_ca_guid: int = 0
    qpn: int = 0
    psn: int = 0
    pkey: int = 0
    qkey: int = 0
    status: int = 0
    local_lid: int = 0
    local_gid: bytes = bytes(16)
    remote_gid: bytes = bytes(16)
    private: bytes = b""


@dataclass(frozen=True)
class Private:
    """Our PrivateData (``layers.IbsecPrivateData``): security mode, nonce contribution, wrapped key."""

    mode: int
    n0: bytes
    wrapped_key: bytes


def read(mad: bytes) -> Message | None:
    """The CM message in a 256-byte MAD (its trailer, if any, cut off), or None if it is not one we know."""
    if len(mad) < layers.MAD_LEN or mad[1] != layers.MgmtClass.CM:
        return None
    header = HEADER.unpack_from(mad)
    attr, tid = header[7], header[6]
    fields = FIELDS.get(attr)
    if fields is None:
        return None
    values: dict[str, Any] = {}
    for name, (offset, size) in fields.items():
        raw = mad[BODY + offset : BODY + offset + size]
        values[name] = raw if name in ("private", "local_gid", "remote_gid") else int.from_bytes(raw, "big")
    return Message(attr, tid, **values)


def write(message: Message) -> bytes:
    """The 256-byte MAD of ``message`` (method Send, ClassVersion 2); fields not in its layout stay zero."""
    out = bytearray(layers.MAD_LEN)
    HEADER.pack_into(out, 0, layers.MAD_BASE_VERSION, layers.MgmtClass.CM,
                     layers.CLASS_VERSIONS[layers.MgmtClass.CM], layers.Method.SEND, 0, 0, message.tid,
                     message.attr, 0, 0)
    for name, (offset, size) in FIELDS[message.attr].items():
        value = getattr(message, name)
        raw = value.ljust(size, b"\0")[:size] if isinstance(value, bytes) else value.to_bytes(size, "big")
        out[BODY + offset : BODY + offset + size] = raw
    return bytes(out)


def private(raw: bytes) -> Private:
    """Our PrivateData at the start of a CM PrivateData field."""
    _, mode, _, n0, wrapped = PRIVATE.unpack_from(raw.ljust(PRIVATE.size, b"\0"))
    return Private(mode, n0, wrapped)


def pack_private(mode: int, n0: bytes, wrapped_key: bytes = bytes(64)) -> bytes:
    return PRIVATE.pack(layers.IBSEC_PRIVATE_DATA_VERSION, mode, 0, n0, wrapped_key)
