"""Counters of an agent: every received frame is counted exactly once, as dropped or as taken.

The drop reasons are the ones an operator (and the tests) ask about: a frame that fails a check is never
delivered to the application, and the counter says which check stopped it. Frames that pass are counted by
what they were (:class:`Taken`), so ``rx_frames`` = the sum of all drops + the sum of all taken, which the
fuzz suite checks: a frame that is neither is a bug.
"""

from __future__ import annotations

import enum
import threading
from collections import Counter


class Drop(enum.Enum):
    """Why a received frame was dropped."""

    BAD_PKEY = "bad_pkey"  # P_Key not in the P_Key table (trap 257)
    BAD_QKEY = "bad_qkey"  # UD Q_Key does not match the QP's (trap 258)
    MAC_FAILURE = "mac_failure"  # GCM tag / GMAC check failed (or the ICRC in mode 0)
    REPLAY = "replay"  # duplicate or stale PSN under the replay window
    MALFORMED = "malformed"  # truncated, unknown opcode, bad lengths, bad MAD
    BAD_ICRC = "bad_icrc"  # ICRC mismatch (corruption; in mode 0 also any modified frame)
    BAD_MODE = "bad_mode"  # security mode differs from the QP's (e.g. a downgrade to mode 0)
    NO_QP = "no_qp"  # destination QP does not exist or is not connected
    BAD_RKEY = "bad_rkey"  # RDMA WRITE with an unknown R_Key
    WRONG_PD = "wrong_pd"  # RDMA WRITE with the R_Key of a region in another protection domain
    UNAUTHENTICATED_WRITE = "unauthenticated_write"  # to a region for authenticated access, in mode 0 or 4
    OUT_OF_BOUNDS = "out_of_bounds"  # RDMA WRITE outside its memory region
    MEMORY_KEY = "memory_key"  # extended memory protection: no proof of the (sub-)region key
    PSN_SEQUENCE = "psn_sequence"  # RC request ahead of the expected PSN (a frame was lost)
    BAD_AUTH = "bad_auth"  # MAD with a missing or invalid authentication trailer (SM's, or CM on a secure
    # connection)
    INJECTED = "injected"  # dropped on purpose by the fault-injection control command
    CM_REFUSED = "cm_refused"  # CM request refused (answered with REJ or SIDR_REP status 2)
    CM_STALE = "cm_stale"  # CM reply or message for no connection or attempt of ours
    RNR = "rnr"  # receive queue full: RC answers RNR NAK (the sender retries), UD drops
    CM_LIMIT = "cm_limit"  # CM request over an admission limit (half-open, per source, keyless share)


class Taken(enum.Enum):
    """What a received frame that was not dropped turned out to be."""

    NOT_ROCE = "not_roce"  # not RoCEv2: not ours to judge (ignored)
    NOT_FOR_US = "not_for_us"  # RoCEv2 to another GID (ignored)
    DATA = "data"  # a request or datagram verified and taken (delivered, written, or part of a message)
    ACK = "ack"  # an acknowledgement verified
    RNR_NAK = "rnr_nak"  # a receiver-not-ready NAK verified: the request goes again after the RNR timer
    CM = "cm"  # a CM MAD acted upon
    MAD = "mad"  # a vendor MAD from the SM verified and applied
    MAD_IGNORED = "mad_ignored"  # a well-formed MAD of a class this port does not serve


Outcome = Drop | Taken


class Counters:
    """Thread-safe named counters: ``drops`` by :class:`Drop` reason, ``taken`` by :class:`Taken` kind and
    free-form ``stats``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._drops: Counter[str] = Counter()
        self._taken: Counter[str] = Counter()
        self._stats: Counter[str] = Counter()

    def outcome(self, outcome: Outcome) -> None:
        """Count what became of one received frame."""
        with self._lock:
            (self._drops if isinstance(outcome, Drop) else self._taken)[outcome.value] += 1

    def bump(self, name: str, amount: int = 1) -> None:
        """Add ``amount`` to the statistic ``name`` (frames sent, bytes delivered, traps, ...)."""
        with self._lock:
            self._stats[name] += amount

    def dropped(self, reason: Drop) -> int:
        """How many frames were dropped for ``reason``."""
        with self._lock:
            return self._drops[reason.value]

    def stat(self, name: str) -> int:
        """The current value of the statistic ``name``."""
        with self._lock:
            return self._stats[name]

    def unaccounted(self) -> int:
        """Frames received but neither dropped nor taken (0 unless a frame is still being handled)."""
        with self._lock:
            return self._stats["rx_frames"] - sum(self._drops.values()) - sum(self._taken.values())

    def snapshot(self) -> dict[str, dict[str, int]]:
        """All counters, every drop reason and kind of frame taken present (zero when none happened)."""
        with self._lock:
            drops = {reason.value: self._drops[reason.value] for reason in Drop}
            taken = {kind.value: self._taken[kind.value] for kind in Taken}
            return {"drops": drops, "taken": taken, "stats": dict(sorted(self._stats.items()))}
