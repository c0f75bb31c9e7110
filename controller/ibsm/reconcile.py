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

from .entries import OWNED_TABLES, ROUTE_SELECTOR, Entity


@dataclass
class Diff:
    """Counts of what one reconcile wrote."""

    inserted: int = 0
    modified: int = 0
    deleted: int = 0
    unchanged: int = 0


def _identity(entity: p4r.Entity) -> tuple[object, ...]:
    kind = entity.WhichOneof("entity")
    if kind == "table_entry":
        te = entity.table_entry
        match = tuple(sorted((m.field_id, m.SerializeToString(deterministic=True)) for m in te.match))
        return kind, te.table_id, match, te.priority
    if kind == "action_profile_member":
        return kind, entity.action_profile_member.action_profile_id, entity.action_profile_member.member_id
    return kind, entity.action_profile_group.action_profile_id, entity.action_profile_group.group_id


def _content(entity: p4r.Entity) -> bytes:
    kind = entity.WhichOneof("entity")
    if kind == "table_entry":
        return bytes(entity.table_entry.action.SerializeToString(deterministic=True))
    if kind == "action_profile_member":
        return bytes(entity.action_profile_member.action.SerializeToString(deterministic=True))
    members = sorted((m.member_id, m.weight) for m in entity.action_profile_group.members)
    return repr(members).encode()


def plan_writes(schema: fy.P4Schema, wanted: Sequence[Entity], existing: Iterable[Entity],
                diff: Diff) -> list[list[Entity]]:
    """The write batches that turn ``existing`` into ``wanted``, in an order the switch accepts:
    members, groups, stale table entries out, table entries in, stale groups and members out."""
    have = {}
    for entity in existing:
        pb = entity.encode(schema)
        have[_identity(pb)] = (entity, _content(pb))
    want_ids = set()
    stages: dict[str, list[Entity]] = {k: [] for k in ("members", "groups", "tables", "drop_tables",
                                                             "drop_groups", "drop_members")}
    stage_of = {fy.P4ActionProfileMember: "members", fy.P4ActionProfileGroup: "groups",
                fy.P4TableEntry: "tables"}
    for entity in wanted:
        pb = entity.encode(schema)
        ident = _identity(pb)
        want_ids.add(ident)
        current = have.get(ident)
        stage = stages[stage_of[type(entity)]]
        if current is None:
            stage.append(+entity)
            diff.inserted += 1
        elif current[1] != _content(pb):
            stage.append(~entity)
            diff.modified += 1
        else:
            diff.unchanged += 1
    drop_of = {fy.P4ActionProfileMember: "drop_members", fy.P4ActionProfileGroup: "drop_groups",
               fy.P4TableEntry: "drop_tables"}
    for ident, (entity, _) in have.items():
        if ident not in want_ids:
            stages[drop_of[type(entity)]].append(-entity)
            diff.deleted += 1
    order = ("members", "groups", "drop_tables", "tables", "drop_groups", "drop_members")
    return [stages[name] for name in order if stages[name]]


async def read_owned(sw: fy.Switch) -> list[Entity]:
    """Everything the SM owns on ``sw``: its tables' entries and the route selector's members and groups."""
    found: list[Entity] = []
    requests: list[Entity] = [fy.P4TableEntry(t) for t in OWNED_TABLES]
    requests += [fy.P4ActionProfileMember(ROUTE_SELECTOR), fy.P4ActionProfileGroup(ROUTE_SELECTOR)]
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
