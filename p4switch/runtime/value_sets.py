"""Parser value sets (P4Runtime ValueSetEntry): all the members of one value set at once, each member
matching every field of the set exactly."""

from __future__ import annotations

from collections.abc import Iterator

from finsy.proto import p4r

from p4switch.runtime import codec
from p4switch.runtime.entity import EntityHandler, Pipeline, chosen, modify_only
from p4switch.runtime.errors import invalid, unimplemented


class ValueSets(EntityHandler):
    kind = "value_set_entry"

    def write(self, pipe: Pipeline, update_type: int, msg: p4r.ValueSetEntry) -> None:
        modify_only(update_type, "ValueSetEntry")
        vs = pipe.index.value_set(msg.value_set_id)
        members = []
        for member in msg.members:
            given = {m.field_id: m for m in member.match}
            if set(given) != {f.id for f in vs.fields}:
                raise invalid(f"a member of value set {vs.name} gives fields {sorted(given)}")
            if any(m.WhichOneof("field_match_type") != "exact" for m in given.values()):
                raise unimplemented(f"value set {vs.name}: only exact members are supported by p4switch")
            members.append(tuple(
                codec.decode_uint(given[f.id].exact.value, f.bitwidth, f"value set {vs.name} field {f.id}")
                for f in vs.fields))
        pipe.switch.value_set_set(vs.name, members)

    def read(self, pipe: Pipeline, msg: p4r.ValueSetEntry) -> Iterator[p4r.Entity]:
        for vs in chosen(pipe.index.value_sets, msg.value_set_id, pipe.index.value_set):
            out = p4r.ValueSetEntry(value_set_id=vs.id)
            for values in pipe.switch.value_set_get(vs.name):
                out.members.add().match.extend(
                    p4r.FieldMatch(field_id=f.id, exact=p4r.FieldMatch.Exact(value=codec.encode_uint(v)))
                    for f, v in zip(vs.fields, values, strict=True))
            yield p4r.Entity(value_set_entry=out)
