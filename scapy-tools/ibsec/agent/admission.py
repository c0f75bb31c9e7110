"""Which connection requests may take a QP: limits that keep a REQ flood from exhausting the QP table.

Anyone can send a CM REQ, and each accepted one takes a QP until its connection ends. ReDMArk filled a
victim's QPs that way; so did our own test (4,400 spoofed keyless REQs took all 4,096 QPs and a member of an
authenticated partition was refused). The limits, checked before a QP exists:

- a *half-open* connection (accepted, no RTU and no authentic packet yet) is reaped after a timeout;
- half-open connections per source (by GID and, separately, by the MAC the REQ came from, because GIDs are
  free to spoof) and per partition are bounded, counted apart for keyless and sealed requests, so a
  stranger's half-open connections never count against a member's;
- connections accepted for *keyless* requests (mode 0: no authentication possible) share at most
  ``keyless`` QPs, so a keyless flood, however spoofed, leaves the rest of the table to requests sealed
  under a partition's or a pair's key (:mod:`.cm`), which a stranger cannot make.

A request over a limit is refused (REJ) and counted ``cm_limit``.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass


class OverLimit(Exception):
    """A request over one of the limits; the message names which."""


@dataclass(frozen=True)
class Limits:
    """The admission limits (``AgentConfig`` carries them; ``ibsec-agent --half-open-timeout``)."""

    half_open_timeout: float = 10.0
    half_open_per_source: int = 32
    half_open_per_partition: int = 512
    keyless: int = 2048


@dataclass(frozen=True)
class Origin:
    """Where an accepted connection came from."""

    gid: str
    mac: bytes
    partition: int  # 15-bit P_Key number
    keyless: bool
    since: float

    def keys(self) -> tuple[tuple[object, ...], ...]:
        """What its half-open connection counts against."""
        return (("gid", self.keyless, self.gid), ("mac", self.keyless, self.mac),
                ("partition", self.keyless, self.partition))


class Admission:
    """Accepted connections by QPN until they are established (RTU or an authentic packet) or gone."""

    def __init__(self, limits: Limits, clock: Callable[[], float] = time.monotonic) -> None:
        self.limits = limits
        self._clock = clock
        self._half_open: dict[int, Origin] = {}
        self._counts: Counter[tuple[object, ...]] = Counter()
        self._keyless: set[int] = set()
        self._lock = threading.Lock()

    def check(self, gid: str, mac: bytes, pkey: int, keyless: bool) -> None:
        """Raise :class:`OverLimit` if a request from (``gid``, ``mac``) in ``pkey`` may not take a QP."""
        lim = self.limits
        with self._lock:
            by_gid = self._counts[("gid", keyless, gid)]
            by_mac = self._counts[("mac", keyless, mac)]
            in_partition = self._counts[("partition", keyless, pkey & 0x7FFF)]
            keyless_now = len(self._keyless)
        if keyless and keyless_now >= lim.keyless:
            raise OverLimit(f"{lim.keyless} connections of keyless requests already")
        if max(by_gid, by_mac) >= lim.half_open_per_source:
            raise OverLimit(f"{lim.half_open_per_source} half-open connections from this source already")
        if in_partition >= lim.half_open_per_partition:
            raise OverLimit(f"{lim.half_open_per_partition} half-open connections in {pkey:#06x} already")

    def accepted(self, qpn: int, gid: str, mac: bytes, pkey: int, keyless: bool) -> None:
        """A QP was created for an accepted request: half-open until :meth:`established`."""
        origin = Origin(gid, mac, pkey & 0x7FFF, keyless, self._clock())
        with self._lock:
            self._half_open[qpn] = origin
            self._counts.update(origin.keys())
            if keyless:
                self._keyless.add(qpn)

    def established(self, qpn: int) -> None:
        """The connection on ``qpn`` is established (it still counts against the keyless share)."""
        if qpn in self._half_open:
            with self._lock:
                self._settle(qpn)

    def forget(self, qpn: int) -> None:
        """``qpn`` was destroyed."""
        with self._lock:
            self._settle(qpn)
            self._keyless.discard(qpn)

    def _settle(self, qpn: int) -> None:
        """``qpn`` is no longer half-open (call with the lock held)."""
        origin = self._half_open.pop(qpn, None)
        if origin is not None:
            self._counts.subtract(origin.keys())
            for key in origin.keys():
                if self._counts[key] <= 0:
                    del self._counts[key]

    def expired(self) -> list[int]:
        """QPNs of half-open connections older than the timeout (the caller destroys them)."""
        cutoff = self._clock() - self.limits.half_open_timeout
        with self._lock:
            return [qpn for qpn, origin in self._half_open.items() if origin.since <= cutoff]

    def describe(self) -> dict[str, int]:
        """How many connections are half-open, and how many were accepted for keyless requests."""
        with self._lock:
            return {"half_open": len(self._half_open), "keyless": len(self._keyless)}
