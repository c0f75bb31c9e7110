"""Teardown: everything a launch starts is gone afterwards, after an error, Ctrl-C, or a killed launcher."""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from ibsec.polling import poll_until

from topologies import network, run

from .conftest import Footprint, needs_root

pytestmark = needs_root

SMALL = {"fabric": "fat-tree", "k": 2, "levels": 2, "sm": False}


def test_an_error_inside_the_run_leaves_nothing(run_dir: Path) -> None:
    with pytest.raises(RuntimeError, match="the test failed here"):
        with run.FabricRun(run.RunOptions(**SMALL, run_dir=run_dir)) as fabric_run:  # type: ignore[arg-type]
            footprint = Footprint.of(fabric_run)
            assert fabric_run.net is not None
            for port in fabric_run.net.grpc_ports.values():  # every switch answers on its own gRPC port
                with socket.create_connection(("127.0.0.1", port), timeout=2):
                    pass
            assert {a.call("ping")["name"] for a in fabric_run.agents.values()} == set(fabric_run.hosts)
            key_files = list((run_dir / "keys").glob("*.keys"))
            assert len(key_files) == len(fabric_run.hosts) + 1  # one per host, one for the SM
            assert {stat.S_IMODE(p.stat().st_mode) for p in key_files} == {0o600}
            ends = len(fabric_run.fabric.hosts()) + 2 * len(fabric_run.fabric.links())  # switch-side ends
            assert len(list(network.our_links(footprint.iface_prefix))) == ends
            group = subprocess.run(["ip", "-o", "link", "show", "group", str(fabric_run.net.group)],
                                   capture_output=True, text=True, check=True).stdout.splitlines()
            assert len(group) == ends  # every switch-side end in the run's group: deleted in one request
            raise RuntimeError("the test failed here")
    assert footprint.leftovers() == []
    assert not (run_dir / run.PROCESSES_FILE).exists()
    pcaps = {p.name for p in (run_dir / "pcaps").iterdir()}
    assert "s0_0-1_in.pcap" in pcaps and "s1_1-2_out.pcap" in pcaps  # named by switch and port


def launcher(run_dir: Path) -> tuple[subprocess.Popen[str], Footprint]:
    """``ibsec-fabric`` as a user starts it (no terminal: no CLI), once it says it is running. As from a
    terminal's foreground, Ctrl-C is not ignored, even when these tests run as a background job (whose
    children a shell starts with SIGINT ignored, and Python then keeps it so)."""
    argv = [sys.executable, "-m", "topologies.launch", "fat-tree", "--levels", "2", "--no-sm", "--no-cli",
            "--run-dir", str(run_dir)]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert proc.stdout is not None
    deadline = time.monotonic() + 120
    for line in proc.stdout:
        if line.startswith("running") or time.monotonic() > deadline:
            break
    record = json.loads((run_dir / run.PROCESSES_FILE).read_text())
    return proc, Footprint(record["pids"], record["iface_prefix"], run_dir)


def test_ctrl_c_stops_the_launcher_and_everything_it_started(run_dir: Path) -> None:
    proc, footprint = launcher(run_dir)
    try:
        assert footprint.leftovers(), "the launcher should be running a fabric"
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 130
    finally:
        network.stop_processes([proc])
    assert footprint.leftovers() == []


def test_clean_removes_what_a_killed_launcher_left(run_dir: Path) -> None:
    proc, footprint = launcher(run_dir)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    assert any(item.startswith("pid") for item in footprint.leftovers())  # switches and agents survive it
    removed = run.clean_leftovers(run_dir.parent)
    assert removed
    # until the killed processes are gone (a loaded machine reaps slowly)
    poll_until(lambda: not footprint.leftovers(), 60, interval=0.2)
    assert footprint.leftovers() == []


def test_the_launcher_offers_the_mininet_cli_on_a_terminal_and_sigterm_tears_down(run_dir: Path) -> None:
    """On a terminal: the CLI runs commands in a host's namespace; SIGTERM stops everything even there."""
    controller, terminal = pty.openpty()
    argv = [sys.executable, "-m", "topologies.launch", "hypercube", "--cube", "1", "--no-sm",
            "--run-dir", str(run_dir)]
    proc = subprocess.Popen(argv, stdin=terminal, stdout=terminal, stderr=terminal)
    os.close(terminal)
    try:
        seen = read_until(controller, b"mininet>", 120)
        record = json.loads((run_dir / run.PROCESSES_FILE).read_text())
        footprint = Footprint(record["pids"], record["iface_prefix"], run_dir)
        os.write(controller, b"h1 ip -o link show h1-eth0; echo DONE$((6*7))\n")
        seen = read_until(controller, b"DONE42", 30)  # the shell's answer, not the echo of the typed line
        assert b"h1-eth0" in seen and b"02:00:00:00:00:01" in seen  # run in h1's namespace, our MAC
        proc.send_signal(signal.SIGTERM)  # as a service manager or kill would stop it, CLI or not
        assert wait_draining(proc, controller, 60) == 128 + signal.SIGTERM
    finally:
        network.stop_processes([proc])
        os.close(controller)
    assert footprint.leftovers() == []


def wait_draining(proc: subprocess.Popen[bytes], fd: int, timeout: float) -> int | None:
    """``proc``'s exit status, reading its terminal meanwhile: a launcher tearing down prints more than a
    pty buffers, and would block on a terminal nobody reads."""
    deadline = time.monotonic() + timeout
    while proc.poll() is None and time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                os.read(fd, 65536)
            except OSError:
                break
    return proc.wait(timeout=max(0.0, deadline - time.monotonic()))


def read_until(fd: int, marker: bytes, timeout: float) -> bytes:
    """What the terminal shows until ``marker`` appears (or the time is up)."""
    out = b""
    deadline = time.monotonic() + timeout
    while marker not in out and time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.5)
        if ready:
            try:
                out += os.read(fd, 65536)
            except OSError:
                break
    assert marker in out, out[-500:]
    return out


def test_a_link_group_is_deleted_only_when_every_member_is_ours() -> None:
    """The group is a number: should another program's interface be in it, nothing is deleted at once
    (the names are then deleted one by one, by prefix)."""
    group, ours, theirs = network.link_group(), f"ibq{os.getpid() % 100000}a", f"ibz{os.getpid() % 100000}a"
    try:
        for name in (ours, theirs):
            subprocess.run(["ip", "link", "add", name, "group", str(group), "type", "veth", "peer", "name",
                            name[:-1] + "b"], check=True, capture_output=True)
        assert network.delete_group(group, ours[:-1]) is False
        assert set(network.our_links(ours[:-1])) == {ours, ours[:-1] + "b"}  # nothing deleted
        subprocess.run(["ip", "link", "del", theirs], check=True, capture_output=True)
        assert network.delete_group(group, ours[:-1]) is True
        assert list(network.our_links(ours[:-1])) == []  # both ends of the veth
        assert network.delete_group(group, ours[:-1]) is False  # an empty group: nothing to do
    finally:
        for name in (ours, theirs):
            subprocess.run(["ip", "link", "del", name], capture_output=True, check=False)
