"""P4Runtime through a real gRPC client against the L2 forwarder: pipeline push/get, table entries with
their error codes, batches with per-update errors, and frames forwarded by what was written."""

from __future__ import annotations

import grpc
import pytest
from finsy.proto import p4r

from p4switch.tests.runtime import harness
from p4switch.tests.runtime.harness import error_details, update

INSERT, MODIFY, DELETE = p4r.Update.INSERT, p4r.Update.MODIFY, p4r.Update.DELETE
DMAC, FORWARD, DROP = "L2Ingress.dmac", "L2Ingress.forward", "L2Ingress.drop"
HOST_MAC = bytes.fromhex("020000000001")


def dmac_entry(program: harness.Program, mac: bytes, port: bytes | None = None) -> p4r.TableEntry:
    entry = p4r.TableEntry(table_id=program.name_to_id("tables", DMAC))
    entry.match.add(field_id=program.field_id(DMAC, "hdr.ethernet.dst_addr"),
                    exact=p4r.FieldMatch.Exact(value=mac))
    if port is not None:
        action = entry.action.action
        action.action_id = program.name_to_id("actions", FORWARD)
        action.params.add(param_id=program.param_id(FORWARD, "port"), value=port)
    return entry


def frame_to(mac: bytes, payload: bytes = b"hello") -> bytes:
    return mac + bytes.fromhex("020000000099") + b"\x88\xb5" + payload


class TestPipelineConfig:
    def test_capabilities_names_the_api_version(self, switch: harness.InProcessSwitch) -> None:
        with harness.primary_client(switch.address) as client:
            assert client.stub.Capabilities(p4r.CapabilitiesRequest()).p4runtime_api_version.startswith("1.")

    def test_get_returns_what_was_set_for_each_response_type(self, switch: harness.InProcessSwitch,
                                                             l2fwd: harness.Program) -> None:
        with harness.primary_client(switch.address) as client:
            empty = client.stub.GetForwardingPipelineConfig(
                p4r.GetForwardingPipelineConfigRequest(device_id=harness.DEVICE_ID))
            assert not empty.HasField("config")
            client.set_pipeline(l2fwd, cookie=77)
            Get = p4r.GetForwardingPipelineConfigRequest
            got = {kind: client.stub.GetForwardingPipelineConfig(
                Get(device_id=harness.DEVICE_ID, response_type=kind)).config for kind in
                (Get.ALL, Get.COOKIE_ONLY, Get.P4INFO_AND_COOKIE, Get.DEVICE_CONFIG_AND_COOKIE)}
        assert got[Get.ALL].p4info == l2fwd.p4info and got[Get.ALL].p4_device_config == l2fwd.json
        assert all(c.cookie.cookie == 77 for c in got.values())
        assert not got[Get.COOKIE_ONLY].HasField("p4info") and not got[Get.COOKIE_ONLY].p4_device_config
        assert got[Get.P4INFO_AND_COOKIE].p4info == l2fwd.p4info
        assert not got[Get.P4INFO_AND_COOKIE].p4_device_config
        assert got[Get.DEVICE_CONFIG_AND_COOKIE].p4_device_config == l2fwd.json
        assert not got[Get.DEVICE_CONFIG_AND_COOKIE].HasField("p4info")

    def test_verify_checks_without_installing(self, switch: harness.InProcessSwitch,
                                              l2fwd: harness.Program) -> None:
        with harness.primary_client(switch.address) as client:
            client.set_pipeline(l2fwd, action="VERIFY")
            assert switch.device.switch is None
            with pytest.raises(grpc.RpcError) as err:
                client.write(update(INSERT, table_entry=dmac_entry(l2fwd, HOST_MAC, b"\x01")))
            assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION

    def test_verify_and_save_then_commit(self, switch: harness.InProcessSwitch,
                                         l2fwd: harness.Program) -> None:
        with harness.primary_client(switch.address) as client:
            with pytest.raises(grpc.RpcError) as err:
                client.stub.SetForwardingPipelineConfig(client.stamped(harness.SetPipeline(
                    device_id=harness.DEVICE_ID, action=harness.SetPipeline.COMMIT)))
            assert err.value.code() == grpc.StatusCode.NOT_FOUND
            client.set_pipeline(l2fwd, action="VERIFY_AND_SAVE")
            assert switch.device.switch is None
            client.stub.SetForwardingPipelineConfig(client.stamped(harness.SetPipeline(
                device_id=harness.DEVICE_ID, action=harness.SetPipeline.COMMIT)))
            assert switch.device.switch is not None

    def test_garbage_device_config_is_invalid_argument(self, switch: harness.InProcessSwitch,
                                                       l2fwd: harness.Program) -> None:
        broken = harness.Program(b"{not json", l2fwd.p4info, l2fwd.json_path, l2fwd.p4info_path)
        with harness.primary_client(switch.address) as client:
            with pytest.raises(grpc.RpcError) as err:
                client.set_pipeline(broken)
            assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert switch.device.switch is None

    def test_reconcile_is_unimplemented(self, switch: harness.InProcessSwitch,
                                        l2fwd: harness.Program) -> None:
        with harness.primary_client(switch.address) as client:
            with pytest.raises(grpc.RpcError) as err:
                client.set_pipeline(l2fwd, action="RECONCILE_AND_COMMIT")
            assert err.value.code() == grpc.StatusCode.UNIMPLEMENTED


class TestTableEntries:
    def test_inserted_entry_forwards_and_reads_back_canonical(self, switch: harness.InProcessSwitch,
                                                              l2_client: harness.StreamClient,
                                                              l2fwd: harness.Program) -> None:
        # full-width value on the wire, canonical (leading zeros stripped) on read-back
        l2_client.write(update(INSERT, table_entry=dmac_entry(l2fwd, HOST_MAC, b"\x00\x03")))
        switch.inject(1, frame_to(HOST_MAC))
        assert switch.expect_sent() == (3, frame_to(HOST_MAC))
        [read] = l2_client.read(p4r.Entity(table_entry=p4r.TableEntry()))
        assert read.table_entry == dmac_entry(l2fwd, HOST_MAC, b"\x03")

    def test_modify_changes_the_port_and_delete_drops(self, switch: harness.InProcessSwitch,
                                                      l2_client: harness.StreamClient,
                                                      l2fwd: harness.Program) -> None:
        l2_client.write(update(INSERT, table_entry=dmac_entry(l2fwd, HOST_MAC, b"\x02")))
        l2_client.write(update(MODIFY, table_entry=dmac_entry(l2fwd, HOST_MAC, b"\x05")))
        switch.inject(1, frame_to(HOST_MAC))
        assert switch.expect_sent()[0] == 5
        l2_client.write(update(DELETE, table_entry=dmac_entry(l2fwd, HOST_MAC)))
        switch.inject(1, frame_to(HOST_MAC))
        assert switch.nothing_sent()
        assert l2_client.read(p4r.Entity(table_entry=p4r.TableEntry())) == []

    def test_read_one_entry_by_key_and_all_of_a_table(self, l2_client: harness.StreamClient,
                                                      l2fwd: harness.Program) -> None:
        macs = [bytes([2, 0, 0, 0, 0, i]) for i in range(1, 6)]
        l2_client.write(*(update(INSERT, table_entry=dmac_entry(l2fwd, mac, bytes([i + 1])))
                          for i, mac in enumerate(macs)))
        table_id = l2fwd.name_to_id("tables", DMAC)
        everything = l2_client.read(p4r.Entity(table_entry=p4r.TableEntry(table_id=table_id)))
        assert sorted(e.table_entry.match[0].exact.value for e in everything) == macs
        [one] = l2_client.read(p4r.Entity(table_entry=dmac_entry(l2fwd, macs[2])))
        assert one.table_entry.action.action.params[0].value == b"\x03"

    def test_default_entry_modify_and_reset(self, switch: harness.InProcessSwitch,
                                            l2_client: harness.StreamClient, l2fwd: harness.Program) -> None:
        default = p4r.TableEntry(table_id=l2fwd.name_to_id("tables", DMAC), is_default_action=True)
        default.action.action.action_id = l2fwd.name_to_id("actions", FORWARD)
        default.action.action.params.add(param_id=l2fwd.param_id(FORWARD, "port"), value=b"\x07")
        l2_client.write(update(MODIFY, table_entry=default))
        switch.inject(1, frame_to(HOST_MAC))
        assert switch.expect_sent()[0] == 7
        [read] = l2_client.read(p4r.Entity(table_entry=p4r.TableEntry(
            table_id=default.table_id, is_default_action=True)))
        assert read.table_entry.action == default.action
        reset = p4r.TableEntry(table_id=default.table_id, is_default_action=True)
        l2_client.write(update(MODIFY, table_entry=reset))
        switch.inject(1, frame_to(HOST_MAC))
        assert switch.nothing_sent()
        with pytest.raises(grpc.RpcError) as err:
            l2_client.write(update(INSERT, table_entry=default))
        assert error_details(err.value)[0].canonical_code == grpc.StatusCode.INVALID_ARGUMENT.value[0]


class TestWriteErrors:
    """Each failing update is reported with its canonical code in the per-update details."""

    def failed(self, client: harness.StreamClient, *updates: p4r.Update) -> list[int]:
        with pytest.raises(grpc.RpcError) as err:
            client.write(*updates)
        assert err.value.code() == grpc.StatusCode.UNKNOWN
        details = error_details(err.value)
        assert len(details) == len(updates)
        return [d.canonical_code for d in details]

    def test_duplicate_insert_is_already_exists(self, l2_client: harness.StreamClient,
                                                l2fwd: harness.Program) -> None:
        entry = dmac_entry(l2fwd, HOST_MAC, b"\x01")
        l2_client.write(update(INSERT, table_entry=entry))
        codes = self.failed(l2_client, update(INSERT, table_entry=entry))
        assert codes == [grpc.StatusCode.ALREADY_EXISTS.value[0]]

    def test_missing_entry_is_not_found_for_delete_and_modify(self, l2_client: harness.StreamClient,
                                                              l2fwd: harness.Program) -> None:
        codes = self.failed(l2_client, update(DELETE, table_entry=dmac_entry(l2fwd, HOST_MAC)),
                            update(MODIFY, table_entry=dmac_entry(l2fwd, HOST_MAC, b"\x01")))
        assert codes == [grpc.StatusCode.NOT_FOUND.value[0]] * 2

    def test_unknown_ids_are_not_found(self, l2_client: harness.StreamClient, l2fwd: harness.Program) -> None:
        bad_table = dmac_entry(l2fwd, HOST_MAC, b"\x01")
        bad_table.table_id = 0x02FFFFFF
        bad_action = dmac_entry(l2fwd, HOST_MAC, b"\x01")
        bad_action.action.action.action_id = 0x01FFFFFF
        codes = self.failed(l2_client, update(INSERT, table_entry=bad_table),
                            update(INSERT, table_entry=bad_action))
        assert codes == [grpc.StatusCode.NOT_FOUND.value[0]] * 2

    def test_bad_match_field_width_is_invalid_argument(self, l2_client: harness.StreamClient,
                                                       l2fwd: harness.Program) -> None:
        too_wide = dmac_entry(l2fwd, b"\x01" + HOST_MAC, b"\x01")
        wide_port = dmac_entry(l2fwd, HOST_MAC, b"\x02\x00")  # 512 does not fit bit<9>
        with pytest.raises(grpc.RpcError) as err:
            l2_client.write(update(INSERT, table_entry=too_wide), update(INSERT, table_entry=wide_port))
        details = error_details(err.value)
        assert [d.canonical_code for d in details] == [grpc.StatusCode.INVALID_ARGUMENT.value[0]] * 2
        assert "bad match field" in details[0].message and "width" in details[0].message

    def test_batch_reports_ok_for_the_updates_that_succeeded(self, switch: harness.InProcessSwitch,
                                                            l2_client: harness.StreamClient,
                                                            l2fwd: harness.Program) -> None:
        good = dmac_entry(l2fwd, HOST_MAC, b"\x04")
        missing = dmac_entry(l2fwd, bytes.fromhex("020000000077"))
        codes = self.failed(l2_client, update(INSERT, table_entry=good), update(DELETE, table_entry=missing))
        assert codes == [0, grpc.StatusCode.NOT_FOUND.value[0]]
        switch.inject(1, frame_to(HOST_MAC))
        assert switch.expect_sent()[0] == 4

    def test_idle_timeout_on_a_table_without_it_is_invalid(self, l2_client: harness.StreamClient,
                                                            l2fwd: harness.Program) -> None:
        entry = dmac_entry(l2fwd, HOST_MAC, b"\x01")
        entry.idle_timeout_ns = 10**9
        assert self.failed(l2_client, update(INSERT, table_entry=entry)) == [
            grpc.StatusCode.INVALID_ARGUMENT.value[0]]

    def test_write_before_any_pipeline_is_failed_precondition(self, switch: harness.InProcessSwitch,
                                                               l2fwd: harness.Program) -> None:
        with harness.primary_client(switch.address) as client:
            with pytest.raises(grpc.RpcError) as err:
                client.write(update(INSERT, table_entry=dmac_entry(l2fwd, HOST_MAC, b"\x01")))
            assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION


def test_read_reports_per_entity_errors_after_the_entities_it_found(l2_client: harness.StreamClient,
                                                                    l2fwd: harness.Program) -> None:
    l2_client.write(update(INSERT, table_entry=dmac_entry(l2fwd, HOST_MAC, b"\x01")))
    found: list[p4r.Entity] = []
    request = p4r.ReadRequest(device_id=harness.DEVICE_ID, entities=[
        p4r.Entity(table_entry=p4r.TableEntry()),
        p4r.Entity(table_entry=p4r.TableEntry(table_id=0x02FFFFFF))])
    with pytest.raises(grpc.RpcError) as err:
        for response in l2_client.stub.Read(request):
            found.extend(response.entities)
    assert err.value.code() == grpc.StatusCode.UNKNOWN
    assert [d.canonical_code for d in error_details(err.value)] == [0, grpc.StatusCode.NOT_FOUND.value[0]]
    assert [e.table_entry for e in found] == [dmac_entry(l2fwd, HOST_MAC, b"\x01")]


def test_entry_metadata_is_returned_on_read(l2_client: harness.StreamClient, l2fwd: harness.Program) -> None:
    entry = dmac_entry(l2fwd, HOST_MAC, b"\x01")
    entry.metadata, entry.controller_metadata = b"owner=sm", 42
    l2_client.write(update(INSERT, table_entry=entry))
    [read] = l2_client.read(p4r.Entity(table_entry=p4r.TableEntry()))
    assert read.table_entry == entry
    entry.metadata, entry.controller_metadata = b"", 0
    l2_client.write(update(MODIFY, table_entry=entry))
    [read] = l2_client.read(p4r.Entity(table_entry=p4r.TableEntry()))
    assert read.table_entry == entry
