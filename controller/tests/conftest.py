"""Shared fixtures: the example topologies of controller/tests/data."""

from __future__ import annotations

from pathlib import Path

import pytest
from ibsm.topology import Topology, load_topology

DATA = Path(__file__).parent / "data"


@pytest.fixture
def fat_tree() -> Topology:
    return load_topology(DATA / "fattree-2x2.json")


@pytest.fixture
def mesh() -> Topology:
    return load_topology(DATA / "mesh-2x2.json")
