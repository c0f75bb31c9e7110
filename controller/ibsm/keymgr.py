"""Key distribution (DESIGN 5): the key hierarchy, wrapped per CA, sent as vendor MADs and acknowledged.

The SM generates SM_SK, one P_SK per partition and a CA_SK_ij for every pair of hosts that share a
partition (AES-CTR DRBG; kept in a 0600 key file, so an SM restart hands out the same keys again), and
sends each host what concerns it: SM_SK, the P_SK of the partitions it is a member of (never of the
others: a compromised non-member stays out), its pairwise keys, and its P_Key table with each
partition's security mode (DESIGN 3: the agent makes it the partition's default). Each MAD is wrapped
under (and authenticated with) that host's CA_SK; the host's agent answers with an authenticated GetResp.
A MAD not answered within the timeout is sent again with a fresh TransactionID (the agent refuses a
repeated one), up to a number of attempts. A host whose agent restarted (and so lost all of it) is
planned again from scratch (:meth:`KeyManager.replan`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ibsec import addressing, keys, layers, mad_auth
from ibsec.builder import Builder
from scapy.packet import Packet

from .partitions import pkey_tables
from .topology import Host, Partition, Topology


@dataclass(frozen=True)
class KeyOptions:
    timeout: float = 1.0
    attempts: int = 5


@dataclass
class Delivery:
    """One thing to deliver to one host: a key (by scope and owner, never bytes) or the P_Key table."""

    host: str
    what: str  # "SM_SK", "P_SK 0x0001", "CA_SK_IJ h1-h3", "P_Key table"
    mad: Callable[[int], Packet]  # builds the MAD for a TransactionID
    attempts: int = 0
    deadline: float = 0.0
    done: bool = False
    tids: list[int] = field(default_factory=list)


class KeyManager:
    """Generates the keys of a topology and tracks their delivery."""

    def __init__(self, topo: Topology, partitions: list[Partition], keystore: keys.KeyStore,
                 options: KeyOptions, clock: Callable[[], float] = time.monotonic,
                 saved: Path | None = None) -> None:
        self.topo = topo
        self.keystore = keystore
        self.options = options
        self.clock = clock
        sm_guid = addressing.parse_gid(topo.sm_gid).guid
        self.builder = Builder(bytes.fromhex(addressing.guid_to_mac(sm_guid).replace(":", "")),
                               addressing.parse_gid(topo.sm_gid).to_bytes())
        drbg = keys.CtrDrbg(personalization=b"ibsec-sm")
        known = {(k.type, k.owner): k for k in keys.read_key_file(saved)} if saved and saved.exists() else {}

        def key(kind: keys.KeyType, owner: tuple[int, ...] = ()) -> keys.Key:
            """The key kept from an earlier run (an SM restart keeps the fabric's keys), or a new one."""
            return known.get((kind, owner)) or drbg.generate_key(kind, owner)

        self.sm_sk = key(keys.KeyType.SM_SK)
        self.partition_keys = {p.pkey: key(keys.KeyType.P_SK, (p.pkey,)) for p in partitions}
        tables = pkey_tables(topo, partitions)
        self.tables = tables
        self.modes = {p.pkey: p.security for p in partitions}  # the default partition is mode 0 if absent
        member_of = {h: {pk & 0x7FFF for pk in t} for h, t in tables.items()}
        self.pairwise: dict[tuple[int, int], keys.Key] = {}
        hosts = sorted(topo.hosts, key=lambda h: h.guid)
        for i, a in enumerate(hosts):
            for b in hosts[i + 1:]:
                if member_of[a.name] & member_of[b.name] & set(self.partition_keys):
                    owner = (a.guid, b.guid)
                    self.pairwise[owner] = key(keys.KeyType.CA_SK_IJ, owner)
        if saved is not None:
            keys.write_key_file(saved, [self.sm_sk, *self.partition_keys.values(), *self.pairwise.values()])
        self._member_of = member_of
        self.pending: dict[int, Delivery] = {}
        self.deliveries: list[Delivery] = []
        self._last_tid = 0

    def __repr__(self) -> str:
        return f"KeyManager({len(self.partition_keys)} partition keys, {len(self.pairwise)} pairwise keys)"

    def plan(self) -> list[Delivery]:
        """Every delivery of the topology (a fresh list: call again to redistribute)."""
        self.deliveries = [d for host in self.topo.hosts for d in self._for_host(host)]
        return self.deliveries

    def _for_host(self, host: Host) -> Iterator[Delivery]:
        if host.guid not in self.keystore:
            return
        ca_sk = self.keystore.ca_key(host.guid)

        def key_mad(key: keys.Key, pkey: int = 0) -> Callable[[int], Packet]:
            return lambda tid: layers.MAD(transaction_id=tid) / layers.KeyDistribution(
                key_type=key.type, owners=list(key.owner), pkey=pkey, key_id=1,
                wrapped_key=keys.wrap_key(ca_sk, key))

        yield Delivery(host.name, "SM_SK", key_mad(self.sm_sk))
        for pkey, key in sorted(self.partition_keys.items()):
            if pkey in self._member_of[host.name]:
                yield Delivery(host.name, f"P_SK {pkey:#06x}", key_mad(key, pkey))
        for (a, b), key in sorted(self.pairwise.items()):
            if host.guid in (a, b):
                peer = self.topo.host_by_guid(b if a == host.guid else a)
                yield Delivery(host.name, f"CA_SK_IJ {host.name}-{peer.name if peer else '?'}", key_mad(key))
        table = self.tables[host.name][: layers.PKEY_BLOCK_ENTRIES]
        modes = [self.modes.get(pkey & 0x7FFF, 0) for pkey in table]
        yield Delivery(host.name, "P_Key table", lambda tid: layers.MAD(transaction_id=tid)
                       / layers.PKeyTable(block=0, port=1, pkeys=table, secmodes=modes))

    def in_flight(self, host: str) -> bool:
        """Whether a delivery to ``host`` was sent and is neither acknowledged nor given up."""
        return any(d.host == host and d.attempts and not d.done for d in self.deliveries)

    def replan(self, host: str) -> list[Delivery]:
        """Everything ``host`` needs, again (its agent restarted and lost it): deliveries still open are
        dropped with their TransactionIDs, the host's old ones forgotten, fresh ones returned to send."""
        for delivery in self.deliveries:
            if delivery.host == host:
                for tid in delivery.tids:
                    self.pending.pop(tid, None)
        spec = next(h for h in self.topo.hosts if h.name == host)
        fresh = list(self._for_host(spec))
        self.deliveries = [d for d in self.deliveries if d.host != host] + fresh
        return fresh

    def next_tid(self) -> int:
        """Strictly increasing, also across SM restarts (agents keep the last TID they accepted)."""
        self._last_tid = max(self._last_tid + 1, time.time_ns() & ((1 << 64) - 1))
        return self._last_tid

    def frame(self, delivery: Delivery) -> bytes:
        """The next attempt of ``delivery``: a fresh TID, sealed under the host's CA_SK."""
        host = next(h for h in self.topo.hosts if h.name == delivery.host)
        tid = self.next_tid()
        delivery.attempts += 1
        delivery.deadline = self.clock() + self.options.timeout
        delivery.tids.append(tid)
        self.pending[tid] = delivery
        mad = bytes(delivery.mad(tid))[: layers.MAD_LEN]
        payload = mad_auth.seal(self.keystore.ca_key(host.guid).material, mad, self.topo.sm_gid)
        return self.builder.mad_frame(host.gid, 0xFFFF, payload)

    def due(self) -> tuple[list[Delivery], list[Delivery]]:
        """(deliveries to send again now, deliveries that ran out of attempts)."""
        now = self.clock()
        retry, failed = [], []
        for delivery in self.deliveries:
            if delivery.done or delivery.attempts == 0 or now < delivery.deadline:
                continue
            if delivery.attempts >= self.options.attempts:
                delivery.done = True
                failed.append(delivery)
            else:
                retry.append(delivery)
        return retry, failed

    def on_response(self, sender: Host, mad: Packet) -> tuple[Delivery, int] | None:
        """An authenticated GetResp from ``sender``: (its delivery, MAD status), or None if unexpected."""
        delivery = self.pending.get(int(mad.transaction_id))
        if delivery is None or delivery.host != sender.name or delivery.done:
            return None
        delivery.done = True
        for tid in delivery.tids:
            self.pending.pop(tid, None)
        return delivery, int(mad.status)

    def outstanding(self) -> int:
        return sum(1 for d in self.deliveries if not d.done)
