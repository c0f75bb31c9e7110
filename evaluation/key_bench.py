"""``python -m evaluation.key_bench``: every pairwise key of a 1,024-CA partition, generated and delivered.

Lee & Kim claim the SM generates and sends every CA_SK_ij of a 1,024-CA partition in about a second.
This runs the SM's real key manager (``ibsm.keymgr``: AES-CTR DRBG, key batches under each CA_SK, the
MAD trailer, the RoCEv2 frame) against ``--cas`` real host agents (``ibsec.agent.adapter.Adapter``,
sharing this process, each with its own CA key file), and the SM's real ACK path (frame parsing, trailer
check, matching). No network: the frames go from the SM's code to the agent's and back by function call,
one batch after the other, so the time is what the two sides' code costs on one core. Phases:

- generate: SM_SK, the partition's P_SK and n(n-1)/2 CA_SK_ij (the key manager's construction);
- SM send: plan, then seal and frame every batch and the P_Key tables (what the paper's claim covers);
- CAs: every agent verifies, unwraps, stores and answers its batches;
- SM ACKs: every ACK parsed, authenticated and matched.

The table says how many times the paper's second each took. A benchmark, not a test: nothing here is
asserted (``controller/tests/test_keymgr.py`` and ``evaluation/tests/test_key_bench.py`` check the
mechanisms).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ibsec import addressing
from ibsec.agent.adapter import Adapter, AgentConfig
from ibsm.keymgr import KeyManager, KeyOptions
from ibsm.topology import Host, Member, Partition, Switch, Topology
from ibsm.traps import MadSource, parse_frame

from labs.sm_fabric import ca_keys

PAPER_CLAIM_S = 1.0
SUBNET = 1


@dataclass(frozen=True)
class Cost:
    """Seconds of wall clock and of this process's CPU: on a shared machine the CPU time is what the
    code costs, the wall time what it took."""

    wall: float
    cpu: float

    def __add__(self, other: Cost) -> Cost:
        return Cost(self.wall + other.wall, self.cpu + other.cpu)


@dataclass
class KeyBench:
    """What one distribution cost per phase, and what it moved."""

    cas: int
    keys: int
    mads: int
    generate: Cost
    send: Cost
    receive: Cost
    acks: Cost
    acked: int

    @property
    def sm(self) -> Cost:
        """The SM's share: generate and send (the paper's claim)."""
        return self.generate + self.send

    @property
    def total(self) -> Cost:
        return self.sm + self.receive + self.acks

    def rows(self) -> list[tuple[str, Cost]]:
        return [("generate", self.generate), ("SM send", self.send), ("SM: generate + send", self.sm),
                ("CAs unwrap + ACK", self.receive), ("SM ACKs", self.acks), ("end to end", self.total)]


def topology(cas: int) -> Topology:
    """``cas`` hosts in one partition (every host a full member): all n(n-1)/2 pairs share a key. The
    switches are placeholders: key distribution needs only the hosts' addresses."""
    guids = [addressing.host_guid(i + 1) for i in range(cas)]
    hosts = tuple(Host(f"h{i}", f"s{i // 64}", i % 64 + 1, guid, i + 1, addressing.make_gid(SUBNET, guid))
                  for i, guid in enumerate(guids))
    switches = tuple(Switch(f"s{n}", f"127.0.0.1:{50000 + n}", n + 1, tuple(range(1, 65)))
                     for n in range((cas + 63) // 64))
    members = tuple(Member(h.guid, True) for h in hosts)
    return Topology(name=f"key-bench-{cas}", kind="bench", routing="none", switches=switches, links=(),
                    hosts=hosts, partitions=(Partition("bench", 0x0001, members, security=2),),
                    sm_gid=addressing.host_gid(0xFFFE, SUBNET))


def agents(topo: Topology, manager: KeyManager, workdir: Path, outbox: list[bytes]) -> dict[str, Adapter]:
    """One agent per host, each with its own provisioned CA key file, sending into ``outbox``."""
    out = {}
    for host in topo.hosts:
        key_file = workdir / f"{host.name}.keys"
        manager.keystore.provision_host(host.guid, key_file)
        mac = bytes.fromhex(addressing.guid_to_mac(host.guid).replace(":", ""))
        out[host.name] = Adapter(AgentConfig(name=host.name, mac=mac, subnet=SUBNET, lid=host.lid,
                                             key_file=key_file, sm_gid=topo.sm_gid), outbox.append)
    return out


def timed(work: Callable[[], object]) -> Cost:
    wall, cpu = time.perf_counter(), time.process_time()
    work()
    return Cost(time.perf_counter() - wall, time.process_time() - cpu)


def run(cas: int) -> KeyBench:
    """One distribution to ``cas`` CAs; the agents' set-up (key files) is not timed."""
    topo = topology(cas)
    store = ca_keys(topo)
    managers: list[KeyManager] = []
    generate = timed(lambda: managers.append(
        KeyManager(topo, list(topo.partitions), store, KeyOptions(window=1 << 30))))
    manager = managers[0]
    acks: list[bytes] = []
    with tempfile.TemporaryDirectory(prefix="ibsec-keybench-") as tmp:
        by_name = agents(topo, manager, Path(tmp), acks)
        frames: list[tuple[str, bytes]] = []

        def send() -> None:
            for delivery in manager.plan():
                frames.append((delivery.host, manager.frame(delivery)))

        def receive() -> None:
            for host, frame in frames:
                by_name[host].receive(frame)

        sent = timed(send)
        received = timed(receive)
    source = MadSource(topo, store)
    answered: list[object] = []

    def take_acks() -> None:
        for frame in acks:
            answered.append(manager.on_ack(*source.authentic(parse_frame(frame))))

    acked = timed(take_acks)
    tables = sum(1 for d in manager.deliveries if d.what == ("P_Key table",))
    return KeyBench(cas=cas, keys=sum(len(d.what) for d in manager.deliveries) - tables, mads=len(frames),
                    generate=generate, send=sent, receive=received, acks=acked,
                    acked=sum(1 for a in answered if a is not None))


def report(bench: KeyBench) -> list[str]:
    lines = [f"{bench.cas} CAs, one partition: {bench.keys} keys delivered (SM_SK, P_SK, "
             f"{bench.cas * (bench.cas - 1) // 2} CA_SK_ij twice) in {bench.mads} MADs with the P_Key "
             f"tables, {bench.acked} ACKed",
             f"{'phase':<22}{'wall s':>8}{'CPU s':>8}{'x paper (1 s), by CPU':>24}"]
    lines += [f"{name:<22}{cost.wall:>8.2f}{cost.cpu:>8.2f}{cost.cpu / PAPER_CLAIM_S:>24.1f}"
              for name, cost in bench.rows()]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evaluation.key_bench",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--cas", type=int, default=1024, help="CAs in the partition (default 1024)")
    args = parser.parse_args(argv)
    print("\n".join(report(run(args.cas))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
