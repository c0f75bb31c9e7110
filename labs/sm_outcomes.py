"""The SM's attacks of issue 14, measured: one table of outcomes, runnable against any tree's SM.

    python -m labs.sm_outcomes                                                     # this tree
    git archive main controller scapy-tools | tar -x -C /tmp/before
    PYTHONPATH=/tmp/before/controller:/tmp/before/scapy-tools python -m labs.sm_outcomes

Run from this tree's root, it imports ``ibsm`` and ``ibsec`` from wherever ``PYTHONPATH`` points and uses
only what both the tree before issue 14 and this one have, so the same scenarios measure either. Each
scenario starts the SM (``SubnetManager`` over real gRPC) on software switches in this process, with
in-process host agents (``labs.sm_fabric``), configured as ``sm run`` configures it:

- ``sm-gid-flood``: h1 floods h3 with P_Key 0x1234 claiming the SM's GID (defect 8);
- ``trap-replay``: h3's agent traps a flood; the SM restarts; everything h3 sent it is replayed (defect 9);
- ``agent-restart``: h3's agent restarts; how soon it holds every key of its earlier start again; after
  3 s h1 connects to it in 0x8001 and sends (defect 10);
- ``control-socket``: hostile requests and vanishing clients at the SM's control socket (defect 11);
- ``bad-config``: ``sm run`` with bad option values and files (defect 12).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ibsec import addressing, names
from ibsec.agent.adapter import Adapter, AgentConfig
from ibsec.agent.qp import AdapterError, Service
from ibsec.polling import poll_until_async
from ibsm.control import serve_control
from ibsm.core import SmOptions, SubnetManager
from ibsm.events import read_events
from ibsm.traps import TrapOptions
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether

from labs.sm_fabric import InProcessFabric, ca_keys, flood_frame, inprocess_fabric

HERE = Path(__file__).resolve().parents[1]
EXAMPLE = HERE / "controller" / "tests" / "data" / "fattree-2x2.json"
BUILD = HERE / "build"


class Lab:
    """One in-process fabric with agents and a running SM, for one scenario."""

    def __init__(self, fab: InProcessFabric, workdir: Path) -> None:
        self.fab, self.workdir = fab, workdir
        self.store = ca_keys(fab.topo)
        self.sent: dict[str, list[bytes]] = {h.name: [] for h in fab.topo.hosts}
        self.agents = {h.name: self.agent(h.name) for h in fab.topo.hosts}
        self.sm: SubnetManager | None = None
        self.task: asyncio.Task[None] | None = None

    def agent(self, name: str) -> Adapter:
        host = next(h for h in self.fab.topo.hosts if h.name == name)
        key_file = self.workdir / f"{name}.keys"
        if not key_file.exists():
            self.store.provision_host(host.guid, key_file)
        config = AgentConfig(name=name, mac=bytes.fromhex(addressing.guid_to_mac(host.guid).replace(":", "")),
                             lid=host.lid, key_file=key_file, sm_gid=self.fab.topo.sm_gid, trap_window=0.2)

        def send(frame: bytes) -> None:
            self.sent[name].append(frame)
            self.fab.send_from_host(name, frame)

        adapter = Adapter(config, send)
        self.fab.attach(name, adapter.receive)
        return adapter

    async def start_sm(self, **changes: Any) -> SubnetManager:
        traps = TrapOptions(suppress_window=0.3, replay_state=self.workdir / "sm-replay.state")  # as `sm run`
        options = SmOptions(run_dir=self.workdir, p4info=BUILD / "main.p4info.txtpb",
                            p4blob=BUILD / "main.json", traps=traps, **changes)
        self.sm = SubnetManager(self.fab.topo, list(self.fab.topo.partitions), self.store, options)
        self.task = asyncio.create_task(self.sm.run())
        await asyncio.wait_for(self.sm.ready.wait(), 60)
        return self.sm

    async def start_sm_keyed(self) -> SubnetManager:
        """The SM started and every host's keys acknowledged: the replay and restart scenarios attack a
        fabric that is already keyed."""
        sm = await self.start_sm()
        await until(lambda: sm.keys.outstanding() == 0, 20)
        return sm

    async def stop_sm(self) -> None:
        assert self.task is not None
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task

    def events(self, kind: str) -> list[dict[str, Any]]:
        path = self.workdir / "events.jsonl"
        return [e for e in read_events(path) if e["event"] == kind] if path.exists() else []


async def until(predicate: Callable[[], bool], timeout: float) -> bool:
    return await poll_until_async(predicate, timeout) is not None


def spoofed(lab: Lab, source_gid: str, victim: str, pkey: int) -> bytes:
    """A P_Key flood frame with any source GID (the SM's included), built as flood_frame builds it."""
    frame = Ether(flood_frame(lab.fab.topo, lab.fab.topo.hosts[1].name, victim, pkey))
    frame[IPv6].src = source_gid
    frame.src = addressing.guid_to_mac(addressing.parse_gid(source_gid).guid)
    return bytes(frame)


# ---------------------------------------------------------------------------------------------------------
# scenarios
# ---------------------------------------------------------------------------------------------------------


async def sm_gid_flood(lab: Lab) -> str:
    await lab.start_sm(distribute_keys=False)
    frame = spoofed(lab, lab.fab.topo.sm_gid, "h3", 0x1234)
    lab.fab.send_from_host("h1", frame)
    filtered = await until(lambda: bool(lab.fab.entries("s1", names.INVALID_PKEYS)), 5)
    for _ in range(20):
        lab.fab.send_from_host("h1", frame)
    await asyncio.sleep(0.5)
    device = lab.fab.devices["s1"].switch
    assert device is not None
    stopped = device.counter_read(names.PKEY_VIOLATIONS, 1)[1]
    traced = [(e["traced_host"], e["traced_switch"], e["traced_port"]) for e in lab.events("traceback")]
    await lab.stop_sm()
    return (f"traced to {traced or 'nobody'}; filter on s1 port 1: {'yes' if filtered else 'no'}; of 20 more "
            f"frames {stopped} dropped at s1, {20 - stopped} reached h3")


async def trap_replay(lab: Lab) -> str:
    await lab.start_sm_keyed()
    lab.fab.send_from_host("h1", spoofed(lab, lab.fab.topo.hosts[1].gid, "h3", 0x2345))
    await until(lambda: bool(lab.events("traceback")), 5)
    captured = list(lab.sent["h3"])
    await lab.stop_sm()
    sm = await lab.start_sm(distribute_keys=False)
    before = len(lab.events("traceback"))
    for frame in captured:
        lab.fab.send_from_host("h3", frame)
    await until(lambda: sm.stats["packet_ins"] >= len(captured), 10)
    await asyncio.sleep(0.3)
    accepted = sm.traps.counters.get("accepted", 0)
    retraced = len(lab.events("traceback")) - before
    await lab.stop_sm()
    return (f"{len(captured)} frames replayed (1 trap, {len(captured) - 1} key ACKs): {accepted} trap "
            f"accepted, {retraced} traced and filtered again")


async def agent_restart(lab: Lab) -> str:
    await lab.start_sm_keyed()
    h1 = lab.agents["h1"]
    had = lab.agents["h3"].keyring.describe()  # what the SM gave h3's earlier start
    lab.agents["h3"] = h3 = lab.agent("h3")  # the same port and key file, nothing else
    h3.tick()  # the agent's timer runs
    restarted = time.monotonic()
    again = await until(lambda: h3.keyring.describe() == had, 3.0)
    seconds = time.monotonic() - restarted
    await asyncio.sleep(max(0.0, 3.0 - seconds))
    held = h3.keyring.describe()
    peers = held["pairwise_peers"]
    assert isinstance(peers, list)
    try:
        qp = await asyncio.to_thread(h1.cm.connect, h3.gid, Service.RC, 0x8001, None, None, 5.0)
        await asyncio.to_thread(h1.post_send, qp.qpn, b"after")
        got = await asyncio.to_thread(h3.wait_recv, qp.remote_qpn or 0, 5.0)
        outcome = f"h1 connects in mode {qp.mode} and h3 receives {got!r}"
    except AdapterError as err:
        outcome = f"h1 cannot connect ({err})"
    await asyncio.sleep(0.5)
    filters = [(e["switch"], e["port"], e["pkey"]) for e in lab.events("filter-installed")]
    await lab.stop_sm()
    back = f"every key of its earlier start back after {seconds:.2f} s" if again else "not all its keys back"
    return (f"{back}; h3 holds P_SK {held['partitions']}, {len(peers)} pairwise keys after 3 s; "
            f"{outcome}; filters installed: {filters or 'none'}")


class Keep(logging.Handler):
    """Keeps every log record (to count the tracebacks a scenario caused)."""

    def __init__(self, records: list[logging.LogRecord]) -> None:
        super().__init__(logging.DEBUG)
        self.records = records

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


HOSTILE = [b"[1, 2]", b"null", b"42", b'"status"', b'{"cmd": "policy", "policy": Infinity}',
           b'{"cmd": "status", "n": ' + b"9" * 400 + b"}", b"[" * 100_000]


async def control_socket(lab: Lab) -> str:
    logged: list[logging.LogRecord] = []
    handler = Keep(logged)
    logging.getLogger().addHandler(handler)
    sm = await lab.start_sm(distribute_keys=False)
    path = lab.workdir / "sm.sock"
    server = await serve_control(sm, path)
    answered = 0
    for line in HOSTILE:
        reader, writer = await asyncio.open_unix_connection(str(path), limit=1 << 20)
        writer.write(line + b"\n")
        with contextlib.suppress(ConnectionError):
            await writer.drain()
        with contextlib.suppress(ConnectionError, asyncio.TimeoutError):
            answered += bool(await asyncio.wait_for(reader.readline(), 5))
        writer.close()
    for _ in range(50):
        raw = socket.socket(socket.AF_UNIX)
        raw.connect(str(path))
        raw.sendall(b'{"cmd": "status"}\n')
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        raw.close()
    await asyncio.sleep(1.0)
    reader, writer = await asyncio.open_unix_connection(str(path))
    writer.write(b'{"cmd": "status"}\n')
    serving = json.loads(await asyncio.wait_for(reader.readline(), 5)).get("ok")
    writer.close()
    server.close()
    await lab.stop_sm()
    logging.getLogger().removeHandler(handler)
    tracebacks = sum(1 for r in logged if r.exc_info or (r.levelno >= logging.ERROR and "Traceback" in
                                                           r.getMessage()))
    return (f"{answered} of {len(HOSTILE)} hostile requests answered; 50 clients vanish; {tracebacks} "
            f"tracebacks logged; still serving: {serving}")


def bad_config(workdir: Path) -> str:
    topo = workdir / "topology.json"
    topo.write_text(EXAMPLE.read_text())
    utf8 = workdir / "latin1.json"
    utf8.write_bytes(EXAMPLE.read_bytes().replace(b'"fattree-2x2"', b'"fattree-\xe92x2"'))
    port = workdir / "port.json"
    port.write_text(EXAMPLE.read_text().replace("127.0.0.1:50001", "127.0.0.1:99999"))
    cases = [("--punt-rate -5", ["--topology", str(topo), "--punt-rate", "-5"]),
             ("--poll-interval -1", ["--topology", str(topo), "--poll-interval", "-1"]),
             ("non-UTF-8 topology", ["--topology", str(utf8)]),
             ("TCP port 99999", ["--topology", str(port)])]
    out = []
    for name, args in cases:
        try:
            argv = [sys.executable, "-m", "ibsm.cli", "run", *args, "--run-dir", str(workdir), "--p4info",
                    str(BUILD / "main.p4info.txtpb"), "--config", str(BUILD / "main.json")]
            done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
            tb = " with a traceback" if "Traceback" in done.stderr else ""
            out.append(f"{name}: exit {done.returncode}{tb}")
        except subprocess.TimeoutExpired:
            out.append(f"{name}: accepted (still running after 60 s)")
    return "; ".join(out)


SCENARIOS: dict[str, Callable[[Lab], Any]] = {
    "sm-gid-flood": sm_gid_flood, "trap-replay": trap_replay, "agent-restart": agent_restart,
    "control-socket": control_socket}


def main() -> int:
    logging.getLogger().setLevel(logging.ERROR)  # what a scenario's tracebacks are logged at
    logging.getLogger().addHandler(logging.NullHandler())  # kept (Keep), not printed
    rows = []
    for name, scenario in SCENARIOS.items():
        with tempfile.TemporaryDirectory(prefix=f"outcomes-{name}-") as tmp, \
                inprocess_fabric(EXAMPLE, Path(tmp)) as fab:
            rows.append((name, asyncio.run(scenario(Lab(fab, Path(tmp))))))
            print(f"{name}: {rows[-1][1]}", flush=True)
    with tempfile.TemporaryDirectory(prefix="outcomes-config-") as tmp:
        rows.append(("bad-config", bad_config(Path(tmp))))
        print(f"bad-config: {rows[-1][1]}", flush=True)
    print(json.dumps(dict(rows)))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
    sys.exit(main())
