"""The packet replication engine (P4Runtime PacketReplicationEngineEntry): multicast groups and clone
sessions. Like p4lang/PI's pre_mc_mgr and pre_clone_mgr, the handler keeps which groups and sessions the
client wrote (and each group's opaque metadata), so a write checks existence with one lookup."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from finsy.proto import p4r

from p4switch.runtime import codec
from p4switch.runtime.entity import EntityHandler, Pipeline, Update, check_existence
from p4switch.runtime.errors import invalid, unimplemented


class Replication(EntityHandler):
    kind = "packet_replication_engine_entry"

    def __init__(self) -> None:
        self._groups: dict[int, bytes] = {}
        """multicast group id -> its metadata, for every group written"""
        self._sessions: set[int] = set()

    def reset(self) -> None:
        self._groups.clear()
        self._sessions.clear()

    def write(self, pipe: Pipeline, update_type: int, msg: p4r.PacketReplicationEngineEntry) -> None:
        if msg.WhichOneof("type") == "multicast_group_entry":
            self._write_group(pipe, update_type, msg.multicast_group_entry)
        else:
            self._write_session(pipe, update_type, msg.clone_session_entry)

    def _write_group(self, pipe: Pipeline, update_type: int, group: p4r.MulticastGroupEntry) -> None:
        gid = group.multicast_group_id
        _check_id(update_type, gid, gid in self._groups, "multicast group", "multicast_group_id")
        if update_type == Update.DELETE:
            pipe.switch.mcast_group_delete(gid)
            del self._groups[gid]
            return
        pipe.switch.mcast_group_set(gid, _replicas(group.replicas))
        self._groups[gid] = group.metadata

    def _write_session(self, pipe: Pipeline, update_type: int, session: p4r.CloneSessionEntry) -> None:
        sid = session.session_id
        _check_id(update_type, sid, sid in self._sessions, "clone session", "session_id")
        if update_type == Update.DELETE:
            pipe.switch.clone_session_delete(sid)
            self._sessions.discard(sid)
            return
        if session.packet_length_bytes < 0:
            raise invalid("packet_length_bytes must not be negative")
        pipe.switch.clone_session_set(sid, _replicas(session.replicas), session.class_of_service,
                                      session.packet_length_bytes)
        self._sessions.add(sid)

    def read(self, pipe: Pipeline, msg: p4r.PacketReplicationEngineEntry) -> Iterator[p4r.Entity]:
        if msg.WhichOneof("type") == "clone_session_entry":
            wanted = msg.clone_session_entry.session_id
            for session in pipe.switch.clone_sessions():
                if wanted in (0, session.session_id):
                    out = p4r.CloneSessionEntry(session_id=session.session_id,
                                                class_of_service=session.class_of_service,
                                                packet_length_bytes=session.packet_length_bytes)
                    for rep in session.replicas:
                        out.replicas.add(port=codec.encode_uint(rep.port), instance=rep.rid)
                    yield p4r.Entity(packet_replication_engine_entry=p4r.PacketReplicationEngineEntry(
                        clone_session_entry=out))
            return
        wanted = msg.multicast_group_entry.multicast_group_id
        for gid, replicas in sorted(pipe.switch.mcast_groups().items()):
            if wanted in (0, gid):
                group = p4r.MulticastGroupEntry(multicast_group_id=gid, metadata=self._groups.get(gid, b""))
                for port, rid in replicas:
                    group.replicas.add(port=codec.encode_uint(port), instance=rid)
                yield p4r.Entity(packet_replication_engine_entry=p4r.PacketReplicationEngineEntry(
                    multicast_group_entry=group))


def _check_id(update_type: int, ident: int, exists: bool, what: str, field: str) -> None:
    """A group or session id a write may use (0 is the wildcard of reads), existing unless inserted."""
    if ident == 0:
        raise invalid(f"{field} 0 is reserved for wildcard reads")
    check_existence(update_type, exists, f"{what} {ident}")


def _replicas(replicas: Iterable[p4r.Replica]) -> list[tuple[int, int]]:
    result: list[tuple[int, int]] = []
    for rep in replicas:
        if rep.backup_replicas:
            raise unimplemented("backup replicas are not supported by p4switch")
        port = codec.decode_uint(rep.port, 9, "replica port") if rep.WhichOneof("port_kind") == "port" \
            else rep.egress_port
        if port >= 512:
            raise invalid(f"replica port {port} does not fit v1model's 9-bit ports")
        if (port, rep.instance) in result:
            raise invalid(f"replica (port {port}, instance {rep.instance}) given twice")
        result.append((port, rep.instance))
    return result
