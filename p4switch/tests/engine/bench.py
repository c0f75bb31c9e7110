"""In-process throughput of Switch.process(): packets per second for one program and one frame, with no
I/O (the runtime's `make bench` adds the veth numbers). Run as ``python -m p4switch.tests.engine.bench``.

``measure()`` is the helper other benchmarks call; the command line measures (a) the one-table L2
forwarder (p4switch/tests/programs/l2fwd.json) and (b) p4src/main.p4 with the entries of a fat-tree edge
switch, each with 128- and 1024-byte frames, and prints the ratios. Rates are per second of CPU time of
this process (steady on a shared machine); wall-clock rates are printed beside them.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from p4switch.engine import loader
from p4switch.engine.api import ActionCall, Exact, Lpm, Switch, TableEntry

L2FWD = Path(__file__).resolve().parents[1] / "programs" / "l2fwd.json"
MAIN_P4 = Path(__file__).resolve().parents[3] / "p4src" / "main.p4"


@dataclass(frozen=True)
class Result:
    packets: int
    wall_seconds: float
    cpu_seconds: float

    @property
    def pps(self) -> float:
        """Packets per second of CPU time (steadier than wall time on a shared machine)."""
        return self.packets / self.cpu_seconds if self.cpu_seconds else float("inf")

    @property
    def wall_pps(self) -> float:
        return self.packets / self.wall_seconds if self.wall_seconds else float("inf")


def measure(
    switch: Switch,
    port: int,
    frame: bytes,
    packets: int = 20_000,
    max_seconds: float = 10.0,
    check: Callable[[list[tuple[int, bytes]]], bool] | None = None,
) -> Result:
    """Process ``frame`` repeatedly (after one warm-up packet checked by ``check``, if given) and time it.
    Stops early after ``max_seconds`` of wall time."""
    first = switch.process(port, frame)
    if check is not None and not check(first):
        raise RuntimeError(f"benchmark frame was not handled as expected: {first!r}")
    process = switch.process
    wall0, cpu0 = time.perf_counter(), time.process_time()
    done = 0
    while done < packets:
        for _ in range(1000):
            process(port, frame)
        done += 1000
        if time.perf_counter() - wall0 > max_seconds:
            break
    return Result(done, time.perf_counter() - wall0, time.process_time() - cpu0)


def l2fwd_switch() -> Switch:
    switch = loader.load(L2FWD.read_bytes())
    switch.table_insert(
        "L2Ingress.dmac",
        TableEntry(
            {"hdr.ethernet.dst_addr": Exact(0x000000000002)}, ActionCall("L2Ingress.forward", {"port": 2})
        ),
    )
    return switch


def l2_frame(size: int) -> bytes:
    header = bytes.fromhex("0000000000020000000000010800")
    return header + bytes(size - len(header))


def main_p4_switch() -> Switch:
    """p4src/main.p4 (compiled in-process by the front end) with the entries of a fat-tree edge switch:
    a down-port role on port 1, valid-list P_Key filtering of the default P_Key, an ECMP group of four
    uplinks for the destination subnet."""
    from p4switch.frontend import compile_file  # the bench is tooling: the engine itself never imports it

    switch = loader.load(compile_file(MAIN_P4).ir_json())
    ing = "IbsecIngress."
    switch.table_insert(
        ing + "port_roles.port_roles_table",
        TableEntry(
            {"standard_metadata.ingress_port": Exact(1)},
            ActionCall(ing + "port_roles.mark_down_port", {"mark_mask": 0x7, "mark_value": 0x1}),
        ),
    )
    switch.table_insert(
        ing + "partition.partition_mode_table",
        TableEntry(
            {"standard_metadata.ingress_port": Exact(1)}, ActionCall(ing + "partition.filter_valid_list")
        ),
    )
    switch.table_insert(
        ing + "partition.valid_pkeys",
        TableEntry(
            {"standard_metadata.ingress_port": Exact(1), "hdr.bth.p_key": Exact(0xFFFF)},
            ActionCall("NoAction"),
        ),
    )
    for member, port in enumerate(range(2, 6)):
        switch.table_insert(
            ing + "routing.route_groups_table",
            TableEntry({"meta.route_group": Exact(1), "meta.route_member": Exact(member)},
                       ActionCall(ing + "routing.forward", {"port": port})),
        )
    switch.table_insert(
        ing + "routing.routes_table",
        TableEntry({"meta.dst_id": Lpm(0x0001 << 64, 16)},
                   ActionCall(ing + "routing.forward_to_group", {"group": 1, "members": 4})),
    )
    return switch


def rocev2_frame(size: int) -> bytes:
    """A RoCEv2 RC SEND-only frame to fec0::1:0:0:0:2 (subnet 1, GUID 2) of ``size`` bytes."""
    from scapy.contrib.roce import BTH
    from scapy.layers.inet import UDP
    from scapy.layers.inet6 import IPv6
    from scapy.layers.l2 import Ether

    pkt = (
        Ether(dst="02:00:00:00:00:02", src="02:00:00:00:00:01")
        / IPv6(src="fec0::1:0:0:0:1", dst="fec0::1:0:0:0:2")
        / UDP(sport=49152, dport=4791, chksum=0)
        / BTH(opcode=4, dqpn=0x11)
    )
    header = bytes(pkt)
    return header + bytes(max(0, size - len(header)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--packets", type=int, default=20_000)
    args = parser.parse_args(argv)
    switch = l2fwd_switch()
    results = {}
    for size in (128, 1024):
        result = measure(
            switch, 1, l2_frame(size), args.packets, check=lambda out: [p for p, _ in out] == [2]
        )
        results[size] = result
        print(f"engine l2fwd {size:5d} B: {result.pps:10.0f} packets/s (cpu), {result.wall_pps:10.0f} (wall)")
    print(f"engine l2fwd ratio 128/1024 B: {results[128].pps / results[1024].pps:.2f}")
    main_switch = main_p4_switch()
    for size in (128, 1024):
        result = measure(
            main_switch,
            1,
            rocev2_frame(size),
            args.packets,
            check=lambda out: len(out) == 1 and 2 <= out[0][0] <= 5,
        )
        print(
            f"engine p4src/main.p4 {size:5d} B: {result.pps:10.0f} packets/s (cpu), "
            f"{result.wall_pps:10.0f} (wall); l2fwd/main ratio {results[size].pps / result.pps:.2f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
