"""``ibsec-agent``'s command line and files: every bad value refused before anything starts, saying which
option, file and line, and why (exit status 2). Issue 14, defect 12."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from ibsec import keys
from ibsec.agent import daemon

BASE = ["--name", "h0", "--iface", "lo"]


@pytest.mark.parametrize(("args", "expected"), [
    (["--subnet", "70000"], "argument --subnet: 70000 is outside 0..0xffff"),
    (["--lid", "0"], "argument --lid: 0 is outside 1..49151"),
    (["--lid", "0xC000"], "argument --lid: 0xC000 is outside 1..49151"),
    (["--trap-window", "-5"], "argument --trap-window: -5 is not within 0..86400"),
    (["--ack-timeout", "nan"], "argument --ack-timeout: nan is not a finite number"),
    (["--ack-timeout", "0"], "argument --ack-timeout: 0 is not more than 0 and at most 60"),
    (["--retries", "-1"], "argument --retries: -1 is outside 0..1000"),
    (["--mac-failure-threshold", "0"], "argument --mac-failure-threshold: 0 is outside 1..0xffffffff"),
    (["--retire-after", "1e6"], "argument --retire-after: '1e6' is not an integer"),
    (["--skc-bytes", "-1"], "argument --skc-bytes: -1 is outside 0..1073741824"),
    (["--sm-gid", "fec0::1:0:0:1"], "argument --sm-gid: 'fec0::1:0:0:1': "),
    (["--sm-gid", "not-a-gid"], "argument --sm-gid: 'not-a-gid': "),
    (["--name", "../h0"], "argument --name: '../h0': letters, digits"),
])
def test_bad_option_values_are_refused(capsys: pytest.CaptureFixture[str], args: list[str],
                                       expected: str) -> None:
    with pytest.raises(SystemExit) as stop:
        daemon.parse_args([*BASE, *args] if args[0] != "--name" else [*args, "--iface", "lo"])
    assert stop.value.code == 2 and expected in capsys.readouterr().err


@pytest.mark.parametrize(("entries", "expected"), [
    ([{"pkey": "0x0000"}], "pkeys.json:4: partitions[0].pkey: '0x0000' is no P_Key"),
    ([{"pkey": "0x8001"}, {"pkey": "0x18001"}], "pkeys.json:7: partitions[1].pkey: '0x18001' is no P_Key"),
    ([{"pkey": 32768}], "partitions[0].pkey: 32768 is no P_Key"),
    ([{"pkey": "0x8001", "mode": 9}], "pkeys.json:5: partitions[0].mode: 9 is no security mode (0..4)"),
    ([{"pkey": "0x8001", "scope": "world"}], "partitions[0].scope: 'world': expected one of partition, "
     "session, derived"),
    ([{"pkey": True}], "partitions[0].pkey: True is no P_Key"),
])
def test_bad_pkey_table_files_are_refused_with_the_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], entries: list[object], expected: str) -> None:
    table = tmp_path / "pkeys.json"
    table.write_text(json.dumps({"partitions": entries}, indent=1))
    with pytest.raises(SystemExit) as stop:
        daemon.parse_args([*BASE, "--pkeys", str(table)])
    assert stop.value.code == 2 and expected in capsys.readouterr().err


def test_unreadable_files_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    table = tmp_path / "pkeys.json"
    table.write_bytes(b'{"partitions": [{"pkey": "0x8001"}]}\n\xff\n')
    key_file = tmp_path / "h0.keys"
    keys.write_key_file(key_file, [keys.Key.generate(keys.KeyType.CA_SK, (1,))])
    key_file.chmod(0o644)
    for args, expected in ((["--pkeys", str(table)], "pkeys.json:2:1: not UTF-8 text (byte 0xff)"),
                           (["--keys", str(key_file)], "has mode 0644"),
                           (["--keys", str(tmp_path / "none.keys")], "No such file")):
        with pytest.raises(SystemExit):
            daemon.parse_args([*BASE, *args])
        assert expected in capsys.readouterr().err


def test_the_agent_command_exits_2_and_starts_nothing(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "ibsec.agent.daemon", *BASE, "--run-dir", str(tmp_path),
                           "--lid", "65535"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.splitlines()[-1] == "ibsec-agent: error: argument --lid: 65535 is outside 1..49151"
    assert not list(tmp_path.iterdir())  # no log, no control socket
