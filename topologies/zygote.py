"""A zygote: one Python process that imports the switches' and agents' code once and forks every switch and
agent of a fabric from itself.

A p4switch process and an agent each spend most of their memory and start-up time on the same imports
(grpc, protobuf, finsy, cryptography, scapy, our own modules): about 25 MB and 55 MB and a second or two
of CPU each when every process imports them itself. Forked from a zygote that has imported them (and
frozen them out of the garbage collector's reach, so collections do not write to their pages), every
child shares those pages copy-on-write and starts in milliseconds. Each switch is still its own process
with its own P4Runtime server and its own pid, each agent its own process in its host's network namespace.

    python -m topologies.zygote --socket RUN/zygote.sock [--preload MODULE ...] [--exit-with-stdin]

The zygote answers on a Unix socket only root can open (mode 0600, and the peer's uid checked), one JSON
object per line each way:

    {"op": "spawn", "name": "sw s0_0", "entry": "p4switch.cli:main" | null, "prog": "p4switch",
     "argv": [...], "log": "logs/s0_0.log", "netns": PID | null}   -> {"pid": N}
    {"op": "poll", "pids": [N, ...]}                      -> {"exited": {"N": status, ...}}
    {"op": "signal", "pid": N | "pids": [N, ...], "signal": 15}  -> {"ok": true}

``entry`` runs a preloaded module's function with ``argv`` (its command line without the program name,
which is ``prog``); without it, ``argv`` is executed (``argv[0]`` looked up on PATH: BMv2's
simple_switch_grpc, say). ``netns`` joins the network (and, where it differs, mount) namespace of that
process first, as ``mnexec -a`` does: a Mininet host's shell. Each child gets its own session, its output
in ``log``, a 15-character process name (``sw s0_0``, ``host h3``) and SIGTERM if the zygote dies. The
zygote reaps its children and reports their exit status; SIGTERM or SIGINT (or, with
``--exit-with-stdin``, the end of its standard input, for a zygote started over ssh) stops every child
(SIGTERM, then SIGKILL after a grace period) and then itself.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import gc
import importlib
import json
import os
import selectors
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ibsec.polling import poll_until

PR_SET_NAME = 15
PR_SET_PDEATHSIG = 1
CLONE_NEWNS = 0x00020000
CLONE_NEWNET = 0x40000000
STOP_GRACE = 10.0
EXEC_FAILED = 127
ENTRY_FAILED = 70
SPAWN_TIMEOUT = 300.0
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
"""what stops a child: blocked from the fork until the child has its own handlers"""
"""Bounds a hang of the zygote, not its speed: its first imports from a fresh clone's venv took over 60 s
at load average 20."""

PRELOAD = ("p4switch.cli", "ibsec.agent.daemon")
"""What a fabric's zygote imports before it forks: the switch process and the agent."""
BEFORE_FORK = "before_fork"
"""A preloaded module's function of no arguments, when it has one, that the zygote calls once after
importing it: what every child would otherwise build again on its own (so unshared) pages, such as the
switch's cffi declarations."""


# ---------------------------------------------------------------------------------------------------------
# the child, right after fork
# ---------------------------------------------------------------------------------------------------------

_libc = ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def join_namespaces(pid: int) -> None:
    """Enter the network namespace of process ``pid``, and its mount namespace where it has its own
    (what ``mnexec -a PID`` does for a Mininet host's commands)."""
    for kind, flag in (("net", CLONE_NEWNET), ("mnt", CLONE_NEWNS)):
        target = f"/proc/{pid}/ns/{kind}"
        if os.stat(target).st_ino == os.stat(f"/proc/self/ns/{kind}").st_ino:
            continue
        fd = os.open(target, os.O_RDONLY)
        try:
            _check(_libc.setns(fd, flag), f"setns {target}")
        finally:
            os.close(fd)


def name_process(name: str) -> None:
    """The name ``ps``, ``top`` and /proc/PID/comm show (15 bytes at most)."""
    _libc.prctl(PR_SET_NAME, ctypes.c_char_p(name.encode()[:15]), 0, 0, 0)


def _become_child(request: dict[str, Any], parent: int, inherited: Sequence[int],
                  mask: set[int | signal.Signals]) -> int:
    """Set the forked child up as ``request`` says and run it; its exit status. ``inherited``: the
    zygote's descriptors (socket, selector, wakeup pipe), closed first; ``mask``: the signal mask to
    restore once the zygote's handlers are gone (a stop signal that came since the fork is then taken)."""
    os.setsid()
    _check(_libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0), "prctl")
    if os.getppid() != parent:  # the zygote died before the death signal was armed
        return 1
    signal.set_wakeup_fd(-1)
    for sig in (*STOP_SIGNALS, signal.SIGCHLD):
        signal.signal(sig, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    for fd in inherited:
        with contextlib.suppress(OSError):
            os.close(fd)
    null = os.open(os.devnull, os.O_RDONLY)
    log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(null, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(null)
    os.close(log)
    if request.get("netns"):
        join_namespaces(int(request["netns"]))
    name_process(request["name"])
    argv = [str(a) for a in request["argv"]]
    if not request.get("entry"):
        try:
            os.execvp(argv[0], argv)
        except OSError as err:
            raise OSError(err.errno, f"cannot execute {argv[0]}: {err.strerror}") from None
    module, _, function = str(request["entry"]).partition(":")
    main: Callable[[list[str]], int | None] = getattr(importlib.import_module(module), function)
    sys.argv = [str(request.get("prog") or request["name"]), *argv]
    try:
        status = main(argv)
    except SystemExit as done:
        status = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
    return int(status or 0)


def _run_child(request: dict[str, Any], parent: int, inherited: Sequence[int],
               mask: set[int | signal.Signals]) -> None:
    """The forked child: never returns into the zygote's loop, whatever happens."""
    status = ENTRY_FAILED
    try:
        status = _become_child(request, parent, inherited, mask)
    except OSError as err:
        print(f"zygote child {request.get('name')}: {err}", file=sys.stderr)
        status = EXEC_FAILED
    except BaseException:  # noqa: BLE001 - the child must end here, never fall back into the zygote
        traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(status)


# ---------------------------------------------------------------------------------------------------------
# the server
# ---------------------------------------------------------------------------------------------------------


class ZygoteServer:
    """The zygote's loop: requests on the socket, children reaped, stop on a signal (or stdin's end)."""

    def __init__(self, path: Path, exit_with_stdin: bool) -> None:
        self.path = path
        self.children: dict[int, str] = {}
        self.exited: dict[int, int] = {}
        self.stopping = False
        self.selector = selectors.DefaultSelector()
        old = os.umask(0o177)
        try:
            path.unlink(missing_ok=True)
            self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.listener.bind(str(path))
        finally:
            os.umask(old)
        self.listener.listen(16)
        self.selector.register(self.listener, selectors.EVENT_READ, self._accept)
        self.wakeup_r, wakeup_w = os.pipe()
        os.set_blocking(wakeup_w, False)
        os.set_blocking(self.wakeup_r, False)
        self.wakeup_w = wakeup_w
        signal.set_wakeup_fd(wakeup_w)
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGCHLD):
            signal.signal(sig, self._on_signal)
        self.selector.register(self.wakeup_r, selectors.EVENT_READ, self._drain_wakeup)
        if exit_with_stdin:
            self.selector.register(sys.stdin.fileno(), selectors.EVENT_READ, self._on_stdin)
        self.buffers: dict[int, bytes] = {}

    def _on_signal(self, signum: int, _frame: object) -> None:
        if signum != signal.SIGCHLD:
            self.stopping = True

    def _drain_wakeup(self, _key: Any) -> None:
        with contextlib.suppress(BlockingIOError):
            os.read(self.wakeup_r, 4096)

    def _on_stdin(self, _key: Any) -> None:
        if not os.read(sys.stdin.fileno(), 4096):
            say("standard input closed: stopping")
            self.stopping = True

    def _accept(self, _key: Any) -> None:
        conn, _ = self.listener.accept()
        creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        _, uid, _ = struct.unpack("3i", creds)
        if uid != os.geteuid():
            say(f"refused a connection from uid {uid}")
            conn.close()
            return
        self.buffers[conn.fileno()] = b""
        self.selector.register(conn, selectors.EVENT_READ, self._serve)

    def _serve(self, key: Any) -> None:
        conn: socket.socket = key.fileobj
        data = conn.recv(65536)
        if not data:
            self.selector.unregister(conn)
            self.buffers.pop(conn.fileno(), None)
            conn.close()
            return
        buffered = self.buffers[conn.fileno()] + data
        *lines, self.buffers[conn.fileno()] = buffered.split(b"\n")
        for line in lines:
            try:
                answer = self.handle(json.loads(line))
            except (ValueError, KeyError, TypeError, OSError) as err:
                answer = {"error": f"{type(err).__name__}: {err}"}
            try:
                conn.sendall(json.dumps(answer).encode() + b"\n")
            except OSError:  # the client went away; its children stay ours
                return

    def handle(self, request: dict[str, Any]) -> dict[str, Any]:
        self.reap()
        op = request["op"]
        if op == "spawn":
            return {"pid": self.spawn(request)}
        if op == "poll":
            return {"exited": {str(p): self.exited[p] for p in map(int, request["pids"]) if p in self.exited}}
        if op == "signal":
            pids = [int(p) for p in request["pids"]] if "pids" in request else [int(request["pid"])]
            for pid in pids:
                if pid in self.children and pid not in self.exited:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, int(request["signal"]))
            return {"ok": all(pid in self.children for pid in pids)}
        raise ValueError(f"unknown op {op!r}")

    def spawn(self, request: dict[str, Any]) -> int:
        for key in ("name", "argv", "log"):
            if key not in request:
                raise KeyError(key)
        sys.stdout.flush()
        sys.stderr.flush()
        inherited = {self.listener.fileno(), self.wakeup_r, self.wakeup_w, self.selector_fd(),
                     *(k.fd for k in self.selector.get_map().values() if k.fd > 2)}
        zygote = os.getpid()
        # Stop signals wait, blocked, until the child has dropped the zygote's handlers: one that came in
        # between would run the zygote's handler in the child, which only marks the zygote's loop as
        # stopping, and the child would go on as if never asked to stop (killed after STOP_GRACE).
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
        try:
            pid = os.fork()
            if pid == 0:
                _run_child(request, zygote, sorted(inherited), mask)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        self.children[pid] = str(request["name"])
        return pid

    def selector_fd(self) -> int:
        fileno: Callable[[], int] | None = getattr(self.selector, "fileno", None)
        return fileno() if fileno else -1

    def reap(self) -> None:
        while self.children.keys() - self.exited.keys():
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            self.exited[pid] = os.waitstatus_to_exitcode(status)

    def serve(self) -> None:
        say(f"listening on {self.path} (pid {os.getpid()})")
        while not self.stopping:
            for key, _ in self.selector.select(timeout=1.0):
                key.data(key)
            self.reap()
        self.stop_children()
        self.path.unlink(missing_ok=True)
        say("stopped")

    def stop_children(self) -> None:
        """SIGTERM every live child at once; SIGKILL what is left after STOP_GRACE seconds."""
        self.reap()
        live = [p for p in self.children if p not in self.exited]
        for pid in live:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE
        while self.children.keys() - self.exited.keys() and time.monotonic() < deadline:
            time.sleep(0.05)
            self.reap()
        for pid in self.children.keys() - self.exited.keys():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        say(f"stopped {len(live)} children")


def say(text: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} zygote {os.getpid()}: {text}", flush=True)


def preload(modules: Sequence[str]) -> None:
    """Import ``modules`` (calling each one's ``before_fork`` where it has one) and keep everything they
    made out of the garbage collector's generations: a collection in a child would otherwise write to (and
    so copy) every page holding those objects."""
    for module in modules:
        prepare: Callable[[], None] | None = getattr(importlib.import_module(module), BEFORE_FORK, None)
        if prepare is not None:
            prepare()
    gc.collect()
    gc.freeze()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m topologies.zygote", description=__doc__.splitlines()[0])
    parser.add_argument("--socket", type=Path, required=True, help="Unix socket to serve (made mode 0600)")
    parser.add_argument("--preload", action="append", default=[], help="module to import before forking")
    parser.add_argument("--exit-with-stdin", action="store_true",
                        help="stop (and stop every child) when standard input closes (a zygote over ssh)")
    args = parser.parse_args(argv)
    preload(args.preload)
    ZygoteServer(args.socket, args.exit_with_stdin).serve()
    return 0


# ---------------------------------------------------------------------------------------------------------
# the launcher's side
# ---------------------------------------------------------------------------------------------------------


class ZygoteError(RuntimeError):
    """The zygote refused a request or is gone (the message says which and why)."""


class Zygote:
    """A running zygote: the process (if this side started it) and a connection to its socket."""

    def __init__(self, path: Path, process: subprocess.Popen[bytes] | None = None) -> None:
        self.path = path
        self.process = process
        self._lock = threading.Lock()
        self._conn: socket.socket | None = None
        self._reader: Any = None

    @classmethod
    def start(cls, path: Path, log: Path, modules: Sequence[str] = PRELOAD,
              timeout: float = SPAWN_TIMEOUT) -> Zygote:
        """Start a zygote with ``modules`` preloaded and wait until it listens on ``path``."""
        argv = [sys.executable, "-m", "topologies.zygote", "--socket", str(path)]
        for module in modules:
            argv += ["--preload", module]
        with open(log, "ab") as out:
            proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True)
        zygote = cls(path, proc)
        poll_until(lambda: path.exists() or proc.poll() is not None, timeout)
        if not path.exists():
            proc.kill()
            raise ZygoteError(f"the zygote did not start (log {log}):\n{log.read_text()[-2000:]}")
        return zygote

    def call(self, request: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            if self._conn is None:
                self._conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                self._conn.settimeout(SPAWN_TIMEOUT)
                try:
                    self._conn.connect(str(self.path))
                except OSError as err:
                    self._conn = None
                    raise ZygoteError(f"zygote at {self.path}: {err}") from err
                self._reader = self._conn.makefile("rb")
            try:
                self._conn.sendall(json.dumps(request).encode() + b"\n")
                line = self._reader.readline()
            except OSError as err:
                raise ZygoteError(f"zygote at {self.path}: {err}") from err
        if not line:
            raise ZygoteError(f"zygote at {self.path} closed the connection")
        answer: dict[str, Any] = json.loads(line)
        if "error" in answer:
            raise ZygoteError(f"zygote refused {request['op']}: {answer['error']}")
        return answer

    def spawn(self, name: str, argv: Sequence[str], log: Path, *, entry: str | None = None,
              prog: str | None = None, netns: int | None = None) -> Child:
        """Fork a child named ``name`` running ``entry(argv)`` as program ``prog`` (or executing
        ``argv``) with its output appended to ``log``, in the namespaces of process ``netns`` if given."""
        answer = self.call({"op": "spawn", "name": name, "entry": entry, "prog": prog, "argv": list(argv),
                            "log": str(log), "netns": netns})
        return Child(self, int(answer["pid"]), name)

    def exited(self, pids: Sequence[int]) -> dict[int, int]:
        """Exit statuses of the children among ``pids`` that have ended (all of them, if the zygote is
        gone: its children got SIGTERM with it)."""
        try:
            answer = self.call({"op": "poll", "pids": list(pids)})
        except ZygoteError:
            return {pid: -signal.SIGTERM for pid in pids}
        return {int(pid): int(status) for pid, status in answer["exited"].items()}

    def stop(self, children: Sequence[Child], timeout: float = STOP_GRACE) -> None:
        """SIGTERM every child at once and SIGKILL those still running after ``timeout``, a few requests
        in all (one round trip per child and per poll made a 288-process teardown spend 3 s talking);
        each child's ``returncode`` is set."""
        live = {c.pid: c for c in children if c.returncode is None}
        if not live:
            return
        for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 5.0)):
            left = [pid for pid, child in live.items() if child.returncode is None]
            if not left:
                return
            with contextlib.suppress(ZygoteError):
                self.call({"op": "signal", "pids": left, "signal": int(sig)})
            deadline = time.monotonic() + wait
            while True:
                for pid, status in self.exited(left).items():
                    live[pid].returncode = status
                if all(live[p].returncode is not None for p in left) or time.monotonic() > deadline:
                    break
                time.sleep(0.05)

    def close(self) -> None:
        """Stop the zygote (it stops its children first) and wait for it."""
        with self._lock:
            if self._conn is not None:
                self._reader.close()
                self._conn.close()
                self._conn = None
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=STOP_GRACE + 5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)


class Child:
    """A process the zygote forked, with what the launcher uses of ``subprocess.Popen``."""

    def __init__(self, zygote: Zygote, pid: int, name: str) -> None:
        self.zygote = zygote
        self.pid = pid
        self.name = name
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self.zygote.exited([self.pid]).get(self.pid)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(self.name, timeout or 0.0)
            time.sleep(0.05)
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            with contextlib.suppress(ZygoteError):
                self.zygote.call({"op": "signal", "pid": self.pid, "signal": int(sig)})

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


if __name__ == "__main__":
    sys.exit(main())
