"""The demo across two servers (Mininet's cluster mode): the second server is a network namespace with an
sshd of the test's own (sshserver.py); the launcher's machine runs the SM. Issue 17.

What it checks are mechanisms: the nodes are where the placement put them (processes in the second
server's network namespace), the trace names the true attacker, the filter is installed, no attack frame
reaches the victim after it, and nothing of the run (processes, interfaces, namespaces) is left.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from ibsec.polling import poll_until

from topologies import cluster, demo, network, run

from .conftest import Footprint, needs_root
from .sshserver import SSHD, second_server

pytestmark = [needs_root, pytest.mark.skipif(not SSHD.exists() or not shutil.which("ssh"),
                                             reason="needs Debian's openssh-server and ssh (make setup)")]

GONE_TIMEOUT = 60.0
"""Bounds how long a remote shell takes to see its ssh session end (it is gone as soon as it does)."""


def netns_inode(pid: int) -> int:
    return os.stat(f"/proc/{pid}/ns/net").st_ino


def wait_gone(footprint: Footprint) -> list[str]:
    """The run's leftovers once they are gone or GONE_TIMEOUT has passed: a remote node's shell ends when
    its ssh session's end reaches it, which is after the launcher's teardown returns."""
    poll_until(lambda: not footprint.leftovers(), GONE_TIMEOUT, interval=0.2)
    return footprint.leftovers()


def test_placement_bins_switches_and_keeps_hosts_with_their_switch() -> None:
    fabric = run.RunOptions(fabric="fat-tree", k=2, levels=3).build_fabric()
    place = cluster.placement(fabric, cluster.servers_of(["10.0.0.2"]))
    servers = [place[s.name] for s in fabric.switches()]
    assert servers.count("localhost") == servers.count("10.0.0.2") == 6
    assert all(place[h.name] == place[h.switch] for h in fabric.hosts())
    hosts = [place[h.name] for h in fabric.hosts()]
    assert hosts.count("localhost") == hosts.count("10.0.0.2") == 4
    crossing = [link for link in fabric.links() if place[link.a[0]] != place[link.b[0]]]
    assert len(crossing) == 4
    assert cluster.servers_of(["b", "localhost", "b", "c"]) == ("localhost", "b", "c")


def test_the_demo_across_two_servers(tmp_path: Path) -> None:
    with second_server(tmp_path / "ssh") as server:
        options = run.RunOptions(fabric="fat-tree", k=2, levels=3, policy="sif", security="sth-aead",
                                 partitions=2, run_dir=tmp_path / "run", cluster=(server.address,),
                                 ssh_config=server.ssh_config)
        footprints: list[Footprint] = []

        def started(fabric_run: run.FabricRun) -> None:
            footprints.append(Footprint.of(fabric_run))
            check_placement(fabric_run, server.sshd_pid)

        try:
            summary = demo.run_demo(options, rate=1000, seconds=4.0, say=demo.Narrator(), on_start=started)
        finally:
            left = [leftover for footprint in footprints for leftover in wait_gone(footprint)]
        place = cluster.placement(options.build_fabric(), cluster.servers_of(options.cluster))
        assert place[summary["attacker"]] != place[summary["victim"]]
        assert summary["traced_host"] == summary["attacker"]
        assert summary["attack_packets_reaching_victim_after_filter"] == 0
        assert summary["attack_packets_forwarded_after_filter"] == 0
        assert left == []
        # the second server's own interfaces too, before its namespace goes (and would take them along)
        there = ("ip", "netns", "exec", server.namespace)
        for footprint in footprints:
            assert list(network.our_links(footprint.iface_prefix)) == []
            assert list(network.our_links(footprint.iface_prefix, there)) == []


def check_placement(fabric_run: run.FabricRun, sshd_pid: int) -> None:
    """Every node the placement put on the second server runs in its network namespace (a host: in a
    namespace of its own made there), every other one here; the attacker and the victim are on different
    servers, so the flood and the trace cross the tunnel."""
    assert fabric_run.cluster is not None and fabric_run.net is not None
    there, here = netns_inode(sshd_pid), netns_inode(os.getpid())
    for switch in fabric_run.fabric.switches():
        process = fabric_run.net.switch(switch.name).process
        assert process is not None
        expected = here if fabric_run.cluster.place[switch.name] == cluster.LOCAL else there
        assert netns_inode(process.pid) == expected, switch.name
    for name, agent in fabric_run.agents.items():
        assert netns_inode(agent.process.pid) not in (here, there)
        assert netns_inode(agent.process.pid) == netns_inode(fabric_run.net.host(name).pid)


def test_a_link_is_judged_by_asking_for_it_where_it_should_be() -> None:
    """The command's output does not decide: a stray line from a forking gRPC process is no error, and a
    moved link is looked for in its new namespace (``check``), not where the command ran."""
    here, there = {"tap7"}, set()

    def run(command: str) -> str:  # the server's root namespace: `ip link set tap7 netns …` moves it
        if "netns" in command:
            here.discard("tap7")
            there.add("tap7")
            return "epoll_wait error: Bad file descriptor\n"
        return show(here, command)

    def show(links: set[str], command: str) -> str:
        name = command.rsplit(" ", 1)[1]
        return f"5: {name}: <BROADCAST> mtu 1500\n" if name in links else f'Device "{name}" does not exist.\n'

    cluster._link_made(run, "ip link set tap7 netns 42", "tap7", "move tap7", check=lambda c: show(there, c))
    with pytest.raises(network.FabricError, match="cannot move tap7") as err:
        cluster._link_made(run, "ip link set tap7 netns 42", "tap7", "move tap7")  # not in the root ns
    assert str(err.value).count("does not exist") == cluster.LINK_ATTEMPTS  # every try's output shown


def test_a_link_step_whose_helper_died_is_tried_again() -> None:
    """A forked helper that dies before it runs its command (gRPC's line in its output, no tap made) is
    tried again; the step succeeds once the link is there."""
    links: set[str] = set()
    commands: list[str] = []

    def run(command: str) -> str:
        commands.append(command)
        if command.startswith("ip tuntap add"):
            if len(commands) == 1:
                return "E1128 ev_epoll1_linux.cc:373] encountered epoll_wait error: Bad file descriptor\n"
            links.add("tap9")
            return ""
        return "9: tap9: <BROADCAST> mtu 1500\n" if "tap9" in links else 'Device "tap9" does not exist.\n'

    cluster._link_made(run, "ip tuntap add dev tap9 mode tap", "tap9", "create tap9")
    assert [c.split()[1] for c in commands] == ["tuntap", "-o", "tuntap", "-o"] and links == {"tap9"}
