"""Make a switch hold exactly the wanted entities, writing only the difference (no duplicates).

Used by every ready-handler run: on first contact, after a switch restart (empty tables: everything is
inserted) and after an SM restart (the switch still holds everything: nothing is written). Entities are
compared by their P4Runtime encoding, so what the switch returns and what the SM computed compare equal
whatever form the values were given in.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import finsy as fy
from finsy.proto import p4r

from .entries import OWNED_TABLES, Entity


@dataclass
class Diff:
    """Counts of what one reconcile wrote."""

    inserted: int = 0
    modified: int = 0
    deleted: int = 0
    unchanged: int = 0


def _identity(entity: p4r.Entity) -> tuple[object, ...]:
    te = entity.table_entry
    match = tuple(sorted((m.field_id, m.SerializeToString(deterministic=True)) for m in te.match))
    return te.table_id, match, te.priority


def _content(entity: p4r.Entity) -> bytes:
    return bytes(entity.table_entry.action.SerializeToString(deterministic=True))


def plan_writes(schema: fy.P4Schema, wanted: Sequence[Entity], existing: Iterable[Entity],
                diff: Diff) -> list[list[Entity]]:
    """The write batches that turn ``existing`` into ``wanted``: stale entries out, then new and changed
    ones in, in ``wanted``'s order (route groups before the routes that use them)."""
    have = {}
    for entity in existing:
        pb = entity.encode(schema)
        have[_identity(pb)] = (entity, _content(pb))
    want_ids = set()
    writes: list[Entity] = []
    for entity in wanted:
        pb = entity.encode(schema)
        ident = _identity(pb)
        want_ids.add(ident)
        current = have.get(ident)
        if current is None:
            writes.append(+entity)
            diff.inserted += 1
        elif current[1] != _content(pb):
            writes.append(~entity)
            diff.modified += 1
        else:
            diff.unchanged += 1
    drops = [-entity for ident, (entity, _) in have.items() if ident not in want_ids]
    diff.deleted += len(drops)
    return [batch for batch in (drops, writes) if batch]


async def read_owned(sw: fy.Switch) -> list[Entity]:
    """Everything the SM owns on ``sw``: its tables' entries."""
    found: list[Entity] = []
    requests = [fy.P4TableEntry(t) for t in OWNED_TABLES]
    async for entity in sw.read(requests):  # type: ignore[attr-defined]  # finsy: async generator
        found.append(entity)
    return found


async def reconcile(sw: fy.Switch, wanted: Sequence[Entity], existing: Sequence[Entity] | None = None
                    ) -> Diff:
    """Write the difference between ``wanted`` and what ``sw`` holds; returns the counts."""
    if existing is None:
        existing = await read_owned(sw)
    diff = Diff()
    for batch in plan_writes(sw.p4info, wanted, existing, diff):
        await sw.write(batch)
    return diff
