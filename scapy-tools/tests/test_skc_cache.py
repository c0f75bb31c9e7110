"""Session key cache: LRU sized in bytes, stats, the prefetch buffer, and the sealed backing store."""

import pytest
from ibsec.keys import Key, KeyType
from ibsec.skc import KeyCachePolicy, SessionKeyCache, SkcError


def from_store(key_id: tuple[int, int]) -> str:
    return f"value{key_id}"


def test_default_is_16_kib_of_32_byte_entries() -> None:
    assert KeyCachePolicy().entries == 512
    assert KeyCachePolicy(capacity_bytes=2048, entry_bytes=16).entries == 128


def test_lru_order_and_stats() -> None:
    cache: KeyCachePolicy[str] = KeyCachePolicy(capacity_bytes=96, prefetch_entries=0)  # 3 entries
    for conn in (1, 2, 3, 1):
        assert cache.lookup((0, conn), from_store) == f"value{(0, conn)}"
    cache.lookup((0, 4), from_store)  # evicts (0, 2), the least recently used
    assert (0, 2) not in cache and all((0, c) in cache for c in (1, 3, 4))
    cache.lookup((0, 2), from_store)  # miss again, evicts (0, 3)
    assert (0, 3) not in cache
    stats = cache.stats
    assert (stats.hits, stats.misses, stats.evictions, stats.prefetch_hits) == (1, 5, 2, 0)
    assert stats.lookups == 6 and stats.hit_rate == pytest.approx(1 / 6)


def test_zero_capacity_never_hits() -> None:
    cache: KeyCachePolicy[str] = KeyCachePolicy(capacity_bytes=0)
    for _ in range(3):
        cache.lookup((0, 1), from_store)
    assert (cache.stats.hits, cache.stats.misses) == (0, 3)


def test_eviction_feeds_the_frequent_list_most_used_first() -> None:
    cache: KeyCachePolicy[str] = KeyCachePolicy(capacity_bytes=64, prefetch_entries=2)  # 2 entries
    for conn, uses in ((1, 3), (2, 1)):
        for _ in range(uses):
            cache.lookup((7, conn), from_store)
    cache.lookup((7, 3), from_store)  # evicts (7, 1), used 3 times
    cache.lookup((7, 4), from_store)  # evicts (7, 2), used once
    assert cache.frequent_keys(7) == [(7, 1), (7, 2)]
    cache.lookup((7, 5), from_store)  # evicts (7, 3) (1 use): the list keeps only the two most used
    assert set(cache.frequent_keys(7)) <= {(7, 1), (7, 2), (7, 3)} and len(cache.frequent_keys(7)) == 2
    assert cache.frequent_keys(7)[0] == (7, 1)


def test_message_for_another_process_prefetches_its_frequent_keys() -> None:
    fetched: list[tuple[int, int]] = []

    def fetch(key_id: tuple[int, int]) -> str:
        fetched.append(key_id)
        return from_store(key_id)

    cache: KeyCachePolicy[str] = KeyCachePolicy(capacity_bytes=64, prefetch_entries=4)  # 2 entries
    for key_id in [(1, 1), (1, 2), (1, 1), (1, 2)]:  # process 1 runs
        cache.lookup(key_id, fetch)
    for key_id in [(2, 1), (2, 2)]:  # process 2 runs and evicts process 1's keys
        cache.lookup(key_id, fetch)
    fetched.clear()
    assert cache.lookup((1, 2), fetch) == "value(1, 2)"  # a message for process 1, not being served
    assert sorted(fetched) == [(1, 1), (1, 2)] and cache.stats.prefetched == 2
    cache.lookup((1, 1), fetch)
    assert cache.stats.prefetch_hits == 2 and len(fetched) == 2  # both found in the prefetch buffer
    assert (1, 1) in cache and (1, 2) in cache  # moved into the LRU


def test_no_prefetch_when_disabled() -> None:
    cache: KeyCachePolicy[str] = KeyCachePolicy(capacity_bytes=32, prefetch_entries=0)
    for key_id in [(1, 1), (2, 1), (1, 1)]:
        cache.lookup(key_id, from_store)
    assert cache.stats.prefetch_hits == cache.stats.prefetched == 0 and cache.frequent_keys(1) == []


SK1 = Key(KeyType.SK, (0xA, 0x11, 0xB, 0x22), bytes.fromhex("5ec2e7000000000000000000000000aa"))
SK2 = Key(KeyType.SK, (0xA, 0x12, 0xB, 0x23), bytes.fromhex("5ec2e7000000000000000000000000bb"))


def test_store_round_trip_and_plaintext_hits() -> None:
    skc = SessionKeyCache()
    skc.put((1, 1), SK1)
    skc.put((1, 2), SK2)
    assert skc.get((1, 1)) == SK1 and skc.get((1, 1)) == SK1 and skc.get((1, 2)) == SK2
    assert (skc.stats.misses, skc.stats.hits) == (2, 1)


def test_put_replaces_the_cached_key() -> None:
    skc = SessionKeyCache()
    skc.put((1, 1), SK1)
    skc.get((1, 1))
    skc.put((1, 1), SK2)
    assert skc.get((1, 1)) == SK2
    skc.remove((1, 1))
    with pytest.raises(SkcError, match="no session key"):
        skc.get((1, 1))


def test_tampered_or_moved_store_entries_fail() -> None:
    skc = SessionKeyCache(capacity_bytes=0)  # every get unseals from the store
    skc.put((1, 1), SK1)
    skc.put((1, 2), SK2)
    store = skc._store
    store[(1, 1)], store[(1, 2)] = store[(1, 2)], store[(1, 1)]  # an attacker swaps two slots
    with pytest.raises(SkcError, match="failed authentication"):
        skc.get((1, 1))
    skc.put((1, 1), SK1)
    entry = store[(1, 1)]
    entry.ciphertext = bytes([entry.ciphertext[0] ^ 1]) + entry.ciphertext[1:]
    with pytest.raises(SkcError) as raised:
        skc.get((1, 1))
    assert SK1.material.hex() not in str(raised.value) + repr(skc) + repr(store)
    other = SessionKeyCache(capacity_bytes=0)
    other._store[(1, 2)] = store[(1, 2)]  # a different store key cannot open it
    with pytest.raises(SkcError):
        other.get((1, 2))
