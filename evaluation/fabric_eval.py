"""Experiments 1, 3 and 4a on the Mininet fabric (``topologies.run.FabricRun``) on the P4 target $TARGET
names (p4switch by default, or BMv2).

* 1 -- DoS impact (seed 000 Fig. 1): legitimate latency against 0..4 invalid-P_Key flooders, policy none,
  on the paper's 16-node network of five-port switches;
* 3 -- filtering policies (Fig. 8, Table 1): legitimate latency over time with an attack in the middle for
  none, DT, IF and SIF (switched at run time through the SM's control socket), partition-table lookups
  read from the switches' ``partition_lookups`` counters, table memory per switch from their entries,
  SIF's attack-to-filter time and the attack packets that reached the victim;
* 4a -- traceback (Tables 2-3): every traceback the SM made in these runs and in one run per topology and
  routing, compared with the attacker that really sent the flood.

Traffic stays inside the fabric's namespaces; every flood is bounded by count and duration.
"""

from __future__ import annotations

import os
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any

import networkx as nx
from ibsec import names
from ibsm import report as sm_report

from topologies import counters, demo, fidelity, filtering, run

from .common import SATURATED, Context, Section, Table, busy_share, cpu_times, new_figure
from .scalability import savage_expected_packets

FLOOD_RATE = 1500  # invalid-P_Key frames per second per attacker (what `make demo` uses)
POLICY_FLOOD_RATE = 3000  # experiment 3's one attacker: enough to congest the victim's software switch
CHUNK = 0.5  # seconds per latency sample of the time series
PACKETS_PER_ROUND_TRIP = 4
NA = "n/a"  # a CSV cell that does not apply (no filter under none, DT, IF)
PKEY_BYTES = 2
PAPER_FIG1 = {0: 20.0, 1: 50.0, 4: 120.0}  # seed 000 Fig. 1a, real-time traffic, microseconds (read off)


# ---- the fabric and its switches -------------------------------------------------------------------------


@contextmanager
def fabric(ctx: Context, kind: str, policy: str, routing: str = "deterministic") -> Iterator[run.FabricRun]:
    run_dir = ctx.out / f"fabric-{kind}-{routing}-{policy}"
    options = run.RunOptions(fabric=kind, policy=policy, routing=routing, run_dir=run_dir, quiet_period=3.0)
    ctx.progress("fabric", f"launching {kind} ({routing} routing, policy {policy}) in {run_dir.name}")
    with run.FabricRun(options) as fabric_run:
        ctx.progress("fabric", f"{fabric_run.fabric.name} up: {len(fabric_run.hosts)} hosts")
        yield fabric_run


@dataclass
class Paper16:
    """The 16-node network experiments 1 and 3 share: one launch (policy switched at run time), the
    roles, and every (attacker, victim) pair flooded so far."""

    fabric_run: run.FabricRun
    cast: Cast
    stack: ExitStack
    sent: set[tuple[str, str]] = field(default_factory=set)


def paper16(ctx: Context) -> Paper16:
    if "paper16" not in ctx.shared:
        stack = ExitStack()
        ctx.stack.callback(stack.close)
        fabric_run = stack.enter_context(fabric(ctx, "paper16", "none"))
        c = cast(fabric_run)
        fabric_run.wait_provisioned([c.victim, c.peer, *(h for pair in c.others for h in pair)])
        ctx.shared["paper16"] = Paper16(fabric_run, c, stack)
    shared: Paper16 = ctx.shared["paper16"]
    return shared


def release_paper16(ctx: Context) -> None:
    """Judge the shared network's tracebacks (for 4a) and tear it down, if it is up."""
    shared: Paper16 | None = ctx.shared.pop("paper16", None)
    if shared is None:
        return
    ctx.tracebacks.extend(
        traceback_rows(shared.fabric_run, shared.sent, "paper16 (4x4 torus)", "deterministic")
    )
    shared.stack.close()


def lookups(reads: counters.SwitchReads) -> int:
    """Partition-table lookups so far, all switches and ports (seed 000 Table 1's cost)."""
    return sum(reads.counter(names.PARTITION_LOOKUPS).values())


def table_bytes(reads: counters.SwitchReads) -> list[int]:
    """Partition-table bytes per switch: entries of the valid and invalid P_Key tables x 2 bytes."""
    valid, invalid = reads.entries(names.VALID_PKEYS), reads.entries(names.INVALID_PKEYS)
    return [(valid[sw] + invalid[sw]) * PKEY_BYTES for sw in reads.switches]


# ---- roles, traffic and floods ---------------------------------------------------------------------------


@dataclass
class Cast:
    victim: str
    peer: str
    attackers: list[str]  # outside the victim's partition, farthest first
    claimed: str
    others: list[tuple[str, str]]  # background legitimate pairs


def cast(fabric_run: run.FabricRun) -> Cast:
    roles = demo.pick_roles(fabric_run)
    distance = nx.single_source_shortest_path_length(fabric_run.fabric.graph, roles.victim)
    part = next(p for p in fabric_run.partitions if roles.victim in p.members)
    outsiders = sorted(
        (h for h in fabric_run.hosts if h not in part.members), key=lambda h: (-distance[h], h)
    )
    attackers = [h for h in outsiders if h != roles.claimed][:4]
    insiders = [h for h in part.members if h not in (roles.victim, roles.peer)]
    others = list(zip(insiders[::2], insiders[1::2], strict=False))
    return Cast(roles.victim, roles.peer, attackers, roles.claimed, others)


# The flood tool imports first, then sleeps until the wall time in argv[1]: on a loaded 2-core machine its
# start-up takes seconds, which would otherwise move the attack out of the window it is meant for.
FLOOD_AT = (
    "import sys, time\n"
    "from ibsec.attacks import pkey_flood\n"
    "time.sleep(max(0.0, float(sys.argv[1]) - time.time()))\n"
    "sys.exit(pkey_flood.main(sys.argv[2:]))\n"
)
FLOOD_SETUP = 4.0  # seconds a flood tool gets to start before its attack time


def flood(
    fabric_run: run.FabricRun,
    c: Cast,
    attacker: str,
    seconds: float,
    victim: str | None = None,
    at: float | None = None,
    rate: int = FLOOD_RATE,
) -> Any:
    """A spoofed invalid-P_Key flood from ``attacker`` at ``victim`` (default the cast's), bounded in time
    and count, starting at wall time ``at`` (default: as soon as it can)."""
    roles = demo.Roles(victim or c.victim, c.peer, attacker, c.claimed, fabric_run.gid(c.claimed))
    tool = demo.flood_argv(fabric_run, roles, rate, seconds)
    argv = [
        sys.executable,
        "-c",
        FLOOD_AT,
        f"{at or 0.0:.3f}",
        *tool[tool.index("ibsec.attacks.pkey_flood") + 1 :],
    ]
    return fabric_run.spawn(attacker, argv, f"flood-{attacker}-{time.time():.0f}.log")


def wait_until(wall: float) -> None:
    time.sleep(max(0.0, wall - time.time()))


def legit_connection(fabric_run: run.FabricRun, sender: str, receiver: str) -> int:
    """An echoing RC connection sender -> receiver in their partition's mode; the sender's QPN."""
    roles = demo.Roles(receiver, sender, sender, sender, fabric_run.gid(sender))
    return demo.connect_legit(fabric_run, roles)


def latency_series(agent: run.Agent, qpn: int, seconds: float, t0: float) -> list[dict[str, float]]:
    """Back-to-back short send_lat runs: (time since t0, median, mean, p99, messages, timed out, share of
    the machine's CPU busy) per chunk."""
    series = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        at, cpu = time.time() - t0, cpu_times()
        result = agent.call(
            "perf", control_timeout=CHUNK + 30, test="send_lat", qpn=qpn, size=64, iterations=100_000,
            duration=CHUNK,
        )
        if result["iterations"]:
            series.append(
                {
                    "t_s": at,
                    "end_s": time.time() - t0,
                    "median_us": result["median_us"],
                    "mean_us": result["mean_us"],
                    "p99_us": result["p99_us"],
                    "messages": result["iterations"],
                    "lost": result["lost"],
                    "cpu_busy": busy_share(cpu, cpu_times()),
                }
            )
    return series


class Background(threading.Thread):
    """Legitimate load between other members of the victim's partition for a bounded time."""

    def __init__(self, agent: run.Agent, qpn: int, seconds: float) -> None:
        super().__init__(daemon=True)
        self.agent, self.qpn, self.seconds = agent, qpn, seconds

    def run(self) -> None:
        try:
            self.agent.call(
                "perf",
                control_timeout=self.seconds + 30,
                test="send_lat",
                qpn=self.qpn,
                size=64,
                iterations=1_000_000,
                duration=self.seconds,
            )
        except Exception:  # noqa: BLE001  (background load only; the measured flow reports its own errors)
            return


def mean_of(series: list[dict[str, float]]) -> float:
    weight = sum(s["messages"] for s in series)
    return sum(s["mean_us"] * s["messages"] for s in series) / weight if weight else 0.0


# ---- experiment 1 ----------------------------------------------------------------------------------------


def run_dos(ctx: Context) -> Section:
    p = ctx.profile
    rows = []
    shared = paper16(ctx)
    fabric_run, c = shared.fabric_run, shared.cast
    fabric_run.sm_call("policy", policy="none")
    peer = fabric_run.agents[c.peer]
    for n in p.attackers:
        qpn = legit_connection(fabric_run, c.peer, c.victim)  # fresh: the last flood may have broken one
        wall = time.time()
        start = wall + FLOOD_SETUP
        floods = [flood(fabric_run, c, a, p.fabric_seconds + 1.0, at=start) for a in c.attackers[:n]]
        wait_until(start + 0.5)
        cpu, since = cpu_times(), time.time()
        result = peer.call(
            "perf",
            control_timeout=p.fabric_seconds + 30,
            test="send_lat",
            qpn=qpn,
            size=64,
            iterations=1_000_000,
            duration=p.fabric_seconds,
        )
        busy = busy_share(cpu, cpu_times())
        hifi = emulator_columns(fabric_run.fidelity(since))
        for proc in floods:
            proc.wait(timeout=p.fabric_seconds + 60)
        rows.append(
            {
                "attackers": n,
                "wall_start": wall,
                "median_us": result["median_us"],
                "p99_us": result["p99_us"],
                "mean_us": result["mean_us"],
                "messages": result["iterations"],
                "lost": result["lost"],
                "flood_rate_per_attacker": FLOOD_RATE,
                "cpu_busy": busy,
                **hifi,
            }
        )
        ctx.progress(
            "1",
            f"{n} attacker(s): legitimate median {result['median_us']:.0f} us, "
            f"p99 {result['p99_us']:.0f} us, {result['lost']} lost, CPUs {busy:.0%} busy",
        )
        time.sleep(1.0)
    shared.sent |= {(a, c.victim) for a in c.attackers[: max(p.attackers)]}
    flood_outcome(rows, fabric_run, c.victim, time.time())
    base = rows[0]
    for r in rows:
        r["mean_vs_no_attack"] = r["mean_us"] / base["mean_us"] if base["mean_us"] else 0.0
    section = Section(
        "1",
        "DoS impact: legitimate latency against the number of attackers, policy none (seed 000 Fig. 1)",
        "Seed 000 Fig. 1a (16-node network of five-port switches, simulated): real-time traffic latency "
        "about 20 us with no attacker, about 50 us with one, up to about 120 us with four (6x); best-effort "
        "traffic up to 18x.",
    )
    section.csvs = [ctx.write_csv("1_dos_impact", rows)]
    section.tables.append(
        Table(
            f"One-way latency of a 64-byte ping-pong across the 16-node network while N hosts flood the "
            f"receiver with invalid P_Keys at {FLOOD_RATE}/s each (policy none)",
            [
                "attackers",
                "paper: average latency (Fig. 1a)",
                "ours: mean",
                "ours: mean vs no attack",
                "ours: median",
                "ours: p99",
                "messages timed out (2 s)",
                "attack frames at the victim",
                "CPUs busy",
                BUSIEST_HEADER,
                DROPS_HEADER,
            ],
            [
                [
                    str(r["attackers"]),
                    paper_fig1(r["attackers"]),
                    f"{r['mean_us']:.0f} us",
                    f"{r['mean_vs_no_attack']:.2f}x",
                    f"{r['median_us']:.0f} us",
                    f"{r['p99_us']:.0f} us",
                    str(r["lost"]),
                    str(r["attack_frames_at_victim"]),
                    f"{r['cpu_busy']:.0%}",
                    busiest_cell(r),
                    str(r["switch_drops"]),
                ]
                for r in rows
            ],
        )
    )
    section.figures = [plot_dos(ctx, rows)]
    claim = "a flood raises legitimate latency under policy none"
    section.checks = {claim: rows[-1]["mean_us"] > 1.1 * rows[0]["mean_us"]}
    busiest = max(r["cpu_busy"] for r in rows)
    if busiest >= SATURATED:
        section.limits[claim] = emulator_limit(
            busiest, "the software switches, the agents and the flood tools share them, so latency measures "
            "each one's share of CPU time rather than queues in the fabric"
        )
    section.notes = [
        "Our switches are software (p4switch in Python, or BMv2) on a shared 2-core machine, so the absolute "
        "latencies are milliseconds, not microseconds; the ratio to the no-attack baseline is "
        "the comparable quantity. The paper plots the average, so the ratio is of means.",
        "When a message times out (2 s) its echo still arrives later and the agent's ping-pong pairs it "
        "with the next request, which then looks nearly instant: under heavy loss the median falls "
        "while the mean and p99 rise.",
        *saturation_notes(busiest),
        *fidelity_notes(rows, "attacker counts"),
    ]
    return section


BUSIEST_HEADER = "busiest switch: CPU max / mean (cores)"
DROPS_HEADER = "frames dropped at the switches' veths and sockets"


def emulator_columns(report: dict[str, Any]) -> dict[str, Any]:
    """The CSV columns of a fidelity report (topologies.fidelity) over one measurement."""
    keys = ("busiest_switch", "busiest_cpu_max", "busiest_cpu_mean", "switch_drops", "limited_by_emulator")
    return {key: report[key] for key in keys}


def busiest_cell(row: dict[str, Any]) -> str:
    return f"{row['busiest_switch']} {row['busiest_cpu_max']:.2f} / {row['busiest_cpu_mean']:.2f}"


def fidelity_notes(rows: list[dict[str, Any]], what: str) -> list[str]:
    """Whether the emulator, rather than the links, limited these rows (Mininet-HiFi's check): a switch
    process near a full core cannot keep up with its links, and a frame its veth dropped was lost to the
    emulator."""
    if not rows:
        return []
    limited = [r for r in rows if r["limited_by_emulator"]]
    measure = (f"the busiest switch process used {fidelity.SATURATED_CORE} of a core or more, or "
               "the kernel dropped frames at a switch's veth (rx_dropped, tx_dropped) or socket (p4switch's "
               "kernel_drops)")
    if not limited:
        return [f"Not limited by the emulator at any of the {len(rows)} {what}: no point where {measure}."]
    worst = max(limited, key=lambda r: r["busiest_cpu_max"])
    return [
        f"Limited by the emulator at {len(limited)} of {len(rows)} {what}: there {measure}, so those "
        f"results measure the software switches rather than the links (worst: {worst['busiest_switch']} "
        f"at {worst['busiest_cpu_max']:.2f} of a core, {sum(r['switch_drops'] for r in limited)} frames "
        "dropped in all)."
    ]


def emulator_limit(busy: float, why: str) -> str:
    """Why a latency direction may not show: the machine, not the emulated fabric, set the pace."""
    return f"the emulator, not the fabric, was the limit: the machine's CPUs were {busy:.0%} busy ({why})"


def saturation_notes(busy: float) -> list[str]:
    """A note for a section whose latencies were taken on a saturated machine (none otherwise)."""
    if busy < SATURATED:
        return []
    return [
        f"The machine's {os.cpu_count()} CPUs were up to {busy:.0%} busy while these latencies were taken: "
        "the emulator (software switches, agents, flood tools and anything else on the machine), not the "
        "fabric, set the pace, so they say how CPU time was shared more than how the fabric queues. The "
        "frame counts beside them do not depend on it."
    ]


def flood_outcome(rows: list[dict[str, Any]], fabric_run: run.FabricRun, victim: str, end: float) -> None:
    """Per row (from its start to the next one's): the attack frames the victim's switch delivered to it
    (its pcap) and the filters the SM installed (none, under policy none)."""
    host = fabric_run.hosts[victim]
    pcap = fabric_run.run_dir / "pcaps" / f"{host.switch}-{host.port}_out.pcap"
    ends = [r["wall_start"] for r in rows[1:]] + [end]
    events = fabric_run.events()
    for row, until in zip(rows, ends, strict=True):
        window = (row["wall_start"], until)
        row["attack_frames_at_victim"] = len(filtering.attack_frames(pcap, demo.BAD_PKEY, window))
        row["filters_installed"] = sum(
            1 for e in events if e.get("event") == "filter-installed" and window[0] <= e["wall"] < window[1]
        )


def paper_fig1(attackers: int) -> str:
    """Fig. 1a's latency for this many attackers, with its ratio to no attack."""
    if attackers not in PAPER_FIG1:
        return "between 50 and 120 us (2.5x to 6x)"
    value = PAPER_FIG1[attackers]
    return f"about {value:.0f} us ({value / PAPER_FIG1[0]:.1f}x)"


def plot_dos(ctx: Context, rows: list[dict[str, Any]]) -> str:
    fig, ax = new_figure(
        "DoS impact on legitimate latency, policy none (16-node network)",
        "attackers flooding invalid P_Keys",
        "latency relative to no attack (x)",
    )
    xs = [r["attackers"] for r in rows]
    ax.plot(xs, [r["mean_vs_no_attack"] for r in rows], "o-", label="ours: mean")
    ax.plot(xs, [r["p99_us"] / rows[0]["mean_us"] for r in rows], "v:", label="ours: p99 / no-attack mean")
    ax.plot(
        list(PAPER_FIG1),
        [v / PAPER_FIG1[0] for v in PAPER_FIG1.values()],
        "k--s",
        label="paper Fig. 1a (real-time traffic)",
    )
    ax.set_xticks(range(0, 5))
    ax.set_yscale("log")
    ax.set_ylabel("latency relative to no attack (x, log scale)")
    ax.legend(fontsize=8, loc="upper left")
    return ctx.save(fig, "1_dos_impact")


# ---- experiment 3 ----------------------------------------------------------------------------------------

FLUSH_TIMEOUT = 120.0  # seconds to wait for SIF's flush after a flood (its quiet period, on a loaded machine)


def policy_point(
    ctx: Context,
    fabric_run: run.FabricRun,
    reads: counters.SwitchReads,
    c: Cast,
    policy: str,
    flows: int,
    bg: list[tuple[run.Agent, int]],
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """One policy at one load: lookups without attack, then latency over time with a flood in the middle,
    then what the SM's events and the switches' counters say the policy did to the flood."""
    p = ctx.profile
    fabric_run.sm_call("policy", policy=policy)
    time.sleep(0.5)
    qpn = legit_connection(fabric_run, c.peer, c.victim)  # fresh: a flood can retry the last one to death
    peer = fabric_run.agents[c.peer]
    before = lookups(reads)  # no attack yet: what the policy costs when nothing happens
    idle = peer.call(
        "perf", control_timeout=40, test="send_lat", qpn=qpn, size=64, iterations=1_000_000, duration=1.0
    )
    # one echoed message is four packets on the wire: the SEND, its ACK, the echo and its ACK
    idle_lookups = (lookups(reads) - before) / max(1, PACKETS_PER_ROUND_TRIP * idle["iterations"])
    memory = table_bytes(reads)
    violations = reads.violations()
    attack_at, attack_for = p.fabric_seconds / 3, p.fabric_seconds / 3
    t0 = time.time() + max(0.2, FLOOD_SETUP - attack_at)  # the flood tool needs FLOOD_SETUP to start
    attack = flood(fabric_run, c, c.attackers[0], attack_for, at=t0 + attack_at, rate=POLICY_FLOOD_RATE)
    threads = [Background(agent, q, p.fabric_seconds + 1) for agent, q in bg[:flows]]
    for thread in threads:
        thread.start()
    wait_until(t0)
    before = lookups(reads)
    series = latency_series(peer, qpn, p.fabric_seconds, t0)
    hifi = emulator_columns(fabric_run.fidelity(t0))
    attack.wait(timeout=attack_for + 60)
    run_lookups = lookups(reads) - before
    for thread in threads:
        thread.join(timeout=p.fabric_seconds + 40)
    row = {
        "policy": policy,
        "background_flows": flows,
        "t0": t0,
        "flood_wall": t0 + attack_at,  # no frame of this point's flood enters the fabric before it
        "attack_start_s": attack_at,
        "attack_end_s": attack_at + attack_for,
        "mean_us": mean_of(series),
        "median_us": statistics.median(s["median_us"] for s in series) if series else 0.0,
        "max_chunk_median_us": max((s["median_us"] for s in series), default=0.0),
        "lookups_per_packet_no_attack": idle_lookups,
        "lookups_during_run": run_lookups,
        "table_bytes_per_switch_max": max(memory),
        "table_bytes_total": sum(memory),
        **hifi,
        **filter_events(fabric_run, t0),  # waits for SIF's flush: the next point starts without a filter
    }
    time.sleep(1.0)
    row |= filter_drops(fabric_run, c, violations, reads.violations(), row)
    unacked, state = fabric_run.wait_delivered(c.peer, c.victim, qpn)
    row |= {
        "legit_messages": sum(s["messages"] + s["lost"] for s in series),
        "legit_timed_out": sum(s["lost"] for s in series),
        "legit_unacked_after": unacked,
        "legit_qp_state": state,
    }
    return row, [{"policy": policy, "background_flows": flows, **s} for s in series]


def filter_events(fabric_run: run.FabricRun, t0: float) -> dict[str, Any]:
    """SIF's filter in this point, from the SM's events: when and on which port it went up, and its flush
    (waited for) with the port's violation count the SM read last."""
    installed = next(
        (e for e in fabric_run.events() if e.get("event") == "filter-installed" and e["wall"] >= t0), None
    )
    if installed is None:
        return {"filter_wall": 0.0, "filter_port": NA, "filter_flushed": False, "flush_count": 0}
    port = (installed["switch"], installed["port"])
    flushed = fabric_run.wait_event(
        lambda e: e.get("event") == "filter-flushed" and e["wall"] >= t0 and (e["switch"], e["port"]) == port,
        FLUSH_TIMEOUT,
        f"the flush of the filter on {port[0]} port {port[1]}",
    )
    return {
        "filter_wall": installed["wall"],
        "filter_port": f"{port[0]}:{port[1]}",
        "filter_flushed": True,
        "flush_count": int(flushed["count"]),
    }


def filter_drops(
    fabric_run: run.FabricRun,
    c: Cast,
    before: dict[tuple[str, int], int],
    after: dict[tuple[str, int], int],
    row: dict[str, Any],
) -> dict[str, Any]:
    """Frames the partition checks dropped in this point (the switches' pkey_violations counters): at the
    attacker's port and anywhere else. SIF's flush resets its port's counter, so there the count the SM
    read at the flush stands in for the second reading."""
    attacker = fabric_run.hosts[c.attackers[0]]
    port = (attacker.switch, attacker.port)
    grown = counters.moved(before, after)
    at_port = row["flush_count"] - before.get(port, 0) if row["filter_flushed"] else grown.get(port, 0)
    return {
        "attacker_port": f"{port[0]}:{port[1]}",
        "attack_frames_dropped_at_attacker_port": at_port,
        "frames_dropped_elsewhere": sum(n for cell, n in grown.items() if cell != port),
    }


def run_policies(ctx: Context) -> Section:
    rows, series = [], []
    shared = paper16(ctx)
    fabric_run, c = shared.fabric_run, shared.cast
    reads = counters.SwitchReads(fabric_run)
    bg = [(fabric_run.agents[a], legit_connection(fabric_run, a, b)) for a, b in c.others]
    for flows in ctx.profile.loads:
        for policy in names.POLICIES:
            row, points = policy_point(ctx, fabric_run, reads, c, policy, int(flows), bg)
            rows.append(row)
            series.extend(points)
            ctx.progress(
                "3",
                f"{int(flows)} background flows, {policy}: mean {row['mean_us']:.0f} us, "
                f"worst 0.5 s median {row['max_chunk_median_us']:.0f} us, "
                f"{row['lookups_per_packet_no_attack']:.2f} lookups/packet without attack, "
                f"{row['attack_frames_dropped_at_attacker_port']} attack frames dropped at the attacker's "
                "port",
            )
    shared.sent.add((c.attackers[0], c.victim))
    capture = demo.flood_capture(fabric_run.fabric, fabric_run.run_dir, c.attackers[0], c.victim)
    release_paper16(ctx)  # the last user of the shared network; its pcaps are complete once it stops
    attack_packets(rows, series, capture)
    return policy_section(ctx, rows, series)


def attack_packets(
    rows: list[dict[str, Any]], series: list[dict[str, Any]], capture: filtering.Capture
) -> None:
    """From the pcaps, per point (from its start until the next point's flood can start): the flood's
    frames into the attacker's switch, on from it and at the victim, split at SIF's filter (see
    topologies.filtering); when the first one came, and how long until the filter went up."""
    ends = [r["flood_wall"] for r in rows[1:]] + [float("inf")]
    for row, end in zip(rows, ends, strict=True):
        filtered = row["filter_wall"] > 0
        got = capture.account(demo.BAD_PKEY, row["filter_wall"] if filtered else None, (row["t0"], end))
        phases(row, series, got)
        row["attack_frames_sent"] = got.received
        row["attack_frames_forwarded"] = got.forwarded
        row["attack_frames_reaching_victim"] = got.reached
        first = got.first_arrival
        after = filtered and first is not None
        row["attack_to_filter_ms"] = round((row["filter_wall"] - first) * 1000, 1) if after and first else NA
        row["attack_frames_after_filter"] = got.received_after_filter if after else NA
        row["attack_frames_passed_after_filter"] = got.passed_after_filter if after else NA
        row["attack_frames_reaching_victim_after_filter"] = got.reached_after_filter if after else NA


def phases(row: dict[str, Any], series: list[dict[str, Any]], flood: filtering.FilterAccount) -> None:
    """Median latency and CPU busy share before and while the flood's frames entered the fabric (times
    from the pcap)."""
    chunks = [
        s for s in series if s["policy"] == row["policy"] and s["background_flows"] == row["background_flows"]
    ]
    start = end = float("inf")
    if flood.first_arrival is not None and flood.last_arrival is not None:
        start, end = flood.first_arrival - row["t0"], flood.last_arrival - row["t0"]
    before = [s for s in chunks if s["end_s"] <= start]
    during = [s for s in chunks if s["t_s"] < end and s["end_s"] > start]
    row["attack_start_s"], row["attack_end_s"] = start, end
    for phase, picked in (("before_attack", before), ("during_attack", during)):
        row[f"{phase}_median_us"] = statistics.median(s["median_us"] for s in picked) if picked else 0.0
        row[f"cpu_busy_{phase}"] = statistics.median(s["cpu_busy"] for s in picked) if picked else 0.0


def policy_section(ctx: Context, rows: list[dict[str, Any]], series: list[dict[str, Any]]) -> Section:
    section = Section(
        "3",
        "Filtering policies none / DT / IF / SIF under an attack in the middle (seed 000 Fig. 8, Table 1)",
        "Seed 000: DT, IF and SIF all block the attack; SIF has the lowest latency at 70 % load and is free "
        "without an attack, with a short spike before its filter goes up. Table 1: lookups per packet "
        "h f(p) (DT), f(p) (IF), Pr(n) f(min(p', p)) (SIF); memory per switch r p k (DT), n/s p k (IF), "
        "n/s min(p', p) k (SIF).",
    )
    section.csvs = [ctx.write_csv("3_policies", rows), ctx.write_csv("3_latency_over_time", series)]
    section.tables += [latency_table(rows), flood_table(rows)]
    section.figures = [plot_series(ctx, series, rows), plot_policy_means(ctx, rows)]
    section.checks = policy_checks(rows)
    section.limits = policy_limits(rows, section.checks)
    section.notes = [
        "Lookups per packet come from the switches' partition_lookups counters over a 1 s ping-pong "
        "with no attack, divided by the packets carried (4 per echoed message: SEND, ACK, echo, ACK); "
        "DT / IF is then the mean number of switches on a path (h of Table 1). Table bytes count the "
        "valid and invalid P_Key entries of each switch x 2 bytes (P4Runtime reads).",
        "DT checks at every hop, IF at the ingress port only, SIF nowhere until a trap names a port.",
        "What a policy did to the flood comes from the switches, not from timing: the frames in and out of "
        "the attacker's switch and at the victim's port (their pcaps), the frames the partition checks "
        "dropped (their pkey_violations counters) and SIF's install and flush (the SM's events). A frame "
        "that entered the attacker's switch after SIF's filter-installed event met the filter, so 'let on "
        "after it' counts filter failures only, however slow the machine.",
        "Legitimate traffic: the ping-pong's messages whose echo took over 2 s count as timed out (a "
        "latency), but RC retransmits until every packet is acknowledged; 'unacknowledged after' is what "
        "was still not delivered once the run was over (0: nothing lost).",
        *saturation_notes(max(r["cpu_busy_during_attack"] for r in rows)),
        *fidelity_notes(rows, "points"),
    ]
    return section


def per_point(
    rows: list[dict[str, Any]], caption: str, columns: dict[str, Callable[[dict[str, Any]], str]]
) -> Table:
    """A table with a row per point: its load and policy, then ``columns`` (header -> cell of a row)."""
    cells = [[str(r["background_flows"]), r["policy"].upper(), *(cell(r) for cell in columns.values())]
             for r in rows]
    return Table(caption, ["background flows", "policy", *columns], cells)


def latency_table(rows: list[dict[str, Any]]) -> Table:
    return per_point(
        rows,
        "Legitimate one-way latency (medians of 0.5 s chunks) before and during the attack, run mean, "
        "partition-table lookups per packet and bytes per switch, and how busy the machine's CPUs were "
        f"(one host floods the receiver at {POLICY_FLOOD_RATE}/s for the middle third)",
        {
            "paper (Fig. 8, Table 1)": lambda r: PAPER_FIG8[r["policy"]],
            "before attack": lambda r: f"{r['before_attack_median_us']:.0f} us",
            "during attack": lambda r: f"{r['during_attack_median_us']:.0f} us",
            "run mean": lambda r: f"{r['mean_us']:.0f} us",
            "lookups/packet, no attack": lambda r: f"{r['lookups_per_packet_no_attack']:.2f}",
            "table bytes/switch (max)": lambda r: str(r["table_bytes_per_switch_max"]),
            "CPUs busy before / during": lambda r: (
                f"{r['cpu_busy_before_attack']:.0%} / {r['cpu_busy_during_attack']:.0%}"
            ),
            BUSIEST_HEADER: busiest_cell,
            DROPS_HEADER: lambda r: str(r["switch_drops"]),
        },
    )


def flood_table(rows: list[dict[str, Any]]) -> Table:
    def after_filter(r: dict[str, Any]) -> str:
        keys = ("attack_frames_after_filter", "attack_frames_passed_after_filter",
                "attack_frames_reaching_victim_after_filter")
        return " / ".join(str(r[k]) if r["filter_flushed"] else "-" for k in keys)

    return per_point(
        rows,
        "What each policy did to the flood (switch pcaps and counters, SM events) and to the legitimate "
        "ping-pong",
        {
            "attack frames into the attacker's switch": lambda r: str(r["attack_frames_sent"]),
            "dropped at its port (counter)": lambda r: str(r["attack_frames_dropped_at_attacker_port"]),
            "let on": lambda r: str(r["attack_frames_forwarded"]),
            "at the victim": lambda r: str(r["attack_frames_reaching_victim"]),
            "SIF filter on / attack-to-filter": lambda r: (
                f"{r['filter_port']}, flushed / {r['attack_to_filter_ms']} ms" if r["filter_flushed"] else "-"
            ),
            "arrived after the filter / let on / at the victim": after_filter,
            "legit messages (timed out > 2 s)": lambda r: f"{r['legit_messages']} ({r['legit_timed_out']})",
            "unacknowledged after": lambda r: f"{r['legit_unacked_after']} ({r['legit_qp_state']})",
        },
    )


def rise(row: dict[str, Any]) -> float:
    """How much the legitimate median latency rose while the flood entered the fabric (us)."""
    return float(row["during_attack_median_us"] - row["before_attack_median_us"])


RAISES = "a flood raises legitimate latency under policy none"
SIF_NEAR_BASELINE = (
    "SIF keeps latency near the no-attack baseline (its rise under attack at most 1/4 of none's)"
)


def policy_checks(rows: list[dict[str, Any]]) -> dict[str, bool]:
    """The directions of Fig. 8 and Table 1, per load, and what the filters did to the flood."""

    def at(policy: str, flows: int) -> dict[str, Any]:
        return next(r for r in rows if r["policy"] == policy and r["background_flows"] == flows)

    loads = sorted({r["background_flows"] for r in rows})
    filtering_rows = [r for r in rows if r["policy"] != "none"]
    sif = [r for r in rows if r["policy"] == "sif"]
    return {
        RAISES: all(
            at("none", f)["during_attack_median_us"] > 1.2 * at("none", f)["before_attack_median_us"]
            for f in loads
        ),
        SIF_NEAR_BASELINE: all(rise(at("sif", f)) <= 0.25 * rise(at("none", f)) for f in loads),
        "DT, IF and SIF keep the attack from the victim once filtering": all(
            at(p, f)["attack_frames_reaching_victim"] == 0 for p in ("dt", "if") for f in loads
        )
        and all(r["attack_frames_reaching_victim_after_filter"] == 0 for r in sif),
        "DT, IF and SIF drop the flood at the attacker's own port, nowhere else": all(
            r["attack_frames_dropped_at_attacker_port"] > 0 and r["frames_dropped_elsewhere"] == 0
            for r in filtering_rows
        ),
        "SIF's filter lets on no frame that arrives after it, and is flushed after the attack": all(
            r["filter_port"] == r["attacker_port"] and r["filter_flushed"]
            and r["attack_frames_passed_after_filter"] == 0
            for r in sif
        ),
        "the legitimate ping-pong loses no message under DT, IF and SIF": all(
            r["legit_unacked_after"] == 0 and r["legit_qp_state"] == "RTS" for r in filtering_rows
        ),
        "SIF makes no partition-table lookups without an attack": all(
            at("sif", f)["lookups_per_packet_no_attack"] < 0.05 for f in loads
        ),
        "DT looks up at more hops than IF": all(
            at("dt", f)["lookups_per_packet_no_attack"] > at("if", f)["lookups_per_packet_no_attack"]
            for f in loads
        ),
        "SIF installed a filter during the attack": all(r["attack_to_filter_ms"] != NA for r in sif),
    }


def policy_limits(rows: list[dict[str, Any]], checks: dict[str, bool]) -> dict[str, str]:
    """For a latency direction that does not hold on a saturated machine: the emulator was the limit."""
    busiest = max(r["cpu_busy_during_attack"] for r in rows)
    if busiest < SATURATED:
        return {}
    sif = [r for r in rows if r["policy"] == "sif"]
    held = all(r["attack_frames_passed_after_filter"] == 0 for r in sif)
    why = (
        "the software switches, the agents and the flood tool share them, so latency under attack measures "
        "the CPU time they take from each other"
        + (
            "; SIF's filter let on no frame that arrived after it, so its rise is not the fabric's"
            if sif and held
            else ""
        )
    )
    return {claim: emulator_limit(busiest, why) for claim in (RAISES, SIF_NEAR_BASELINE) if not checks[claim]}


PAPER_FIG8 = {
    "none": "rises under attack",
    "dt": "blocks; constant lookup delay every hop",
    "if": "blocks; lookup delay at ingress",
    "sif": "blocks after a short spike; free without attack",
}


def plot_series(ctx: Context, series: list[dict[str, Any]], rows: list[dict[str, Any]]) -> str:
    fig, ax = new_figure(
        "Legitimate latency over time, attack in the middle (seed 000 Fig. 8b/c)",
        "time since start of run (s)",
        "one-way latency, median per 0.5 s (ms)",
    )
    flows = min(r["background_flows"] for r in rows)
    for policy in names.POLICIES:
        pts = [s for s in series if s["policy"] == policy and s["background_flows"] == flows]
        ax.plot(
            [s["t_s"] for s in pts],
            [s["median_us"] / 1000 for s in pts],
            "o-",
            markersize=3,
            label=policy.upper(),
        )
    row = next(r for r in rows if r["policy"] == "sif" and r["background_flows"] == flows)
    if row["attack_end_s"] < float("inf"):
        ax.axvspan(
            row["attack_start_s"],
            row["attack_end_s"],
            color="red",
            alpha=0.1,
            label="flood entering the fabric (SIF run, from the pcap)",
        )
    ax.set_title(f"Legitimate latency over time, attack in the middle, {flows} background flows (Fig. 8b/c)")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=8)
    return ctx.save(fig, "3_latency_over_time")


def plot_policy_means(ctx: Context, rows: list[dict[str, Any]]) -> str:
    fig, ax = new_figure(
        "Mean legitimate latency per policy under attack (seed 000 Fig. 8a)",
        "background legitimate flows",
        "mean one-way latency over the run (ms)",
    )
    flows = sorted({r["background_flows"] for r in rows})
    width = 0.2
    for i, policy in enumerate(names.POLICIES):
        ax.bar(
            [j + i * width for j in range(len(flows))],
            [
                next(r["mean_us"] for r in rows if r["policy"] == policy and r["background_flows"] == f)
                / 1000
                for f in flows
            ],
            width,
            label=policy.upper(),
        )
    ax.set_xticks([j + 1.5 * width for j in range(len(flows))], [str(f) for f in flows])
    ax.legend(fontsize=8)
    return ctx.save(fig, "3_policy_means")


# ---- experiment 4a ---------------------------------------------------------------------------------------


def traceback_rows(
    fabric_run: run.FabricRun, sent: set[tuple[str, str]], kind: str, routing: str
) -> list[dict[str, Any]]:
    """Every traceback of our floods the SM made in this run, judged against the (attacker, victim) pairs
    that really flooded: right when the traced host flooded the trapping victim. Each row carries the
    run's fidelity (its busiest switch and drops from launch to now)."""
    rows = []
    hifi = emulator_columns(fabric_run.fidelity())
    for t in sm_report.tracebacks(fabric_run.events_file):
        if t.get("bad_key") != f"{demo.BAD_PKEY:#06x}":
            continue
        known = t["traced_host"] in fabric_run.hosts
        rows.append(
            {
                "topology": kind,
                "routing": routing,
                "scheme": t["scheme"],
                "victim": t["victim"],
                "traced_host": t["traced_host"],
                "claimed": t["claimed"],
                "correct": (t["traced_host"], t["victim"]) in sent,
                "packets_needed": t["packets_needed"],
                # switches on the path (the routers of Savage et al.'s path length d)
                "hops": nx.shortest_path_length(fabric_run.fabric.graph, t["traced_host"], t["victim"]) - 1
                if known
                else -1,
                **hifi,
            }
        )
    return rows


def traced(victim: str) -> Callable[[dict[str, Any]], bool]:
    return lambda e: e.get("event") == "traceback" and e.get("victim") == victim


def traceback_trials(fabric_run: run.FabricRun, c: Cast, trials: int) -> set[tuple[str, str]]:
    """Short floods, each from another host at the host farthest from it (a fresh victim each time, so no
    agent's trap suppression window hides one); returns the (attacker, victim) pairs."""
    graph, hosts = fabric_run.fabric.graph, sorted(fabric_run.hosts)
    sent: set[tuple[str, str]] = set()
    victims: set[str] = set()
    for attacker in [h for h in hosts if h != c.claimed][:trials]:
        distance = nx.single_source_shortest_path_length(graph, attacker)
        free = [h for h in hosts if h not in (attacker, c.claimed) and h not in victims]
        victim = max(free, key=lambda h: (distance[h], h))
        victims.add(victim)
        fabric_run.wait_provisioned([victim])
        flood(fabric_run, c, attacker, 1.0, victim).wait(timeout=60)
        fabric_run.wait_event(traced(victim), 60, f"the traceback of {attacker}'s flood at {victim}")
        sent.add((attacker, victim))
    return sent


def run_traceback(ctx: Context) -> Section:
    release_paper16(ctx)  # its tracebacks count too
    failures = []
    for kind in ctx.profile.topologies:
        for routing in ctx.profile.routings:
            try:
                with fabric(ctx, kind, "sif", routing) as fabric_run:
                    c = cast(fabric_run)
                    sent = traceback_trials(fabric_run, c, ctx.profile.traceback_trials)
                    rows = traceback_rows(fabric_run, sent, kind, routing)
            except Exception as err:  # one topology that cannot launch must not lose the others
                failures.append(f"{kind} with {routing} routing: {type(err).__name__}: {err}")
                ctx.progress("4a", f"{kind} {routing} FAILED: {err}")
                continue
            ctx.tracebacks.extend(rows)
            ctx.progress(
                "4a", f"{kind} {routing}: {sum(r['correct'] for r in rows)}/{len(rows)} traced right"
            )
    rows = ctx.tracebacks
    summary = []
    for kind, routing in sorted({(r["topology"], r["routing"]) for r in rows}):
        got = [r for r in rows if (r["topology"], r["routing"]) == (kind, routing)]
        longest = max(r["hops"] for r in got)
        summary.append(
            {
                "topology": kind,
                "routing": routing,
                "scheme": got[0]["scheme"],
                "tracebacks": len(got),
                "correct": sum(r["correct"] for r in got),
                "packets_needed_max": max(r["packets_needed"] for r in got),
                "longest_path_hops": longest,
                "ppm_expected_packets": savage_expected_packets(max(longest, 1)),
                **emulator_columns(got[0]),
            }
        )
    section = Section(
        "4a",
        "Traceback on the fabric: accuracy and packets needed (seed 000 Tables 2-3, Fig. 6)",
        "Port marking (fat trees) and DDPM (mesh, torus, hypercube; robust to adaptive routing) identify "
        "the true source of a spoofed packet from one packet.",
    )
    section.csvs = [ctx.write_csv("4a_tracebacks", rows), ctx.write_csv("4a_traceback_summary", summary)]
    section.tables.append(
        Table(
            "Spoofed invalid-P_Key floods traced by the SM from the victim's trap (claiming another host)",
            [
                "topology",
                "routing",
                "scheme",
                "accuracy",
                "packets needed",
                "paper",
                "PPM would need (Savage bound)",
                BUSIEST_HEADER,
                DROPS_HEADER,
            ],
            [
                [
                    s["topology"],
                    s["routing"],
                    s["scheme"],
                    f"{s['correct']}/{s['tracebacks']}",
                    str(s["packets_needed_max"]),
                    "100 %, 1 packet",
                    f"about {s['ppm_expected_packets']:.0f} ({s['longest_path_hops']} hops)",
                    busiest_cell(s),
                    str(s["switch_drops"]),
                ]
                for s in summary
            ],
        )
    )
    section.figures = [plot_traceback(ctx, summary)]
    section.notes = [f"Could not run: {failure}" for failure in failures]
    section.notes += fidelity_notes(summary, "topologies and routings (each over its whole run)")
    section.checks = {
        "every topology and routing launched and traced": not failures,
        "traceback accuracy is 100 %": bool(rows) and all(r["correct"] for r in rows),
        "one packet suffices": all(r["packets_needed"] == 1 for r in rows),
    }
    return section


def plot_traceback(ctx: Context, summary: list[dict[str, Any]]) -> str:
    fig, ax = new_figure(
        "Traceback on the fabric: packets needed, ours vs probabilistic marking",
        "topology / routing",
        "packets to identify the source (log scale)",
    )
    labels = [f"{s['topology']}\n{s['routing']}" for s in summary]
    xs = range(len(summary))
    ax.bar([x - 0.2 for x in xs], [s["packets_needed_max"] for s in summary], 0.4, label="ours (measured)")
    ax.bar(
        [x + 0.2 for x in xs],
        [s["ppm_expected_packets"] for s in summary],
        0.4,
        color="tab:red",
        label="PPM, Savage et al. bound, p=1/25",
    )
    for x, s in zip(xs, summary, strict=True):
        ax.annotate(f"{s['correct']}/{s['tracebacks']} right", (x - 0.2, 1.15), ha="center", fontsize=8)
    ax.set_xticks(list(xs), labels)
    ax.set_yscale("log")
    ax.set_ylim(0.8, 20 * max(s["ppm_expected_packets"] for s in summary))
    ax.legend(fontsize=8, loc="upper left")
    return ctx.save(fig, "4a_traceback")
