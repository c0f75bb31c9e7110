"""The agent as a process: control socket, log file, SIGTERM, and the test fabric's own cleanup."""

from __future__ import annotations

import signal
from collections.abc import Callable
from pathlib import Path

from .conftest import namespaces
from .fabric import Fabric


def test_agent_answers_logs_and_stops_on_sigterm(make_fabric: Callable[[int], Fabric]) -> None:
    fabric = make_fabric(2)
    agent = fabric.start_agent(fabric.hosts[0])
    info = agent.call("info")
    assert info["gid"] == fabric.hosts[0].gid
    assert info["mac"] == fabric.hosts[0].mac
    agent.process.send_signal(signal.SIGTERM)
    assert agent.process.wait(timeout=10) == 0
    log = agent.log_path.read_text()
    assert "up on" in log and "stopped" in log
    assert not agent.control_path.exists()


def test_fabric_removes_namespaces_and_processes_even_when_the_test_fails(tmp_path: Path) -> None:
    (tmp_path / "logs").mkdir()
    fabric = Fabric.create(tmp_path, 3)
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
