"""p4_device_config as BMv2's P4Runtime server reads it: the program JSON itself or PI's
p4.tmp.P4DeviceConfig around it (what p4lang/tutorials' client sends); the P4Info is still checked against
the program, and a program p4switch cannot run is refused naming what it cannot run."""

from __future__ import annotations

import json

import grpc
import pytest
from finsy.proto import p4r

from p4switch.runtime import device_config
from p4switch.tests.runtime import harness
from p4switch.tests.runtime.harness import update
from p4switch.tests.runtime.test_p4runtime_l2 import dmac_entry, frame_to

HOST = bytes.fromhex("02000000000b")
L2FWD_BMV2 = harness.HERE.parent / "bmv2json" / "data" / "l2fwd.bmv2.json"
"""l2fwd.p4 as p4c-bm2-ss lays it out, written by hand: the same names as p4switch-cc's P4Info."""


def with_config(program: harness.Program, config: bytes) -> harness.Program:
    return harness.Program(config, program.p4info, program.json_path, program.p4info_path)


def refusal(switch: harness.InProcessSwitch, program: harness.Program) -> str:
    """The INVALID_ARGUMENT message SetForwardingPipelineConfig answers ``program`` with."""
    with harness.primary_client(switch.address) as client, pytest.raises(grpc.RpcError) as err:
        client.set_pipeline(program)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert switch.device.switch is None
    return str(err.value.details())


def test_wrap_is_pi_p4_tmp_p4deviceconfig_on_the_wire() -> None:
    """Fields reassign = 1 (varint), extras = 2 (map kv = 1), device_data = 3, as PI's p4config.proto."""
    entry = b"\x0a\x04port" + b"\x12\x049090"
    extras = b"\x0a" + bytes([len(entry)]) + entry
    expected = b"\x08\x01" + b"\x12" + bytes([len(extras)]) + extras + b"\x1a\x05{...}"
    assert device_config.wrap(b"{...}", extras={"port": "9090"}) == expected
    unwrapped = device_config.DeviceConfig(b"{...}", wrapped=True, reassign=True, extras={"port": "9090"})
    assert device_config.unwrap(expected) == unwrapped
    assert device_config.unwrap(b'  \n{"format": 1}') == device_config.DeviceConfig(b'  \n{"format": 1}')


def test_wrapped_program_runs_and_get_returns_what_was_set(switch: harness.InProcessSwitch,
                                                           l2fwd: harness.Program) -> None:
    wrapped = device_config.wrap(l2fwd.json, extras={"port": "9090"})
    with harness.primary_client(switch.address, with_config(l2fwd, wrapped)) as client:
        client.write(update(p4r.Update.INSERT, table_entry=dmac_entry(l2fwd, HOST, b"\x02")))
        switch.inject(1, frame_to(HOST))
        assert switch.expect_sent() == (2, frame_to(HOST))
        got = client.stub.GetForwardingPipelineConfig(p4r.GetForwardingPipelineConfigRequest(
            device_id=harness.DEVICE_ID, response_type=p4r.GetForwardingPipelineConfigRequest.ALL))
        assert got.config.p4_device_config == wrapped
    assert switch.device.device_config == l2fwd.json


def test_bare_program_json_still_runs(switch: harness.InProcessSwitch, l2fwd: harness.Program) -> None:
    with harness.primary_client(switch.address, l2fwd) as client:
        client.write(update(p4r.Update.INSERT, table_entry=dmac_entry(l2fwd, HOST, b"\x03")))
        switch.inject(1, frame_to(HOST))
        assert switch.expect_sent() == (3, frame_to(HOST))


def test_neither_json_nor_p4deviceconfig_is_refused(switch: harness.InProcessSwitch,
                                                     l2fwd: harness.Program) -> None:
    message = refusal(switch, with_config(l2fwd, b"\xff\xff\xff garbage"))
    assert "neither program JSON nor a p4.tmp.P4DeviceConfig" in message


def test_p4deviceconfig_without_device_data_is_refused(switch: harness.InProcessSwitch,
                                                        l2fwd: harness.Program) -> None:
    message = refusal(switch, with_config(l2fwd, device_config.wrap(b"")))
    assert "without device_data" in message


def test_p4info_of_another_program_is_refused_inside_the_wrapper(switch: harness.InProcessSwitch,
                                                                 l2fwd: harness.Program) -> None:
    router = harness.SHARED_PROGRAMS / "basic_router.p4"
    other = harness.compile_program(router, l2fwd.json_path.parent / "other")
    program = harness.Program(device_config.wrap(l2fwd.json), other.p4info, l2fwd.json_path,
                              l2fwd.p4info_path)
    assert "does not match the device config" in refusal(switch, program)


def test_bmv2_json_in_p4deviceconfig_runs_with_its_p4info(switch: harness.InProcessSwitch,
                                                          l2fwd: harness.Program) -> None:
    """What p4lang/tutorials' client sends: p4c's BMv2 JSON inside P4DeviceConfig (here the hand-written
    l2fwd, checked against p4switch-cc's P4Info of l2fwd.p4)."""
    wrapped = device_config.wrap(L2FWD_BMV2.read_bytes())
    with harness.primary_client(switch.address, with_config(l2fwd, wrapped)) as client:
        client.write(update(p4r.Update.INSERT, table_entry=dmac_entry(l2fwd, HOST, b"\x02")))
        switch.inject(1, frame_to(HOST))
        assert switch.expect_sent() == (2, frame_to(HOST))


def test_bmv2_json_p4switch_cannot_run_is_refused_naming_the_construct(
        switch: harness.InProcessSwitch, l2fwd: harness.Program) -> None:
    doc = json.loads(L2FWD_BMV2.read_text())
    doc["extern_instances"] = [{"name": "MyIngress.x", "id": 0, "type": "my_extern", "attribute_values": []}]
    message = refusal(switch, with_config(l2fwd, device_config.wrap(json.dumps(doc).encode())))
    expected = "BMv2 JSON: extern_instances (MyIngress.x): extern my_extern is not supported by p4switch"
    assert expected in message
