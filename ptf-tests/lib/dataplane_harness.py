"""A switch process running p4src/main.p4 on veth pairs: what the PTF wrapper and the benchmark start.

Every veth name carries the creating process's pid, so parallel runs never collide, and everything is
removed (veths deleted, the switch stopped by its pid) even when the caller fails.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
CPU_PORT = 255
DEVICE_ID = 1
START_TIMEOUT = 30.0


@dataclass(frozen=True)
class Target:
    """A P4 target: its compiler and its switch program."""

    name: str
    compiler: str
    switch: str

    def missing(self) -> str | None:
        """Why this target cannot run here, or None."""
        for tool in (self.compiler, self.switch):
            if _which(tool) is None:
                return f"{tool} not found (TARGET={self.name})"
        if os.geteuid() != 0:
            return "creating veth interfaces needs root"
        return None


TARGETS = {
    "p4switch": Target("p4switch", "p4switch-cc", "p4switch"),
    "bmv2": Target("bmv2", "p4c-bm2-ss", "simple_switch_grpc"),
}


def target_from_env() -> Target:
    """The target named by $TARGET (default p4switch)."""
    return TARGETS[os.environ.get("TARGET", "p4switch")]


def _which(tool: str) -> str | None:
    return shutil.which(tool, path=f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}")


@dataclass(frozen=True)
class Switch:
    """A running switch: its P4Runtime address, its ports and the interfaces a tester uses."""

    grpc_addr: str
    tester_ifaces: dict[int, str]
    p4info: Path
    device_config: Path
    log: Path


def build(target: Target, into: Path) -> tuple[Path, Path]:
    """`make build` for ``target`` into the directory ``into``: (program JSON, P4Info). A private build
    directory per run, so concurrent runs never read each other's half-written files."""
    subprocess.run(["make", "-s", "-C", str(ROOT), "build", f"TARGET={target.name}", f"BUILD={into}",
                    f"VENV={VENV_BIN.parent}"], check=True)
    return into / "main.json", into / "main.p4info.txtpb"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_for_port(port: int, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"switch exited with {proc.returncode}; log {log}:\n{log.read_text()[-3000:]}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"switch did not open 127.0.0.1:{port} within {START_TIMEOUT} s; log {log}")


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


@contextmanager
def veth_pairs(ports: list[int], prefix: str = "ib") -> Iterator[tuple[dict[int, str], dict[int, str]]]:
    """({port: switch side}, {port: tester side}) veth pairs, IPv6 off so the kernel sends nothing."""
    tag = f"{prefix}{os.getpid() % 100000}"
    switch_side = {p: f"{tag}s{p}" for p in ports}
    tester_side = {p: f"{tag}t{p}" for p in ports}
    created: list[str] = []
    try:
        for port in ports:
            _ip("link", "add", switch_side[port], "type", "veth", "peer", "name", tester_side[port])
            created.append(switch_side[port])
            for iface in (switch_side[port], tester_side[port]):
                Path(f"/proc/sys/net/ipv6/conf/{iface}/disable_ipv6").write_text("1")
                _ip("link", "set", "dev", iface, "mtu", "9000", "up")
        yield switch_side, tester_side
    finally:
        for iface in created:
            subprocess.run(["ip", "link", "del", iface], capture_output=True)


def _switch_command(target: Target, ifaces: dict[int, str], port: int, log: Path) -> list[str]:
    """simple_switch_grpc's command line, the same for both targets; the log goes to ``log`` (BMv2 adds
    ``.txt`` to --log-file's name, so it is given without it)."""
    interfaces = [arg for p, iface in sorted(ifaces.items()) for arg in ("-i", f"{p}@{iface}")]
    return [str(_which(target.switch)), "--no-p4", "--device-id", str(DEVICE_ID), *interfaces,
            "--log-file", str(log.with_suffix("")), "-L", "info",
            "--", "--grpc-server-addr", f"127.0.0.1:{port}", "--cpu-port", str(CPU_PORT)]


@contextmanager
def running_switch(target: Target, ports: list[int], workdir: Path) -> Iterator[Switch]:
    """Build the program, create the veths, start the switch; tear everything down on exit."""
    program, p4info = build(target, workdir / "build")
    log = workdir / "switch.txt"
    with veth_pairs(ports) as (switch_side, tester_side):
        grpc_port = _free_port()
        with open(workdir / "switch.out", "wb") as out:
            proc = subprocess.Popen(_switch_command(target, switch_side, grpc_port, log),
                                    stdout=out, stderr=subprocess.STDOUT)
        try:
            _wait_for_port(grpc_port, proc, log)
            yield Switch(f"127.0.0.1:{grpc_port}", tester_side, p4info, program, log)
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
