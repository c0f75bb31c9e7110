"""Benchmark: what one P4Runtime write or read of a table entry costs as the table fills up.

    python -m p4switch.tests.runtime.bench [--entries N] [--ops K] [--seconds S]

A p4switch P4Runtime server runs in this process (the runtime tests' in-process server: a real gRPC
server on 127.0.0.1, a client on the raw stub) with p4switch/tests/programs/table_sizes.p4. For each of
its tables (exact key with a direct counter; ternary key with priorities; one-shot action-selector entries)
entries are inserted one Write at a time until the table holds each size of ``--sizes`` (up to
``--entries``, 10,000 by default); at each size ``--ops`` entries spread over the table are modified, read
back (one Read by match key), deleted and inserted again, one RPC each, and the mean time per operation is
printed. A write or read whose cost does not depend on the table's size gives the same figure at every
size; one that scans the table grows with it (the last column is the ratio largest/smallest size).

Every loop is bounded in operations and, per table, in seconds (``--seconds``): a table that runs out of
time prints what it measured and "-" for the rest."""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from finsy.proto import p4r

from p4switch.engine.api import Exact, Match, Ternary
from p4switch.tests.runtime import harness
from p4switch.tests.runtime.harness import update

PROGRAM = harness.SHARED_PROGRAMS / "table_sizes.p4"
CONTROL = "SizesIngress."
MAC_BASE = 0x02_00_00_00_00_00
Update = p4r.Update


@dataclass
class Step:
    """One operation at one table size: how many ran, the wall-clock time they took and the CPU time
    this process (client and server) spent on them, which the rest of a busy machine hardly changes."""

    count: int = 0
    seconds: float = 0.0
    cpu: float = 0.0

    def micros(self, cpu: bool = False) -> float:
        return (self.cpu if cpu else self.seconds) / self.count * 1e6 if self.count else float("nan")


@dataclass
class TableBench:
    """How to write one table's entry ``i``: its key, a first and a second action (for modify)."""

    name: str
    table: str
    key: Callable[[harness.Builder, int], p4r.TableEntry]
    set_action: Callable[[harness.Builder, p4r.TableEntry, int, int], None]
    extra: dict[str, Callable[[p4r.TableEntry, int], None]] = field(default_factory=dict)
    """further kinds of modify, by label: they change the keyed entry without an action"""

    def entry(self, b: harness.Builder, i: int, version: int = 0) -> p4r.TableEntry:
        msg = self.key(b, i)
        self.set_action(b, msg, i, version)
        return msg


def _port(i: int, version: int) -> int:
    return 1 + (i + 7 * version) % 500


def _forward(action: str) -> Callable[[harness.Builder, p4r.TableEntry, int, int], None]:
    def set_action(b: harness.Builder, msg: p4r.TableEntry, i: int, version: int) -> None:
        msg.action.action.CopyFrom(b.action(CONTROL + action, port=_port(i, version)))
    return set_action


def _action_set(b: harness.Builder, msg: p4r.TableEntry, i: int, version: int) -> None:
    action = msg.action.action_profile_action_set.action_profile_actions.add(weight=1)
    action.action.CopyFrom(b.action(CONTROL + "forward", port=_port(i, version)))


def _counter_only(msg: p4r.TableEntry, i: int) -> None:
    msg.counter_data.byte_count, msg.counter_data.packet_count = 64 * i, i


def _by_mac(b: harness.Builder, i: int) -> p4r.TableEntry:
    return b.table_entry(CONTROL + "by_mac", {"hdr.ethernet.dst_addr": Exact(MAC_BASE + i)})


def _by_type(b: harness.Builder, i: int) -> p4r.TableEntry:
    match: dict[str, Match] = {"hdr.ethernet.ether_type": Ternary(0x88B5, 0xFFFF),
                               "hdr.ethernet.src_addr": Ternary(MAC_BASE + i, (1 << 48) - 1)}
    return b.table_entry(CONTROL + "by_type", match, priority=1 + i % 1000)


def _by_flow(b: harness.Builder, i: int) -> p4r.TableEntry:
    return b.table_entry(CONTROL + "by_flow", {"hdr.ethernet.src_addr": Exact(MAC_BASE + i)})


TABLES = (
    TableBench("exact", CONTROL + "by_mac", _by_mac, _forward("forward_counted"),
               {"modify counter": _counter_only}),
    TableBench("ternary", CONTROL + "by_type", _by_type, _forward("forward")),
    TableBench("one-shot", CONTROL + "by_flow", _by_flow, _action_set),
)


class Runner:
    """Times single-entry RPCs against one client, within a deadline."""

    def __init__(self, client: harness.StreamClient, builder: harness.Builder, deadline: float) -> None:
        self.client, self.b, self.deadline = client, builder, deadline

    def timed(self, step: Step, calls: Iterator[Callable[[], object]]) -> bool:
        """Run and time each call; False when the deadline passed first."""
        for call in calls:
            if time.monotonic() > self.deadline:
                return False
            start, cpu_start = time.perf_counter(), time.process_time()
            call()
            step.seconds += time.perf_counter() - start
            step.cpu += time.process_time() - cpu_start
            step.count += 1
        return True

    def write(self, kind: int, msg: p4r.TableEntry) -> Callable[[], object]:
        return lambda: self.client.write(update(kind, table_entry=msg))

    def read(self, msg: p4r.TableEntry) -> Callable[[], object]:
        def call() -> None:
            found = self.client.read(p4r.Entity(table_entry=msg))
            assert len(found) == 1, f"read of one entry returned {len(found)}"
        return call


def sample(size: int, ops: int) -> list[int]:
    """``ops`` entry numbers spread evenly over the ``size`` entries of the table (all when fewer)."""
    count = min(size, ops)
    return [i * size // count for i in range(count)]


def bench_table(runner: Runner, spec: TableBench, sizes: list[int], ops: int
                ) -> dict[str, dict[int, Step]]:
    """Fill ``spec``'s table size by size and time each operation at each size."""
    b = runner.b
    labels = ["insert", "modify", *spec.extra, "read", "delete", "insert again"]
    steps: dict[str, dict[int, Step]] = {label: {} for label in labels}
    filled = 0
    for size in sizes:
        row = {label: steps[label].setdefault(size, Step()) for label in labels}
        ok = runner.timed(row["insert"], (runner.write(Update.INSERT, spec.entry(b, i))
                                          for i in range(filled, size)))
        filled = filled + row["insert"].count
        if not ok:
            break
        chosen = sample(size, ops)
        plan = [("modify", lambda i: runner.write(Update.MODIFY, spec.entry(b, i, version=1)))]
        plan += [(label, _extra_write(runner, spec, fill)) for label, fill in spec.extra.items()]
        plan += [("read", lambda i: runner.read(spec.key(b, i))),
                 ("delete", lambda i: runner.write(Update.DELETE, spec.key(b, i))),
                 ("insert again", lambda i: runner.write(Update.INSERT, spec.entry(b, i)))]
        for label, make in plan:
            if not runner.timed(row[label], (make(i) for i in chosen)):
                return steps
        print(f"  {spec.name}: {size} entries: insert {row['insert'].micros():.0f} us, modify "
              f"{row['modify'].micros():.0f} us, read {row['read'].micros():.0f} us, delete "
              f"{row['delete'].micros():.0f} us", flush=True)
    return steps


def _extra_write(runner: Runner, spec: TableBench, fill: Callable[[p4r.TableEntry, int], None]
                 ) -> Callable[[int], Callable[[], object]]:
    def make(i: int) -> Callable[[], object]:
        msg = spec.key(runner.b, i)
        fill(msg, i)
        return runner.write(Update.MODIFY, msg)
    return make


def report(results: dict[str, dict[str, dict[int, Step]]], sizes: list[int]) -> None:
    for cpu, what in ((False, "wall-clock"), (True, "CPU time of the server and the client (this process)")):
        print(f"\nsummary: microseconds of {what} per operation, one entry per Write or Read RPC, by table "
              "size")
        head = "".join(f"{f'{n} entries':>15s}" for n in sizes)
        print(f"  {'table':10s}{'operation':16s}{head}{'largest/smallest':>19s}")
        for name, steps in results.items():
            for label, by_size in steps.items():
                cells = [by_size.get(n, Step()) for n in sizes]
                text = "".join(f"{c.micros(cpu):15,.0f}" if c.count else f"{'-':>15s}" for c in cells)
                first, last = cells[0].micros(cpu), cells[-1].micros(cpu)
                ratio = f"{last / first:19.1f}" if cells[0].count and cells[-1].count else f"{'-':>19s}"
                print(f"  {name:10s}{label:16s}{text}{ratio}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m p4switch.tests.runtime.bench",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--entries", type=int, default=10_000, help="largest table size (default 10000)")
    parser.add_argument("--sizes", default="100,1000,10000",
                        help="table sizes to measure at, comma-separated (default 100,1000,10000)")
    parser.add_argument("--ops", type=int, default=1000,
                        help="entries modified, read, deleted and inserted again at each size (default 1000)")
    parser.add_argument("--seconds", type=float, default=300.0, help="time limit per table (default 300)")
    args = parser.parse_args(argv)
    sizes = sorted({int(n) for n in args.sizes.split(",") if 0 < int(n) <= args.entries})
    results: dict[str, dict[str, dict[int, Step]]] = {}
    with tempfile.TemporaryDirectory(prefix="p4switch-rtbench-") as tmp:
        program = harness.compile_program(PROGRAM, Path(tmp))
        with harness.in_process_switch() as switch, harness.primary_client(switch.address, program) as client:
            builder = harness.Builder(program)
            for spec in TABLES:
                print(f"{spec.name} table {spec.table}: up to {sizes[-1]} entries, {args.ops} operations "
                      "of each kind per size", flush=True)
                runner = Runner(client, builder, time.monotonic() + args.seconds)
                results[spec.name] = bench_table(runner, spec, sizes, args.ops)
    report(results, sizes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
