"""The control socket's commands: what ``ibsec-agentctl`` (and the tests, and the bench) can ask an agent.

Every command takes JSON arguments and returns a JSON value; data travels as hex (``data_hex``) or text
(``data``). Keys never come back, except a memory key the application asks for to delegate it
(``mr_key``): the control socket is the application's interface, mode 0600, not a log.

Every argument is checked by :class:`ibsec.jsonrequest.Args` before the command runs: its type and range
(an error names the field and what it allows), and no field the command does not know.
"""

from __future__ import annotations

from typing import Any

from ibsec.control import CommandError, Progress
from ibsec.jsonrequest import Args

from . import perf
from .adapter import PD_MAX, QPN_MAX, Adapter, AdapterError
from .keyring import MissingKey
from .memory import MAX_REGION, Access, RegionError
from .qp import Scope, Service
from .receive import MAX_MESSAGE

MAX_TIMEOUT = 60.0
MAX_REQUEST_DATA = 1 << 21  # bytes of data one request may carry (larger messages: ``size``)
U32 = 0xFFFF_FFFF
U64 = (1 << 64) - 1
SCOPES = [s.value for s in Scope]
SERVICES = [s.value for s in Service]


def _data(args: Args) -> bytes:
    """The message of a send or write: ``data_hex``, ``data`` (text) or ``size`` zero bytes."""
    if args.has("data_hex"):
        data: bytes = args.hex("data_hex", MAX_REQUEST_DATA)
    elif args.has("data"):
        data = args.text("data", MAX_REQUEST_DATA).encode()
    elif args.has("size"):
        data = bytes(args.integer("size", 0, MAX_MESSAGE))
    else:
        raise CommandError(f"{args.cmd}: give data (text), data_hex or size")
    return data


def _timeout(args: Args, default: float = 5.0) -> float:
    value: float = args.number("timeout", 0.0, MAX_TIMEOUT, default)
    return value


def _qpn(args: Args, name: str = "qpn") -> int:
    value: int = args.integer(name, 0, QPN_MAX)
    return value


def _security(args: Args) -> tuple[int, int | None, Scope | None]:
    """P_Key (default: the default partition), security mode and key scope (default: the partition's)."""
    pkey = args.integer("pkey", 0, 0xFFFF, 0xFFFF)
    mode = args.integer("mode", 0, 4, None)
    scope = args.choice("scope", SCOPES, None)
    return pkey, mode, Scope(scope) if scope else None


class Commands:
    """Dispatches control requests to an :class:`Adapter`; errors become :class:`CommandError`."""

    def __init__(self, adapter: Adapter) -> None:
        self.adapter = adapter

    def dispatch(self, cmd: str, values: dict[str, Any], progress: Progress) -> Any:
        method = getattr(self, f"cmd_{cmd}", None)
        if method is None:
            names = sorted(name[4:] for name in dir(self) if name.startswith("cmd_"))
            raise CommandError(f"unknown command {cmd[:40]!r}; commands: {', '.join(names)}")
        args = Args(cmd, values)
        try:
            return method(args, progress)
        except (AdapterError, MissingKey, RegionError) as exc:
            raise CommandError(str(exc)) from None

    def cmd_ping(self, args: Args, progress: Progress) -> Any:
        """Is the agent alive? Returns its name and GID."""
        args.done()
        return {"name": self.adapter.config.name, "gid": self.adapter.gid}

    def cmd_info(self, args: Args, progress: Progress) -> Any:
        """Addresses, P_Key table, which keys are held (never their bytes)."""
        args.done()
        return self.adapter.describe()

    def cmd_counters(self, args: Args, progress: Progress) -> Any:
        """Drops by reason, frames taken, statistics, half-open and keyless connections, and the session key
        cache's hits and misses."""
        args.done()
        snapshot: dict[str, Any] = dict(self.adapter.counters.snapshot())
        snapshot["admission"] = self.adapter.admission.describe()
        stats = self.adapter.skc.stats
        snapshot["skc"] = {
            "stored": len(self.adapter.skc),
            "hits": stats.hits,
            "prefetch_hits": stats.prefetch_hits,
            "prefetched": stats.prefetched,
            "misses": stats.misses,
            "evictions": stats.evictions,
            "hit_rate": stats.hit_rate,
        }
        return snapshot

    def cmd_qps(self, args: Args, progress: Progress) -> Any:
        """Every QP with its state (no keys)."""
        args.done()
        return [qp.describe() for qp in self.adapter.list_qps()]

    def cmd_create_qp(self, args: Args, progress: Progress) -> Any:
        """A new RC or UD QP: service, pkey, mode, scope, qkey, pd (all optional)."""
        service = Service(args.choice("service", SERVICES, "UD"))
        pkey, mode, scope = _security(args)
        qkey = args.integer("qkey", 0, U32, None)
        pd = args.integer("pd", 0, PD_MAX, None)
        args.done()
        return self.adapter.create_qp(service, pkey, mode, scope, qkey, pd).describe()

    def cmd_alloc_pd(self, args: Args, progress: Progress) -> Any:
        """A new protection domain: QPs and regions that name it (``pd``) are isolated from the others."""
        args.done()
        return {"pd": self.adapter.alloc_pd()}

    def cmd_listen(self, args: Args, progress: Progress) -> Any:
        """Connections accepted in partition ``pkey`` from now on join protection domain ``pd``."""
        pkey, pd = args.integer("pkey", 0, 0xFFFF), args.integer("pd", 0, PD_MAX)
        args.done()
        self.adapter.listen(pkey, pd)
        return {"pkey": pkey, "pd": pd}

    def cmd_connect(self, args: Args, progress: Progress) -> Any:
        """CM handshake to ``remote_gid``: REQ/REP/RTU for RC, SIDR_REQ/SIDR_REP for UD."""
        remote_gid = args.gid("remote_gid")
        service = Service(args.choice("service", SERVICES, "RC"))
        pkey, mode, scope = _security(args)
        timeout = _timeout(args)
        qpn = args.integer("qpn", 0, QPN_MAX, None)
        remote_qpn = args.integer("remote_qpn", 0, QPN_MAX, None)
        pd = args.integer("pd", 0, PD_MAX, None)
        args.done()
        qp = self.adapter.cm.connect(remote_gid, service, pkey, mode, scope, timeout, qpn, remote_qpn, pd)
        return qp.describe()

    def cmd_disconnect(self, args: Args, progress: Progress) -> Any:
        """DREQ/DREP: tear an RC connection down on both ends (its session key is forgotten)."""
        qpn, timeout = _qpn(args), _timeout(args, 2.0)
        args.done()
        qp = self.adapter.qp(qpn)
        return {"qpn": qp.qpn, "confirmed": self.adapter.cm.disconnect(qp, timeout)}

    def cmd_serve(self, args: Args, progress: Progress) -> Any:
        """Make a QP echo every received message back to its sender (the ib_send_lat server side)."""
        qpn, echo = _qpn(args), args.flag("echo", True)
        args.done()
        qp = self.adapter.qp(qpn)
        qp.echo = echo
        return qp.describe()

    def cmd_send(self, args: Args, progress: Progress) -> Any:
        """SEND data on a QP (UD: to ``dest_gid``/``dest_qpn``)."""
        qpn = _qpn(args)
        dest = (args.gid("dest_gid"), _qpn(args, "dest_qpn")) if args.has("dest_gid") else None
        data = _data(args)
        args.done()
        self.adapter.post_send(qpn, data, dest)
        return {"sent": len(data)}

    def cmd_recv(self, args: Args, progress: Progress) -> Any:
        """The next message received on a QP, as hex (null after ``timeout`` seconds)."""
        qpn, timeout = _qpn(args), _timeout(args)
        args.done()
        item = self.adapter.qp(qpn).take(timeout)
        return None if item is None else {"data_hex": item[0].hex(), **item[1]}

    def cmd_reg_mr(self, args: Args, progress: Progress) -> Any:
        """Register a zeroed region of ``length`` bytes in protection domain ``pd`` or partition ``pkey``'s
        own (default: the default partition's); ``access`` any or authenticated (modes 1-3 only);
        ``ext_depth`` turns on extended memory protection."""
        length = args.integer("length", 1, MAX_REGION)
        pkey = args.integer("pkey", 0, 0xFFFF, None)
        pd = args.integer("pd", 0, PD_MAX, None)
        access = Access(args.choice("access", [a.value for a in Access], Access.ANY.value))
        ext_depth = args.integer("ext_depth", 0, 64, None)
        args.done()
        region = self.adapter.reg_mr(length, pkey, pd, access, ext_depth)
        return {
            "addr": region.addr,
            "rkey": region.r_key,
            "length": region.length,
            "pd": region.pd,
            "access": region.access.value,
            "ext_mem": region.tree is not None,
        }

    def cmd_mrs(self, args: Args, progress: Progress) -> Any:
        """Registered regions (addresses, lengths, R_Keys)."""
        args.done()
        return self.adapter.memory.describe()

    def cmd_read_mr(self, args: Args, progress: Progress) -> Any:
        """Local read of a region's bytes (what remote writes left there), as hex."""
        r_key = args.integer("rkey", 0, U32)
        offset = args.integer("offset", 0, MAX_REGION, 0)
        length = args.integer("length", 0, MAX_REGION, None)
        args.done()
        region = self.adapter.memory.lookup(r_key)
        if region is None:
            raise CommandError("no such R_Key")
        length = region.length - offset if length is None else length
        if not region.contains(region.addr + offset, length):
            raise CommandError("range outside the region")
        return {"data_hex": region.read(region.addr + offset, length).hex()}

    def cmd_mr_key(self, args: Args, progress: Progress) -> Any:
        """Delegate: the key of sub-region [start, start + length) of an ext-mem region, as hex."""
        r_key = args.integer("rkey", 0, U32)
        start = args.integer("start", 0, U64, None)
        length = args.integer("length", 1, MAX_REGION, None)
        args.done()
        region = self.adapter.memory.lookup(r_key)
        start = (region.addr if region else 0) if start is None else start
        length = (region.length if region else 1) if length is None else length
        return {
            "key_hex": self.adapter.memory.delegate(r_key, start, length).material.hex(),
            "start": start,
            "length": length,
        }

    def cmd_write(self, args: Args, progress: Progress) -> Any:
        """RDMA WRITE data to remote ``va`` under ``rkey`` (``memory_key_hex`` for extended protection)."""
        qpn = _qpn(args)
        va, r_key = args.integer("va", 0, U64), args.integer("rkey", 0, U32)
        memory_key = args.hex("memory_key_hex", 32, None)
        data = _data(args)
        wait, timeout = args.flag("wait", True), _timeout(args)
        args.done()
        self.adapter.post_write(qpn, va, r_key, data, memory_key or None)
        acked = self.adapter.wait_outstanding(qpn, 0, timeout) if wait else False
        return {"written": len(data), "acked": acked}

    def cmd_fault(self, args: Args, progress: Progress) -> Any:
        """Fault injection for tests and demos: drop the next ``drop_rx`` data frames received."""
        drop_rx = args.integer("drop_rx", 0, 1 << 20, 0)
        args.done()
        self.adapter.inject_drops = drop_rx
        return {"drop_rx": self.adapter.inject_drops}

    def cmd_perf(self, args: Args, progress: Progress) -> Any:
        """A perftest-like run: test = send_lat | write_bw, with size, iterations and duration bounds."""
        test = args.choice("test", ("send_lat", "write_bw"), "send_lat")
        qpn = _qpn(args)
        size = args.integer("size", 0, MAX_MESSAGE, 64)
        iterations = args.integer("iterations", 1, perf.MAX_ITERATIONS, 1000)
        duration = args.number("duration", 0.001, perf.MAX_DURATION, 10.0)
        if test == "send_lat":
            args.done()
            return perf.send_lat(self.adapter, qpn, size, iterations, duration, progress)
        va, r_key = args.integer("va", 0, U64), args.integer("rkey", 0, U32)
        window = args.integer("window", 1, 1024, 32)
        memory_key = args.hex("memory_key_hex", 32, None)
        args.done()
        return perf.write_bw(
            self.adapter, qpn, va, r_key, size, iterations, duration, progress, window, memory_key or None
        )
