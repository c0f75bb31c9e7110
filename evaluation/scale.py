"""``make scale``: torus and fat-tree fabrics of increasing size on this machine, each launched with its SM
and one agent per host, one spoofed attacker traced, and what it all cost.

    python -m evaluation.scale [--fabrics torus,fat-tree] [--max-switches N] [--sizes torus:8x8,fat-tree:4x3]
                               [--out DIR] [--doc docs/EVALUATION.md] [--plot docs/img/scale.png]

Per size, one row: seconds to start (every switch answers on P4Runtime and every agent on its control
socket), to ready (the SM's fabric-ready event), key distribution (fabric-ready to the SM's last
key-delivered event), the trace (the SM's traceback names the host that really sent the flood), PSS per
node from /proc/PID/smaps_rollup over every process the run started (per switch-and-host pair: twice
that), the whole fabric's idle CPU over a quiet window, and teardown (until no process of the run is left).
A size is skipped, with the reason, when the memory the previous size took per node says it would not fit.

These are benchmarks: the numbers go to a table, a CSV, docs/img/scale.png and section 7 of
docs/EVALUATION.md; the tests only check the mechanisms (evaluation/tests/test_scale.py).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ibsec.polling import poll_until

from topologies import demo, fabrics, network, run

from . import key_bench, procstats, report
from .common import PROFILES, Context, Section, Table, plt

REPO = Path(__file__).resolve().parent.parent
KEY = "7"
TITLE = "Fabric scale: hundreds of switches on one machine (issue 17)"
IDLE_WINDOW = 10.0  # seconds of quiet over which idle CPU is measured
KEYS_TIMEOUT = 600.0  # a bound, not a claim: key distribution is measured, the bench only stops waiting
TRACE_TIMEOUT = 120.0
FLOOD = ("--rate", "100", "--duration", "3", "--count", "300")
FIT_MARGIN = 0.8  # a size must fit in this share of the memory available when it starts
FIRST_GUESS_MIB = 60.0  # PSS per node assumed before any size is measured (what it took before the zygote)
TARGETS = {"ready_s": (120.0, "ready <= 120 s"), "keys_s": (10.0, "keys <= 10 s after ready"),
           "teardown_s": (10.0, "teardown <= 10 s"),
           "mib_per_pair": (40e6 / 2**20, "<= 40 MB (38.1 MiB) PSS per switch-and-host pair")}
"""Issue 17's bounds for a 16x16 torus (column: bound, label), held against the biggest size that ran."""
KEYS_LIMIT = ("keys go in batches of up to seven per MAD with a window of 64 MADs outstanding, but every "
              "batch still crosses a P4Runtime PacketOut, a Python software switch and a Python agent")
KEY_CAS = 1024
KEY_BOUND = 10.0  # issue 17: the 1,024-CA distribution within 10x of the paper's second
LADDER = ("torus:4x4", "fat-tree:4x2", "torus:8x8", "fat-tree:4x3", "torus:12x12", "torus:16x16",
          "fat-tree:4x4")


@dataclass(frozen=True)
class Size:
    """One fabric of the ladder: ``torus:AxB`` or ``fat-tree:KxL`` (k ports up and down, L levels)."""

    spec: str

    @property
    def kind(self) -> str:
        return self.spec.split(":", 1)[0]

    def numbers(self) -> tuple[int, ...]:
        return tuple(int(n) for n in self.spec.split(":", 1)[1].split("x"))

    def options(self, run_dir: Path) -> run.RunOptions:
        if self.kind == "fat-tree":
            k, levels = self.numbers()
            return run.RunOptions(fabric="fat-tree", k=k, levels=levels, run_dir=run_dir)
        return run.RunOptions(fabric=self.kind, dims=self.numbers(), run_dir=run_dir)

    def fabric(self) -> fabrics.Fabric:
        return self.options(Path()).build_fabric()


def parse_size(text: str) -> Size:
    size = Size(text)
    try:
        if size.kind not in ("torus", "mesh", "fat-tree") or not size.numbers():
            raise ValueError(text)
        size.fabric()
    except ValueError:
        raise argparse.ArgumentTypeError(f"a size looks like torus:8x8 or fat-tree:4x3, not {text!r}"
                                         ) from None
    return size


# ---- one size ----------------------------------------------------------------------------------------------


def fabric_pids() -> list[int]:
    """Every process this benchmark has started and that is still alive (the fabric's, all of them)."""
    return procstats.descendants(os.getpid())


def keys_done(fabric_run: run.FabricRun, timeout: float) -> dict[str, Any]:
    """Wait until the SM has no key delivery outstanding; the deliveries' account from its events."""
    poll_until(lambda: not fabric_run.sm_call("status")["keys_outstanding"], timeout, interval=0.5)
    events = fabric_run.events()
    ready = next(e for e in events if e.get("event") == "fabric-ready")
    delivered = [e for e in events if e.get("event") == "key-delivered"]
    failed = [e for e in events if e.get("event") in ("key-delivery-failed", "key-rejected")]
    last = max((float(e["mono"]) for e in delivered), default=float(ready["mono"]))
    return {"keys_delivered": len(delivered), "keys_failed": len(failed),
            "keys_sent": sum(1 for e in events if e.get("event") == "key-sent"),
            "keys_s": round(last - float(ready["mono"]), 2),
            "keys_complete": not fabric_run.sm_call("status")["keys_outstanding"]}


def idle_cpu(window: float) -> float:
    """CPU the whole fabric uses while nothing happens, in cores (1.0 = one core busy)."""
    pids = fabric_pids()
    before = procstats.cpu_total(pids)
    time.sleep(window)
    return (procstats.cpu_total(pids) - before) / window


def memory(fabric_run: run.FabricRun) -> dict[str, Any]:
    foot = procstats.Footprint.of(fabric_pids())
    nodes = len(fabric_run.fabric.switches()) + len(fabric_run.hosts)
    fabric_mib = foot.total_mib([k for k in procstats.KINDS if k != "sm"])
    row: dict[str, Any] = {f"{kind}_mib": round(foot.pss[kind] / 1024, 1) for kind in procstats.KINDS}
    row.update(mib_per_node=round(fabric_mib / nodes, 1), mib_per_pair=round(2 * fabric_mib / nodes, 1),
               processes=sum(foot.count.values()))
    return row


def trace(fabric_run: run.FabricRun) -> dict[str, Any]:
    """One spoofed invalid-P_Key flood (bounded) from the host farthest from the victim; the SM's trace."""
    roles = demo.pick_roles(fabric_run)
    fabric_run.wait_provisioned([roles.victim], timeout=TRACE_TIMEOUT)
    assert fabric_run.net is not None
    argv = [sys.executable, "-m", "ibsec.attacks.pkey_flood",
            "--iface", fabric_run.net.host_iface(roles.attacker),
            "--dst-gid", fabric_run.gid(roles.victim), "--src-gid", fabric_run.gid(roles.claimed),
            "--pkey", hex(demo.BAD_PKEY), *FLOOD]
    flood = fabric_run.spawn(roles.attacker, argv, f"attack-{roles.attacker}.log")
    found = fabric_run.wait_event(lambda e: e.get("event") == "traceback", TRACE_TIMEOUT, "the traceback")
    flood.wait(timeout=TRACE_TIMEOUT)
    return {"attacker": roles.attacker, "claimed": roles.claimed, "traced": found.get("traced_host"),
            "trace_right": found.get("traced_host") == roles.attacker}


def timings(fabric_run: run.FabricRun) -> dict[str, float]:
    """Start (switches and agents up) and ready (the SM's fabric-ready), as far as the launch got."""
    t = fabric_run.timings
    row = {"nodes_s": t["nodes"]} if "nodes" in t else {}
    if "agents" in t:
        row["start_s"] = round(max(t["switches"], t["agents"]), 1)
    if "ready" in t:
        row["ready_s"] = round(t["ready"], 1)
    return row


def measure(size: Size, out: Path, say: Callable[[str], None]) -> dict[str, Any]:
    """Launch ``size``, measure it, tear it down; one row (``error`` says what failed, if anything did)."""
    fab = size.fabric()
    row: dict[str, Any] = {"fabric": fab.name, "switches": len(fab.switches()), "hosts": len(fab.hosts())}
    fabric_run = run.FabricRun(size.options(out / fab.name), say=lambda line: say(f"{fab.name} {line}"))
    launched = time.monotonic()
    try:
        try:
            fabric_run.start()
        finally:
            row.update(timings(fabric_run))
        row.update(keys_done(fabric_run, KEYS_TIMEOUT))
        say(f"{fab.name} keys: {row['keys_delivered']} delivered in {row['keys_s']} s after ready")
        row.update(memory(fabric_run))
        row["idle_cpu_cores"] = round(idle_cpu(IDLE_WINDOW), 3)
        row.update(trace(fabric_run))
        say(f"{fab.name} trace: {row['traced']} (attacker {row['attacker']})")
    except (network.FabricError, TimeoutError, AssertionError, OSError) as err:
        row["error"] = f"{type(err).__name__}: {err}"[:300]
        say(f"{fab.name} FAILED after {time.monotonic() - launched:.0f} s: {row['error']}")
    finally:
        stopping = time.monotonic()
        prefix = f"{fabric_run.net.tag}s" if fabric_run.net else None
        fabric_run.stop()
        row["teardown_s"] = round(time.monotonic() - stopping, 1)
        left = fabric_pids() + (list(network.our_links(prefix)) if prefix else [])
        row["left_after_teardown"] = len(left)
    return row


def fits(size: Size, mib_per_node: float) -> str | None:
    """Why ``size`` would not fit in memory now (None if it would)."""
    fab = size.fabric()
    need = mib_per_node * (len(fab.switches()) + len(fab.hosts()))
    have = procstats.mem_available_mib() * FIT_MARGIN
    if need > have:
        return (f"needs about {need / 1024:.1f} GiB at {mib_per_node:.0f} MiB per node, "
                f"{have / 1024:.1f} GiB free")
    return None


# ---- the table, the plot, the report section -------------------------------------------------------------

COLUMNS: tuple[tuple[str, str], ...] = (
    ("fabric", "fabric"), ("switches", "switches"), ("hosts", "hosts"), ("start_s", "start s"),
    ("ready_s", "ready s"), ("keys_s", "keys s after ready"), ("keys_delivered", "keys acked"),
    ("trace_right", "attacker traced"), ("mib_per_pair", "MiB PSS per pair"),
    ("idle_cpu_cores", "idle CPU (cores)"), ("teardown_s", "teardown s"),
    ("left_after_teardown", "left after teardown"),
)


def cell(row: dict[str, Any], key: str) -> str:
    if "skipped" in row and key not in ("fabric", "switches", "hosts"):
        return "skipped" if key == "start_s" else ""
    value = row.get(key)
    if value is None:
        return "failed" if key in ("start_s", "ready_s") and row.get("error") else ""
    if isinstance(value, bool):
        return "yes" if value else "NO"
    return str(value)


def table(rows: Sequence[dict[str, Any]]) -> Table:
    return Table("one row per fabric size (python -m evaluation.scale)", [h for _, h in COLUMNS],
                 [[cell(r, k) for k, _ in COLUMNS] for r in rows])


def print_table(rows: Sequence[dict[str, Any]]) -> None:
    t = table(rows)
    widths = [max(len(h), *(len(r[i]) for r in t.rows)) for i, h in enumerate(t.headers)]
    for line in (t.headers, *t.rows):
        print("  ".join(c.rjust(w) for c, w in zip(line, widths, strict=True)), flush=True)
    for r in rows:
        if r.get("error") or r.get("skipped"):
            print(f"{r['fabric']}: {r.get('error') or r.get('skipped')}")


def key_table(bench: key_bench.KeyBench) -> Table:
    """The 1,024-CA key distribution (``evaluation.key_bench``): seconds per phase against the paper's one."""
    return Table(f"{bench.cas}-CA key distribution, every pairwise key (python -m evaluation.key_bench): "
                 f"{bench.keys} keys in {bench.mads} MADs, {bench.acked} ACKed",
                 ["phase", "wall s", "CPU s", "x paper (1 s), by CPU"],
                 [[name, f"{cost.wall:.2f}", f"{cost.cpu:.2f}", f"{cost.cpu / key_bench.PAPER_CLAIM_S:.1f}"]
                  for name, cost in bench.rows()])


def plot(rows: Sequence[dict[str, Any]], path: Path) -> None:
    """Seconds (ready, keys after ready, teardown) and PSS per pair against switches, per fabric kind."""
    fig, (times, mem) = plt.subplots(1, 2, figsize=(11, 4.5))
    done = [r for r in rows if r.get("ready_s") is not None and "mib_per_pair" in r]
    for kind, marker in (("torus", "o"), ("fattree", "s")):
        mine = sorted((r for r in done if r["fabric"].startswith(kind)), key=lambda r: r["switches"])
        if not mine:
            continue
        x = [r["switches"] for r in mine]
        for key, label in (("ready_s", "ready"), ("keys_s", "keys after ready"), ("teardown_s", "teardown")):
            times.plot(x, [r.get(key) or 0 for r in mine], marker=marker, label=f"{kind}: {label}")
        mem.plot(x, [r["mib_per_pair"] for r in mine], marker=marker, label=kind)
    times.set(title="seconds", xlabel="switches")
    mem.set(title="PSS per switch-and-host pair (MiB)", xlabel="switches")
    for ax in (times, mem):
        ax.grid(True, alpha=0.3)
        if ax.lines:
            ax.legend(fontsize=8)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def section(rows: Sequence[dict[str, Any]], plot_path: Path, command: str,
            keys: key_bench.KeyBench | None = None) -> Section:
    launched = [r for r in rows if r.get("ready_s") is not None]
    biggest = max(launched, key=lambda r: r["switches"], default=None)
    checks: dict[str, bool] = {}
    limits: dict[str, str] = {}
    if biggest is not None:
        name = biggest["fabric"]
        checks = {f"{name}: the attacker traced": bool(biggest.get("trace_right")),
                  f"{name}: every key acknowledged": bool(biggest.get("keys_complete"))
                  and not biggest.get("keys_failed"),
                  f"{name}: nothing left after teardown": biggest.get("left_after_teardown") == 0}
        for key, (bound, what) in TARGETS.items():
            value = biggest.get(key)
            checks[f"{name}: {what} (issue 17)"] = value is not None and float(value) <= bound
        keys_check = f"{name}: {TARGETS['keys_s'][1]} (issue 17)"
        limits = {} if checks[keys_check] else {keys_check: KEYS_LIMIT}
    tables = [table(rows)]
    if keys is not None:
        tables.append(key_table(keys))
        checks[f"{keys.cas} CAs: every key batch ACKed"] = keys.acked == keys.mads
        # the paper's claim is the SM's: generate and send; the CAs' side is in the table beside it
        checks[f"{keys.cas} CAs: the SM generates and sends every pairwise key within {KEY_BOUND:.0f}x "
               f"the paper's second of CPU (issue 17)"] = keys.sm.cpu <= KEY_BOUND * key_bench.PAPER_CLAIM_S
    rel = os.path.relpath(plot_path, REPO / "docs")
    return Section(KEY, TITLE, "Lee & Kim evaluate marking on fabrics of hundreds to thousands of nodes and "
                   "claim the SM generates and sends every pairwise key of a 1,024-CA partition in about a "
                   "second; issue 17 asks for a 16x16 torus on this machine: ready <= 120 s, keys <= 10 s "
                   "after ready, teardown <= 10 s, <= 40 MB PSS per switch-and-host pair, and the 1,024-CA "
                   "distribution within 10x of the paper's second.",
                   tables=tables, notes=[f"![fabric scale]({rel})", f"command: `{command}`"],
                   checks=checks, limits=limits)


# ---- main --------------------------------------------------------------------------------------------------


def run_ladder(sizes: Sequence[Size], out: Path, say: Callable[[str], None],
               per_node: float = FIRST_GUESS_MIB) -> list[dict[str, Any]]:
    """Each size in turn; one that would not fit at the PSS per node the last one took is skipped."""
    rows: list[dict[str, Any]] = []
    for size in sizes:
        fab = size.fabric()
        why = fits(size, per_node)
        if why:
            say(f"{fab.name}: skipped, {why}")
            rows.append({"fabric": fab.name, "switches": len(fab.switches()), "hosts": len(fab.hosts()),
                         "skipped": why})
            continue
        row = measure(size, out, say)
        rows.append(row)
        per_node = row.get("mib_per_node") or per_node
        print_table(rows)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evaluation.scale", description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=lambda t: [parse_size(s) for s in t.split(",")],
                        default=[Size(s) for s in LADDER],
                        help=f"fabrics in order (default {','.join(LADDER)})")
    parser.add_argument("--max-switches", type=int, help="leave out sizes with more switches than this")
    parser.add_argument("--mib-per-node", type=float, default=FIRST_GUESS_MIB,
                        help="PSS per node to expect of the first size (then: what the last size took)")
    parser.add_argument("--out", type=Path, help="results directory (default runs/scale-<UTC time>)")
    parser.add_argument("--doc", type=lambda text: Path(text) if text else None,
                        default=REPO / "docs" / "EVALUATION.md",
                        help="report whose section 7 is replaced (an empty string: none)")
    parser.add_argument("--plot", type=Path, default=REPO / "docs" / "img" / "scale.png")
    parser.add_argument("--key-cas", type=int, default=KEY_CAS,
                        help=f"CAs of the key distribution bench after the fabrics (0: none; {KEY_CAS})")
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        print("python -m evaluation.scale: needs root (Mininet fabrics)", file=sys.stderr)
        return 2
    sizes = [s for s in args.sizes
             if args.max_switches is None or len(s.fabric().switches()) <= args.max_switches]
    out = (args.out or REPO / "runs" / f"scale-{datetime.now(UTC):%Y%m%dT%H%M%SZ}").resolve()
    out.mkdir(parents=True, exist_ok=True)
    ctx = Context(PROFILES["quick"], out)
    rows = run_ladder(sizes, out, lambda line: ctx.progress("scale", line), args.mib_per_node)
    keys = key_bench.run(args.key_cas) if args.key_cas > 0 else None
    columns = list(dict.fromkeys(key for row in rows for key in row))
    ctx.write_csv("scale", [{key: row.get(key, "") for key in columns} for row in rows])
    plot(rows, args.plot)
    command = " ".join(["python -m evaluation.scale", *(sys.argv[1:] if argv is None else argv)])
    if args.doc is not None:
        report.splice(args.doc, section(rows, args.plot, command, keys), out, REPO)
    print_table(rows)
    if keys is not None:
        print("\n".join(key_bench.report(keys)))
    return 0 if all(r.get("trace_right") for r in rows if "skipped" not in r) else 1


if __name__ == "__main__":
    sys.exit(main())
