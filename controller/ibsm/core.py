"""The SM's core: one finsy Switch per fabric switch, a ready-handler per switch, managers per concern.

What to write is decided by pure functions (fabric plan, entries, partitions, SIF state machine, trap
handler, key manager); the core only connects, reconciles, reads PacketIns and counters, and writes
PacketOuts. The ready-handler runs on every (re)connection: it adopts the filters a switch already holds
(SM restart), then reconciles the switch to the full wanted state (switch restart: everything again;
SM restart: nothing written twice).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import finsy as fy
from ibsec import keys, layers, mad_auth, names

from . import entries
from .events import EventLog
from .fabric import FabricPlan, dst_id, plan_fabric
from .keymgr import Delivery, KeyManager, KeyOptions
from .partitions import DEFAULT_PKEY, FULL_MEMBER, PKEY_BASE, describe, pkey_tables, valid_pkeys
from .reconcile import read_owned, reconcile
from .sif import INVALID_LIST, VALID_LIST, Action, ActionKind, PortId, Sif, SifOptions
from .topology import Partition, Topology
from .traps import MadSource, NotAMad, RawMad, TrapHandler, TrapOptions, TrapReport, parse_frame

log = logging.getLogger("ibsm")

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class SmOptions:
    """Everything ``sm run`` is started with."""

    run_dir: Path
    events: Path | None = None  # default RUN_DIR/events.jsonl
    policy: str = names.Policy.SIF.value
    p4info: Path = ROOT / "build" / "main.p4info.txtpb"
    p4blob: Path = ROOT / "build" / "main.json"
    punt_rate: int = 200  # packets/s per host port to the SM
    punt_burst: int = 50
    distribute_keys: bool = True
    generated_keys: Path | None = None  # where SM_SK, P_SK and CA_SK_ij are kept across restarts (0600)
    reconnect_probe: float = 0.1
    stop_grace: float = 10.0
    """seconds the SM's tasks get to end once cancelled; one that has not is named in the log and left"""
    sif: SifOptions = field(default_factory=SifOptions)
    traps: TrapOptions = field(default_factory=TrapOptions)
    keys: KeyOptions = field(default_factory=KeyOptions)
    tls: fy.GRPCCredentialsTLS | None = None
    """P4Runtime over TLS: the CA that signed the switches' certificates and, for mutual TLS, the SM's own
    certificate and key (None: plaintext)"""


class SmConfigError(ValueError):
    """A configuration the SM cannot run with (message says what and where)."""


def check_options(options: SmOptions) -> None:
    if options.policy not in names.POLICIES:
        raise SmConfigError(f"policy {options.policy!r}: expected one of {', '.join(names.POLICIES)}")
    for what, path in (("P4Info", options.p4info), ("program", options.p4blob)):
        if not path.is_file():
            raise SmConfigError(f"{what} {path} not found (run `make build`)")
    if options.tls is not None:
        for what, tls_file in (("CA certificate", options.tls.cacert), ("certificate", options.tls.cert),
                               ("private key", options.tls.private_key)):
            if isinstance(tls_file, Path) and not tls_file.is_file():
                raise SmConfigError(f"TLS {what} {tls_file} not found")
    if options.traps.suppress_window >= options.sif.quiet_period:
        raise SmConfigError(f"trap suppression window {options.traps.suppress_window} s must be shorter than "
                            f"the SIF quiet period {options.sif.quiet_period} s")


def _exact_entry(schema: fy.P4Schema, entity: fy.P4TableEntry) -> tuple[str, dict[str, int], str]:
    """(table name, {field name: value} of its exact fields, action name) of a table entry read back."""
    te = entity.encode(schema).table_entry
    table = schema.tables[te.table_id]
    fields = {table.match_fields[m.field_id].name: int.from_bytes(m.exact.value, "big")
              for m in te.match if m.HasField("exact")}
    action = schema.actions[te.action.action.action_id].name if te.action.HasField("action") else ""
    return table.name, fields, action


class SubnetManager:
    """Programs and watches every switch of a topology.

    Over 400 lines because it is the one place that holds the connections: each section (lifecycle,
    packet-in, restarts, SIF, policy, keys, status) is the I/O half of a pure module (entries,
    reconcile, sif, traps, keymgr) that decides what to write, and they share the switches, the SIF
    state and the key manager, so the class stays the thin layer between those modules and finsy."""

    def __init__(self, topo: Topology, partitions: list[Partition], keystore: keys.KeyStore,
                 options: SmOptions) -> None:
        check_options(options)
        self.topo = topo
        self.options = options
        self.plan: FabricPlan = plan_fabric(topo)
        self.policy = options.policy
        self.partitions = list(partitions)  # with their multicast groups, for `sm partitions`
        self.tables = pkey_tables(topo, partitions)
        self.valid = valid_pkeys(topo, self.tables)
        self.events = EventLog(options.events or options.run_dir / "events.jsonl")
        self.sif = Sif(options.sif, lambda port: self.valid[port])
        self.traps = TrapHandler(topo, self.plan, MadSource(topo, keystore), options.traps)
        self.keys = KeyManager(topo, partitions, keystore, options.keys, saved=options.generated_keys)
        self.switches: dict[str, fy.Switch] = {}
        self.state: dict[str, str] = {s.name: "connecting" for s in topo.switches}
        self.lost_at: dict[str, float] = {}
        self.stats: dict[str, int] = {"packet_ins": 0}
        self.mads: Counter[str] = Counter()  # PacketIns that are no trap, by outcome
        self.control_counters: Counter[str] = Counter()  # the control socket's (ibsm.control)
        self._controller: fy.Controller | None = None
        self._probes: set[asyncio.Task[None]] = set()
        self._sif_lock = asyncio.Lock()
        self.ready = asyncio.Event()
        self._keys_started = False
        self._keys_wakeup = asyncio.Event()
        self._window_lock = asyncio.Lock()
        self._hosts = {h.name: h for h in topo.hosts}
        self.boot_ids: dict[str, str] = {}  # host -> boot id of its agent's last port-up notice
        self._reprovisioned: dict[str, float] = {}
        self._packet_out_locks: dict[str, asyncio.Lock] = {}
        self._stopping = False

    # ------------------------------------------------------------------------------------------ lifecycle

    def _new_switch(self, name: str) -> fy.Switch:
        spec = self.topo.switch(name)
        opts = fy.SwitchOptions(p4info=self.options.p4info, p4blob=self.options.p4blob,
                                device_id=spec.device_id, ready_handler=self._ready_handler,
                                channel_credentials=self.options.tls)
        sw = fy.Switch(name, spec.address, opts)
        sw.ee.add_listener(fy.SwitchEvent.CHANNEL_DOWN, self._on_down)
        return sw

    async def run(self) -> None:
        """Run until cancelled: switches, SIF polling, key retries."""
        self.events.emit("sm-start", topology=str(self.topo.source), policy=self.policy,
                         switches=len(self.topo.switches), hosts=len(self.topo.hosts),
                         scheme=self.plan.scheme)
        self.switches = {s.name: self._new_switch(s.name) for s in self.topo.switches}
        self._controller = fy.Controller(self.switches.values())
        tasks = [asyncio.create_task(self._controller.run(), name="controller"),
                 asyncio.create_task(self._sif_loop(), name="sif"),
                 asyncio.create_task(self._key_loop(), name="keys")]
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
            for task in done:
                task.result()  # a manager that failed stops the SM with its error
        finally:
            self._stopping = True
            await self._cancel([*tasks, *self._probes])
            self.events.emit("sm-stop", traps=dict(self.traps.counters))
            self.events.close()

    async def _cancel(self, tasks: list[asyncio.Task[Any]]) -> None:
        """Cancel ``tasks`` and wait up to ``stop_grace`` for them: a stop must end even if one of them
        (a P4Runtime channel's close, on a loaded machine) does not, and the log says which."""
        for task in tasks:
            task.cancel()
        _, stuck = await asyncio.wait(tasks, timeout=self.options.stop_grace)
        for task in tasks:
            if task in stuck:
                log.warning("stop: task %s has not ended %.1f s after it was cancelled; left behind",
                            task.get_name(), self.options.stop_grace)
            elif not task.cancelled():
                with contextlib.suppress(Exception):
                    task.result()

    def _on_down(self, sw: fy.Switch) -> None:
        if self._stopping or self.state.get(sw.name) == "lost":
            return
        self.state[sw.name] = "lost"
        self.lost_at[sw.name] = time.monotonic()
        self.events.emit("switch-lost", switch=sw.name)
        log.warning("%s: P4Runtime channel lost", sw.name)
        probe = asyncio.get_running_loop().create_task(self._probe(sw.name))
        self._probes.add(probe)
        probe.add_done_callback(self._probes.discard)

    async def _probe(self, name: str) -> None:
        """Reconnect as soon as the switch's port answers again, instead of waiting out gRPC's backoff:
        a fresh finsy Switch replaces the one whose channel is backing off."""
        host, port = self.topo.switch(name).address.rsplit(":", 1)
        while self.state.get(name) == "lost":
            await asyncio.sleep(self.options.reconnect_probe)
            try:
                _, writer = await asyncio.wait_for(asyncio.open_connection(host, int(port)), 0.5)
            except (TimeoutError, OSError):
                continue
            writer.close()
            if self.state.get(name) != "lost" or self._controller is None:
                return
            old = self.switches[name]
            self.state[name] = "reconnecting"
            await self._controller.remove(old).wait()
            self.switches[name] = self._new_switch(name)
            self._controller.add(self.switches[name])
            return

    async def _ready_handler(self, sw: fy.Switch) -> None:
        """Per switch, on every (re)connection: adopt what it holds, reconcile, then serve its PacketIns."""
        if not sw.is_primary:
            return
        if self.state.get(sw.name) == "lost":
            # the lost switch's own channel came back first: the probe must not replace it now (it would
            # cut this programming short, and the new client's arbitration would clash with this one)
            self.state[sw.name] = "reconnecting"
        started = time.monotonic()
        existing = await read_owned(sw)
        await self._adopt(sw, existing)
        diff = await reconcile(sw, self.wanted(sw.name), existing)
        spread = entries.spread_default(self.plan.adaptive)
        meters = entries.punt_meters(self.plan.switches[sw.name], self.options.punt_rate,
                                     self.options.punt_burst)
        await sw.write([~spread, *(~m for m in meters)])  # one WriteRequest: one round trip per switch
        was = self.state.get(sw.name)
        self.state[sw.name] = "up"
        fields = {"switch": sw.name, "inserted": diff.inserted, "modified": diff.modified,
                  "deleted": diff.deleted, "unchanged": diff.unchanged,
                  "program_s": round(time.monotonic() - started, 3)}
        if was in ("lost", "reconnecting"):
            fields["down_s"] = round(time.monotonic() - self.lost_at.get(sw.name, started), 3)
            self.events.emit("switch-back", **fields)
        else:
            self.events.emit("switch-ready", **fields)
        log.info("%s: programmed (%s)", sw.name, fields)
        sw.create_task(self._packet_in_loop(sw))
        if all(s == "up" for s in self.state.values()) and not self.ready.is_set():
            self.ready.set()
            self.events.emit("fabric-ready", switches=len(self.state), policy=self.policy)
            if self.options.distribute_keys and not self._keys_started:
                self._keys_started = True
                await self._send_keys()

    def wanted(self, switch: str) -> list[entries.Entity]:
        """Everything ``switch`` must hold now: routing and marking, the policy's tables, SIF's filters."""
        plan = self.plan.switches[switch]
        spec = self.topo.switch(switch)
        out = entries.fabric_entities(plan, dst_id(self.topo.sm_gid))
        out += entries.policy_entities(self.policy, switch, spec.ports, plan.host_ports, self.valid)
        out += entries.sif_entities(switch, self.sif.ports)
        return out

    async def _adopt(self, sw: fy.Switch, existing: list[entries.Entity]) -> None:
        """Under SIF, filters found on a switch and unknown to this SM (it restarted) are taken over."""
        if self.policy != names.Policy.SIF:
            return
        modes: dict[int, str] = {}
        invalid: dict[int, set[int]] = {}
        for entity in existing:
            if not isinstance(entity, fy.P4TableEntry):
                continue
            table, fields, action = _exact_entry(sw.p4info, entity)
            port = fields.get(names.INGRESS_PORT, 0)
            if table == names.PARTITION_MODE:
                modes[port] = VALID_LIST if action == names.FILTER_VALID_LIST else INVALID_LIST
            elif table == names.INVALID_PKEYS:
                invalid.setdefault(port, set()).add(fields[names.P_KEY])
        for port, mode in modes.items():
            key = (sw.name, port)
            if key in self.sif.ports:
                continue
            count = await self._read_violations(sw, port)
            self.sif.adopt(key, mode, invalid.get(port, set()), count)
            self.events.emit("filter-adopted", switch=sw.name, port=port, mode=mode,
                             pkeys=[f"{p:#06x}" for p in sorted(invalid.get(port, set()))], count=count)

    # ------------------------------------------------------------------------------------------ packet-in

    async def _packet_in_loop(self, sw: fy.Switch) -> None:
        async for packet in sw.read_packets(queue_size=1024):
            self.stats["packet_ins"] += 1
            try:
                await self.on_packet_in(sw.name, int(packet["ingress_port"]), packet.payload)
            except Exception:  # one bad packet must not stop the switch's reader: counted, and a bug
                self.mads["internal-error"] += 1
                log.exception("%s: PacketIn handling failed", sw.name)

    async def on_packet_in(self, switch: str, port: int, frame: bytes) -> TrapReport | None:
        """One MAD that reached the SM: a trap (authenticated, traced, maybe filtered) or a key ACK.

        Every PacketIn is counted once: a trap under its outcome in ``traps.counters``, anything else
        in ``mads`` (not a MAD, by reason; a key ACK, expected or not)."""
        received = time.monotonic()
        try:
            raw = parse_frame(frame)
        except NotAMad as err:
            self.mads[f"ignored-{err.reason}"] += 1
            return None
        if raw.is_response:
            self._on_key_response(raw)
            return None
        report = self.traps.handle(raw, switch, port)
        event = report.as_event()
        self.events.emit("trap", **event)
        log.info("%s port %d: trap from %s, TransactionID %s: %s%s", switch, port, report.sender,
                 event.get("transaction_id", "none"), report.status,
                 f" ({report.reason})" if report.reason else "")
        if report.status != "accepted":
            return report
        if report.details.get("kind") == "port-up" and report.victim is not None:
            await self._on_port_up(report.victim, report.details["boot_id"])
        elif report.trace is not None:
            await self._on_traceback(report, received)
        return report

    async def _on_traceback(self, report: TrapReport, received: float) -> None:
        """A traced bad-key trap: report it; a bad P_Key is filtered at the true port under SIF, unless
        it belongs to the victim's own partition (then the victim's table is what is wrong)."""
        t = report.trace
        assert t is not None and report.bad_key is not None and report.victim is not None
        self.events.emit(
            "traceback", victim=report.victim, bad_key=f"{report.bad_key:#06x}",
            claimed_source=report.claimed_source, claimed_host=report.claimed_host, traced_host=t.host,
            traced_switch=t.switch, traced_port=t.port, scheme=t.scheme, packets_needed=t.packets_needed,
            mf=f"{report.mf:#012x}")
        if report.number != layers.TRAP_BAD_PKEY:
            return
        refused = {"switch": t.switch, "port": t.port, "pkey": f"{report.bad_key:#06x}"}
        if report.bad_key & PKEY_BASE == DEFAULT_PKEY:
            # filtering the default partition would cut the port off from the SM itself
            self.events.emit("filter-refused", **refused, reason="management P_Key")
        elif self._holds(report.victim, report.bad_key):
            # a legitimate member's packet that the victim's agent no longer knows: it restarted and
            # lost its table; filtering the sender would cut a member off its own partition
            self.events.emit("filter-refused", **refused, reason="the victim's own partition: its "
                             "P_Key table is stale")
            await self._reprovision(report.victim, "stale P_Key table")
        elif self.policy == names.Policy.SIF:
            await self._sif_trap((t.switch, t.port), report.bad_key, received)

    def _holds(self, host: str, pkey: int) -> bool:
        """Whether ``host``'s P_Key table (as this SM assigned it) accepts ``pkey`` (IBA 10.9.3: same
        partition, at least one of the two a full member)."""
        return any(entry & PKEY_BASE == pkey & PKEY_BASE and (entry | pkey) & FULL_MEMBER
                   for entry in self.tables.get(host, ()))

    # ------------------------------------------------------------------------------------------ restarts

    async def _on_port_up(self, host: str, boot_id: str) -> None:
        """An agent says it is up and holds nothing from the SM: provision it again, unless this start of
        it is being provisioned right now."""
        known = self.boot_ids.get(host)
        self.boot_ids[host] = boot_id
        restarted = known is not None and known != boot_id
        busy = self.keys.in_flight(host) and not restarted
        self.events.emit("agent-hello", host=host, boot_id=boot_id, restarted=restarted,
                         action="provisioning in progress" if busy else "provision")
        if not busy:
            await self._reprovision(host, "port up")

    async def _reprovision(self, host: str, reason: str) -> None:
        """Send ``host`` all its keys and its P_Key table again, at most once per key timeout."""
        action = "re-provisioning"
        now = time.monotonic()
        if not self.options.distribute_keys:
            action = "none: keys are not distributed (--no-keys)"
        elif not self._keys_started:
            action = "none: the first distribution has not started"
        elif now - self._reprovisioned.get(host, -math.inf) < self.options.keys.timeout:
            action = "rate-limited: it asks again"
        if action != "re-provisioning":
            self.events.emit("host-reprovision", host=host, reason=reason, action=action)
            return
        self._reprovisioned[host] = now
        deliveries = self.keys.replan(host)
        self.events.emit("host-reprovision", host=host, reason=reason, action=action,
                         keys=sum(len(d.what) for d in deliveries))
        await self._send_window()

    def _on_key_response(self, raw: RawMad) -> None:
        try:
            host, mad = self.traps.source.authentic(raw)
        except mad_auth.MadAuthError as err:  # forged, or from no host of the topology
            self.mads["key-ack-forged"] += 1
            self.events.emit("trap", status="forged", reason=f"key response: {err}")
            return
        result = self.keys.on_ack(host, mad)
        if result is None:  # a duplicate, a replay, or for a delivery this SM never sent
            self.mads["key-ack-unexpected"] += 1
            # by its TransactionID, an ACK can be told from the answer to a MAD this SM sent
            self.events.emit("key-ack-unexpected", host=host.name,
                             transaction_id=f"{raw.transaction_id:#018x}")
            return
        self.mads["key-ack"] += 1
        self._keys_wakeup.set()  # room in the window
        delivery, status = result
        event = "key-delivered" if status == layers.MadStatus.OK else "key-rejected"
        for what in delivery.what:
            self.events.emit(event, host=delivery.host, key=what, attempts=delivery.attempts, status=status)

    # ------------------------------------------------------------------------------------------ SIF

    async def _sif_trap(self, port: PortId, pkey: int, received: float) -> None:
        async with self._sif_lock:
            actions = self.sif.on_trap(port, pkey)
            await self._apply(actions)
        first = any(a.kind is ActionKind.SET_MODE for a in actions)
        for action in actions:
            if action.kind is ActionKind.DEDUPLICATED:
                self.events.emit("filter-deduplicated", switch=port[0], port=port[1], pkey=f"{pkey:#06x}",
                                 mode=action.mode)
            elif action.kind is ActionKind.SET_MODE:
                latency = round(1000 * (time.monotonic() - received), 3)
                self.events.emit("filter-installed", switch=port[0], port=port[1], mode=action.mode,
                                 pkey=f"{pkey:#06x}", latency_ms=latency)
            elif action.kind is ActionKind.INSTALL_INVALID and not first:
                self.events.emit("filter-extended", switch=port[0], port=port[1], pkey=f"{pkey:#06x}")

    async def _apply(self, actions: list[Action]) -> None:
        """Write SIF's actions in order (a switch that is down gets them on its next ready-handler run)."""
        for action in actions:
            sw = self.switches.get(action.port[0])
            write = entries.sif_writes(action)
            if sw is None or self.state.get(action.port[0]) != "up" or not write.updates:
                continue
            try:
                await sw.write(write.updates)
            except fy.P4ClientError:
                if not write.if_refused:
                    raise
                await sw.write(write.if_refused)

    async def _read_violations(self, sw: fy.Switch, port: int) -> int:
        async for counter in sw.read(fy.P4CounterEntry(names.PKEY_VIOLATIONS, index=port)):  # type: ignore[attr-defined]
            return int(counter.data.packet_count) if counter.data else 0
        return 0

    async def _sif_loop(self) -> None:
        while True:
            await asyncio.sleep(self.options.sif.poll_interval)
            for port in self.sif.watched():
                sw = self.switches.get(port[0])
                if sw is None or self.state.get(port[0]) != "up":
                    continue
                try:
                    count = await self._read_violations(sw, port[1])
                except fy.P4ClientError:
                    continue
                async with self._sif_lock:
                    state = self.sif.ports.get(port)
                    actions = self.sif.on_counter(port, count)
                    await self._apply(actions)
                if actions and state is not None:
                    self.events.emit("filter-flushed", switch=port[0], port=port[1], mode=state.mode,
                                     pkeys=[f"{p:#06x}" for p in sorted(state.invalid)], count=count,
                                     active_s=round(time.monotonic() - state.since, 3))

    # ------------------------------------------------------------------------------------------ policy

    async def set_policy(self, policy: str) -> dict[str, Any]:
        """Switch the filter policy at run time: every switch is reconciled to the new policy's tables."""
        if policy not in names.POLICIES:
            raise SmConfigError(f"policy {policy!r}: expected one of {', '.join(names.POLICIES)}")
        async with self._sif_lock:
            old, self.policy = self.policy, policy
            if policy != names.Policy.SIF:
                self.sif.ports.clear()
            written = {}
            for name, sw in self.switches.items():
                if self.state.get(name) == "up":
                    diff = await reconcile(sw, self.wanted(name))
                    written[name] = diff.inserted + diff.modified + diff.deleted
        self.events.emit("policy-changed", old=old, new=policy, writes=written)
        return {"old": old, "new": policy, "writes": written}

    # ------------------------------------------------------------------------------------------ keys

    async def _send_keys(self) -> None:
        self.keys.plan()
        await self._send_window()

    async def _send_window(self) -> None:
        """Send what the window has room for (each ACK makes room: the key loop calls again). One caller
        at a time: two would both see the same deliveries as not sent yet."""
        async with self._window_lock:
            for delivery in self.keys.sendable():
                with contextlib.suppress(fy.P4ClientError):  # resent by the key loop
                    await self._send_delivery(delivery)

    async def _send_delivery(self, delivery: Delivery) -> None:
        host = self._hosts[delivery.host]
        sw = self.switches[host.switch]
        if self.state.get(host.switch) != "up":
            return
        frame = self.keys.frame(delivery)
        # One PacketOut at a time per stream: grpc.aio breaks a call written from two tasks at once (the
        # key loop's retries and a re-provisioning), and finsy then writes on a new, non-primary stream.
        async with self._packet_out_locks.setdefault(host.switch, asyncio.Lock()):
            await sw.write([fy.P4PacketOut(frame, egress_port=host.port, _pad=0)])
        for what in delivery.what:
            self.events.emit("key-sent", host=delivery.host, key=what, attempt=delivery.attempts)

    async def _key_loop(self) -> None:
        """Retries with backoff when they are due, and new MADs as ACKs make room in the window."""
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._keys_wakeup.wait(), self.options.keys.timeout / 4)
            self._keys_wakeup.clear()
            retry, failed = self.keys.due()
            for delivery in failed:
                for what in delivery.what:
                    self.events.emit("key-delivery-failed", host=delivery.host, key=what,
                                     attempts=delivery.attempts)
            for delivery in retry:
                with contextlib.suppress(fy.P4ClientError):
                    await self._send_delivery(delivery)
            if self._keys_started:
                await self._send_window()

    # ------------------------------------------------------------------------------------------ status

    async def status(self) -> dict[str, Any]:
        """Switches, filters in place, counters: what ``sm status`` prints."""
        filters = []
        for (name, port), state in sorted(self.sif.ports.items()):
            filters.append({"switch": name, "port": port, "mode": state.mode, "count": state.count,
                            "pkeys": [f"{p:#06x}" for p in sorted(state.invalid)],
                            "active_s": round(time.monotonic() - state.since, 3)})
        return {"policy": self.policy, "scheme": self.plan.scheme,
                "switches": dict(self.state), "filters": filters,
                "traps": dict(self.traps.counters), "mads": dict(self.mads),
                "packet_ins": self.stats["packet_ins"],
                "keys_outstanding": self.keys.outstanding(), "events": dict(self.events.counts),
                "control": dict(self.control_counters)}

    def partitions_report(self) -> list[dict[str, Any]]:
        """Partitions, their members as written and as each host holds them, multicast groups:
        what ``sm partitions`` prints."""
        return describe(self.topo, self.partitions)
