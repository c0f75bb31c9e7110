"""A fabric of real processes: one switch process per switch on veth pairs ($TARGET's switch, p4switch or
BMv2's simple_switch_grpc, with the command line of :mod:`p4switch.targets`), host agents, the `sm` command.

Every link is a veth pair whose two ends two switch processes open; every host port is a veth pair whose
host end stays in the root namespace with the host's MAC (agents and test injectors bind to it). All
names carry the test process id, processes are stopped by pid and every veth is deleted on exit, whatever
happened in the test.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ibsec import addressing, keys, names
from ibsec.polling import poll_until
from ibsm.events import read_events

from p4switch import targets

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
START_TIMEOUT = 120.0  # seconds for a switch or agent process to answer: bounds a hung start, not a slow one


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


def wait_port(port: int, proc: subprocess.Popen[bytes], what: str, timeout: float = START_TIMEOUT) -> float:
    """Wait until 127.0.0.1:``port`` accepts; returns the wall time it first did."""
    def accepts() -> float | None:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return time.time()
        return None

    if (first := poll_until(accepts, timeout, interval=0.02)) is not None:
        return first
    raise RuntimeError(f"{what} did not open 127.0.0.1:{port} within {timeout} s")


ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4
GSI_QP_OFFSET = 14 + 40 + 8 + 5  # Ethernet, IPv6, UDP, then the BTH's destination QP


class Capture:
    """Every MAD (a RoCEv2 frame to QP1) crossing the given host cables, both ways, kept in order.

    One thread reads AF_PACKET sockets bound to the host end of each host's veth (the switch sends with
    qdisc bypass, which other sockets on its end do not see): a frame leaving there is one the host sent
    (``to_sm``), a frame arriving one its switch sent it (``to_host``). At most ``limit`` frames are kept;
    :meth:`close` ends the capture."""

    def __init__(self, ifaces: dict[str, str], limit: int = 10_000) -> None:
        self.to_sm: list[tuple[str, bytes]] = []
        self.to_host: list[tuple[str, bytes]] = []
        self.limit = limit
        self._socks: dict[socket.socket, str] = {}
        for host, iface in ifaces.items():
            sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
            sock.bind((iface, 0))
            self._socks[sock] = host
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="capture", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            for sock in select.select(list(self._socks), [], [], 0.1)[0]:
                frame, addr = sock.recvfrom(65536)
                if len(frame) < GSI_QP_OFFSET + 3 or frame[GSI_QP_OFFSET:GSI_QP_OFFSET + 3] != b"\0\0\1":
                    continue
                kept = self.to_sm if addr[2] == PACKET_OUTGOING else self.to_host
                if len(self.to_sm) + len(self.to_host) < self.limit:
                    kept.append((self._socks[sock], frame))

    def close(self) -> None:
        if self._stop.is_set():
            return
        self._stop.set()
        self._thread.join(5)
        for sock in self._socks:
            sock.close()


@dataclass
class ProcessFabric:
    """The running fabric; :meth:`close` stops every process and deletes every veth."""

    workdir: Path
    doc: dict[str, Any]
    tag: str = field(default_factory=lambda: f"sm{os.getpid() % 10000}")
    veths: list[str] = field(default_factory=list)
    switch_ifaces: dict[str, dict[int, str]] = field(default_factory=dict)
    host_ifaces: dict[str, str] = field(default_factory=dict)
    grpc_ports: dict[str, int] = field(default_factory=dict)
    switches: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    agents: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    sm: subprocess.Popen[bytes] | None = None
    sm_args: tuple[str, ...] = ()
    capture: Capture | None = None

    @property
    def topology(self) -> Path:
        return self.workdir / "topology.json"

    @property
    def events_file(self) -> Path:
        return self.workdir / "events.jsonl"

    # ---- building ----------------------------------------------------------------------------------------

    def _veth(self, a: str, b: str) -> None:
        _ip("link", "add", a, "type", "veth", "peer", "name", b)
        self.veths.append(a)
        for iface in (a, b):
            Path(f"/proc/sys/net/ipv6/conf/{iface}/disable_ipv6").write_text("1")
            _ip("link", "set", "dev", iface, "mtu", "9000", "up")

    def build(self) -> None:
        (self.workdir / "logs").mkdir(parents=True, exist_ok=True)
        self.switch_ifaces = {sw["name"]: {} for sw in self.doc["switches"]}
        for i, link in enumerate(self.doc["links"]):
            a, b = f"{self.tag}l{i}a", f"{self.tag}l{i}b"
            self._veth(a, b)
            self.switch_ifaces[link["a"][0]][link["a"][1]] = a
            self.switch_ifaces[link["b"][0]][link["b"][1]] = b
        for i, host in enumerate(self.doc["hosts"]):
            s, h = f"{self.tag}h{i}s", f"{self.tag}h{i}h"
            self._veth(s, h)
            _ip("link", "set", "dev", h, "address", addressing.guid_to_mac(int(host["guid"], 0)))
            self.switch_ifaces[host["switch"]][host["port"]] = s
            self.host_ifaces[host["name"]] = h
        for sw in self.doc["switches"]:
            self.grpc_ports[sw["name"]] = targets.free_port()
            sw["address"] = f"127.0.0.1:{self.grpc_ports[sw['name']]}"
            self.start_switch(sw["name"])
        self.topology.write_text(json.dumps(self.doc, indent=1))
        self._provision()

    def _provision(self) -> None:
        store = keys.KeyStore()
        (self.workdir / "keys").mkdir(mode=0o700, exist_ok=True)
        for host in self.doc["hosts"]:
            guid = int(host["guid"], 0)
            store.enroll(guid)
            store.provision_host(guid, self.workdir / "keys" / f"{host['name']}.keys")
        store.save(self.workdir / "keys" / "sm.keys")

    def start_switch(self, name: str) -> float:
        """Start (or restart) ``name``'s switch ($TARGET's); returns the wall time its P4Runtime port
        answered."""
        device_id = next(sw["device_id"] for sw in self.doc["switches"] if sw["name"] == name)
        argv = targets.from_env().switch_argv(device_id=device_id, ports=self.switch_ifaces[name],
                                              grpc_port=self.grpc_ports[name], cpu_port=names.CPU_PORT,
                                              log=self.workdir / "logs" / name)  # logs/<name>.txt
        with open(self.workdir / "logs" / f"{name}.out", "ab") as out:
            self.switches[name] = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
        return wait_port(self.grpc_ports[name], self.switches[name], f"switch {name}")

    def kill_switch(self, name: str) -> None:
        proc = self.switches[name]
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)

    def start_agent(self, name: str) -> None:
        host = next(h for h in self.doc["hosts"] if h["name"] == name)
        argv = [sys.executable, "-m", "ibsec.agent.daemon", "--name", name, "--iface", self.host_ifaces[name],
                "--run-dir", str(self.workdir), "--subnet", "1", "--lid", str(host["lid"]),
                "--keys", str(self.workdir / "keys" / f"{name}.keys"), "--sm-gid", self.doc["sm"]["gid"],
                "--trap-window", "0.5"]
        with open(self.workdir / "logs" / f"{name}.out", "ab") as out:
            self.agents[name] = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)

    def start_sm(self, *extra: str) -> None:
        argv = [sys.executable, "-m", "ibsm.cli", "run", "--topology", str(self.topology),
                "--run-dir", str(self.workdir), "--keys", str(self.workdir / "keys" / "sm.keys"),
                *self.sm_args, *extra]
        with open(self.workdir / "logs" / "sm.out", "ab") as out:
            self.sm = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)

    # ---- using -------------------------------------------------------------------------------------------

    def send(self, host: str, frames: list[bytes]) -> None:
        """Put ``frames`` on ``host``'s cable (as the host would, any source address)."""
        with socket.socket(socket.AF_PACKET, socket.SOCK_RAW) as sock:
            sock.bind((self.host_ifaces[host], 0))
            for frame in frames:
                sock.send(frame)

    def send_to_host(self, host: str, frames: list[bytes]) -> None:
        """Put ``frames`` on ``host``'s cable from the switch end, as if its switch had sent them."""
        with socket.socket(socket.AF_PACKET, socket.SOCK_RAW) as sock:
            sock.bind((self.switch_ifaces[self.host(host)["switch"]][self.host(host)["port"]], 0))
            for frame in frames:
                sock.send(frame)

    def host(self, name: str) -> dict[str, Any]:
        return next(h for h in self.doc["hosts"] if h["name"] == name)

    def start_capture(self) -> Capture:
        """Capture every MAD on every host cable from now on (stopped by :meth:`close`)."""
        self.capture = Capture(self.host_ifaces)
        return self.capture

    def events(self, kind: str | None = None, since: float = 0.0) -> list[dict[str, Any]]:
        if not self.events_file.exists():
            return []
        return [e for e in read_events(self.events_file)
                if (kind is None or e["event"] == kind) and e["wall"] >= since]

    def wait_event(self, kind: str, timeout: float = 60.0, since: float = 0.0, count: int = 1
                   ) -> list[dict[str, Any]]:
        def enough() -> list[dict[str, Any]] | None:
            found = self.events(kind, since)
            if len(found) >= count:
                return found
            if self.sm is not None and self.sm.poll() is not None:
                raise RuntimeError(f"sm exited with {self.sm.returncode}: "
                                   f"{(self.workdir / 'logs' / 'sm.out').read_text()[-2000:]}")
            return None

        found = poll_until(enough, timeout)
        assert found is not None, f"no {count} {kind!r} event(s) within {timeout} s"
        return found

    # ---- teardown ----------------------------------------------------------------------------------------

    def stop_sm(self, sig: int = signal.SIGTERM) -> int:
        assert self.sm is not None
        self.sm.send_signal(sig)
        try:
            return self.sm.wait(15)
        finally:
            if self.sm.poll() is None:
                self.sm.kill()
                self.sm.wait()

    def close(self) -> None:
        if self.capture is not None:
            self.capture.close()
        procs = [p for p in [self.sm, *self.agents.values(), *self.switches.values()] if p is not None]
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for iface in self.veths:
            subprocess.run(["ip", "link", "del", iface], capture_output=True)


@contextmanager
def process_fabric(source: Path, workdir: Path, sm_args: tuple[str, ...] = ()) -> Iterator[ProcessFabric]:
    """Build the program, start the switches of ``source`` on veths; everything is removed on exit."""
    subprocess.run(["make", "-s", "-C", str(ROOT), "build", f"TARGET={targets.from_env().name}",
                    f"VENV={VENV_BIN.parent}"], check=True)
    fabric = ProcessFabric(workdir, json.loads(source.read_text()), sm_args=sm_args)
    try:
        fabric.build()
        yield fabric
    finally:
        fabric.close()
