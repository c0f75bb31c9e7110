"""``ibsec-fabric``'s command line: every bad value refused before anything starts (no run directory, no
switch, no namespace), with the option and the reason, exit status 2. Issue 14, defect 12."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from topologies import launch


@pytest.mark.parametrize(("args", "expected"), [
    (["--k", "1"], "argument --k: 1 is outside 2..255"),
    (["--levels", "0"], "argument --levels: 0 is outside 1..8"),
    (["--k", "2", "--hosts-per-leaf", "3"], "fat-tree: hosts per leaf must be 1..2"),
    (["hypercube", "--cube", "-1"], "argument --cube: -1 is outside 1..9"),
    (["mesh", "--dims", "0x4"], "argument --dims: 0x4: every dimension needs 2..1024 switches"),
    (["--partitions", "0"], "argument --partitions: 0 is outside 1..32766"),
    (["--partitions", "40000"], "argument --partitions: 40000 is outside 1..32766"),
    (["--security", "sth-aead,tls"], "argument --security: 'tls': expected none, icrc-mac"),
    (["--bw", "-5"], "argument --bw: -5 is not more than 0 and at most 1000"),
    (["--bw", "inf"], "argument --bw: inf is not a finite number"),
    (["--delay", "1parsec"], "argument --delay: '1parsec': expected a number and us, ms or s"),
    (["--quiet-period", "-1"], "argument --quiet-period: -1 is not more than 0"),
    (["--quiet-period", "1"], "argument --quiet-period: 1 must be longer than the SM's trap suppression"),
    (["--no-cli", "--duration", "0"], "argument --duration: 0 is not more than 0"),
    (["--cluster", "a,,b"], "argument --cluster: 'a,,b': expected SERVER[,SERVER...]"),
    (["--cluster", "a;reboot"], "argument --cluster: 'a;reboot': expected SERVER[,SERVER...]"),
    (["--cluster", "server2", "--bw", "10"], "argument --cluster: links are not shaped across servers"),
])
def test_bad_values_stop_the_launcher_before_anything_starts(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], expected: str) -> None:
    run_dir = tmp_path / "run"
    with pytest.raises(SystemExit) as stop:
        launch.main([*args, "--run-dir", str(run_dir)])
    assert stop.value.code == 2 and expected in capsys.readouterr().err
    assert not run_dir.exists()


def test_the_launcher_command_exits_2(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "topologies.launch", "--k", "1", "--run-dir",
                           str(tmp_path / "run")], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.splitlines()[-1] == "ibsec-fabric: error: argument --k: 1 is outside 2..255"
    assert not (tmp_path / "run").exists()
