"""P4Runtime on programs/runtime_features.p4 through a real gRPC client: every match kind and its value
checks, const tables, action profiles and selectors, counters (read back after packets), meters,
registers, multicast groups and clone sessions, packet-in/packet-out with controller metadata, and
digests with acknowledgements; on both engines."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest
from finsy.proto import U128, p4d, p4r

from p4switch.engine.api import ActionCall, Exact, GroupRef, Lpm, Match, MemberRef, Optional_, Range, Ternary
from p4switch.tests.runtime import harness
from p4switch.tests.runtime.harness import Builder, error_details, update

INSERT, MODIFY, DELETE = p4r.Update.INSERT, p4r.Update.MODIFY, p4r.Update.DELETE
INVALID = grpc.StatusCode.INVALID_ARGUMENT.value[0]
NOT_FOUND = grpc.StatusCode.NOT_FOUND.value[0]
ALREADY_EXISTS = grpc.StatusCode.ALREADY_EXISTS.value[0]
PERMISSION_DENIED = grpc.StatusCode.PERMISSION_DENIED.value[0]
ING = "FeatureIngress."
MAC_A, MAC_B = 0x0200000000A1, 0x0200000000B2


@pytest.fixture(scope="module")
def features(tmp_path_factory: pytest.TempPathFactory) -> harness.Program:
    return harness.compile_program(harness.PROGRAMS / "runtime_features.p4", tmp_path_factory.mktemp("rf"))


@pytest.fixture
def b(features: harness.Program) -> Builder:
    return Builder(features)


@pytest.fixture(params=["python", "native"])
def switch(request: pytest.FixtureRequest) -> Iterator[harness.InProcessSwitch]:
    """The in-process switch on each engine: the server reads and writes the native one's C state."""
    with harness.in_process_switch(back_end=request.param) as sw:
        yield sw


@pytest.fixture
def client(switch: harness.InProcessSwitch, features: harness.Program) -> Iterator[harness.StreamClient]:
    with harness.primary_client(switch.address, features) as c:
        assert switch.device.switch is not None
        assert switch.device.switch.engine == switch.device.back_end, switch.device.switch.engine_note
        yield c


def eth(dst: int, src: int = MAC_B, ether_type: int = 0x88B5, payload: bytes = b"payload") -> bytes:
    return dst.to_bytes(6, "big") + src.to_bytes(6, "big") + ether_type.to_bytes(2, "big") + payload


def ipv4_udp(dst: str, src: str = "10.0.0.1", dport: int = 4791) -> bytes:
    ip_dst, ip_src = (bytes(int(x) for x in a.split(".")) for a in (dst, src))
    udp = (1234).to_bytes(2, "big") + dport.to_bytes(2, "big") + (16).to_bytes(2, "big") + b"\0\0" + b"x" * 8
    ip = bytes([0x45, 0]) + (20 + len(udp)).to_bytes(2, "big") + b"\0\0\0\0" + bytes([64, 17]) + b"\0\0"
    return eth(MAC_A, ether_type=0x0800, payload=ip + ip_src + ip_dst + udp)


def failed_codes(client: harness.StreamClient, *updates: p4r.Update) -> list[int]:
    with pytest.raises(grpc.RpcError) as err:
        client.write(*updates)
    return [d.canonical_code for d in error_details(err.value)]


def dmac_to(b: Builder, mac: int, port: int) -> p4r.TableEntry:
    return b.table_entry(ING + "dmac", {"hdr.ethernet.dst_addr": Exact(mac)},
                         ActionCall(ING + "dmac_forward", {"port": port}))


class TestMatchKinds:
    def test_ternary_and_optional_entries_with_priorities(self, switch: harness.InProcessSwitch,
                                                          client: harness.StreamClient, b: Builder) -> None:
        client.write(update(INSERT, table_entry=dmac_to(b, MAC_A, 2)))
        low = b.table_entry(ING + "acl", {"hdr.ethernet.ether_type": Ternary(0x8800, 0xFF00)},
                            ActionCall(ING + "drop"), priority=10)
        high = b.table_entry(ING + "acl", {"hdr.ethernet.ether_type": Ternary(0x88B5, 0xFFFF),
                                           "standard_metadata.ingress_port": Optional_(1)},
                             ActionCall("NoAction"), priority=20)
        client.write(update(INSERT, table_entry=low), update(INSERT, table_entry=high))
        switch.inject(1, eth(MAC_A))  # both match: the higher priority (NoAction) wins
        assert switch.expect_sent()[0] == 2
        switch.inject(5, eth(MAC_A))  # the optional port does not match: the drop entry applies
        assert switch.nothing_sent()
        table_id = b.table(ING + "acl").id
        read = [e.table_entry for e in client.read(p4r.Entity(table_entry=p4r.TableEntry(table_id=table_id)))]
        assert sorted(read, key=lambda e: e.priority) == [low, high]

    def test_match_value_checks_are_invalid_argument(self, client: harness.StreamClient, b: Builder) -> None:
        outside_mask = b.table_entry(ING + "acl", {"hdr.ethernet.ether_type": Ternary(0x0800, 0xFF00)},
                                     ActionCall(ING + "drop"), priority=1)
        outside_mask.match[0].ternary.value = b"\x08\x01"
        beyond_prefix = b.table_entry(ING + "routes", {"hdr.ipv4.dst_addr": Lpm(0x0A000000, 8)}, MemberRef(1))
        beyond_prefix.match[0].lpm.value = bytes([10, 0, 0, 1])
        no_priority = b.table_entry(ING + "acl", {"hdr.ethernet.ether_type": Ternary(0x0800, 0xFFFF)},
                                    ActionCall(ING + "drop"))
        bad_range = b.table_entry(ING + "ports", {"hdr.udp.dst_port": Range(9, 5)},
                                  ActionCall(ING + "set_class", {"flow_class": 1}), priority=1)
        codes = failed_codes(client, *(update(INSERT, table_entry=e)
                                       for e in (outside_mask, beyond_prefix, no_priority, bad_range)))
        assert codes == [INVALID] * 4

    def test_range_entry_sets_the_class_written_to_the_register(
            self, switch: harness.InProcessSwitch, client: harness.StreamClient, b: Builder) -> None:
        client.write(update(INSERT, table_entry=b.table_entry(
            ING + "ports", {"hdr.udp.dst_port": Range(4000, 4999)},
            ActionCall(ING + "set_class", {"flow_class": 7}), priority=1)))
        switch.inject(1, ipv4_udp("10.9.9.9", dport=4791))  # 4791 & 0xF = 7: register cell 7
        [cell] = client.read(p4r.Entity(register_entry=p4r.RegisterEntry(
            register_id=b.id("registers", ING + "flow_classes"), index=p4r.Index(index=7))))
        assert cell.register_entry.data.bitstring == b"\x07"


class TestOneEntryByKey:
    """A write or read that names one entry among many finds that entry by its key and touches no other."""

    def test_read_counter_modify_and_delete_of_one_entry_among_many(
            self, switch: harness.InProcessSwitch, client: harness.StreamClient, b: Builder) -> None:
        client.write(*(update(INSERT, table_entry=dmac_to(b, MAC_A + i, 1 + i % 8)) for i in range(300)))
        key = b.table_entry(ING + "dmac", {"hdr.ethernet.dst_addr": Exact(MAC_A + 123)})
        [read] = client.read(p4r.Entity(table_entry=key))
        assert read.table_entry == dmac_to(b, MAC_A + 123, 4)
        counted = b.table_entry(ING + "dmac", {"hdr.ethernet.dst_addr": Exact(MAC_A + 123)})
        counted.counter_data.byte_count, counted.counter_data.packet_count = 6400, 100
        client.write(update(MODIFY, table_entry=counted))  # no action given: the entry keeps its own
        frame = eth(MAC_A + 123)
        switch.inject(1, frame)
        assert switch.expect_sent()[0] == 4
        with_counter = b.table_entry(ING + "dmac", {"hdr.ethernet.dst_addr": Exact(MAC_A + 123)})
        with_counter.counter_data.SetInParent()
        [read] = client.read(p4r.Entity(table_entry=with_counter))
        assert read.table_entry.action == dmac_to(b, MAC_A + 123, 4).action
        assert (read.table_entry.counter_data.packet_count, read.table_entry.counter_data.byte_count) == \
            (101, 6400 + len(frame))
        client.write(update(DELETE, table_entry=key))
        assert client.read(p4r.Entity(table_entry=key)) == []
        everything = client.read(p4r.Entity(table_entry=p4r.TableEntry(table_id=key.table_id)))
        assert len(everything) == 299 and read.table_entry not in [e.table_entry for e in everything]

    def test_priority_is_part_of_the_key(self, client: harness.StreamClient, b: Builder) -> None:
        match: dict[str, Match] = {"hdr.ethernet.ether_type": Ternary(0x8800, 0xFF00)}
        entries = [b.table_entry(ING + "acl", match, ActionCall(ING + "drop" if p % 2 else "NoAction"),
                                 priority=p) for p in range(1, 41)]
        client.write(*(update(INSERT, table_entry=e) for e in entries))
        [read] = client.read(p4r.Entity(table_entry=b.table_entry(ING + "acl", match, priority=20)))
        assert read.table_entry == entries[19]
        assert client.read(p4r.Entity(table_entry=b.table_entry(ING + "acl", match, priority=41))) == []
        client.write(update(DELETE, table_entry=b.table_entry(ING + "acl", match, priority=20)))
        left = client.read(p4r.Entity(table_entry=p4r.TableEntry(table_id=entries[0].table_id)))
        assert sorted((e.table_entry for e in left), key=lambda e: e.priority) == entries[:19] + entries[20:]

    def test_members_and_groups_read_by_id(self, client: harness.StreamClient, b: Builder) -> None:
        profile = b.id("action_profiles", ING + "ecmp_selector")
        members = [p4r.ActionProfileMember(action_profile_id=profile, member_id=i,
                                           action=b.action(ING + "forward", port=i)) for i in range(1, 21)]
        client.write(*(update(INSERT, action_profile_member=m) for m in members))
        group = p4r.ActionProfileGroup(action_profile_id=profile, group_id=5, max_size=4)
        group.members.add(member_id=7, weight=2)
        client.write(update(INSERT, action_profile_group=group))
        [read] = client.read(p4r.Entity(action_profile_member=p4r.ActionProfileMember(
            action_profile_id=profile, member_id=7)))
        assert read.action_profile_member == members[6]
        [read] = client.read(p4r.Entity(action_profile_group=p4r.ActionProfileGroup(
            action_profile_id=profile, group_id=5)))
        assert read.action_profile_group == group
        assert client.read(p4r.Entity(action_profile_member=p4r.ActionProfileMember(
            action_profile_id=profile, member_id=99))) == []
        assert client.read(p4r.Entity(action_profile_group=p4r.ActionProfileGroup(
            action_profile_id=profile, group_id=6))) == []
        in_use = p4r.ActionProfileMember(action_profile_id=profile, member_id=7)
        assert failed_codes(client, update(DELETE, action_profile_member=in_use)) == [INVALID]
        client.write(update(DELETE, action_profile_group=group), update(DELETE, action_profile_member=in_use))
        assert len(client.read(p4r.Entity(action_profile_member=p4r.ActionProfileMember(
            action_profile_id=profile)))) == 19


class TestConstTables:
    def test_const_entries_are_read_but_not_written(self, client: harness.StreamClient, b: Builder) -> None:
        table = b.table(ING + "fixed")
        [const] = client.read(p4r.Entity(table_entry=p4r.TableEntry(table_id=table.id)))
        assert const.table_entry.is_const and const.table_entry.match[0].exact.value == b"\x99\x99"
        new = b.table_entry(ING + "fixed", {"hdr.ethernet.ether_type": Exact(0x1234)}, ActionCall("NoAction"))
        default = b.table_entry(ING + "fixed", action=ActionCall(ING + "drop"), default=True)
        assert failed_codes(client, update(INSERT, table_entry=new), update(MODIFY, table_entry=default)) \
            == [PERMISSION_DENIED, PERMISSION_DENIED]


class TestActionProfiles:
    def test_members_and_entries_pointing_at_them(self, switch: harness.InProcessSwitch,
                                                  client: harness.StreamClient, b: Builder) -> None:
        profile = b.id("action_profiles", ING + "nexthops")
        member = p4r.ActionProfileMember(action_profile_id=profile, member_id=1,
                                         action=b.action(ING + "forward", port=4))
        client.write(update(INSERT, action_profile_member=member))
        client.write(update(INSERT, table_entry=b.table_entry(
            ING + "routes", {"hdr.ipv4.dst_addr": Lpm(0x0A010000, 16)}, MemberRef(1))))
        switch.inject(1, ipv4_udp("10.1.2.3"))
        assert switch.expect_sent()[0] == 4
        member.action.CopyFrom(b.action(ING + "forward", port=6))
        client.write(update(MODIFY, action_profile_member=member))
        switch.inject(1, ipv4_udp("10.1.2.3"))
        assert switch.expect_sent()[0] == 6
        [read] = client.read(p4r.Entity(action_profile_member=p4r.ActionProfileMember()))
        assert read.action_profile_member == member
        missing = b.table_entry(ING + "routes", {"hdr.ipv4.dst_addr": Lpm(0x0B000000, 8)}, MemberRef(99))
        group_on_profile = p4r.ActionProfileGroup(action_profile_id=profile, group_id=1)
        assert failed_codes(client, update(INSERT, table_entry=missing),
                            update(INSERT, action_profile_group=group_on_profile)) == [NOT_FOUND, INVALID]

    def test_selector_group_spreads_flows_over_its_members(self, switch: harness.InProcessSwitch,
                                                            client: harness.StreamClient, b: Builder) -> None:
        profile = b.id("action_profiles", ING + "ecmp_selector")
        client.write(*(update(INSERT, action_profile_member=p4r.ActionProfileMember(
            action_profile_id=profile, member_id=port, action=b.action(ING + "forward", port=port)))
            for port in (2, 3)))
        group = p4r.ActionProfileGroup(action_profile_id=profile, group_id=10, max_size=8)
        group.members.add(member_id=2, weight=1)
        group.members.add(member_id=3, weight=1)
        client.write(update(INSERT, action_profile_group=group))
        client.write(update(INSERT, table_entry=b.table_entry(
            ING + "ecmp", {"hdr.ipv4.dst_addr": Exact(0x0A636363)}, GroupRef(10))))
        ports = set()
        for host in range(1, 41):
            switch.inject(1, ipv4_udp("10.99.99.99", src=f"10.0.0.{host}"))
            ports.add(switch.expect_sent()[0])
        assert ports == {2, 3}
        [read] = client.read(p4r.Entity(action_profile_group=p4r.ActionProfileGroup(
            action_profile_id=profile)))
        assert read.action_profile_group == group


    def test_one_shot_action_sets_spread_read_back_and_are_replaced(
            self, switch: harness.InProcessSwitch, client: harness.StreamClient, b: Builder) -> None:
        entry = b.table_entry(ING + "ecmp", {"hdr.ipv4.dst_addr": Exact(0x0A636363)})
        for port in (2, 3):
            entry.action.action_profile_action_set.action_profile_actions.add(
                action=b.action(ING + "forward", port=port), weight=1)
        client.write(update(INSERT, table_entry=entry))
        ports = set()
        for host in range(1, 41):
            switch.inject(1, ipv4_udp("10.99.99.99", src=f"10.0.0.{host}"))
            ports.add(switch.expect_sent()[0])
        assert ports == {2, 3}
        [read] = client.read(p4r.Entity(table_entry=p4r.TableEntry(table_id=entry.table_id)))
        assert read.table_entry == entry
        profile = b.id("action_profiles", ING + "ecmp_selector")
        assert client.read(p4r.Entity(action_profile_member=p4r.ActionProfileMember(
            action_profile_id=profile))) == []  # the hidden members of the action set do not show
        replaced = b.table_entry(ING + "ecmp", {"hdr.ipv4.dst_addr": Exact(0x0A636363)})
        replaced.action.action_profile_action_set.action_profile_actions.add(
            action=b.action(ING + "forward", port=4), weight=1)
        client.write(update(MODIFY, table_entry=replaced))
        switch.inject(1, ipv4_udp("10.99.99.99", src="10.0.0.7"))
        assert switch.expect_sent()[0] == 4
        engine_switch = switch.device.switch
        assert engine_switch is not None  # the replaced action set's hidden group and members are gone
        assert len(engine_switch.groups(ING + "ecmp_selector")) == 1
        assert len(engine_switch.members(ING + "ecmp_selector")) == 1
        member = p4r.ActionProfileMember(action_profile_id=profile, member_id=1,
                                         action=b.action(ING + "forward", port=2))
        assert failed_codes(client, update(INSERT, table_entry=entry),
                            update(INSERT, action_profile_member=member)) == [ALREADY_EXISTS, INVALID]
        client.write(update(DELETE, table_entry=replaced))
        client.write(update(INSERT, action_profile_member=member))  # no action sets left: members again
        assert engine_switch.groups(ING + "ecmp_selector") == []
        assert len(engine_switch.members(ING + "ecmp_selector")) == 1


class TestCountersMetersRegisters:
    def test_counters_count_the_packets(self, switch: harness.InProcessSwitch,
                                        client: harness.StreamClient, b: Builder) -> None:
        entry = dmac_to(b, MAC_A, 2)
        client.write(update(INSERT, table_entry=entry))
        for _ in range(3):
            switch.inject(5, eth(MAC_A))
        counter_id = b.id("counters", ING + "port_counter")
        [cell] = client.read(p4r.Entity(counter_entry=p4r.CounterEntry(
            counter_id=counter_id, index=p4r.Index(index=5))))
        assert cell.counter_entry.data == p4r.CounterData(packet_count=3, byte_count=3 * len(eth(MAC_A)))
        assert len(client.read(p4r.Entity(counter_entry=p4r.CounterEntry(counter_id=counter_id)))) == 64
        [direct] = client.read(p4r.Entity(direct_counter_entry=p4r.DirectCounterEntry(table_entry=entry)))
        assert direct.direct_counter_entry.data.packet_count == 3
        [with_data] = client.read(p4r.Entity(table_entry=p4r.TableEntry(
            table_id=entry.table_id, counter_data=p4r.CounterData())))
        assert with_data.table_entry.counter_data.packet_count == 3
        client.write(update(MODIFY, counter_entry=p4r.CounterEntry(
            counter_id=counter_id, index=p4r.Index(index=5), data=p4r.CounterData())))
        [cell] = client.read(p4r.Entity(counter_entry=p4r.CounterEntry(
            counter_id=counter_id, index=p4r.Index(index=5))))
        assert cell.counter_entry.data.packet_count == 0
        assert failed_codes(client, update(INSERT, counter_entry=p4r.CounterEntry(counter_id=counter_id))) \
            == [INVALID]

    def test_meter_config_reads_back_and_marks_red(self, switch: harness.InProcessSwitch,
                                                   client: harness.StreamClient, b: Builder) -> None:
        client.write(update(INSERT, table_entry=dmac_to(b, MAC_A, 2)))
        meter_id = b.id("meters", ING + "port_meter")
        config = p4r.MeterConfig(cir=1, cburst=1, pir=1, pburst=1)
        client.write(update(MODIFY, meter_entry=p4r.MeterEntry(
            meter_id=meter_id, index=p4r.Index(index=7), config=config)))
        [read] = client.read(p4r.Entity(meter_entry=p4r.MeterEntry(
            meter_id=meter_id, index=p4r.Index(index=7))))
        assert read.meter_entry.config == config
        for _ in range(5):  # back to back at 1 packet/s with a burst of 1: the burst passes, the rest are red
            switch.inject(7, eth(MAC_A))
        forwarded = 0
        while not switch.nothing_sent(0.2):
            forwarded += 1
        assert 1 <= forwarded < 5
        entry = dmac_to(b, MAC_A, 2)
        direct = p4r.MeterConfig(cir=1000, cburst=1500, pir=2000, pburst=3000)
        client.write(update(MODIFY, direct_meter_entry=p4r.DirectMeterEntry(
            table_entry=entry, config=direct)))
        [read] = client.read(p4r.Entity(direct_meter_entry=p4r.DirectMeterEntry(table_entry=entry)))
        assert read.direct_meter_entry.config == direct

    def test_registers_write_read_and_wildcard(self, client: harness.StreamClient, b: Builder) -> None:
        register_id = b.id("registers", ING + "flow_classes")
        client.write(update(MODIFY, register_entry=p4r.RegisterEntry(
            register_id=register_id, index=p4r.Index(index=3), data=p4d.P4Data(bitstring=b"\x2a"))))
        cells = client.read(p4r.Entity(register_entry=p4r.RegisterEntry(register_id=register_id)))
        assert len(cells) == 16
        assert {c.register_entry.index.index: c.register_entry.data.bitstring for c in cells}[3] == b"\x2a"
        too_wide = p4r.RegisterEntry(register_id=register_id, index=p4r.Index(index=3),
                                     data=p4d.P4Data(bitstring=b"\x01\x00"))
        out_of_range = p4r.RegisterEntry(register_id=register_id, index=p4r.Index(index=16),
                                         data=p4d.P4Data(bitstring=b"\x01"))
        assert failed_codes(client, update(MODIFY, register_entry=too_wide),
                            update(MODIFY, register_entry=out_of_range)) \
            == [INVALID, grpc.StatusCode.OUT_OF_RANGE.value[0]]


class TestReplication:
    def pre(self, **entry: object) -> p4r.PacketReplicationEngineEntry:
        return p4r.PacketReplicationEngineEntry(**entry)  # type: ignore[arg-type]

    def test_multicast_group_copies_and_its_lifecycle(self, switch: harness.InProcessSwitch,
                                                      client: harness.StreamClient, b: Builder) -> None:
        client.write(update(INSERT, table_entry=b.table_entry(
            ING + "dmac", {"hdr.ethernet.dst_addr": Exact(0xFFFFFFFFFFFF)},
            ActionCall(ING + "flood", {"group": 1}))))
        group = p4r.MulticastGroupEntry(multicast_group_id=1, metadata=b"m")
        group.replicas.add(port=b"\x02", instance=1)
        group.replicas.add(port=b"\x03", instance=2)
        client.write(update(INSERT, packet_replication_engine_entry=self.pre(multicast_group_entry=group)))
        switch.inject(1, eth(0xFFFFFFFFFFFF))
        assert sorted([switch.expect_sent()[0], switch.expect_sent()[0]]) == [2, 3]
        [read] = client.read(p4r.Entity(packet_replication_engine_entry=self.pre(
            multicast_group_entry=p4r.MulticastGroupEntry())))
        assert read.packet_replication_engine_entry.multicast_group_entry == group
        assert failed_codes(client, update(INSERT, packet_replication_engine_entry=self.pre(
            multicast_group_entry=group))) == [ALREADY_EXISTS]
        client.write(update(DELETE, packet_replication_engine_entry=self.pre(multicast_group_entry=group)))
        switch.inject(1, eth(0xFFFFFFFFFFFF))
        assert switch.nothing_sent()
        assert failed_codes(client, update(DELETE, packet_replication_engine_entry=self.pre(
            multicast_group_entry=group))) == [NOT_FOUND]

    def test_clone_session_copies_frames_from_port_3(self, switch: harness.InProcessSwitch,
                                                     client: harness.StreamClient, b: Builder) -> None:
        client.write(update(INSERT, table_entry=dmac_to(b, MAC_A, 2)))
        session = p4r.CloneSessionEntry(session_id=5, packet_length_bytes=0)
        session.replicas.add(port=b"\x09", instance=0)
        client.write(update(INSERT, packet_replication_engine_entry=self.pre(clone_session_entry=session)))
        switch.inject(3, eth(MAC_A))
        assert sorted([switch.expect_sent(), switch.expect_sent()]) == [(2, eth(MAC_A)), (9, eth(MAC_A))]
        [read] = client.read(p4r.Entity(packet_replication_engine_entry=self.pre(
            clone_session_entry=p4r.CloneSessionEntry())))
        assert read.packet_replication_engine_entry.clone_session_entry == session


class TestPacketIo:
    def test_packet_in_carries_the_ingress_port_as_metadata(self, switch: harness.InProcessSwitch,
                                                            client: harness.StreamClient, b: Builder,
                                                            features: harness.Program) -> None:
        client.write(update(INSERT, table_entry=b.table_entry(
            ING + "dmac", {"hdr.ethernet.dst_addr": Exact(MAC_A)}, ActionCall(ING + "to_cpu"))))
        switch.inject(6, eth(MAC_A, payload=b"punt me"))
        packet = client.next("packet").packet
        assert packet.payload == eth(MAC_A, payload=b"punt me")
        port_id = features.metadata_id("packet_in", "ingress_port")
        assert {m.metadata_id: m.value for m in packet.metadata}[port_id] == b"\x06"

    def test_packet_out_leaves_on_the_port_its_metadata_names(self, switch: harness.InProcessSwitch,
                                                              client: harness.StreamClient,
                                                              features: harness.Program) -> None:
        out = p4r.PacketOut(payload=eth(MAC_A, payload=b"from controller"))
        out.metadata.add(metadata_id=features.metadata_id("packet_out", "egress_port"), value=b"\x04")
        out.metadata.add(metadata_id=features.metadata_id("packet_out", "_pad"), value=b"\x00")
        client.send(p4r.StreamMessageRequest(packet=out))
        assert switch.expect_sent() == (4, eth(MAC_A, payload=b"from controller"))
        bad = p4r.PacketOut(payload=b"x")
        bad.metadata.add(metadata_id=999, value=b"\x01")
        client.send(p4r.StreamMessageRequest(packet=bad))
        error = client.next("error").error
        assert error.canonical_code == INVALID and error.packet_out.packet_out == bad

    def test_backup_cannot_send_packet_out(self, switch: harness.InProcessSwitch,
                                           client: harness.StreamClient, features: harness.Program) -> None:
        backup = harness.StreamClient(switch.address)
        try:
            assert backup.arbitrate(1).status.code == ALREADY_EXISTS
            backup.send(p4r.StreamMessageRequest(packet=p4r.PacketOut(payload=eth(MAC_A))))
            assert backup.next("error").error.canonical_code == PERMISSION_DENIED
            assert switch.nothing_sent()
        finally:
            backup.close()


class TestDigests:
    def configure(self, client: harness.StreamClient, b: Builder, **config: int) -> int:
        digest_id = b.id("digests", "learn_t")
        client.write(update(INSERT, digest_entry=p4r.DigestEntry(
            digest_id=digest_id, config=p4r.DigestEntry.Config(**config))))
        return digest_id

    def learnt(self, digest: p4r.DigestList) -> list[tuple[int, int]]:
        return [tuple(int.from_bytes(m.bitstring, "big") for m in d.struct.members)  # type: ignore[misc]
                for d in digest.data]

    def test_digest_lists_are_batched_deduplicated_and_acked(
            self, switch: harness.InProcessSwitch, client: harness.StreamClient, b: Builder) -> None:
        # timeouts far beyond the test: only a full list is sent, and only an ack empties the cache
        digest_id = self.configure(client, b, max_timeout_ns=600 * 10**9, max_list_size=2,
                                   ack_timeout_ns=600 * 10**9)
        switch.inject(1, eth(MAC_A, src=0x111))
        switch.inject(1, eth(MAC_A, src=0x111))  # a duplicate of a buffered message is not added
        assert client.no_message("digest", wait=0.2)
        switch.inject(2, eth(MAC_A, src=0x222))
        first = client.next("digest").digest
        assert first.digest_id == digest_id and self.learnt(first) == [(0x111, 1), (0x222, 2)]
        switch.inject(1, eth(MAC_A, src=0x111))
        switch.inject(2, eth(MAC_A, src=0x222))  # both are in the unacknowledged cache: suppressed
        assert client.no_message("digest", wait=0.3)
        client.send(p4r.StreamMessageRequest(digest_ack=p4r.DigestListAck(
            digest_id=digest_id, list_id=first.list_id)))
        for _ in range(20):  # the ack travels on the stream: repeat until the server has applied it
            switch.inject(1, eth(MAC_A, src=0x111))
            switch.inject(2, eth(MAC_A, src=0x222))
            if seconds := client.collect("digest", wait=0.1):
                break
        [second] = [m.digest for m in seconds]  # in either order: the ack may land between the two frames
        assert second.list_id != first.list_id and sorted(self.learnt(second)) == [(0x111, 1), (0x222, 2)]

    def test_unacknowledged_data_is_sent_again_after_ack_timeout(
            self, switch: harness.InProcessSwitch, client: harness.StreamClient, b: Builder) -> None:
        now = [1000.0]  # the engine's clock, moved by hand: a loaded machine cannot age the cache early
        switch.service.digests.clock = lambda: now[0]
        self.configure(client, b, max_timeout_ns=0, max_list_size=1, ack_timeout_ns=300_000_000)
        switch.inject(1, eth(MAC_A, src=0x555))
        first = client.next("digest").digest
        now[0] += 0.299
        switch.inject(1, eth(MAC_A, src=0x555))  # in the cache: not sent again before the ack timeout
        assert client.no_message("digest", wait=0.1)
        now[0] += 0.001  # the cache entry expires 300 ms after it was sent without an ack
        switch.inject(1, eth(MAC_A, src=0x555))
        second = client.next("digest").digest
        assert self.learnt(second) == self.learnt(first) == [(0x555, 1)]
        assert second.list_id == first.list_id + 1

    def test_max_timeout_flushes_a_partial_list(self, switch: harness.InProcessSwitch,
                                                client: harness.StreamClient, b: Builder) -> None:
        self.configure(client, b, max_timeout_ns=50_000_000, max_list_size=100, ack_timeout_ns=0)
        switch.inject(4, eth(MAC_A, src=0x444))
        digest = client.next("digest").digest
        assert self.learnt(digest) == [(0x444, 4)]
        [entry] = client.read(p4r.Entity(digest_entry=p4r.DigestEntry()))
        assert entry.digest_entry.config.max_list_size == 100


def test_wildcard_read_of_all_tables(client: harness.StreamClient, b: Builder) -> None:
    client.write(update(INSERT, table_entry=dmac_to(b, MAC_A, 2)),
                 update(INSERT, table_entry=b.table_entry(ING + "acl", {"hdr.ethernet.ether_type": Ternary(
                     0x0800, 0xFFFF)}, ActionCall(ING + "drop"), priority=5)))
    tables = {e.table_entry.table_id for e in client.read(p4r.Entity(table_entry=p4r.TableEntry()))}
    assert tables == {b.table(ING + n).id for n in ("dmac", "acl", "fixed")}


def test_write_with_a_stale_election_id_is_permission_denied(client: harness.StreamClient,
                                                             b: Builder) -> None:
    request = p4r.WriteRequest(device_id=harness.DEVICE_ID,
                               updates=[update(INSERT, table_entry=dmac_to(b, 1, 2))])
    request.election_id.CopyFrom(U128.encode(1))
    with pytest.raises(grpc.RpcError) as err:
        client.stub.Write(request)
    assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED


def test_p4info_of_another_program_is_refused(switch: harness.InProcessSwitch, features: harness.Program,
                                              l2fwd: harness.Program) -> None:
    mismatched = harness.Program(l2fwd.json, features.p4info, l2fwd.json_path, features.p4info_path)
    with harness.primary_client(switch.address) as client:
        with pytest.raises(grpc.RpcError) as err:
            client.set_pipeline(mismatched)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "does not match" in (err.value.details() or "")
    assert switch.device.switch is None
