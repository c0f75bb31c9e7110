"""Fixtures of the runtime tests: compiled programs and an in-process switch with a primary client."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from p4switch.tests.runtime import harness


@pytest.fixture(scope="session")
def l2fwd(tmp_path_factory: pytest.TempPathFactory) -> harness.Program:
    """The one-table L2 forwarder (p4switch/tests/programs/l2fwd.p4), compiled by p4switch-cc."""
    return harness.compile_program(harness.SHARED_PROGRAMS / "l2fwd.p4", tmp_path_factory.mktemp("l2fwd"))


@pytest.fixture
def switch() -> Iterator[harness.InProcessSwitch]:
    with harness.in_process_switch() as sw:
        yield sw


@pytest.fixture
def l2_client(switch: harness.InProcessSwitch, l2fwd: harness.Program) -> Iterator[harness.StreamClient]:
    """The primary client of ``switch`` with l2fwd pushed."""
    with harness.primary_client(switch.address, l2fwd) as client:
        yield client

