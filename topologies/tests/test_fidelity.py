"""The fidelity sampler: switch CPU from /proc/PID/stat, drops from the veths' kernel counters."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from ibsec.polling import poll_until

from topologies import fidelity
from topologies.fidelity import Sampler, Watched

STAT = "{pid} (p4switch) S 1 1 1 0 -1 0 0 0 0 0 {utime} {stime} 0 0 20 0 3 0 0 0 0\n"


def fake_proc(root: Path, pid: int, utime: int, stime: int) -> None:
    (root / str(pid)).mkdir(parents=True, exist_ok=True)
    (root / str(pid) / "stat").write_text(STAT.format(pid=pid, utime=utime, stime=stime))


def fake_drops(root: Path, iface: str, rx: int, tx: int) -> None:
    stats = root / iface / "statistics"
    stats.mkdir(parents=True, exist_ok=True)
    (stats / "rx_dropped").write_text(f"{rx}\n")
    (stats / "tx_dropped").write_text(f"{tx}\n")


def test_a_fake_proc_names_the_switch_whose_ticks_rose_and_sums_the_drops(tmp_path: Path) -> None:
    proc, net = tmp_path / "proc", tmp_path / "net"
    fake_proc(proc, 10, 0, 0)
    fake_proc(proc, 11, 0, 0)
    for iface in ("s0p1", "s0p2", "s1p1"):
        fake_drops(net, iface, 5, 5)  # what the counters held before the run: not counted
    stats = tmp_path / "s0.stats.json"
    stats.write_text(json.dumps({"ports": {"1": {"kernel_drops": 2}, "2": {"kernel_drops": 0}}}))
    sampler = Sampler({"s0": Watched(10, ("s0p1", "s0p2"), stats), "s1": Watched(11, ("s1p1",))}, proc=proc,
                      sys_net=net)
    sampler.sample()
    fake_proc(proc, 10, 1, 0)
    fake_proc(proc, 11, 40, 10)
    fake_drops(net, "s0p2", 8, 5)
    fake_drops(net, "s1p1", 5, 6)
    stats.write_text(json.dumps({"ports": {"1": {"kernel_drops": 7}, "2": {"kernel_drops": 1}}}))
    report = sampler.report()
    assert report["busiest_switch"] == "s1"
    assert (report["veth_drops"], report["ring_drops"], report["switch_drops"]) == (4, 6, 10)
    assert report["samples"] == 2
    assert report["limited_by_emulator"]


def test_no_drops_and_idle_switches_are_not_a_limit(tmp_path: Path) -> None:
    proc, net = tmp_path / "proc", tmp_path / "net"
    fake_proc(proc, 10, 3, 3)
    fake_drops(net, "s0p1", 2, 2)
    sampler = Sampler({"s0": Watched(10, ("s0p1",))}, proc=proc, sys_net=net)
    sampler.sample()
    report = sampler.report()
    assert report["busiest_cpu_max"] == 0.0 and report["switch_drops"] == 0
    assert report["ring_drops"] is None  # no switch writes a stats file (BMv2): not available, not 0
    assert not report["limited_by_emulator"]


def test_a_gone_process_and_a_gone_interface_are_skipped(tmp_path: Path) -> None:
    sampler = Sampler({"s0": Watched(999_999_999, ("nosuchif",))}, proc=tmp_path, sys_net=tmp_path)
    sampler.sample()
    report = sampler.report()
    assert report["busiest_switch"] is None and report["switch_drops"] == 0


def test_a_spinning_process_is_busier_than_a_sleeping_one() -> None:
    spin = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    sleep = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    sampler = Sampler({"spin": Watched(spin.pid, ()), "sleep": Watched(sleep.pid, ())}, interval=0.05)
    try:
        sampler.start()
        start = fidelity.cpu_seconds(spin.pid) or 0.0
        # enough CPU time to count in clock ticks, however loaded the machine is
        assert poll_until(lambda: (fidelity.cpu_seconds(spin.pid) or 0.0) > start + 0.2, 60, interval=0.05)
        report = sampler.report()
        sampler.stop()
        assert not sampler.running
        assert report["busiest_switch"] == "spin"
        assert report["busiest_cpu_max"] > 0.0
        assert report["samples"] >= 2
    finally:
        sampler.stop()
        for child in (spin, sleep):
            child.kill()
            child.wait()
