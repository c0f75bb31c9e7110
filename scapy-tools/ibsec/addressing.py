"""GIDs, the marking field (MF) and the LID/GUID/MAC conventions of our fabrics (DESIGN section 2).

A GID is a 128-bit IPv6 address (RoCEv2 carries the GRH as IPv6). Bit 127 is the most significant bit
of the first byte, as in P4's ``hdr.ipv6.dst_addr[hi:lo]``::

    bits [127:118]  10-bit prefix: 0b1111111011 = fec0::/10 (site-local), 0b1111111010 = fe80::/10
    bits [117:80]   MF, the 38-bit marking field (zero in a host's own GID)
    bits [79:64]    16-bit subnet id
    bits [63:0]     64-bit GUID of the port

Switches route on bits [79:0] and mark MF only in packets to a markable (fe80::/10 or fec0::/10)
destination. MF bits are variant: the ICRC and every MAC see them as zeros for markable destinations.

Conventions for the hosts of our fabrics (topology index ``i`` counts hosts from 0):

- MAC: ``02:00:00`` + the 24-bit index (locally administered, unicast).
- GUID: the modified EUI-64 of the MAC, exactly as RoCE derives a port's default GID from its MAC:
  flip the universal/local bit of the first octet and insert ``ff:fe`` in the middle, so
  ``02:00:00:00:00:05`` has GUID ``0x000000fffe000005``; :func:`guid_to_mac` inverts it.
- LID: ``i + 1`` (LID 0 is reserved, unicast LIDs end at 0xBFFF).
"""

from __future__ import annotations

import enum
import ipaddress
from dataclasses import dataclass
from typing import TypeVar

from scapy.layers.inet6 import IPv6
from scapy.packet import Packet

MF_BITS = 38
MF_LSB = 80
"""Bit index (in the 128-bit address) of MF's least significant bit: MF is ``dst_addr[117:80]``."""
MF_MSB = MF_LSB + MF_BITS - 1
MF_MAX = (1 << MF_BITS) - 1
MF_MASK = MF_MAX << MF_LSB
"""The 128-bit mask with exactly the MF bits set."""

PREFIX_BITS = 10
SITE_LOCAL_PREFIX = 0b1111111011  # fec0::/10
LINK_LOCAL_PREFIX = 0b1111111010  # fe80::/10
SUBNET_BITS = 16
GUID_BITS = 64

LID_MIN = 0x0001
LID_UNICAST_MAX = 0xBFFF
HOST_MAC_OUI = 0x020000
"""Upper three octets of every host MAC: locally administered, unicast."""
MAX_HOST_INDEX = (1 << 24) - 1

Address = TypeVar("Address", bytes, str, Packet)


class PrefixKind(enum.Enum):
    """Which kind of destination a GID's top 10 bits name."""

    SITE_LOCAL = "site-local"
    LINK_LOCAL = "link-local"
    OTHER = "other"


@dataclass(frozen=True)
class Gid:
    """A GID split into its fields; ``prefix`` is the raw top 10 bits, so any address round-trips."""

    prefix: int
    mf: int
    subnet: int
    guid: int

    @property
    def kind(self) -> PrefixKind:
        """Site-local, link-local or other, from the 10-bit prefix."""
        return _prefix_kind(self.prefix)

    def to_int(self) -> int:
        """The 128-bit address as an integer."""
        for name, value, bits in (("prefix", self.prefix, PREFIX_BITS), ("mf", self.mf, MF_BITS),
                                  ("subnet", self.subnet, SUBNET_BITS), ("guid", self.guid, GUID_BITS)):
            if not 0 <= value < (1 << bits):
                raise ValueError(f"GID {name} {value:#x} does not fit in {bits} bits")
        return (self.prefix << 118) | (self.mf << MF_LSB) | (self.subnet << GUID_BITS) | self.guid

    def to_bytes(self) -> bytes:
        """The 16-byte address, network order."""
        return self.to_int().to_bytes(16, "big")

    def __str__(self) -> str:
        return str(ipaddress.IPv6Address(self.to_int()))


def _prefix_kind(prefix: int) -> PrefixKind:
    if prefix == SITE_LOCAL_PREFIX:
        return PrefixKind.SITE_LOCAL
    if prefix == LINK_LOCAL_PREFIX:
        return PrefixKind.LINK_LOCAL
    return PrefixKind.OTHER


def gid_to_int(addr: bytes | str | int) -> int:
    """A GID given as 16 bytes, IPv6 text or an integer, as a 128-bit integer."""
    if isinstance(addr, int):
        if not 0 <= addr < (1 << 128):
            raise ValueError("a GID is 128 bits")
        return addr
    if isinstance(addr, bytes):
        if len(addr) != 16:
            raise ValueError(f"a GID is 16 bytes, got {len(addr)}")
        return int.from_bytes(addr, "big")
    return int(ipaddress.IPv6Address(addr))


def parse_gid(addr: bytes | str | int) -> Gid:
    """Split a GID into prefix, MF, subnet id and GUID."""
    value = gid_to_int(addr)
    return Gid(prefix=value >> 118, mf=(value >> MF_LSB) & MF_MAX,
               subnet=(value >> GUID_BITS) & 0xFFFF, guid=value & ((1 << GUID_BITS) - 1))


def make_gid(subnet: int, guid: int, site_local: bool = True, mf: int = 0) -> str:
    """The GID text of a port (``fec0::/10`` by default, ``fe80::/10`` if not site-local)."""
    prefix = SITE_LOCAL_PREFIX if site_local else LINK_LOCAL_PREFIX
    return str(Gid(prefix=prefix, mf=mf, subnet=subnet, guid=guid))


def is_markable(addr: bytes | str | int) -> bool:
    """True if switches may mark a packet to ``addr``: its prefix is fe80::/10 or fec0::/10."""
    return parse_gid(addr).kind is not PrefixKind.OTHER


def _mf_of_int(value: int) -> int:
    return (value >> MF_LSB) & MF_MAX


def _with_mf(value: int, mf: int) -> int:
    if not 0 <= mf <= MF_MAX:
        raise ValueError(f"MF {mf:#x} does not fit in {MF_BITS} bits")
    return (value & ~MF_MASK) | (mf << MF_LSB)


def _ipv6_of(pkt: Packet) -> Packet:
    ipv6 = pkt.getlayer(IPv6)
    if ipv6 is None:
        raise ValueError("packet has no IPv6 (GRH) header")
    return ipv6


def mf_get(addr: bytes | str | Packet) -> int:
    """The 38-bit MF of a destination GID (16 bytes or text) or of a packet's IPv6 destination."""
    if isinstance(addr, Packet):
        addr = str(_ipv6_of(addr).dst)
    return _mf_of_int(gid_to_int(addr))


def mf_set(addr: Address, mf: int) -> Address:
    """A copy of ``addr`` (16 bytes, text or a packet with IPv6) whose destination MF is ``mf``.

    Only the MF bits change; the prefix is not checked, so an attack tool can mark anything.
    """
    if isinstance(addr, Packet):
        pkt = addr.copy()
        ipv6 = _ipv6_of(pkt)
        ipv6.dst = str(ipaddress.IPv6Address(_with_mf(gid_to_int(str(ipv6.dst)), mf)))
        return pkt
    value = _with_mf(gid_to_int(addr), mf)
    if isinstance(addr, bytes):
        return value.to_bytes(16, "big")
    return str(ipaddress.IPv6Address(value))


def mf_clear(addr: Address) -> Address:
    """A copy of ``addr`` with MF zero (what a leaf switch does to a packet entering from a host)."""
    return mf_set(addr, 0)


def mask_mf(addr: bytes) -> bytes:
    """The 16-byte destination as the ICRC and MACs see it: MF zeroed if markable, unchanged otherwise."""
    return mf_clear(addr) if is_markable(addr) else addr


def host_mac(index: int) -> str:
    """The MAC of host ``index`` in our topologies: ``02:00:00`` + the 24-bit index."""
    if not 0 <= index <= MAX_HOST_INDEX:
        raise ValueError(f"host index {index} outside 0..{MAX_HOST_INDEX}")
    value = (HOST_MAC_OUI << 24) | index
    return ":".join(f"{b:02x}" for b in value.to_bytes(6, "big"))


def mac_to_guid(mac: str) -> int:
    """The modified EUI-64 of a MAC (U/L bit flipped, ff:fe inserted), as RoCE derives a port GUID."""
    octets = bytes(int(part, 16) for part in mac.split(":"))
    if len(octets) != 6:
        raise ValueError(f"not a MAC address: {mac!r}")
    eui = bytes([octets[0] ^ 0x02]) + octets[1:3] + b"\xff\xfe" + octets[3:]
    return int.from_bytes(eui, "big")


def guid_to_mac(guid: int) -> str:
    """The MAC a GUID was derived from by :func:`mac_to_guid`; refuses GUIDs without ff:fe in the middle."""
    eui = guid.to_bytes(8, "big")
    if eui[3:5] != b"\xff\xfe":
        raise ValueError(f"GUID {guid:#018x} is not a MAC-derived EUI-64")
    octets = bytes([eui[0] ^ 0x02]) + eui[1:3] + eui[5:]
    return ":".join(f"{b:02x}" for b in octets)


def host_guid(index: int) -> int:
    """The GUID of host ``index``: the modified EUI-64 of :func:`host_mac`."""
    return mac_to_guid(host_mac(index))


def host_lid(index: int) -> int:
    """The LID of host ``index``: index + 1, so LID 0 (reserved) is never used."""
    lid = index + 1
    if not LID_MIN <= lid <= LID_UNICAST_MAX:
        raise ValueError(f"host index {index} has no unicast LID (max {LID_UNICAST_MAX - 1})")
    return lid


def host_gid(index: int, subnet: int, site_local: bool = True) -> str:
    """The GID of host ``index`` in ``subnet`` (MF zero)."""
    return make_gid(subnet, host_guid(index), site_local=site_local)
