"""Registered memory regions: protection domains, R_Key and bounds checks, sRDMA's extended protection.

A region belongs to one protection domain (PD), as in IBA: its R_Key is valid only on QPs of that PD, so a
connection of another partition (or of another application's PD) writes nothing with an R_Key it sniffed.
A region registered for authenticated access takes only writes whose MAC covers address and data (modes
1-3): a keyless mode-0 connection, or a mode-4 one (headers only), of its own PD is refused too.

A region is a bytearray at a virtual address the agent draws at random (page-aligned in a 47-bit space),
reachable by RDMA WRITE with its R_Key (32 random bits).
A region registered with extended memory protection (seed 002 section 4.6) additionally has a memory key
K_MR = PRF_K_PD(start || end || R_Key) at the root of a binary one-way function tree (``ibsec.keys``):
a write is accepted only when its MAC was computed under a key bound to the region's key or to one of its
sub-regions' keys (see :func:`proof_key`), so a captured R_Key alone writes nothing, and a host holding a
delegated sub-region key writes that sub-region and nothing else, without the target being asked.
"""

from __future__ import annotations

import enum
import os
import secrets
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

from ibsec import keys
from ibsec.names import Mode

MAX_REGION = 1 << 30  # bytes of one region at most
PAGE = 1 << 12
ADDRESS_SPACE = (1 << 32, 1 << 47)  # where regions are placed: a user-space-like 47-bit range, above 4 GiB


class RegionError(Exception):
    """A registration the agent refuses (bad size, depth out of range)."""


class Access(enum.Enum):
    """Which writes a region takes (from QPs of its protection domain)."""

    ANY = "any"  # any mode, mode 0 included: the R_Key and the PD are all that is checked
    AUTHENTICATED = "authenticated"  # modes whose MAC covers the RETH and the data (1-3: AUTHENTICATED_MODES)


AUTHENTICATED_MODES = frozenset(m for m in Mode if m.authenticates_payload)


@dataclass
class Region:
    """One registered region; ``tree`` and ``key`` are set when extended memory protection is on."""

    addr: int
    r_key: int
    buffer: bytearray
    pd: int = 0
    access: Access = Access.ANY
    tree: keys.MemoryRegion | None = None
    key: keys.Key | None = field(default=None, repr=False)

    @property
    def length(self) -> int:
        return len(self.buffer)

    def admits(self, pd: int, mode: int) -> bool | None:
        """May a QP of ``pd`` in security ``mode`` write here? None: the PD is not the region's."""
        if pd != self.pd:
            return None
        return self.access is Access.ANY or mode in AUTHENTICATED_MODES

    def contains(self, va: int, length: int) -> bool:
        """Is [va, va + length) inside the region (a zero-length write at its end included)?"""
        return self.addr <= va and va + length <= self.addr + self.length and length >= 0

    def write(self, va: int, data: bytes) -> None:
        """Copy ``data`` to ``va``; the caller checked :meth:`contains`."""
        offset = va - self.addr
        self.buffer[offset : offset + len(data)] = data

    def read(self, va: int, length: int) -> bytes:
        offset = va - self.addr
        return bytes(self.buffer[offset : offset + length])

    def candidate_nodes(self, va: int, length: int) -> Iterator[tuple[int, int]]:
        """Tree nodes (start, length) that contain the write, from the whole region down to the depth limit.

        Exactly one node per level contains a given range, so a receiver needs at most depth + 1 tries.
        """
        assert self.tree is not None
        for depth in range(self.tree.max_depth + 1):
            node_len = self.length >> depth
            node_start = self.addr + (va - self.addr) // node_len * node_len
            if va + length > node_start + node_len:
                return
            yield node_start, node_len


def proof_key(connection_key: bytes, memory_key: bytes) -> bytes:
    """The key a write to an extended-protection region is sealed under: PRF_K(A,B)(K_SR).

    sRDMA overwrites the header MAC with MAC_K(A,B)(K_SR || mac_hdr); we get the same property (the MAC
    proves both the connection key and the memory key, and reuses the packet's nonce) by sealing the packet
    under a key derived from both, so the ordinary transport seal/open does all the work.
    """
    proof = keys.prf(connection_key, b"ibsec ext-mem" + memory_key)
    return proof if len(connection_key) == len(proof) else proof + keys.prf(connection_key, proof)


class MemoryTable:
    """The agent's regions by R_Key, and its protection-domain key K_PD for memory keys."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._regions: dict[int, Region] = {}
        self._pd_key = keys.Key.generate(keys.KeyType.MEMORY, ())

    def register(
        self, length: int, pd: int, access: Access = Access.ANY, ext_depth: int | None = None
    ) -> Region:
        """A new zeroed region of ``length`` bytes in protection domain ``pd``; ``ext_depth`` turns on
        extended memory protection.

        Extended protection needs a power-of-two length (the tree halves it per level); ``ext_depth`` is
        the delegation depth limit (0: only the whole region's key).
        """
        if not 0 < length <= MAX_REGION:
            raise RegionError(f"region length must be 1 .. 2^30 bytes, got {length}")
        with self._lock:
            addr = self._fresh_address(length)
            r_key = self._fresh_rkey()
            region = Region(addr, r_key, bytearray(length), pd, access)
            if ext_depth is not None:
                try:
                    region.tree = keys.MemoryRegion(addr, length, r_key, ext_depth)
                except keys.MemoryKeyError as exc:
                    raise RegionError(str(exc)) from None
                region.key = keys.memory_region_key(self._pd_key, region.tree)
            self._regions[r_key] = region
            return region

    def _fresh_address(self, length: int) -> int:
        """A page-aligned start drawn at random (ReDMArk guessed addresses that sat at a fixed base plus a
        slot) where [start, start + length) overlaps no region."""
        low, high = ADDRESS_SPACE
        while True:
            addr = low + secrets.randbelow((high - low - length) // PAGE) * PAGE
            if not any(r.addr < addr + length and addr < r.addr + r.length for r in self._regions.values()):
                return addr

    def _fresh_rkey(self) -> int:
        while True:
            r_key = int.from_bytes(os.urandom(4), "big")
            if r_key and r_key not in self._regions:
                return r_key

    def lookup(self, r_key: int) -> Region | None:
        with self._lock:
            return self._regions.get(r_key)

    def deregister(self, r_key: int) -> bool:
        with self._lock:
            return self._regions.pop(r_key, None) is not None

    def delegate(self, r_key: int, start: int, length: int) -> keys.Key:
        """The key of sub-region [start, start + length) of an extended-protection region (for delegation)."""
        region = self.lookup(r_key)
        if region is None or region.tree is None or region.key is None:
            raise RegionError(f"no region with extended memory protection has R_Key {r_key:#x}")
        try:
            return keys.derive_subregion_key(region.key, region.tree, start, length)
        except keys.MemoryKeyError as exc:
            raise RegionError(str(exc)) from None

    def describe(self) -> list[dict[str, int | bool | str]]:
        """What the control socket lists: address, length, R_Key, PD, protection; never the keys."""
        with self._lock:
            return [
                {
                    "addr": r.addr,
                    "length": r.length,
                    "rkey": r.r_key,
                    "pd": r.pd,
                    "access": r.access.value,
                    "ext_mem": r.tree is not None,
                    "ext_depth": r.tree.max_depth if r.tree else 0,
                }
                for r in self._regions.values()
            ]
