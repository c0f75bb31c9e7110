"""A small synchronous P4Runtime client over finsy's generated stubs, for PTF's unittest-style tests.

One gRPC channel, one stream (arbitration as primary, PacketIn into a queue, PacketOut), Write, Read and
the pipeline push. Errors surface as grpc.RpcError with the server's status details.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from typing import Any

import grpc
from finsy.proto import p4r, p4r_grpc

STREAM_TIMEOUT = 10.0


class P4RuntimeClient:
    """Primary client of one device."""

    def __init__(self, address: str, device_id: int, election_id: int = 1) -> None:
        self.device_id = device_id
        self.election_id = p4r.Uint128(high=0, low=election_id)
        self.channel = grpc.insecure_channel(address)
        grpc.channel_ready_future(self.channel).result(timeout=STREAM_TIMEOUT)
        self.stub = p4r_grpc.P4RuntimeStub(self.channel)
        self._requests: queue.Queue[Any] = queue.Queue()
        self.packet_ins: queue.Queue[Any] = queue.Queue()
        self._arbitration: queue.Queue[Any] = queue.Queue()
        self._stream = self.stub.StreamChannel(self._request_iterator())
        self._reader = threading.Thread(target=self._read_stream, name="p4rt-stream", daemon=True)
        self._reader.start()
        self._become_primary()

    def _request_iterator(self) -> Iterator[Any]:
        while (request := self._requests.get()) is not None:
            yield request

    def _read_stream(self) -> None:
        try:
            for response in self._stream:
                if response.HasField("packet"):
                    self.packet_ins.put(response.packet)
                elif response.HasField("arbitration"):
                    self._arbitration.put(response.arbitration)
        except grpc.RpcError:
            pass  # the stream ends when close() cancels it

    def _become_primary(self) -> None:
        self._requests.put(p4r.StreamMessageRequest(arbitration=p4r.MasterArbitrationUpdate(
            device_id=self.device_id, election_id=self.election_id)))
        reply = self._arbitration.get(timeout=STREAM_TIMEOUT)
        if reply.status.code != grpc.StatusCode.OK.value[0]:
            raise RuntimeError(f"not primary for device {self.device_id}: {reply.status.message}")

    # ---- pipeline ---------------------------------------------------------------------------------------

    def pipeline_cookie(self) -> int | None:
        """The cookie of the device's current pipeline, None when it has none."""
        try:
            reply = self.stub.GetForwardingPipelineConfig(p4r.GetForwardingPipelineConfigRequest(
                device_id=self.device_id,
                response_type=p4r.GetForwardingPipelineConfigRequest.COOKIE_ONLY))
        except grpc.RpcError as err:
            if err.code() == grpc.StatusCode.FAILED_PRECONDITION:
                return None
            raise
        if not reply.config.HasField("cookie"):
            return None
        return int(reply.config.cookie.cookie)

    def set_pipeline(self, p4info: Any, device_config: bytes, cookie: int) -> None:
        """VERIFY_AND_COMMIT the program."""
        self.stub.SetForwardingPipelineConfig(p4r.SetForwardingPipelineConfigRequest(
            device_id=self.device_id, election_id=self.election_id,
            action=p4r.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT,
            config=p4r.ForwardingPipelineConfig(p4info=p4info, p4_device_config=device_config,
                                                cookie=p4r.ForwardingPipelineConfig.Cookie(cookie=cookie))))

    # ---- entities ---------------------------------------------------------------------------------------

    def write(self, update_type: p4r.Update.Type.ValueType, entity: Any) -> None:
        """One update in one WriteRequest (so an error names exactly the entity that failed)."""
        self.stub.Write(p4r.WriteRequest(
            device_id=self.device_id, election_id=self.election_id,
            updates=[p4r.Update(type=update_type, entity=entity)]))

    def read(self, entity: Any) -> list[Any]:
        """Every entity matching the (possibly wildcard) ``entity``."""
        found: list[Any] = []
        for reply in self.stub.Read(p4r.ReadRequest(device_id=self.device_id, entities=[entity])):
            found.extend(reply.entities)
        return found

    # ---- packet I/O -------------------------------------------------------------------------------------

    def packet_out(self, payload: bytes, metadata: list[Any]) -> None:
        """Send a PacketOut; ``metadata`` is a list of p4r.PacketMetadata."""
        self._requests.put(p4r.StreamMessageRequest(packet=p4r.PacketOut(payload=payload, metadata=metadata)))

    def get_packet_in(self, timeout: float) -> Any | None:
        """The next PacketIn, or None after ``timeout`` seconds."""
        try:
            return self.packet_ins.get(timeout=timeout)
        except queue.Empty:
            return None

    def drain_packet_ins(self) -> None:
        """Forget PacketIns a previous test left behind."""
        while not self.packet_ins.empty():
            self.packet_ins.get_nowait()

    def close(self) -> None:
        """End the stream and the channel."""
        self._requests.put(None)
        self._stream.cancel()
        self.channel.close()
