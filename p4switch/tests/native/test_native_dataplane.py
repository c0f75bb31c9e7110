"""The native data plane in this process on veths: frames forwarded by the C thread with their 802.1Q tags,
counted and captured; CPU-port frames reaching Python; a Python pipeline served through the event queue;
a port whose interface disappears reported once and no longer polled, the thread asleep again."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from p4switch.engine import api as engine
from p4switch.native.io import NativeDataplane
from p4switch.runtime.device import Device
from p4switch.tests.runtime import harness
from p4switch.tests.runtime.test_p4runtime_l2 import frame_to
from p4switch.tests.runtime.test_p4switch_process import HOST_A, HOST_B

CPU_PORT = 64


class Running:
    """A device with l2fwd and its native data plane serving two veths."""

    def __init__(self, dataplane: NativeDataplane, device: Device, hosts: list[harness.RawPort],
                 pairs: list[tuple[str, str]], to_cpu: list[bytes]) -> None:
        self.dataplane, self.device, self.hosts = dataplane, device, hosts
        self.pairs, self.to_cpu = pairs, to_cpu

    def wait_for(self, condition: str, check: Callable[[], object]) -> None:
        deadline = time.monotonic() + 5
        while not check() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert check(), condition


@pytest.fixture(scope="module")
def l2fwd(tmp_path_factory: pytest.TempPathFactory) -> harness.Program:
    return harness.compile_program(harness.SHARED_PROGRAMS / "l2fwd.p4", tmp_path_factory.mktemp("l2fwd"))


@pytest.fixture(params=["native", "python"], ids=["native-pipeline", "python-pipeline"])
def running(request: pytest.FixtureRequest, l2fwd: harness.Program, tmp_path: Path) -> Iterator[Running]:
    log = logging.getLogger("p4switch.test.native-dataplane")
    device = Device(1, CPU_PORT, log, request.param)
    switch = device.load(l2fwd.json)
    assert switch.engine == request.param
    for mac, port in ((HOST_A, 1), (HOST_B, 2), (bytes.fromhex("0200000000cc"), CPU_PORT)):
        switch.table_insert("L2Ingress.dmac", engine.TableEntry(
            {"hdr.ethernet.dst_addr": engine.Exact(int.from_bytes(mac, "big"))},
            engine.ActionCall("L2Ingress.forward", {"port": port})))
    device.install(switch, l2fwd.json)
    to_cpu: list[bytes] = []
    device.to_cpu = to_cpu.append
    with harness.veth_pairs(2, harness.unique_prefix("p4n")) as pairs:
        dataplane = NativeDataplane(device, [(i + 1, sw) for i, (sw, _) in enumerate(pairs)], log,
                                    pcap_dir=str(tmp_path))
        hosts = [harness.RawPort(host) for _, host in pairs]
        stop = threading.Event()
        loop = threading.Thread(target=dataplane.run, args=(stop,), daemon=True)
        loop.start()
        try:
            yield Running(dataplane, device, hosts, pairs, to_cpu)
        finally:
            stop.set()
            loop.join(timeout=5)
            dataplane.close()
            for host in hosts:
                host.close()


def test_frames_cross_with_their_vlan_tags_counted_and_captured(running: Running, tmp_path: Path) -> None:
    hosts = running.hosts
    tagged = HOST_B + HOST_A + bytes.fromhex("81002064") + b"\x88\xb5tagged"
    for _ in range(50):
        hosts[0].send(frame_to(HOST_B))
        assert hosts[1].receive(match=HOST_B) == frame_to(HOST_B)
    hosts[0].send(tagged)
    assert hosts[1].receive(match=HOST_B) == tagged
    hosts[1].send(frame_to(HOST_A, b"back"))
    assert hosts[0].receive(match=HOST_A) == frame_to(HOST_A, b"back")
    stats = running.dataplane.port_stats

    def counted() -> bool:  # what the switch sends is ours alone; it may receive strays too
        s = stats()
        return (s[2]["tx"], s[1]["tx"]) == (51, 1) and s[1]["rx"] >= 51 and s[2]["rx"] >= 1
    running.wait_for(f"port counters {stats()}", counted)
    assert stats()[2]["tx_bytes"] == 50 * len(frame_to(HOST_B)) + len(tagged)
    assert tagged in (tmp_path / f"{running.pairs[0][0]}_in.pcap").read_bytes()
    assert tagged in (tmp_path / f"{running.pairs[1][0]}_out.pcap").read_bytes()


def test_cpu_port_frames_reach_python(running: Running) -> None:
    frame = frame_to(bytes.fromhex("0200000000cc"), b"to the controller")
    running.hosts[0].send(frame)
    running.wait_for("a frame for the CPU port", lambda: running.to_cpu)
    assert running.to_cpu == [frame]


def test_a_vanished_interface_is_reported_once_and_no_longer_polled(running: Running,
                                                                    caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    harness.run("ip", "link", "del", running.pairs[1][0])
    running.wait_for("the lost port is reported", lambda: running.dataplane.stats["port_lost"] == 1)
    time.sleep(0.3)  # any error the deletion left behind is handled by now
    before = running.dataplane.wakeups()
    time.sleep(0.5)
    assert running.dataplane.wakeups() == before  # asleep in poll(), not spinning on the dead socket
    lost = [r for r in caplog.records if "disappeared" in r.getMessage()]
    assert len(lost) == 1 and running.pairs[1][0] in lost[0].getMessage()
    running.hosts[0].send(frame_to(bytes.fromhex("0200000000cc")))  # port 1 still works
    running.wait_for("a frame after the loss", lambda: running.to_cpu)


def test_a_port_that_went_down_is_lost_when_deleted_and_works_when_up_again(running: Running) -> None:
    """Deleting an interface takes it down first: the socket's one error can come while the name still
    resolves, and none follows the deletion. Taking it down by hand makes that order certain."""
    iface, errors = running.pairs[1][0], lambda: running.dataplane.port_stats()[2]["errors"]
    harness.run("ip", "link", "set", iface, "down")
    running.wait_for("the port's error", lambda: errors() == 1)
    harness.run("ip", "link", "set", iface, "up")
    running.hosts[0].send(frame_to(HOST_B, b"up again"))
    assert running.hosts[1].receive(match=HOST_B) == frame_to(HOST_B, b"up again")
    harness.run("ip", "link", "set", iface, "down")
    running.wait_for("the port's second error", lambda: errors() == 2)
    assert running.dataplane.stats["port_lost"] == 0
    harness.run("ip", "link", "del", iface)
    running.wait_for("the lost port is reported", lambda: running.dataplane.stats["port_lost"] == 1)
    time.sleep(0.3)
    before = running.dataplane.wakeups()
    time.sleep(0.5)
    assert running.dataplane.wakeups() == before  # no longer rechecked once lost
