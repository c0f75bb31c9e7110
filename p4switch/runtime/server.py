"""The P4Runtime gRPC service of one p4switch device (P4Runtime specification v1.4).

RPC-level checks come first, in the order the specification lists them (device id, primary client,
pipeline set); then every update of a Write batch is applied on its own and reported with one p4.v1.Error
per update (the call fails with UNKNOWN when any update failed). Reads and writes are serialized by one
lock, which makes the processing of requests strictly serializable as the specification requires."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent import futures
from dataclasses import dataclass
from typing import TypeVar

import grpc
from finsy.proto import p4d, p4r, p4r_grpc, rpc_status
from google.protobuf import any_pb2

from p4switch.engine import api as engine
from p4switch.runtime import codec, device_config
from p4switch.runtime.arbitration import CLOSE, Arbitration, Connection
from p4switch.runtime.device import Device
from p4switch.runtime.digests import DigestEngine
from p4switch.runtime.errors import P4RuntimeError, already_exists, invalid, not_found, unimplemented
from p4switch.runtime.oneshot import HIDDEN_BASE, OneShots, is_hidden
from p4switch.runtime.p4info import Array, P4InfoIndex, Profile, Table

API_VERSION = "1.4.1"
MAX_MESSAGE = 256 << 20
"""Largest request/response: big programs and batches fit (gRPC's default is 4 MiB)."""
T = TypeVar("T")
Update = p4r.Update


@dataclass
class Pipeline:
    """The committed ForwardingPipelineConfig with its P4Info index."""

    config: p4r.ForwardingPipelineConfig
    index: P4InfoIndex


class P4RuntimeService(p4r_grpc.P4RuntimeServicer):
    """P4Runtime for one Device."""

    def __init__(self, device: Device, log: logging.Logger) -> None:
        self.device = device
        self.log = log
        self.arbitration = Arbitration(device.device_id, log)
        self.digests = DigestEngine(self._send_digest_list, log)
        self.pipeline: Pipeline | None = None
        self._saved: tuple[p4r.ForwardingPipelineConfig, engine.Switch, P4InfoIndex] | None = None
        self._lock = threading.RLock()
        self._conns: set[Connection] = set()
        self._mcast_metadata: dict[int, bytes] = {}
        self._entry_cookies: dict[codec.EntryKey, tuple[int, bytes]] = {}
        self.oneshots = OneShots()
        device.to_cpu = self._packet_in

    # ====================================================================== capabilities / pipeline
    def Capabilities(self, request: p4r.CapabilitiesRequest, context: grpc.ServicerContext
                     ) -> p4r.CapabilitiesResponse:
        return p4r.CapabilitiesResponse(p4runtime_api_version=API_VERSION)

    def SetForwardingPipelineConfig(self, request: p4r.SetForwardingPipelineConfigRequest,
                                    context: grpc.ServicerContext) -> p4r.SetForwardingPipelineConfigResponse:
        Action = p4r.SetForwardingPipelineConfigRequest
        try:
            self.arbitration.check_primary(request.device_id, request.role,
                                           request.election_id if request.HasField("election_id") else None)
            with self._lock:
                if request.action == Action.COMMIT:
                    self._commit_saved(request)
                elif request.action in (Action.VERIFY, Action.VERIFY_AND_SAVE, Action.VERIFY_AND_COMMIT):
                    prepared = self._prepare(request)
                    if request.action == Action.VERIFY_AND_SAVE:
                        self._saved = prepared
                    elif request.action == Action.VERIFY_AND_COMMIT:
                        self._commit(*prepared)
                elif request.action == Action.RECONCILE_AND_COMMIT:
                    raise unimplemented("RECONCILE_AND_COMMIT is not supported by p4switch")
                else:
                    raise invalid("SetForwardingPipelineConfig needs an action")
        except P4RuntimeError as err:
            self.log.warning("SetForwardingPipelineConfig failed: %s", err.message)
            context.abort(err.code, err.message)
        return p4r.SetForwardingPipelineConfigResponse()

    def _prepare(self, request: p4r.SetForwardingPipelineConfigRequest
                 ) -> tuple[p4r.ForwardingPipelineConfig, engine.Switch, P4InfoIndex]:
        if not request.HasField("config") or not request.config.HasField("p4info"):
            raise invalid("the config with its P4Info is required")
        config = p4r.ForwardingPipelineConfig()
        config.CopyFrom(request.config)
        if not config.p4_device_config:  # keep the running program (e.g. one given on the command line)
            config.p4_device_config = self.device.device_config
        if not config.p4_device_config:
            raise invalid("p4_device_config is empty: give the program JSON from p4switch-cc")
        program = device_config.unwrap(config.p4_device_config)
        if program.wrapped:
            self.log.info("p4_device_config is a %s (reassign %s, extras %s): loading its device_data",
                          device_config.MESSAGE_NAME, program.reassign, program.extras or "none")
        try:
            switch = self.device.load(program.program)
        except engine.EngineError as err:
            raise invalid(f"the device config cannot be loaded: {err}") from None
        index = P4InfoIndex.build(config.p4info)
        _check_names(switch, index)
        return config, switch, index

    def _commit(self, config: p4r.ForwardingPipelineConfig, switch: engine.Switch,
                index: P4InfoIndex) -> None:
        self.digests.reset()
        self._mcast_metadata.clear()
        self._entry_cookies.clear()
        self.oneshots.clear()
        switch.digest_sink = self._digest_sink(index)
        self.device.install(switch, device_config.unwrap(config.p4_device_config).program)
        self.pipeline = Pipeline(config, index)
        self.log.info("pipeline committed: %s (%d tables)", config.p4info.pkg_info.name or "program",
                      len(index.tables))

    def _commit_saved(self, request: p4r.SetForwardingPipelineConfigRequest) -> None:
        if request.HasField("config"):
            raise invalid("COMMIT takes no config: it commits the one saved by VERIFY_AND_SAVE")
        if self._saved is None:
            raise not_found("no saved config to commit (VERIFY_AND_SAVE first)")
        self._commit(*self._saved)
        self._saved = None

    def GetForwardingPipelineConfig(self, request: p4r.GetForwardingPipelineConfigRequest,
                                    context: grpc.ServicerContext) -> p4r.GetForwardingPipelineConfigResponse:
        if request.device_id != self.device.device_id:
            context.abort(grpc.StatusCode.NOT_FOUND, f"unknown device id {request.device_id}")
        pipe = self.pipeline
        response = p4r.GetForwardingPipelineConfigResponse()
        if pipe is None:
            return response
        Type = p4r.GetForwardingPipelineConfigRequest
        config = response.config
        if pipe.config.HasField("cookie"):
            config.cookie.CopyFrom(pipe.config.cookie)
        if request.response_type in (Type.ALL, Type.P4INFO_AND_COOKIE):
            config.p4info.CopyFrom(pipe.config.p4info)
        if request.response_type in (Type.ALL, Type.DEVICE_CONFIG_AND_COOKIE):
            config.p4_device_config = pipe.config.p4_device_config
        response.config.SetInParent()
        return response

    # ====================================================================================== Write
    def Write(self, request: p4r.WriteRequest, context: grpc.ServicerContext) -> p4r.WriteResponse:
        try:
            self.arbitration.check_primary(request.device_id, request.role,
                                           request.election_id if request.HasField("election_id") else None)
            pipe = self._require_pipeline()
            if request.atomicity != p4r.WriteRequest.CONTINUE_ON_ERROR:
                raise unimplemented("only CONTINUE_ON_ERROR batches are supported by p4switch")
        except P4RuntimeError as err:
            context.abort(err.code, err.message)
        errors: list[P4RuntimeError | None] = []
        with self._lock:
            for update in request.updates:
                errors.append(self._apply(pipe, update))
        if any(errors):
            _abort_with_details(context, "Write failure.", errors)
        return p4r.WriteResponse()

    def _require_pipeline(self) -> Pipeline:
        if self.pipeline is None or self.device.switch is None:
            raise P4RuntimeError(grpc.StatusCode.FAILED_PRECONDITION,
                                 "No forwarding pipeline config set for this device")
        return self.pipeline

    def _apply(self, pipe: Pipeline, update: p4r.Update) -> P4RuntimeError | None:
        kind = update.entity.WhichOneof("entity")
        try:
            if update.type == Update.UNSPECIFIED:
                raise invalid("update type is UNSPECIFIED")
            handler = self._writers.get(kind or "")
            if handler is None:
                raise unimplemented(f"writing {kind} is not supported by p4switch")
            handler(self, pipe, update.type, getattr(update.entity, kind or ""))
        except P4RuntimeError as err:
            self.log.debug("write %s %s failed: %s", Update.Type.Name(update.type), kind, err.message)
            return err
        except engine.EngineError as err:
            return P4RuntimeError.from_engine(err)
        self.log.debug("write %s %s ok", Update.Type.Name(update.type), kind)
        return None

    def _switch(self) -> engine.Switch:
        switch = self.device.switch
        assert switch is not None, "checked by _require_pipeline"
        return switch

    # ------------------------------------------------------------------------------- tables
    def _write_table_entry(self, pipe: Pipeline, kind: int, msg: p4r.TableEntry) -> None:
        switch, index = self._switch(), pipe.index
        table = index.table(msg.table_id)
        if msg.is_default_action:
            self._write_default(pipe, kind, table, msg)
            return
        if table.is_const and (kind != Update.MODIFY or msg.HasField("action")):
            raise P4RuntimeError(grpc.StatusCode.PERMISSION_DENIED,
                                 f"table {table.name} is const: its entries cannot be changed")
        if kind != Update.DELETE and msg.action.WhichOneof("type") == "action_profile_action_set":
            self._write_oneshot(pipe, kind, table, msg)
            return
        if kind == Update.INSERT:
            entry = codec.decode_entry(index, msg)[1]
            self._check_reference(pipe, table, entry.action)
            switch.table_insert(table.name, entry)
            self._remember_cookies(table, entry.match, entry.priority, msg)
            return
        if msg.is_const:
            raise invalid("is_const must be false in a write")
        _, match, priority = codec.decode_key(index, msg)
        if kind == Update.DELETE:
            switch.table_delete(table.name, engine.TableEntry(match, _NO_ACTION, priority))
            self._entry_cookies.pop(codec.entry_key(table, match, priority), None)
            self.oneshots.drop(codec.entry_key(table, match, priority), switch)
            return
        action = codec.decode_table_action(index, table, msg) if msg.HasField("action") else \
            _find_entry(switch, table, match, priority).action
        self._check_reference(pipe, table, action)
        counter, meter = codec.direct_state(table, msg)
        switch.table_modify(table.name, engine.TableEntry(match, action, priority, counter_data=counter,
                                                          meter_config=meter))
        if msg.HasField("action"):
            self.oneshots.drop(codec.entry_key(table, match, priority), switch)
        self._remember_cookies(table, match, priority, msg)

    def _write_oneshot(self, pipe: Pipeline, kind: int, table: Table, msg: p4r.TableEntry) -> None:
        """INSERT/MODIFY of an entry given with an action set: it points at a new hidden group."""
        switch, index = self._switch(), pipe.index
        _, match, priority = codec.decode_key(index, msg)
        profile = index.profile(table.implementation_id)
        if not profile.with_selector:
            raise invalid(f"table {table.name}: action sets need an action selector")
        if any(not is_hidden(m.member_id) for m in switch.members(profile.name)):
            raise invalid(f"{profile.name} is programmed with members and groups: no action sets")
        exists = any(e.match == match and e.priority == priority for e in switch.table_entries(table.name))
        if kind == Update.INSERT and exists:
            raise already_exists(f"the entry exists in table {table.name}")
        if kind == Update.MODIFY and not exists:
            raise not_found(f"no such entry in table {table.name}")
        hidden = self.oneshots.create(switch, index, table, profile, msg.action.action_profile_action_set)
        counter, meter = codec.direct_state(table, msg)
        entry = engine.TableEntry(match, engine.GroupRef(hidden.group_id), priority, counter_data=counter,
                                  meter_config=meter)
        try:
            (switch.table_insert if kind == Update.INSERT else switch.table_modify)(table.name, entry)
        except engine.EngineError:
            self.oneshots.release(switch, hidden)
            raise
        self.oneshots.bind(codec.entry_key(table, match, priority), hidden, switch)
        self._remember_cookies(table, match, priority, msg)

    def _remember_cookies(self, table: Table, match: dict[str, engine.Match], priority: int,
                          msg: p4r.TableEntry) -> None:
        """The opaque controller_metadata and metadata of an entry, returned on reads (the engine has
        no use for them)."""
        key = codec.entry_key(table, match, priority)
        if msg.controller_metadata or msg.metadata:
            self._entry_cookies[key] = (msg.controller_metadata, msg.metadata)
        else:
            self._entry_cookies.pop(key, None)

    def _check_reference(self, pipe: Pipeline, table: Table, action: object) -> None:
        """NOT_FOUND (as the spec asks) for an entry pointing at a member or group not inserted yet."""
        switch = self._switch()
        if isinstance(action, engine.MemberRef):
            profile = pipe.index.profile(table.implementation_id).name
            if all(m.member_id != action.member_id for m in switch.members(profile)):
                raise not_found(f"member {action.member_id} of {profile} does not exist")
        elif isinstance(action, engine.GroupRef):
            profile = pipe.index.profile(table.implementation_id).name
            if all(g.group_id != action.group_id for g in switch.groups(profile)):
                raise not_found(f"group {action.group_id} of {profile} does not exist")

    def _write_default(self, pipe: Pipeline, kind: int, table: Table, msg: p4r.TableEntry) -> None:
        codec.decode_key(pipe.index, msg)
        if kind != Update.MODIFY:
            raise invalid("the default entry can only be modified (no INSERT or DELETE)")
        if table.const_default_action_id:
            raise P4RuntimeError(grpc.StatusCode.PERMISSION_DENIED,
                                 f"the default action of table {table.name} is const")
        switch = self._switch()
        if not msg.HasField("action"):
            switch.table_reset_default(table.name)
            return
        if msg.action.WhichOneof("type") != "action":
            raise invalid("the default entry of an indirect table is a const NoAction")
        switch.table_set_default(table.name, codec.decode_action(pipe.index, table, msg.action.action,
                                                                 default=True))

    def _read_table_entry(self, pipe: Pipeline, msg: p4r.TableEntry) -> Iterator[p4r.Entity]:
        switch, index = self._switch(), pipe.index
        tables = _chosen(index.tables, msg.table_id, index.table)
        counter, meter = msg.HasField("counter_data"), msg.HasField("meter_config")
        key = codec.decode_key(index, msg)[1:] if msg.table_id and msg.match else None
        for table in tables:
            if msg.is_default_action:
                default = engine.TableEntry({}, switch.table_get_default(table.name), is_default=True)
                yield p4r.Entity(table_entry=codec.encode_entry(index, table, default, counter=False,
                                                                meter=False))
                continue
            for entry in switch.table_entries(table.name):
                if entry.is_default or (key is not None and (entry.match, entry.priority) != key):
                    continue
                out = codec.encode_entry(index, table, entry, counter=counter, meter=meter)
                entry_key = codec.entry_key(table, entry.match, entry.priority)
                action_set = self.oneshots.action_set(entry_key)
                if action_set is not None:
                    out.action.action_profile_action_set.CopyFrom(action_set)
                cookies = self._entry_cookies.get(entry_key)
                if cookies:
                    out.controller_metadata, out.metadata = cookies
                yield p4r.Entity(table_entry=out)

    # ---------------------------------------------------------------------- action profiles
    def _write_action_profile_member(self, pipe: Pipeline, kind: int, msg: p4r.ActionProfileMember) -> None:
        switch, index = self._switch(), pipe.index
        profile = index.profile(msg.action_profile_id)
        self._check_explicit(profile, msg.member_id)
        if kind == Update.DELETE:
            switch.member_delete(profile.name, msg.member_id)
            return
        action = codec.decode_action(index, None, msg.action)
        if not any(msg.action.action_id in index.table(t).actions for t in profile.table_ids):
            raise invalid(f"action {action.name} is not an action of the tables of {profile.name}")
        write = switch.member_insert if kind == Update.INSERT else switch.member_modify
        write(profile.name, msg.member_id, action)

    def _check_explicit(self, profile: Profile, ident: int) -> None:
        """Members and groups written by the client: not in a profile programmed with action sets, and
        not with the ids the hidden ones use."""
        if self.oneshots.uses(profile.name):
            raise invalid(f"{profile.name} is programmed with action sets: no members and groups")
        if is_hidden(ident):
            raise invalid(f"ids from {HIDDEN_BASE:#x} up are reserved by p4switch")

    def _read_action_profile_member(self, pipe: Pipeline, msg: p4r.ActionProfileMember
                                    ) -> Iterator[p4r.Entity]:
        index = pipe.index
        for profile in _chosen(index.profiles, msg.action_profile_id, index.profile):
            for member in self._switch().members(profile.name):
                if msg.member_id in (0, member.member_id) and not is_hidden(member.member_id):
                    yield p4r.Entity(action_profile_member=p4r.ActionProfileMember(
                        action_profile_id=profile.id, member_id=member.member_id,
                        action=codec.encode_action(index, member.action)))

    def _write_action_profile_group(self, pipe: Pipeline, kind: int, msg: p4r.ActionProfileGroup) -> None:
        switch = self._switch()
        profile = pipe.index.profile(msg.action_profile_id)
        self._check_explicit(profile, msg.group_id)
        if kind == Update.DELETE:
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
        write = switch.group_insert if kind == Update.INSERT else switch.group_modify
        write(profile.name, msg.group_id, members, msg.max_size)

    def _read_action_profile_group(self, pipe: Pipeline, msg: p4r.ActionProfileGroup
                                   ) -> Iterator[p4r.Entity]:
        index = pipe.index
        profiles = [index.profile(msg.action_profile_id)] if msg.action_profile_id else \
            [p for p in index.profiles.values() if p.with_selector]
        for profile in profiles:
            for group in self._switch().groups(profile.name):
                if msg.group_id in (0, group.group_id) and not is_hidden(group.group_id):
                    out = p4r.ActionProfileGroup(action_profile_id=profile.id, group_id=group.group_id,
                                                 max_size=group.max_size)
                    for member_id, weight in group.members:
                        out.members.add(member_id=member_id, weight=weight)
                    yield p4r.Entity(action_profile_group=out)

    # ------------------------------------------------------------------ counters, meters, registers
    def _write_counter_entry(self, pipe: Pipeline, kind: int, msg: p4r.CounterEntry) -> None:
        _modify_only(kind, "CounterEntry")
        array = pipe.index.counter(msg.counter_id)
        if msg.HasField("data"):
            for i in _cells(array, msg, self._switch().counter_size):
                self._switch().counter_write(array.name, i, msg.data.byte_count, msg.data.packet_count)

    def _read_counter_entry(self, pipe: Pipeline, msg: p4r.CounterEntry) -> Iterator[p4r.Entity]:
        arrays = _chosen(pipe.index.counters, msg.counter_id, pipe.index.counter)
        switch = self._switch()
        for array in arrays:
            for i in _cells(array, msg, switch.counter_size):
                byte_count, packet_count = switch.counter_read(array.name, i)
                yield p4r.Entity(counter_entry=p4r.CounterEntry(
                    counter_id=array.id, index=p4r.Index(index=i),
                    data=p4r.CounterData(byte_count=byte_count, packet_count=packet_count)))

    def _write_meter_entry(self, pipe: Pipeline, kind: int, msg: p4r.MeterEntry) -> None:
        _modify_only(kind, "MeterEntry")
        _no_color_counters(msg)
        array = pipe.index.meter(msg.meter_id)
        config = codec.decode_meter_config(msg.config) if msg.HasField("config") else None
        for i in _cells(array, msg, self._switch().meter_size):
            self._switch().meter_set(array.name, i, config)

    def _read_meter_entry(self, pipe: Pipeline, msg: p4r.MeterEntry) -> Iterator[p4r.Entity]:
        _no_color_counters(msg)
        arrays = _chosen(pipe.index.meters, msg.meter_id, pipe.index.meter)
        switch = self._switch()
        for array in arrays:
            for i in _cells(array, msg, switch.meter_size):
                out = p4r.MeterEntry(meter_id=array.id, index=p4r.Index(index=i))
                config = switch.meter_get(array.name, i)
                if config is not None:
                    out.config.CopyFrom(codec.encode_meter_config(config))
                yield p4r.Entity(meter_entry=out)

    def _write_register_entry(self, pipe: Pipeline, kind: int, msg: p4r.RegisterEntry) -> None:
        _modify_only(kind, "RegisterEntry")
        array = pipe.index.register(msg.register_id)
        if msg.data.WhichOneof("data") != "bitstring":
            raise invalid(f"register {array.name} holds bit<{array.bitwidth}>: data must be a bitstring")
        value = codec.decode_uint(msg.data.bitstring, array.bitwidth, f"register {array.name} value")
        for i in _cells(array, msg, self._switch().register_size):
            self._switch().register_write(array.name, i, value)

    def _read_register_entry(self, pipe: Pipeline, msg: p4r.RegisterEntry) -> Iterator[p4r.Entity]:
        arrays = _chosen(pipe.index.registers, msg.register_id, pipe.index.register)
        switch = self._switch()
        for array in arrays:
            for i in _cells(array, msg, switch.register_size):
                value = switch.register_read(array.name, i)
                yield p4r.Entity(register_entry=p4r.RegisterEntry(
                    register_id=array.id, index=p4r.Index(index=i),
                    data=p4d.P4Data(bitstring=codec.encode_uint(value))))

    # ----------------------------------------------------------------------- direct resources
    def _direct_entry(self, pipe: Pipeline, msg: p4r.TableEntry, resource: str
                      ) -> tuple[Table, engine.TableEntry]:
        table, match, priority = codec.decode_key(pipe.index, msg)
        if msg.is_default_action:
            raise unimplemented("direct resources of the default entry are not supported by p4switch")
        if not getattr(table, resource):
            raise invalid(f"table {table.name} has no direct {resource.split('_')[1]}")
        return table, engine.TableEntry(match, _NO_ACTION, priority)

    def _write_direct_counter_entry(self, pipe: Pipeline, kind: int, msg: p4r.DirectCounterEntry) -> None:
        _modify_only(kind, "DirectCounterEntry")
        table, entry = self._direct_entry(pipe, msg.table_entry, "direct_counter_id")
        if msg.HasField("data"):
            self._switch().direct_counter_write(table.name, entry, msg.data.byte_count, msg.data.packet_count)

    def _read_direct_counter_entry(self, pipe: Pipeline, msg: p4r.DirectCounterEntry
                                   ) -> Iterator[p4r.Entity]:
        for table, entry in self._direct_targets(pipe, msg.table_entry, "direct_counter_id"):
            byte_count, packet_count = self._switch().direct_counter_read(table.name, entry)
            key = codec.encode_entry(pipe.index, table, entry, counter=False, meter=False)
            yield p4r.Entity(direct_counter_entry=p4r.DirectCounterEntry(
                table_entry=key, data=p4r.CounterData(byte_count=byte_count, packet_count=packet_count)))

    def _write_direct_meter_entry(self, pipe: Pipeline, kind: int, msg: p4r.DirectMeterEntry) -> None:
        _modify_only(kind, "DirectMeterEntry")
        _no_color_counters(msg)
        table, entry = self._direct_entry(pipe, msg.table_entry, "direct_meter_id")
        config = codec.decode_meter_config(msg.config) if msg.HasField("config") else None
        self._switch().direct_meter_set(table.name, entry, config)

    def _read_direct_meter_entry(self, pipe: Pipeline, msg: p4r.DirectMeterEntry) -> Iterator[p4r.Entity]:
        for table, entry in self._direct_targets(pipe, msg.table_entry, "direct_meter_id"):
            out = p4r.DirectMeterEntry(
                table_entry=codec.encode_entry(pipe.index, table, entry, counter=False, meter=False))
            config = self._switch().direct_meter_get(table.name, entry)
            if config is not None:
                out.config.CopyFrom(codec.encode_meter_config(config))
            yield p4r.Entity(direct_meter_entry=out)

    def _direct_targets(self, pipe: Pipeline, msg: p4r.TableEntry, resource: str
                        ) -> Iterator[tuple[Table, engine.TableEntry]]:
        """The entries a direct counter/meter read names: one by key, or all of one or every table."""
        if msg.table_id and msg.match:
            yield self._direct_entry(pipe, msg, resource)
            return
        for table in _chosen(pipe.index.tables, msg.table_id, pipe.index.table):
            if getattr(table, resource):
                for entry in self._switch().table_entries(table.name):
                    if not entry.is_default:
                        yield table, entry

    # -------------------------------------------------------------- packet replication engine
    def _write_packet_replication_engine_entry(self, pipe: Pipeline, kind: int,
                                               msg: p4r.PacketReplicationEngineEntry) -> None:
        switch = self._switch()
        if msg.WhichOneof("type") == "multicast_group_entry":
            group = msg.multicast_group_entry
            gid = group.multicast_group_id
            if gid == 0:
                raise invalid("multicast_group_id 0 is reserved for wildcard reads")
            _check_existence(kind, gid in switch.mcast_groups(), f"multicast group {gid}")
            if kind == Update.DELETE:
                switch.mcast_group_delete(gid)
                self._mcast_metadata.pop(gid, None)
                return
            switch.mcast_group_set(gid, _replicas(group.replicas))
            self._mcast_metadata[gid] = group.metadata
            return
        session = msg.clone_session_entry
        sid = session.session_id
        if sid == 0:
            raise invalid("session_id 0 is reserved for wildcard reads")
        _check_existence(kind, any(s.session_id == sid for s in switch.clone_sessions()),
                         f"clone session {sid}")
        if kind == Update.DELETE:
            switch.clone_session_delete(sid)
            return
        if session.packet_length_bytes < 0:
            raise invalid("packet_length_bytes must not be negative")
        switch.clone_session_set(sid, _replicas(session.replicas), session.class_of_service,
                                 session.packet_length_bytes)

    def _read_packet_replication_engine_entry(self, pipe: Pipeline, msg: p4r.PacketReplicationEngineEntry
                                              ) -> Iterator[p4r.Entity]:
        switch = self._switch()
        if msg.WhichOneof("type") == "clone_session_entry":
            wanted = msg.clone_session_entry.session_id
            for session in switch.clone_sessions():
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
        for gid, replicas in sorted(switch.mcast_groups().items()):
            if wanted in (0, gid):
                group = p4r.MulticastGroupEntry(multicast_group_id=gid,
                                                metadata=self._mcast_metadata.get(gid, b""))
                for port, rid in replicas:
                    group.replicas.add(port=codec.encode_uint(port), instance=rid)
                yield p4r.Entity(packet_replication_engine_entry=p4r.PacketReplicationEngineEntry(
                    multicast_group_entry=group))

    # -------------------------------------------------------------------------------- digests
    def _write_digest_entry(self, pipe: Pipeline, kind: int, msg: p4r.DigestEntry) -> None:
        info = pipe.index.digest(msg.digest_id)
        if kind != Update.DELETE and not msg.HasField("config"):
            raise invalid(f"digest {info.name}: config is required")
        self.digests.write(kind, info, msg.config)

    def _read_digest_entry(self, pipe: Pipeline, msg: p4r.DigestEntry) -> Iterator[p4r.Entity]:
        if msg.digest_id:
            pipe.index.digest(msg.digest_id)
        for entry in self.digests.read(msg.digest_id):
            yield p4r.Entity(digest_entry=entry)

    def _digest_sink(self, index: P4InfoIndex) -> engine.DigestSink:
        def sink(name: str, fields: list[tuple[str, int]]) -> None:
            digest_id = index.digest_ids.get(name)
            if digest_id is not None:
                self.digests.push(index.digests[digest_id], tuple(v for _, v in fields))
        return sink

    def _send_digest_list(self, msg: p4r.DigestList) -> None:
        for conn in self.arbitration.primaries():
            conn.send(p4r.StreamMessageResponse(digest=msg), droppable=True)

    _writers: dict[str, Callable[..., None]] = {
        "table_entry": _write_table_entry,
        "action_profile_member": _write_action_profile_member,
        "action_profile_group": _write_action_profile_group,
        "counter_entry": _write_counter_entry,
        "direct_counter_entry": _write_direct_counter_entry,
        "meter_entry": _write_meter_entry,
        "direct_meter_entry": _write_direct_meter_entry,
        "register_entry": _write_register_entry,
        "packet_replication_engine_entry": _write_packet_replication_engine_entry,
        "digest_entry": _write_digest_entry,
    }
    _readers: dict[str, Callable[..., Iterable[p4r.Entity]]] = {
        "table_entry": _read_table_entry,
        "action_profile_member": _read_action_profile_member,
        "action_profile_group": _read_action_profile_group,
        "counter_entry": _read_counter_entry,
        "direct_counter_entry": _read_direct_counter_entry,
        "meter_entry": _read_meter_entry,
        "direct_meter_entry": _read_direct_meter_entry,
        "register_entry": _read_register_entry,
        "packet_replication_engine_entry": _read_packet_replication_engine_entry,
        "digest_entry": _read_digest_entry,
    }

    # ======================================================================================= Read
    def Read(self, request: p4r.ReadRequest, context: grpc.ServicerContext) -> Iterator[p4r.ReadResponse]:
        try:
            if request.device_id != self.device.device_id:
                raise not_found(f"unknown device id {request.device_id}")
            pipe = self._require_pipeline()
        except P4RuntimeError as err:
            context.abort(err.code, err.message)
        errors: list[P4RuntimeError | None] = []
        for entity in request.entities:
            kind = entity.WhichOneof("entity") or ""
            with self._lock:
                try:
                    reader = self._readers.get(kind)
                    if reader is None:
                        raise invalid("entity not set") if not kind else \
                            unimplemented(f"reading {kind} is not supported by p4switch")
                    found = list(reader(self, pipe, getattr(entity, kind)))
                    errors.append(None)
                except P4RuntimeError as err:
                    errors.append(err)
                    found = []
                except engine.EngineError as err:
                    errors.append(P4RuntimeError.from_engine(err))
                    found = []
            for start in range(0, len(found), 1000):
                yield p4r.ReadResponse(entities=found[start:start + 1000])
        if any(errors):
            _abort_with_details(context, "Read failure.", errors)

    # ============================================================================== StreamChannel
    def StreamChannel(self, request_iterator: Iterator[p4r.StreamMessageRequest],
                      context: grpc.ServicerContext) -> Iterator[p4r.StreamMessageResponse]:
        conn = Connection(peer=context.peer())
        with self._lock:
            self._conns.add(conn)
        context.add_callback(conn.close)
        reader = threading.Thread(target=self._read_stream, args=(request_iterator, conn),
                                  name=f"stream-{conn.serial}", daemon=True)
        reader.start()
        try:
            while True:
                item = conn.outbox.get()
                if item is CLOSE:
                    return
                if isinstance(item, P4RuntimeError):
                    context.abort(item.code, item.message)
                if isinstance(item, p4r.StreamMessageResponse):
                    yield item
        finally:
            self.arbitration.remove(conn)
            with self._lock:
                self._conns.discard(conn)

    def _read_stream(self, requests: Iterator[p4r.StreamMessageRequest], conn: Connection) -> None:
        try:
            for request in requests:
                if not self._handle_stream_request(conn, request):
                    return
        except grpc.RpcError:
            pass  # the client went away
        finally:
            self.arbitration.remove(conn)
            conn.close()

    def _handle_stream_request(self, conn: Connection, request: p4r.StreamMessageRequest) -> bool:
        """Handle one stream message; False when the stream must end."""
        kind = request.WhichOneof("update")
        if kind == "arbitration":
            try:
                self.arbitration.update(conn, request.arbitration)
            except P4RuntimeError as err:
                self.log.warning("arbitration from %s refused: %s", conn.peer, err.message)
                conn.close(err)
                return False
            return True
        error = p4r.StreamError()
        try:
            if not self.arbitration.is_primary(conn):
                raise P4RuntimeError(grpc.StatusCode.PERMISSION_DENIED, f"{kind} from a non-primary client")
            if kind == "packet":
                self._packet_out(request.packet)
            elif kind == "digest_ack":
                self.digests.ack(request.digest_ack)
            else:
                raise unimplemented(f"stream message {kind} is not supported by p4switch")
            return True
        except P4RuntimeError as err:
            error.canonical_code, error.message = err.code.value[0], err.message
        if kind == "packet":
            error.packet_out.packet_out.CopyFrom(request.packet)
        elif kind == "digest_ack":
            error.digest_list_ack.digest_list_ack.CopyFrom(request.digest_ack)
        else:
            error.other.SetInParent()
        conn.send(p4r.StreamMessageResponse(error=error), droppable=True)
        return True

    # ================================================================================= packet I/O
    def _packet_out(self, packet: p4r.PacketOut) -> None:
        pipe = self._require_pipeline()
        if self.device.cpu_port is None:
            raise P4RuntimeError(grpc.StatusCode.FAILED_PRECONDITION,
                                 "no CPU port: start p4switch with --cpu-port N for packet-out")
        fields = pipe.index.packet_out
        given = {m.metadata_id: m.value for m in packet.metadata}
        unknown = set(given) - {f.id for f in fields}
        if unknown:
            raise invalid(f"unknown packet_out metadata ids {sorted(unknown)}")
        header = 0
        for field in fields:
            if field.id not in given:
                raise invalid(f"packet_out metadata {field.name} missing")
            value = codec.decode_uint(given[field.id], field.bitwidth, f"packet_out metadata {field.name}")
            header = (header << field.bitwidth) | value
        nbits = sum(f.bitwidth for f in fields)
        frame = header.to_bytes(nbits // 8, "big") + packet.payload if nbits else packet.payload
        self.log.debug("packet-out of %d bytes", len(packet.payload))
        self.device.process(self.device.cpu_port, frame)

    def _packet_in(self, frame: bytes) -> None:
        """A frame the pipeline sent to the CPU port: strip the packet_in header into metadata."""
        pipe = self.pipeline
        fields = pipe.index.packet_in if pipe else ()
        nbytes = sum(f.bitwidth for f in fields) // 8
        if len(frame) < nbytes:
            self.device.stats["packet_in_too_short"] += 1
            return
        packet = p4r.PacketIn(payload=frame[nbytes:])
        header = int.from_bytes(frame[:nbytes], "big")
        shift = nbytes * 8
        for field in fields:
            shift -= field.bitwidth
            value = (header >> shift) & ((1 << field.bitwidth) - 1)
            packet.metadata.add(metadata_id=field.id, value=codec.encode_uint(value))
        primaries = self.arbitration.primaries()
        if not primaries:
            self.device.stats["packet_in_no_client"] += 1
        for conn in primaries:
            conn.send(p4r.StreamMessageResponse(packet=packet), droppable=True)

    # ================================================================================== lifecycle
    def close(self) -> None:
        """End every stream (the gRPC server is stopped by the caller)."""
        with self._lock:
            conns = list(self._conns)
        for conn in conns:
            conn.close()
        self.digests.stop()


_NO_ACTION = engine.ActionCall("NoAction")
"""Placeholder action for entry keys: the engine ignores the action of a delete / direct resource key."""


def _find_entry(switch: engine.Switch, table: Table, match: dict[str, engine.Match], priority: int
                ) -> engine.TableEntry:
    for entry in switch.table_entries(table.name):
        if not entry.is_default and entry.match == match and entry.priority == priority:
            return entry
    raise not_found(f"no such entry in table {table.name}")


def _chosen(items: dict[int, T], wanted: int, lookup: Callable[[int], T]) -> list[T]:
    """What a read names: the object with id ``wanted`` (NOT_FOUND when unknown), or all for id 0."""
    return [lookup(wanted)] if wanted else list(items.values())


def _modify_only(kind: int, what: str) -> None:
    if kind != Update.MODIFY:
        raise invalid(f"{what} can only be modified (no INSERT or DELETE)")


def _no_color_counters(msg: p4r.MeterEntry | p4r.DirectMeterEntry) -> None:
    if msg.HasField("counter_data"):
        raise unimplemented("per-colour meter counters are not supported by p4switch")


def _cells(array: Array, msg: p4r.CounterEntry | p4r.MeterEntry | p4r.RegisterEntry,
           size_of: Callable[[str], int]) -> range:
    """The cells a counter/meter/register entry names: one (index set) or all."""
    size = array.size or size_of(array.name)
    if not msg.HasField("index"):
        return range(size)
    i = msg.index.index
    if i < 0:
        raise invalid(f"negative index {i} for {array.name}")
    if i >= size:
        raise P4RuntimeError(grpc.StatusCode.OUT_OF_RANGE, f"index {i} out of range for {array.name}")
    return range(i, i + 1)


def _check_existence(kind: int, exists: bool, what: str) -> None:
    if kind == Update.INSERT and exists:
        raise already_exists(f"{what} already exists")
    if kind != Update.INSERT and not exists:
        raise not_found(f"{what} does not exist")


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


def _check_names(switch: engine.Switch, index: P4InfoIndex) -> None:
    """Refuse a P4Info that names objects the program does not have (P4Info of another program)."""
    try:
        for table in index.tables.values():
            switch.table_get_default(table.name)
        for counter in index.counters.values():
            switch.counter_size(counter.name)
        for meter in index.meters.values():
            switch.meter_size(meter.name)
        for register in index.registers.values():
            switch.register_size(register.name)
        for profile in index.profiles.values():
            switch.members(profile.name)
    except engine.EngineError as err:
        raise invalid(f"the P4Info does not match the device config: {err}") from None


def _abort_with_details(context: grpc.ServicerContext, message: str,
                        errors: list[P4RuntimeError | None]) -> None:
    """Fail the call with UNKNOWN and one p4.v1.Error per update (OK for those that succeeded)."""
    status = rpc_status.Status(code=grpc.StatusCode.UNKNOWN.value[0], message=message)
    for err in errors:
        detail = p4r.Error(canonical_code=0) if err is None else \
            p4r.Error(canonical_code=err.code.value[0], message=err.message)
        packed = any_pb2.Any()
        packed.Pack(detail)
        status.details.append(packed)
    context.set_trailing_metadata((("grpc-status-details-bin", status.SerializeToString()),))
    context.abort(grpc.StatusCode.UNKNOWN, message)


def serve(service: P4RuntimeService, address: str, max_workers: int = 32,
          credentials: grpc.ServerCredentials | None = None) -> tuple[grpc.Server, int]:
    """Start a gRPC server for ``service`` on ``address`` (over TLS with ``credentials``); returns it and
    the bound TCP port (0 when the address cannot be bound, e.g. another switch listens there)."""
    options = [("grpc.max_receive_message_length", MAX_MESSAGE),
               ("grpc.max_send_message_length", MAX_MESSAGE),
               ("grpc.so_reuseport", 0)]  # a second switch on the same port must fail, not share it
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="p4rt"),
                         options=options)
    p4r_grpc.add_P4RuntimeServicer_to_server(service, server)
    try:
        if credentials is None:
            port = server.add_insecure_port(address)
        else:
            port = server.add_secure_port(address, credentials)
    except RuntimeError:
        port = 0
    if port:
        server.start()
    return server, port
