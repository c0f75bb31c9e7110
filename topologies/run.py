"""One launch of a fabric: run directory, switches, the SM, one agent per host, and their teardown.

:class:`FabricRun` is a context manager; leaving it, normally, on Ctrl-C or on any error, stops the
agents, the SM and the switches by pid, deletes every veth and host namespace, and removes the key
provisioning files. The run directory (DESIGN section 10) keeps the rest::

    runs/<UTC timestamp>-<topology>/
        topology.json        what the SM reads
        events.jsonl         the SM's events, one JSON object per line
        logs/<switch|sm|host>.log
        logs/<switch>.stats.json  p4switch's port counters, its sockets' drops included (--stats-file)
        pcaps/<switch>-<port>_in.pcap, _out.pcap
        keys/                provisioning files, mode 0600 (removed at teardown)
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ibsec import addressing, control, keys, names
from ibsec.control import ControlClient
from ibsec.polling import poll_until
from ibsm.events import read_events

from p4switch import pki

from . import cluster, fabrics, fidelity, network, topofile, zygote
from .fabrics import Fabric, HostInfo
from .network import FabricError, FabricNet, Process

RUNS = network.REPO / "runs"
PROCESSES_FILE = "processes.json"
AGENT_ENTRY = "ibsec.agent.daemon:main"
SM_ENTRY = "ibsm.cli:main"
SM_PRELOAD = "ibsm.commands"
"""What the SM imports once started (ibsm.cli itself imports nothing heavy, to take a SIGTERM early)."""
# Bounds on a hung start, not a slow one: each wait returns as soon as its process is ready, and a loaded
# 2-core machine starts 16 switches, 16 agents and the SM several times slower than an idle one.
SM_READY_TIMEOUT = 300.0
AGENT_READY_TIMEOUT = 180.0
PER_NODE_TIMEOUT = 0.5
"""Seconds every switch and host adds to a start-up timeout: a fabric of hundreds of nodes on two cores
needs longer than the fixed part, which is what small fabrics get."""


@dataclass
class RunOptions:
    """Everything a launch can vary (the launcher's command line and the tests set these)."""

    fabric: str = "fat-tree"
    k: int = 2
    levels: int = 3
    hosts_per_leaf: int | None = None
    dims: tuple[int, ...] | None = None
    cube: int = 3
    # $TARGET as in make, so the scenario tests and the evaluation run on whichever target it names
    target: str = field(default_factory=lambda: os.environ.get("TARGET", "p4switch"))
    routing: str = "deterministic"
    partitions: int = 2
    security: str = names.Mode.STH_AEAD.label
    policy: str = names.Policy.SIF.value
    quiet_period: float = 3.0
    bandwidth_mbit: float | None = None
    delay: str | None = None
    agents: tuple[str, ...] | None = None  # host names; None = every host
    sm: bool = True
    run_dir: Path | None = None
    verbose: bool = False
    tls: bool = False
    """P4Runtime over mutual TLS: a CA and certificates made for this run (keys/tls-*), removed at teardown"""
    cluster: tuple[str, ...] = ()
    """Servers to place the fabric on (Mininet's cluster mode, docs/cluster.md); () runs it all here"""
    ssh_config: Path | None = None
    """The ssh client configuration for the cluster's servers (None: ssh's own, ~/.ssh/config)"""
    sm_args: tuple[str, ...] = field(default_factory=tuple)
    # software switches on a shared 2-core machine add milliseconds per hop: RC needs patience
    agent_args: tuple[str, ...] = ("--ack-timeout", "0.25", "--retries", "12")

    def build_fabric(self) -> Fabric:
        return fabrics.build(self.fabric, k=self.k, levels=self.levels, hosts_per_leaf=self.hosts_per_leaf,
                             dims=self.dims, cube=self.cube)


def new_run_dir(name: str, root: Path = RUNS) -> Path:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S.%fZ")
    path = root / f"{stamp}-{name}"
    path.mkdir(parents=True)
    return path


def newest_run(root: Path = RUNS) -> Path:
    """The newest run directory (tools that inspect a run default to it)."""
    runs = sorted(p for p in root.glob("*-*") if (p / "topology.json").exists())
    if not runs:
        raise FileNotFoundError(f"no run directory under {root}")
    return runs[-1]


@dataclass
class Agent:
    """A host's agent process and its control socket."""

    host: HostInfo
    gid: str
    process: Process
    control: Path

    def call(self, cmd: str, *, control_timeout: float = 90.0, **args: Any) -> Any:
        """One control request; ``args`` are the command's (``timeout`` included, as for ``recv``)."""
        with ControlClient(self.control, timeout=control_timeout) as client:
            return client.call(cmd, **args)

    def counters(self) -> dict[str, Any]:
        result: dict[str, Any] = self.call("counters")
        return result


class FabricRun:
    """A launched fabric. Use as ``with FabricRun(options) as run: ...``.

    ``say`` gets one line per start-up milestone (the launcher prints them: a fabric of hundreds of
    switches takes a while); ``timings`` keeps each milestone's seconds since :meth:`start` began."""

    def __init__(self, options: RunOptions, say: Callable[[str], None] | None = None) -> None:
        if options.policy not in names.POLICIES:
            raise FabricError(f"policy must be one of {', '.join(names.POLICIES)}")
        self.options = options
        self.fabric = options.build_fabric()
        self.target = network.target(options.target)
        self.run_dir = (options.run_dir or new_run_dir(self.fabric.name)).resolve()
        for sub in ("logs", "pcaps"):
            (self.run_dir / sub).mkdir(parents=True, exist_ok=True)
        (self.run_dir / "keys").mkdir(mode=0o700, exist_ok=True)
        self.hosts = {h.name: h for h in self.fabric.hosts()}
        try:
            self.partitions = topofile.partitions_round_robin(self.fabric.hosts(), options.partitions,
                                                              options.security)
        except ValueError as err:
            raise FabricError(str(err)) from None
        self.net: FabricNet | None = None
        self.zygote: zygote.Zygote | None = None
        self.cluster: cluster.Cluster | None = None
        self.tls: pki.Pki | None = None
        self.sm: Process | None = None
        self.sampler: fidelity.Sampler | None = None
        self.agents: dict[str, Agent] = {}
        self.tools: list[subprocess.Popen[bytes]] = []
        self.say = say or (lambda text: None)
        self.timings: dict[str, float] = {}
        self._started = time.monotonic()

    # ---- paths -------------------------------------------------------------------------------------------

    @property
    def topology_file(self) -> Path:
        return self.run_dir / "topology.json"

    @property
    def events_file(self) -> Path:
        return self.run_dir / "events.jsonl"

    def key_file(self, name: str) -> Path:
        return self.run_dir / "keys" / f"{name}.keys"

    def gid(self, host: str) -> str:
        return topofile.host_gid(self.hosts[host])

    # ---- start and stop ----------------------------------------------------------------------------------

    def __enter__(self) -> FabricRun:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _milestone(self, name: str, text: str) -> None:
        self.timings[name] = round(time.monotonic() - self._started, 3)
        self.say(f"[{self.timings[name]:6.1f} s] {text}")

    def _timeout(self, fixed: float) -> float:
        """A start-up timeout for this fabric's size (PER_NODE_TIMEOUT for every switch and host)."""
        return fixed + PER_NODE_TIMEOUT * (len(self.fabric.switches()) + len(self.hosts))

    def start(self) -> None:
        self._started = time.monotonic()
        program = network.build_program(self.target)
        links = network.LinkOptions(self.options.bandwidth_mbit, self.options.delay)
        if self.options.tls:
            self.tls = pki.make_pki(self.run_dir / "keys", servers=[sw.name for sw in self.fabric.switches()],
                                    clients=["sm"])
        self.zygote = zygote.Zygote.start(self.run_dir / "zygote.sock", self.run_dir / "logs" / "zygote.log",
                                          self._preload())
        if self.options.cluster:
            self.cluster = cluster.Cluster(self.options.cluster, self.options.ssh_config, self.fabric,
                                           self.run_dir / "logs")
            self.cluster.start(self._preload(sm=False))
            self._milestone("servers", f"a zygote on each of {', '.join(self.cluster.servers)} over ssh")
        self.net = FabricNet(self.fabric, self.target, self.run_dir, self.zygote, links, self.options.verbose,
                             self.tls, self.cluster)
        self._record()
        doc = topofile.topology_document(self.fabric, self.net.addresses, self.partitions,
                                         self.options.routing)
        topofile.write_json(self.topology_file, doc)
        self._milestone("nodes", f"{len(self.net.grpc_ports)} switch and {len(self.hosts)} host nodes")
        self.net.start(self._timeout(network.START_TIMEOUT))
        self._milestone("switches", "links built; every switch answers on its P4Runtime port")
        self.sampler = fidelity.Sampler(self.net.watched())
        self.sampler.start()
        self._provision_keys()
        for name in self.options.agents if self.options.agents is not None else self.hosts:
            self._start_agent(self.hosts[name])
        self._record()
        self._wait_agents()  # before the SM, so its first key deliveries find every agent listening
        self._milestone("agents", f"{len(self.agents)} agents answer on their control sockets")
        if self.options.sm:
            self._start_sm(program)
            self.wait_event(lambda e: e.get("event") == "fabric-ready", self._timeout(SM_READY_TIMEOUT),
                            what="the SM to program every switch")
            self._milestone("ready", "the SM has programmed every switch (fabric-ready)")

    def _preload(self, sm: bool = True) -> tuple[str, ...]:
        """What a zygote imports before forking: the agent, the switch if it is ours, the SM if any (and
        ``sm``: the SM runs on the launcher's machine only)."""
        return (*((network.P4SWITCH_ENTRY.split(":")[0],) if self.target.name == "p4switch" else ()),
                AGENT_ENTRY.split(":")[0], *((SM_PRELOAD,) if self.options.sm and sm else ()))

    def stop(self) -> None:
        """Stop everything this run started, in reverse order, whatever state it is in."""
        if self.sampler is not None:
            self.sampler.stop()
        network.stop_processes([*self.tools, *(a.process for a in self.agents.values())])
        if self.sm is not None:
            network.stop_processes([self.sm])
        try:
            if self.net is not None:
                self.net.stop()
        finally:
            if self.zygote is not None:
                self.zygote.close()
            if self.cluster is not None:
                self.cluster.close()
            for path in (self.run_dir / "keys").iterdir():
                path.unlink(missing_ok=True)
            for agent in self.agents.values():
                agent.control.unlink(missing_ok=True)
            (self.run_dir / PROCESSES_FILE).unlink(missing_ok=True)

    def processes(self) -> list[Process]:
        """Every process this run started directly (the network's own are in ``net.pids()``)."""
        started: list[Process] = [*self.tools, *(a.process for a in self.agents.values())]
        if self.zygote is not None and self.zygote.process is not None:
            started.append(self.zygote.process)
        if self.cluster is not None:  # the ssh connections (each a server's zygote) and tunnels
            started += [z.process for z in self.cluster.zygotes.values() if z.process is not None]
            started += self.cluster.tunnels
        return started + ([self.sm] if self.sm else [])

    def _record(self) -> None:
        """processes.json: what ``ibsec-fabric clean`` needs if this launcher is killed before teardown."""
        pids = [p.pid for p in self.processes()] + (self.net.pids() if self.net else [])
        doc = {"launcher": os.getpid(), "iface_prefix": f"{self.net.tag}s" if self.net else None,
               "pids": sorted(set(pids))}
        topofile.write_json(self.run_dir / PROCESSES_FILE, doc)

    def _provision_keys(self) -> None:
        """CA_SK per host: the SM's key database and each host's own 0600 file (DESIGN section 5)."""
        store = keys.KeyStore()
        for host in self.hosts.values():
            guid = addressing.host_guid(host.index)
            store.enroll(guid)
            store.provision_host(guid, self.key_file(host.name))
        store.save(self.key_file("sm"))

    def _start_sm(self, program: network.Program) -> None:
        """The SM, forked from the zygote (its imports took it 5 s idle, 30 s on a loaded machine)."""
        assert self.zygote is not None
        argv = ["run", "--topology", str(self.topology_file),
                "--policy", self.options.policy, "--p4info", str(program.p4info),
                "--config", str(program.json), "--keys", str(self.key_file("sm")),
                "--quiet-period", str(self.options.quiet_period), *self.options.sm_args]
        if self.tls:
            client = self.tls.clients["sm"]
            argv += ["--tls-cacert", str(self.tls.cacert), "--tls-cert", str(client.cert),
                     "--tls-key", str(client.key)]
        self.sm = self.zygote.spawn("sm", argv, self.run_dir / "logs" / "sm.out", entry=SM_ENTRY, prog="sm")
        self._record()

    def _start_agent(self, host: HostInfo) -> None:
        """The host's agent, forked from its server's zygote into the host's namespace; on another server,
        its control socket is in that server's own directory and forwarded to the usual one here."""
        assert self.net is not None and self.zygote is not None
        control = self.run_dir / f"{host.name}.sock"
        server = self.cluster.server_of(host.name) if self.cluster else None
        listen = f"{server.remote_dir}/{host.name}.sock" if server else str(control)
        argv = ["--name", host.name,
                "--iface", self.net.host_iface(host.name), "--run-dir", str(self.run_dir),
                "--subnet", str(topofile.SUBNET), "--lid", str(addressing.host_lid(host.index)),
                "--keys", str(self.key_file(host.name)), "--control", listen, *self.options.agent_args]
        if self.options.sm:
            argv += ["--sm-gid", topofile.sm_gid()]
        else:
            argv += ["--pkeys", str(self._pkey_file(host))]
        spawner = self.cluster.zygote_of(host.name, self.zygote) if self.cluster else self.zygote
        proc = spawner.spawn(f"host {host.name}", argv, self.run_dir / "logs" / f"{host.name}.out",
                                 entry=AGENT_ENTRY, prog="ibsec-agent", netns=self.net.host(host.name).pid)
        if server:
            server.forward(str(control), listen)
        self.agents[host.name] = Agent(host, self.gid(host.name), proc, control)

    def _pkey_file(self, host: HostInfo) -> Path:
        """Without an SM: the host's P_Key table as a file (its partitions, full membership)."""
        table = [{"pkey": f"{p.full_pkey:#06x}", "mode": names.SECURITY_MODES.index(p.security),
                  "scope": "partition"} for p in self.partitions if host.name in p.members]
        path = self.run_dir / "keys" / f"{host.name}.pkeys.json"
        topofile.write_json(path, {"partitions": table})
        return path

    def _wait_agents(self) -> None:
        deadline = time.monotonic() + self._timeout(AGENT_READY_TIMEOUT)
        for agent in self.agents.values():

            def answers(agent: Agent = agent) -> bool:
                if agent.process.poll() is not None:
                    raise FabricError(f"agent {agent.host.name} exited with {agent.process.returncode} "
                                      f"(log {self.run_dir / 'logs' / agent.host.name}.log)")
                with contextlib.suppress(OSError):
                    agent.call("ping", control_timeout=2)
                    return True
                return False

            if not poll_until(answers, deadline - time.monotonic(), interval=0.1):
                raise FabricError(f"agent {agent.host.name} did not answer on {agent.control}")

    # ---- using the fabric --------------------------------------------------------------------------------

    def spawn(self, host: str, argv: list[str], log_name: str) -> subprocess.Popen[bytes]:
        """Start a tool in ``host``'s namespace (stopped by pid at teardown); output to logs/<log_name>."""
        assert self.net is not None
        with open(self.run_dir / "logs" / log_name, "ab") as out:
            proc = self.net.host(host).popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                             stdin=subprocess.DEVNULL)
        self.tools.append(proc)
        self._record()
        return proc

    def run_tool(self, host: str, argv: list[str], timeout: float = 120.0) -> list[dict[str, Any]]:
        """Run a short tool (an attack) in ``host``'s namespace; its JSON output lines."""
        assert self.net is not None
        proc = self.net.host(host).popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                         stdin=subprocess.DEVNULL)
        self.tools.append(proc)
        self._record()
        out, err = proc.communicate(timeout=timeout)
        if proc.returncode:
            raise FabricError(f"{' '.join(argv[:4])} on {host} failed ({proc.returncode}): "
                              f"{err.decode()[-500:]}")
        return [json.loads(line) for line in out.decode().splitlines() if line.startswith("{")]

    def events(self) -> list[dict[str, Any]]:
        """The SM's events so far (a torn last line is left for the next call)."""
        if not self.events_file.exists():
            return []
        return list(read_events(self.events_file))

    def wait_event(self, match: Callable[[dict[str, Any]], bool], timeout: float, what: str = "an event"
                   ) -> dict[str, Any]:

        def found() -> dict[str, Any] | None:
            event = next((e for e in self.events() if match(e)), None)
            if event is None and self.sm is not None and self.sm.poll() is not None:
                raise FabricError(f"the SM exited with {self.sm.returncode} while waiting for {what} "
                                  f"(log {self.run_dir / 'logs' / 'sm.log'}):\n"
                                  f"{network.tail(self.run_dir / 'logs' / 'sm.out')}")
            return event

        event = poll_until(found, timeout, interval=0.1)
        if event is None:
            raise FabricError(f"timed out after {timeout:.0f} s waiting for {what}")
        return event

    def wait_provisioned(self, hosts: Iterable[str], timeout: float = 60.0) -> None:
        """Until each of ``hosts`` has, from the SM, its P_Key table and the key of every partition it is
        a member of (connections in a partition need both)."""
        deadline = time.monotonic() + timeout
        for host in hosts:
            wanted = {p.full_pkey for p in self.partitions if host in p.members}

            def provisioned(host: str = host, wanted: set[int] = wanted) -> bool:
                info = self.agents[host].call("info")
                table = {int(entry["pkey"]) for entry in info["pkeys"]}
                keyed = {0x8000 | (int(str(k), 0) & 0x7FFF) for k in info["keys"]["partitions"]}
                return wanted <= table & keyed

            if not poll_until(provisioned, deadline - time.monotonic(), interval=0.2):
                raise FabricError(f"{host} lacks the P_Key table or keys of {sorted(map(hex, wanted))}")

    def wait_delivered(self, sender: str, receiver: str, qpn: int, timeout: float = 60.0) -> tuple[int, str]:
        """Until the RC connection ``qpn`` of ``sender`` (to ``receiver``) has every packet acknowledged at
        both ends: RC delivers every message, however late, unless a QP fails. Returns the packets still
        unacknowledged and the worse QP state (0 and RTS: nothing lost)."""

        def qp(host: str, number: int) -> dict[str, Any]:
            return next(q for q in self.agents[host].call("qps") if q["qpn"] == number)

        def outcome() -> tuple[int, str]:
            mine = qp(sender, qpn)
            theirs = qp(receiver, int(mine["remote_qpn"]))
            left = int(mine["unacked"]) + int(theirs["unacked"])
            return left, "ERROR" if "ERROR" in (mine["state"], theirs["state"]) else str(mine["state"])

        def settled() -> tuple[int, str] | None:
            left, worst = result = outcome()
            return result if left == 0 or worst == "ERROR" else None

        return poll_until(settled, timeout, interval=0.2) or outcome()

    def sm_call(self, cmd: str, **args: Any) -> Any:
        """The result of a request to the running SM's control socket (``status``, ``policy``)."""
        try:
            return control.call(self.run_dir / "sm.sock", cmd, timeout=30, **args)
        except control.CommandError as err:
            raise FabricError(f"SM refused {cmd}: {err}") from None

    def fidelity(self, since: float | None = None) -> dict[str, Any]:
        """The busiest switch's CPU share and the switches' drops from wall time ``since`` (the whole run
        if None) to now: did the emulator, rather than the links, limit what was measured meanwhile?"""
        if self.sampler is None:
            raise FabricError("the fabric's switches are not running: nothing was sampled")
        return self.sampler.report(since)

    def describe(self) -> str:
        """What is running and where (printed by the launcher before the CLI)."""
        assert self.net is not None
        lines = [f"run directory {self.run_dir}", f"{self.fabric.name} on {self.target.name}: "
                 f"{len(self.net.grpc_ports)} switches, {len(self.hosts)} hosts"
                 + (f", P4Runtime over mutual TLS (CA {self.tls.cacert})" if self.tls else "")]
        lines += [f"  {name:8s} P4Runtime {addr}" for name, addr in self.net.addresses.items()]
        for host in self.hosts.values():
            parts = ",".join(p.name for p in self.partitions if host.name in p.members)
            lines.append(f"  {host.name:8s} GID {self.gid(host.name)}  on {host.switch} port {host.port}  "
                         f"partition {parts}")
        return "\n".join(lines)


def clean_leftovers(root: Path = RUNS) -> list[str]:
    """What killed launchers left behind, found through their runs' processes.json: processes stopped by
    the recorded pid (only if its command line names that run, so a recycled pid is never touched),
    interfaces deleted by the run's name prefix. Live runs are left alone."""
    removed: list[str] = []
    for record in sorted(root.glob(f"*/{PROCESSES_FILE}")):
        doc = json.loads(record.read_text())
        if _alive(int(doc["launcher"])):
            continue
        pids = [pid for pid in doc["pids"] if _alive(pid) and _from_run(pid, record.parent.resolve())]
        _terminate(pids)
        removed += [f"pid {pid}" for pid in pids]
        if doc.get("iface_prefix"):
            removed += network.delete_links(doc["iface_prefix"])
        for path in [*record.parent.glob("keys/*"), *record.parent.glob("*.sock")]:
            path.unlink(missing_ok=True)
        record.unlink()
    return removed


def _terminate(pids: list[int], grace: float = 5.0) -> None:
    """SIGTERM (so they clean up after themselves), SIGKILL whatever is still there after ``grace``."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in [p for p in pids if _alive(p)]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + grace
        while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
            time.sleep(0.1)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _from_run(pid: int, run_dir: Path) -> bool:
    """Does process ``pid`` belong to ``run_dir`` (its command line names it), so not a recycled pid?"""
    try:
        return str(run_dir).encode() in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
