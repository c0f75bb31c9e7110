"""The channel adapter: P_Key table, QPs, SEND and RDMA WRITE, ACKs and retransmission, security modes.

The adapter owns the port's tables (partitions, QPs, protection domains, keys) and the timer; the receive
path (:meth:`Adapter.receive`, the checks a real CA makes in its order) is :mod:`.receive`'s, the send path
(:meth:`Adapter.post_send`, :meth:`Adapter.post_write`, retransmission) :mod:`.send`'s.

Mode 0 makes no crypto call at all: frames carry the plain ICRC. Frames are built once per (QP, opcode,
size) with Scapy and only patched per packet (PSN, RETH, payload); see :mod:`.frames`.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ibsec import addressing, configfile, keys, transport
from ibsec.builder import Builder
from ibsec.skc import DEFAULT_PREFETCH_ENTRIES, SessionKeyCache

from . import frames
from .admission import Admission, Limits
from .cm import ConnectionManager
from .counters import Counters
from .keyring import Keyring
from .mads import ManagementAgent
from .memory import Access, MemoryTable, Region
from .qp import (
    QPN_MAX,
    RNR_INFINITE,
    AdapterError,
    Partition,
    QueuePair,
    Scope,
    Security,
    Service,
    State,
    UdPeer,
    pkey_matches,
)
from .receive import ReceivePath
from .send import SendPath
from .traps import FailureStreak, RateLimiter

log = logging.getLogger("ibsec.agent.adapter")

DEFAULT_PKEY = 0xFFFF
FIRST_QPN = 2  # QP0 and QP1 are the special QPs
MAX_QPS = 4096  # CM requests from anyone create QPs: the table must not grow without bound
MAX_UD_PEERS = 1024
APP_PD_BASE = 0x10000  # PDs an application allocates; 0x1..0x7FFF are the partitions' own
PD_MAX = 0xFFFF_FFFF


@dataclass(frozen=True)
class AgentConfig:
    """Everything an agent is started with (``ibsec-agent`` arguments)."""

    name: str
    mac: bytes
    subnet: int = 1
    lid: int = 1
    pkey_file: Path | None = None
    key_file: Path | None = None
    sm_gid: str | None = None
    trap_window: float = 10.0
    mac_failure_threshold: int = 16
    retire_after: int = 1 << 20
    ack_timeout: float = 0.05
    retries: int = 7
    rnr_retries: int = RNR_INFINITE  # RNR NAKs in a row a sender takes (IBA: 7 = for ever)
    min_rnr_timer: int = 20  # the RNR NAK timer code we send: 20 = 10.24 ms (IBA 9.7.5.2.8)
    skc_bytes: int = 16384
    skc_prefetch: int = DEFAULT_PREFETCH_ENTRIES  # prefetch buffer entries (0: no prefetching)
    mtu: int = 4096  # path MTU: payload bytes per packet (IBA: 256, 512, 1024, 2048 or 4096)
    limits: Limits = Limits()  # what connection requests may take a QP (admission)


def load_partitions(path: Path) -> list[Partition]:
    """P_Key table file: ``{"partitions": [{"pkey": "0x8001", "mode": 2, "scope": "session"}, ...]}``.

    A bad file is refused with :class:`ibsec.configfile.ConfigFileError`: ``file:line: field: why``."""
    document, text = configfile.load_file(path)
    try:
        entries = document["partitions"] if isinstance(document, dict) else None
        if not isinstance(entries, list):
            raise _TableError("partitions", "expected a list of P_Key table entries")
        return [_table_entry(entry, f"partitions[{i}]") for i, entry in enumerate(entries)]
    except _TableError as err:
        line = configfile.line_of(text, err.field) or 1
        raise configfile.ConfigFileError(f"{path}:{line}: {err}") from None


class _TableError(ValueError):
    def __init__(self, field: str, why: str) -> None:
        super().__init__(f"{field}: {why}")
        self.field = field


def _pkey_number(value: Any) -> int | None:
    """A P_Key given as a number or a "0x..." string: 16 bits, not partition 0 (IBA: invalid)."""
    try:
        number = int(value, 0) if isinstance(value, str) else value
    except ValueError:
        return None
    if isinstance(number, bool) or not isinstance(number, int) or not 0 <= number <= 0xFFFF:
        return None
    return number if number & 0x7FFF else None


def _table_entry(entry: Any, field: str) -> Partition:
    if not isinstance(entry, dict):
        raise _TableError(field, "expected an object with pkey, mode and scope")
    pkey = entry.get("pkey")
    number = _pkey_number(pkey)
    if number is None:
        raise _TableError(f"{field}.pkey", f"{pkey!r} is no P_Key: 16 bits, partition number 0x0001..0x7fff")
    mode = entry.get("mode", 0)
    if not isinstance(mode, int) or isinstance(mode, bool) or mode not in frames.MODES:
        raise _TableError(f"{field}.mode", f"{mode!r} is no security mode (0..{max(frames.MODES)})")
    scope = entry.get("scope", "partition")
    if scope not in {s.value for s in Scope}:
        raise _TableError(f"{field}.scope", f"{scope!r}: expected one of {', '.join(s.value for s in Scope)}")
    return Partition(number, mode, Scope(scope))


class Adapter:
    """One port's channel adapter; thread-safe (receive thread, timer thread, control threads)."""

    def __init__(self, config: AgentConfig, send: Callable[[bytes], None]) -> None:
        self.config = config
        self._send = send
        self.guid = addressing.mac_to_guid(config.mac.hex(":"))
        self.gid = addressing.make_gid(config.subnet, self.guid)
        self.gid_bytes = ipaddress.IPv6Address(self.gid).packed
        self.counters = Counters()
        self.memory = MemoryTable()
        self.keyring = Keyring(self.guid)
        self.skc = SessionKeyCache(capacity_bytes=config.skc_bytes, prefetch_entries=config.skc_prefetch)
        self._skc_lock = threading.Lock()
        self.partitions: dict[int, Partition] = {DEFAULT_PKEY: Partition(DEFAULT_PKEY)}
        self._app_pds: set[int] = set()
        self._accept_pd: dict[int, int] = {}  # partition number -> PD of connections accepted in it
        self.qps: dict[int, QueuePair] = {}
        self.lock = threading.RLock()  # the QP table's and the QPs' (the receive path takes it too)
        self.builder = Builder(config.mac, self.gid_bytes)
        self.trap_limiter = RateLimiter(config.trap_window)
        self.streaks = FailureStreak(config.mac_failure_threshold, config.retire_after)
        self.admission = Admission(config.limits)
        self.inject_drops = 0
        if config.pkey_file:
            self.set_partitions(load_partitions(config.pkey_file))
        if config.key_file:
            self.keyring.load(config.key_file)
        self.cm = ConnectionManager(self)
        self.mads = ManagementAgent(self)
        self.rx = ReceivePath(self)
        self.tx = SendPath(self)

    # ------------------------------------------------------------------ partitions and QPs

    def set_partitions(self, partitions: list[Partition]) -> None:
        """Replace the P_Key table (from the file or the SM's vendor MAD).

        The default partition (0xFFFF, full member, mode 0) always stays, as OpenSM keeps it in every
        port's table: management (CM, the SM's MADs, traps) travels in it.
        """
        if not any(p.number == DEFAULT_PKEY & 0x7FFF for p in partitions):
            partitions = [Partition(DEFAULT_PKEY), *partitions]
        with self.lock:
            self.partitions = {p.pkey: p for p in partitions}
        log.info(
            "P_Key table: %s", ", ".join(f"{p.pkey:#06x}/mode{p.mode}/{p.scope.value}" for p in partitions)
        )

    def partition(self, pkey: int) -> Partition | None:
        """The table entry a received packet's P_Key matches (IBA membership rules), if any."""
        with self.lock:
            exact = self.partitions.get(pkey)
            if exact is not None and pkey_matches(exact.pkey, pkey):
                return exact
            return next((p for p in self.partitions.values() if pkey_matches(p.pkey, pkey)), None)

    def own_partition(self, pkey: int) -> Partition | None:
        """This port's table entry for ``pkey``'s partition (what a local QP is created in)."""
        with self.lock:
            return next((p for p in self.partitions.values() if p.number == pkey & 0x7FFF), None)

    def create_qp(
        self,
        service: Service,
        pkey: int = DEFAULT_PKEY,
        mode: int | None = None,
        scope: Scope | None = None,
        qkey: int | None = None,
        pd: int | None = None,
    ) -> QueuePair:
        """A new QP in partition ``pkey``; mode and scope default to the partition's, the protection
        domain to the partition's own."""
        partition = self.own_partition(pkey)
        if partition is None:
            raise AdapterError(f"P_Key {pkey:#06x} is not in this port's P_Key table")
        pd = self.pd_for(pkey, pd)
        mode = partition.mode if mode is None else mode
        if mode not in frames.MODES:
            raise AdapterError(f"security mode {mode} is not one of {sorted(frames.MODES)}")
        with self.lock:
            if len(self.qps) >= MAX_QPS:
                raise AdapterError(f"no QP left ({MAX_QPS} in use at most)")
            qpn = self._fresh_qpn()
            qp = QueuePair(
                qpn,
                service,
                partition,
                mode,
                scope or partition.scope,
                qkey=(qkey if qkey is not None else int.from_bytes(os.urandom(4), "big") & 0x7FFFFFFF),
                pd=pd,
            )
            qp.next_psn = secrets.randbits(24)
            self.qps[qpn] = qp
        return qp

    def _fresh_qpn(self) -> int:
        """An unused QPN drawn at random (ReDMArk predicted sequential ones): 2 .. 2^24 - 2, as QP0, QP1
        and the multicast QPN 0xFFFFFF are not for connections. Called under the adapter's lock."""
        while True:
            qpn = FIRST_QPN + secrets.randbelow(QPN_MAX - FIRST_QPN)
            if qpn not in self.qps:
                return qpn

    # ------------------------------------------------------------------ protection domains and regions

    def alloc_pd(self) -> int:
        """A new protection domain for an application: its QPs and regions name it (``pd``), and its
        regions take writes from its QPs only. Ids are random above the partitions' own (0x1..0x7FFF)."""
        with self.lock:
            while True:
                pd = APP_PD_BASE + secrets.randbelow(PD_MAX - APP_PD_BASE + 1)
                if pd not in self._app_pds:
                    self._app_pds.add(pd)
                    return pd

    def pd_for(self, pkey: int | None, pd: int | None) -> int:
        """The PD a QP or region joins: ``pd`` if given (it must exist), else the own PD of partition
        ``pkey`` (its 15-bit number; the default partition's when ``pkey`` is None too)."""
        with self.lock:
            numbers = {p.number for p in self.partitions.values()}
            if pd is not None:
                if pd not in self._app_pds and pd not in numbers:
                    raise AdapterError(f"no protection domain {pd:#x} (alloc_pd makes one)")
                return pd
            number = (DEFAULT_PKEY if pkey is None else pkey) & 0x7FFF
            if number not in numbers:
                raise AdapterError(f"P_Key {pkey:#06x} is not in this port's P_Key table")
            return number

    @staticmethod
    def session_id(qp: QueuePair, comm_id: int) -> tuple[int, int]:
        """The session key cache id of a connection's key: seed 001's (process, connection). The process
        is the QP's protection domain, the application that owns it, so when a message arrives for another
        application the cache prefetches that application's frequent keys; the connection is the QPN and
        the CM communication id."""
        return qp.pd, (qp.qpn << 32) | comm_id

    def listen(self, pkey: int, pd: int) -> None:
        """Connections accepted in partition ``pkey`` from now on join protection domain ``pd``."""
        pd = self.pd_for(None, pd)
        if self.own_partition(pkey) is None:
            raise AdapterError(f"P_Key {pkey:#06x} is not in this port's P_Key table")
        with self.lock:
            self._accept_pd[pkey & 0x7FFF] = pd

    def accept_pd(self, pkey: int) -> int:
        """The PD a connection accepted in partition ``pkey`` joins (the partition's own unless
        :meth:`listen` named another)."""
        with self.lock:
            return self._accept_pd.get(pkey & 0x7FFF, pkey & 0x7FFF)

    def reg_mr(
        self,
        length: int,
        pkey: int | None = None,
        pd: int | None = None,
        access: Access = Access.ANY,
        ext_depth: int | None = None,
    ) -> Region:
        """Register a region in protection domain ``pd``, or in partition ``pkey``'s own (default: the
        default partition's); see :class:`~.memory.Access` for ``access``."""
        return self.memory.register(length, self.pd_for(pkey, pd), access, ext_depth)

    def destroy_qp(self, qp: QueuePair) -> None:
        """Forget a QP and its session key (a later frame for it counts as ``no_qp``)."""
        with self.lock:
            self.qps.pop(qp.qpn, None)
        self.admission.forget(qp.qpn)
        if qp.security is not None and qp.security.cache_id is not None:
            with self._skc_lock:
                self.skc.remove(qp.security.cache_id)
        self.fail(qp, "destroyed")
        log.info("QP %#x destroyed", qp.qpn)

    def list_qps(self) -> list[QueuePair]:
        """A snapshot of the QPs (the control socket lists them while traffic adds more)."""
        with self.lock:
            return list(self.qps.values())

    def find_qp(self, qpn: int) -> QueuePair | None:
        """QP ``qpn``, if there is one."""
        with self.lock:
            return self.qps.get(qpn)

    def qp(self, qpn: int) -> QueuePair:
        with self.lock:
            qp = self.qps.get(qpn)
        if qp is None:
            raise AdapterError(f"no QP {qpn:#x}")
        return qp

    def security_for(
        self,
        qp: QueuePair,
        remote_gid: str,
        remote_qpn: int,
        session: tuple[int, int] | None,
        initiator: bool,
        n0: tuple[bytes, bytes],
        remote_psn: int,
    ) -> Security:
        """The crypto context of a connection, keyed by its scope; mode 0 looks up no key at all.

        ``session`` is the session key cache id of a session-scope key (the key is fetched from the
        cache per packet, as the adapter of seed 001 does); ``n0`` = (the requester's contribution, the
        responder's), from which the connection's nonce base is derived (``transport.connection_n0``);
        ``remote_psn`` the peer's starting PSN.
        """
        key = None
        if qp.mode and qp.scope is Scope.SESSION:
            if session is None:
                raise AdapterError("session scope needs a session key from the CM handshake")
        elif qp.mode:
            key = self._partition_scope_key(qp, remote_gid, remote_qpn)
        n0_both = transport.connection_n0(*n0)
        return frames.new_security(
            qp.mode, key, session, qp.service.value, n0_both, n0_both, initiator, qp.next_psn, remote_psn
        )

    def _partition_scope_key(self, qp: QueuePair, remote_gid: str, remote_qpn: int) -> bytes:
        """P_SK itself, or K(A,B) derived from it for this pair of endpoints."""
        p_sk = self.keyring.partition_key(qp.partition.pkey)
        if qp.scope is Scope.PARTITION:
            return p_sk.material
        local = keys.Endpoint(int(ipaddress.IPv6Address(self.gid)), qp.qpn)
        remote = keys.Endpoint(int(ipaddress.IPv6Address(remote_gid)), remote_qpn)
        return keys.derive_connection_key(p_sk, local, remote).material

    def key_of(self, security: Security) -> bytes | None:
        """The key bytes of a connection: its own, or its session key through the session key cache."""
        if security.cache_id is None:
            return security.key
        with self._skc_lock:
            return self.skc.get(security.cache_id).material

    def store_session_key(self, cache_id: tuple[int, int], key: keys.Key) -> None:
        with self._skc_lock:
            self.skc.put(cache_id, key)

    # ------------------------------------------------------------------ sending

    def transmit(self, frame: bytes) -> None:
        """Put a finished frame on the wire."""
        self._send(frame)
        self.counters.bump("tx_frames")

    def post_send(
        self, qpn: int, data: bytes, dest: tuple[str, int] | None = None, block: bool = True
    ) -> None:
        """SEND ``data`` on QP ``qpn`` (see :meth:`.send.SendPath.post_send`)."""
        self.tx.post_send(qpn, data, dest, block)

    def post_write(self, qpn: int, va: int, r_key: int, data: bytes, memory_key: bytes | None = None) -> None:
        """RDMA WRITE ``data`` on QP ``qpn`` (see :meth:`.send.SendPath.post_write`)."""
        self.tx.post_write(qpn, va, r_key, data, memory_key)

    def wait_recv(self, qpn: int, timeout: float) -> bytes | None:
        """The next message delivered on ``qpn`` (waits up to ``timeout`` seconds)."""
        item = self.qp(qpn).take(timeout)
        return None if item is None else item[0]

    def outstanding(self, qpn: int) -> int:
        """Unacknowledged requests on an RC QP."""
        return len(self.qp(qpn).unacked)

    def wait_outstanding(self, qpn: int, at_most: int, timeout: float) -> bool:
        """Wait until at most ``at_most`` requests are unacknowledged; False on timeout or QP error."""
        qp = self.qp(qpn)
        with qp.cond:
            return (
                qp.cond.wait_for(lambda: len(qp.unacked) <= at_most or qp.state is State.ERROR, timeout)
                and qp.state is not State.ERROR
            )

    # ------------------------------------------------------------------ timer: retransmission

    def tick(self) -> None:
        """Retransmit every request unacknowledged for longer than the ACK timeout (go-back-N); reap
        half-open connections (accepted, never established) older than the admission timeout; tell the SM
        this port is up until it answers."""
        for qpn in self.admission.expired():
            with self.lock:
                qp = self.qps.get(qpn)
            if qp is not None:
                log.info("QP %#x: half-open connection from %s timed out", qpn, qp.remote_gid)
                self.counters.bump("half_open_expired")
                self.destroy_qp(qp)
            self.admission.forget(qpn)
        now = time.monotonic()
        self.mads.tick(now)
        self.tx.retransmit(now)

    def fail(self, qp: QueuePair, why: str) -> None:
        """Put ``qp`` in the error state and wake whoever waits on it."""
        log.warning("QP %#x -> ERROR: %s", qp.qpn, why)
        with qp.cond:
            qp.state = State.ERROR
            qp.cond.notify_all()

    # ------------------------------------------------------------------ receiving

    def receive(self, frame: bytes) -> None:
        """Handle one frame from the wire (see :class:`.receive.ReceivePath`)."""
        self.rx.receive(frame)

    # ------------------------------------------------------------------ connection set-up helpers (CM)

    def connected(
        self, qp: QueuePair, remote_gid: str, remote_qpn: int, security: Security, remote_mac: bytes
    ) -> None:
        """Move an RC QP to RTS once the handshake agreed on the remote end, PSNs and keys; its frames go
        to ``remote_mac``, where the peer's handshake frame came from."""
        with self.lock:
            qp.remote_gid = str(ipaddress.IPv6Address(remote_gid))
            qp.remote_qpn = remote_qpn
            qp.remote_mac = remote_mac
            qp.security = security
            qp.state = State.RTS
        log.info(
            "QP %#x connected to %s QP %#x, mode %d, %s keys",
            qp.qpn,
            qp.remote_gid,
            remote_qpn,
            qp.mode,
            qp.scope.value,
        )

    def add_ud_peer(
        self, qp: QueuePair, gid: str, qpn: int, qkey: int, security: Security, mac: bytes
    ) -> UdPeer:
        """Remember a UD peer resolved by SIDR (at ``mac``, where its SIDR frame came from); we send to it
        from the QP's current PSN on."""
        gid = str(ipaddress.IPv6Address(gid))
        peer = UdPeer(gid, qpn, qkey, mac, security, qp.next_psn)
        with self.lock:
            if len(qp.peers) >= MAX_UD_PEERS and (gid, qpn) not in qp.peers:
                raise AdapterError(f"QP {qp.qpn:#x} already has {MAX_UD_PEERS} UD peers")
            qp.peers[(gid, qpn)] = peer
            qp.state = State.RTS
        return peer

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.config.name,
            "gid": self.gid,
            "guid": f"{self.guid:#018x}",
            "lid": self.config.lid,
            "mtu": self.config.mtu,
            "mac": self.config.mac.hex(":"),
            "sm_gid": self.config.sm_gid,
            "pkeys": [
                {"pkey": p.pkey, "mode": p.mode, "scope": p.scope.value} for p in self.partitions.values()
            ],
            "keys": self.keyring.describe(),
        }
