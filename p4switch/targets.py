"""The P4 targets the project runs on and the one BMv2 command line they share.

``p4switch`` (compiler ``p4switch-cc``, switch ``p4switch``) and ``bmv2`` (``p4c-bm2-ss``,
``simple_switch_grpc``): the launcher, the PTF harness, the SM's process tests and the benchmarks start
either with :meth:`Target.switch_argv`, so both targets always get the same options.

A standard BMv2 build (PI and Thrift, as p4lang's build scripts make it) opens a Thrift server besides the
P4Runtime one, on port 9090 unless ``--thrift-port`` says otherwise, on every address: the second switch
started with the default cannot bind it and exits. Whether a binary has that server depends on how it was
built, so it is read from the binary's ``--help`` at start-up, never assumed: a switch whose help lists
``--thrift-port`` gets a free port of its own; a build without Thrift lists no such option and gets none.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

VENV_BIN = Path(sys.executable).parent
HELP_TIMEOUT = 60.0
START_TIMEOUT = 60.0
STOP_TIMEOUT = 10.0
_OPTION = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")


@dataclass(frozen=True)
class Target:
    """A P4 target: its compiler and its switch program, both with BMv2's command lines."""

    name: str
    compiler: str
    switch: str

    def tool(self, program: str) -> str | None:
        """Where ``program`` is: the venv's bin first (our own tools), then PATH."""
        return shutil.which(program, path=f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}")

    def missing(self) -> str | None:
        """Why this target cannot run here (a tool not found), or None."""
        for program in (self.compiler, self.switch):
            if self.tool(program) is None:
                return f"{program} is in neither the venv nor PATH (TARGET={self.name})"
        return None

    def switch_path(self) -> str:
        path = self.tool(self.switch)
        if path is None:
            raise FileNotFoundError(f"target {self.name}: {self.switch} is in neither the venv nor PATH")
        return path

    def switch_options(self) -> frozenset[str]:
        """The long options the switch binary offers (read from its ``--help``)."""
        return help_options(self.switch_path())

    def switch_argv(self, *, device_id: int, ports: Mapping[int, str], grpc_port: int, cpu_port: int | None,
                    log: Path | None = None, pcap_dir: Path | None = None, log_level: str = "info",
                    program: Path | None = None, target_args: Sequence[str] = ()) -> list[str]:
        """The switch's command line: BMv2's general options, then ``--`` and simple_switch_grpc's target
        options (``target_args`` last); P4Runtime on 127.0.0.1:``grpc_port``, PacketIn and PacketOut on
        ``cpu_port`` (the program's CPU port: the caller knows its program, the target does not; None: no
        packet I/O), a free Thrift port where the build has Thrift, and no program (``--no-p4``: a controller
        pushes it) unless ``program`` is given. The log goes to ``log``.txt (BMv2 adds the .txt) or, without
        ``log``, to stdout; its level is explicit because BMv2's default, trace, writes lines per packet
        (megabytes a second in a flood)."""
        argv = [self.switch_path(), "--device-id", str(device_id)]
        for number, iface in sorted(ports.items()):
            argv += ["-i", f"{number}@{iface}"]
        argv += ["--log-file", str(log)] if log else ["--log-console"]
        argv += ["--log-level", log_level]
        if pcap_dir is not None:
            argv += ["--pcap", str(pcap_dir)]
        if "--thrift-port" in self.switch_options():
            argv += ["--thrift-port", str(free_port("0.0.0.0"))]  # Thrift listens on every address
        argv += [str(program)] if program else ["--no-p4"]
        cpu = ["--cpu-port", str(cpu_port)] if cpu_port is not None else []
        return argv + ["--", "--grpc-server-addr", f"127.0.0.1:{grpc_port}", *cpu, *target_args]


TARGETS = {
    "p4switch": Target("p4switch", "p4switch-cc", "p4switch"),
    "bmv2": Target("bmv2", "p4c-bm2-ss", "simple_switch_grpc"),
}


def target(name: str) -> Target:
    """The target called ``name`` (ValueError naming the choices otherwise)."""
    try:
        return TARGETS[name]
    except KeyError:
        raise ValueError(f"unknown target {name!r}: {' or '.join(TARGETS)}") from None


def from_env() -> Target:
    """The target named by $TARGET (default p4switch)."""
    return target(os.environ.get("TARGET", "p4switch"))


@functools.cache
def help_options(binary: str) -> frozenset[str]:
    """The ``--long-options`` that ``binary --help`` lists (once per binary and process)."""
    done = subprocess.run([binary, "--help"], capture_output=True, text=True, timeout=HELP_TIMEOUT,
                          stdin=subprocess.DEVNULL)
    return frozenset(_OPTION.findall(done.stdout + done.stderr))


_given: set[int] = set()


def free_port(address: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on at ``address`` now (the kernel's pick for port 0), and never one this
    process was given before. The port is free again until the switch binds it, so the kernel may pick it
    twice; gRPC servers bind with SO_REUSEPORT, so two switches handed one port would both start and share
    its connections (a torus once had its SM program s1_2 in place of s3_0)."""
    while True:
        with socket.socket() as sock:
            sock.bind((address, 0))
            port = int(sock.getsockname()[1])
        if port not in _given:
            _given.add(port)
            return port


@contextlib.contextmanager
def running(argv: list[str], grpc_port: int, output: Path, timeout: float = START_TIMEOUT
            ) -> Iterator[subprocess.Popen[bytes]]:
    """The switch process of ``argv`` (stdout and stderr to ``output``) once 127.0.0.1:``grpc_port``
    answers; stopped by its pid on leaving (SIGTERM, SIGKILL after STOP_TIMEOUT), whatever happened."""
    with open(output, "ab") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        wait_listening(proc, grpc_port, output, timeout)
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def wait_listening(proc: subprocess.Popen[bytes], port: int, output: Path, timeout: float) -> None:
    """Return once 127.0.0.1:``port`` accepts; RuntimeError with the end of ``output`` if the process exits
    first or the port stays closed for ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while proc.poll() is None and time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return
        time.sleep(0.1)
    what = f"exited with {proc.returncode}" if proc.poll() is not None else f"did not open port {port} " \
        f"within {timeout:.0f} s"
    tail = output.read_text(errors="replace")[-3000:] if output.exists() else ""
    raise RuntimeError(f"switch (pid {proc.pid}) {what} (output {output}):\n{tail}")
