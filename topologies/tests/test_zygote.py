"""The zygote forks switches and agents: its children run the entry or binary asked for, in the namespace
asked for, under their own name, and are reaped, signalled and stopped by pid; only its owner may talk
to it; nothing of it outlives it."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from ibsec.polling import poll_until

from topologies import run
from topologies.zygote import ENTRY_FAILED, Zygote, ZygoteError

from .conftest import needs_root

PROBE = "topologies.tests.zygote_probe:probe"


@pytest.fixture
def zygote(tmp_path: Path) -> Iterator[Zygote]:
    z = Zygote.start(tmp_path / "zygote.sock", tmp_path / "zygote.log", modules=(PROBE.split(":")[0],))
    try:
        yield z
    finally:
        z.close()


def probed(log: Path, timeout: float = 30) -> dict[str, object]:
    assert poll_until(lambda: log.exists() and log.read_text().strip(), timeout), f"no output in {log}"
    seen: dict[str, object] = json.loads(log.read_text().splitlines()[0])
    return seen


def test_a_child_runs_the_entry_as_its_own_named_process_and_its_exit_status_is_reported(
        zygote: Zygote, tmp_path: Path) -> None:
    child = zygote.spawn("sw s9_9", ["3", "x y"], tmp_path / "child.log", entry=PROBE, prog="p4switch")
    assert child.wait(timeout=30) == 3
    seen = probed(tmp_path / "child.log")
    assert seen["argv"] == ["3", "x y"] and seen["prog"] == "p4switch" and seen["comm"] == "sw s9_9"
    assert seen["sid"] == child.pid  # a session of its own
    assert zygote.process is not None and seen["ppid"] == zygote.process.pid
    assert seen["prepared_in"] == zygote.process.pid  # the module's before_fork ran in the zygote
    assert seen["stdin"] == "/dev/null"
    assert seen["netns"] == os.stat("/proc/self/ns/net").st_ino


def test_a_child_without_entry_executes_its_argv(zygote: Zygote, tmp_path: Path) -> None:
    child = zygote.spawn("bin", ["sh", "-c", "echo from-sh; exit 4"], tmp_path / "sh.log")
    assert child.wait(timeout=30) == 4
    assert (tmp_path / "sh.log").read_text() == "from-sh\n"
    missing = zygote.spawn("bin", ["/nonexistent/binary"], tmp_path / "missing.log")
    assert missing.wait(timeout=30) == 127
    assert "nonexistent" in (tmp_path / "missing.log").read_text()


def test_an_entry_that_cannot_be_imported_fails_the_child_not_the_zygote(zygote: Zygote,
                                                                          tmp_path: Path) -> None:
    child = zygote.spawn("broken", [], tmp_path / "broken.log", entry="no_such_module_anywhere:main")
    assert child.wait(timeout=30) == ENTRY_FAILED
    assert "ModuleNotFoundError" in (tmp_path / "broken.log").read_text()
    assert zygote.spawn("ok", ["0"], tmp_path / "ok.log", entry=PROBE).wait(timeout=30) == 0


def test_signals_reach_the_child_by_pid(zygote: Zygote, tmp_path: Path) -> None:
    child = zygote.spawn("waiting", ["0", "wait"], tmp_path / "w.log", entry=PROBE)
    probed(tmp_path / "w.log")
    assert child.poll() is None
    child.send_signal(signal.SIGTERM)
    assert child.wait(timeout=30) == -signal.SIGTERM
    assert not run._alive(child.pid)


def test_stop_terms_every_child_at_once_and_kills_those_that_stay(zygote: Zygote, tmp_path: Path) -> None:
    polite = [zygote.spawn(f"polite{i}", ["0", "wait"], tmp_path / f"p{i}.log", entry=PROBE)
              for i in range(3)]
    # SIG_IGN survives exec: the sleep itself ignores SIGTERM, and nothing is left behind once it is killed
    stubborn = zygote.spawn("stubborn", ["sh", "-c", "trap '' TERM; echo ready; exec sleep 60"],
                            tmp_path / "s.log")
    for i in range(3):
        probed(tmp_path / f"p{i}.log")
    log = tmp_path / "s.log"
    assert poll_until(lambda: "ready" in (log.read_text() if log.exists() else ""), 30), \
        "the stubborn child never started"
    zygote.stop([*polite, stubborn], timeout=1.0)
    assert [c.returncode for c in polite] == [-signal.SIGTERM] * 3
    assert stubborn.returncode == -signal.SIGKILL  # it ignored SIGTERM
    assert not any(run._alive(c.pid) for c in (*polite, stubborn))


def test_bad_requests_are_refused_and_the_zygote_goes_on(zygote: Zygote, tmp_path: Path) -> None:
    with pytest.raises(ZygoteError, match="unknown op"):
        zygote.call({"op": "format-the-disk"})
    with pytest.raises(ZygoteError, match="KeyError"):
        zygote.call({"op": "spawn", "name": "no argv"})
    assert zygote.call({"op": "signal", "pid": os.getpid(), "signal": 0}) == {"ok": False}  # not its child
    assert zygote.spawn("ok", ["0"], tmp_path / "ok.log", entry=PROBE).wait(timeout=30) == 0


def test_only_root_can_open_the_socket(zygote: Zygote) -> None:
    assert stat.S_IMODE(zygote.path.stat().st_mode) == 0o600


@needs_root
def test_a_child_joins_the_namespace_of_a_given_process(zygote: Zygote, tmp_path: Path) -> None:
    elsewhere = subprocess.Popen(["unshare", "--net", "sleep", "60"])
    try:
        target = f"/proc/{elsewhere.pid}/ns/net"
        assert poll_until(lambda: os.stat(target).st_ino != os.stat("/proc/self/ns/net").st_ino, 10), \
            "unshare did not make a namespace"
        child = zygote.spawn("host h1", ["0"], tmp_path / "ns.log", entry=PROBE, netns=elsewhere.pid)
        assert child.wait(timeout=30) == 0
        assert probed(tmp_path / "ns.log")["netns"] == os.stat(target).st_ino
    finally:
        elsewhere.kill()
        elsewhere.wait()


def test_stopping_the_zygote_stops_every_child_first(tmp_path: Path) -> None:
    zygote = Zygote.start(tmp_path / "z.sock", tmp_path / "z.log", modules=())
    children = [zygote.spawn(f"c{i}", ["sleep", "60"], tmp_path / f"c{i}.log") for i in range(5)]
    assert all(c.poll() is None for c in children)
    zygote.close()
    assert zygote.process is not None and zygote.process.returncode == 0
    assert [c.pid for c in children if run._alive(c.pid)] == []
    assert not zygote.path.exists()
    assert all(c.poll() is not None for c in children)  # the zygote is gone: its children count as ended


def test_children_get_sigterm_when_the_zygote_is_killed(tmp_path: Path) -> None:
    zygote = Zygote.start(tmp_path / "z.sock", tmp_path / "z.log", modules=())
    child = zygote.spawn("orphan", ["sleep", "60"], tmp_path / "o.log")
    assert zygote.process is not None
    zygote.process.kill()
    zygote.process.wait()
    assert poll_until(lambda: not run._alive(child.pid), 10), "the child outlived its zygote"


def test_a_stop_signal_right_after_the_fork_stops_the_child(tmp_path: Path) -> None:
    """SIGTERM before the child has its own handlers is not lost to the zygote's handler: the child ends
    by it instead of running its program."""
    zygote = Zygote.start(tmp_path / "z.sock", tmp_path / "z.log",
                          modules=("topologies.tests.zygote_term_at_fork",))
    try:
        child = zygote.spawn("early", ["sh", "-c", "echo ran"], tmp_path / "e.log")
        assert child.wait(timeout=30) == -signal.SIGTERM
        assert not (tmp_path / "e.log").exists()  # ended before it opened its log, let alone ran
    finally:
        zygote.close()
