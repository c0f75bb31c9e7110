"""The `p4switch` process on veth pairs: frames in and out of real interfaces, P4Runtime over TCP,
packet-out/packet-in through the CPU port, pcap files, clean SIGTERM shutdown, and garbage frames that
must not stop it. Every veth and process is removed even when a test fails."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from finsy.proto import p4r

from p4switch.tests.runtime import harness
from p4switch.tests.runtime.harness import RawPort, update
from p4switch.tests.runtime.test_p4runtime_l2 import dmac_entry, frame_to

INSERT = p4r.Update.INSERT
HOST_A, HOST_B = bytes.fromhex("02000000000a"), bytes.fromhex("02000000000b")


@pytest.fixture
def veths() -> Iterator[list[tuple[str, str]]]:
    with harness.veth_pairs(2, harness.unique_prefix("p4p")) as pairs:
        yield pairs


@pytest.fixture
def hosts(veths: list[tuple[str, str]]) -> Iterator[list[RawPort]]:
    ports = [RawPort(host) for _, host in veths]
    try:
        yield ports
    finally:
        for port in ports:
            port.close()


def interface_args(veths: list[tuple[str, str]]) -> list[str]:
    return [arg for i, (sw, _) in enumerate(veths) for arg in ("-i", f"{i + 1}@{sw}")]


def program_l2(client: harness.StreamClient, program: harness.Program) -> None:
    """Ports 1 and 2 (veths 0 and 1) for hosts A and B."""
    client.write(update(INSERT, table_entry=dmac_entry(program, HOST_A, b"\x01")),
                 update(INSERT, table_entry=dmac_entry(program, HOST_B, b"\x02")))


def test_forwards_between_veths_traces_and_stops_cleanly_on_sigterm(
        tmp_path: Path, veths: list[tuple[str, str]], hosts: list[RawPort], l2fwd: harness.Program) -> None:
    log = tmp_path / "s1.log"
    args = [*interface_args(veths), "--pcap", str(tmp_path), "--log-level", "trace", str(l2fwd.json_path)]
    with harness.switch_process(args, log) as proc, harness.primary_client(proc.address, l2fwd) as client:
        program_l2(client, l2fwd)
        hosts[0].send(frame_to(HOST_B, b"to b"))
        assert hosts[1].receive(match=HOST_B) == frame_to(HOST_B, b"to b")
        hosts[1].send(frame_to(HOST_A, b"to a"))
        assert hosts[0].receive(match=HOST_A) == frame_to(HOST_A, b"to a")
        tagged = HOST_B + HOST_A + bytes.fromhex("81000064") + b"\x88\xb5vlan 100"
        hosts[0].send(tagged)  # the kernel strips 802.1Q tags on receive: the switch must put them back
        assert hosts[1].receive(match=HOST_B) == tagged
        hosts[0].send(frame_to(bytes.fromhex("02000000ffff")))  # no entry: dropped by the default action
        assert hosts[1].receive(timeout=0.3, match=bytes.fromhex("02000000ffff")) is None
        assert hosts[0].receive(timeout=0.3, match=HOST_B) is None  # never echoed back to its sender
        status = proc.stop()
    assert status == 0
    text = proc.log_file.read_text()
    assert "[dev 1]" in text and "SIGTERM received" in text
    assert "TRACE" in text and "L2Ingress.dmac" in text  # the engine's per-packet trace names the table
    assert all(line.count("[dev 1]") == 1 for line in text.splitlines() if line[:4].isdigit())
    out_b = (tmp_path / f"{veths[1][0]}_out.pcap").read_bytes()
    assert frame_to(HOST_B, b"to b") in out_b and out_b[:4] == bytes.fromhex("d4c3b2a1")


def test_no_p4_bmv2_style_flags_wait_for_the_pipeline_and_sigint_stops(
        tmp_path: Path, veths: list[tuple[str, str]], hosts: list[RawPort], l2fwd: harness.Program) -> None:
    bmv2_style = ["--no-p4", "--log-console", "--thrift-port", "9090", "--", "--cpu-port", "64"]
    with harness.switch_process([*interface_args(veths), *bmv2_style], tmp_path / "s.log") as proc:
        assert any("--thrift-port" in line and "ignored" in line for line in proc.output)
        hosts[0].send(frame_to(HOST_B))  # no pipeline yet: nothing comes out
        assert hosts[1].receive(timeout=0.3, match=HOST_B) is None
        with harness.primary_client(proc.address, l2fwd) as client:
            program_l2(client, l2fwd)
            hosts[0].send(frame_to(HOST_B, b"now"))
            assert hosts[1].receive(match=HOST_B) == frame_to(HOST_B, b"now")
        proc.proc.send_signal(signal.SIGINT)
        assert proc.proc.wait(timeout=10) == 0


def test_packet_out_leaves_on_a_port_and_packet_in_reaches_the_primary(
        tmp_path: Path, veths: list[tuple[str, str]], hosts: list[RawPort], l2fwd: harness.Program) -> None:
    """l2fwd has no controller header: packet-out is the bare frame from the CPU port, and frames
    forwarded to the CPU port arrive whole as PacketIn."""
    cpu = harness.CPU_PORT
    args = [*interface_args(veths), "--cpu-port", str(cpu), "--no-p4"]
    with harness.switch_process(args, tmp_path / "s.log") as proc, \
            harness.primary_client(proc.address, l2fwd) as client:
        program_l2(client, l2fwd)
        controller_mac = bytes.fromhex("02000000c0c0")
        client.write(update(INSERT, table_entry=dmac_entry(l2fwd, controller_mac, bytes([cpu]))))
        client.send(p4r.StreamMessageRequest(packet=p4r.PacketOut(payload=frame_to(HOST_B, b"from cpu"))))
        assert hosts[1].receive(match=HOST_B) == frame_to(HOST_B, b"from cpu")
        hosts[0].send(frame_to(controller_mac, b"to controller"))
        assert client.next("packet").packet.payload == frame_to(controller_mac, b"to controller")


def test_garbage_frames_do_not_stop_the_switch(
        tmp_path: Path, veths: list[tuple[str, str]], hosts: list[RawPort], l2fwd: harness.Program) -> None:
    rng = random.Random(2)
    args = [*interface_args(veths), str(l2fwd.json_path)]
    with harness.switch_process(args, tmp_path / "s.log") as proc, \
            harness.primary_client(proc.address, l2fwd) as client:
        program_l2(client, l2fwd)
        good = frame_to(HOST_B, b"good")
        for i in range(3000):
            size = rng.choice((14, 15, 60, rng.randrange(14, 1500)))
            frame = bytearray(rng.randbytes(size))
            if i % 3 == 0:  # a mutation of a good frame keeps some of them on the forwarding path
                frame[:len(good)] = good[:size]
            frame[0] &= 0xFE  # unicast destination, so the kernel does not add noise
            hosts[0].send(bytes(frame))
        assert client.stub.Capabilities(p4r.CapabilitiesRequest()).p4runtime_api_version
        deadline = time.monotonic() + harness.EFFECT_TIMEOUT
        while time.monotonic() < deadline:  # drain what the mutated frames produced, then the good one
            hosts[0].send(good)
            if hosts[1].receive(timeout=0.5, match=good) == good:
                break
        else:
            pytest.fail("a good frame was not forwarded after the garbage")
        assert proc.proc.poll() is None and os.path.exists(proc.log_file)


def test_a_second_switch_on_the_same_grpc_port_fails(tmp_path: Path) -> None:
    with harness.switch_process(["--no-p4"], tmp_path / "first.log") as first:
        second = subprocess.run(
            [str(harness.VENV_BIN / "p4switch"), "--no-p4", "--grpc-server-addr", first.address,
             "--log-file", str(tmp_path / "second.log")], capture_output=True, text=True,
            timeout=180)  # bounds a hang: its imports alone took over 30 s on a loaded machine
        assert second.returncode != 0 and "cannot listen" in second.stderr
        assert first.proc.poll() is None


@pytest.mark.parametrize("engine", ["native", "python"])
def test_the_stats_file_has_every_ports_counters_and_kernel_drops(
        tmp_path: Path, veths: list[tuple[str, str]], hosts: list[RawPort], l2fwd: harness.Program,
        engine: str) -> None:
    stats = tmp_path / "s1.stats.json"
    args = [*interface_args(veths), "--engine", engine, "--stats-file", str(stats), str(l2fwd.json_path)]
    with harness.switch_process(args, tmp_path / "s1.log") as proc, \
            harness.primary_client(proc.address, l2fwd) as client:
        program_l2(client, l2fwd)
        hosts[0].send(frame_to(HOST_B, b"to b"))
        assert hosts[1].receive(match=HOST_B) == frame_to(HOST_B, b"to b")
        assert proc.stop() == 0
    ports = json.loads(stats.read_text())["ports"]  # written at exit, after the frame
    assert set(ports) == {"1", "2"}
    assert ports["1"]["rx"] >= 1 and ports["2"]["tx"] >= 1
    assert all(counts["kernel_drops"] >= 0 for counts in ports.values())
    assert not stats.with_name(stats.name + ".tmp").exists()
