"""Fixtures for the Mininet scenario tests: small fabrics, launched once per module, always torn down.

Every fabric a test starts is checked after teardown: no process it started is alive, no interface
with its name prefix is left, no key file remains. A test that fails still gets the teardown, because
FabricRun is a context manager and the fixtures use it with ``with``.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from topologies import network, run

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="Mininet fabrics need root")


@dataclass
class Footprint:
    """What a run put on the machine, captured while it ran."""

    pids: list[int] = field(default_factory=list)
    iface_prefix: str = ""
    run_dir: Path = Path()

    @classmethod
    def of(cls, fabric_run: run.FabricRun) -> Footprint:
        assert fabric_run.net is not None
        pids = [p.pid for p in fabric_run.processes()] + fabric_run.net.pids()
        return cls(pids, f"{fabric_run.net.tag}s", fabric_run.run_dir)

    def leftovers(self) -> list[str]:
        """Everything still there: live pids, interfaces, key files, control sockets."""
        found = [f"pid {pid}" for pid in self.pids if run._alive(pid)]
        found += list(network.our_links(self.iface_prefix))
        found += [str(p) for p in (self.run_dir / "keys").glob("*")]
        found += [str(p) for p in self.run_dir.glob("*.sock")]
        return found


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    path = tmp_path / "run"
    path.mkdir()
    return path


@contextlib.contextmanager
def launched(options: run.RunOptions) -> Iterator[run.FabricRun]:
    """A launched fabric; torn down on leaving, and then nothing of it may be left."""
    fabric_run = run.FabricRun(options)
    with fabric_run:
        footprint = Footprint.of(fabric_run)
        yield fabric_run
    assert footprint.leftovers() == []
