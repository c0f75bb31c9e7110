"""The topology file check: every mistake is reported with the path of the first bad field."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from ibsm.topology import TopologyError, load_topology, parse_topology

from .conftest import DATA


def _doc(name: str = "fattree-2x2") -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((DATA / f"{name}.json").read_text())
    return doc


def test_examples_load(fat_tree: Any, mesh: Any) -> None:
    assert [s.level for s in fat_tree.switches] == [0, 0, 1, 1]
    assert fat_tree.host_at("s2", 1).name == "h3"
    assert mesh.switch("s4").coord == (1, 1)
    assert mesh.partitions[1].security == 2 and mesh.partitions[1].pkey == 1


def _broken(edit: Any, name: str = "fattree-2x2") -> str:
    doc = copy.deepcopy(_doc(name))
    edit(doc)
    with pytest.raises(TopologyError) as err:
        parse_topology(doc)
    return str(err.value)


@pytest.mark.parametrize(("edit", "expected"), [
    (lambda d: d.pop("kind"), "kind: missing"),
    (lambda d: d.update(kind="ring"), "kind: expected one of fat-tree, mesh, torus, hypercube"),
    (lambda d: d.update(routing="random"), "routing: expected one of"),
    (lambda d: d["switches"][1]["ports"].__setitem__(0, 600), "switches[1].ports[0]: 600 outside 1..510"),
    (lambda d: d["switches"][2].pop("level"), "switches[2].level: missing"),
    (lambda d: d["switches"][3].update(name="s1"), "switches[3].name: 's1' already names switches[0]"),
    (lambda d: d["links"][2].update(a=["s9", 3]), "links[2].a: no switch named 's9'"),
    (lambda d: d["links"][1].update(b=["s4", 7]), "links[1].b: switch s4 has no port 7"),
    (lambda d: d["hosts"][1].update(port=1), "hosts[1].switch: s1 port 1 is already used by hosts[0]"),
    (lambda d: d["hosts"][3].update(gid="2001::5"), "hosts[3].gid: 2001::5 must be in fec0::/10"),
    (lambda d: d["hosts"][0].update(guid="0x1234"), "hosts[0].gid: fec0::1:0:ff:fe00:0 does not end in"),
    (lambda d: d["hosts"][2].update(lid=0), "hosts[2].lid: 0 outside 1..49151"),
    (lambda d: d["hosts"][2].update(lid="x"), "hosts[2].lid: expected int, got str"),
    (lambda d: d["partitions"][1].update(pkey="0x8001"), "partitions[1].pkey: 32769 outside 1..32767"),
    (lambda d: d["partitions"][1].update(security="rot13"), "partitions[1].security: expected one of"),
    (lambda d: d["partitions"][1]["members"].append("0x99"), "partitions[1].members[2]: no host has GUID"),
    (lambda d: d["sm"].update(gid="fec0::1:0:0:1"), "sm.gid: fec0::1:0:0:1: the GUID must be a MAC-derived"),
])
def test_first_bad_field_is_named(edit: Any, expected: str) -> None:
    assert _broken(edit).startswith(expected)


@pytest.mark.parametrize(("edit", "expected"), [
    (lambda d: d.pop("dimensions"), "dimensions: missing (a mesh needs"),
    (lambda d: d["switches"][2].update(coord=[0, 2]), "switches[2].coord: [0, 2] is not inside [2, 2]"),
    (lambda d: d["switches"][2].update(coord=[0, 0]), "switches: two switches share a coordinate"),
    (lambda d: d.update(kind="hypercube", dimensions=[2, 3]), "dimensions: a hypercube has 2 switches"),
])
def test_mesh_places(edit: Any, expected: str) -> None:
    assert _broken(edit, "mesh-2x2").startswith(expected)


def test_file_errors_name_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "t.json"
    bad.write_text("{\"format\": ")
    with pytest.raises(TopologyError, match=r"t.json:1:12: not JSON: Expecting value"):
        load_topology(bad)
    with pytest.raises(TopologyError, match=r"missing.json: cannot read"):
        load_topology(tmp_path / "missing.json")
    bad.write_text(json.dumps({**_doc(), "version": 2}))
    with pytest.raises(TopologyError, match=r"t.json:1: version: expected 1, got 2"):
        load_topology(bad)
