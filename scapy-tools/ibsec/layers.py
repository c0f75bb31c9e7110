"""Scapy layers for RoCEv2 transport headers and the MADs of ibsec-fabric (DESIGN sections 2-4).

Built on ``scapy.contrib.roce``: its GRH and AETH are reused as they are or extended, and our :class:`BTH`
is a subclass of its BTH whose byte 8 is split into ``ackreq``, ``secmode`` (the top three Resv7 bits,
DESIGN section 3) and ``resv4``. ``pkt[scapy.contrib.roce.BTH]`` still finds it, the ICRC stays the
FCS-style trailer of the roce module (left ``None`` it is computed on build; set it to force a bad one).

What follows the BTH is decided by one table, :mod:`ibsec.opcodes`: each header looks up the opcode of
the BTH below it and hands over to the next extension header in wire order, then to the STH when the
BTH's security mode is 2, 3 or 4, then to the payload. A UD packet to QP 1 carries a 256-byte MAD,
optionally followed by the :class:`MadAuth` trailer (see :mod:`ibsec.mad_auth`).

Field names follow the IBA spec (snake_case), in wire order; byte layouts are in docs/wire-format.md.
Counts and the MAD padding are computed at build time only when left unset, so attack tools can force
any value.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Callable
from typing import Any

from scapy.contrib import roce
from scapy.fields import (
    BitEnumField,
    BitField,
    ByteEnumField,
    ByteField,
    ConditionalField,
    Field,
    FieldLenField,
    FieldListField,
    IP6Field,
    MultipleTypeField,
    PacketField,
    PacketLenField,
    ShortField,
    StrLenField,
    X3BytesField,
    XBitField,
    XByteField,
    XIntField,
    XLongField,
    XShortField,
    XStrFixedLenField,
    XStrLenField,
)
from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6
from scapy.packet import Packet, Raw, bind_bottom_up, bind_layers, bind_top_down, split_bottom_up

from ibsec import icrc, opcodes, rocev2
from ibsec.keybatch import BATCH_VERSION as KEYBATCH_VERSION
from ibsec.keybatch import CAPACITY as KEYBATCH_CAPACITY
from ibsec.keybatch import NONCE_LEN as KEYBATCH_NONCE_LEN
from ibsec.keybatch import TAG_LEN as KEYBATCH_TAG_LEN
from ibsec.keys import WRAPPED_KEY_LEN, KeyType
from ibsec.names import Mode as SecMode
from ibsec.opcodes import Ext, Service

# --------------------------------------------------------------------------------------------------
# Constants
# --------------------------------------------------------------------------------------------------


STH_MODES = frozenset(m for m in SecMode if m.has_sth)
"""Modes whose packets carry a secure transport header after the last extension header."""
STH_LEN = 16

GSI_QPN = 1
GSI_QKEY = 0x80010000
"""The well-known Q_Key of QP1 (IBA 15.4.2)."""

MAD_LEN = 256
MAD_TID_AT = slice(8, 16)  # the TransactionID in the MAD's common header (IBA 13.4.3)


def mad_tid(mad: bytes) -> int:
    """The TransactionID of a MAD's bytes (its common header); the caller has checked they are that long."""
    return int.from_bytes(mad[MAD_TID_AT], "big")
MAD_HEADER_LEN = 24
MAD_DATA_LEN = MAD_LEN - MAD_HEADER_LEN
MAD_BASE_VERSION = 1


class MgmtClass(enum.IntEnum):
    """Management classes we build or read (IBA 13.4.4)."""

    SUBN_LID = 0x01
    SUBN_ADM = 0x03
    PERF = 0x04
    CM = 0x07
    IBSEC_VENDOR = 0x0E
    """Ours: vendor-specific range 1 (0x09-0x0F, no OUI header, 232 data bytes), not used by OpenSM."""
    SUBN_DIR = 0x81


CLASS_VERSIONS = {MgmtClass.SUBN_LID: 1, MgmtClass.SUBN_DIR: 1, MgmtClass.SUBN_ADM: 2,
                  MgmtClass.PERF: 1, MgmtClass.CM: 2, MgmtClass.IBSEC_VENDOR: 1}
"""ClassVersion a MAD gets when its class_version is left unset."""


class Method(enum.IntEnum):
    """The 7-bit Method (the R bit is a separate field: GetResp is r=1, method=GET)."""

    GET = 0x01
    SET = 0x02
    SEND = 0x03
    TRAP = 0x05
    REPORT = 0x06
    TRAP_REPRESS = 0x07


class MadStatus(enum.IntEnum):
    """MAD Status values we send in responses (IBA 13.4.7; bits 8-14 are class specific)."""

    OK = 0x0000
    BAD_VERSION = 0x0004
    UNSUPPORTED_METHOD = 0x0008
    UNSUPPORTED_METHOD_ATTR = 0x000C
    INVALID_ATTR_VALUE = 0x001C
    KEY_REJECTED = 0x0100
    """Class specific (ours): a wrapped key failed to unwrap or was refused."""


ATTR_NOTICE = 0x0002


class CmAttr(enum.IntEnum):
    """Communication Management attribute ids (IBA 12.6)."""

    REQ = 0x0010
    MRA = 0x0011
    REJ = 0x0012
    REP = 0x0013
    RTU = 0x0014
    DREQ = 0x0015
    DREP = 0x0016
    SIDR_REQ = 0x0017
    SIDR_REP = 0x0018


class VendorAttr(enum.IntEnum):
    """Attribute ids of our vendor class ``MgmtClass.IBSEC_VENDOR``."""

    KEY_DISTRIBUTION = 0x0010
    PKEY_TABLE = 0x0011
    KEY_BATCH = 0x0012


class NoticeType(enum.IntEnum):
    """Notice Type (IBA 13.4.8.2)."""

    FATAL = 0
    URGENT = 1
    SECURITY = 2
    SUBNET_MGMT = 3
    INFO = 4


TRAP_BAD_PKEY = 257
TRAP_BAD_QKEY = 258
PRODUCER_CA = 1
IBSEC_VENDOR_ID = 0x021B5E
"""24-bit VendorID of our vendor notices: locally administered (0x02....), not an IEEE OUI."""
IBSEC_TRAP_SECURITY = 0x0001
"""DeviceID (the vendor trap number) of the security trap: MAC failures and replays on a QP."""
IBSEC_TRAP_PORT_UP = 0x0002
"""DeviceID of the port-up notice: an agent that (re)started and holds no keys from the SM yet says so,
with a random boot id per start, so the SM provisions it again (its keys and P_Key table died with it)."""
NOTICE_EXT_VERSION = 1
"""Value of Notice.ext_version when our MF/receiving-port extension is present (0 = absent)."""

MAX_KEY_OWNERS = 4
PKEY_BLOCK_ENTRIES = 32
PKEY_FULL_MEMBER = 0x8000
IBSEC_PRIVATE_DATA_VERSION = 1
NONCE_BASE_LEN = 12
MAD_AUTH_NONCE_LEN = 12
MAD_AUTH_TAG_LEN = 16

_SEC_MODES = {m.value: m.label for m in SecMode}
_METHODS = {m.value: m.name for m in Method}
_CLASSES = {c.value: c.name for c in MgmtClass}
_NOTICE_TYPES = {t.value: t.name for t in NoticeType}
_KEY_TYPES = {k.value: k.name for k in KeyType}
_TRANSPORT_TYPES = {0: "RC", 1: "UC", 2: "RD"}

# --------------------------------------------------------------------------------------------------
# Fields
# --------------------------------------------------------------------------------------------------


class XInt128Field(Field[int, bytes]):
    """A 128-bit unsigned integer, network order (owner ids: CA ids, P_Keys, GIDs, QPNs)."""

    def __init__(self, name: str, default: int) -> None:
        super().__init__(name, default, fmt="16s")

    def i2m(self, pkt: Packet | None, x: int | None) -> bytes:
        return (x or 0).to_bytes(16, "big")

    def m2i(self, pkt: Packet | None, x: bytes) -> int:
        return int.from_bytes(x, "big")

    def i2repr(self, pkt: Packet | None, x: int) -> str:
        return hex(x or 0)


class ZeroFillField(StrLenField):
    """Reserved zero bytes that fill the unused slots of a fixed-size array.

    Left empty it builds as ``fill_from(pkt)`` zero bytes; all-zero bytes dissect back to empty, so a
    packet round-trips to equal fields. Set it to other bytes to send non-zero reserved bytes.
    """

    __slots__ = ["fill_from"]

    def __init__(self, name: str, fill_from: Callable[[Packet], int]) -> None:
        super().__init__(name, b"", length_from=fill_from)
        self.fill_from = fill_from

    def i2m(self, pkt: Packet | None, x: bytes | None) -> bytes:
        if not x and pkt is not None:
            return b"\x00" * self.fill_from(pkt)
        return bytes(x or b"")

    def m2i(self, pkt: Packet | None, x: bytes) -> bytes:
        return x if any(x) else b""


class FixedPacketField(PacketLenField):
    """A sub-structure in a fixed-size area (CM PrivateData): zero-padded on build, cut on dissect."""

    __slots__ = ["size"]

    def __init__(self, name: str, cls: type[Packet], size: int) -> None:
        super().__init__(name, None, cls, length_from=lambda _pkt: size)  # type: ignore[arg-type]
        self.size = size

    def i2m(self, pkt: Packet | None, i: Any) -> bytes:
        data = b"" if i is None else bytes(i)
        return data.ljust(self.size, b"\x00")


def _reserved(name: str, size: int) -> XStrFixedLenField:
    return XStrFixedLenField(name, b"\x00" * size, size)


# --------------------------------------------------------------------------------------------------
# Transport headers
# --------------------------------------------------------------------------------------------------


def _bth_below(pkt: Packet) -> roce.BTH | None:
    layer: Packet | None = pkt
    while layer is not None and not isinstance(layer, roce.BTH):
        layer = layer.underlayer
    return layer


def _after(pkt: Packet, ext: Ext | None) -> type[Packet]:
    """The layer that follows ``pkt`` (the BTH if ``ext`` is None, else extension header ``ext``)."""
    bth = _bth_below(pkt)
    if bth is None:
        return Raw
    try:
        op = opcodes.lookup(bth.opcode)
    except opcodes.UnknownOpcode:
        return Raw
    if ext is None:
        position = 0
    elif ext in op.headers:
        position = op.headers.index(ext) + 1
    else:  # a header the opcode does not call for (hand-built packet): the payload follows
        position = len(op.headers)
    if position < len(op.headers):
        return EXT_LAYERS[op.headers[position]]
    if isinstance(bth, BTH) and bth.secmode in STH_MODES:
        return STH
    if op.service is Service.UD and bth.dqpn == GSI_QPN:
        return MAD
    return Raw


class _ExtHeader(Packet):
    """Base of the extension headers: the next layer comes from the opcode table, not from bindings."""

    ext: Ext

    def guess_payload_class(self, payload: bytes) -> type[Packet]:
        return _after(self, self.ext)


class BTH(roce.BTH):
    """Base Transport Header, with BTH byte 8 = ``ackreq`` (A), ``secmode`` (3 bits), ``resv4``.

    ``secmode`` carries the security mode of DESIGN section 3 (:class:`SecMode`); the ICRC trailer and
    its lazy computation are scapy.contrib.roce's.
    """

    name = "BTH"
    match_subclass = True
    fields_desc = [
        ByteEnumField("opcode", 0, {code: op.name for code, op in opcodes.OPCODES.items()}),
        BitField("solicited", 0, 1),
        BitField("migreq", 0, 1),
        BitField("padcount", 0, 2),
        BitField("version", 0, 4),
        XShortField("pkey", 0xFFFF),
        BitField("fecn", 0, 1),
        BitField("becn", 0, 1),
        BitField("resv6", 0, 6),
        BitField("dqpn", 0, 24),
        BitField("ackreq", 0, 1),
        BitEnumField("secmode", 0, 3, _SEC_MODES),
        BitField("resv4", 0, 4),
        BitField("psn", 0, 24),
        roce.BTH.fields_desc[-1],  # icrc: FCS-style trailer after the payload
    ]

    def guess_payload_class(self, payload: bytes) -> type[Packet]:
        return _after(self, None)

    def compute_icrc(self, p: bytes) -> bytes:
        """The ICRC of :mod:`ibsec.icrc` (MF bits as zeros for fe80/fec0 destinations) over IPv6.

        ``p`` is this BTH and everything after it, ending with 4 placeholder bytes. RoCEv2 over IPv4
        has no MF and keeps scapy.contrib.roce's computation.
        """
        udp = self.underlayer
        ip = udp.underlayer if isinstance(udp, UDP) else None
        if not isinstance(ip, IPv6):
            return bytes(super().compute_icrc(p))
        pseudo = ip.copy()
        pseudo_udp = pseudo.getlayer(UDP)
        assert pseudo_udp is not None and udp is not None  # the copy keeps the layers just checked
        pseudo_udp.dport = udp.dport  # was overloaded by the BTH binding, not a field of the copy
        pseudo_udp.remove_payload()
        pseudo_udp.add_payload(Raw(p))
        return icrc.compute_bytes(bytes(pseudo), 0)


class AETH(_ExtHeader, roce.AETH):
    """ACK Extended Transport Header (scapy.contrib.roce's, chained by the opcode table)."""

    name = "AETH"
    match_subclass = True
    ext = Ext.AETH


class RDETH(_ExtHeader):
    """Reliable Datagram Extended Transport Header."""

    name = "RDETH"
    ext = Ext.RDETH
    fields_desc = [XByteField("reserved", 0), BitField("eecnxt", 0, 24)]


class DETH(_ExtHeader):
    """Datagram Extended Transport Header: Q_Key and source QP."""

    name = "DETH"
    ext = Ext.DETH
    fields_desc = [XIntField("qkey", 0), XByteField("reserved", 0), BitField("srcqp", 0, 24)]


class RETH(_ExtHeader):
    """RDMA Extended Transport Header: virtual address, R_Key, DMA length."""

    name = "RETH"
    ext = Ext.RETH
    fields_desc = [XLongField("va", 0), XIntField("rkey", 0), XIntField("dmalen", 0)]


class AtomicETH(_ExtHeader):
    """Atomic Extended Transport Header: VA, R_Key, swap (or add) data, compare data."""

    name = "AtomicETH"
    ext = Ext.AtomicETH
    fields_desc = [XLongField("va", 0), XIntField("rkey", 0), XLongField("swapdt", 0),
                   XLongField("cmpdt", 0)]


class AtomicAckETH(_ExtHeader):
    """Atomic ACK Extended Transport Header: the original remote data."""

    name = "AtomicAckETH"
    ext = Ext.AtomicAckETH
    fields_desc = [XLongField("origremdt", 0)]


class ImmDt(_ExtHeader):
    """Immediate data."""

    name = "ImmDt"
    ext = Ext.ImmDt
    fields_desc = [XIntField("immdt", 0)]


class IETH(_ExtHeader):
    """Invalidate Extended Transport Header: the R_Key to invalidate."""

    name = "IETH"
    ext = Ext.IETH
    fields_desc = [XIntField("rkey", 0)]


class STH(Packet):
    """Secure transport header (DESIGN section 3): the 16-byte GCM tag/GMAC, modes 2-4."""

    name = "STH"
    fields_desc = [XStrFixedLenField("tag", b"\x00" * STH_LEN, STH_LEN)]

    def guess_payload_class(self, payload: bytes) -> type[Packet]:
        return Raw


EXT_LAYERS: dict[Ext, type[Packet]] = {
    Ext.RDETH: RDETH, Ext.DETH: DETH, Ext.RETH: RETH, Ext.AtomicETH: AtomicETH, Ext.AETH: AETH,
    Ext.AtomicAckETH: AtomicAckETH, Ext.ImmDt: ImmDt, Ext.IETH: IETH, Ext.CNPPad: roce.CNPPadding,
}
"""The Scapy layer of every extension header of the opcode table."""

# --------------------------------------------------------------------------------------------------
# MAD common header and authentication trailer
# --------------------------------------------------------------------------------------------------


class MAD(Packet):
    """The 24-byte common MAD header (IBA 13.4.2); the class body follows as the payload.

    On build the body is zero-padded to 232 bytes (MAD total 256) before a :class:`MadAuth` trailer,
    and ``class_version`` left unset takes the class's version. On dissect the first 232 bytes after the
    header are the body and anything after it is the :class:`MadAuth` trailer.
    """

    name = "MAD"
    fields_desc = [
        ByteField("base_version", MAD_BASE_VERSION),
        ByteEnumField("mgmt_class", 0, _CLASSES),
        ByteField("class_version", None),
        BitField("r", 0, 1),
        BitEnumField("method", 0, 7, _METHODS),
        XShortField("status", 0),
        XShortField("class_specific", 0),
        XLongField("transaction_id", 0),
        XShortField("attribute_id", 0),
        XShortField("reserved", 0),
        XIntField("attribute_modifier", 0),
    ]

    def post_build(self, p: bytes, pay: bytes) -> bytes:
        if self.class_version is None:
            p = p[:2] + bytes([CLASS_VERSIONS.get(self.mgmt_class, 1)]) + p[3:]
        trailer = self.getlayer(MadAuth)
        tail = len(trailer) if trailer is not None else 0
        body = pay[:len(pay) - tail]
        return p + body.ljust(MAD_DATA_LEN, b"\x00") + pay[len(pay) - tail:]

    def do_dissect_payload(self, s: bytes) -> None:
        super().do_dissect_payload(s[:MAD_DATA_LEN])
        if len(s) > MAD_DATA_LEN:
            self.add_payload(MadAuth(s[MAD_DATA_LEN:], _internal=1, _underlayer=self))


class MadAuth(Packet):
    """MAD authentication trailer after the 256-byte MAD: 96-bit nonce and 128-bit GCM tag.

    Computed and checked by :mod:`ibsec.mad_auth`; Wireshark sees it as trailing bytes of a UD payload.
    """

    name = "MadAuth"
    fields_desc = [
        XStrFixedLenField("nonce", b"\x00" * MAD_AUTH_NONCE_LEN, MAD_AUTH_NONCE_LEN),
        XStrFixedLenField("tag", b"\x00" * MAD_AUTH_TAG_LEN, MAD_AUTH_TAG_LEN),
    ]

    def guess_payload_class(self, payload: bytes) -> type[Packet]:
        return Raw


class _Body(Packet):
    """A MAD class body or a fixed-size sub-structure: what follows it is padding, never a layer."""

    def extract_padding(self, s: bytes) -> tuple[bytes, bytes]:
        return b"", s


# --------------------------------------------------------------------------------------------------
# Subnet management: Notice / traps 257, 258 and the security trap
# --------------------------------------------------------------------------------------------------


class SMP(Packet):
    """LID-routed SMP fields before the SMP data (IBA 14.2.1.1): M_Key and 32 reserved bytes."""

    name = "SMP"
    fields_desc = [XLongField("m_key", 0), _reserved("reserved", 32)]

    def guess_payload_class(self, payload: bytes) -> type[Packet]:
        mad = self.underlayer
        if isinstance(mad, MAD) and mad.attribute_id == ATTR_NOTICE:
            return Notice
        return Raw


class Ntc257258(_Body):
    """DataDetails of traps 257 (bad P_Key) and 258 (bad Q_Key), as OpenSM's ``ntc_257_258``.

    Laid out to the bit as IBA 14.2.5.1 (and the Linux kernel and Wireshark): SL, 4 reserved bits and
    QP1 share one 32-bit word, QP2 has 8 reserved bits; 50 bytes then 4 reserved of the 54.
    """

    name = "Ntc257258"
    fields_desc = [
        XShortField("reserved", 0),
        ShortField("lid1", 0),
        ShortField("lid2", 0),
        XIntField("key", 0),
        BitField("sl", 0, 4),
        BitField("reserved2", 0, 4),
        BitField("qp1", 0, 24),
        XByteField("reserved3", 0),
        BitField("qp2", 0, 24),
        IP6Field("gid1", "::"),
        IP6Field("gid2", "::"),
        XIntField("reserved4", 0),
    ]


class SecurityTrapDetails(_Body):
    """DataDetails of our vendor security trap (``IBSEC_TRAP_SECURITY``): MAC failures and replays."""

    name = "SecurityTrapDetails"
    fields_desc = [
        XShortField("reserved", 0),
        ShortField("lid", 0),
        XByteField("reserved2", 0),
        BitField("qp", 0, 24),
        XIntField("mac_failures", 0),
        XIntField("replays", 0),
        XShortField("pkey", 0),
        ByteEnumField("secmode", 0, _SEC_MODES),
        BitField("reserved3", 0, 7),
        BitField("key_retired", 0, 1),
        IP6Field("peer_gid", "::"),
        XByteField("reserved4", 0),
        BitField("peer_qp", 0, 24),
        _reserved("reserved5", 14),
    ]


class PortUpDetails(_Body):
    """DataDetails of our port-up notice (``IBSEC_TRAP_PORT_UP``): which start of the agent this is."""

    name = "PortUpDetails"
    fields_desc = [
        XShortField("reserved", 0),
        ShortField("lid", 0),
        XLongField("boot_id", 0),
        _reserved("reserved2", 42),
    ]


def _is_bad_key_trap(pkt: Packet) -> bool:
    return bool(pkt.is_generic) and pkt.trap_number in (TRAP_BAD_PKEY, TRAP_BAD_QKEY)


def _is_security_trap(pkt: Packet) -> bool:
    return not pkt.is_generic and pkt.vendor_id == IBSEC_VENDOR_ID and pkt.device_id == IBSEC_TRAP_SECURITY


def _is_port_up(pkt: Packet) -> bool:
    return not pkt.is_generic and pkt.vendor_id == IBSEC_VENDOR_ID and pkt.device_id == IBSEC_TRAP_PORT_UP


class Notice(Packet):
    """Notice attribute (0x0002, IBA 14.2.5.1) in an SMP, with the ibsec extension in the reserved area.

    Bytes 0-63 are the Notice of the SMP data; IssuerGID (16 bytes) follows as in the 80-byte Notice of
    GS classes, then our extension: ``ext_version`` (1 = present), ``recv_port`` (the CA port that
    received the offending packet) and the raw 38-bit ``mf`` of its destination GID; the rest of the
    SMP's 128 reserved bytes stay zero.
    """

    name = "Notice"
    fields_desc = [
        BitField("is_generic", 1, 1),
        BitEnumField("type", NoticeType.SECURITY, 7, _NOTICE_TYPES),
        ConditionalField(X3BytesField("producer_type", PRODUCER_CA), lambda p: p.is_generic),
        ConditionalField(X3BytesField("vendor_id", IBSEC_VENDOR_ID), lambda p: not p.is_generic),
        ConditionalField(ShortField("trap_number", TRAP_BAD_PKEY), lambda p: p.is_generic),
        ConditionalField(XShortField("device_id", IBSEC_TRAP_SECURITY), lambda p: not p.is_generic),
        ShortField("issuer_lid", 0),
        BitField("notice_toggle", 0, 1),
        BitField("notice_count", 0, 15),
        MultipleTypeField(
            [
                (PacketField("data_details", Ntc257258(), Ntc257258), _is_bad_key_trap),
                (PacketField("data_details", SecurityTrapDetails(), SecurityTrapDetails),
                 _is_security_trap),
                (PacketField("data_details", PortUpDetails(), PortUpDetails), _is_port_up),
            ],
            XStrFixedLenField("data_details", b"\x00" * 54, 54),
        ),
        IP6Field("issuer_gid", "::"),
        ByteField("ext_version", NOTICE_EXT_VERSION),
        ByteField("recv_port", 0),
        BitField("ext_reserved", 0, 10),
        XBitField("mf", 0, 38),
        _reserved("reserved", 104),
    ]

    def guess_payload_class(self, payload: bytes) -> type[Packet]:
        return Raw


def bad_key_notice(
    trap_number: int, *, lid: int, gid: str, key: int, src_gid: str, src_qp: int, dst_qp: int, mf: int,
    recv_port: int = 1,
) -> Notice:
    """The Notice of trap 257 (bad P_Key) or 258 (bad Q_Key) that port (``lid``, ``gid``) issues for a
    packet from ``src_gid`` / ``src_qp`` to its QP ``dst_qp`` carrying ``key``, with our extension: the
    packet's raw ``mf`` and the port ``recv_port`` it arrived on (what the SM traces the sender by).

    One builder for the agent's traps, the forger's and the test fabrics', so they cannot drift apart.
    """
    details = Ntc257258(lid1=0, lid2=lid, key=key, qp1=src_qp, qp2=dst_qp, gid1=src_gid, gid2=gid)
    return Notice(is_generic=1, type=NoticeType.SECURITY, producer_type=PRODUCER_CA, trap_number=trap_number,
                  issuer_lid=lid, data_details=details, issuer_gid=gid, recv_port=recv_port, mf=mf)


def trap_mad(notice: Packet, transaction_id: int) -> bytes:
    """The 256-byte SubnTrap(Notice) MAD carrying ``notice`` (before its authentication trailer)."""
    mad = MAD(mgmt_class=MgmtClass.SUBN_LID, method=Method.TRAP, attribute_id=ATTR_NOTICE,
              transaction_id=transaction_id) / SMP() / notice
    return bytes(mad)[:MAD_LEN]


# --------------------------------------------------------------------------------------------------
# Communication management (class 0x07, IBA chapter 12)
# --------------------------------------------------------------------------------------------------


class IbsecPrivateData(_Body):
    """Our CM REQ/REP PrivateData: security mode, nonce base N0 and the wrapped session key.

    The key is wrapped by :func:`ibsec.keys.wrap_key` under CA_SK_ij with owner ids (GID_A, QPN_A,
    GID_B, QPN_B); the remaining PrivateData bytes stay zero.
    """

    name = "IbsecPrivateData"
    fields_desc = [
        ByteField("version", IBSEC_PRIVATE_DATA_VERSION),
        ByteEnumField("secmode", 0, _SEC_MODES),
        XShortField("reserved", 0),
        XStrFixedLenField("n0", b"\x00" * NONCE_BASE_LEN, NONCE_BASE_LEN),
        XStrFixedLenField("wrapped_key", b"\x00" * WRAPPED_KEY_LEN, WRAPPED_KEY_LEN),
    ]


def _path_fields(prefix: str) -> list[Field[Any, Any]]:
    """The primary or alternate path of a REQ (IBA 12.6.5), 44 bytes."""
    return [
        ShortField(f"{prefix}_local_lid", 0),
        ShortField(f"{prefix}_remote_lid", 0),
        IP6Field(f"{prefix}_local_gid", "::"),
        IP6Field(f"{prefix}_remote_gid", "::"),
        BitField(f"{prefix}_flow_label", 0, 20),
        BitField(f"{prefix}_reserved1", 0, 6),
        BitField(f"{prefix}_packet_rate", 0, 6),
        ByteField(f"{prefix}_traffic_class", 0),
        ByteField(f"{prefix}_hop_limit", 0),
        BitField(f"{prefix}_sl", 0, 4),
        BitField(f"{prefix}_subnet_local", 0, 1),
        BitField(f"{prefix}_reserved2", 0, 3),
        BitField(f"{prefix}_local_ack_timeout", 0, 5),
        BitField(f"{prefix}_reserved3", 0, 3),
    ]


class CmReq(_Body):
    """ConnectRequest (REQ, 0x0010), 92 bytes of PrivateData."""

    name = "CM_REQ"
    fields_desc = [
        XIntField("local_comm_id", 0),
        XIntField("reserved1", 0),
        XLongField("service_id", 0),
        XLongField("local_ca_guid", 0),
        XIntField("reserved2", 0),
        XIntField("local_qkey", 0),
        BitField("local_qpn", 0, 24),
        ByteField("responder_resources", 0),
        BitField("local_eecn", 0, 24),
        ByteField("initiator_depth", 0),
        BitField("remote_eecn", 0, 24),
        BitField("remote_cm_response_timeout", 0, 5),
        BitEnumField("transport_service_type", 0, 2, _TRANSPORT_TYPES),
        BitField("end_to_end_flow_control", 0, 1),
        BitField("starting_psn", 0, 24),
        BitField("local_cm_response_timeout", 0, 5),
        BitField("retry_count", 0, 3),
        XShortField("partition_key", 0xFFFF),
        BitField("path_mtu", 0, 4),
        BitField("rdc_exists", 0, 1),
        BitField("rnr_retry_count", 0, 3),
        BitField("max_cm_retries", 0, 4),
        BitField("srq", 0, 1),
        BitField("extended_transport_type", 0, 3),
        *_path_fields("primary"),
        *_path_fields("alternate"),
        FixedPacketField("private_data", IbsecPrivateData, 92),
    ]


class CmRep(_Body):
    """ConnectReply (REP, 0x0013), 196 bytes of PrivateData."""

    name = "CM_REP"
    fields_desc = [
        XIntField("local_comm_id", 0),
        XIntField("remote_comm_id", 0),
        XIntField("local_qkey", 0),
        BitField("local_qpn", 0, 24),
        XByteField("reserved1", 0),
        BitField("local_eecn", 0, 24),
        XByteField("reserved2", 0),
        BitField("starting_psn", 0, 24),
        XByteField("reserved3", 0),
        ByteField("responder_resources", 0),
        ByteField("initiator_depth", 0),
        BitField("target_ack_delay", 0, 5),
        BitField("failover_accepted", 0, 2),
        BitField("end_to_end_flow_control", 0, 1),
        BitField("rnr_retry_count", 0, 3),
        BitField("srq", 0, 1),
        BitField("reserved4", 0, 4),
        XLongField("local_ca_guid", 0),
        FixedPacketField("private_data", IbsecPrivateData, 196),
    ]


class CmRtu(_Body):
    """ReadyToUse (RTU, 0x0014), 224 bytes of PrivateData."""

    name = "CM_RTU"
    fields_desc = [
        XIntField("local_comm_id", 0),
        XIntField("remote_comm_id", 0),
        _reserved("private_data", 224),
    ]


class CmRej(_Body):
    """ConnectReject (REJ, 0x0012), 72 bytes of ARI and 148 bytes of PrivateData."""

    name = "CM_REJ"
    fields_desc = [
        XIntField("local_comm_id", 0),
        XIntField("remote_comm_id", 0),
        BitEnumField("message_rejected", 0, 2, {0: "REQ", 1: "REP", 2: "other"}),
        BitField("reserved1", 0, 6),
        BitField("reject_info_length", 0, 7),
        BitField("reserved2", 0, 1),
        ShortField("reason", 0),
        _reserved("additional_reject_info", 72),
        _reserved("private_data", 148),
    ]


class CmDreq(_Body):
    """DisconnectRequest (DREQ, 0x0015), 220 bytes of PrivateData."""

    name = "CM_DREQ"
    fields_desc = [
        XIntField("local_comm_id", 0),
        XIntField("remote_comm_id", 0),
        BitField("remote_qpn_eecn", 0, 24),
        XByteField("reserved", 0),
        _reserved("private_data", 220),
    ]


class CmDrep(_Body):
    """DisconnectReply (DREP, 0x0016), 224 bytes of PrivateData."""

    name = "CM_DREP"
    fields_desc = [
        XIntField("local_comm_id", 0),
        XIntField("remote_comm_id", 0),
        _reserved("private_data", 224),
    ]


class CmSidrReq(_Body):
    """ServiceIDResReq (SIDR_REQ, 0x0017), 216 bytes of PrivateData."""

    name = "CM_SIDR_REQ"
    fields_desc = [
        XIntField("request_id", 0),
        XShortField("partition_key", 0xFFFF),
        XShortField("reserved", 0),
        XLongField("service_id", 0),
        _reserved("private_data", 216),
    ]


class CmSidrRep(_Body):
    """ServiceIDResReqResp (SIDR_REP, 0x0018), 72 bytes of ClassPortInfo, 136 bytes of PrivateData."""

    name = "CM_SIDR_REP"
    fields_desc = [
        XIntField("request_id", 0),
        ByteField("status", 0),
        ByteField("additional_info_length", 0),
        XShortField("reserved1", 0),
        BitField("qpn", 0, 24),
        XByteField("reserved2", 0),
        XLongField("service_id", 0),
        XIntField("qkey", 0),
        _reserved("class_port_info", 72),
        _reserved("private_data", 136),
    ]


CM_LAYERS: dict[CmAttr, type[Packet]] = {
    CmAttr.REQ: CmReq, CmAttr.REP: CmRep, CmAttr.RTU: CmRtu, CmAttr.REJ: CmRej, CmAttr.DREQ: CmDreq,
    CmAttr.DREP: CmDrep, CmAttr.SIDR_REQ: CmSidrReq, CmAttr.SIDR_REP: CmSidrRep,
}

# --------------------------------------------------------------------------------------------------
# Vendor class: key distribution and P_Key tables
# --------------------------------------------------------------------------------------------------


class KeyDistribution(_Body):
    """A wrapped key from the SM to a CA (Set) and its acknowledgement (GetResp, key bytes zeroed).

    ``owners`` are the key's owner ids as :class:`ibsec.keys.Key` names them (up to four 128-bit ids,
    unused slots zero); the receiver unwraps with exactly these as associated data. A hostile
    ``owner_count`` above four still dissects at the fixed offsets (the receiver must refuse it).
    """

    name = "KeyDistribution"
    fields_desc = [
        ByteEnumField("key_type", 0, _KEY_TYPES),
        FieldLenField("owner_count", None, count_of="owners", fmt="B"),
        XShortField("pkey", 0),
        XIntField("key_id", 0),
        FieldListField("owners", [], XInt128Field("owner", 0),
                       count_from=lambda p: min(p.owner_count, MAX_KEY_OWNERS)),
        ZeroFillField("owners_fill", lambda p: 16 * (MAX_KEY_OWNERS - len(p.owners))),
        XStrFixedLenField("wrapped_key", b"\x00" * WRAPPED_KEY_LEN, WRAPPED_KEY_LEN),
        _reserved("reserved", 96),
    ]


_KEYBATCH_SEALED_MAX = KEYBATCH_CAPACITY + KEYBATCH_TAG_LEN


class KeyBatch(_Body):
    """Many keys for one CA wrapped together under its CA_SK (Set), and its ACK (GetResp, ``length`` 0).

    Wrapped and unwrapped by :mod:`ibsec.keybatch`, which documents the entries inside ``wrapped`` and
    the associated data. ``wrapped`` is the ciphertext followed by the 16-byte GCM tag; a hostile
    ``length`` dissects up to the end of the body.
    """

    name = "KeyBatch"
    fields_desc = [
        ByteField("version", KEYBATCH_VERSION),
        ByteField("count", 0),
        FieldLenField("length", None, length_of="wrapped", fmt="H",
                      adjust=lambda p, n: max(n - KEYBATCH_TAG_LEN, 0)),
        XStrFixedLenField("nonce", b"\x00" * KEYBATCH_NONCE_LEN, KEYBATCH_NONCE_LEN),
        XStrLenField("wrapped", b"", length_from=lambda p: min(p.length + KEYBATCH_TAG_LEN if p.length else 0,
                                                               _KEYBATCH_SEALED_MAX)),
        ZeroFillField("reserved", lambda p: max(_KEYBATCH_SEALED_MAX - len(p.wrapped or b""), 0)),
    ]


class PKeyTable(_Body):
    """One block of up to 32 P_Keys for a port (bit 15 = full member), from the SM; echoed as the ACK.

    ``secmodes[i]`` is the security mode (DESIGN 3, 0-4) of the partition of ``pkeys[i]``, one byte per
    entry in what used to be reserved bytes, so a table without modes (all zero) still means mode 0.
    Give one mode per P_Key; the receiver refuses a value above 4.
    """

    name = "PKeyTable"
    fields_desc = [
        ShortField("block", 0),
        ByteField("port", 0),
        FieldLenField("num_entries", None, count_of="pkeys", fmt="B"),
        FieldListField("pkeys", [], XShortField("pkey", 0),
                       count_from=lambda p: min(p.num_entries, PKEY_BLOCK_ENTRIES)),
        ZeroFillField("pkeys_fill", lambda p: 2 * (PKEY_BLOCK_ENTRIES - len(p.pkeys))),
        FieldListField("secmodes", [], ByteField("secmode", 0),
                       count_from=lambda p: min(p.num_entries, PKEY_BLOCK_ENTRIES)),
        ZeroFillField("secmodes_fill", lambda p: PKEY_BLOCK_ENTRIES - len(p.secmodes)),
        _reserved("reserved", 132),
    ]


VENDOR_LAYERS: dict[VendorAttr, type[Packet]] = {
    VendorAttr.KEY_DISTRIBUTION: KeyDistribution, VendorAttr.PKEY_TABLE: PKeyTable,
    VendorAttr.KEY_BATCH: KeyBatch,
}


_MAD_HEADER = struct.Struct("!BBBBHHQHHI")


def vendor_header(attribute: VendorAttr, tid: int, *, response: bool = False, status: int = 0) -> bytes:
    """The 24-byte common header of one of our vendor MADs: a Set, or its GetResp when ``response``.

    Bytes, without Scapy: the SM seals thousands of key batches and the agent answers each, and the
    header is the key batch's associated data (:mod:`ibsec.keybatch`)."""
    method = (0x80 | Method.GET) if response else Method.SET
    return _MAD_HEADER.pack(MAD_BASE_VERSION, MgmtClass.IBSEC_VENDOR, CLASS_VERSIONS[MgmtClass.IBSEC_VENDOR],
                            method, status, 0, tid, attribute, 0, 0)


def pkey_entry(pkey: int, full_member: bool = True) -> int:
    """A P_Key table entry: the 15-bit base with bit 15 set for full membership."""
    return (pkey & 0x7FFF) | (PKEY_FULL_MEMBER if full_member else 0)


# --------------------------------------------------------------------------------------------------
# Bindings
# --------------------------------------------------------------------------------------------------

split_bottom_up(UDP, roce.BTH, dport=rocev2.ROCEV2_PORT)
split_bottom_up(roce.GRH, roce.BTH)
bind_layers(UDP, BTH, dport=rocev2.ROCEV2_PORT)
bind_layers(roce.GRH, BTH)

# Building BTH()/X() fills in the opcode; dissection goes by the opcode table (_after).
_DEFAULT_OPCODES = ("RD_SEND_ONLY", "RC_ACKNOWLEDGE", "RC_SEND_ONLY_WITH_IMMEDIATE", "RC_FETCH_ADD",
                    "RC_SEND_ONLY_WITH_INVALIDATE", "RC_RDMA_WRITE_ONLY", "UD_SEND_ONLY", "CNP")
for _name in _DEFAULT_OPCODES:
    _op = opcodes.BY_NAME[_name]
    bind_top_down(BTH, EXT_LAYERS[_op.headers[0]], opcode=_op.code)

bind_bottom_up(MAD, SMP, mgmt_class=MgmtClass.SUBN_LID)
bind_top_down(MAD, SMP, mgmt_class=MgmtClass.SUBN_LID, method=Method.TRAP, attribute_id=ATTR_NOTICE)
for _attr, _cls in CM_LAYERS.items():
    bind_bottom_up(MAD, _cls, mgmt_class=MgmtClass.CM, attribute_id=_attr)
    bind_top_down(MAD, _cls, mgmt_class=MgmtClass.CM, method=Method.SEND, attribute_id=_attr)
for _vattr, _cls in VENDOR_LAYERS.items():
    bind_bottom_up(MAD, _cls, mgmt_class=MgmtClass.IBSEC_VENDOR, attribute_id=_vattr)
    bind_top_down(MAD, _cls, mgmt_class=MgmtClass.IBSEC_VENDOR, method=Method.SET, attribute_id=_vattr)
