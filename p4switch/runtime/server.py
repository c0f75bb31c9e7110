"""The P4Runtime gRPC service of one p4switch device (P4Runtime specification v1.4): a thin layer over one
handler per kind of state, as p4lang/PI's DeviceMgr over its managers.

RPC-level checks come first, in the order the specification lists them (device id, primary client,
pipeline set); then every update of a Write batch goes to the handler of its entity kind and is applied
on its own and reported with one p4.v1.Error per update (the call fails with UNKNOWN when any update
failed). Reads and writes are serialized by one lock, which makes the processing of requests strictly
serializable as the specification requires.

| what | module |
|---|---|
| pipeline config (Set/GetForwardingPipelineConfig) | pipeline.py |
| table entries, default entries, one-shot entries | table_entries.py |
| action profile members and groups | action_profiles.py (hidden one-shot groups: oneshot.py) |
| counters, direct counters | counters.py |
| meters, direct meters | meters.py |
| registers | registers.py |
| parser value sets | value_sets.py |
| multicast groups, clone sessions | replication.py |
| digests (DigestEntry, DigestList, acks) | digests.py |
| packet-out, packet-in | packet_io.py |
| primary election on the stream | arbitration.py |
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from concurrent import futures

import grpc
from finsy.proto import p4r, p4r_grpc, rpc_status
from google.protobuf import any_pb2

from p4switch.engine import api as engine
from p4switch.runtime.action_profiles import ActionProfileGroups, ActionProfileMembers, ActionProfiles
from p4switch.runtime.arbitration import CLOSE, Arbitration, Connection
from p4switch.runtime.counters import Counters, DirectCounters
from p4switch.runtime.device import Device
from p4switch.runtime.digests import DigestEngine, DigestEntries
from p4switch.runtime.entity import EntityHandler, Pipeline
from p4switch.runtime.errors import P4RuntimeError, invalid, unimplemented
from p4switch.runtime.meters import DirectMeters, Meters
from p4switch.runtime.packet_io import PacketIO
from p4switch.runtime.pipeline import PipelineConfigs
from p4switch.runtime.registers import Registers
from p4switch.runtime.replication import Replication
from p4switch.runtime.table_entries import TableEntries
from p4switch.runtime.value_sets import ValueSets

API_VERSION = "1.4.1"
MAX_MESSAGE = 256 << 20
"""Largest request/response: big programs and batches fit (gRPC's default is 4 MiB)."""
Update = p4r.Update


class P4RuntimeService(p4r_grpc.P4RuntimeServicer):
    """P4Runtime for one Device."""

    def __init__(self, device: Device, log: logging.Logger) -> None:
        self.device = device
        self.log = log
        self.arbitration = Arbitration(device.device_id, log)
        self.digests = DigestEngine(self._send_digest_list, log)
        self.profiles = ActionProfiles()
        self.digest_entries = DigestEntries(self.digests)
        handlers: list[EntityHandler] = [
            TableEntries(self.profiles), ActionProfileMembers(self.profiles),
            ActionProfileGroups(self.profiles), Counters(), DirectCounters(), Meters(), DirectMeters(),
            Registers(), ValueSets(), Replication(), self.digest_entries,
        ]
        self.handlers = {h.kind: h for h in handlers}
        self.pipelines = PipelineConfigs(device, log, self._committing)
        self.packet_io = PacketIO(device, self.arbitration, log)
        self._lock = threading.RLock()
        self._conns: set[Connection] = set()
        device.to_cpu = self._packet_in

    def _committing(self, pipe: Pipeline) -> None:
        """A new pipeline goes live: every handler forgets the old one, digests go to the new P4Info."""
        self.profiles.reset()
        for handler in self.handlers.values():
            handler.reset()
        pipe.switch.digest_sink = self.digest_entries.sink(pipe.index)

    # ====================================================================== capabilities / pipeline
    def Capabilities(self, request: p4r.CapabilitiesRequest, context: grpc.ServicerContext
                     ) -> p4r.CapabilitiesResponse:
        return p4r.CapabilitiesResponse(p4runtime_api_version=API_VERSION)

    def SetForwardingPipelineConfig(self, request: p4r.SetForwardingPipelineConfigRequest,
                                    context: grpc.ServicerContext) -> p4r.SetForwardingPipelineConfigResponse:
        try:
            self.arbitration.check_primary(request.device_id, request.role,
                                           request.election_id if request.HasField("election_id") else None)
            with self._lock:
                self.pipelines.set(request)
        except P4RuntimeError as err:
            self.log.warning("SetForwardingPipelineConfig failed: %s", err.message)
            context.abort(err.code, err.message)
        return p4r.SetForwardingPipelineConfigResponse()

    def GetForwardingPipelineConfig(self, request: p4r.GetForwardingPipelineConfigRequest,
                                    context: grpc.ServicerContext) -> p4r.GetForwardingPipelineConfigResponse:
        if request.device_id != self.device.device_id:
            context.abort(grpc.StatusCode.NOT_FOUND, f"unknown device id {request.device_id}")
        return self.pipelines.get(request)

    # ====================================================================================== Write
    def Write(self, request: p4r.WriteRequest, context: grpc.ServicerContext) -> p4r.WriteResponse:
        try:
            self.arbitration.check_primary(request.device_id, request.role,
                                           request.election_id if request.HasField("election_id") else None)
            pipe = self.pipelines.require()
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

    def _apply(self, pipe: Pipeline, update: p4r.Update) -> P4RuntimeError | None:
        kind = update.entity.WhichOneof("entity") or ""
        try:
            if update.type == Update.UNSPECIFIED:
                raise invalid("update type is UNSPECIFIED")
            handler = self.handlers.get(kind)
            if handler is None:
                raise unimplemented(f"writing {kind} is not supported by p4switch")
            handler.write(pipe, update.type, getattr(update.entity, kind))
        except P4RuntimeError as err:
            self.log.debug("write %s %s failed: %s", Update.Type.Name(update.type), kind, err.message)
            return err
        except engine.EngineError as err:
            return P4RuntimeError.from_engine(err)
        self.log.debug("write %s %s ok", Update.Type.Name(update.type), kind)
        return None

    # ======================================================================================= Read
    def Read(self, request: p4r.ReadRequest, context: grpc.ServicerContext) -> Iterator[p4r.ReadResponse]:
        try:
            if request.device_id != self.device.device_id:
                raise P4RuntimeError(grpc.StatusCode.NOT_FOUND, f"unknown device id {request.device_id}")
            pipe = self.pipelines.require()
        except P4RuntimeError as err:
            context.abort(err.code, err.message)
        errors: list[P4RuntimeError | None] = []
        for entity in request.entities:
            found, error = self._read_one(pipe, entity)
            errors.append(error)
            for start in range(0, len(found), 1000):
                yield p4r.ReadResponse(entities=found[start:start + 1000])
        if any(errors):
            _abort_with_details(context, "Read failure.", errors)

    def _read_one(self, pipe: Pipeline, entity: p4r.Entity) -> tuple[list[p4r.Entity], P4RuntimeError | None]:
        """The entities one read entity names, or the error that refuses it."""
        kind = entity.WhichOneof("entity") or ""
        with self._lock:
            try:
                handler = self.handlers.get(kind)
                if handler is None:
                    raise invalid("entity not set") if not kind else \
                        unimplemented(f"reading {kind} is not supported by p4switch")
                return list(handler.read(pipe, getattr(entity, kind))), None
            except P4RuntimeError as err:
                return [], err
            except engine.EngineError as err:
                return [], P4RuntimeError.from_engine(err)

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
                self.packet_io.packet_out(self.pipelines.require(), request.packet)
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
    def _packet_in(self, frame: bytes) -> None:
        self.packet_io.packet_in(self.pipelines.current, frame)

    def _send_digest_list(self, msg: p4r.DigestList) -> None:
        for conn in self.arbitration.primaries():
            conn.send(p4r.StreamMessageResponse(digest=msg), droppable=True)

    # ================================================================================== lifecycle
    def close(self) -> None:
        """End every stream (the gRPC server is stopped by the caller)."""
        with self._lock:
            conns = list(self._conns)
        for conn in conns:
            conn.close()
        self.digests.stop()


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
