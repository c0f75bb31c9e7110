"""Action profile members and groups (P4Runtime ActionProfileMember / ActionProfileGroup), and what table
entries need from the profiles: that a member or group they point at exists, and the hidden groups of
one-shot entries.

A profile is programmed either by the client (members and groups) or with one-shot action sets, never
both (the specification's rule); ``ActionProfiles`` keeps count of both kinds per profile so checking
costs one lookup, not a listing of every member."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from functools import partial

from finsy.proto import p4r

from p4switch.engine import api as engine
from p4switch.runtime import codec
from p4switch.runtime.entity import EntityHandler, Pipeline, Update, chosen, found
from p4switch.runtime.errors import invalid, not_found
from p4switch.runtime.oneshot import HIDDEN_BASE, HiddenGroup, OneShots, is_hidden
from p4switch.runtime.p4info import Profile, Table


class ActionProfiles:
    """The per-profile state the member, group and table entry handlers share."""

    def __init__(self) -> None:
        self.oneshots = OneShots()
        self._client_members: Counter[str] = Counter()
        """members the client inserted, per profile: such a profile takes no action sets"""

    def reset(self) -> None:
        self.oneshots.clear()
        self._client_members.clear()

    def check_client_write(self, profile: Profile, ident: int) -> None:
        """Members and groups written by the client: not in a profile programmed with action sets, and
        not with the ids the hidden ones use."""
        if self.oneshots.uses(profile.name):
            raise invalid(f"{profile.name} is programmed with action sets: no members and groups")
        if is_hidden(ident):
            raise invalid(f"ids from {HIDDEN_BASE:#x} up are reserved by p4switch")

    def member_written(self, profile: Profile, update_type: int) -> None:
        if update_type == Update.INSERT:
            self._client_members[profile.name] += 1
        elif update_type == Update.DELETE:
            self._client_members[profile.name] -= 1

    def check_reference(self, pipe: Pipeline, table: Table, action: object) -> None:
        """NOT_FOUND (as the spec asks) for an entry pointing at a member or group not inserted yet."""
        lookup: Callable[[str, int], object]
        if isinstance(action, engine.MemberRef):
            kind, ident, lookup = "member", action.member_id, pipe.switch.member
        elif isinstance(action, engine.GroupRef):
            kind, ident, lookup = "group", action.group_id, pipe.switch.group
        else:
            return
        profile = pipe.index.profile(table.implementation_id).name
        if not found(partial(lookup, profile, ident)):
            raise not_found(f"{kind} {ident} of {profile} does not exist")

    def oneshot(self, pipe: Pipeline, table: Table, action_set: p4r.ActionProfileActionSet) -> HiddenGroup:
        """A hidden group for a table entry given with an action set."""
        profile = pipe.index.profile(table.implementation_id)
        if not profile.with_selector:
            raise invalid(f"table {table.name}: action sets need an action selector")
        if self._client_members[profile.name]:
            raise invalid(f"{profile.name} is programmed with members and groups: no action sets")
        return self.oneshots.create(pipe.switch, pipe.index, table, profile, action_set)


class ActionProfileMembers(EntityHandler):
    kind = "action_profile_member"

    def __init__(self, profiles: ActionProfiles) -> None:
        self.profiles = profiles

    def write(self, pipe: Pipeline, update_type: int, msg: p4r.ActionProfileMember) -> None:
        switch, index = pipe.switch, pipe.index
        profile = index.profile(msg.action_profile_id)
        self.profiles.check_client_write(profile, msg.member_id)
        if update_type == Update.DELETE:
            switch.member_delete(profile.name, msg.member_id)
        else:
            action = codec.decode_action(index, None, msg.action)
            if not any(msg.action.action_id in index.table(t).actions for t in profile.table_ids):
                raise invalid(f"action {action.name} is not an action of the tables of {profile.name}")
            write = switch.member_insert if update_type == Update.INSERT else switch.member_modify
            write(profile.name, msg.member_id, action)
        self.profiles.member_written(profile, update_type)

    def read(self, pipe: Pipeline, msg: p4r.ActionProfileMember) -> Iterator[p4r.Entity]:
        switch, index = pipe.switch, pipe.index
        for profile in chosen(index.profiles, msg.action_profile_id, index.profile):
            members = found(partial(switch.member, profile.name, msg.member_id)) if msg.member_id else \
                switch.members(profile.name)
            for member in members:
                if not is_hidden(member.member_id):
                    yield p4r.Entity(action_profile_member=p4r.ActionProfileMember(
                        action_profile_id=profile.id, member_id=member.member_id,
                        action=codec.encode_action(index, member.action)))


class ActionProfileGroups(EntityHandler):
    kind = "action_profile_group"

    def __init__(self, profiles: ActionProfiles) -> None:
        self.profiles = profiles

    def write(self, pipe: Pipeline, update_type: int, msg: p4r.ActionProfileGroup) -> None:
        switch = pipe.switch
        profile = pipe.index.profile(msg.action_profile_id)
        self.profiles.check_client_write(profile, msg.group_id)
        if update_type == Update.DELETE:
            switch.group_delete(profile.name, msg.group_id)
            return
        if not profile.with_selector:
            raise invalid(f"action profile {profile.name} has no selector: it takes no groups")
        members = []
        for m in msg.members:
            if m.weight < 1:
                raise invalid(f"member {m.member_id} of group {msg.group_id}: weight must be >= 1")
            members.append((m.member_id, m.weight))
        if profile.max_group_size and msg.max_size > profile.max_group_size:
            raise invalid(f"max_size {msg.max_size} exceeds the profile's max group size")
        write = switch.group_insert if update_type == Update.INSERT else switch.group_modify
        write(profile.name, msg.group_id, members, msg.max_size)

    def read(self, pipe: Pipeline, msg: p4r.ActionProfileGroup) -> Iterator[p4r.Entity]:
        switch, index = pipe.switch, pipe.index
        profiles = [index.profile(msg.action_profile_id)] if msg.action_profile_id else \
            [p for p in index.profiles.values() if p.with_selector]
        for profile in profiles:
            groups = found(partial(switch.group, profile.name, msg.group_id)) if msg.group_id else \
                switch.groups(profile.name)
            for group in groups:
                if not is_hidden(group.group_id):
                    out = p4r.ActionProfileGroup(action_profile_id=profile.id, group_id=group.group_id,
                                                 max_size=group.max_size)
                    for member_id, weight in group.members:
                        out.members.add(member_id=member_id, weight=weight)
                    yield p4r.Entity(action_profile_group=out)
