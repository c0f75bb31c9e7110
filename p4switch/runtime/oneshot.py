"""One-shot action selector programming (P4Runtime spec, "One Shot Action Selector Programming"; servers
must support it): a table entry given with an ActionProfileActionSet gets a hidden group of hidden members
in the engine. Their ids start at HIDDEN_BASE, above what controllers use, and reads of members and groups
do not show them; reads of the entry give the action set back as written (the table entry handler keeps
each entry's hidden group with the entry, see table_entries.py)."""

from __future__ import annotations

import itertools
from collections import Counter
from dataclasses import dataclass, field

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
    action_set: p4r.ActionProfileActionSet
    member_ids: list[int] = field(default_factory=list)
    installed: bool = False
    """the group itself is in the engine (its members go in first)"""


class OneShots:
    """The hidden groups of one pipeline: made for an action set, released when their entry goes."""

    def __init__(self) -> None:
        self._ids = itertools.count(HIDDEN_BASE)
        self._live: Counter[str] = Counter()
        """hidden groups in use per profile: such a profile takes no members or groups from the client"""

    def clear(self) -> None:
        self._live.clear()

    def uses(self, profile: str) -> bool:
        return self._live[profile] > 0

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
        hidden = HiddenGroup(profile.name, next(self._ids), p4r.ActionProfileActionSet())
        hidden.action_set.CopyFrom(action_set)
        try:
            for action, _ in actions:
                member_id = next(self._ids)
                switch.member_insert(profile.name, member_id, action)
                hidden.member_ids.append(member_id)
            members = list(zip(hidden.member_ids, [w for _, w in actions], strict=True))
            switch.group_insert(profile.name, hidden.group_id, members, len(actions))
            hidden.installed = True
        except engine.EngineError:
            self._remove(switch, hidden)
            raise
        self._live[profile.name] += 1
        return hidden

    def release(self, switch: engine.Switch, hidden: HiddenGroup) -> None:
        """The group's entry is gone (or points elsewhere, or was never written): the group goes."""
        self._remove(switch, hidden)
        self._live[hidden.profile] -= 1

    @staticmethod
    def _remove(switch: engine.Switch, hidden: HiddenGroup) -> None:
        if hidden.installed:
            switch.group_delete(hidden.profile, hidden.group_id)
            hidden.installed = False
        for member_id in hidden.member_ids:
            switch.member_delete(hidden.profile, member_id)
        hidden.member_ids.clear()
