"""What the scenario tests do on a launched fabric: attacks as the real tools, answers from the SM's events,
the agents' counters and the switches' pcaps. No log line is ever read."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ibsec import addressing, names, rocev2
from ibsec.polling import poll_until
from scapy.utils import RawPcapReader

from topologies import run, topofile

PCAP_HEADER = 24
PCAP_RECORD_HEADER = 16


def tool(name: str, *args: str) -> list[str]:
    """The command line of attack tool ``name`` (``python -m ibsec.attacks.<name>``)."""
    return [sys.executable, "-m", f"ibsec.attacks.{name}", *args]


def flood(fabric_run: run.FabricRun, attacker: str, victim: str, pkey: int, *, claimed: str | None = None,
          count: int = 3, rate: float = 0, seconds: float = 10) -> subprocess.Popen[bytes]:
    """The invalid-P_Key flood tool in ``attacker``'s namespace (spoofing ``claimed``'s GID if given)."""
    assert fabric_run.net is not None
    args = ["--iface", fabric_run.net.host_iface(attacker), "--dst-gid", fabric_run.gid(victim),
            "--pkey", hex(pkey), "--count", str(count), "--rate", str(rate), "--duration", str(seconds)]
    if claimed:
        args += ["--src-gid", fabric_run.gid(claimed)]
    return fabric_run.spawn(attacker, tool("pkey_flood", *args), f"flood-{attacker}.log")


def until(check: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    """Poll ``check`` until it holds (frames cross several software switches on a machine that may be
    loaded: no fixed sleeps, and a deadline far beyond what the effect takes)."""
    if not poll_until(check, timeout, interval=0.1):
        raise AssertionError(f"{what}: not within {timeout} s")


def flood_summary(fabric_run: run.FabricRun, attacker: str) -> dict[str, Any]:
    """The summary line of the attacker's last finished flood (frames sent, seconds, rate)."""
    lines = (fabric_run.run_dir / "logs" / f"flood-{attacker}.log").read_text().splitlines()
    summary: dict[str, Any] = json.loads(next(line for line in reversed(lines) if line.startswith("{")))
    return summary


def wait_packet_socket(proc: subprocess.Popen[bytes], timeout: float = 30) -> None:
    """Until ``proc`` holds an AF_PACKET socket: a sniffer is past its imports and sees frames."""

    def holds_one() -> bool:
        assert proc.poll() is None, f"process {proc.pid} exited with {proc.returncode}"
        try:
            rows = Path(f"/proc/{proc.pid}/net/packet").read_text().splitlines()[1:]
            inodes = {f"socket:[{row.split()[-1]}]" for row in rows}
            fds = {os.readlink(fd) for fd in Path(f"/proc/{proc.pid}/fd").glob("*")}
        except OSError:
            return False
        return bool(fds & inodes)

    if not poll_until(holds_one, timeout, interval=0.1):
        raise AssertionError(f"process {proc.pid} opened no packet socket within {timeout} s")


def wait_all(procs: Iterable[subprocess.Popen[bytes]], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    for proc in procs:
        assert proc.wait(timeout=max(1.0, deadline - time.monotonic())) == 0


def events_of(fabric_run: run.FabricRun, kind: str, **match: Any) -> list[dict[str, Any]]:
    return [e for e in fabric_run.events()
            if e.get("event") == kind and all(e.get(k) == v for k, v in match.items())]


def wait_events(fabric_run: run.FabricRun, kind: str, keys: set[Any], field: str, timeout: float
                ) -> dict[Any, dict[str, Any]]:
    """The first ``kind`` event for each value of ``field`` in ``keys`` (all of them, or a timeout)."""
    found: dict[Any, dict[str, Any]] = {}

    def all_found() -> bool:
        for event in events_of(fabric_run, kind):
            if event.get(field) in keys:
                found.setdefault(event[field], event)
        return set(found) == keys

    if not poll_until(all_found, timeout, interval=0.2):
        raise AssertionError(f"no {kind} event for {sorted(map(str, keys - set(found)))} within {timeout} s")
    return found


def traceback_of_every_host(fabric_run: run.FabricRun, victims: tuple[str, str], pkey_base: int = 0x7B00
                            ) -> dict[str, dict[str, Any]]:
    """Every host floods (3 packets, a spoofed source, its own bad P_Key) a victim that is not itself;
    returns each attacker's traceback event."""
    hosts = list(fabric_run.hosts)
    pkeys = {h: pkey_base | i for i, h in enumerate(hosts)}
    procs = []
    for i, attacker in enumerate(hosts):
        victim = victims[0] if attacker != victims[0] else victims[1]
        claimed = next(h for h in hosts[i + 1:] + hosts[:i] if h not in (attacker, victim))
        procs.append(flood(fabric_run, attacker, victim, pkeys[attacker], claimed=claimed))
    wait_all(procs)
    by_key = wait_events(fabric_run, "traceback", {f"{k:#06x}" for k in pkeys.values()}, "bad_key", 60)
    return {h: by_key[f"{pkeys[h]:#06x}"] for h in hosts}


def rc_pair(fabric_run: run.FabricRun, a: str, b: str, part: topofile.PartitionSpec,
            scope: str = "session", echo: bool = True) -> tuple[int, int]:
    """An RC connection a -> b in ``part`` (its security mode); b echoes (perf) or keeps what it receives
    (``echo=False``, for recv). (a's QPN, b's QPN)."""
    qp = fabric_run.agents[a].call("connect", remote_gid=fabric_run.gid(b), service="RC", pkey=part.full_pkey,
                                   mode=names.SECURITY_MODES.index(part.security), scope=scope)
    if echo:
        fabric_run.agents[b].call("serve", qpn=qp["remote_qpn"])
    return int(qp["qpn"]), int(qp["remote_qpn"])


def roce_frames(pcap: Path) -> list[tuple[float, bytes]]:
    """(capture time, frame) of every RoCEv2 frame in a pcap (none if the switch has written nothing yet)."""
    out: list[tuple[float, bytes]] = []
    if not pcap.exists() or pcap.stat().st_size < PCAP_HEADER:
        return out
    for frame, meta in RawPcapReader(str(pcap)):
        if len(frame) > rocev2.PKEY_AT.stop and rocev2.to_rocev2_port(frame):
            out.append((meta.sec + meta.usec / 1e6, bytes(frame)))
    return out


def snapshot(pcap: Path, copy: Path) -> Path:
    """A copy of a capture a switch may still be writing, cut after its last complete record (a pcap in the
    switches' byte order)."""
    data = pcap.read_bytes()
    end = PCAP_HEADER
    while end + PCAP_RECORD_HEADER <= len(data):
        length = int.from_bytes(data[end + 8:end + 12], "little")  # incl_len
        if end + PCAP_RECORD_HEADER + length > len(data):
            break
        end += PCAP_RECORD_HEADER + length
    copy.write_bytes(data[:end])
    return copy


def spoofs_seen(frames: Iterable[dict[str, list[str]]]) -> set[tuple[str, str]]:
    """(claimed host, traced host) of every frame our Wireshark dissector flagged as spoofed."""
    found = set()
    for frame in frames:
        for message in frame["_ws.expert.message"]:
            if message.startswith("claims "):
                claimed, _, rest = message.removeprefix("claims ").partition(", traced to ")
                found.add((claimed, rest.split(" ")[0]))
    return found


def pkey_of(frame: bytes) -> int:
    return int.from_bytes(frame[64:66], "big")


def src_gid(frame: bytes) -> str:
    return str(addressing.parse_gid(frame[rocev2.SRC_GID_AT]))


def dst_mf(frame: bytes) -> int:
    return addressing.mf_get(frame[rocev2.DST_GID_AT])
