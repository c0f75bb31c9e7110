"""The ICRC of RoCEv2 frames and the masked headers it covers (DESIGN section 3); where the headers are is
:mod:`ibsec.rocev2`'s.

The invariant CRC covers, in order: 8 bytes of ones standing for the LRH that RoCEv2 does not carry; the
IPv6 header (the GRH) with traffic class, flow label and hop limit as ones and, for destinations in
fe80::/10 or fec0::/10, the 38 MF bits as zeros; the UDP header with its checksum as ones; the BTH with
byte 4 (FECN, BECN, reserved) as ones; then everything after the BTH up to the ICRC. The CRC is the
IEEE CRC-32 (``zlib.crc32``) and travels least significant byte first, as ``scapy.contrib.roce`` and the
Linux rxe driver write it.

The same masked header bytes, cut at the end of the transport headers H, are the GCM associated data of
the secure transport modes, so both live here.
"""

from __future__ import annotations

import zlib

from ibsec import opcodes
from ibsec.addressing import LINK_LOCAL_PREFIX, MF_MASK, PREFIX_BITS, SITE_LOCAL_PREFIX
from ibsec.rocev2 import ICRC_LEN, IP_DST, IPV6_LEN, UDP_LEN, RoceFrame, locate

LRH_ONES = b"\xff" * 8
"""What stands for the LRH that RoCEv2 frames do not carry."""


def masked(frame: RoceFrame, end: int) -> bytes:
    """The ICRC's view of ``frame.data[ip:end]``, preceded by the LRH's 8 bytes of ones.

    ``end`` = :attr:`RoceFrame.headers_end` gives the masked headers (the GCM associated data);
    ``end`` = the ICRC's offset gives everything the ICRC covers.
    """
    return masked_bytes(frame.data, frame.ip, end)


def masked_bytes(data: bytes | bytearray, ip: int, end: int) -> bytes:
    """:func:`masked` for a frame given as its bytes and the IPv6 header's offset in them (so a sender can
    mask a frame it is still building). ``end`` must lie past BTH byte 4.

    Every variant bit lies in the first :data:`_VARIANT_SPAN` bytes from the IPv6 header on, so those are
    masked as one integer and the rest is copied as it is.
    """
    head = int.from_bytes(data[ip:ip + _VARIANT_SPAN], "big") | _VARIANT_ONES
    if (data[ip + IP_DST] << 8 | data[ip + IP_DST + 1]) >> (16 - PREFIX_BITS) in _MARKABLE_PREFIXES:
        head &= _MF_AS_ZEROS
    return LRH_ONES + head.to_bytes(_VARIANT_SPAN, "big") + data[ip + _VARIANT_SPAN:end]


def _variant_ones() -> int:
    """Traffic class, flow label, hop limit, UDP checksum and BTH byte 4 as ones, over the variant span."""
    ones = bytearray(_VARIANT_SPAN)
    ones[0] = 0x0F  # traffic class (high nibble) ...
    ones[1:4] = b"\xff\xff\xff"  # ... rest of traffic class and flow label
    ones[7] = 0xFF  # hop limit
    ones[IPV6_LEN + 6:IPV6_LEN + 8] = b"\xff\xff"  # UDP checksum
    ones[IPV6_LEN + UDP_LEN + 4] = 0xFF  # BTH byte 4: FECN, BECN, reserved
    return int.from_bytes(ones, "big")


_VARIANT_SPAN = IPV6_LEN + UDP_LEN + 5
"""IPv6, UDP and BTH bytes 0-4: where every bit the ICRC masks lies."""
_VARIANT_ONES = _variant_ones()
_MF_AS_ZEROS = ~(MF_MASK << 8 * (_VARIANT_SPAN - IP_DST - 16))
_MARKABLE_PREFIXES = frozenset({SITE_LOCAL_PREFIX, LINK_LOCAL_PREFIX})
"""Destinations whose MF bits are variant (``addressing.is_markable``), by their top 10 bits."""


def compute(frame: RoceFrame, masked_headers: bytes | None = None) -> bytes:
    """The 4 ICRC bytes (wire order) for everything before the frame's last 4 bytes.

    ``masked_headers``, if given, is ``masked(frame, end)`` for some ``end`` (e.g. the GCM associated data
    already computed): the CRC continues from it instead of masking the headers again.
    """
    return compute_bytes(frame.data, frame.ip, masked_headers)


def compute_bytes(data: bytes | bytearray, ip: int, masked_headers: bytes | None = None) -> bytes:
    """:func:`compute` for a frame given as its bytes and the IPv6 header's offset in them."""
    if masked_headers is None:  # only the headers up to the BTH have variant bits
        masked_headers = masked_bytes(data, ip, ip + IPV6_LEN + UDP_LEN + opcodes.BTH_LEN)
    end = ip + len(masked_headers) - len(LRH_ONES)
    crc = zlib.crc32(memoryview(data)[end:len(data) - ICRC_LEN], zlib.crc32(masked_headers))
    return crc.to_bytes(4, "little")


def verify(frame: bytes | RoceFrame) -> bool:
    """True if the frame's last 4 bytes are its ICRC (``frame`` as bytes, or as located already)."""
    found = frame if isinstance(frame, RoceFrame) else locate(frame)
    return found.data[-ICRC_LEN:] == compute(found)


def with_icrc(frame: bytes) -> bytes:
    """``frame`` with its last 4 bytes replaced by the ICRC (e.g. after a switch or a test changed it)."""
    return frame[:-ICRC_LEN] + compute(locate(frame))

