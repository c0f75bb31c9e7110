"""Runs a conformance case file (p4switch/stf.py format) through a real `p4switch` process: every table,
profile, PRE, meter and register command becomes a P4Runtime Write (ids and byte strings from the
P4Info, as a controller would do), packets go in and out of veth interfaces, counters, registers and
digests are read back over P4Runtime. Commands that need the engine's insides (``clock``,
``check_stat``) are left to the in-process driver and skipped here."""

from __future__ import annotations

import select
from dataclasses import dataclass, field

import finsy as fy
from finsy.proto import p4i, p4r

from p4switch import stf
from p4switch.conformance.driver import resolve
from p4switch.dataplane import receive_frame
from p4switch.engine import api as engine
from p4switch.runtime import codec
from p4switch.runtime.p4info import P4InfoIndex
from p4switch.tests.runtime.harness import Builder, Program, RawPort, StreamClient, update

INSERT, MODIFY = p4r.Update.INSERT, p4r.Update.MODIFY
IN_PROCESS_ONLY = {"clock", "check_stat"}
QUIET = 0.5
"""Seconds without a frame after which the frames sent so far count as processed."""
_KINDS: dict[int, str] = {
    p4i.MatchField.EXACT: "exact", p4i.MatchField.TERNARY: "ternary", p4i.MatchField.LPM: "lpm",
    p4i.MatchField.RANGE: "range", p4i.MatchField.OPTIONAL: "optional"}


def meter_config(config: engine.MeterConfig) -> fy.P4MeterConfig:
    """A case's meter rates as finsy's MeterConfig."""
    return fy.P4MeterConfig(cir=config.cir, cburst=config.cburst, pir=config.pir, pburst=config.pburst)


def ports_used(commands: list[stf.Command]) -> set[int]:
    """Switch ports a case sends on, expects on or replicates to."""
    used = {c.port for c in commands if c.kind in ("packet", "expect")}
    for cmd in commands:
        used.update(port for port, _ in cmd.replicas)
    return used


@dataclass
class StfRun:
    """One case against a switch whose ports are ``hosts`` (port number -> host side of its veth)."""

    program: Program
    client: StreamClient
    hosts: dict[int, RawPort]
    cpu_port: int | None = None
    """the switch's --cpu-port: frames to and from it travel as PacketIn / PacketOut"""
    builder: Builder = field(init=False)
    schema: fy.P4Schema = field(init=False)
    index: P4InfoIndex = field(init=False)
    entries: list[p4r.TableEntry] = field(default_factory=list)
    expected: dict[int, list[str]] = field(default_factory=dict)
    digests: list[p4r.DigestList] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    received: dict[int, list[bytes]] = field(default_factory=dict)
    in_flight: bool = False

    def __post_init__(self) -> None:
        self.builder = Builder(self.program)
        self.schema = self.program.schema
        self.index = self.builder.index

    def run(self, commands: list[stf.Command]) -> list[str]:
        self.client.set_pipeline(self.program)
        for digest in self.index.digests.values():
            config = p4r.DigestEntry.Config(max_timeout_ns=0, max_list_size=1, ack_timeout_ns=0)
            entry = p4r.DigestEntry(digest_id=digest.id, config=config)
            self.client.write(update(INSERT, digest_entry=entry))
        for cmd in commands:
            if cmd.kind in IN_PROCESS_ONLY:
                continue
            if self.in_flight and cmd.kind not in ("packet", "expect"):
                self.settle()
            getattr(self, f"do_{cmd.kind}")(cmd)
        self.check_frames()
        return self.failures

    # ----------------------------------------------------------------------------- writes
    def do_add(self, cmd: stf.Command) -> None:
        table = self.builder.table(cmd.table)
        by_name = {f.name: f for f in table.fields.values()}
        match = {name: stf.coerce(m, _KINDS[by_name[name].match_type], by_name[name].bitwidth)
                 for name, m in cmd.match.items()}
        entry = self.builder.table_entry(cmd.table, match, cmd.action, cmd.priority)
        self.client.write(update(INSERT, table_entry=entry))
        self.entries.append(entry)

    def do_setdefault(self, cmd: stf.Command) -> None:
        entry = self.builder.table_entry(cmd.table, action=cmd.action, default=True)
        self.client.write(update(MODIFY, table_entry=entry))


    def do_member(self, cmd: stf.Command) -> None:
        assert isinstance(cmd.action, engine.ActionCall)
        member = fy.P4ActionProfileMember(cmd.name, member_id=cmd.index,
                                          action=fy.P4TableAction(cmd.action.name, **cmd.action.params))
        self.client.write(p4r.Update(type=INSERT, entity=member.encode(self.schema)))

    def do_group(self, cmd: stf.Command) -> None:
        group = p4r.ActionProfileGroup(action_profile_id=self.program.name_to_id("action_profiles", cmd.name),
                                       group_id=cmd.index)
        for member_id, weight in cmd.members:
            group.members.add(member_id=member_id, weight=weight)
        self.client.write(update(INSERT, action_profile_group=group))

    def do_mcast(self, cmd: stf.Command) -> None:
        group = p4r.MulticastGroupEntry(multicast_group_id=cmd.index)
        for port, rid in cmd.replicas:
            group.replicas.add(port=codec.encode_uint(port), instance=rid)
        self.client.write(update(INSERT, packet_replication_engine_entry=p4r.PacketReplicationEngineEntry(
            multicast_group_entry=group)))

    def do_clone_session(self, cmd: stf.Command) -> None:
        session = p4r.CloneSessionEntry(session_id=cmd.index, packet_length_bytes=cmd.truncate)
        for port, rid in cmd.replicas:
            session.replicas.add(port=codec.encode_uint(port), instance=rid)
        self.client.write(update(INSERT, packet_replication_engine_entry=p4r.PacketReplicationEngineEntry(
            clone_session_entry=session)))

    def do_meter(self, cmd: stf.Command) -> None:
        assert cmd.meter is not None
        meter = fy.P4MeterEntry(cmd.name, index=cmd.index, config=meter_config(cmd.meter))
        self.client.write(meter.encode_update(self.schema))

    def do_direct_meter(self, cmd: stf.Command) -> None:
        assert cmd.meter is not None
        self.client.write(update(MODIFY, direct_meter_entry=p4r.DirectMeterEntry(
            table_entry=self.entries[cmd.index - 1], config=meter_config(cmd.meter).encode())))

    def do_register_write(self, cmd: stf.Command) -> None:
        register = fy.P4RegisterEntry(cmd.name, index=cmd.index, data=cmd.values["value"])
        self.client.write(register.encode_update(self.schema))

    def do_value_set(self, cmd: stf.Command) -> None:
        by_name = {v.name: v for v in self.index.value_sets.values()}
        vs = by_name[resolve(cmd.name, by_name, "value set")]  # a suffix, as p4c's runner finds names
        entry = p4r.ValueSetEntry(value_set_id=vs.id)
        for values in cmd.tuples:
            entry.members.add().match.extend(
                p4r.FieldMatch(field_id=f.id, exact=p4r.FieldMatch.Exact(value=codec.encode_uint(v)))
                for f, v in zip(vs.fields, values, strict=True))
        self.client.write(update(MODIFY, value_set_entry=entry))

    # ------------------------------------------------------------------------- packets
    def do_packet(self, cmd: stf.Command) -> None:
        self.in_flight = True
        if cmd.port != self.cpu_port:
            self.hosts[cmd.port].send(cmd.data)
            return
        # from the CPU port: a PacketOut whose metadata are the packet_out header at the frame's front
        fields = self.index.packet_out
        size = sum(f.bitwidth for f in fields) // 8
        header, shift = int.from_bytes(cmd.data[:size], "big"), size * 8
        packet = p4r.PacketOut(payload=cmd.data[size:])
        for f in fields:
            shift -= f.bitwidth
            value = (header >> shift) & ((1 << f.bitwidth) - 1)
            packet.metadata.add(metadata_id=f.id, value=codec.encode_uint(value))
        self.client.send(p4r.StreamMessageRequest(packet=packet))

    def packet_ins(self, wait: float) -> list[bytes]:
        """PacketIns as the frames the CPU port got: packet_in header rebuilt from the metadata."""
        frames = []
        for message in self.client.collect("packet", wait=wait):
            values = {m.metadata_id: int.from_bytes(m.value, "big") for m in message.packet.metadata}
            header = 0
            for f in self.index.packet_in:
                header = (header << f.bitwidth) | values.get(f.id, 0)
            size = sum(f.bitwidth for f in self.index.packet_in) // 8
            frames.append((header.to_bytes(size, "big") if size else b"") + message.packet.payload)
        return frames

    def do_expect(self, cmd: stf.Command) -> None:
        self.expected.setdefault(cmd.port, []).append(cmd.pattern)

    def settle(self, quiet: float = QUIET) -> None:
        """Collect what the switch sent until no frame comes for ``quiet`` seconds: the frames sent so
        far have then gone through, so a following write cannot overtake them (the in-process driver
        runs each packet to completion; over veths they are in flight)."""
        socks = {host.sock: port for port, host in self.hosts.items()}
        while True:
            ready, _, _ = select.select(list(socks), [], [], quiet)
            if not ready:
                break
            for sock in ready:
                self.received.setdefault(socks[sock], []).append(receive_frame(sock)[0])
        if self.cpu_port is not None:
            self.received.setdefault(self.cpu_port, []).extend(self.packet_ins(wait=0.1))
        self.in_flight = False

    def check_frames(self) -> None:
        """Every port got exactly the frames expected on it so far, in order."""
        self.settle()
        expected, self.expected = self.expected, {}
        received, self.received = self.received, {}
        for port in [*self.hosts, *([self.cpu_port] if self.cpu_port is not None else [])]:
            wanted, got = expected.get(port, []), received.get(port, [])
            for i, pattern in enumerate(wanted):
                if i >= len(got):
                    self.failures.append(f"port {port}: expected frame {pattern} did not come")
                elif not stf.frame_matches(pattern, got[i]):
                    self.failures.append(f"port {port}: got {got[i].hex()}, expected {pattern}")
            for extra in got[len(wanted):]:
                self.failures.append(f"port {port}: unexpected frame {extra.hex()}")

    # -------------------------------------------------------------------------- checks
    def do_check_counter(self, cmd: stf.Command) -> None:
        self.check_frames()  # counters are read once the frames have gone through
        [entity] = self.client.read(fy.P4CounterEntry(cmd.name, index=cmd.index).encode(self.schema))
        self.check_counts(cmd, entity.counter_entry.data)

    def do_check_direct_counter(self, cmd: stf.Command) -> None:
        self.check_frames()
        [entity] = self.client.read(p4r.Entity(direct_counter_entry=p4r.DirectCounterEntry(
            table_entry=self.entries[cmd.index - 1])))
        self.check_counts(cmd, entity.direct_counter_entry.data)

    def check_counts(self, cmd: stf.Command, data: p4r.CounterData) -> None:
        got = {"packets": data.packet_count, "bytes": data.byte_count}
        for key, value in cmd.values.items():
            if got[key] != value:
                self.failures.append(f"line {cmd.line}: {cmd.name}[{cmd.index}] {key} = {got[key]}, "
                                     f"expected {value}")

    def do_check_register(self, cmd: stf.Command) -> None:
        self.check_frames()
        [entity] = self.client.read(fy.P4RegisterEntry(cmd.name, index=cmd.index).encode(self.schema))
        value = int.from_bytes(entity.register_entry.data.bitstring, "big")
        if value != cmd.values["value"]:
            self.failures.append(f"line {cmd.line}: {cmd.name}[{cmd.index}] = {value}, "
                                 f"expected {cmd.values['value']}")

    def do_check_digest(self, cmd: stf.Command) -> None:
        self.check_frames()
        info = self.index.digest(self.index.digest_ids[cmd.name])
        self.digests += [m.digest for m in self.client.collect("digest", wait=0.5)]
        for digest in self.digests:
            for data in digest.data:
                members = data.struct.members if data.HasField("struct") else [data]
                values = {f.name: int.from_bytes(m.bitstring, "big")
                          for f, m in zip(info.members, members, strict=False)}
                if all(values.get(k) == v for k, v in cmd.values.items()):
                    return
        self.failures.append(f"line {cmd.line}: no digest {cmd.name} with {cmd.values}")
