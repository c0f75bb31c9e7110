"""ibsm: the subnet manager of ibsec-fabric (DESIGN section 7, docs/subnet-manager.md).

One manager per concern hangs off a small core (:mod:`ibsm.core`): topology, routing and marking,
partitions and keys, traps and SIF, events. Everything that decides what to write is a pure function
returning the entries; only the core talks P4Runtime (finsy).
"""
