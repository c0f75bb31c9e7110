"""Primary/backup arbitration between StreamChannel clients, as the P4Runtime specification's "Client
Arbitration" rules say: per (device, role) the client whose election id equals the highest id ever seen
is the primary; every client hears about primary changes through MasterArbitrationUpdate messages
(status OK for the primary, ALREADY_EXISTS for backups while a primary exists, NOT_FOUND when none)."""

from __future__ import annotations

import itertools
import logging
import queue
import threading
import time
from dataclasses import dataclass, field

import grpc
from finsy.proto import U128, p4r, rpc_code, rpc_status

from p4switch.runtime.errors import P4RuntimeError

# Bound on queued stream messages per client: beyond it PacketIn/DigestList messages are dropped (and
# counted) rather than let a slow client grow the server's memory. Arbitration messages always go.
MAX_QUEUED = 4096
CLOSE = object()
"""Queued to a connection to end its StreamChannel."""
DUPLICATE_GRACE = 2.0
"""Seconds a stream waits for another connection of its role holding its election id to end before it is
refused: a client that ends one stream and opens the next at once (p4lang/tutorials' PTF tests open one
per test) can arrive before the server has seen the first one end; on a loaded machine it did, and the
refused client waited for an answer until its test timed out."""


@dataclass(eq=False)
class Connection:
    """One StreamChannel: its arbitration state and the queue its responses are written from."""

    peer: str
    outbox: queue.Queue[object] = field(default_factory=queue.Queue)
    device_id: int | None = None
    role: str = ""
    role_config: p4r.Role | None = None
    election_id: int | None = None
    dropped: int = 0
    serial: int = field(default_factory=itertools.count(1).__next__)

    def send(self, msg: p4r.StreamMessageResponse, *, droppable: bool = False) -> bool:
        if droppable and self.outbox.qsize() >= MAX_QUEUED:
            self.dropped += 1
            return False
        self.outbox.put(msg)
        return True

    def close(self, error: P4RuntimeError | None = None) -> None:
        if error is not None:
            self.outbox.put(error)
        self.outbox.put(CLOSE)


@dataclass
class _RoleState:
    highest: int | None = None
    primary: Connection | None = None
    members: list[Connection] = field(default_factory=list)


class Arbitration:
    """The live connections of one device and who is primary for each role."""

    def __init__(self, device_id: int, log: logging.Logger) -> None:
        self.device_id = device_id
        self.log = log
        self._roles: dict[str, _RoleState] = {}
        self._lock = threading.Lock()
        self._left = threading.Condition(self._lock)  # notified when a connection is removed

    def update(self, conn: Connection, msg: p4r.MasterArbitrationUpdate) -> None:
        """Apply one MasterArbitrationUpdate; raises P4RuntimeError when the stream must end."""
        role = msg.role.name if msg.HasField("role") else ""
        election_id = U128.decode(msg.election_id) if msg.HasField("election_id") else None
        with self._lock:
            if msg.device_id != self.device_id:
                code = grpc.StatusCode.NOT_FOUND if conn.device_id is None else \
                    grpc.StatusCode.FAILED_PRECONDITION
                raise P4RuntimeError(code, f"unknown device id {msg.device_id}")
            if conn.device_id is not None and role != conn.role:
                raise P4RuntimeError(grpc.StatusCode.FAILED_PRECONDITION,
                                     "a stream cannot change its role: open a new stream")
            state = self._roles.setdefault(role, _RoleState())
            if election_id is not None:
                self._wait_for_holder_to_leave(state, conn, election_id)
            if conn.device_id is None:
                conn.device_id, conn.role = msg.device_id, role
                state.members.append(conn)
            conn.election_id = election_id
            conn.role_config = msg.role if msg.HasField("role") else None
            self._elect(state, conn)

    def _wait_for_holder_to_leave(self, state: _RoleState, conn: Connection, election_id: int) -> None:
        """Return once no other connection of the role holds ``election_id`` (waiting DUPLICATE_GRACE at
        most, lock released meanwhile); else the error the specification prescribes."""
        deadline = time.monotonic() + DUPLICATE_GRACE
        while any(c.election_id == election_id for c in state.members if c is not conn):
            left = deadline - time.monotonic()
            if left <= 0:
                raise P4RuntimeError(grpc.StatusCode.INVALID_ARGUMENT,
                                     "Election ID is already used by another connection with the same role")
            self._left.wait(left)

    def _elect(self, state: _RoleState, conn: Connection) -> None:
        was_primary = state.primary is conn
        eid = conn.election_id
        if eid is not None and (state.highest is None or eid >= state.highest):
            state.highest = eid
            state.primary = conn
            self.log.info("primary for role %r is now %s (election id %d)", conn.role, conn.peer, eid)
            self._notify(state, state.members)
        elif was_primary:
            state.primary = None
            self.log.info("primary %s of role %r stepped down", conn.peer, conn.role)
            self._notify(state, state.members)
        else:
            self._notify(state, [conn])

    def remove(self, conn: Connection) -> None:
        """The stream ended: forget it, and tell the others when it was the primary."""
        with self._lock:
            state = self._roles.get(conn.role)
            if state is None or conn not in state.members:
                return
            state.members.remove(conn)
            self._left.notify_all()
            if state.primary is conn:
                state.primary = None
                self.log.info("primary %s of role %r left", conn.peer, conn.role)
                self._notify(state, state.members)

    def _notify(self, state: _RoleState, targets: list[Connection]) -> None:
        for target in targets:
            update = p4r.MasterArbitrationUpdate(device_id=self.device_id)
            if target.role_config is not None:
                update.role.CopyFrom(target.role_config)
            if state.highest is not None:
                update.election_id.CopyFrom(U128.encode(state.highest))
            if state.primary is target:
                update.status.CopyFrom(rpc_status.Status(code=rpc_code.OK, message="primary"))
            elif state.primary is not None:
                update.status.CopyFrom(rpc_status.Status(
                    code=rpc_code.ALREADY_EXISTS, message="a primary is connected: this client is a backup"))
            else:
                update.status.CopyFrom(rpc_status.Status(code=rpc_code.NOT_FOUND, message="no primary"))
            target.send(p4r.StreamMessageResponse(arbitration=update))

    def check_primary(self, device_id: int, role: str, election: p4r.Uint128 | None) -> None:
        """Raise the error the spec prescribes unless (device, role, election id) is the primary."""
        if device_id != self.device_id:
            raise P4RuntimeError(grpc.StatusCode.NOT_FOUND, f"unknown device id {device_id}")
        with self._lock:
            state = self._roles.get(role)
            if state is None and role:
                raise P4RuntimeError(grpc.StatusCode.NOT_FOUND, f"unknown role {role!r}")
            primary = state.primary if state else None
            if primary is None or election is None or primary.election_id != U128.decode(election):
                raise P4RuntimeError(grpc.StatusCode.PERMISSION_DENIED,
                                     "not the primary client for this device and role")

    def is_primary(self, conn: Connection) -> bool:
        with self._lock:
            state = self._roles.get(conn.role)
            return state is not None and state.primary is conn

    def primaries(self) -> list[Connection]:
        """The primary of every role: they receive PacketIn and DigestList messages."""
        with self._lock:
            return [s.primary for s in self._roles.values() if s.primary is not None]

    def close_all(self) -> None:
        with self._lock:
            conns = [c for s in self._roles.values() for c in s.members]
        for conn in conns:
            conn.close()
