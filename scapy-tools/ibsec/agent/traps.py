"""Traps from the agent to the SM: 257 (bad P_Key), 258 (bad Q_Key) and the security trap.

A flood of bad packets must not become a flood of traps: one trap per suppression window per
(source, key) pair goes out, the others are counted as suppressed. The SM needs no more: it installs the
filter on the first trap, and a later trap, if the attack lasts past the window, says it still goes on.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable


class RateLimiter:
    """Allows one event per ``window`` seconds per key, and at most ``burst`` events per second overall.

    The per-key window is the suppression the SM expects; the overall budget keeps a flood that varies
    its keys (every frame a new P_Key) from making the agent build and send a trap per frame. Remembers
    at most ``max_keys`` keys.
    """

    def __init__(
        self,
        window: float,
        burst: int = 20,
        max_keys: int = 4096,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.window = window
        self.burst = burst
        self.max_keys = max_keys
        self._clock = clock
        self._last: dict[Hashable, float] = {}
        self._second = (0.0, 0)  # (start of the current one-second budget, events in it)
        self._lock = threading.Lock()

    def allow(self, key: Hashable) -> bool:
        """True if ``key`` had no event within the window and the overall budget has room (records it)."""
        now = self._clock()
        with self._lock:
            last = self._last.get(key)
            if last is not None and now - last < self.window:
                return False
            start, used = self._second
            if now - start >= 1.0:
                start, used = now, 0
            if used >= self.burst:
                return False
            self._second = (start, used + 1)
            if len(self._last) >= self.max_keys:
                self._expire(now)
            self._last[key] = now
            return True

    def _expire(self, now: float) -> None:
        """Forget keys whose window passed; if all are recent, forget the oldest half (bounded memory)."""
        for key in [k for k, t in self._last.items() if now - t >= self.window]:
            del self._last[key]
        if len(self._last) >= self.max_keys:
            for key in sorted(self._last, key=self._last.__getitem__)[: self.max_keys // 2]:
                del self._last[key]


class FailureStreak:
    """Consecutive MAC failures per QP: reports when a QP's streak reaches the threshold (then every
    further ``threshold`` failures), and when it reaches the hard limit at which the key is retired."""

    def __init__(self, threshold: int, retire_after: int) -> None:
        self.threshold = threshold
        self.retire_after = retire_after
        self._streak: dict[int, int] = {}
        self._lock = threading.Lock()

    def failure(self, qpn: int) -> tuple[int, bool, bool]:
        """Record one failure on ``qpn``: (streak, trap now, retire the key now)."""
        with self._lock:
            streak = self._streak.get(qpn, 0) + 1
            self._streak[qpn] = streak
        return streak, streak % self.threshold == 0, streak == self.retire_after

    def success(self, qpn: int) -> None:
        """A good packet ends the streak."""
        with self._lock:
            self._streak.pop(qpn, None)

    def streak(self, qpn: int) -> int:
        with self._lock:
            return self._streak.get(qpn, 0)
