"""Traps from the CAs (DESIGN 4, 7): authenticate, suppress repeats, decode the MF to the true ingress.

A PacketIn of a MAD for the SM is trusted only when its GCM trailer verifies under the CA_SK of the host
whose GID sent it (``ibsec.mad_auth``) and its TransactionID is newer than that host's last one, which
is kept in a file across SM restarts (``TrapOptions.replay_state``), and that was sent after this SM
started (by the same TransactionID, its sender's clock): a forged or replayed trap is
dropped, counted and reported, so nobody can make the SM filter an innocent port. Then, as
OpenSM does, repeats of one trap (same number, issuer, key and claimed source) within a window are
suppressed. A bad-P_Key trap's MF gives the true (switch, port, host) the offending packet entered at,
whatever source GID it claimed, the SM's own included (:func:`ibsm.fabric.trace`); both are kept in the
report, and only the traced port is ever acted on.
"""

from __future__ import annotations

import ipaddress
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ibsec import addressing, keys, layers, mad_auth, rocev2
from scapy.packet import Packet

from .fabric import FabricError, FabricPlan, Trace, dst_id, trace
from .topology import Host, Topology

UD_SEND_ONLY = 0x64


@dataclass(frozen=True)
class TrapOptions:
    """``suppress_window``: seconds during which a repeat of the same trap is only counted. Keep it
    shorter than SIF's quiet period, or a renewed attack right after a flush would go unseen.
    ``max_age``: agents number their MADs with the time they sent them (nanoseconds since the epoch,
    strictly increasing), so a MAD that never reached this SM (dropped on its way while the SM runs) but
    was captured can still not be replayed later than this; one sent before this SM started is refused
    whatever its age (a capture: an earlier SM may have been killed before it recorded it). A MAD that
    claims to be from further in the future is refused too: accepted, its TransactionID would make every
    later MAD of its sender a replay."""

    suppress_window: float = 2.0
    max_remembered: int = 4096
    replay_state: Path | None = None  # where the last TransactionID per sender is kept across restarts
    max_age: float = 60.0  # seconds: an older MAD (by the time its sender's TransactionID says) is stale


@dataclass
class TrapReport:
    """What became of one MAD that reached the SM."""

    status: str  # accepted, forged, stale, replay, suppressed, malformed
    reason: str = ""
    switch: str = ""
    ingress_port: int = 0
    sender: str = ""
    # as the MAD carries it (authentic unless forged or malformed): what ties an event to a captured frame
    transaction_id: int | None = None
    number: int | None = None
    victim: str | None = None
    bad_key: int | None = None
    claimed_source: str | None = None
    claimed_host: str | None = None
    mf: int | None = None
    trace: Trace | None = None
    details: dict[str, Any] = field(default_factory=dict)

    def as_event(self) -> dict[str, Any]:
        """Fields for the events file (no key material: a trap carries none)."""
        out: dict[str, Any] = {k: v for k, v in self.__dict__.items() if k not in ("trace", "details")}
        if self.bad_key is not None:
            out["bad_key"] = f"{self.bad_key:#06x}"
        if self.mf is not None:
            out["mf"] = f"{self.mf:#012x}"
        if self.transaction_id is not None:
            out["transaction_id"] = f"{self.transaction_id:#018x}"
        out.update(self.details)
        return out


@dataclass(frozen=True)
class RawMad:
    """A MAD as it came off the wire: the sender's GID and the UD payload (MAD, trailer), not parsed yet.

    Authentication works on these bytes, so a flood of forged or replayed traps costs one GCM check each
    and never a Scapy dissection.
    """

    sender: bytes
    payload: bytes

    @property
    def sender_text(self) -> str:
        return str(ipaddress.IPv6Address(self.sender))

    @property
    def transaction_id(self) -> int | None:
        """The TransactionID field of the MAD's common header, or None if the payload is too short."""
        if len(self.payload) < layers.MAD_TID_AT.stop:
            return None
        return layers.mad_tid(self.payload)

    @property
    def is_response(self) -> bool:
        """A GetResp of our vendor class (a key ACK), from the common header's class and R bit."""
        return self.payload[1] == layers.MgmtClass.IBSEC_VENDOR and bool(self.payload[3] & 0x80)


class NotAMad(Exception):
    """A PacketIn that is no MAD for the SM; ``reason`` is a short code for the counters."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def parse_frame(frame: bytes) -> RawMad:
    """The MAD of a RoCEv2 UD SEND to QP1; raises :class:`NotAMad` for anything else (ignored)."""
    try:
        located = rocev2.locate(frame)
        opcode = located.opcode
        start = located.headers_end
    except rocev2.Malformed:
        raise NotAMad("not-rocev2") from None
    if opcode.code != UD_SEND_ONLY or located.dqpn != layers.GSI_QPN:
        raise NotAMad("not-ud-send-to-qp1")
    if len(frame) < start + layers.MAD_LEN + rocev2.ICRC_LEN:
        raise NotAMad("shorter-than-a-mad")
    end = len(frame) - rocev2.ICRC_LEN - located.pad_count
    return RawMad(located.src_gid, frame[start:end])


class MadSource:
    """Authenticates MADs from the hosts of a topology with their CA keys."""

    def __init__(self, topo: Topology, keystore: keys.KeyStore) -> None:
        self.topo = topo
        self.keystore = keystore
        self._by_id = {dst_id(h.gid): h for h in topo.hosts}

    def authentic(self, raw: RawMad) -> tuple[Host, bytes]:
        """(sending host, the 256 MAD bytes) of an authentic MAD; raises MadAuthError otherwise. Bytes:
        a key ACK needs only its TransactionID and status, and a fabric's distribution is thousands."""
        host = self._by_id.get(dst_id(raw.sender_text))
        if host is None:
            raise mad_auth.MadAuthError(f"source GID {raw.sender_text} is no host of the topology")
        if host.guid not in self.keystore:
            raise mad_auth.MadAuthError(f"no CA key for {host.name}")
        return host, mad_auth.verify(self.keystore.ca_key(host.guid).material, raw.payload, raw.sender)

    def sender(self, raw: RawMad) -> tuple[Host, Packet]:
        """(sending host, parsed MAD) of an authentic MAD; raises MadAuthError otherwise."""
        host, mad = self.authentic(raw)
        return host, layers.MAD(mad)


class TrapHandler:
    """Turns trap PacketIns into :class:`TrapReport`; counts every outcome in ``counters``."""

    def __init__(self, topo: Topology, plan: FabricPlan, source: MadSource, options: TrapOptions,
                 clock: Callable[[], float] = time.monotonic, wall: Callable[[], float] = time.time) -> None:
        self.topo = topo
        self.plan = plan
        self.source = source
        self.options = options
        self.clock = clock
        self.wall = wall
        self.guard = mad_auth.TidReplayGuard(options.replay_state)
        # agents number MADs with their send time: nothing sent before this start is news to this SM
        self.started_ns = int(wall() * 1e9)
        self.counters: Counter[str] = Counter()
        self._seen: dict[tuple[Any, ...], float] = {}

    def handle(self, raw: RawMad, switch: str, ingress_port: int) -> TrapReport:
        report = self._handle(raw, switch, ingress_port)
        self.counters[report.status] += 1
        return report

    def _handle(self, raw: RawMad, switch: str, ingress_port: int) -> TrapReport:
        report = TrapReport("malformed", switch=switch, ingress_port=ingress_port, sender=raw.sender_text,
                            transaction_id=raw.transaction_id)
        try:
            host, mad = self.source.sender(raw)
            age, limit = self.wall() - int(mad.transaction_id) / 1e9, self.options.max_age
            if abs(age) > limit:  # a TransactionID from the future would lock its sender out of the guard
                report.status = "stale"
                when = f"sent {age:.0f} s ago" if age > 0 else f"{-age:.0f} s ahead of the SM's clock"
                report.reason = f"{when} by its TransactionID (at most {limit:g} s)"
                return report
            if int(mad.transaction_id) < self.started_ns:
                # whether or not an earlier SM recorded it (one killed before it did, or down while it
                # was sent), a MAD sent before this SM started can only reach it as a capture
                report.status = "replay"
                report.reason = (f"sent {(self.started_ns - int(mad.transaction_id)) / 1e9:.1f} s before "
                                 "this SM started by its TransactionID")
                return report
            self.guard.accept(raw.sender, int(mad.transaction_id))
        except mad_auth.MadReplayError as err:
            report.status, report.reason = "replay", str(err)
            return report
        except mad_auth.MadAuthError as err:
            report.status, report.reason = "forged", str(err)
            return report
        notice = mad.getlayer(layers.Notice)
        if notice is None or mad.method != layers.Method.TRAP:
            report.reason = "an authentic MAD that is not a trap"
            return report
        report.victim = host.name
        if notice.is_generic and notice.trap_number in (layers.TRAP_BAD_PKEY, layers.TRAP_BAD_QKEY):
            wrong = self._bad_key(report, notice)
            if wrong:
                report.reason = wrong
                return report
        else:
            report.number = int(notice.device_id) if not notice.is_generic else int(notice.trap_number)
            details = notice.data_details
            if isinstance(details, layers.SecurityTrapDetails):
                report.details = {"kind": "security", "qp": int(details.qp),
                                  "mac_failures": int(details.mac_failures), "replays": int(details.replays)}
                report.claimed_source = str(details.peer_gid)
            elif isinstance(details, layers.PortUpDetails):
                # never suppressed: two starts of one agent differ only in their boot ids
                report.details = {"kind": "port-up", "boot_id": f"{int(details.boot_id):#018x}"}
                report.status = "accepted"
                return report
        if self._suppressed(report):
            report.status = "suppressed"
            return report
        report.status = "accepted"
        return report

    def _bad_key(self, report: TrapReport, notice: Packet) -> str:
        """Decode a trap 257 / 258 into ``report``; returns why it is malformed, or "" if it is not."""
        details = notice.data_details
        report.number = int(notice.trap_number)
        report.bad_key = int(details.key)
        if report.number == layers.TRAP_BAD_PKEY and report.bad_key > 0xFFFF:
            return f"trap 257 with a P_Key of more than 16 bits ({report.bad_key:#x})"
        report.claimed_source = str(details.gid1)
        claimed = self.topo.host_by_guid(addressing.parse_gid(report.claimed_source).guid)
        report.claimed_host = claimed.name if claimed else None
        if notice.ext_version != layers.NOTICE_EXT_VERSION:
            report.reason = "no MF extension: cannot trace"
            return ""
        report.mf = int(notice.mf)
        # Whatever the packet claims, the SM's GID included, the mark says where it entered: the switches
        # overwrite it at every host port. The SM's own MADs carry only the management P_Key, which SIF
        # never filters, so tracing them too can cut nobody off.
        victim = next(h for h in self.topo.hosts if h.name == report.victim)
        try:
            report.trace = trace(self.topo, self.plan, victim, report.mf)
        except FabricError as err:
            report.reason = f"traceback failed: {err}"
        return ""

    def _suppressed(self, report: TrapReport) -> bool:
        """OpenSM's repeat suppression: the same trap within the window is counted, not acted on."""
        now = self.clock()
        # a traced trap is the same trap whatever source it claims (an attacker may vary the claim)
        origin = (report.trace.switch, report.trace.port) if report.trace else report.claimed_source
        key = (report.number, report.victim, report.bad_key, origin)
        last = self._seen.get(key)
        if last is not None and now - last < self.options.suppress_window:
            return True
        if len(self._seen) >= self.options.max_remembered:
            self._seen = {k: t for k, t in self._seen.items() if now - t < self.options.suppress_window}
        self._seen[key] = now
        return False
