"""Plumbing shared by the runtime tests: compiling test programs, an in-process P4Runtime server, a raw
gRPC stream client (to look at exact messages and error details), veth pairs and raw sockets for the
real-process tests. No test logic here: the tests say what they check."""

from __future__ import annotations

import contextlib
import functools
import itertools
import logging
import os
import queue
import select
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import finsy as fy
import grpc
from finsy.proto import U128, p4i, p4r, p4r_grpc, rpc_status
from google.protobuf import text_format

from p4switch import dataplane, targets
from p4switch.engine import api as engine
from p4switch.runtime.device import Device
from p4switch.runtime.p4info import P4InfoIndex, Table
from p4switch.runtime.server import P4RuntimeService, serve

HERE = Path(__file__).parent
PROGRAMS = HERE / "programs"
"""the runtime tests' own P4 programs"""
SHARED_PROGRAMS = HERE.parent / "programs"
VENV_BIN = Path(sys.executable).parent
DEVICE_ID = 1
SetPipeline = p4r.SetForwardingPipelineConfigRequest
Stamped = TypeVar("Stamped", p4r.WriteRequest, p4r.SetForwardingPipelineConfigRequest)
CPU_PORT = 64
"""The CPU port the test programs and servers use (runtime_test.p4's CPU_PORT)."""
EFFECT_TIMEOUT = 30.0
"""Seconds a wait for an expected frame or message may take: it comes in milliseconds, but the machine may
be loaded. A wait that expects nothing passes its own short timeout."""


@dataclass(frozen=True)
class Program:
    """A compiled program: the engine JSON (p4_device_config) and its P4Info."""

    json: bytes
    p4info: p4i.P4Info
    json_path: Path
    p4info_path: Path

    @functools.cached_property
    def schema(self) -> fy.P4Schema:
        """finsy's view of the P4Info: ids by name, and the encoding of entities, as a controller has."""
        return fy.P4Schema(self.p4info)

    def name_to_id(self, kind: str, name: str) -> int:
        """The P4Info id of the object of ``kind`` ("tables", "actions", ...; P4Schema's attribute) named
        ``name``."""
        return int(getattr(self.schema, kind)[name].id)

    def field_id(self, table: str, field_name: str) -> int:
        return int(self.schema.tables[table].match_fields[field_name].id)

    def param_id(self, action: str, param: str) -> int:
        return int(self.schema.actions[action].params[param].id)

    def metadata_id(self, header: str, name: str) -> int:
        return int(self.schema.controller_packet_metadata[header].metadata[name].id)


def _finsy_value(match: engine.Match) -> object:
    """An engine match value as finsy's P4TableMatch takes it (the P4Info gives the kind)."""
    match match:
        case engine.Exact(value) | engine.Optional_(value):
            return value
        case engine.Ternary(value, mask):
            return value, mask
        case engine.Lpm(value, prefix_len):
            return value, prefix_len
        case engine.Range(low, high):
            return low, high
    raise TypeError(f"not an engine match value: {match!r}")


class Builder:
    """P4Runtime entities from names and engine values, encoded by finsy's P4Schema with the program's
    ids and canonical byte strings. Match fields and action parameters are put in id order, the order
    the server reads them back in, so a test can compare a read entry with the one it wrote."""

    def __init__(self, program: Program) -> None:
        self.program = program
        self.schema = program.schema
        self.index = P4InfoIndex.build(program.p4info)

    def table(self, name: str) -> Table:
        return self.index.tables[self.schema.tables[name].id]

    def action(self, name: str, **params: int) -> p4r.Action:
        action = fy.P4TableAction(name, **params).encode_action(self.schema)
        action.params.sort(key=lambda p: p.param_id)
        return action

    def table_entry(self, table: str, match: dict[str, engine.Match] | None = None,
                    action: engine.ActionCall | engine.MemberRef | engine.GroupRef | None = None,
                    priority: int = 0, default: bool = False) -> p4r.TableEntry:
        """The entry; an ActionCall is a direct action even in an indirect table (finsy would make it a
        one-shot action set), so tests can send exactly what they state."""
        fields = fy.P4TableMatch({name: _finsy_value(value) for name, value in (match or {}).items()})
        indirect = None
        match action:
            case engine.MemberRef(member_id):
                indirect = fy.P4IndirectAction(member_id=member_id)
            case engine.GroupRef(group_id):
                indirect = fy.P4IndirectAction(group_id=group_id)
        entry = fy.P4TableEntry(table, match=fields, action=indirect, priority=priority,
                                is_default_action=default).encode_entry(self.schema)
        entry.match.sort(key=lambda f: f.field_id)
        if isinstance(action, engine.ActionCall):
            entry.action.action.CopyFrom(self.action(action.name, **action.params))
        return entry

    def id(self, kind: str, name: str) -> int:
        return self.program.name_to_id(kind, name)


_compiled: dict[tuple[Path, str], Program] = {}


def compile_program(source: Path, out_dir: Path, compiler: str = str(VENV_BIN / "p4switch-cc")) -> Program:
    """Compile ``source`` with p4switch-cc, or another compiler with p4c-bm2-ss's command line, into
    ``out_dir`` (once per session and compiler)."""
    if (source, compiler) in _compiled:
        return _compiled[source, compiler]
    out_dir.mkdir(parents=True, exist_ok=True)
    json_path = out_dir / (source.stem + ".json")
    p4info_path = out_dir / (source.stem + ".p4info.txtpb")
    result = subprocess.run(
        [compiler, str(source), "-o", str(json_path), "--p4runtime-files", str(p4info_path)],
        capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, f"{Path(compiler).name} {source.name} failed:\n{result.stderr}"
    p4info = text_format.Parse(p4info_path.read_text(), p4i.P4Info())
    program = Program(json_path.read_bytes(), p4info, json_path, p4info_path)
    _compiled[source, compiler] = program
    return program


# ------------------------------------------------------------------------------ in-process server


@dataclass
class InProcessSwitch:
    """A P4RuntimeService on 127.0.0.1:<ephemeral> whose transmitted frames are collected."""

    address: str
    service: P4RuntimeService
    device: Device
    sent: queue.Queue[tuple[int, bytes]]

    def inject(self, port: int, frame: bytes) -> None:
        """A frame arriving on ``port`` (what the data plane would do)."""
        self.device.process(port, frame)

    def expect_sent(self, timeout: float = EFFECT_TIMEOUT) -> tuple[int, bytes]:
        return self.sent.get(timeout=timeout)

    def nothing_sent(self, wait: float = 0.2) -> bool:
        try:
            self.sent.get(timeout=wait)
        except queue.Empty:
            return True
        return False


@contextlib.contextmanager
def in_process_switch(device_id: int = DEVICE_ID, cpu_port: int | None = CPU_PORT, back_end: str = "python"
                      ) -> Iterator[InProcessSwitch]:
    log = logging.getLogger(f"p4switch.test.dev{device_id}")
    device = Device(device_id, cpu_port, log, back_end)
    sent: queue.Queue[tuple[int, bytes]] = queue.Queue()
    device.transmit = lambda port, frame: sent.put((port, frame))
    service = P4RuntimeService(device, log)
    server, port = serve(service, "127.0.0.1:0", max_workers=16)
    try:
        yield InProcessSwitch(f"127.0.0.1:{port}", service, device, sent)
    finally:
        service.close()
        server.stop(grace=None).wait(5)


# ---------------------------------------------------------------------------- raw stream client


_election_ids = itertools.count(100)


@dataclass
class StreamClient:
    """A P4Runtime client on the raw stub: one StreamChannel whose responses land in a queue."""

    address: str
    device_id: int = DEVICE_ID
    election_id: int | None = None
    credentials: grpc.ChannelCredentials | None = None
    """TLS: the channel's credentials (None: plaintext)"""
    channel: grpc.Channel = field(init=False)
    stub: p4r_grpc.P4RuntimeStub = field(init=False)
    responses: queue.Queue[p4r.StreamMessageResponse | grpc.RpcError] = field(default_factory=queue.Queue)
    _requests: queue.Queue[p4r.StreamMessageRequest | None] = field(default_factory=queue.Queue)
    _pending: dict[str, list[p4r.StreamMessageResponse]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.channel = (grpc.insecure_channel(self.address) if self.credentials is None
                        else grpc.secure_channel(self.address, self.credentials))
        self.stub = p4r_grpc.P4RuntimeStub(self.channel)
        self._call = self.stub.StreamChannel(iter(self._requests.get, None))
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        try:
            for response in self._call:
                self.responses.put(response)
        except grpc.RpcError as err:
            self.responses.put(err)

    def send(self, request: p4r.StreamMessageRequest) -> None:
        self._requests.put(request)

    def arbitrate(self, election_id: int | None) -> p4r.MasterArbitrationUpdate:
        """Send a MasterArbitrationUpdate and return the server's answer."""
        self.election_id = election_id
        update = p4r.MasterArbitrationUpdate(device_id=self.device_id)
        if election_id is not None:
            update.election_id.CopyFrom(U128.encode(election_id))
        self.send(p4r.StreamMessageRequest(arbitration=update))
        return self.next("arbitration").arbitration

    def next(self, kind: str, timeout: float = EFFECT_TIMEOUT) -> p4r.StreamMessageResponse:
        """The next stream response of ``kind`` (others wait for their own next()); raises on a stream
        error."""
        if self._pending.get(kind):
            return self._pending[kind].pop(0)
        deadline = time.monotonic() + timeout
        while True:
            item = self.responses.get(timeout=max(0.01, deadline - time.monotonic()))
            if isinstance(item, grpc.RpcError):
                raise item
            if item.WhichOneof("update") == kind:
                return item
            self._pending.setdefault(item.WhichOneof("update") or "", []).append(item)

    def collect(self, kind: str, wait: float = 0.3) -> list[p4r.StreamMessageResponse]:
        """Every response of ``kind`` until none comes for ``wait`` seconds."""
        found = []
        while True:
            try:
                found.append(self.next(kind, timeout=wait))
            except queue.Empty:
                return found

    def no_message(self, kind: str, wait: float = 0.3) -> bool:
        try:
            self.next(kind, timeout=wait)
        except queue.Empty:
            return True
        return False

    def set_pipeline(self, program: Program, action: str = "VERIFY_AND_COMMIT", cookie: int | None = None
                     ) -> None:
        config = p4r.ForwardingPipelineConfig(p4info=program.p4info, p4_device_config=program.json)
        if cookie is not None:
            config.cookie.cookie = cookie
        self.stub.SetForwardingPipelineConfig(self.stamped(SetPipeline(
            device_id=self.device_id, action=SetPipeline.Action.Value(action), config=config)))

    def write(self, *updates: p4r.Update) -> None:
        self.stub.Write(self.stamped(p4r.WriteRequest(device_id=self.device_id, updates=list(updates))))

    def read(self, *entities: p4r.Entity) -> list[p4r.Entity]:
        found: list[p4r.Entity] = []
        for response in self.stub.Read(p4r.ReadRequest(device_id=self.device_id, entities=list(entities))):
            found.extend(response.entities)
        return found

    def stamped(self, request: Stamped) -> Stamped:
        """``request`` with this client's election id, as a primary's Write/SetForwardingPipelineConfig."""
        if self.election_id is not None:
            request.election_id.CopyFrom(U128.encode(self.election_id))
        return request

    def close(self) -> None:
        self._requests.put(None)
        self._call.cancel()
        self.channel.close()


@contextlib.contextmanager
def primary_client(address: str, program: Program | None = None,
                   credentials: grpc.ChannelCredentials | None = None) -> Iterator[StreamClient]:
    """A client that became primary (and pushed ``program`` when given), over TLS with ``credentials``."""
    client = StreamClient(address, credentials=credentials)
    try:
        answer = client.arbitrate(next(_election_ids))
        assert answer.status.code == 0, answer
        if program is not None:
            client.set_pipeline(program)
        yield client
    finally:
        client.close()


def error_details(err: grpc.RpcError) -> list[p4r.Error]:
    """The p4.v1.Error list of a failed Write/Read (google.rpc.Status in the trailing metadata)."""
    for key, value in err.trailing_metadata() or ():  # type: ignore[attr-defined]
        if key == "grpc-status-details-bin":
            status = rpc_status.Status.FromString(value)
            errors = []
            for detail in status.details:
                error = p4r.Error()
                assert detail.Unpack(error)
                errors.append(error)
            return errors
    return []


def update(kind: int, **entity: object) -> p4r.Update:
    return p4r.Update(type=kind, entity=p4r.Entity(**entity))  # type: ignore[arg-type]


# ------------------------------------------------------------------------------ veths, processes


def run(*cmd: str) -> None:
    subprocess.run(cmd, check=True, capture_output=True, timeout=20)


@contextlib.contextmanager
def veth_pairs(count: int, prefix: str) -> Iterator[list[tuple[str, str]]]:
    """``count`` veth pairs (switch side, host side), up, IPv6 off; deleted afterwards whatever happens."""
    pairs = [(f"{prefix}s{i}", f"{prefix}h{i}") for i in range(count)]
    created: list[str] = []
    try:
        for sw, host in pairs:
            run("ip", "link", "add", sw, "type", "veth", "peer", "name", host)
            created.append(sw)
            for name in (sw, host):
                with contextlib.suppress(OSError):
                    Path(f"/proc/sys/net/ipv6/conf/{name}/disable_ipv6").write_text("1")
                run("ip", "link", "set", name, "up")
        yield pairs
    finally:
        for sw in created:
            subprocess.run(["ip", "link", "del", sw], capture_output=True, timeout=20)


def unique_prefix(tag: str) -> str:
    """Interface name prefix unique per test process (names are at most 15 characters)."""
    return f"{tag}{os.getpid() % 100000}"


@dataclass
class SwitchProcess:
    proc: subprocess.Popen[str]
    address: str
    log_file: Path
    output: list[str] = field(default_factory=list)
    """stdout lines up to the "listening" one"""

    def stop(self) -> int:
        """SIGTERM and wait; returns the exit status."""
        if self.proc.poll() is None:
            self.proc.terminate()
        try:
            return self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait(timeout=5)


def wait_for_line(proc: subprocess.Popen[str], text: str, timeout: float) -> list[str]:
    """The process's stdout lines up to the first that contains ``text`` (AssertionError if none)."""
    assert proc.stdout is not None
    lines: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], max(0.0, deadline - time.monotonic()))
        line = proc.stdout.readline() if ready else ""
        if not line:
            break
        lines.append(line)
        if text in line:
            return lines
    stderr = proc.stderr.read() if proc.stderr and proc.poll() is not None else ""
    raise AssertionError(f"p4switch did not start: {lines} {stderr}")


@contextlib.contextmanager
def switch_process(args: list[str], log_file: Path, device_id: int = DEVICE_ID,
                   env: dict[str, str] | None = None, start_timeout: float = 30.0) -> Iterator[SwitchProcess]:
    """Start `p4switch` with ``args`` (logging at info unless they say otherwise) and wait for its
    "listening" line; killed afterwards by pid. The log is ``log_file`` plus ``.txt`` (BMv2's naming).
    ``env`` adds environment variables."""
    port = targets.free_port()
    cmd = [str(VENV_BIN / "p4switch"), "--device-id", str(device_id), "--grpc-server-addr",
           f"127.0.0.1:{port}", "--log-file", str(log_file), "-L", "info", *args]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **(env or {})})
    handle = SwitchProcess(proc, f"127.0.0.1:{port}", Path(f"{log_file}.txt"))
    try:
        handle.output = wait_for_line(proc, "listening", start_timeout)
        yield handle
    finally:
        handle.stop()


class RawPort:
    """A raw socket on the host side of a veth: send frames in, capture frames out."""

    def __init__(self, iface: str) -> None:
        self.sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))
        self.sock.bind((iface, 0))
        self.sock.setsockopt(dataplane.SOL_PACKET, dataplane.PACKET_IGNORE_OUTGOING, 1)  # not what we send
        self.sock.setsockopt(dataplane.SOL_PACKET, dataplane.PACKET_AUXDATA, 1)  # VLAN tags back in place

    def send(self, frame: bytes) -> None:
        self.sock.send(frame)

    def receive(self, timeout: float = EFFECT_TIMEOUT, match: bytes | None = None) -> bytes | None:
        """The next frame (starting with ``match`` when given) within ``timeout``, else None."""
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            ready, _, _ = select.select([self.sock], [], [], left)
            if not ready:
                return None
            frame, _ = dataplane.receive_frame(self.sock)
            if match is None or frame.startswith(match):
                return frame
        return None

    def close(self) -> None:
        self.sock.close()
