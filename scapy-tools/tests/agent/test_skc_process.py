"""The session key cache as seed 001 means it: its process is the application that owns the connections.

Two applications (protection domains) on one adapter, three session-key connections each, a cache of two
entries. While the second application runs, the first one's keys are evicted into its list of frequent
keys; when a message for the first application arrives again, the adapter prefetches that list, and the
lookups that miss the cache hit the prefetch buffer. Counters and cache ids are asserted, never timing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest
from ibsec.agent.adapter import Adapter, AdapterError
from ibsec.agent.qp import QueuePair, Scope, Service
from ibsec.skc import DEFAULT_ENTRY_BYTES

from .loopback import SECURE_PKEY, Loopback

CONNECTIONS = 3


@pytest.fixture
def loop(tmp_path: Path) -> Iterator[Loopback]:
    link = Loopback(tmp_path, skc_bytes=2 * DEFAULT_ENTRY_BYTES)
    yield link
    link.close()


def connections(a: Adapter, b: Adapter, pd: int) -> list[QueuePair]:
    return [a.cm.connect(b.gid, Service.RC, SECURE_PKEY, 2, Scope.SESSION, 5.0, pd=pd)
            for _ in range(CONNECTIONS)]


def turn(a: Adapter, b: Adapter, qps: list[QueuePair]) -> None:
    """The application's time slice: a message on each of its connections, twice."""
    for _ in range(2):
        for qp in qps:
            a.post_send(qp.qpn, b"ping")
            assert b.wait_recv(qp.remote_qpn or 0, 5) == b"ping"


def test_a_switch_to_another_application_prefetches_that_applications_keys(loop: Loopback) -> None:
    a, b = loop.adapters
    first, second = a.alloc_pd(), a.alloc_pd()
    apps = {first: connections(a, b, first), second: connections(a, b, second)}
    ids = {pd: {qp.security.cache_id for qp in qps if qp.security} for pd, qps in apps.items()}
    assert all(len(ids[pd]) == CONNECTIONS and {i[0] for i in ids[pd]} == {pd} for pd in apps)
    turn(a, b, apps[first])
    turn(a, b, apps[second])  # the first application's keys leave the 2-entry cache: its frequent list
    frequent = a.skc.policy.frequent_keys(first)
    assert frequent and set(frequent) <= ids[first]  # what a switch back prefetches: the first app's keys
    before = dataclasses.replace(a.skc.stats)
    turn(a, b, apps[first])
    after = a.skc.stats
    assert after.prefetched > before.prefetched
    assert after.prefetch_hits > before.prefetch_hits  # misses the buffer served, counted at the switch
    assert a.skc.policy.current_process == first


def test_without_a_prefetch_buffer_the_same_switch_misses(tmp_path: Path) -> None:
    link = Loopback(tmp_path, skc_bytes=2 * DEFAULT_ENTRY_BYTES, skc_prefetch=0)
    try:
        a, b = link.adapters
        first, second = a.alloc_pd(), a.alloc_pd()
        apps = {first: connections(a, b, first), second: connections(a, b, second)}
        turn(a, b, apps[first])
        turn(a, b, apps[second])
        before = dataclasses.replace(a.skc.stats)
        turn(a, b, apps[first])
        assert a.skc.stats.prefetch_hits == before.prefetch_hits == 0
        assert a.skc.stats.misses > before.misses
    finally:
        link.close()


def test_qps_join_their_partitions_pd_unless_they_name_an_allocated_one(loop: Loopback) -> None:
    a, b = loop.adapters
    plain = a.cm.connect(b.gid, Service.RC, SECURE_PKEY, 2, Scope.SESSION, 5.0)
    assert plain.pd == SECURE_PKEY & 0x7FFF and plain.security is not None
    assert plain.security.cache_id is not None and plain.security.cache_id[0] == plain.pd
    accepted = b.qp(plain.remote_qpn or 0)
    assert accepted.pd == SECURE_PKEY & 0x7FFF  # the passive side: the partition's own
    with pytest.raises(AdapterError, match="no protection domain"):
        a.create_qp(Service.RC, SECURE_PKEY, pd=0x12345)
    pd = a.alloc_pd()
    assert a.create_qp(Service.RC, SECURE_PKEY, pd=pd).describe()["pd"] == pd
