"""A switch process running p4src/main.p4 on veth pairs: what the PTF wrapper and the benchmark start.

Every veth name carries the creating process's pid, so parallel runs never collide, and everything is
removed (veths deleted, the switch stopped by its pid) even when the caller fails.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ibsec.names import p4_const

from p4switch import targets
from p4switch.targets import Target

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
DEVICE_ID = 1


def unavailable(target: Target) -> str | None:
    """Why the PTF suite cannot run on ``target`` here, or None."""
    if reason := target.missing():
        return reason
    if os.geteuid() != 0:
        return "creating veth interfaces needs root"
    return None


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


@contextmanager
def running_switch(target: Target, ports: list[int], workdir: Path) -> Iterator[Switch]:
    """Build the program, create the veths, start the switch; tear everything down on exit."""
    program, p4info = build(target, workdir / "build")
    log = workdir / "switch.txt"
    with veth_pairs(ports) as (switch_side, tester_side):
        grpc_port = targets.free_port()
        argv = target.switch_argv(device_id=DEVICE_ID, ports=switch_side, grpc_port=grpc_port,
                                  cpu_port=p4_const("CPU_PORT"),
                                  log=log.with_suffix(""))  # BMv2 adds .txt to the name
        with targets.running(argv, grpc_port, workdir / "switch.out"):
            yield Switch(f"127.0.0.1:{grpc_port}", tester_side, p4info, program, log)
