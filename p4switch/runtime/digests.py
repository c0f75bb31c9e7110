"""Digests (P4Runtime DigestEntry and the DigestList stream messages), as the specification's DigestEntry
section describes: per digest a buffer of distinct messages sent when it holds ``max_list_size`` of them
or its oldest is ``max_timeout_ns`` old, and a cache of sent-but-unacknowledged messages (dropped on
DigestListAck or after ``ack_timeout_ns``) so the same learned data is not sent again while the
controller handles it. ``DigestEntries`` is the entity handler that configures them."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from finsy.proto import p4d, p4r

from p4switch.engine import api as engine
from p4switch.runtime.codec import encode_uint
from p4switch.runtime.entity import EntityHandler, Pipeline, Update
from p4switch.runtime.errors import already_exists, invalid, not_found
from p4switch.runtime.p4info import Digest, P4InfoIndex

Values = tuple[int, ...]


@dataclass
class _DigestState:
    info: Digest
    config: p4r.DigestEntry.Config
    buffer: list[Values] = field(default_factory=list)
    first_enqueued: float = 0.0
    next_list_id: int = 1
    cache: dict[int, tuple[float, set[Values]]] = field(default_factory=dict)
    """list id -> (sent at, messages of that list)"""

    def cached(self, values: Values) -> bool:
        return any(values in msgs for _, msgs in self.cache.values())

    def expire(self, now: float) -> float | None:
        """Drop the lists sent ack_timeout_ns ago or more; returns when the next one expires."""
        timeout = self.config.ack_timeout_ns / 1e9
        for list_id, (sent, _) in list(self.cache.items()):
            if sent + timeout <= now:
                del self.cache[list_id]
        return min((sent + timeout for sent, _ in self.cache.values()), default=None)


class DigestEngine:
    """Buffers data-plane digests and hands finished DigestList messages to ``send``."""

    def __init__(self, send: Callable[[p4r.DigestList], None], log: logging.Logger,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._send = send
        self._log = log
        self.clock = clock
        """where buffer ages and ack timeouts are read (tests set one they advance by hand)"""
        self._states: dict[int, _DigestState] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stopped = False
        self.dropped = 0
        self._thread = threading.Thread(target=self._timer_loop, name="digest-timer", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------------- configuration
    def write(self, update_type: int, info: Digest, config: p4r.DigestEntry.Config) -> None:
        with self._lock:
            exists = info.id in self._states
            if update_type == p4r.Update.INSERT:
                if exists:
                    raise already_exists(f"digest {info.name} already configured")
                self._states[info.id] = _DigestState(info, config)
            elif not exists:
                raise not_found(f"digest {info.name} is not configured")
            elif update_type == p4r.Update.MODIFY:
                self._states[info.id].config = config
            else:
                del self._states[info.id]
        self._wake.set()

    def read(self, digest_id: int) -> list[p4r.DigestEntry]:
        with self._lock:
            return [p4r.DigestEntry(digest_id=s.info.id, config=s.config)
                    for s in self._states.values() if digest_id in (0, s.info.id)]

    def reset(self) -> None:
        """A new pipeline: every digest configuration and cache goes."""
        with self._lock:
            self._states.clear()

    # ------------------------------------------------------------------------- data plane
    def push(self, info: Digest, values: Values) -> None:
        """One digest from the data plane (called from the packet thread)."""
        with self._lock:
            state = self._states.get(info.id)
            if state is not None:
                state.expire(self.clock())
            if state is None or state.cached(values) or values in state.buffer:
                self.dropped += 1
                return
            if not state.buffer:
                state.first_enqueued = self.clock()
            state.buffer.append(values)
            limit = state.config.max_list_size
            if state.config.max_timeout_ns == 0 or (limit and len(state.buffer) >= limit):
                self._flush(state)
            else:
                self._wake.set()

    def ack(self, ack: p4r.DigestListAck) -> None:
        with self._lock:
            state = self._states.get(ack.digest_id)
            if state is None:
                raise invalid(f"ack for unknown or unconfigured digest id {ack.digest_id:#x}")
            state.cache.pop(ack.list_id, None)

    def _flush(self, state: _DigestState) -> None:
        """Send the buffer as one DigestList (lock held)."""
        list_id = state.next_list_id
        state.next_list_id += 1
        msg = p4r.DigestList(digest_id=state.info.id, list_id=list_id, timestamp=time.time_ns())
        for values in state.buffer:
            msg.data.append(_p4data(state.info, values))
        if state.config.ack_timeout_ns:
            state.cache[list_id] = (self.clock(), set(state.buffer))
        state.buffer = []
        self._send(msg)
        self._wake.set()  # the timer thread learns the new cache deadline

    # ------------------------------------------------------------------------- timeouts
    def _timer_loop(self) -> None:
        while not self._stopped:
            timeout = self._expire()
            self._wake.wait(timeout)
            self._wake.clear()

    def _expire(self) -> float | None:
        """Flush timed-out buffers and drop expired cache lists; returns seconds to the next deadline."""
        now = self.clock()
        deadlines: list[float] = []
        with self._lock:
            for state in self._states.values():
                if state.buffer:
                    due = state.first_enqueued + state.config.max_timeout_ns / 1e9
                    if due <= now:
                        self._flush(state)
                    else:
                        deadlines.append(due)
                next_expiry = state.expire(now)
                if next_expiry is not None:
                    deadlines.append(next_expiry)
        return max(0.0, min(deadlines) - now) if deadlines else None

    def stop(self) -> None:
        self._stopped = True
        self._wake.set()
        self._thread.join(timeout=2)


class DigestEntries(EntityHandler):
    """DigestEntry writes and reads: the configuration of each digest of the program."""

    kind = "digest_entry"

    def __init__(self, digests: DigestEngine) -> None:
        self.digests = digests

    def reset(self) -> None:
        self.digests.reset()

    def write(self, pipe: Pipeline, update_type: int, msg: p4r.DigestEntry) -> None:
        info = pipe.index.digest(msg.digest_id)
        if update_type != Update.DELETE and not msg.HasField("config"):
            raise invalid(f"digest {info.name}: config is required")
        self.digests.write(update_type, info, msg.config)

    def read(self, pipe: Pipeline, msg: p4r.DigestEntry) -> Iterator[p4r.Entity]:
        if msg.digest_id:
            pipe.index.digest(msg.digest_id)
        for entry in self.digests.read(msg.digest_id):
            yield p4r.Entity(digest_entry=entry)

    def sink(self, index: P4InfoIndex) -> engine.DigestSink:
        """Where the engine hands the digests of the program whose P4Info is ``index``."""
        def sink(name: str, fields: list[tuple[str, int]]) -> None:
            digest_id = index.digest_ids.get(name)
            if digest_id is not None:
                self.digests.push(index.digests[digest_id], tuple(v for _, v in fields))
        return sink


def _p4data(info: Digest, values: Values) -> p4d.P4Data:
    if not info.is_struct:
        return p4d.P4Data(bitstring=encode_uint(values[0]))
    members = [p4d.P4Data(bitstring=encode_uint(v)) for v in values]
    return p4d.P4Data(struct=p4d.P4StructLike(members=members))
