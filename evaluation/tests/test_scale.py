"""``make scale``'s mechanisms: memory read from /proc with shared pages counted once, sizes that would not
fit skipped before anything starts, and one small fabric measured end to end (its attacker traced, every
key acknowledged, nothing left after teardown). The numbers themselves are the benchmark's, not asserted."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from evaluation import key_bench, procstats, scale

SHARED_MIB = 64
FORKER = textwrap.dedent(f"""
    import os, time
    block = bytearray(os.urandom({SHARED_MIB} << 20))  # touched: resident in the parent
    for _ in range(2):
        if os.fork() == 0:
            break  # each child keeps the parent's pages, copy-on-write
    os.write(1, f"{{os.getpid()}}\\n".encode())  # one write each: the three lines never mix
    time.sleep(120)
""")


@pytest.fixture
def forker() -> Iterator[tuple[subprocess.Popen[str], list[int]]]:
    """A process holding SHARED_MIB MiB that forked two children sharing them; the three pids."""
    proc = subprocess.Popen([sys.executable, "-c", FORKER], stdout=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        assert proc.stdout is not None
        pids = [int(proc.stdout.readline()) for _ in range(3)]
        yield proc, pids
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


def test_pss_counts_pages_shared_copy_on_write_once(forker: tuple[subprocess.Popen[str], list[int]]) -> None:
    proc, pids = forker
    assert sorted(procstats.descendants(proc.pid)) == sorted(p for p in pids if p != proc.pid)
    rss_kib = [int(line.split()[1]) for pid in pids
               for line in Path(f"/proc/{pid}/status").read_text().splitlines() if line.startswith("VmRSS:")]
    assert all(rss >= SHARED_MIB << 10 for rss in rss_kib)  # each maps the whole block
    total = procstats.Footprint.of(pids).total_mib()
    assert SHARED_MIB <= total < 2 * SHARED_MIB  # PSS: the block once, not three times
    assert procstats.cpu_total(pids) > 0


def test_a_size_that_would_not_fit_is_skipped_before_anything_starts(tmp_path: Path) -> None:
    said: list[str] = []
    sizes = [scale.Size("torus:3x3"), scale.Size("fat-tree:2x2")]
    rows = scale.run_ladder(sizes, tmp_path, said.append, per_node=1e9)
    assert [r["fabric"] for r in rows] == ["torus-3x3", "fattree-k2-l2"]
    assert all("skipped" in r and "ready_s" not in r for r in rows)
    assert len(said) == 2 and all("skipped, needs about" in line for line in said)
    assert scale.table(rows).rows[0][3] == "skipped"
    assert not list(tmp_path.iterdir())  # no run directory: nothing was launched


def test_bad_sizes_are_refused_with_the_form_they_should_have() -> None:
    for text in ("ring:4", "torus:4y4", "fat-tree:"):
        with pytest.raises(Exception, match="looks like torus:8x8"):
            scale.parse_size(text)


@pytest.mark.skipif(os.geteuid() != 0, reason="Mininet fabrics need root")
def test_a_small_fabric_is_measured_end_to_end(tmp_path: Path) -> None:
    said: list[str] = []
    row = scale.measure(scale.Size("fat-tree:2x2"), tmp_path, said.append)
    assert "error" not in row, row.get("error")
    assert row["trace_right"] is True and row["traced"] == row["attacker"]
    assert row["keys_complete"] and row["keys_failed"] == 0 and row["keys_delivered"] > 0
    assert row["left_after_teardown"] == 0
    assert row["processes"] >= row["switches"] + row["hosts"]  # every switch and agent was counted
    assert row["switch_mib"] > 0 and row["agent_mib"] > 0 and row["mib_per_pair"] > 0
    assert row["ready_s"] >= row["start_s"] > 0
    assert any("trace:" in line for line in said)


def test_the_report_holds_the_biggest_size_to_issue_17s_targets(tmp_path: Path) -> None:
    small = {"fabric": "torus-4x4", "switches": 16, "hosts": 16, "ready_s": 500.0}
    big = {"fabric": "torus-8x8", "switches": 64, "hosts": 64, "ready_s": 82.8, "keys_s": 25.4,
           "teardown_s": 4.4, "mib_per_pair": 35.9, "trace_right": True, "keys_complete": True,
           "keys_failed": 0, "left_after_teardown": 0}
    got = scale.section([small, big], tmp_path / "scale.png", "python -m evaluation.scale")
    assert got.checks == {
        "torus-8x8: the attacker traced": True, "torus-8x8: every key acknowledged": True,
        "torus-8x8: nothing left after teardown": True, "torus-8x8: ready <= 120 s (issue 17)": True,
        "torus-8x8: keys <= 10 s after ready (issue 17)": False,
        "torus-8x8: teardown <= 10 s (issue 17)": True,
        "torus-8x8: <= 40 MB (38.1 MiB) PSS per switch-and-host pair (issue 17)": True}
    assert list(got.limits) == ["torus-8x8: keys <= 10 s after ready (issue 17)"]
    assert [row[0] for row in got.tables[0].rows] == ["torus-4x4", "torus-8x8"]


def test_the_report_holds_the_key_bench_to_the_papers_second(tmp_path: Path) -> None:
    cost = key_bench.Cost(wall=3.0, cpu=2.0)
    bench = key_bench.KeyBench(cas=1024, keys=10, mads=4, generate=cost, send=cost, receive=cost,
                                acks=cost, acked=4)
    got = scale.section([], tmp_path / "scale.png", "python -m evaluation.scale", bench)
    assert got.checks == {
        "1024 CAs: every key batch ACKed": True,
        "1024 CAs: the SM generates and sends every pairwise key within 10x the paper's second of CPU "
        "(issue 17)": True}
    keys_table = got.tables[1]
    assert [row[0] for row in keys_table.rows] == [name for name, _ in bench.rows()]
    assert keys_table.rows[2][1:] == ["6.00", "4.00", "4.0"]  # SM: generate + send, wall, CPU, x paper
