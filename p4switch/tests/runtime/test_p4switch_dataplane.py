"""The AF_PACKET data plane in this process, with the receive ring and with the recvmsg path that kernels
refusing rings get: frames forwarded between veths, 802.1Q tags kept, pcap files and port counters."""

from __future__ import annotations

import logging
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from p4switch.dataplane import Dataplane, open_port
from p4switch.engine import api as engine
from p4switch.pcapfiles import read_pcap
from p4switch.runtime.device import Device
from p4switch.tests.runtime import harness
from p4switch.tests.runtime.test_p4runtime_l2 import frame_to
from p4switch.tests.runtime.test_p4switch_process import HOST_A, HOST_B


@pytest.fixture(params=[True, False], ids=["ring", "recvmsg"])
def running(request: pytest.FixtureRequest, l2fwd: harness.Program, tmp_path: Path
            ) -> Iterator[tuple[Dataplane, list[harness.RawPort]]]:
    log = logging.getLogger("p4switch.test.dataplane")
    device = Device(1, None, log)
    switch = device.load(l2fwd.json)
    for mac, port in ((HOST_A, 1), (HOST_B, 2)):
        switch.table_insert("L2Ingress.dmac", engine.TableEntry(
            {"hdr.ethernet.dst_addr": engine.Exact(int.from_bytes(mac, "big"))},
            engine.ActionCall("L2Ingress.forward", {"port": port})))
    device.install(switch, l2fwd.json)
    with harness.veth_pairs(2, harness.unique_prefix("p4d")) as pairs:
        ports = [open_port(i + 1, sw, str(tmp_path), use_ring=request.param)
                 for i, (sw, _) in enumerate(pairs)]
        assert all((p.ring is not None) == request.param for p in ports)
        dataplane = Dataplane(device, ports, log)
        hosts = [harness.RawPort(host) for _, host in pairs]
        stop = threading.Event()
        loop = threading.Thread(target=dataplane.run, args=(stop,), daemon=True)
        loop.start()
        try:
            yield dataplane, hosts
        finally:
            stop.set()
            loop.join(timeout=5)
            dataplane.close()
            for host in hosts:
                host.close()


def test_frames_cross_with_their_vlan_tags_and_are_counted(running: tuple[Dataplane, list[harness.RawPort]],
                                                           tmp_path: Path) -> None:
    dataplane, hosts = running
    tagged = HOST_B + HOST_A + bytes.fromhex("8100 2064".replace(" ", "")) + b"\x88\xb5tagged"
    for _ in range(50):
        hosts[0].send(frame_to(HOST_B))
        assert hosts[1].receive(match=HOST_B) == frame_to(HOST_B)
    hosts[0].send(tagged)
    assert hosts[1].receive(match=HOST_B) == tagged
    hosts[1].send(frame_to(HOST_A, b"back"))
    assert hosts[0].receive(match=HOST_A) == frame_to(HOST_A, b"back")
    port1, port2 = dataplane.ports[1], dataplane.ports[2]
    deadline = time.monotonic() + harness.EFFECT_TIMEOUT  # the loop adds a burst's counts after the burst
    while (port1.rx, port2.tx, port2.rx, port1.tx) != (51, 51, 1, 1) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert (port1.rx, port2.tx, port2.rx, port1.tx) == (51, 51, 1, 1)
    assert port2.tx_bytes == 50 * len(frame_to(HOST_B)) + len(tagged)
    assert tagged in (tmp_path / f"{port1.iface}_in.pcap").read_bytes()


def test_packet_out_threads_and_the_receive_loop_share_a_port_without_tearing_its_pcap(
        running: tuple[Dataplane, list[harness.RawPort]], tmp_path: Path) -> None:
    """PacketOut frames are sent from gRPC threads while the receive loop forwards on the same port: every
    frame still leaves whole, is counted once and is one intact record of the port's out capture."""
    dataplane, hosts = running
    forwarded = [frame_to(HOST_B, b"fwd %d" % i) for i in range(200)]
    injected = [[frame_to(HOST_B, b"out %d %d " % (t, i) + bytes(i % 50)) for i in range(200)]
                for t in range(4)]
    switching = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # hand the GIL over between any two bytecodes: interleavings happen
    try:
        def packet_out(frames: list[bytes]) -> None:
            for frame in frames:
                dataplane.transmit(2, frame)

        threads = [threading.Thread(target=packet_out, args=(frames,)) for frames in injected]
        for thread in threads:
            thread.start()
        for frame in forwarded:
            hosts[0].send(frame)
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(switching)
    expected = forwarded + [f for frames in injected for f in frames]
    port2 = dataplane.ports[2]
    deadline = time.monotonic() + 5
    while port2.tx < len(expected) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert port2.tx == len(expected) and port2.tx_bytes == sum(map(len, expected))
    with open(tmp_path / f"{port2.iface}_out.pcap", "rb") as capture:
        records = [frame for _, frame in read_pcap(capture, "out")]
    assert sorted(records) == sorted(expected)


def test_a_vanished_interface_is_reported_once_and_dropped_from_the_loop(
        running: tuple[Dataplane, list[harness.RawPort]], caplog: pytest.LogCaptureFixture) -> None:
    dataplane, hosts = running
    caplog.set_level(logging.WARNING)
    port2 = dataplane.ports[2]
    subprocess.run(["ip", "link", "del", port2.iface], check=True, capture_output=True, timeout=20)
    deadline = time.monotonic() + 5
    while not port2.lost and time.monotonic() < deadline:
        time.sleep(0.02)
    assert port2.lost and dataplane.stats["port_lost"] == 1
    time.sleep(0.5)  # the socket's error was read once; a spinning loop would read it again and again
    assert port2.errors["socket_errors"] == 1
    assert sum("disappeared" in r.getMessage() for r in caplog.records) == 1
    rx = dataplane.ports[1].rx
    hosts[0].send(frame_to(HOST_B, b"still"))  # port 1 is still served
    while dataplane.ports[1].rx == rx and time.monotonic() < deadline + 5:
        time.sleep(0.02)
    assert dataplane.ports[1].rx == rx + 1


def test_a_port_that_went_down_is_lost_when_deleted_and_works_when_up_again(
        running: tuple[Dataplane, list[harness.RawPort]]) -> None:
    """Deleting an interface takes it down first: the socket's one error can come while the name still
    resolves, and none follows the deletion. Taking it down by hand makes that order certain."""
    dataplane, hosts = running
    port2 = dataplane.ports[2]

    def wait_for(condition: str, check: Callable[[], bool]) -> None:
        deadline = time.monotonic() + 5
        while not check() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert check(), condition
    ip = ["ip", "link", "set", port2.iface]
    subprocess.run([*ip, "down"], check=True, capture_output=True, timeout=20)
    wait_for("the port's error", lambda: port2.errors["socket_errors"] == 1)
    subprocess.run([*ip, "up"], check=True, capture_output=True, timeout=20)
    wait_for("the port is up again", lambda: not port2.down)
    hosts[0].send(frame_to(HOST_B, b"up again"))
    assert hosts[1].receive(match=HOST_B) == frame_to(HOST_B, b"up again")
    subprocess.run([*ip, "down"], check=True, capture_output=True, timeout=20)
    wait_for("the port's second error", lambda: port2.errors["socket_errors"] == 2)
    assert not port2.lost
    subprocess.run(["ip", "link", "del", port2.iface], check=True, capture_output=True, timeout=20)
    wait_for("the lost port is reported", lambda: port2.lost)
    assert dataplane.stats["port_lost"] == 1 and not port2.down
