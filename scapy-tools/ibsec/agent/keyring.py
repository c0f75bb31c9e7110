"""The keys an agent holds (DESIGN section 5), loaded from its provisioning file or sent by the SM.

The provisioning file is an ``ibsec.keys`` key file (mode 0600, refused otherwise): this CA's CA_SK, and,
when no SM runs, the partition keys P_SK (owner: the P_Key) and the pairwise keys CA_SK_ij (owner: the two
CA GUIDs, smaller first). With an SM, only CA_SK is provisioned and the rest arrives wrapped under it.
Nothing here ever formats key bytes into a string.
"""

from __future__ import annotations

import threading
from pathlib import Path

from ibsec import keys


class MissingKey(Exception):
    """A connection needs a key this agent does not hold (the message names the scope, not a key)."""


class Keyring:
    """CA_SK, SM_SK, P_SK per partition and CA_SK_ij per peer CA."""

    def __init__(self, ca_guid: int) -> None:
        self.ca_guid = ca_guid
        self.ca_sk: keys.Key | None = None
        self.sm_sk: keys.Key | None = None
        self._partition: dict[int, keys.Key] = {}
        self._pairwise: dict[int, keys.Key] = {}
        self._lock = threading.Lock()

    def load(self, path: Path) -> None:
        """Take every key of the provisioning file that concerns this CA."""
        for key in keys.read_key_file(path):
            self.add(key)

    def add(self, key: keys.Key) -> None:
        with self._lock:
            if key.type is keys.KeyType.CA_SK and key.owner == (self.ca_guid,):
                self.ca_sk = key
            elif key.type is keys.KeyType.SM_SK:
                self.sm_sk = key
            elif key.type is keys.KeyType.P_SK and len(key.owner) == 1:
                self._partition[key.owner[0] & 0x7FFF] = key
            elif key.type is keys.KeyType.CA_SK_IJ and self.ca_guid in key.owner and len(key.owner) == 2:
                peer = key.owner[0] if key.owner[1] == self.ca_guid else key.owner[1]
                self._pairwise[peer] = key

    def partition_key(self, pkey: int) -> keys.Key:
        with self._lock:
            key = self._partition.get(pkey & 0x7FFF)
        if key is None:
            raise MissingKey(f"no P_SK for partition {pkey:#06x}")
        return key

    def pairwise_key(self, peer_guid: int) -> keys.Key:
        with self._lock:
            key = self._pairwise.get(peer_guid)
        if key is None:
            raise MissingKey(f"no CA_SK_ij shared with CA {peer_guid:#018x}")
        return key

    def describe(self) -> dict[str, object]:
        """Which keys are held (scopes and owners only)."""
        with self._lock:
            return {
                "ca_sk": self.ca_sk is not None,
                "sm_sk": self.sm_sk is not None,
                "partitions": sorted(f"{p:#06x}" for p in self._partition),
                "pairwise_peers": sorted(f"{g:#018x}" for g in self._pairwise),
            }
