"""The committed P4Info (p4src/main.p4info.txtpb) is the data plane's contract with the SM: it must be
exactly what the compiler makes of p4src/ now, and what real p4c makes of it too. Regenerate it with
`make p4info` after changing p4src/."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from finsy.proto import p4i
from google.protobuf import text_format
from google.protobuf.message import Message

ROOT = Path(__file__).resolve().parents[1]
COMMITTED = ROOT / "p4src" / "main.p4info.txtpb"


def _parse(path: Path) -> p4i.P4Info:
    message = p4i.P4Info()
    text_format.Parse(path.read_text(), message)
    return message


def test_committed_p4info_matches_source(tmp_path: Path) -> None:
    generated = tmp_path / "main.p4info.txtpb"
    subprocess.run([str(Path(sys.executable).parent / "p4switch-cc"), str(ROOT / "p4src" / "main.p4"),
                    "-o", str(tmp_path / "main.json"), "--p4runtime-files", str(generated)], check=True)
    assert _parse(generated) == _parse(COMMITTED), \
        "p4src/main.p4info.txtpb is stale: run `make p4info` and commit it with the P4 change"


def test_every_table_and_extern_is_documented() -> None:
    """docs/p4-pipeline.md lists every table, counter, meter, register and action profile of the P4Info."""
    doc = (ROOT / "docs" / "p4-pipeline.md").read_text()
    p4info = _parse(COMMITTED)
    kinds = (p4info.tables, p4info.counters, p4info.meters, p4info.registers, p4info.action_profiles)
    names = [entity.preamble.name.rsplit(".", 1)[-1] for kind in kinds for entity in kind]
    missing = [name for name in names if f"`{name}`" not in doc]
    assert not missing, f"docs/p4-pipeline.md does not describe {missing}"


def canonical(message: Message) -> Any:
    """``message`` as plain data, with the order of every list the P4Runtime spec leaves free sorted away:
    P4Info objects, match fields, params and action refs are identified by their ids, and table and
    resource id lists are sets. An empty sub-message counts as absent (p4c writes an empty type_info)."""
    out: dict[str, Any] = {}
    for field, value in message.ListFields():
        if field.message_type is None:
            out[field.name] = sorted(value) if field.name.endswith("_ids") else \
                list(value) if field.is_repeated else value
        elif field.is_repeated:
            out[field.name] = sorted((canonical(item) for item in value), key=_identity)
        elif value.ByteSize():
            out[field.name] = canonical(value)
    return out


def _identity(item: dict[str, Any]) -> str:
    """What identifies a P4Info list element: its id (in the preamble for top-level objects)."""
    return repr(item.get("preamble", item).get("id", item))


def test_real_p4c_compiles_p4src_quietly_into_the_committed_p4info(tmp_path: Path) -> None:
    """p4c-bm2-ss (when on PATH) compiles p4src/main.p4 without a single warning (stderr empty) and writes
    the committed P4Info, object by object."""
    p4c = shutil.which("p4c-bm2-ss")
    if p4c is None:
        print("SKIP: p4c-bm2-ss is not on PATH")
        pytest.skip("p4c-bm2-ss is not on PATH")
    written = tmp_path / "main.p4info.txtpb"
    done = subprocess.run([p4c, "--arch", "v1model", str(ROOT / "p4src" / "main.p4"), "-o",
                           str(tmp_path / "main.json"), "--p4runtime-files", str(written)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert done.stderr == "", f"p4c warns about p4src:\n{done.stderr}"
    theirs, ours = canonical(_parse(written)), canonical(_parse(COMMITTED))
    for kind in sorted(set(theirs) | set(ours)):
        assert theirs.get(kind) == ours.get(kind), f"p4c's P4Info differs from the committed one in {kind}"
