"""Key distribution (DESIGN 5): the key hierarchy, wrapped per CA, sent in batches and acknowledged.

The SM generates SM_SK, one P_SK per partition and a CA_SK_ij for every pair of hosts that share a
partition (AES-CTR DRBG; kept in a 0600 key file, so an SM restart hands out the same keys again), and
sends each host what concerns it: SM_SK, the P_SK of the partitions it is a member of (never of the
others: a compromised non-member stays out), its pairwise keys, and its P_Key table with each
partition's security mode (DESIGN 3: the agent makes it the partition's default).

Keys go in key batches (:mod:`ibsec.keybatch`): as many as fit one MAD, wrapped together under (and
authenticated with) that host's CA_SK, one ACK (an authenticated GetResp) per batch; the P_Key table
follows in its own MAD. One key per MAD, each waited for, made a 144-host fabric's keys take minutes
(issue 17). At most ``window`` MADs are outstanding across the fabric (:meth:`KeyManager.sendable`), so
a large fabric does not flood the switches' CPU ports and the agents; a MAD not answered in time is sent
again with a fresh TransactionID (the agent refuses a repeated one), each wait ``backoff`` times the
previous one up to ``max_timeout``, up to a number of attempts. A host whose agent restarted (and so lost
all of it) is planned again from scratch (:meth:`KeyManager.replan`).
"""

from __future__ import annotations

import contextlib
import itertools
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ibsec import addressing, keybatch, keys, layers, mad_auth
from ibsec.builder import Builder

from .partitions import pkey_tables
from .topology import Host, Partition, Topology


@dataclass(frozen=True)
class KeyOptions:
    """``timeout``: the first wait for an ACK; then ``backoff`` times longer each attempt, at most
    ``max_timeout``; ``window``: MADs outstanding across the fabric."""

    timeout: float = 1.0
    attempts: int = 5
    window: int = 64
    backoff: float = 2.0
    max_timeout: float = 8.0

    def wait(self, attempt: int) -> float:
        """How long attempt number ``attempt`` (1 = the first) waits for its ACK."""
        return float(min(self.timeout * self.backoff ** (attempt - 1), max(self.max_timeout, self.timeout)))


@dataclass(eq=False)
class Delivery:
    """One MAD to one host: a batch of keys (by scope and owner, never bytes) or the P_Key table."""

    host: str
    what: tuple[str, ...]  # ("SM_SK", "P_SK 0x0001", "CA_SK_IJ h1-h3"), or ("P_Key table",)
    mad: Callable[[int], bytes]  # the 256-byte MAD for a TransactionID
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
        hosts = sorted(topo.hosts, key=lambda h: h.guid)
        keyed = {h.name: member_of[h.name] & set(self.partition_keys) for h in hosts}
        pairs = [(a.guid, b.guid) for i, a in enumerate(hosts) for b in hosts[i + 1:]
                 if keyed[a.name] & keyed[b.name]]
        fresh = drbg.generate_keys(keys.KeyType.CA_SK_IJ,
                                   [o for o in pairs if (keys.KeyType.CA_SK_IJ, o) not in known])
        new = iter(fresh)
        self.pairwise: dict[tuple[int, int], keys.Key] = {
            o: known.get((keys.KeyType.CA_SK_IJ, o)) or next(new) for o in pairs}
        if saved is not None:
            keys.write_key_file(saved, [self.sm_sk, *self.partition_keys.values(), *self.pairwise.values()])
        self._member_of = member_of
        self._hosts = {h.name: h for h in topo.hosts}
        self._by_guid = {h.guid: h for h in topo.hosts}
        self._gids = {h.name: addressing.parse_gid(h.gid).to_bytes() for h in topo.hosts}
        self._pairs_of: dict[int, list[tuple[int, keys.Key]]] = {}  # GUID -> (peer GUID, CA_SK_ij), by owner
        for (a, b), pair_key in sorted(self.pairwise.items()):
            self._pairs_of.setdefault(a, []).append((b, pair_key))
            self._pairs_of.setdefault(b, []).append((a, pair_key))
        self.pending: dict[int, Delivery] = {}  # TID of every attempt of an open delivery -> it
        self.deliveries: list[Delivery] = []
        self._queue: deque[Delivery] = deque()  # planned, never sent: waiting for room in the window
        self._open: set[Delivery] = set()  # sent, neither acknowledged nor given up
        self._last_tid = 0

    def __repr__(self) -> str:
        return f"KeyManager({len(self.partition_keys)} partition keys, {len(self.pairwise)} pairwise keys)"

    def plan(self) -> list[Delivery]:
        """Every delivery of the topology (a fresh list: call again to redistribute)."""
        self.deliveries = [d for host in self.topo.hosts for d in self._for_host(host)]
        self.pending.clear()
        self._open.clear()
        self._queue = deque(self.deliveries)
        return self.deliveries

    def _keys_of(self, host: Host) -> Iterator[tuple[str, keys.Key]]:
        """(scope, key) of every key ``host`` gets, in the order they are sent."""
        yield "SM_SK", self.sm_sk
        for pkey, key in sorted(self.partition_keys.items()):
            if pkey in self._member_of[host.name]:
                yield f"P_SK {pkey:#06x}", key
        for peer_guid, key in self._pairs_of.get(host.guid, []):
            peer = self._by_guid.get(peer_guid)
            yield f"CA_SK_IJ {host.name}-{peer.name if peer else '?'}", key

    def _for_host(self, host: Host) -> Iterator[Delivery]:
        if host.guid not in self.keystore:
            return
        ca_sk = self.keystore.ca_key(host.guid)

        def batch_mad(batch: list[keys.Key]) -> Callable[[int], bytes]:
            def build(tid: int) -> bytes:
                header = layers.vendor_header(layers.VendorAttr.KEY_BATCH, tid)
                return header + keybatch.seal(ca_sk, header, batch, host.guid)
            return build

        scoped = list(self._keys_of(host))
        start = 0
        for batch in keybatch.pack([key for _, key in scoped]):
            yield Delivery(host.name, tuple(what for what, _ in scoped[start:start + len(batch)]),
                           batch_mad(batch))
            start += len(batch)
        table = self.tables[host.name][: layers.PKEY_BLOCK_ENTRIES]
        modes = [self.modes.get(pkey & 0x7FFF, 0) for pkey in table]
        yield Delivery(host.name, ("P_Key table",), lambda tid: bytes(
            layers.MAD(transaction_id=tid) / layers.PKeyTable(block=0, port=1, pkeys=table, secmodes=modes)
        )[: layers.MAD_LEN])

    def in_flight(self, host: str) -> bool:
        """Whether a delivery to ``host`` was sent and is neither acknowledged nor given up."""
        return any(d.host == host for d in self._open)

    def replan(self, host: str) -> list[Delivery]:
        """Everything ``host`` needs, again (its agent restarted and lost it): deliveries still open are
        dropped with their TransactionIDs, the host's old ones forgotten, fresh ones queued (first, so a
        restarted agent does not wait behind a whole fabric's first distribution) and returned."""
        for delivery in [d for d in self._open if d.host == host]:
            self._close(delivery)
        fresh = list(self._for_host(self._hosts[host]))
        self.deliveries = [d for d in self.deliveries if d.host != host] + fresh
        self._queue = deque([*fresh, *(d for d in self._queue if d.host != host)])
        return fresh

    def _close(self, delivery: Delivery) -> None:
        delivery.done = True
        for tid in delivery.tids:
            self.pending.pop(tid, None)
        self._open.discard(delivery)

    def next_tid(self) -> int:
        """Strictly increasing, also across SM restarts (agents keep the last TID they accepted)."""
        self._last_tid = max(self._last_tid + 1, time.time_ns() & ((1 << 64) - 1))
        return self._last_tid

    def frame(self, delivery: Delivery) -> bytes:
        """The next attempt of ``delivery``: a fresh TID, sealed under the host's CA_SK."""
        host = self._hosts[delivery.host]
        tid = self.next_tid()
        if not delivery.attempts:
            with contextlib.suppress(ValueError):  # not queued: replaced by a later replan
                self._queue.remove(delivery)  # the window's head: found at once
            self._open.add(delivery)
        delivery.attempts += 1
        delivery.deadline = self.clock() + self.options.wait(delivery.attempts)
        delivery.tids.append(tid)
        self.pending[tid] = delivery
        mad = delivery.mad(tid)
        payload = mad_auth.seal(self.keystore.ca_key(host.guid).material, mad, self.builder.gid)
        return self.builder.mad_frame(self._gids[host.name], 0xFFFF, payload)

    def sendable(self) -> list[Delivery]:
        """Deliveries never sent yet that fit in the window of outstanding MADs, in plan order."""
        return list(itertools.islice(self._queue, max(self.options.window - len(self._open), 0)))

    def due(self) -> tuple[list[Delivery], list[Delivery]]:
        """(deliveries to send again now, deliveries that ran out of attempts)."""
        now = self.clock()
        retry, failed = [], []
        for delivery in sorted(self._open, key=lambda d: (d.deadline, d.tids[-1])):  # in send order
            if now < delivery.deadline:
                break
            if delivery.attempts >= self.options.attempts:
                self._close(delivery)
                failed.append(delivery)
            else:
                retry.append(delivery)
        return retry, failed

    def on_response(self, sender: Host, tid: int, status: int) -> tuple[Delivery, int] | None:
        """An authenticated GetResp from ``sender`` with TransactionID ``tid``: (its delivery, MAD status),
        or None if unexpected."""
        delivery = self.pending.get(tid)
        if delivery is None or delivery.host != sender.name or delivery.done:
            return None
        self._close(delivery)
        return delivery, status

    def on_ack(self, sender: Host, mad: bytes) -> tuple[Delivery, int] | None:
        """:meth:`on_response` for the 256 bytes of an authenticated GetResp (TransactionID at 8,
        status at 4)."""
        return self.on_response(sender, layers.mad_tid(mad), int.from_bytes(mad[4:6], "big"))

    def outstanding(self) -> int:
        """MADs not yet acknowledged nor given up (sent or waiting for room in the window)."""
        return len(self._queue) + len(self._open)
