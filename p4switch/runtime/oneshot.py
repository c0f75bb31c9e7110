"""One-shot action selector programming (P4Runtime spec, "One Shot Action Selector Programming"; servers
must support it): a table entry given with an ActionProfileActionSet gets a hidden group of hidden members
in the engine. Their ids start at HIDDEN_BASE, above what controllers use, and reads of members and groups
do not show them; reads of the entry give the action set back as written."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from finsy.proto import p4r

from p4switch.engine import api as engine
from p4switch.runtime import codec
from p4switch.runtime.errors import invalid
from p4switch.runtime.p4info import P4InfoIndex, Profile, Table

HIDDEN_BASE = 1 << 31


def is_hidden(ident: int) -> bool:
    return ident >= HIDDEN_BASE


@dataclass
class HiddenGroup:
    profile: str
    group_id: int
    member_ids: list[int]
    action_set: p4r.ActionProfileActionSet


class OneShots:
    """The hidden groups of the one-shot entries of one pipeline, by entry key."""

    def __init__(self) -> None:
        self._by_entry: dict[codec.EntryKey, HiddenGroup] = {}
        self._ids = itertools.count(HIDDEN_BASE)

    def clear(self) -> None:
        self._by_entry.clear()

    def uses(self, profile: str) -> bool:
        return any(h.profile == profile for h in self._by_entry.values())

    def create(self, switch: engine.Switch, index: P4InfoIndex, table: Table, profile: Profile,
               action_set: p4r.ActionProfileActionSet) -> HiddenGroup:
        """Members and a group in the engine for ``action_set`` (not yet used by any entry)."""
        if not action_set.action_profile_actions:
            raise invalid(f"table {table.name}: an empty action set")
        actions = []
        for item in action_set.action_profile_actions:
            if item.weight < 1:
                raise invalid(f"table {table.name}: action set weights must be >= 1")
            actions.append((codec.decode_action(index, table, item.action), item.weight))
        hidden = HiddenGroup(profile.name, next(self._ids), [], p4r.ActionProfileActionSet())
        hidden.action_set.CopyFrom(action_set)
        try:
            for action, _ in actions:
                member_id = next(self._ids)
                switch.member_insert(profile.name, member_id, action)
                hidden.member_ids.append(member_id)
            members = list(zip(hidden.member_ids, [w for _, w in actions], strict=True))
            switch.group_insert(profile.name, hidden.group_id, members, len(actions))
        except engine.EngineError:
            self.release(switch, hidden)
            raise
        return hidden

    def bind(self, key: codec.EntryKey, hidden: HiddenGroup, switch: engine.Switch) -> None:
        """``hidden`` now belongs to the entry ``key``; the group it had before goes."""
        old = self._by_entry.pop(key, None)
        self._by_entry[key] = hidden
        if old is not None:
            self.release(switch, old)

    def drop(self, key: codec.EntryKey, switch: engine.Switch) -> None:
        """The entry ``key`` was deleted (or now points elsewhere): its hidden group goes."""
        old = self._by_entry.pop(key, None)
        if old is not None:
            self.release(switch, old)

    def action_set(self, key: codec.EntryKey) -> p4r.ActionProfileActionSet | None:
        hidden = self._by_entry.get(key)
        return hidden.action_set if hidden else None

    @staticmethod
    def release(switch: engine.Switch, hidden: HiddenGroup) -> None:
        groups = {g.group_id for g in switch.groups(hidden.profile)}
        if hidden.group_id in groups:
            switch.group_delete(hidden.profile, hidden.group_id)
        for member_id in hidden.member_ids:
            switch.member_delete(hidden.profile, member_id)
