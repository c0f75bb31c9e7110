"""Fixtures: a two- or three-host fabric of namespaces and veths, torn down whatever the test did."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from labs.agent_lab import AgentLab


def _fabrics(base: Path) -> Iterator[Callable[[int], AgentLab]]:
    built: list[AgentLab] = []

    def make(n_hosts: int = 2) -> AgentLab:
        run_dir = base / f"run{len(built)}"
        (run_dir / "logs").mkdir(parents=True)
        fabric = AgentLab.create(run_dir, n_hosts)
        built.append(fabric)
        return fabric

    yield make
    for fabric in built:
        fabric.close()
    assert not [ns for f in built for ns in f.namespaces], "namespaces left behind"


@pytest.fixture
def make_fabric(tmp_path: Path) -> Iterator[Callable[[int], AgentLab]]:
    """``make_fabric(n)`` builds n hosts; every fabric built is closed after the test, pass or fail."""
    yield from _fabrics(tmp_path)


@pytest.fixture(scope="module")
def module_fabric(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[int], AgentLab]]:
    """The same, shared by one module's tests (agents start once), closed after the module."""
    yield from _fabrics(tmp_path_factory.mktemp("fabric"))


def namespaces() -> set[str]:
    """Names of the network namespaces that exist now."""
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return {line.split()[0] for line in out.splitlines() if line.strip()}
