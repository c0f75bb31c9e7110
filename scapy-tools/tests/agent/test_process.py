"""The agent as a process: control socket, log file, SIGTERM, and the test fabric's own cleanup."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from ibsec.rocev2 import View

from labs.agent_lab import Agent, AgentLab, provision, rc_pair, start_agents

from .conftest import namespaces
from .helpers import Tap, wait_for
from .test_inprocess import mutate


def test_agent_answers_logs_and_stops_on_sigterm(make_fabric: Callable[[int], AgentLab]) -> None:
    fabric = make_fabric(2)
    agent = fabric.start_agent(fabric.hosts[0])
    info = agent.call("info")
    assert info["gid"] == fabric.hosts[0].gid
    assert info["mac"] == fabric.hosts[0].mac
    cli = subprocess.run([sys.executable, "-m", "ibsec.agent.ctl", "-s", str(agent.control_path), "create-qp",
                          "--service", "RC"], capture_output=True, text=True, timeout=30)
    assert cli.returncode == 0 and json.loads(cli.stdout)["service"] == "RC"
    refused = subprocess.run([sys.executable, "-m", "ibsec.agent.ctl", "-s", str(agent.control_path), "send",
                              "0x999", "x"], capture_output=True, text=True, timeout=30)
    assert refused.returncode == 1 and "no QP 0x999" in refused.stderr
    agent.process.send_signal(signal.SIGTERM)
    assert agent.process.wait(timeout=10) == 0
    log = agent.log_path.read_text()
    assert "up on" in log and "stopped" in log
    assert not agent.control_path.exists()


def test_fabric_removes_namespaces_and_processes_even_when_the_test_fails(tmp_path: Path) -> None:
    (tmp_path / "logs").mkdir()
    fabric = AgentLab.create(tmp_path, 3)
    created = set(fabric.namespaces)
    agent = fabric.start_agent(fabric.hosts[1])
    try:
        assert created <= namespaces()
        raise RuntimeError("the test fails here")
    except RuntimeError:
        pass
    finally:
        fabric.close()
    assert agent.process.poll() is not None
    assert not created & namespaces()


def test_a_burst_of_random_and_mutated_frames_on_the_wire_crashes_nothing(
    make_fabric: Callable[[int], AgentLab],
) -> None:
    fabric = make_fabric(2)
    prov = provision(fabric, fabric.hosts)
    a, b = start_agents(fabric, fabric.hosts, prov, None)
    tap = Tap(fabric.hosts[0])
    corpus = [frame for frame, view in tap_frames(tap, lambda: _traffic(a, b)) if view.dst_gid != bytes(16)]
    rng = random.Random(7)
    for i in range(3000):
        frame = mutate(rng, rng.choice(corpus)) if i % 2 else os.urandom(rng.randint(14, 300))
        tap.send(frame.ljust(60, b"\0"))  # the kernel refuses frames shorter than an Ethernet header
    tap.close()
    assert wait_for(lambda: b.counters()["stats"]["rx_frames"] >= 3000)
    assert "internal_errors" not in b.counters()["stats"]
    qpn, remote = rc_pair(a, b, 2, "session")
    a.call("send", qpn=qpn, data="after the storm")
    assert b.call("recv", qpn=remote, timeout=5)["data_hex"] == b"after the storm".hex()
    assert b.process.poll() is None


def _traffic(a: Agent, b: Agent) -> None:
    for mode in range(5):
        qpn, _ = rc_pair(a, b, mode, "session")
        a.call("send", qpn=qpn, data=f"mode {mode}")


def tap_frames(tap: Tap, during: Callable[[], None]) -> list[tuple[bytes, View]]:
    during()
    return tap.frames(0.5)


def test_an_unsafe_key_file_stops_the_agent_with_a_clear_error(
        make_fabric: Callable[[int], AgentLab]) -> None:
    fabric = make_fabric(2)
    prov = provision(fabric, fabric.hosts)
    key_file = prov.key_files[0]
    key_file.chmod(0o644)
    with pytest.raises(RuntimeError, match="chmod 600") as stop:
        fabric.start_agent(fabric.hosts[0], "--keys", str(key_file))
    assert "exited with 2" in str(stop.value)
    assert not (fabric.run_dir / "logs" / "h0.log").exists()  # refused while its options were read
    assert prov.p_sk.material.hex() not in (fabric.run_dir / "h0.out").read_text()
