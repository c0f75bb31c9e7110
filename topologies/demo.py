"""``make demo``: the main job, end to end, on the default fat tree and the default target.

1. build the P4 program and start the fabric: switches, the SM (policy SIF), one agent per host;
2. encrypted RC traffic (the partition's security mode) between two members of one partition;
3. a spoofed invalid-P_Key flood from a host of the other partition at the first one's victim;
4. the victim's agent traps, the SM traces the trap's marking field to the true attacker's port and
   installs a SIF filter there; the flood stops; after the quiet period the SM flushes the filter;
5. teardown, then the account: what happened, from the events file, the agents' counters and the
   switches' pcaps; the traceback picture in the run directory; one JSON line last.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import networkx as nx
from ibsec import names
from ibsec.cliopts import integer, number
from ibsec.control import CommandError
from ibsm import report
from ibsm.topology import load_topology

from p4switch import targets

from . import filtering, launch, run, topofile
from .network import FabricError

BAD_PKEY = 0x7BAD


@dataclass(frozen=True)
class Roles:
    victim: str
    peer: str  # a member of the victim's partition: the legitimate traffic
    attacker: str
    claimed: str  # who the flood pretends to come from: an innocent host, or "SM"
    claimed_gid: str  # the source GID the flood carries


def pick_roles(fabric_run: run.FabricRun, claim_sm: bool = False) -> Roles:
    """Victim: the first host. Peer: the member of its partition farthest from it. Attacker: the host of
    another partition farthest from the victim (the longest path to trace). Claimed: an innocent host,
    or with ``claim_sm`` the SM itself (whose GID no trap may shield: issue 14)."""
    graph = fabric_run.fabric.graph
    hosts = list(fabric_run.hosts)
    victim = hosts[0]
    part = next(p for p in fabric_run.partitions if victim in p.members)
    distance = nx.single_source_shortest_path_length(graph, victim)
    peer = max((h for h in part.members if h != victim), key=lambda h: (distance[h], h))
    outsiders = [h for h in hosts if h not in part.members]
    attacker = max(outsiders, key=lambda h: (distance[h], h))
    claimed = next(h for h in outsiders if h != attacker)
    if claim_sm:
        return Roles(victim, peer, attacker, "SM", topofile.sm_gid())
    return Roles(victim, peer, attacker, claimed, fabric_run.gid(claimed))


class Narrator:
    """Progress lines with the elapsed time, so a user sees what the demo is waiting for."""

    def __init__(self) -> None:
        self.start = time.monotonic()

    def say(self, text: str) -> None:
        print(f"[{time.monotonic() - self.start:6.1f} s] {text}", flush=True)


def part_of(fabric_run: run.FabricRun, host: str) -> topofile.PartitionSpec:
    return next(p for p in fabric_run.partitions if host in p.members)


def connect_legit(fabric_run: run.FabricRun, roles: Roles) -> int:
    """An RC connection peer -> victim in their partition's mode; the victim echoes. Returns the QPN."""
    part = part_of(fabric_run, roles.victim)
    peer, victim = fabric_run.agents[roles.peer], fabric_run.agents[roles.victim]
    qp = peer.call("connect", remote_gid=victim.gid, service="RC", pkey=part.full_pkey,
                   mode=names.SECURITY_MODES.index(part.security), scope="session")
    victim.call("serve", qpn=qp["remote_qpn"])
    return int(qp["qpn"])


class LegitTraffic(threading.Thread):
    """send_lat from the peer for a bounded time, in the background while the attack runs."""

    def __init__(self, agent: run.Agent, qpn: int, seconds: float) -> None:
        super().__init__(daemon=True)
        self.agent, self.qpn, self.seconds = agent, qpn, seconds
        self.result: dict[str, Any] = {}

    def run(self) -> None:
        try:
            self.result = self.agent.call("perf", control_timeout=self.seconds + 30, test="send_lat",
                                          qpn=self.qpn, size=64, iterations=1_000_000, duration=self.seconds)
        except (OSError, CommandError) as err:  # the connection broke: legitimate traffic lost
            self.result = {"error": str(err)}


def flood_argv(fabric_run: run.FabricRun, roles: Roles, rate: int, seconds: float) -> list[str]:
    assert fabric_run.net is not None
    return [sys.executable, "-m", "ibsec.attacks.pkey_flood",
            "--iface", fabric_run.net.host_iface(roles.attacker), "--dst-gid", fabric_run.gid(roles.victim),
            "--src-gid", roles.claimed_gid,
            "--pkey", hex(BAD_PKEY), "--rate", str(rate), "--duration", str(seconds),
            "--count", str(int(rate * seconds))]


def uplinks(fabric: Any, switch: str) -> list[int]:
    """The ports of ``switch`` that lead to other switches."""
    return [link.a[1] if link.a[0] == switch else link.b[1] for link in fabric.links() if switch in
            (link.a[0], link.b[0])]


def flood_capture(fabric: Any, run_dir: Path, attacker: str, victim: str) -> filtering.Capture:
    """The pcaps a flood from ``attacker`` to ``victim`` crosses: its way in, every other port of that switch
    (its way on), and the victim's port (its way out)."""
    hosts = {h.name: h for h in fabric.hosts()}
    into, out = hosts[attacker], hosts[victim]
    neighbours = [h.port for h in hosts.values() if h.switch == into.switch and h.name != attacker]
    pcaps = run_dir / "pcaps"
    return filtering.Capture(received=pcaps / f"{into.switch}-{into.port}_in.pcap",
                             onward=[pcaps / f"{into.switch}-{port}_out.pcap"
                                     for port in uplinks(fabric, into.switch) + neighbours],
                             reached=pcaps / f"{out.switch}-{out.port}_out.pcap")


def run_demo(options: run.RunOptions, rate: int, seconds: float, say: Narrator, claim_sm: bool = False,
             on_start: Callable[[run.FabricRun], None] | None = None) -> dict[str, Any]:
    """The demo on a fabric of ``options``; ``on_start`` sees the started fabric first (a test looks at
    where its processes run)."""
    with run.FabricRun(options) as fabric_run:
        if on_start:
            on_start(fabric_run)
        secured = " (P4Runtime over mutual TLS)" if fabric_run.tls else ""
        say.say(f"fabric up: {fabric_run.fabric.name} on {fabric_run.target.name}{secured}, run directory "
                f"{fabric_run.run_dir}")
        roles = pick_roles(fabric_run, claim_sm)
        fabric_run.wait_provisioned([roles.victim, roles.peer])
        qpn = connect_legit(fabric_run, roles)
        say.say(f"{roles.peer} -> {roles.victim}: RC connection in mode "
                f"{part_of(fabric_run, roles.victim).security}, legitimate ping-pong running")
        baseline = fabric_run.agents[roles.peer].call("perf", test="send_lat", qpn=qpn, size=64,
                                                      iterations=1_000_000, duration=1.5)
        legit = LegitTraffic(fabric_run.agents[roles.peer], qpn, seconds + 2)
        legit.start()
        time.sleep(1.0)
        say.say(f"{roles.attacker} floods {roles.victim} with P_Key {BAD_PKEY:#06x} at {rate}/s for "
                f"{seconds:.0f} s, claiming to be {roles.claimed} ({roles.claimed_gid})")
        flood = fabric_run.spawn(roles.attacker, flood_argv(fabric_run, roles, rate, seconds),
                                 f"attack-{roles.attacker}.log")
        trace = fabric_run.wait_event(lambda e: e.get("event") == "traceback", 60, "the traceback")
        claimed = trace.get("claimed_host") or trace.get("claimed_source")
        say.say(f"SM traced the trap to {trace['traced_host']} at {trace['traced_switch']} port "
                f"{trace['traced_port']} (the packets claimed {claimed})")
        installed = fabric_run.wait_event(lambda e: e.get("event") == "filter-installed", 30, "the filter")
        say.say(f"SIF filter installed on {installed['switch']} port {installed['port']} "
                f"({installed['mode']})")
        flood.wait(timeout=seconds + 60)
        say.say("flood over; waiting for the SM to flush the filter")
        flushed = fabric_run.wait_event(lambda e: e.get("event") == "filter-flushed",
                                        options.quiet_period + 30, "the filter flush")
        say.say(f"filter flushed from {flushed['switch']} port {flushed['port']}")
        filters_left = fabric_run.sm_call("status")["filters"]
        legit.join(timeout=seconds + 40)
        victim_counters = fabric_run.agents[roles.victim].counters()
        hifi = fabric_run.fidelity()
        fabric = fabric_run.fabric
        run_dir = fabric_run.run_dir
        target = fabric_run.target.name
    say.say("fabric torn down; reading the pcaps")
    flushed["filters_left"] = filters_left
    summary = summarize(fabric, run_dir, target, roles, trace, installed, flushed, legit.result,
                        victim_counters, baseline)
    summary["p4runtime"] = "mutual-tls" if options.tls else "plaintext"
    summary["fidelity"] = hifi
    return summary


def summarize(fabric: Any, run_dir: Path, target: str, roles: Roles, trace: dict[str, Any],
              installed: dict[str, Any], flushed: dict[str, Any], legit: dict[str, Any],
              victim_counters: dict[str, Any], baseline: dict[str, Any]) -> dict[str, Any]:
    filter_at = float(installed["wall"])
    flood = flood_capture(fabric, run_dir, roles.attacker, roles.victim).account(BAD_PKEY, filter_at)
    done = legit.get("iterations", 0)
    lost = legit.get("lost", 0)
    png = run_dir / "traceback.png"
    rows = report.tracebacks(run_dir / "events.jsonl")
    report.draw(load_topology(run_dir / "topology.json"), rows[-1] if rows else None, png)
    summary = {
        "topology": fabric.name,
        "target": target,
        "attacker": roles.attacker,
        "claimed_source": roles.claimed,
        "victim": roles.victim,
        "traced_host": trace.get("traced_host"),
        "traced_switch": trace.get("traced_switch"),
        "traced_port": trace.get("traced_port"),
        "packets_to_trace": trace.get("packets_needed", 1),
        "first_attack_to_filter_ms": round((filter_at - flood.first_arrival) * 1000, 1)
        if flood.first_arrival is not None else None,
        "attack_packets_sent": flood.received,
        "attack_packets_reaching_victim": flood.reached,
        "attack_packets_forwarded_after_filter": flood.passed_after_filter,
        "attack_packets_reaching_victim_after_filter": flood.reached_after_filter,
        "victim_bad_pkey_drops": victim_counters.get("drops", {}).get("bad_pkey"),
        "legit_delivery_ratio": round(done / (done + lost), 4) if done + lost else 0.0,
        "legit_error": legit.get("error"),
        "legit_median_latency_us_before": round(baseline.get("median_us", 0.0), 1),
        "legit_median_latency_us": round(legit.get("median_us", 0.0), 1),
        "filter_flushed": flushed.get("switch") == trace.get("traced_switch")
        and flushed.get("port") == trace.get("traced_port") and not flushed["filters_left"],
        "filter_active_s": flushed.get("active_s"),
        "run_dir": str(run_dir),
        "picture": str(png),
    }
    (run_dir / "demo-summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary


def account(s: dict[str, Any]) -> str:
    """The readable account printed before the JSON line."""
    right = "the true attacker" if s["traced_host"] == s["attacker"] else "NOT the attacker"
    return "\n".join([
        "",
        f"== what happened on {s['topology']} ({s['target']})",
        f"   {s['attacker']} sent {s['attack_packets_sent']} invalid-P_Key packets to {s['victim']}, "
        f"every one claiming to come from {s['claimed_source']}.",
        f"   The SM traced {s['packets_to_trace']} packet's marking field to {s['traced_host']} on "
        f"{s['traced_switch']} port {s['traced_port']}: {right}.",
        f"   The filter went up {s['first_attack_to_filter_ms']} ms after the first attack packet; "
        f"{s['attack_packets_reaching_victim']} attack packets reached {s['victim']} (those already in "
        f"flight), {s['attack_packets_reaching_victim_after_filter']} got through after the filter; "
        f"{s['attacker']}'s switch forwarded {s['attack_packets_forwarded_after_filter']} after it.",
        f"   Legitimate encrypted traffic kept flowing: delivery ratio {s['legit_delivery_ratio']}, median "
        f"one-way latency {s['legit_median_latency_us']} us (before the attack "
        f"{s['legit_median_latency_us_before']} us).",
        f"   After the flood the filter was {'flushed' if s['filter_flushed'] else 'NOT flushed'} "
        f"(active {s['filter_active_s']} s): the port is back to no lookups.",
        f"   Emulator: the busiest switch, {s['fidelity']['busiest_switch']}, used up to "
        f"{s['fidelity']['busiest_cpu_max']:.2f} of a core (mean {s['fidelity']['busiest_cpu_mean']:.2f}); "
        f"the kernel dropped {s['fidelity']['switch_drops']} frames at the switches' veths and sockets"
        + (" (the emulator, not the links, was the limit)." if s['fidelity']['limited_by_emulator'] else "."),
        f"   Picture: {s['picture']}; events: {s['run_dir']}/events.jsonl; pcaps: {s['run_dir']}/pcaps/",
        "",
    ])


MIN_DELIVERY = 0.99
CHECKS: dict[str, Callable[[dict[str, Any]], bool]] = {
    "the true attacker traced": lambda s: s["traced_host"] == s["attacker"],
    "traced from 1 packet": lambda s: s["packets_to_trace"] == 1,
    "no attack packet reached the victim after the filter":
        lambda s: s["attack_packets_reaching_victim_after_filter"] == 0,
    f"legitimate delivery ratio at least {MIN_DELIVERY}": lambda s: s["legit_delivery_ratio"] >= MIN_DELIVERY,
    "the filter flushed": lambda s: bool(s["filter_flushed"]),
}
"""What the demo shows; `make demo` fails (exit status 1) when one does not hold, so CI notices."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m topologies.demo", description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", choices=tuple(targets.TARGETS),
                        default=os.environ.get("TARGET", "p4switch"))
    parser.add_argument("--rate", type=integer(1, 100_000), default=1500, help="attack frames per second")
    parser.add_argument("--seconds", type=number(0, 600, above=True), default=5.0, help="attack duration")
    parser.add_argument("--quiet-period", type=number(2, 600, above=True), default=3.0,
                        help="SIF flush after this long quiet (longer than the SM's 2 s trap suppression)")
    parser.add_argument("--tls", action="store_true", help="P4Runtime over mutual TLS (SM and switches)")
    parser.add_argument("--claim", choices=("host", "sm"), default="host",
                        help="whose source GID the flood claims: an innocent host's, or the SM's own")
    parser.add_argument("--cluster", type=launch.servers, default=(), metavar="SERVER[,SERVER...]",
                        help="place the fabric across these servers (docs/cluster.md)")
    parser.add_argument("--ssh-config", type=Path, help="ssh client configuration for the servers")
    args = parser.parse_args(argv)
    say = Narrator()
    options = run.RunOptions(target=args.target, policy=names.Policy.SIF.value,
                             security=names.Mode.STH_AEAD.label, partitions=2,
                             quiet_period=args.quiet_period, tls=args.tls, cluster=args.cluster,
                             ssh_config=args.ssh_config)
    try:
        summary = run_demo(options, args.rate, args.seconds, say, claim_sm=args.claim == "sm")
    except (FabricError, TimeoutError) as err:
        print(f"demo failed: {err}", file=sys.stderr)
        return 1
    print(account(summary))
    print(json.dumps(summary), flush=True)
    failed = [name for name, holds in CHECKS.items() if not holds(summary)]
    if failed:
        print(f"demo failed its checks: {'; '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
