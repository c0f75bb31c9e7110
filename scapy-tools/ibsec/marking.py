"""Packet-marking codecs for the 38-bit marking field (DESIGN 2.1 and 2.2, seed 000 sec. 5.4).

Pure functions on the MF as an integer (``ibsec.addressing`` moves it in and out of a GID), so the data
plane's tests, the subnet manager and the traceback tools all agree on one arithmetic.

Port marking (fat trees)::

    MF = level(3 bits, [37:35]) | slot[L-1] ... slot[1] | slot[0]     one slot of ceil(log2 p) bits per level

Deterministic Distance Packet Marking (n-D mesh and torus)::

    MF = (unused) | v[n-1] ... v[1] | v[0] | host port (h bits)      v[i]: w = floor((38-h)/n) bits, signed

and for the hypercube one (38-h)-bit XOR vector above the host port. The switch arithmetic is per field
and wraps modulo 2^w, exactly what a P4 switch computes with :meth:`DdpmLayout.port_entry`'s addend and
mask: ``mf' = (mf & ~mask) | ((mf + addend) & mask)``.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ibsec.addressing import MF_BITS, MF_MAX

LEVEL_BITS = 3
"""Width of the fat-tree level field, MF bits [37:35]."""
SLOT_AREA_BITS = MF_BITS - LEVEL_BITS
MAX_LEVELS = 1 << LEVEL_BITS
DEFAULT_HOST_BITS = 4

Coord = tuple[int, ...]


class TopologyTooLarge(ValueError):
    """The topology does not fit in the 38-bit MF; the message names the largest size that does."""


def _check_mf(mf: int) -> None:
    if not 0 <= mf <= MF_MAX:
        raise ValueError(f"MF {mf:#x} does not fit in {MF_BITS} bits")


@dataclass(frozen=True)
class PortEntry:
    """What the SM writes into a switch's port table for one port: the P4 arithmetic's operands.

    Fat-tree down-port: ``mf' = (mf & ~mask) | addend``. DDPM mesh and torus egress port:
    ``mf' = (mf & ~mask) | ((mf + addend) & mask)``; hypercube: ``mf' = mf ^ addend`` (``mask`` equals
    ``addend`` there).
    """

    addend: int
    mask: int


# --------------------------------------------------------------------------------------------------------
# Port marking (fat trees)
# --------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FatTreeLayout:
    """Port marking on a fat tree of ``levels`` switch levels whose switches have up to ``ports`` down-ports.

    Level 0 is the leaf (host-facing) level. A host's address is its digit string from the top level down
    to its leaf (seed 000 Fig. 5: node 6 = (00, 01, 10)).
    """

    ports: int
    levels: int

    def __post_init__(self) -> None:
        if self.ports < 2 or self.levels < 1:
            raise ValueError(f"a fat tree needs >= 2 ports and >= 1 level, got {self.ports}, {self.levels}")
        if self.levels > self.max_levels:
            raise TopologyTooLarge(
                f"a {self.levels}-level fat tree of {self.ports}-port switches needs "
                f"{self.levels * self.slot_bits} slot bits and the MF has {SLOT_AREA_BITS} "
                f"(3 bits hold the level): the largest that fits has {self.max_levels} levels "
                f"({self.ports}^{self.max_levels} = {self.ports ** self.max_levels} hosts)")

    @property
    def slot_bits(self) -> int:
        """ceil(log2 p): bits of one level's digit."""
        return (self.ports - 1).bit_length()

    @property
    def max_levels(self) -> int:
        """Most levels whose slots fit beside the level field (at most 8, the level field's range)."""
        return min(MAX_LEVELS, SLOT_AREA_BITS // self.slot_bits)

    def _check_level_digit(self, level: int, digit: int) -> None:
        if not 0 <= level < self.levels:
            raise ValueError(f"level {level} outside 0..{self.levels - 1}")
        if not 0 <= digit < self.ports:
            raise ValueError(f"digit {digit} outside 0..{self.ports - 1}")

    def mark(self, mf: int, level: int, digit: int) -> int:
        """What a level-``level`` switch does to a packet received on down-port ``digit``."""
        _check_mf(mf)
        self._check_level_digit(level, digit)
        shift = level * self.slot_bits
        slot_mask = ((1 << self.slot_bits) - 1) << shift
        mf = (mf & ~slot_mask) | (digit << shift)
        return (mf & ((1 << SLOT_AREA_BITS) - 1)) | (level << SLOT_AREA_BITS)

    def down_port_entry(self, level: int, digit: int) -> PortEntry:
        """P4 operands of a level-``level`` down-port with ``digit``: ``mf' = (mf & ~mask) | addend``.

        The mask covers the level's slot and the level field (the ``mark_down_port`` action's operands).
        """
        self._check_level_digit(level, digit)
        slot = ((1 << self.slot_bits) - 1) << (level * self.slot_bits)
        level_field = (MAX_LEVELS - 1) << SLOT_AREA_BITS
        return PortEntry(addend=self.mark(0, level, digit), mask=slot | level_field)

    @staticmethod
    def apply(mf: int, entry: PortEntry) -> int:
        """The switch's arithmetic with a :meth:`down_port_entry` (what the P4 program computes)."""
        _check_mf(mf)
        return (mf & ~entry.mask) | entry.addend

    def encode(self, marks: Iterable[tuple[int, int]]) -> int:
        """The MF after a path of (level, digit) marks, starting from the leaf's cleared MF."""
        mf = 0
        for level, digit in marks:
            mf = self.mark(mf, level, digit)
        return mf

    def marks_of(self, source: Sequence[int], turn_level: int) -> list[tuple[int, int]]:
        """The marks a packet from ``source`` (digits, top first) collects going up to ``turn_level``."""
        self._check_address(source)
        return [(level, self.digit(source, level)) for level in range(turn_level + 1)]

    def digit(self, address: Sequence[int], level: int) -> int:
        """The digit of ``address`` (top first) that level ``level`` sees."""
        return address[self.levels - 1 - level]

    def highest_level(self, mf: int) -> int:
        """Bits [37:35]: the highest level that marked the packet."""
        _check_mf(mf)
        return mf >> SLOT_AREA_BITS

    def decode(self, mf: int, destination: Sequence[int]) -> tuple[int, ...]:
        """The source's digit string (top first) from the MF and the receiver's own digit string.

        Levels up to the highest marked one come from the slots; above it the packet turned around, so
        the source shares the destination's digits there.
        """
        self._check_address(destination)
        top = self.highest_level(mf)
        if top >= self.levels:
            raise ValueError(f"MF level field {top} is beyond this {self.levels}-level tree")
        slot_mask = (1 << self.slot_bits) - 1
        digits = []
        for level in range(self.levels - 1, -1, -1):
            if level > top:
                digits.append(self.digit(destination, level))
            else:
                digits.append((mf >> (level * self.slot_bits)) & slot_mask)
        return tuple(digits)

    def _check_address(self, address: Sequence[int]) -> None:
        if len(address) != self.levels or not all(0 <= d < self.ports for d in address):
            raise ValueError(f"address {tuple(address)} is not {self.levels} digits in 0..{self.ports - 1}")


# --------------------------------------------------------------------------------------------------------
# Deterministic Distance Packet Marking (mesh, torus, hypercube)
# --------------------------------------------------------------------------------------------------------


class Kind(enum.Enum):
    """Regular topologies DDPM marks."""

    MESH = "mesh"
    TORUS = "torus"
    HYPERCUBE = "hypercube"


@dataclass(frozen=True)
class DdpmLayout:
    """DDPM for a ``kind`` topology with ``sizes[i]`` switches along dimension i.

    A hypercube of dimension n is ``DdpmLayout(Kind.HYPERCUBE, (2,) * n)``. ``host_bits`` (default 4, 0
    allowed) is the low sub-field holding the port index of the source host on its first switch.
    """

    kind: Kind
    sizes: tuple[int, ...]
    host_bits: int = DEFAULT_HOST_BITS

    def __post_init__(self) -> None:
        if not 0 <= self.host_bits < MF_BITS:
            raise ValueError(f"host_bits must be in 0..{MF_BITS - 1}, got {self.host_bits}")
        if not self.sizes or any(k < 2 for k in self.sizes):
            raise ValueError(f"every dimension needs >= 2 switches, got {self.sizes}")
        if self.kind is Kind.HYPERCUBE and any(k != 2 for k in self.sizes):
            raise ValueError(f"a hypercube has 2 switches per dimension, got {self.sizes}")
        self._check_fit()

    @property
    def vector_bits(self) -> int:
        """38 - h: the bits above the host port sub-field."""
        return MF_BITS - self.host_bits

    @property
    def width(self) -> int:
        """w: bits per dimension (1 for the hypercube's XOR vector)."""
        if self.kind is Kind.HYPERCUBE:
            return 1
        return self.vector_bits // len(self.sizes)

    @property
    def max_size(self) -> int:
        """Largest switches per dimension that fit: 2^(w-1) for signed fields (Table 3), 2 for a hypercube."""
        return 2 if self.kind is Kind.HYPERCUBE else 1 << (self.width - 1)

    def _check_fit(self) -> None:
        n = len(self.sizes)
        where = f"in {MF_BITS} bits with a {self.host_bits}-bit host port field"
        if self.kind is Kind.HYPERCUBE:
            if n > self.vector_bits:
                raise TopologyTooLarge(f"a {n}-cube does not fit {where}: the largest is a "
                                       f"{self.vector_bits}-cube (2^{self.vector_bits} switches)")
            return
        if self.width < 2 or max(self.sizes) > self.max_size:
            largest = "none" if self.width < 2 else f"{self.max_size} per dimension"
            raise TopologyTooLarge(
                f"a {n}-D {self.kind.value} of {'x'.join(map(str, self.sizes))} does not fit {where}: "
                f"{self.width}-bit signed fields, the largest {n}-D {self.kind.value} is {largest}")

    # ---- encoding of the vector -------------------------------------------------------------------------

    def _shift(self, dim: int) -> int:
        return self.host_bits + dim * self.width

    def pack(self, vector: Sequence[int], host_port: int = 0) -> int:
        """The MF holding ``vector`` (signed components, or 0/1 bits for a hypercube) and ``host_port``."""
        self._check_coord_len(vector)
        if not 0 <= host_port < (1 << self.host_bits):
            raise ValueError(f"host port {host_port} does not fit in {self.host_bits} bits")
        field = (1 << self.width) - 1
        mf = host_port
        for dim, value in enumerate(vector):
            if self.kind is Kind.HYPERCUBE and value not in (0, 1):
                raise ValueError(f"hypercube vector components are bits, got {value}")
            lo, hi = -(1 << (self.width - 1)), (1 << (self.width - 1)) - 1
            if self.kind is not Kind.HYPERCUBE and not lo <= value <= hi:
                raise ValueError(f"component {value} does not fit a {self.width}-bit signed field")
            mf |= (value & field) << self._shift(dim)
        return mf

    def unpack(self, mf: int) -> tuple[Coord, int]:
        """(vector, host port) of an MF; mesh and torus components are read as signed."""
        _check_mf(mf)
        field = (1 << self.width) - 1
        vector = []
        for dim in range(len(self.sizes)):
            raw = (mf >> self._shift(dim)) & field
            if self.kind is not Kind.HYPERCUBE and raw >> (self.width - 1):
                raw -= 1 << self.width
            vector.append(raw)
        return tuple(vector), mf & ((1 << self.host_bits) - 1)

    # ---- what switches do -------------------------------------------------------------------------------

    def init(self, host_port: int) -> int:
        """The MF the first switch writes for a packet from the host on its port ``host_port``."""
        return self.pack((0,) * len(self.sizes), host_port)

    def delta(self, here: Coord, neighbour: Coord) -> Coord:
        """Y - X for the link from switch ``here`` to ``neighbour``: the vector the SM puts in the table.

        Neighbours differ by one step in one dimension; a torus wrap link counts as a +-1 step and a
        hypercube link flips one bit.
        """
        self._check_coord(here)
        self._check_coord(neighbour)
        diffs = [(dim, y - x) for dim, (x, y) in enumerate(zip(here, neighbour, strict=True)) if x != y]
        if len(diffs) != 1:
            raise ValueError(f"{here} and {neighbour} are not neighbours")
        dim, diff = diffs[0]
        step = diff
        if self.kind is Kind.TORUS and abs(diff) == self.sizes[dim] - 1 and self.sizes[dim] > 2:
            step = -1 if diff > 0 else 1  # the wrap link
        if abs(step) != 1:
            raise ValueError(f"{here} and {neighbour} are not neighbours")
        if self.kind is Kind.HYPERCUBE:
            step = 1
        return tuple(step if d == dim else 0 for d in range(len(self.sizes)))

    def step(self, mf: int, delta: Sequence[int]) -> int:
        """The MF after a switch adds ``delta`` (XORs it on a hypercube), per field modulo 2^w."""
        self._check_coord_len(delta)
        for dim, value in enumerate(delta):
            if value:
                mf = self.apply(mf, self.port_entry(dim, value))
        return mf

    def port_entry(self, dim: int, value: int) -> PortEntry:
        """The table operands that add ``value`` to dimension ``dim`` (the SM fills one per egress port)."""
        if not 0 <= dim < len(self.sizes):
            raise ValueError(f"dimension {dim} outside 0..{len(self.sizes) - 1}")
        shift = self._shift(dim)
        field = (1 << self.width) - 1
        if self.kind is Kind.HYPERCUBE:
            return PortEntry(addend=(value & 1) << shift, mask=(value & 1) << shift)
        return PortEntry(addend=(value & field) << shift, mask=field << shift)

    def apply(self, mf: int, entry: PortEntry) -> int:
        """The switch's arithmetic with one port entry (what the P4 program computes)."""
        _check_mf(mf)
        if self.kind is Kind.HYPERCUBE:
            return mf ^ entry.addend
        return (mf & ~entry.mask) | ((mf + entry.addend) & entry.mask)

    # ---- what the receiver does -------------------------------------------------------------------------

    def decode(self, destination: Coord, mf: int) -> tuple[Coord, int]:
        """(source switch coordinate, source host port) from the receiver's coordinate D and the MF.

        S = D - V (mesh), (D - V) mod k per dimension (torus), D xor V (hypercube).
        """
        self._check_coord(destination)
        vector, port = self.unpack(mf)
        if self.kind is Kind.HYPERCUBE:
            source = tuple(d ^ v for d, v in zip(destination, vector, strict=True))
        elif self.kind is Kind.TORUS:
            source = tuple((d - v) % k for d, v, k in zip(destination, vector, self.sizes, strict=True))
        else:
            source = tuple(d - v for d, v in zip(destination, vector, strict=True))
            if not all(0 <= s < k for s, k in zip(source, self.sizes, strict=True)):
                raise ValueError(f"MF {mf:#x} at {destination} points outside the mesh: {source}")
        return source, port

    def _check_coord_len(self, coord: Sequence[int]) -> None:
        if len(coord) != len(self.sizes):
            raise ValueError(f"expected {len(self.sizes)} components, got {tuple(coord)}")

    def _check_coord(self, coord: Coord) -> None:
        self._check_coord_len(coord)
        if not all(0 <= c < k for c, k in zip(coord, self.sizes, strict=True)):
            raise ValueError(f"coordinate {coord} outside {self.sizes}")


def largest_ddpm(kind: Kind, dimensions: int, host_bits: int = DEFAULT_HOST_BITS) -> tuple[int, ...]:
    """The largest topology of ``kind`` with ``dimensions`` dimensions that fits (Table 3 at host_bits=0)."""
    vector_bits = MF_BITS - host_bits
    if kind is Kind.HYPERCUBE:
        if dimensions > vector_bits:
            raise TopologyTooLarge(f"no {dimensions}-cube fits; the largest is a {vector_bits}-cube")
        return (2,) * dimensions
    width = vector_bits // dimensions
    if width < 2:
        raise TopologyTooLarge(f"no {dimensions}-D {kind.value} fits in {vector_bits} bits")
    return (1 << (width - 1),) * dimensions


def fat_tree_capacity(ports: int) -> int:
    """Hosts the largest fat tree of ``ports``-port switches that port marking can trace back holds."""
    return ports ** FatTreeLayout(ports, 1).max_levels


def walk(layout: DdpmLayout, path: Sequence[Coord], host_port: int) -> int:
    """The MF at the last switch of ``path`` (switch coordinates, source first), as the switches mark it."""
    if not path:
        raise ValueError("a path needs at least the first switch")
    mf = layout.init(host_port)
    for here, there in zip(path, path[1:], strict=False):
        mf = layout.step(mf, layout.delta(here, there))
    return mf


__all__ = [
    "Coord",
    "DEFAULT_HOST_BITS",
    "DdpmLayout",
    "FatTreeLayout",
    "Kind",
    "PortEntry",
    "TopologyTooLarge",
    "fat_tree_capacity",
    "largest_ddpm",
    "walk",
]
