"""The control socket's commands: what ``ibsec-agentctl`` (and the tests, and the bench) can ask an agent.

Every command takes JSON arguments and returns a JSON value; data travels as hex (``data_hex``) or text
(``data``). Keys never come back, except a memory key the application asks for to delegate it
(``mr_key``): the control socket is the application's interface, mode 0600, not a log.
"""

from __future__ import annotations

from typing import Any

from . import perf
from .adapter import Adapter, AdapterError
from .control import CommandError, Progress
from .keyring import MissingKey
from .memory import RegionError
from .qp import Scope, Service

MAX_TIMEOUT = 60.0


def _data(args: dict[str, Any]) -> bytes:
    if "data_hex" in args:
        return bytes.fromhex(str(args["data_hex"]))
    if "data" in args:
        return str(args["data"]).encode()
    if "size" in args:
        return bytes(int(args["size"]))
    raise CommandError("give data (text), data_hex or size")


def _timeout(args: dict[str, Any], default: float = 5.0) -> float:
    return max(0.0, min(float(args.get("timeout", default)), MAX_TIMEOUT))


def _opt_int(args: dict[str, Any], name: str) -> int | None:
    value = args.get(name)
    return None if value is None else int(str(value), 0)


class Commands:
    """Dispatches control requests to an :class:`Adapter`; errors become :class:`CommandError`."""

    def __init__(self, adapter: Adapter) -> None:
        self.adapter = adapter

    def dispatch(self, cmd: str, args: dict[str, Any], progress: Progress) -> Any:
        method = getattr(self, f"cmd_{cmd}", None)
        if method is None:
            names = sorted(name[4:] for name in dir(self) if name.startswith("cmd_"))
            raise CommandError(f"unknown command {cmd!r}; commands: {', '.join(names)}")
        try:
            return method(args, progress)
        except (AdapterError, MissingKey, RegionError) as exc:
            raise CommandError(str(exc)) from None

    def cmd_ping(self, args: dict[str, Any], progress: Progress) -> Any:
        """Is the agent alive? Returns its name and GID."""
        return {"name": self.adapter.config.name, "gid": self.adapter.gid}

    def cmd_info(self, args: dict[str, Any], progress: Progress) -> Any:
        """Addresses, P_Key table, which keys are held (never their bytes)."""
        return self.adapter.describe()

    def cmd_counters(self, args: dict[str, Any], progress: Progress) -> Any:
        """Drops by reason and statistics, plus the session key cache's hits and misses."""
        snapshot: dict[str, Any] = dict(self.adapter.counters.snapshot())
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

    def cmd_qps(self, args: dict[str, Any], progress: Progress) -> Any:
        """Every QP with its state (no keys)."""
        return [qp.describe() for qp in self.adapter.list_qps()]

    def cmd_create_qp(self, args: dict[str, Any], progress: Progress) -> Any:
        """A new RC or UD QP: service, pkey, mode, scope, qkey, pd (all optional)."""
        scope = Scope(args["scope"]) if args.get("scope") else None
        qp = self.adapter.create_qp(
            Service(args.get("service", "UD")),
            _opt_int(args, "pkey") or 0xFFFF,
            _opt_int(args, "mode"),
            scope,
            _opt_int(args, "qkey"),
            _opt_int(args, "pd"),
        )
        return qp.describe()

    def cmd_alloc_pd(self, args: dict[str, Any], progress: Progress) -> Any:
        """A new protection domain for an application: QPs that name it (``pd``) belong to it."""
        return {"pd": self.adapter.alloc_pd()}

    def cmd_connect(self, args: dict[str, Any], progress: Progress) -> Any:
        """CM handshake to ``remote_gid``: REQ/REP/RTU for RC, SIDR_REQ/SIDR_REP for UD."""
        scope = Scope(args["scope"]) if args.get("scope") else None
        service = Service(args.get("service", "RC"))
        qp = self.adapter.cm.connect(
            str(args["remote_gid"]),
            service,
            _opt_int(args, "pkey") or 0xFFFF,
            _opt_int(args, "mode"),
            scope,
            _timeout(args),
            _opt_int(args, "qpn"),
            _opt_int(args, "remote_qpn"),
            _opt_int(args, "pd"),
        )
        return qp.describe()

    def cmd_disconnect(self, args: dict[str, Any], progress: Progress) -> Any:
        """DREQ/DREP: tear an RC connection down on both ends (its session key is forgotten)."""
        qp = self.adapter.qp(int(args["qpn"]))
        return {"qpn": qp.qpn, "confirmed": self.adapter.cm.disconnect(qp, _timeout(args, 2.0))}

    def cmd_serve(self, args: dict[str, Any], progress: Progress) -> Any:
        """Make a QP echo every received message back to its sender (the ib_send_lat server side)."""
        qp = self.adapter.qp(int(args["qpn"]))
        qp.echo = bool(args.get("echo", True))
        return qp.describe()

    def cmd_send(self, args: dict[str, Any], progress: Progress) -> Any:
        """SEND data on a QP (UD: to ``dest_gid``/``dest_qpn``)."""
        dest = (str(args["dest_gid"]), int(args["dest_qpn"])) if "dest_gid" in args else None
        data = _data(args)
        self.adapter.post_send(int(args["qpn"]), data, dest)
        return {"sent": len(data)}

    def cmd_recv(self, args: dict[str, Any], progress: Progress) -> Any:
        """The next message received on a QP, as hex (null after ``timeout`` seconds)."""
        item = self.adapter.qp(int(args["qpn"])).take(_timeout(args))
        return None if item is None else {"data_hex": item[0].hex(), **item[1]}

    def cmd_reg_mr(self, args: dict[str, Any], progress: Progress) -> Any:
        """Register a zeroed region of ``length`` bytes; ``ext_depth`` turns on extended memory protection."""
        region = self.adapter.memory.register(int(args["length"]), _opt_int(args, "ext_depth"))
        return {
            "addr": region.addr,
            "rkey": region.r_key,
            "length": region.length,
            "ext_mem": region.tree is not None,
        }

    def cmd_mrs(self, args: dict[str, Any], progress: Progress) -> Any:
        """Registered regions (addresses, lengths, R_Keys)."""
        return self.adapter.memory.describe()

    def cmd_read_mr(self, args: dict[str, Any], progress: Progress) -> Any:
        """Local read of a region's bytes (what remote writes left there), as hex."""
        region = self.adapter.memory.lookup(int(args["rkey"]))
        if region is None:
            raise CommandError("no such R_Key")
        offset, length = int(args.get("offset", 0)), int(args.get("length", region.length))
        if not region.contains(region.addr + offset, length):
            raise CommandError("range outside the region")
        return {"data_hex": region.read(region.addr + offset, length).hex()}

    def cmd_mr_key(self, args: dict[str, Any], progress: Progress) -> Any:
        """Delegate: the key of sub-region [start, start + length) of an ext-mem region, as hex."""
        region = self.adapter.memory.lookup(int(args["rkey"]))
        start = int(args.get("start", region.addr if region else 0))
        length = int(args.get("length", region.length if region else 0))
        return {
            "key_hex": self.adapter.memory.delegate(int(args["rkey"]), start, length).material.hex(),
            "start": start,
            "length": length,
        }

    def cmd_write(self, args: dict[str, Any], progress: Progress) -> Any:
        """RDMA WRITE data to remote ``va`` under ``rkey`` (``memory_key_hex`` for extended protection)."""
        memory_key = bytes.fromhex(args["memory_key_hex"]) if args.get("memory_key_hex") else None
        data = _data(args)
        qpn = int(args["qpn"])
        self.adapter.post_write(qpn, int(args["va"]), int(args["rkey"]), data, memory_key)
        acked = self.adapter.wait_outstanding(qpn, 0, _timeout(args)) if args.get("wait", True) else False
        return {"written": len(data), "acked": acked}

    def cmd_fault(self, args: dict[str, Any], progress: Progress) -> Any:
        """Fault injection for tests and demos: drop the next ``drop_rx`` data frames received."""
        self.adapter.inject_drops = max(0, int(args.get("drop_rx", 0)))
        return {"drop_rx": self.adapter.inject_drops}

    def cmd_perf(self, args: dict[str, Any], progress: Progress) -> Any:
        """A perftest-like run: test = send_lat | write_bw, with size, iterations and duration bounds."""
        test, qpn = args.get("test", "send_lat"), int(args["qpn"])
        size = int(args.get("size", 64))
        iterations = int(args.get("iterations", 1000))
        duration = float(args.get("duration", 10.0))
        if test == "send_lat":
            return perf.send_lat(self.adapter, qpn, size, iterations, duration, progress)
        if test == "write_bw":
            memory_key = bytes.fromhex(args["memory_key_hex"]) if args.get("memory_key_hex") else None
            return perf.write_bw(
                self.adapter,
                qpn,
                int(args["va"]),
                int(args["rkey"]),
                size,
                iterations,
                duration,
                progress,
                int(args.get("window", 32)),
                memory_key,
            )
        raise CommandError(f"unknown test {test!r}: send_lat or write_bw")
