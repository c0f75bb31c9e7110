"""What a fabric's processes cost: proportional set size (PSS) and CPU time, read from /proc.

PSS is what ``smem`` sums: each page a process maps counts 1/n to each of the n processes that map it, so
the PSS of every process of a fabric adds up to the memory the fabric really takes (shared libraries and
pages shared copy-on-write with a zygote counted once in all). It comes from ``/proc/PID/smaps_rollup``;
the kernel's packet rings a switch maps count too.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")
TICKS = os.sysconf("SC_CLK_TCK")
KINDS = ("switch", "agent", "zygote", "sm", "shell", "other")


def _stat_fields(pid: int) -> list[str]:
    """The fields of /proc/PID/stat after the command name (its field 3 is index 0); [] if gone."""
    try:
        return (PROC / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return []


def descendants(root: int) -> list[int]:
    """Every live process below ``root`` (children, their children, ...), from each process's parent."""
    children: dict[int, list[int]] = {}
    for entry in PROC.iterdir():
        if entry.name.isdigit():
            fields = _stat_fields(int(entry.name))
            if fields and fields[0] != "Z":
                children.setdefault(int(fields[1]), []).append(int(entry.name))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def pss_kib(pid: int) -> int:
    """The process's PSS in KiB (0 if it is gone)."""
    try:
        text = (PROC / str(pid) / "smaps_rollup").read_text()
    except OSError:
        return 0
    for line in text.splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1])
    return 0


def cpu_seconds(pid: int) -> float:
    """User and system CPU time the process has used so far (0 if it is gone)."""
    fields = _stat_fields(pid)
    return (int(fields[11]) + int(fields[12])) / TICKS if fields else 0.0


def kind_of(pid: int) -> str:
    """What the process is in a fabric: switch, agent, zygote, sm, shell (Mininet's node shells), other."""
    try:
        argv = (PROC / str(pid) / "cmdline").read_bytes().split(b"\0")
        comm = (PROC / str(pid) / "comm").read_text().strip()
    except OSError:
        return "other"
    words = [a.decode(errors="replace") for a in argv]
    text = " ".join(words)
    if comm.startswith("sw ") or "--device-id" in words:
        return "switch"
    if comm.startswith("host "):
        return "agent"
    if comm == "sm":  # forked from the zygote: its command line is the zygote's
        return "sm"
    if "topologies.zygote" in text:  # its command line names the agent's module too (--preload)
        return "zygote"
    if "ibsec.agent.daemon" in text:
        return "agent"
    if "ibsm.cli" in text:
        return "sm"
    if comm in ("bash", "mnexec") or text.startswith("mnexec"):
        return "shell"
    return "other"


@dataclass(frozen=True)
class Footprint:
    """PSS (KiB) and process count by kind, over a set of processes at one moment."""

    pss: Counter[str]
    count: Counter[str]

    @classmethod
    def of(cls, pids: Iterable[int]) -> Footprint:
        pss: Counter[str] = Counter()
        count: Counter[str] = Counter()
        for pid in pids:
            kind, size = kind_of(pid), pss_kib(pid)
            if size:
                pss[kind] += size
                count[kind] += 1
        return cls(pss, count)

    def total_mib(self, kinds: Iterable[str] = KINDS) -> float:
        return sum(self.pss[k] for k in kinds) / 1024


def cpu_total(pids: Iterable[int]) -> float:
    return sum(cpu_seconds(pid) for pid in pids)


def mem_available_mib() -> float:
    for line in (PROC / "meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) / 1024
    return 0.0
