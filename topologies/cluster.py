"""A fabric across servers: Mininet's cluster mode (``mininet.examples.cluster``, Debian's mininet) with our
P4 switches, host agents and SM (docs/cluster.md).

The launcher's machine is the first server, ``localhost``: it runs the SM, the launcher and its share of
the nodes. Mininet's ``SwitchBinPlacer`` places the switches in even bins over the servers and every host
with its switch, so only switch-to-switch links cross servers. For each other server the run opens one ssh
connection (a ControlMaster, the run's ``--ssh-config``) that

- runs that server's zygote (its output is the connection's; it stops with the connection's end), and
  forwards a local Unix socket to the zygote's, so the launcher forks the server's switches and agents as
  it does its own;
- carries every remote node's shell (Mininet's ``RemoteMixin`` over the master's ControlPath: one TCP
  connection, one authentication, for all of them);
- forwards the SM's P4Runtime connections (127.0.0.1:<port> here to 127.0.0.1:<port> there: the switches
  still listen on loopback only, the topology file's addresses are unchanged) and each remote agent's
  control socket (the launcher's ``RUN/<host>.sock`` to the socket in the server's own /tmp).

Links between servers are Mininet's ssh Ethernet tunnels (``ssh -w``, tap devices renamed to our port
names), made by :class:`ClusterLink`: Mininet's own ``RemoteLink.makeTunnel`` runs plain ``ssh`` (not the
run's configuration: no key, port or known hosts of the user's choosing) on a hard-wired ``tap9``, which
two tunnels made at once on one server would share; ours is the same steps with the run's ssh command and
a tap number of its own. Mininet's GRE links need the kernel's ip_gre, which a container may lack.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import networkx as nx
from mininet.examples.cluster import RemoteHost, RemoteLink, RemoteMixin, SwitchBinPlacer

from .fabrics import Fabric
from .network import REPO, FabricError, P4RuntimeSwitch, stop_processes
from .zygote import SPAWN_TIMEOUT, Zygote

LOCAL = "localhost"
USER = "root"
CONNECT_TIMEOUT = 60
LINK_ATTEMPTS = 3
"""tries of one link step (a forked helper can die before it runs its command)"""
"""ssh's ConnectTimeout: bounds an unreachable server, not a slow one."""


def servers_of(names: Iterable[str]) -> tuple[str, ...]:
    """The servers of ``--cluster A,B``: the launcher's own machine (localhost) first, then the others in
    the order given, each once."""
    others = [n for n in dict.fromkeys(names) if n and n != LOCAL]
    return (LOCAL, *others)


def placement(fabric: Fabric, servers: Sequence[str]) -> dict[str, str]:
    """Every switch and host of ``fabric`` to a server: Mininet's SwitchBinPlacer (switches in even bins,
    hosts with their switch). The switches are binned in reverse Cuthill-McKee order, which puts
    neighbours next to each other: each server gets a connected part of the fabric with hosts of its
    own, where the fabric's order (level by level) put every leaf of a 3-level fat tree, so every host, on
    the first server, and crossed servers on twice as many links (8 against 4 of 16)."""
    switches = fabric.graph.subgraph(s.name for s in fabric.switches())
    placer = SwitchBinPlacer(servers=list(servers), hosts=[h.name for h in fabric.hosts()],
                             switches=list(nx.utils.reverse_cuthill_mckee_ordering(switches)),
                             links=[(h.name, h.switch) for h in fabric.hosts()])
    return {name: placer.place(name) for name in (*placer.switches, *placer.hosts)}


class Server:
    """One remote server and the run's ssh connection to it."""

    def __init__(self, name: str, index: int, ssh_config: Path | None, control_dir: Path) -> None:
        self.name = name
        self.dest = f"{USER}@{name}"
        self.ssh_config = ssh_config
        self.control_path = control_dir / f"ctl-{index}"
        self.zygote_socket = control_dir / f"zygote-{index}.sock"
        self.remote_dir = f"/tmp/ibf-{os.getpid()}-{index}"
        """The server's own directory for its zygote's and agents' sockets (Unix sockets do not cross
        machines, even on a shared run directory); made and removed by the zygote's command."""

    def ssh(self, *options: str, shared: bool = True) -> list[str]:
        """The ssh command line to this server, without the remote command: through the run's master
        connection once it runs, or (not ``shared``) a connection of its own, which a tunnel needs (a
        multiplexed client runs the command but leaves ``-w`` alone)."""
        config = ["-F", str(self.ssh_config)] if self.ssh_config else []
        control = str(self.control_path) if shared else "none"
        return ["ssh", *config, "-o", "BatchMode=yes", "-o", f"ConnectTimeout={CONNECT_TIMEOUT}",
                "-o", f"ControlPath={control}", *options, self.dest]

    def start_zygote(self, log: Path, ssh_log: Path, modules: Sequence[str]) -> Zygote:
        """Open the master connection running this server's zygote, with its socket forwarded here; return
        once the zygote listens. Closing it (Zygote.close: SIGTERM to ssh) ends the connection, the
        zygote's standard input with it, and so the zygote and its children."""
        command = (f"mkdir -p -m 700 {self.remote_dir} && cd {REPO} && {sys.executable} -m topologies.zygote "
                   f"--socket {self.remote_dir}/zygote.sock --exit-with-stdin "
                   + " ".join(f"--preload {m}" for m in modules) + f"; rm -rf {self.remote_dir}")
        argv = self.ssh("-M", "-E", str(ssh_log), "-o", "ControlPersist=no", "-o", "ExitOnForwardFailure=yes",
                        "-L", f"{self.zygote_socket}:{self.remote_dir}/zygote.sock")
        proc = subprocess.Popen([*argv, command], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, start_new_session=True)
        listening = threading.Event()

        def copy() -> None:  # the zygote's output (and ssh's) into its log, noting when it listens
            assert proc.stdout is not None
            with open(log, "ab") as out:
                for line in proc.stdout:
                    out.write(line)
                    out.flush()
                    if b"listening on" in line:
                        listening.set()

        threading.Thread(target=copy, name=f"zygote-{self.name}", daemon=True).start()
        waited = 0.0
        while not listening.wait(0.5):
            waited += 0.5
            if proc.poll() is not None or waited > SPAWN_TIMEOUT:
                stop_processes([proc])
                raise FabricError(f"server {self.name}: no zygote over ssh (logs {log}, {ssh_log}):\n"
                                  f"{log.read_text(errors='replace')[-1000:]}"
                                  f"{ssh_log.read_text(errors='replace')[-1000:]}")
        return Zygote(self.zygote_socket, proc)

    def forward(self, local: str, remote: str) -> None:
        """Forward ``local`` here (a Unix socket path, or 127.0.0.1:PORT) to ``remote`` there, over the
        master connection."""
        done = subprocess.run(self.ssh("-O", "forward", "-L", f"{local}:{remote}"), capture_output=True,
                              text=True, timeout=CONNECT_TIMEOUT, check=False)
        if done.returncode:
            raise FabricError(f"server {self.name}: cannot forward {local} to {remote}: "
                              f"{done.stderr.strip()}")

    def node_params(self) -> dict[str, Any]:
        """What Mininet's RemoteMixin needs to run a node's shell here over the master connection."""
        return {"server": self.name, "serverIP": self.name, "user": USER,
                "controlPath": str(self.control_path)}


class Cluster:
    """The servers of one run: placement, ssh connections and their zygotes, tunnels; :meth:`close` ends
    them all."""

    def __init__(self, names: Iterable[str], ssh_config: Path | None, fabric: Fabric, logs: Path) -> None:
        self.names = servers_of(names)
        self.logs = logs
        """ssh's own logs (``-E``) go here: its diagnostics next to the others, and every ssh process of the
        run names the run directory, so ``ibsec-fabric clean`` knows it for this run's after a crash"""
        self.ssh_config = ssh_config
        self.control_dir = Path(tempfile.mkdtemp(prefix="ibf-ssh-"))  # short: ControlPath has ~100 bytes
        self.servers = {name: Server(name, i, ssh_config, self.control_dir)
                        for i, name in enumerate(self.names) if name != LOCAL}
        self.place = placement(fabric, self.names)
        self.zygotes: dict[str, Zygote] = {}
        self.tunnels: list[subprocess.Popen[bytes]] = []
        self._tap = (os.getpid() % 1_000_000) * 1000

    def start(self, modules: Sequence[str]) -> None:
        for name, server in self.servers.items():
            self.zygotes[name] = server.start_zygote(self.logs / f"zygote-{name}.log",
                                                     self.logs / f"ssh-{name}.log", modules)

    def server_of(self, node: str) -> Server | None:
        """The remote server of a node, None if it runs here."""
        return self.servers.get(self.place[node])

    def zygote_of(self, node: str, local: Zygote) -> Zygote:
        server = self.place[node]
        return local if server == LOCAL else self.zygotes[server]

    def node_params(self, node: str) -> dict[str, Any]:
        server = self.server_of(node)
        return server.node_params() if server else {"server": LOCAL, "serverIP": LOCAL, "user": USER}

    def switch(self, name: str) -> dict[str, Any]:
        """Mininet's addSwitch parameters of switch ``name`` on its server."""
        return {"cls": ClusterSwitch, **self.node_params(name)}

    def host(self, name: str) -> dict[str, Any]:
        return {"cls": ClusterHost, **self.node_params(name)}

    def link(self) -> dict[str, Any]:
        return {"cls": ClusterLink, "cluster": self}

    def next_tap(self) -> int:
        self._tap += 1
        return self._tap

    def close(self) -> None:
        """Stop the tunnels, then the servers' zygotes (and with them the connections), remove the control
        directory."""
        stop_processes(self.tunnels)
        for zygote in self.zygotes.values():
            zygote.close()
        shutil.rmtree(self.control_dir, ignore_errors=True)


class ClusterSwitch(RemoteMixin, P4RuntimeSwitch):  # type: ignore[misc]
    """A P4 switch on any server: its shell over ssh (Mininet's RemoteMixin), its target forked by its
    server's zygote, its P4Runtime port probed on its server."""

    def answers(self) -> bool:
        if not self.isRemote:
            return super().answers()
        probe = f"(exec 3<>/dev/tcp/127.0.0.1/{self.grpc_port}) 2>/dev/null && echo open || echo closed"
        return bool(self.cmd(probe).strip().endswith("open"))


ClusterHost = RemoteHost
"""A host on any server: Mininet's own RemoteHost, its shell over the server's master connection."""


class ClusterLink(RemoteLink):  # type: ignore[misc]
    """A link that may cross servers: a veth on one server (Mininet's), an ssh Ethernet tunnel between two
    (our makeTunnel: Mininet's steps with the run's ssh command and a tap number of its own)."""

    def __init__(self, node1: Any, node2: Any, cluster: Cluster, **kwargs: Any) -> None:
        self.cluster = cluster
        super().__init__(node1, node2, **kwargs)

    def makeTunnel(self, node1: Any, node2: Any, intfname1: str, intfname2: str,  # noqa: N802
                   addr1: str | None = None, addr2: str | None = None) -> subprocess.Popen[bytes]:
        if node2.server == LOCAL:  # the tunnel's ssh runs on node1's server: here if either end is
            return self.makeTunnel(node2, node1, intfname2, intfname1, addr2, addr1)
        tap = self.cluster.next_tap()
        try:
            return self._tunnel(node1, node2, (intfname1, intfname2), (addr1, addr2), tap)
        except FabricError:  # a tap not yet renamed is no link of the fabric's: teardown would miss it
            for node in (node1, node2):
                node.rcmd(f"ip link del tap{tap}")
            raise

    def _tunnel(self, node1: Any, node2: Any, names: tuple[str, str], addrs: tuple[str | None, str | None],
                tap: int) -> subprocess.Popen[bytes]:
        """tap``tap`` on both servers, the ssh Ethernet tunnel between them, each end renamed in its node."""
        (intfname1, intfname2), (addr1, addr2) = names, addrs
        for node in (node1, node2):
            _link_made(node.rcmd, f"ip tuntap add dev tap{tap} mode tap", f"tap{tap}",
                       f"create tap{tap} on {node.server}")
        log = self.cluster.logs / f"ssh-tunnel-{tap}.log"
        options = ("-n", "-E", str(log), "-o", "Tunnel=ethernet", "-o", "ExitOnForwardFailure=yes",
                   "-w", f"{tap}:{tap}")
        remote = self.cluster.servers[node2.server]
        if node1.server == LOCAL:
            argv = [*remote.ssh(*options, shared=False), "echo @"]
            tunnel = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, start_new_session=True)
        else:  # between two other servers: from node1's, with that server's own ssh setup (as Mininet does)
            tunnel = node1.rpopen(["ssh", "-o", "BatchMode=yes", *options, f"{USER}@{node2.server}",
                                   "echo @"])
        self.cluster.tunnels.append(tunnel)
        assert tunnel.stdout is not None
        if tunnel.stdout.read(1) != b"@":
            raise FabricError(f"ssh tunnel {node1.server}:{intfname1} == {node2.server}:{intfname2} failed "
                              f"(log {log}): {tunnel.stdout.read(2000).decode(errors='replace')}")
        for node, name, addr in ((node1, intfname1, addr1), (node2, intfname2, addr2)):
            _link_made(node.rcmd, f"ip link set tap{tap} netns {node.pid}", f"tap{tap}",
                       f"move tap{tap} into {node.name} on {node.server}", check=node.cmd)
            _link_made(node.cmd, f"ip link set tap{tap} name {name}" + (f" address {addr}" if addr else ""),
                       name, f"rename tap{tap} to {name} on {node.server}")
        return tunnel


def _link_made(run: Callable[[str], str], command: str, name: str, what: str,
               check: Callable[[str], str] | None = None) -> None:
    """Run ``command`` by a node's ``run`` (cmd or rcmd), then ask whether link ``name`` is there (by
    ``check``, where it should now be, else by ``run``); a FabricError with every output if it is not
    after LINK_ATTEMPTS tries. The command's output alone cannot tell (Mininet's moveIntf judges by it),
    and one try is not enough: rcmd forks from the launcher, a gRPC process, and on a loaded machine such
    a child now and then prints gRPC's "epoll_wait error: Bad file descriptor" into the command's output,
    and sometimes dies with it before it runs the command (seen for `ip tuntap add`, where the tap then
    did not exist, and for `ip link set … netns`, where it did). Each step is safe to repeat: a repeat
    whose work is done fails harmlessly, and the link decides."""
    outputs = []
    for _ in range(LINK_ATTEMPTS):
        out = run(command)
        shown = (check or run)(f"ip -o link show dev {name}")
        if f" {name}:" in shown:
            return
        outputs.append(f"{out.strip()} {shown.strip()}")
    raise FabricError(f"cannot {what}: " + " | ".join(outputs))
