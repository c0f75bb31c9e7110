"""`sm` command line: bad configuration stops with one clear line; traceback table, JSON and picture."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from ibsec.polling import poll_until
from ibsm import cli, commands
from ibsm.events import EventLog

from .conftest import DATA


def _sm(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ibsm.cli", *args], capture_output=True, text=True,
                          timeout=60)


@pytest.mark.parametrize(("edit", "expected"), [
    (lambda d: d["hosts"][1].update(lid=0), "hosts[1].lid: 0 outside 1..49151"),
    (lambda d: d["switches"][0].update(level=3), "fat tree: link s1:3 - s3 joins levels 3 and 1"),
])
def test_bad_topology_stops_with_a_clear_message(tmp_path: Path, edit: object, expected: str) -> None:
    doc = json.loads((DATA / "fattree-2x2.json").read_text())
    edit(doc)  # type: ignore[operator]
    path = tmp_path / "topology.json"
    path.write_text(json.dumps(doc))
    done = _sm("run", "--topology", str(path))
    assert done.returncode == 2
    assert done.stderr.startswith("sm: error: ") and expected in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(("option", "value", "expected"), [
    ("--punt-rate", "-5", "argument --punt-rate: -5 is outside 1..1000000000"),
    ("--punt-burst", "0", "argument --punt-burst: 0 is outside 1..1000000000"),
    ("--poll-interval", "-1", "argument --poll-interval: -1 is not more than 0 and at most 60"),
    ("--quiet-period", "inf", "argument --quiet-period: inf is not a finite number"),
    ("--suppress-window", "nan", "argument --suppress-window: nan is not a finite number"),
    ("--key-timeout", "0", "argument --key-timeout: 0 is not more than 0 and at most 3600"),
    ("--key-attempts", "1e3", "argument --key-attempts: '1e3' is not an integer"),
    ("--max-trap-age", "-60", "argument --max-trap-age: -60 is not more than 0"),
])
def test_bad_option_values_stop_before_anything_starts(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                       option: str, value: str, expected: str) -> None:
    """Issue 14, defect 12: each refused while the command line is read (status 2, nothing written)."""
    topo = tmp_path / "topology.json"
    topo.write_text((DATA / "mesh-2x2.json").read_text())
    with pytest.raises(SystemExit) as stop:
        commands.main(["run", "--topology", str(topo), option, value])
    assert stop.value.code == 2 and expected in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["topology.json"]  # no log, key or event file


def test_a_bad_option_value_through_the_sm_command(tmp_path: Path) -> None:
    done = _sm("run", "--topology", str(DATA / "mesh-2x2.json"), "--run-dir", str(tmp_path),
               "--punt-rate", "-5")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.splitlines()[-1] == "sm run: error: argument --punt-rate: -5 is outside 1..1000000000"
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize(("content", "expected"), [
    (b'{\n  "name": "caf\xe9"\n}\n', "topology.json:2:15: not UTF-8 text (byte 0xe9)"),
    (b'{\n  "format": "ibsec-topology",\n  "version": 1e999\n}\n', "topology.json:3: version: 1e999 is not a "
     "finite number"),
    (b"[" * 50 + b"]" * 50, "topology.json:1: nested 50 levels deep: at most 32"),
])
def test_unreadable_topology_file_names_file_line_and_reason(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes, expected: str) -> None:
    topo = tmp_path / "topology.json"
    topo.write_bytes(content)
    assert commands.main(["run", "--topology", str(topo)]) == 2
    assert expected in capsys.readouterr().err


def test_topology_field_errors_name_the_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = json.loads((DATA / "fattree-2x2.json").read_text())
    doc["switches"][1]["address"] = "127.0.0.1:99999"
    topo = tmp_path / "topology.json"
    topo.write_text(json.dumps(doc, indent=1))
    line = next(i for i, text in enumerate(topo.read_text().splitlines(), 1) if "99999" in text)
    assert commands.main(["run", "--topology", str(topo)]) == 2
    assert f"topology.json:{line}: switches[1].address: expected HOST:PORT with a TCP port in " \
           "1..65535, got '127.0.0.1:99999'" in capsys.readouterr().err


def test_partitions_file_that_is_not_utf8(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    conf = tmp_path / "partitions.conf"
    conf.write_bytes(b"# partitions\ncompute=0x1 : ALL ; # \xff\xfe\n")
    assert commands.main(["run", "--topology", str(DATA / "mesh-2x2.json"), "--run-dir", str(tmp_path),
                          "--partitions", str(conf)]) == 2
    assert "partitions.conf:2:23: not UTF-8 text (byte 0xff)" in capsys.readouterr().err


def test_bad_partitions_and_options(tmp_path: Path) -> None:
    conf = tmp_path / "partitions.conf"
    conf.write_text("compute=0x1 : 0x42 ;\n")
    done = _sm("run", "--topology", str(DATA / "mesh-2x2.json"), "--run-dir", str(tmp_path),
               "--partitions", str(conf))
    assert done.returncode == 2
    assert "partition compute: no host has port GUID 0x0000000000000042" in done.stderr
    done = _sm("run", "--topology", str(DATA / "mesh-2x2.json"), "--run-dir", str(tmp_path),
               "--quiet-period", "1", "--suppress-window", "2")
    assert done.returncode == 2 and "must be shorter than the SIF quiet period" in done.stderr
    done = _sm("status", str(tmp_path))
    assert done.returncode == 2 and "no SM answers on" in done.stderr


def test_partition_warnings_are_printed_and_logged(tmp_path: Path) -> None:
    """What OpenSM only logs about a partitions.conf, `sm run` prints (line:column) and logs, and goes on."""
    conf = tmp_path / "partitions.conf"
    conf.write_text("compute=0x1, pci=1 : 0x000000fffe000000=root ;\n")
    done = _sm("run", "--topology", str(DATA / "mesh-2x2.json"), "--run-dir", str(tmp_path),
               "--partitions", str(conf), "--quiet-period", "1", "--suppress-window", "2")
    assert done.returncode == 2  # the bad option, after the partitions were read
    assert done.stderr.splitlines()[:2] == [
        f"sm: warning: {conf}:1:14: unknown partition flag 'pci' - ignored",
        f"sm: warning: {conf}:1:41: 0x000000fffe000000=root: not full, limited or both - read as limited"]
    assert "unknown partition flag 'pci'" in (tmp_path / "logs" / "sm.log").read_text()


@pytest.mark.parametrize(("tls", "expected"), [
    (["--tls-cert", "sm.pem"], "--tls-cert and --tls-key go together"),
    (["--tls-cert", "sm.pem", "--tls-key", "sm.key"], "--tls-cert needs --tls-cacert"),
    (["--tls-cacert", "missing-ca.pem"], "TLS CA certificate missing-ca.pem not found"),
])
def test_bad_tls_options_stop_with_a_clear_message(tmp_path: Path, tls: list[str], expected: str) -> None:
    done = _sm("run", "--topology", str(DATA / "mesh-2x2.json"), "--run-dir", str(tmp_path), *tls)
    assert done.returncode == 2 and expected in done.stderr and "Traceback" not in done.stderr


def test_traceback_table_json_and_png(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "topology.json").write_text((DATA / "fattree-2x2.json").read_text())
    log = EventLog(tmp_path / "events.jsonl")
    log.emit("traceback", victim="h3", bad_key="0x1234", claimed_source="fec0::1:0:ff:fe00:3",
             claimed_host="h4", traced_host="h1", traced_switch="s1", traced_port=1, scheme="port-marking",
             packets_needed=1,
             mf="0x0000000001")
    log.emit("filter-installed", switch="s1", port=1, mode="invalid-list", pkey="0x1234", latency_ms=3.2)
    log.emit("filter-flushed", switch="s1", port=1, mode="invalid-list", pkeys=["0x1234"], count=9,
             active_s=6.1)
    log.close()
    assert cli.main(["traceback", str(tmp_path), "--png", str(tmp_path / "tb.png")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["time", "victim", "bad", "key", "claimed", "source", "traced", "host", "switch",
                              "port", "scheme", "packets", "filter"]
    assert out[2].split()[1:10] == ["h3", "0x1234", "h4", "h1", "s1", "1", "port-marking", "1",
                                    "invalid-list"]
    assert "flushed after 6.1 s" in out[2]
    assert (tmp_path / "tb.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert cli.main(["traceback", str(tmp_path), "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["traced_port"] == 1 and row["claimed"] == "h4"


def _catches_sigterm(pid: int) -> bool:
    """Whether the process has a SIGTERM handler yet (SigCgt in /proc): before that, no Python code of
    ours runs, and the interpreter's start-up cannot be asked to exit cleanly."""
    status = Path(f"/proc/{pid}/status").read_text()
    caught = next(line.split()[1] for line in status.splitlines() if line.startswith("SigCgt:"))
    return bool(int(caught, 16) >> (signal.SIGTERM - 1) & 1)


@pytest.mark.parametrize("running", [False, True])
def test_sigterm_at_any_time_exits_cleanly(tmp_path: Path, running: bool) -> None:
    """While still loading its modules, or once running and waiting for switches that never answer."""
    topo = tmp_path / "topology.json"
    topo.write_text((DATA / "mesh-2x2.json").read_text())
    events = tmp_path / "events.jsonl"
    proc = subprocess.Popen([sys.executable, "-m", "ibsm.cli", "run", "--topology", str(topo)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        def ready() -> bool:
            assert proc.poll() is None
            return _catches_sigterm(proc.pid) and (
                not running or (events.exists() and '"sm-start"' in events.read_text()))

        assert poll_until(ready, 60, interval=0.01)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if running:
        assert '"sm-stop"' in events.read_text()
