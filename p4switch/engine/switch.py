"""The v1model switch: loads the IR, compiles it (codegen) and runs the pipeline as BMv2 simple_switch does:
parser -> verify checksum -> ingress -> traffic manager (clone I2E, multicast/replication, drop, unicast)
-> egress (clone E2E) -> compute checksum -> deparser.
"""

from __future__ import annotations

import json
import logging
import random
import time
from collections.abc import Callable
from typing import Any

from p4switch import ir
from p4switch.engine.api import (
    DROP_PORT,
    MAX_PASSES,
    PKT_INSTANCE_EGRESS_CLONE,
    PKT_INSTANCE_INGRESS_CLONE,
    PKT_INSTANCE_RECIRC,
    PKT_INSTANCE_REPLICATION,
    PKT_INSTANCE_RESUBMIT,
    TRACE,
    CloneSession,
    ProgramError,
)
from p4switch.engine.codegen import Codegen, ident
from p4switch.engine.control import ControlPlane
from p4switch.engine.externs import (
    HASH_ALGORITHMS,
    hash_offset,
)
from p4switch.engine.tables import Table, action_text

MAX_CLONE_DEPTH = 4  # an E2E clone may clone again; bound it so a program cannot loop forever


class Reject(Exception):  # noqa: N818 - a parser outcome, not an error of the engine
    __slots__ = ("code",)

    def __init__(self, code: int) -> None:
        self.code = code


class ExitBlock(Exception):  # noqa: N818 - P4 `exit`, control flow
    pass


class SharedHeaderWrite(Exception):  # noqa: N818 - names the broken invariant
    """A write reached one of the shared blank headers (codegen.header_object was skipped): a bug of the
    engine, raised instead of silently changing every later packet's headers."""


class PacketCtx:
    """The packet_in / packet_out object of a parser or deparser."""

    __slots__ = ("data", "pos", "out")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0
        self.out: list[bytes] = []


class ExternCtx:
    """Per-packet state the generated code reaches as ``X`` (clone requests, meter colour, lengths)."""

    def __init__(self, switch: V1Switch, rng: random.Random) -> None:
        self.switch = switch
        self.rng = rng
        self.length = 0
        self.meter_color = 0
        self.sm: Any = None
        self.payload = b""
        self.clone_req: tuple[str, int, tuple[tuple[str, ...], ...]] | None = None
        # resubmit (ingress) or recirculate (egress): the metadata fields it preserves
        self.again_req: tuple[tuple[str, ...], ...] | None = None

    def clone(self, clone_type: str, session: int, paths: tuple[tuple[str, ...], ...]) -> None:
        self.clone_req = (clone_type, session, paths)  # the last call wins, as in BMv2

    def resubmit(self, paths: tuple[tuple[str, ...], ...]) -> None:
        self.again_req = paths  # the last call wins, as in BMv2

    recirculate = resubmit  # resubmit is asked in ingress, recirculate in egress: one request at a time

    def random(self, lo: int, hi: int) -> int:
        return self.rng.randint(lo, hi) if lo <= hi else lo

    def digest(self, name: str, values: tuple[int, ...]) -> None:
        self.switch.emit_digest(name, values)

    def log_msg(self, fmt: str, args: tuple[Any, ...]) -> None:
        text = fmt
        for value in args:
            text = text.replace("{}", str(int(value)), 1)
        self.switch.log.info("log_msg: %s", text)

    def assertion_failed(self, where: str) -> None:
        self.switch.bump("assert_failed")
        self.switch.log.error("assertion failed at %s", where)


def _lookahead(data: bytes, pos: int, width: int) -> int:
    nbytes = (width + 7) // 8
    if pos + nbytes > len(data):
        raise Reject(1)  # error.PacketTooShort
    return int.from_bytes(data[pos : pos + nbytes], "big") >> (nbytes * 8 - width)


def _at(stack: list[Any], index: int, blank: Callable[[], Any]) -> Any:
    """A header stack element at a run-time index; out of range, a new blank one (ir.DynIndex)."""
    return stack[index] if 0 <= index < len(stack) else blank()


class V1Switch(ControlPlane):
    """The Python back end of api.Switch: loads the program into the tables and externs ControlPlane
    (control.py) serves to the control plane, and runs packets through the generated code. The loading
    and the packet path stay one class because both work on the compiled module's globals (``self.g``)
    and the per-packet context ``self.x``."""

    def __init__(
        self, program: ir.Program, log: logging.Logger | None, clock: Callable[[], float], rng: random.Random
    ) -> None:
        super().__init__(program, log, clock)
        self.x = ExternCtx(self, rng)
        self._compile()

    # ------------------------------------------------------------------------------ compile
    def _compile(self) -> None:
        program = self.program
        gen = Codegen(program)
        source = gen.generate()
        pipeline = program.pipeline
        if pipeline.arch != "v1model":
            raise ProgramError(f"architecture {pipeline.arch} is not supported by p4switch")
        source += self._drivers(pipeline)
        self.source = source
        g: dict[str, Any] = {
            "_new": object.__new__,
            "_from_bytes": int.from_bytes,
            "_Reject": Reject,
            "_Exit": ExitBlock,
            "_SharedWrite": SharedHeaderWrite,
            "_lookahead": _lookahead,
            "_at": _at,
            "_HASH": HASH_ALGORITHMS,
            "_hash_offset": hash_offset,
            "X": self.x,
            "TR": False,
            "_trace": self._trace,
            "_trace_table": self._trace_table,
        }
        try:
            code = compile(source, f"<p4switch {program.source or 'program'}>", "exec")
        except SyntaxError as exc:  # a bug in codegen: say where
            raise ProgramError(f"internal error compiling the program: {exc}") from exc
        exec(code, g)
        self.g = g
        for name, obj in self.make_externs(gen.width).items():
            g[f"EXT{gen.extern_ids[name]}"] = obj
        self.make_tables(gen.width, lambda t, a: g[gen.action_fns[(t.control, a.name)]])
        for name, table in self.tables.items():
            tid = gen.table_ids[name]
            g[f"TBL{tid}"] = table
            g[f"TBL{tid}_lookup"] = table.lookup
        self.new_headers = g[f"S_{ident(pipeline.headers_type)}"]
        self.new_meta = g[f"S_{ident(pipeline.metadata_type)}"]
        self.new_sm = g["S_standard_metadata_t"]
        self.run_parser = g["RUN_parser"]
        self.run_ingress = g["RUN_ingress"]
        self.run_egress = g.get("RUN_egress")  # None when the egress control is empty
        self.run_deparse = g["RUN_deparse"]
        # packet_in/packet_out objects reused by every packet (process() runs one packet at a time)
        self.parse_ctx = PacketCtx(b"")
        self.deparse_ctx = PacketCtx(b"")

    def _drivers(self, pipeline: ir.Pipeline) -> str:
        """The four phases the engine calls per packet (parser; verify checksum + ingress; egress;
        compute checksum + deparser), each calling its blocks with (packet, headers, meta,
        standard_metadata) in the block's own parameter order and skipping empty controls."""
        blocks: dict[str, ir.Parser | ir.Control] = {b.name: b for b in self.program.parsers}
        blocks.update((b.name, b) for b in self.program.controls)
        roles = {pipeline.headers_type: "H", pipeline.metadata_type: "M", "standard_metadata_t": "SM"}
        phases = {
            "parser": ["parser"],
            "ingress": ["verify_checksum", "ingress"],
            "egress": ["egress"],
            "deparse": ["compute_checksum", "deparser"],
        }
        lines = []
        for phase, members in phases.items():
            calls = [self._block_call(blocks, getattr(pipeline, role), role, roles) for role in members]
            calls = [call for call in calls if call]
            if not calls and phase == "egress":
                continue  # the engine skips an empty egress (and its timestamp) altogether
            lines.append(f"def RUN_{phase}(pk, H, M, SM):")
            lines += [f"    {'return ' if phase == 'parser' else ''}{call}" for call in calls]
            lines.append("    pass")
        return "\n".join(lines) + "\n"

    def _block_call(
        self, blocks: dict[str, ir.Parser | ir.Control], name: str, role: str, roles: dict[str, str]
    ) -> str:
        blk = blocks.get(name)
        if blk is None:
            raise ProgramError(f"pipeline block {name} not found")
        if role != "parser" and not getattr(blk, "body", ()):
            return ""
        args = []
        for p in blk.params:
            t = p.type
            if isinstance(t, ir.TPacketIn | ir.TPacketOut):
                args.append("pk")
            elif isinstance(t, ir.TStruct) and t.name in roles:
                args.append(roles[t.name])
            else:
                raise ProgramError(
                    f"{blk.src or name}: parameter {p.name} of {name} is not a v1model pipeline parameter"
                )
        prefix = "PARSER" if role == "parser" else "CONTROL"
        return f"{prefix}_{ident(name)}({', '.join(args)})"

    # --------------------------------------------------------------------------------- trace
    def _trace(self, fmt: str, *args: Any) -> None:
        """One TRACE line, prefixed with the packet number (stats['rx']) as BMv2 prefixes [pkt N]."""
        self.log.log(TRACE, "[pkt %d] " + fmt, self.stats.get("rx", 0), *args)

    def _trace_table(self, table: Table, slot: Any) -> None:
        if slot is None:
            self._trace("table %s: miss, default action %s", table.name, action_text(table.default.action))
        else:
            self._trace("table %s: hit %s -> %s", table.name, table.describe(slot), action_text(slot.action))

    def bump(self, key: str, n: int = 1) -> None:
        self.stats[key] = self.stats.get(key, 0) + n

    def emit_digest(self, name: str, values: tuple[int, ...]) -> None:
        self.bump("digest")
        if self.g["TR"]:
            self._trace("digest %s %s", name, values)
        self.deliver_digest(name, values)

    # ---------------------------------------------------------------------------- data plane
    def process(self, ingress_port: int, frame: bytes) -> list[tuple[int, bytes]]:
        with self.lock:
            try:
                return self._process(ingress_port, bytes(frame))
            except Exception:  # never raise to the caller: count, log, drop
                self.bump("internal_error")
                self.log.exception("internal error processing a frame from port %d", ingress_port)
                return []

    def _parse(self, port: int, frame: bytes, m: Any = None) -> tuple[Any, Any, Any, bytes]:
        h, sm = self.new_headers(), self.new_sm()
        m = self.new_meta() if m is None else m
        sm.ingress_port = port
        sm.packet_length = len(frame)
        sm.ingress_global_timestamp = int((self.clock() - self.start_time) * 1e6) & 0xFFFFFFFFFFFF
        self.x.sm = sm
        pk = self.parse_ctx
        pk.data = frame
        pk.pos = 0
        code = self.run_parser(pk, h, m, sm)
        if code < 0:  # explicit `transition reject`: parser_error stays NoError, as in BMv2
            self.bump("parser_reject")
        elif code > 0:
            sm.parser_error = code
            name = self.errors[code] if code < len(self.errors) else str(code)
            self.bump("parser_error:" + name)
            if self.g["TR"]:
                self._trace("parser: error %s, packet goes on to ingress", name)
        return h, m, sm, frame[pk.pos :]

    def _process(self, port: int, frame: bytes) -> list[tuple[int, bytes]]:
        tr = self.g["TR"] = self.log.isEnabledFor(TRACE)
        stats = self.stats
        stats["rx"] = stats.get("rx", 0) + 1
        if tr:
            self._trace("packet in: port %d, %d bytes", port, len(frame))
        out: list[tuple[int, bytes]] = []
        self.passes = 0
        self._ingress(port, frame, out)
        stats["tx"] = stats.get("tx", 0) + len(out)
        if tr:
            self._trace("packet out: %s", [(p, len(f)) for p, f in out] or "dropped")
        return out

    def _ingress(
        self, port: int, frame: bytes, out: list[tuple[int, bytes]], again: tuple[int, Any] | None = None
    ) -> None:
        """Parser, ingress and the traffic manager for a frame; `again` (instance type, preserved
        metadata) when it is a resubmitted or recirculated one."""
        x = self.x
        x.length = len(frame)
        x.clone_req = None
        x.again_req = None
        x.meter_color = 0
        h, m, sm, payload = self._parse(port, frame, again and again[1])
        if again:
            sm.instance_type = again[0]
        x.payload = payload
        self.run_ingress(None, h, m, sm)
        req, again_req = x.clone_req, x.again_req  # read before the I2E clone's egress pass resets them
        if req is not None and req[0] == "I2E":
            self._ingress_clone(port, frame, m, req, out)
        if again_req is not None:  # resubmit: the frame as it came, the preserved fields kept
            self._again(port, frame, out, PKT_INSTANCE_RESUBMIT, self._preserved_meta(m, again_req))
            return
        copies = self._traffic_manager(h, m, sm)
        for eh, em, esm in copies:
            self._egress(eh, em, esm, payload, out, 0, 0)

    def _again(
        self, port: int, frame: bytes, out: list[tuple[int, bytes]], instance_type: int, m: Any
    ) -> None:
        """A resubmitted or recirculated frame goes through ingress again (bounded per received frame)."""
        kind = "resubmit" if instance_type == PKT_INSTANCE_RESUBMIT else "recirculate"
        if self.passes >= MAX_PASSES:
            self.bump(kind + "_limit")
            if self.g["TR"]:
                self._trace("%s: more than %d passes, dropped", kind, MAX_PASSES)
            return
        self.passes += 1
        self.bump(kind)
        if self.g["TR"]:
            self._trace("%s: %d bytes back to the parser", kind, len(frame))
        self._ingress(port, frame, out, (instance_type, m))

    def _traffic_manager(self, h: Any, m: Any, sm: Any) -> list[tuple[Any, Any, Any]]:
        """The egress copies of a packet after ingress: multicast replicas, the unicast copy or none."""
        group = sm.mcast_grp
        if group:
            replicas = self.mcast.get(group, [])
            if self.g["TR"]:
                self._trace("egress decision: multicast group %d, %d copies", group, len(replicas))
            self.bump("mcast_copies", len(replicas))
            copies = []
            for i, (port, rid) in enumerate(replicas):
                last = i == len(replicas) - 1
                ch, cm, csm = (h, m, sm) if last else (h.copy(), m.copy(), sm.copy())
                csm.egress_port = port
                csm.egress_rid = rid
                csm.instance_type = PKT_INSTANCE_REPLICATION
                copies.append((ch, cm, csm))
            return copies
        if sm.egress_spec == DROP_PORT:
            if self.g["TR"]:
                self._trace("egress decision: drop")
            self.bump("dropped")
            return []
        sm.egress_port = sm.egress_spec
        if self.g["TR"]:
            self._trace("egress decision: unicast port %d", sm.egress_port)
        return [(h, m, sm)]

    def _preserved_meta(self, m: Any, paths: tuple[tuple[str, ...], ...]) -> Any:
        fresh = self.new_meta()
        for path in paths:
            src, dst = m, fresh
            for name in path[:-1]:
                src, dst = getattr(src, name), getattr(dst, name)
            value = getattr(src, path[-1])
            setattr(dst, path[-1], value.copy() if hasattr(value, "copy") else value)
        return fresh

    def _session(self, session_id: int) -> CloneSession | None:
        session = self.sessions.get(session_id)
        if session is None:
            self.bump("clone_no_session")
            if self.g["TR"]:
                self._trace("clone: session %d does not exist, no clone", session_id)
        return session

    def _ingress_clone(
        self, port: int, frame: bytes, m: Any, req: tuple[str, int, Any], out: list[tuple[int, bytes]]
    ) -> None:
        """I2E: the packet as it entered ingress (re-parsed), fresh metadata but the preserved fields."""
        session = self._session(req[1])
        if session is None:
            return
        for replica in session.replicas:
            self.bump("clone")
            ch, _, csm, payload = self._parse(port, frame)
            cm = self._preserved_meta(m, req[2])
            csm.instance_type = PKT_INSTANCE_INGRESS_CLONE
            csm.egress_port = replica.port
            csm.egress_rid = replica.rid
            if self.g["TR"]:
                self._trace("clone I2E: session %d to port %d", session.session_id, replica.port)
            self._egress(ch, cm, csm, payload, out, 1, session.packet_length_bytes)

    def _egress(
        self, h: Any, m: Any, sm: Any, payload: bytes, out: list[tuple[int, bytes]], depth: int, truncate: int
    ) -> None:
        x = self.x
        x.clone_req = None
        x.sm = sm
        x.length = sm.packet_length
        x.payload = payload
        sm.egress_spec = 0
        x.again_req = None
        if self.run_egress is not None:
            sm.egress_global_timestamp = int((self.clock() - self.start_time) * 1e6) & 0xFFFFFFFFFFFF
            self.run_egress(None, h, m, sm)
        req, again = x.clone_req, x.again_req  # read before an E2E clone's own egress pass resets them
        if req is not None and req[0] == "E2E" and depth < MAX_CLONE_DEPTH:
            session = self._session(req[1])
            for replica in session.replicas if session else ():
                self.bump("clone")
                csm = sm.copy()
                csm.instance_type = PKT_INSTANCE_EGRESS_CLONE
                csm.egress_port = replica.port
                csm.egress_rid = replica.rid
                if self.g["TR"]:
                    self._trace("clone E2E: session %d to port %d", req[1], replica.port)
                assert session is not None
                self._egress(
                    h.copy(),
                    self._preserved_meta(m, req[2]),
                    csm,
                    payload,
                    out,
                    depth + 1,
                    session.packet_length_bytes,
                )
        if sm.egress_spec == DROP_PORT:
            self.bump("dropped")
            if self.g["TR"]:
                self._trace("egress: dropped (mark_to_drop in egress)")
            return
        x.payload = payload
        pk = self.deparse_ctx
        pk.out = chunks = []
        self.run_deparse(pk, h, m, sm)
        chunks.append(payload)
        data = b"".join(chunks)
        if truncate:
            data = data[:truncate]
        if again is not None:  # recirculate: the deparsed frame back to the parser
            self._again(sm.ingress_port, data, out, PKT_INSTANCE_RECIRC, self._preserved_meta(m, again))
            return
        out.append((sm.egress_port, data))


def read_program(ir_json: bytes | str) -> ir.Program:
    """The typed IR of a program's JSON (read once, at load). Raises ProgramError."""
    try:
        doc = json.loads(ir_json)
    except ValueError as exc:
        raise ProgramError(f"program is not valid JSON: {exc}") from None
    try:
        return ir.from_json(doc)
    except ir.WrongFormat as exc:
        raise ProgramError(str(exc)) from None
    except ir.IRFormatError as exc:
        raise ProgramError(f"malformed p4switch IR: {exc}") from None


def load(
    program: bytes | str | ir.Program,
    log: logging.Logger | None = None,
    clock: Callable[[], float] = time.monotonic,
    rng: random.Random | None = None,
) -> V1Switch:
    if not isinstance(program, ir.Program):
        program = read_program(program)
    try:
        return V1Switch(program, log, clock, rng or random.Random())
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise ProgramError(f"malformed p4switch IR: {type(exc).__name__}: {exc}") from exc
