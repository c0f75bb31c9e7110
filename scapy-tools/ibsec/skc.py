"""Session key cache on the adapter (seed 001: Lee, An & Kim, JPDC 2010) and its ON/OFF Markov model.

Three parts:

* :class:`KeyCachePolicy` -- the SKC proper: a fully associative LRU of ``capacity_bytes / entry_bytes``
  entries ("on-chip SRAM", default 16 KiB of 32-byte entries = 512 keys), a small prefetch buffer looked up
  in parallel, and per-process lists of frequently used keys, updated at every eviction.  When a message
  arrives for a process other than the one the adapter last served, the adapter presumes an implicit
  coscheduler will run that process soon and loads the process's frequent keys into the prefetch buffer
  (seed 001 section 3.3).  Values are opaque, so the same policy serves the real cache and the simulator.
* :class:`SessionKeyCache` -- the policy over an encrypted backing store ("adapter memory", untrusted):
  every key sealed with AES-GCM under a store key, bound to its slot; plaintext only in the LRU.
* The model: :func:`state_probabilities` (eq. 1-2), :func:`hit_probability` (eq. 3),
  :func:`cache_capacity`, and :func:`simulate`, a trace-driven simulation of the same ON/OFF sources.
"""

from __future__ import annotations

import itertools
import math
import os
import random
from collections import Counter, OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Generic, TypeVar

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from ibsec.keys import IbsecKeyError, Key, KeyType

KeyId = tuple[int, int]
"""A cache entry's id, as in the seed: (process or QP id, connection id)."""

DEFAULT_CAPACITY_BYTES = 16 * 1024
DEFAULT_ENTRY_BYTES = 32
DEFAULT_PREFETCH_ENTRIES = 16

V = TypeVar("V")


@dataclass
class CacheStats:
    """Counters of one cache; ``hit_rate`` counts SKC and prefetch-buffer hits together (as seed 001)."""

    hits: int = 0
    prefetch_hits: int = 0
    misses: int = 0
    evictions: int = 0
    prefetched: int = 0

    @property
    def lookups(self) -> int:
        return self.hits + self.prefetch_hits + self.misses

    @property
    def hit_rate(self) -> float:
        return (self.hits + self.prefetch_hits) / self.lookups if self.lookups else 0.0


class KeyCachePolicy(Generic[V]):
    """LRU cache sized in bytes, plus the prefetch buffer and per-process frequent-key lists.

    ``fetch(key_id)`` is called on a miss (and for each prefetched key) to get the value from the backing
    store.  ``prefetch_entries`` = 0 disables prefetching; ``capacity_bytes`` = 0 disables caching.
    """

    def __init__(
        self,
        capacity_bytes: int = DEFAULT_CAPACITY_BYTES,
        entry_bytes: int = DEFAULT_ENTRY_BYTES,
        prefetch_entries: int = DEFAULT_PREFETCH_ENTRIES,
    ) -> None:
        if capacity_bytes < 0 or entry_bytes <= 0 or prefetch_entries < 0:
            raise ValueError("cache sizes must be non-negative and entry_bytes positive")
        self.entries = capacity_bytes // entry_bytes
        self.prefetch_entries = prefetch_entries
        self.stats = CacheStats()
        self.current_process: int | None = None
        self._lru: OrderedDict[KeyId, V] = OrderedDict()
        self._prefetch: OrderedDict[KeyId, V] = OrderedDict()
        self._uses: Counter[KeyId] = Counter()
        self._frequent: dict[int, Counter[KeyId]] = {}

    def __repr__(self) -> str:
        return (
            f"KeyCachePolicy({len(self._lru)}/{self.entries} entries, "
            f"prefetch {len(self._prefetch)}/{self.prefetch_entries}, {self.stats})"
        )

    def __contains__(self, key_id: object) -> bool:
        return key_id in self._lru

    def lookup(self, key_id: KeyId, fetch: Callable[[KeyId], V]) -> V:
        """The value of ``key_id``: from the LRU, else the prefetch buffer, else ``fetch``."""
        if key_id[0] != self.current_process:
            self.current_process = key_id[0]
            self._prefetch_for(key_id[0], fetch)
        self._uses[key_id] += 1
        if key_id in self._lru:
            self._lru.move_to_end(key_id)
            self.stats.hits += 1
            return self._lru[key_id]
        if key_id in self._prefetch:
            value = self._prefetch.pop(key_id)
            self.stats.prefetch_hits += 1
        else:
            value = fetch(key_id)
            self.stats.misses += 1
        self._insert(key_id, value)
        return value

    def invalidate(self, key_id: KeyId) -> None:
        """Forget ``key_id`` everywhere (key replaced or connection closed)."""
        self._lru.pop(key_id, None)
        self._prefetch.pop(key_id, None)
        self._uses.pop(key_id, None)
        self._frequent.get(key_id[0], Counter()).pop(key_id, None)

    def frequent_keys(self, process: int) -> list[KeyId]:
        """The process's frequently used keys, most used first (at most ``prefetch_entries``)."""
        return [key_id for key_id, _ in self._frequent.get(process, Counter()).most_common()]

    def _insert(self, key_id: KeyId, value: V) -> None:
        if self.entries == 0:
            return
        if len(self._lru) >= self.entries:
            self._evict()
        self._lru[key_id] = value

    def _evict(self) -> None:
        """Drop the LRU entry and record its use count in its process's frequent list (seed 001 sec. 3.3)."""
        victim, _ = self._lru.popitem(last=False)
        self.stats.evictions += 1
        uses = self._uses.pop(victim, 0)
        if self.prefetch_entries:
            frequent = self._frequent.setdefault(victim[0], Counter())
            frequent[victim] += uses
            while len(frequent) > self.prefetch_entries:
                del frequent[min(frequent, key=frequent.__getitem__)]

    def _prefetch_for(self, process: int, fetch: Callable[[KeyId], V]) -> None:
        for key_id in self.frequent_keys(process):
            if key_id in self._lru or key_id in self._prefetch:
                continue
            if len(self._prefetch) >= self.prefetch_entries:
                self._prefetch.popitem(last=False)
            self._prefetch[key_id] = fetch(key_id)
            self.stats.prefetched += 1


# --------------------------------------------------------------------------------------------------------
# The cache over an encrypted backing store
# --------------------------------------------------------------------------------------------------------


class SkcError(IbsecKeyError):
    """A session key is missing from the store or its sealed entry failed authentication."""


_SEAL_LABEL = b"ibsec-skc"


@dataclass
class _Sealed:
    type: KeyType
    owner: tuple[int, ...]
    nonce: bytes = field(repr=False)
    ciphertext: bytes = field(repr=False)


class SessionKeyCache:
    """Session keys sealed in an untrusted store, with a plaintext LRU and prefetch buffer in front.

    Each store entry is AES-GCM(store key, fresh 96-bit nonce) of the key bytes with associated data
    ``b"ibsec-skc" || process id || connection id || key type || owner ids``, so an entry moved to another
    slot, altered or relabelled fails with :class:`SkcError`.  The store key never leaves this object.
    """

    def __init__(
        self,
        store_key: Key | None = None,
        capacity_bytes: int = DEFAULT_CAPACITY_BYTES,
        entry_bytes: int = DEFAULT_ENTRY_BYTES,
        prefetch_entries: int = DEFAULT_PREFETCH_ENTRIES,
    ) -> None:
        self._aead = AESGCM((store_key or Key.generate(KeyType.STORE, (), 16)).material)
        self._store: dict[KeyId, _Sealed] = {}
        self.policy: KeyCachePolicy[Key] = KeyCachePolicy(capacity_bytes, entry_bytes, prefetch_entries)

    def __repr__(self) -> str:
        return f"SessionKeyCache({len(self._store)} stored, {self.policy!r})"

    @property
    def stats(self) -> CacheStats:
        return self.policy.stats

    def __len__(self) -> int:
        return len(self._store)

    @staticmethod
    def _aad(key_id: KeyId, type: KeyType, owner: tuple[int, ...]) -> bytes:
        ids = b"".join(i.to_bytes(16, "big") for i in (*key_id, *owner))
        return _SEAL_LABEL + bytes((type,)) + len(owner).to_bytes(1, "big") + ids

    def put(self, key_id: KeyId, key: Key) -> None:
        """Seal ``key`` into the store under ``key_id`` (replacing and invalidating any older key)."""
        nonce = os.urandom(12)
        ciphertext = self._aead.encrypt(nonce, key.material, self._aad(key_id, key.type, key.owner))
        self._store[key_id] = _Sealed(key.type, key.owner, nonce, ciphertext)
        self.policy.invalidate(key_id)

    def remove(self, key_id: KeyId) -> None:
        self._store.pop(key_id, None)
        self.policy.invalidate(key_id)

    def get(self, key_id: KeyId) -> Key:
        """The session key of ``key_id``: a plaintext hit, or unsealed from the store on a miss."""
        return self.policy.lookup(key_id, self._unseal)

    def _unseal(self, key_id: KeyId) -> Key:
        try:
            sealed = self._store[key_id]
        except KeyError:
            raise SkcError(f"no session key stored for {key_id}") from None
        try:
            material = self._aead.decrypt(
                sealed.nonce, sealed.ciphertext, self._aad(key_id, sealed.type, sealed.owner)
            )
        except InvalidTag:
            raise SkcError(f"sealed session key for {key_id} failed authentication") from None
        return Key(sealed.type, sealed.owner, material)


# --------------------------------------------------------------------------------------------------------
# The ON/OFF Markov model (seed 001 section 3.2, eq. 1-3)
# --------------------------------------------------------------------------------------------------------

Rate = int | float | Fraction


def state_probabilities(n: int, lam: Rate, mu: Rate) -> list[Fraction] | list[float]:
    """P_0 .. P_n: the stationary probability that i of n ON/OFF sources are ON (eq. 1 and 2).

    ``lam`` is the rate at which an OFF source turns ON, ``mu`` the rate at which an ON source turns OFF.
    P_i = P_0 C(n,i) (lam/mu)^i, i.e. a binomial(n, lam/(lam+mu)).  Exact fractions when both rates are
    ints or Fractions; floats (computed in log space, safe for large n) otherwise.
    """
    if n < 0 or lam <= 0 or mu <= 0:
        raise ValueError("need n >= 0 and positive rates")
    if isinstance(lam, float) or isinstance(mu, float):
        return _float_probabilities(n, float(lam), float(mu))
    rho = Fraction(lam) / Fraction(mu)
    weights = [math.comb(n, i) * rho**i for i in range(n + 1)]
    p0 = 1 / sum(weights, Fraction(0))
    return [w * p0 for w in weights]


def _float_probabilities(n: int, lam: float, mu: float, upto: int | None = None) -> list[float]:
    """P_0 .. P_upto (default P_n) as floats, from the binomial pmf in log space."""
    q = lam / (lam + mu)
    log_q, log_off, log_n = math.log(q), math.log1p(-q), math.lgamma(n + 1)
    return [
        math.exp(log_n - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * log_q + (n - i) * log_off)
        for i in range(min(n, n if upto is None else upto) + 1)
    ]


def hit_probability(x: int, n: int, lam: Rate, mu: Rate) -> Fraction | float:
    """F_n(x) of eq. 3: the probability that at most ``x`` of ``n`` sources are ON, i.e. that every active
    key fits in an ``x``-entry cache.  Seed 001 uses it as the expected SKC hit rate."""
    if x < 0:
        raise ValueError("cache size must be >= 0")
    if isinstance(lam, float) or isinstance(mu, float):
        if n < 0 or lam <= 0 or mu <= 0:
            raise ValueError("need n >= 0 and positive rates")
        return min(1.0, math.fsum(_float_probabilities(n, float(lam), float(mu), upto=x)))
    return sum(state_probabilities(n, lam, mu)[: x + 1], Fraction(0))


def cache_capacity(x: int, p: float, lam: Rate, mu: Rate, n_max: int = 1 << 24) -> int:
    """The largest n with F_n(x) >= p: how many sources (session keys) an x-entry cache supports at hit
    probability p.  F_n(x) falls as n grows, so this is a binary search; raises if even ``n_max`` fits."""
    if not 0 < p <= 1:
        raise ValueError("target hit probability must be in (0, 1]")

    def fits(n: int) -> bool:
        return float(hit_probability(x, n, float(lam), float(mu))) >= p

    if fits(n_max):
        raise ValueError(f"an {x}-entry cache supports more than n_max={n_max} sources at p={p}")
    low, high = x, n_max  # F_x(x) = 1 >= p, F_n_max(x) < p
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (mid, high) if fits(mid) else (low, mid)
    return low


def packet_hit_rate(x: int, n: int, lam: float, mu: float) -> float:
    """Expected LRU hit rate per packet when every ON source sends at one rate and ON periods are long.

    Refines eq. 3 for comparison with :func:`simulate`: a packet sees state i with probability
    i P_i / E[i] (busier states send more), and in state i > x an LRU holding x of the i active keys,
    each equally likely to send next, hits with probability x / i.  Compulsory misses at the start of an
    ON period are ignored, so the simulator approaches it as ``packets_per_on`` grows.
    """
    if n < 0 or lam <= 0 or mu <= 0:
        raise ValueError("need n >= 0 and positive rates")
    probabilities = _float_probabilities(n, lam, mu)
    mean_active = math.fsum(i * pi for i, pi in enumerate(probabilities))
    return math.fsum(pi * min(i, x) for i, pi in enumerate(probabilities)) / mean_active


# --------------------------------------------------------------------------------------------------------
# Trace-driven simulation of the same model
# --------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SimResult:
    """Outcome of one :func:`simulate` run."""

    stats: CacheStats
    fit_fraction: float  # share of simulated time with at most x sources ON: estimates F_n(x)
    packets: int
    simulated_time: float

    @property
    def hit_rate(self) -> float:
        return self.stats.hit_rate


def simulate(
    n: int,
    x: int,
    lam: float,
    mu: float,
    *,
    packets_per_on: float = 50.0,
    processes: int = 1,
    switch_rate: float = 0.0,
    prefetch_entries: int = 0,
    max_packets: int = 100_000,
    seed: int = 1,
) -> SimResult:
    """Run ``n`` ON/OFF sources per process through an ``x``-entry :class:`KeyCachePolicy`.

    Each source is one session key; it turns ON at rate ``lam`` and OFF at rate ``mu`` (exponential
    periods, as the model), and while ON sends packets at rate ``packets_per_on * mu`` (so an ON period
    carries ``packets_per_on`` packets on average), each a lookup of its key.  With ``processes`` > 1,
    processes take turns: the running one changes at ``switch_rate`` to another chosen at random, and only
    its sources send and change state (a descheduled process's communication phase pauses), so the first
    packet after a switch is a message for a process the adapter is not serving -- the prefetch trigger.
    Runs until ``max_packets`` lookups; the same seed gives the same trace.
    """
    if min(n, x, processes, max_packets) < 1 or lam <= 0 or mu <= 0 or packets_per_on <= 0:
        raise ValueError("simulate needs n, x, processes, max_packets >= 1 and positive rates")
    rng = random.Random(seed)
    policy: KeyCachePolicy[None] = KeyCachePolicy(x, 1, prefetch_entries)
    # start in the stationary distribution (each source ON with probability lam/(lam+mu)): no warm-up bias
    on: list[list[int]] = [[] for _ in range(processes)]  # ON source ids of each process
    off: list[list[int]] = [[] for _ in range(processes)]
    for process, source in itertools.product(range(processes), range(n)):
        (on if rng.random() < lam / (lam + mu) else off)[process].append(source)
    running, now, fit_time, packets = 0, 0.0, 0.0, 0
    send_rate = packets_per_on * mu

    def fetch(_: KeyId) -> None:
        return None

    while packets < max_packets:
        k = len(on[running])
        toggles = (n - k) * lam + k * mu
        total = toggles + switch_rate * (processes > 1) + k * send_rate
        dt = rng.expovariate(total)
        now += dt
        fit_time += dt if k <= x else 0.0
        pick = rng.random() * total
        if pick < k * send_rate:
            policy.lookup((running, rng.choice(on[running])), fetch)
            packets += 1
        elif pick < k * send_rate + toggles:
            _toggle(rng, on[running], off[running], k * mu / toggles)
        else:
            running = rng.choice([p for p in range(processes) if p != running])
    return SimResult(policy.stats, fit_time / now, packets, now)


def _toggle(rng: random.Random, on: list[int], off: list[int], p_off: float) -> None:
    """One ON/OFF transition: an ON source turns OFF with probability ``p_off``, else an OFF one turns ON."""
    source, other = (on, off) if rng.random() < p_off else (off, on)
    index = rng.randrange(len(source))
    source[index], source[-1] = source[-1], source[index]
    other.append(source.pop())
