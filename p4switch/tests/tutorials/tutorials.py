"""Plumbing of the p4lang/tutorials tests: where the tutorials and their client environment are, a private
copy of the tutorials to run in, the tools under BMv2's names, and a network namespace per run.

The tutorials are read from ../shared/p4lang/tutorials and copied, file for file, into a temporary
directory (their Makefiles write build/, logs/ and pcaps/ beside the sources); :func:`changed_files` proves
afterwards that no file of theirs was changed. Everything runs in a network namespace of its own, so the
fixed names the tutorials use (veth0..veth17, s1-eth1, port 9559, 50051..) cannot collide with another
run, and deleting the namespace removes every interface."""

from __future__ import annotations

import contextlib
import fcntl
import filecmp
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from p4switch.tests.bmv2json.test_bmv2json_p4c import find_p4c

REPO = Path(__file__).resolve().parents[3]
TUTORIALS = REPO.parent / "shared" / "p4lang" / "tutorials"
REFERENCE_BIN = REPO.parent / "shared" / "p4lang" / "bin"
CLIENT_ENV = REPO / "build" / "tutorials-client"
"""the client environment of tutorials/client/setup-client.sh, made once (build/ is not tracked)"""
VENV_BIN = Path(sys.executable).parent
CLIENT_ENV_TIMEOUT = 900
PROTOBUF_ENV = {"PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION": "python"}
"""setup-client.sh's advice: the registry's p4runtime bindings predate the protobuf it installs"""


def missing() -> str | None:
    """Why the tutorials tests cannot run here, or None."""
    if not (TUTORIALS / "utils" / "run_exercise.py").is_file():
        return f"p4lang/tutorials not found at {TUTORIALS}"
    if os.geteuid() != 0:
        return "the tutorials' flows need root (network namespaces, Mininet, veths)"
    return None


def client_env() -> Path:
    """The tutorials' client environment (ptf, p4runtime, p4.tmp, mininet), made by their own
    setup-client.sh the first time; a lock keeps two test runs from building it at once."""
    CLIENT_ENV.parent.mkdir(parents=True, exist_ok=True)
    with open(CLIENT_ENV.parent / "tutorials-client.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = subprocess.run(["bash", str(TUTORIALS / "client" / "setup-client.sh"), str(CLIENT_ENV)],
                              capture_output=True, text=True, timeout=CLIENT_ENV_TIMEOUT)
    if done.returncode:
        raise RuntimeError(f"setup-client.sh failed ({done.returncode}):\n{done.stdout}{done.stderr}")
    return CLIENT_ENV


def copy_tutorials(destination: Path) -> Path:
    """A writable copy of the tutorials (as a git clone would be)."""
    copy = destination / "tutorials"
    shutil.copytree(TUTORIALS, copy, symlinks=True)
    for path in [copy, *copy.rglob("*")]:
        if not path.is_symlink():
            path.chmod(path.stat().st_mode | 0o200)
    return copy


def changed_files(copy: Path) -> list[str]:
    """Files of the tutorials that differ in ``copy`` (new files, the Makefiles' outputs, do not count)."""
    changed = []
    for original in TUTORIALS.rglob("*"):
        if original.is_file():
            twin = copy / original.relative_to(TUTORIALS)
            if not twin.is_file() or not filecmp.cmp(original, twin, shallow=False):
                changed.append(str(original.relative_to(TUTORIALS)))
    return changed


def p4switch_aliases(directory: Path) -> Path:
    """p4c, p4c-bm2-ss and simple_switch_grpc running p4switch, made by `p4switch aliases`."""
    subprocess.run([str(VENV_BIN / "p4switch"), "aliases", str(directory)], check=True, capture_output=True)
    return directory


def real_p4c_bm2_ss() -> Path | None:
    """p4c's own p4c-bm2-ss (not one of our aliases), on PATH or in ../shared/p4lang/bin, if it runs."""
    found = find_p4c()
    return Path(found) if found else None


def tool_path(tools: Path, client: Path) -> dict[str, str]:
    """The environment a tutorials user has: the P4 tools and the client's python3, ptf first on PATH."""
    return {**os.environ, **PROTOBUF_ENV,
            "PATH": f"{tools}{os.pathsep}{client / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"}


@contextlib.contextmanager
def namespace(tag: str) -> Iterator[str]:
    """A network namespace with its loopback up, deleted (with every interface in it) on exit."""
    name = f"{tag}{os.getpid() % 100000}"
    subprocess.run(["ip", "netns", "add", name], check=True, capture_output=True)
    try:
        subprocess.run(["ip", "-n", name, "link", "set", "lo", "up"], check=True, capture_output=True)
        yield name
    finally:
        subprocess.run(["ip", "netns", "del", name], capture_output=True)


def in_namespace(ns: str, argv: list[str]) -> list[str]:
    """``argv`` run in network namespace ``ns`` (nsenter execs it: the pid is the command's own)."""
    return ["nsenter", f"--net=/run/netns/{ns}", "--", *argv]


def contained(ns: str, argv: list[str]) -> list[str]:
    """``argv`` in ``ns`` and in a PID namespace of its own: whatever it starts (Mininet's host shells,
    switches) dies with it, however it ends."""
    return in_namespace(ns, ["unshare", "--pid", "--fork", "--kill-child", "--mount-proc", *argv])


def stop(proc: subprocess.Popen[Any], timeout: float = 120) -> int:
    """SIGTERM by pid, SIGKILL if it does not exit within ``timeout``; the exit status. The timeout
    bounds a hang: a switch stopping cleanly took over 10 s at load average 25."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait(timeout=5)


def wait_for_output(proc: subprocess.Popen[Any], log: Path, text: str, timeout: float) -> None:
    """Until ``log`` (the process's output) contains ``text``; AssertionError if it exits or times out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if log.exists() and text in log.read_text(errors="replace"):
            return
        if proc.poll() is not None:
            raise AssertionError(f"exited with {proc.returncode}:\n{log.read_text(errors='replace')}")
        time.sleep(0.1)
    raise AssertionError(f"{text!r} not seen within {timeout} s:\n{log.read_text(errors='replace')}")


def makefile_commands(exercise: Path, env: dict[str, str], target: str, *overrides: str) -> list[str]:
    """The commands ``make TARGET`` would run in ``exercise`` (``make -n``), one per line."""
    done = subprocess.run(["make", "-n", "--no-print-directory", target, *overrides], cwd=exercise, env=env,
                          capture_output=True, text=True, check=True)
    return done.stdout.splitlines()


def solution_builds(exercise: Path, env: dict[str, str]) -> list[str]:
    """The Makefile's own compile commands with each exercise source replaced by its solution: what
    ``make build`` does once the exercise is solved."""
    commands = []
    for line in makefile_commands(exercise, env, "build"):
        source = line.rsplit(" ", 1)[-1]
        if source.endswith(".p4") and (exercise / "solution" / source).is_file():
            commands.append(f"{line[:-len(source)]}solution/{source}")
    return commands


def run_command(exercise: Path, env: dict[str, str]) -> tuple[str, str]:
    """The topology file and program the Makefile's ``run`` target hands run_exercise.py."""
    line = next(c for c in makefile_commands(exercise, env, "run", "compiled_json=") if "run_exercise" in c)
    topo, program = re.search(r" -t (\S+)", line), re.search(r" -j (\S+)", line)
    assert topo and program, f"no -t/-j in the Makefile's run command: {line}"
    return topo.group(1), program.group(1)
