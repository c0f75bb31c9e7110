"""The committed P4Info (p4src/main.p4info.txtpb) is the data plane's contract with the SM: it must be
exactly what the compiler makes of p4src/ now. Regenerate it with `make p4info` after changing p4src/."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from finsy.proto import p4i
from google.protobuf import text_format

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
