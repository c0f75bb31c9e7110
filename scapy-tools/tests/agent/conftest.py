"""Fixtures: a two- or three-host fabric of namespaces and veths, torn down whatever the test did."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from .fabric import Fabric


@pytest.fixture
def make_fabric(tmp_path: Path) -> Iterator[Callable[[int], Fabric]]:
    """``make_fabric(n)`` builds n hosts; every fabric built is closed after the test, pass or fail."""
    built: list[Fabric] = []

    def make(n_hosts: int = 2) -> Fabric:
        run_dir = tmp_path / f"run{len(built)}"
        (run_dir / "logs").mkdir(parents=True)
        fabric = Fabric.create(run_dir, n_hosts)
        built.append(fabric)
        return fabric

    yield make
    for fabric in built:
        fabric.close()
    leftovers = [f for f in built for ns in f.namespaces]
    assert not leftovers, "namespaces left behind"


def namespaces() -> set[str]:
    """Names of the network namespaces that exist now."""
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return {line.split()[0] for line in out.splitlines() if line.strip()}
