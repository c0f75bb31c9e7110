"""Structure-aware mutation of RoCEv2 frames: every header a receiver parses, field by field.

A :class:`Mutator` takes a frame of the corpus (real traffic, and frames the component builds) and changes
one thing the receiver decides on: a BTH field (opcode, flags, P_Key, QPN, the mode byte, PSN), an
extension header field (DETH, RETH, AETH...), the STH, the IPv6/UDP lengths or PadCnt, the length itself
(cut at a header boundary, extended), the MAD header, a CM field (``ibsec.cmwire``'s layout) or a
vendor MAD field, the authentication trailer, random bits, or splices two frames. Values are boundaries
(0, 1, the largest, the sign bit...) and values harvested from the corpus (QPNs, R_Keys, addresses, P_Keys,
communication ids), so mutations land on real QPs and regions. Then, most of the time, it repairs what an
outer check would refuse first, so the mutation reaches the inner ones: the lengths, the trailer (sealed
again by a callback under a key the fuzzer holds) and the ICRC.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

from ibsec import cmwire, icrc, layers, opcodes, rocev2
from ibsec.rocev2 import View, parse

IP = rocev2.ETHER_LEN
BTH = rocev2.BTH_AT
MAD_AT = rocev2.MAD_AT
TRAILER = 28
BOUNDARIES = {
    1: (0, 1, 0x7F, 0x80, 0xFE, 0xFF),
    2: (0, 1, 0x7FFF, 0x8000, 0xFFFE, 0xFFFF),
    3: (0, 1, 2, 0x7FFFFF, 0x800000, 0xFFFFFE, 0xFFFFFF),
    4: (0, 1, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFE, 0xFFFFFFFF),
    8: (0, 1, 1 << 63, (1 << 64) - 1),
}
VENDOR_FIELDS: dict[
    int, tuple[tuple[int, int], ...]
] = {  # (offset in the MAD body, bytes): KeyDistribution and PKeyTable (docs/wire-format.md)
    layers.VendorAttr.KEY_DISTRIBUTION: ((0, 1), (1, 1), (2, 2), (4, 4), (8, 16), (24, 16), (72, 64)),
    layers.VendorAttr.PKEY_TABLE: ((0, 2), (2, 1), (3, 1), (4, 2), (6, 2), (66, 2), (68, 1), (69, 1)),
}
Reseal = Callable[[bytes], bytes | None]


@dataclass
class Known:
    """Values seen in the corpus, by the width of the field they came from."""

    values: dict[int, set[int]] = field(default_factory=lambda: {w: set() for w in BOUNDARIES})

    def learn(self, frame: bytes) -> None:
        view = _view(frame)
        if view is None:
            return
        self.values[3].update((view.dqpn, view.psn))
        self.values[2].add(view.pkey)
        if view.deth:
            self.values[4].add(view.deth[0])
            self.values[3].add(view.deth[1])
        if view.reth:
            self.values[8].add(view.reth[0])
            self.values[4].update(view.reth[1:])
        message = cmwire.read(frame[MAD_AT:]) if view.dqpn == layers.GSI_QPN else None
        if message is not None:
            self.values[4].update((message.local_comm_id, message.remote_comm_id))
            self.values[3].add(message.qpn)


@dataclass
class Mutator:
    """Mutates corpus frames; ``reseal`` seals a MAD frame's trailer again (None if it cannot)."""

    rng: random.Random
    corpus: list[bytes]
    reseal: Reseal = field(default=lambda frame: None)
    src_macs: tuple[bytes, ...] = ()  # Ethernet sources to use (never a real host's: a bridge relearns)
    known: Known = field(default_factory=Known)

    def __post_init__(self) -> None:
        self.families: dict[str, dict[str, list[bytes]]] = {}
        for frame in self.corpus:
            self.known.learn(frame)
            name = kind(frame)
            self.families.setdefault(family(name), {}).setdefault(name, []).append(frame)
        self._operators: list[tuple[str, Callable[[bytearray], bool]]] = [
            ("bth", self._bth),
            ("ext", self._ext),
            ("sth", self._sth),
            ("lengths", self._lengths),
            ("cut", self._cut),
            ("extend", self._extend),
            ("bitflip", self._bitflip),
            ("mad", self._mad),
            ("cm", self._cm),
            ("vendor", self._vendor),
            ("trailer", self._trailer),
            ("splice", self._splice),
        ]

    def mutate(self) -> tuple[str, bytes]:
        """(what was done, a mutated frame of the corpus, or random bytes behind an Ethernet header)."""
        if self.rng.random() < 0.03:
            return "random", self._random()
        kinds = self.families[self.rng.choice(sorted(self.families))]  # every family alike, then every kind
        base = self.rng.choice(kinds[self.rng.choice(sorted(kinds))])
        for _ in range(8):
            name, operator = self.rng.choice(self._operators)
            out = bytearray(base)
            if operator(out):
                return name, self._repaired(name, out)
        return "bitflip", self._repaired("bitflip", self._flipped(base))

    # ---- operators: each changes ``out`` in place, False if it does not apply to this frame

    def _bth(self, out: bytearray) -> bool:
        if len(out) < BTH + opcodes.BTH_LEN:
            return False
        offset, width = self.rng.choice(((0, 1), (1, 1), (2, 2), (4, 1), (5, 3), (8, 1), (9, 3)))
        if offset == 0 and self.rng.random() < 0.7:
            value = self.rng.choice(list(opcodes.OPCODES))  # a real opcode: headers of another shape
        elif offset == 8 and self.rng.random() < 0.7:
            value = (self.rng.randrange(8) << 4) | self.rng.choice((0, 0x80)) | self.rng.choice((0, 0, 1))
        else:
            value = self._value(width)
        out[BTH + offset : BTH + offset + width] = value.to_bytes(width, "big")
        return True

    def _ext(self, out: bytearray) -> bool:
        headers = self._extensions(out)
        if not headers:
            return False
        start, length = self.rng.choice(headers)
        width = self.rng.choice([w for w in (1, 2, 3, 4, 8) if w <= length])
        offset = start + self.rng.randrange(length - width + 1)
        out[offset : offset + width] = self._value(width).to_bytes(width, "big")
        return True

    def _sth(self, out: bytearray) -> bool:
        view = _view(bytes(out))
        if view is None or view.mode not in (2, 3, 4):
            return False
        end = view.headers_end
        out[end + self.rng.randrange(16)] ^= 1 << self.rng.randrange(8)
        return True

    def _lengths(self, out: bytearray) -> bool:
        if len(out) < BTH + opcodes.BTH_LEN:
            return False
        where = self.rng.choice((IP + 4, IP + 44, BTH + 1))
        if where == BTH + 1:
            out[where] = (out[where] & 0xCF) | (self.rng.randrange(4) << 4)  # PadCnt
        else:
            actual = len(out) - IP - rocev2.IPV6_LEN
            value = self.rng.choice(
                (0, 1, 8, actual - 1, actual + 1, actual + 4, 0xFFFF, self.rng.getrandbits(16))
            )
            out[where : where + 2] = (value & 0xFFFF).to_bytes(2, "big")
        return True

    def _cut(self, out: bytearray) -> bool:
        marks = [IP, BTH, BTH + opcodes.BTH_LEN, MAD_AT, MAD_AT + 24, MAD_AT + layers.MAD_LEN, len(out) - 4]
        at = max(14, self.rng.choice(marks) + self.rng.randint(-3, 3))
        if at >= len(out):
            return False
        del out[at:]
        return True

    def _extend(self, out: bytearray) -> bool:
        out[-4:-4] = self.rng.randbytes(self.rng.choice((1, 2, 3, 4, 16, 28, 64, self.rng.randint(1, 512))))
        return True

    def _bitflip(self, out: bytearray) -> bool:
        for _ in range(self.rng.randint(1, 4)):
            at = self.rng.randrange(12, len(out))  # the destination MAC stays: the frame must arrive
            out[at] ^= 1 << self.rng.randrange(8)
        return len(out) > 12

    def _mad(self, out: bytearray) -> bool:
        if not _is_mad(out):
            return False
        offset, width = self.rng.choice(
            ((0, 1), (1, 1), (2, 1), (3, 1), (4, 2), (6, 2), (8, 8), (16, 2), (18, 2), (20, 4))
        )
        value: int
        if offset == 1 and self.rng.random() < 0.7:
            value = self.rng.choice(list(layers.MgmtClass))
        elif offset == 16 and self.rng.random() < 0.7:
            value = self.rng.choice([*layers.CmAttr, *layers.VendorAttr, layers.ATTR_NOTICE])
        else:
            value = self._value(width)
        out[MAD_AT + offset : MAD_AT + offset + width] = value.to_bytes(width, "big")
        return True

    def _cm(self, out: bytearray) -> bool:
        message = cmwire.read(bytes(out[MAD_AT:])) if _is_mad(out) else None
        if message is None:
            return False
        name, (offset, size) = self.rng.choice(list(cmwire.FIELDS[message.attr].items()))
        at = MAD_AT + cmwire.BODY + offset
        if name == "private":  # our PrivateData: mode, N0, wrapped key, then SIDR's QPN, Q_Key, PSN
            offset, width = self.rng.choice(((1, 1), (4, 4), (16, 4), (40, 4), (80, 4), (84, 4), (88, 4)))
            width = min(width, size - offset)
            out[at + offset : at + offset + width] = self._value(width).to_bytes(width, "big")
        elif size > 8:
            out[at : at + size] = self.rng.randbytes(size)
        else:
            out[at : at + size] = self._value(size).to_bytes(size, "big")
        return True

    def _vendor(self, out: bytearray) -> bool:
        if not _is_mad(out) or out[MAD_AT + 1] != layers.MgmtClass.IBSEC_VENDOR:
            return False
        attr = int.from_bytes(out[MAD_AT + 16 : MAD_AT + 18], "big")
        offset, size = self.rng.choice(VENDOR_FIELDS.get(attr, ((0, 8), (8, 64))))
        at = MAD_AT + layers.MAD_HEADER_LEN + offset
        value = self.rng.randbytes(size) if size > 8 else self._value(size).to_bytes(size, "big")
        out[at : at + size] = value
        return True

    def _trailer(self, out: bytearray) -> bool:
        if not _is_mad(out):
            return False
        end = MAD_AT + layers.MAD_LEN
        choice = self.rng.randrange(4)
        if choice == 0:
            del out[end:-4]  # no trailer
        elif choice == 1:
            out[end:-4] = self.rng.randbytes(TRAILER)  # a random one
        elif choice == 2 and len(out) > end + 4:
            out[self.rng.randrange(end, len(out) - 4)] ^= 1 << self.rng.randrange(8)
        else:
            out[end:-4] = self.rng.randbytes(self.rng.randrange(TRAILER))  # a short one
        return True

    def _splice(self, out: bytearray) -> bool:
        other = self.rng.choice(self.corpus)
        cut = self.rng.randrange(BTH, max(BTH + 1, min(len(out), len(other)) - 4))
        out[cut:] = other[cut:]
        return True

    def _random(self) -> bytes:
        header = self.corpus[0][rocev2.DST_MAC_AT] + self._src_mac()
        if self.rng.random() < 0.5:
            return header + self.rng.randbytes(self.rng.randint(2, 300))
        return bytes(self.corpus[0][:BTH]) + self.rng.randbytes(self.rng.randint(0, 300))

    # ---- values and repairs

    def _value(self, width: int) -> int:
        roll = self.rng.random()
        known = self.known.values.get(width)
        if roll < 0.35 and known:
            return self.rng.choice(sorted(known)) + self.rng.choice((0, 0, 0, 1, -1)) & ((1 << 8 * width) - 1)
        if roll < 0.7:
            return self.rng.choice(BOUNDARIES.get(width, (0, (1 << 8 * width) - 1)))
        return self.rng.getrandbits(8 * width)

    def _src_mac(self) -> bytes:
        return self.rng.choice(self.src_macs) if self.src_macs else bytes(6)

    def _flipped(self, base: bytes) -> bytearray:
        out = bytearray(base)
        self._bitflip(out)
        return out

    def _repaired(self, name: str, out: bytearray) -> bytes:
        """Fix what an outer check would refuse first (each with some chance, so the checks are fuzzed
        too): the Ethernet source, the MAD trailer, the IPv6 and UDP lengths, the ICRC."""
        if self.src_macs:
            out[rocev2.SRC_MAC_AT] = self._src_mac()
        frame = bytes(out)
        sealed_mad = len(frame) == MAD_AT + layers.MAD_LEN + TRAILER + rocev2.ICRC_LEN
        if name != "trailer" and sealed_mad and self.rng.random() < 0.8:
            frame = self.reseal(frame) or frame
        out = bytearray(frame)
        if name != "lengths" and self.rng.random() < 0.85 and len(out) >= BTH:
            size = (len(out) - IP - rocev2.IPV6_LEN) & 0xFFFF
            out[IP + 4 : IP + 6] = out[IP + 44 : IP + 46] = size.to_bytes(2, "big")
        frame = bytes(out)
        if self.rng.random() < 0.85:
            try:
                frame = icrc.with_icrc(frame)
            except rocev2.WireError:
                pass
        return frame

    def _extensions(self, out: bytearray) -> list[tuple[int, int]]:
        """(offset, length) of the extension headers the frame's opcode calls for, as far as it has bytes."""
        try:
            op = opcodes.lookup(out[BTH])
        except (opcodes.UnknownOpcode, IndexError):
            return []
        found, offset = [], BTH + opcodes.BTH_LEN
        for ext in op.headers:
            if offset + ext.length <= len(out):
                found.append((offset, ext.length))
            offset += ext.length
        return found


def kind(frame: bytes) -> str:
    """What a frame is, for choosing among kinds evenly: the opcode and mode, or the MAD's class and
    attribute (``CM:0x0010``)."""
    view = _view(frame)
    if view is None:
        return "other"
    if _is_mad(bytearray(frame)):
        return (
            f"{layers.MgmtClass(frame[MAD_AT + 1]).name if frame[MAD_AT + 1] in _CLASSES else 'MAD'}:"
            f"{int.from_bytes(frame[MAD_AT + 16 : MAD_AT + 18], 'big'):#06x}"
        )
    return f"{view.opcode_name}/{view.mode}"


_CLASSES = frozenset(int(c) for c in layers.MgmtClass)


def family(kind: str) -> str:
    """The family of a :func:`kind`: CM, vendor or other MADs, RC requests, ACKs, UD, other opcodes."""
    for prefix, name in (
        ("CM:", "cm"),
        ("IBSEC_VENDOR:", "vendor"),
        ("RC_ACKNOWLEDGE", "ack"),
        ("RC_", "rc"),
        ("UD_", "ud"),
    ):
        if kind.startswith(prefix):
            return name
    return "mad" if ":" in kind else "other"


def _view(frame: bytes) -> View | None:
    try:
        return parse(frame)
    except ValueError:
        return None


def _is_mad(out: bytearray) -> bool:
    """A UD SEND to QP1 long enough to hold a MAD."""
    return len(out) >= MAD_AT + layers.MAD_LEN and out[BTH] == 0x64 and out[BTH + 5 : BTH + 8] == b"\0\0\1"
