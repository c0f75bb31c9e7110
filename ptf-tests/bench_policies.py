"""Benchmark: packets per second through one switch running p4src/main.p4 under each partition filter
policy, and the partition-table lookups each policy makes per packet (seed 000 Table 1, Fig. 8).

Traffic is half host ingress (port 1, host-facing) and half transit (port 3, a fabric link), as at a leaf
switch. Policies: none; DT (valid-list on every port); IF (valid-list on host-facing ports); SIF idle
(no attack: every port off); SIF filtering (invalid-list on the attacked host port). Run as root:
`make bench-dataplane` (TARGET=bmv2 for BMv2).
"""

from __future__ import annotations

import socket
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from p4switch import targets

sys.path.insert(0, str(Path(__file__).parent / "lib"))

import finsy as fy  # noqa: E402
from base_test import table_entry  # noqa: E402
from dataplane_harness import DEVICE_ID, Switch, running_switch, unavailable  # noqa: E402
from finsy.p4entity import P4Entity  # noqa: E402
from finsy.proto import p4r  # noqa: E402
from ibsec_test import build_rc_send, dst_id, gid  # noqa: E402
from p4runtime_client import P4RuntimeClient  # noqa: E402

HOST_PORT, OUT_PORT, FABRIC_PORT = 1, 2, 3
PKEYS = [0xFFFF, *range(0x8001, 0x8011)]
"""The partitions the valid lists hold (17 entries per port)."""
ATTACK_PKEYS = range(0x8100, 0x8108)
PACKETS, RUNS, WINDOW = 1500, 7, 32
RECEIVE_TIMEOUT = 1.0
ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4


class Bench:
    """One switch, its P4Runtime client, and raw sockets on the tester side of its ports."""

    def __init__(self, switch: Switch) -> None:
        self.schema = fy.P4Schema(Path(switch.p4info))
        self.client = P4RuntimeClient(switch.grpc_addr, DEVICE_ID)
        self.client.set_pipeline(self.schema.p4info, switch.device_config.read_bytes(), cookie=1)
        self.senders = {}
        for port in (HOST_PORT, FABRIC_PORT):
            sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
            sock.bind((switch.tester_ifaces[port], 0))
            self.senders[port] = sock
        self.receiver = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        self.receiver.bind((switch.tester_ifaces[OUT_PORT], 0))
        self.receiver.settimeout(RECEIVE_TIMEOUT)
        self.written: list[p4r.Entity] = []

    def insert(self, entity: P4Entity) -> None:
        message = entity.encode(self.schema)
        self.client.write(p4r.Update.INSERT, message)
        self.written.append(message)

    def clear_policy(self) -> None:
        """Delete what the last policy installed."""
        while self.written:
            self.client.write(p4r.Update.DELETE, self.written.pop())

    def table(self, table: str, match: dict[str, int], action: str) -> None:
        self.insert(table_entry(table, match, action))

    def lookups(self) -> int:
        total = 0
        for port in (HOST_PORT, FABRIC_PORT):
            (cell,) = self.client.read(fy.P4CounterEntry("partition_lookups", index=port).encode(self.schema))
            total += int(cell.counter_entry.data.packet_count)
        return total

    def _received(self) -> bool:
        while True:
            try:
                _, address = self.receiver.recvfrom(65535)
            except TimeoutError:
                return False
            if address[2] != PACKET_OUTGOING:
                return True

    def run(self, frames: list[tuple[int, bytes]]) -> tuple[float, int]:
        """Send ``frames`` keeping WINDOW in flight: (packets/s, frames lost)."""
        sent = received = lost = 0
        start = time.perf_counter()
        while received + lost < len(frames):
            while sent < len(frames) and sent - received - lost < WINDOW:
                port, frame = frames[sent]
                self.senders[port].send(frame)
                sent += 1
            if self._received():
                received += 1
            else:
                lost += sent - received - lost
        return received / (time.perf_counter() - start), lost


def program_fabric(bench: Bench) -> None:
    """Port roles and the one route every benchmark packet takes."""
    fabric = [
        table_entry("port_roles_table", {"standard_metadata.ingress_port": HOST_PORT}, "seed_host_mark",
                    {"mf_seed": 0}),
        table_entry("port_roles_table", {"standard_metadata.ingress_port": FABRIC_PORT}, "keep_mark"),
        table_entry("routes_table", {"meta.dst_id": (dst_id(gid(0x20)), 80)}, "forward", {"port": OUT_PORT}),
    ]
    for entity in fabric:
        bench.client.write(p4r.Update.INSERT, entity.encode(bench.schema))


def valid_list(bench: Bench, ports: tuple[int, ...]) -> None:
    for port in ports:
        bench.table("partition_mode_table", {"standard_metadata.ingress_port": port}, "filter_valid_list")
        for pkey in PKEYS:
            bench.table("valid_pkeys", {"standard_metadata.ingress_port": port, "hdr.bth.p_key": pkey},
                        "NoAction")


def sif_filtering(bench: Bench) -> None:
    bench.table("partition_mode_table", {"standard_metadata.ingress_port": HOST_PORT}, "filter_invalid_list")
    for pkey in ATTACK_PKEYS:
        bench.table("invalid_pkeys", {"standard_metadata.ingress_port": HOST_PORT, "hdr.bth.p_key": pkey},
                    "reject_pkey")


POLICIES: dict[str, Callable[[Bench], None]] = {
    "none": lambda bench: None,
    "DT": lambda bench: valid_list(bench, (HOST_PORT, FABRIC_PORT)),
    "IF": lambda bench: valid_list(bench, (HOST_PORT,)),
    "SIF idle": lambda bench: None,
    "SIF filtering": sif_filtering,
}


def traffic() -> list[tuple[int, bytes]]:
    """Legitimate RC SENDs of 128 bytes, alternating host ingress and transit, over the valid P_Keys."""
    return [(HOST_PORT if n % 2 == 0 else FABRIC_PORT,
             bytes(build_rc_send(dst=gid(0x20), pkey=PKEYS[n % len(PKEYS)], psn=n)).ljust(128, b"\0"))
            for n in range(PACKETS)]


def main() -> int:
    target = targets.from_env()
    if reason := unavailable(target):
        print(f"SKIP bench-dataplane: {reason}")
        return 0
    frames = traffic()
    rates: dict[str, list[float]] = {name: [] for name in POLICIES}
    lookups: dict[str, int] = dict.fromkeys(POLICIES, 0)
    lost: dict[str, int] = dict.fromkeys(POLICIES, 0)
    with tempfile.TemporaryDirectory() as workdir, running_switch(
            target, [HOST_PORT, OUT_PORT, FABRIC_PORT], Path(workdir)) as switch:
        bench = Bench(switch)
        program_fabric(bench)
        bench.run(frames)  # warm-up
        for _ in range(RUNS):  # policies interleaved, so drift in machine load hits them alike
            for name, install in POLICIES.items():
                install(bench)
                before = bench.lookups()
                pps, missing = bench.run(frames)
                lookups[name] += bench.lookups() - before
                rates[name].append(pps)
                lost[name] += missing
                bench.clear_policy()
        bench.client.close()
    # ratios per round (each policy against the "none" run of the same round), then the median
    ratios = {name: statistics.median(r / n for r, n in zip(rates[name], rates["none"], strict=True))
              for name in POLICIES}
    results = {name: (statistics.median(rates[name]), lookups[name] / (RUNS * len(frames)), lost[name])
               for name in POLICIES}
    print(f"p4src/main.p4 on {target.name}: {RUNS} rounds of {PACKETS} packets (128 bytes) per policy, "
          f"half host ingress, half transit, window {WINDOW}")
    print(f"{'policy':<14} {'packets/s':>10} {'min-max':>13} {'vs none':>8} {'lookups/pkt':>12} {'lost':>5}")
    for name, (pps, per_packet, missing) in results.items():
        spread = f"{min(rates[name]):.0f}-{max(rates[name]):.0f}"
        print(f"{name:<14} {pps:>10.0f} {spread:>13} {ratios[name]:>8.2f} {per_packet:>12.2f} {missing:>5}")
    if results["SIF idle"][1] != 0:
        print("FAIL: SIF idle made partition-table lookups")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
