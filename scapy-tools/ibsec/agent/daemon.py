"""``ibsec-agent``: the host agent process.

Three threads share one :class:`~ibsec.agent.adapter.Adapter`: the receive loop on the raw socket, the
timer (retransmissions) and the control socket. SIGTERM or SIGINT stops all three, closes the socket and
removes the control socket file; the log file says so. Keys never reach the log.
"""

from __future__ import annotations

import argparse
import logging
import re
import signal
import sys
import threading
from pathlib import Path
from types import FrameType

from ibsec import addressing, keys, opcodes, rocev2
from ibsec.cliopts import integer, number
from ibsec.control import ControlServer
from ibsec.rawport import RawPort
from ibsec.skc import DEFAULT_PREFETCH_ENTRIES

from .adapter import Adapter, AgentConfig, load_partitions
from .admission import Limits
from .commands import Commands

log = logging.getLogger("ibsec.agent")

IB_MTUS = (256, 512, 1024, 2048, 4096)
DAY = 86400.0
RECEIVE_BUFFER = 4 << 20  # bytes the kernel queues for the agent: a burst waits there, not dropped
U32 = (1 << 32) - 1
MAX_OVERHEAD = rocev2.BTH_AT + opcodes.BTH_LEN + opcodes.Ext.RETH.length + rocev2.STH_LEN + rocev2.ICRC_LEN
"""The most a data frame adds to its payload: Ethernet, IPv6, UDP, BTH, RETH, STH, ICRC."""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="ibsec-agent",
        description=__doc__.splitlines()[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--name", required=True, type=host_name,
                        help="host name, used in log lines and file names")
    parser.add_argument("--iface", required=True, help="the host's interface (raw socket)")
    parser.add_argument("--run-dir", type=Path, default=Path("."), help="run directory (DESIGN section 10)")
    parser.add_argument("--log", type=Path, help="log file (default RUN_DIR/logs/NAME.log)")
    parser.add_argument("--control", type=Path, help="control socket (default RUN_DIR/NAME.sock)")
    parser.add_argument("--subnet", type=integer(0, 0xFFFF), default=1, help="16-bit subnet id of the GID")
    parser.add_argument("--lid", type=integer(addressing.LID_MIN, addressing.LID_UNICAST_MAX), default=1,
                        help="the port's LID")
    parser.add_argument("--pkeys", type=pkey_file, help="P_Key table file (JSON) when no SM sets it")
    parser.add_argument("--keys", type=key_file, help="provisioning key file (mode 0600, ibsec.keys format)")
    parser.add_argument("--sm-gid", type=sm_gid,
                        help="GID of the SM: traps go there, vendor MADs come from there")
    parser.add_argument("--trap-window", type=number(0, DAY), default=10.0,
                        help="trap suppression window, seconds")
    parser.add_argument(
        "--mac-failure-threshold",
        type=integer(1, U32),
        default=16,
        help="consecutive MAC failures on a QP that raise a security trap",
    )
    parser.add_argument(
        "--retire-after",
        type=integer(1, U32),
        default=1 << 20,
        help="consecutive MAC failures after which the QP's key is retired",
    )
    parser.add_argument("--ack-timeout", type=number(0, 60, above=True), default=0.05,
                        help="RC retransmission timeout, seconds")
    parser.add_argument("--retries", type=integer(0, 1000), default=7,
                        help="RC retransmissions before the QP errors")
    parser.add_argument("--mtu", type=int, choices=IB_MTUS,
                        help="path MTU in payload bytes (default: the largest that fits the interface's MTU)")
    parser.add_argument("--skc-bytes", type=integer(0, 1 << 30), default=16384,
                        help="session key cache size in bytes")
    parser.add_argument("--skc-prefetch", type=integer(0, 1 << 20), default=DEFAULT_PREFETCH_ENTRIES,
                        help="entries of the session key cache's prefetch buffer (0: no prefetching)")
    parser.add_argument("--half-open-timeout", type=number(0, 3600, above=True),
                        default=Limits.half_open_timeout,
                        help="seconds an accepted connection may wait for its RTU or first packet")
    return parser.parse_args(argv)


def host_name(text: str) -> str:
    """A name that can be part of a file name (the log, the control socket)."""
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}", text):
        raise argparse.ArgumentTypeError(f"{text!r}: letters, digits, _ . - (at most 64, a letter or digit "
                                         "first)")
    return text


def sm_gid(text: str) -> str:
    """The SM's GID; its GUID must be a MAC-derived EUI-64, the agent addresses the SM's MAC from it."""
    try:
        addressing.guid_to_mac(addressing.parse_gid(text).guid)
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"{text!r}: {err}") from None
    return text


def pkey_file(text: str) -> Path:
    """A P_Key table file, checked entry by entry now (before anything starts)."""
    try:
        load_partitions(Path(text))
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return Path(text)


def key_file(text: str) -> Path:
    """A provisioning key file: 0600, owned by us, in the ibsec.keys format (checked now)."""
    try:
        keys.read_key_file(text)
    except (OSError, keys.IbsecKeyError) as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return Path(text)


def setup_logging(path: Path, name: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter(f"%(asctime)s {name} %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(logging.INFO)


def path_mtu(iface: str) -> int:
    """The largest IB MTU whose packets (with every header, an STH and the ICRC) fit the interface."""
    link_mtu = int(Path(f"/sys/class/net/{iface}/mtu").read_text())
    return max([m for m in IB_MTUS if m + MAX_OVERHEAD <= link_mtu], default=IB_MTUS[0])


def config_from(args: argparse.Namespace, mac: bytes) -> AgentConfig:
    return AgentConfig(
        name=args.name,
        mac=mac,
        subnet=args.subnet,
        lid=args.lid,
        pkey_file=args.pkeys,
        key_file=args.keys,
        sm_gid=args.sm_gid,
        trap_window=args.trap_window,
        mac_failure_threshold=args.mac_failure_threshold,
        retire_after=args.retire_after,
        ack_timeout=args.ack_timeout,
        retries=args.retries,
        mtu=args.mtu or path_mtu(args.iface),
        skc_bytes=args.skc_bytes,
        skc_prefetch=args.skc_prefetch,
        limits=Limits(half_open_timeout=args.half_open_timeout),
    )


def receive_loop(port: RawPort, adapter: Adapter, stop: threading.Event) -> None:
    """Feed every frame from the wire to the adapter; the adapter survives any frame (it counts it)."""
    while not stop.is_set():
        frame = port.recv()
        if frame is not None:
            adapter.receive(frame)


def timer_loop(adapter: Adapter, stop: threading.Event, period: float) -> None:
    while not stop.wait(period):
        adapter.tick()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    setup_logging(args.log or args.run_dir / "logs" / f"{args.name}.log", args.name)
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        log.info("signal %s: stopping", signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        port = RawPort(args.iface, receive_buffer=RECEIVE_BUFFER)
        adapter = Adapter(config_from(args, port.mac), port.send)
    except (OSError, ValueError, KeyError, keys.IbsecKeyError) as exc:  # bad interface, file or key file
        log.error("cannot start: %s", exc)
        print(f"ibsec-agent: cannot start: {exc}", file=sys.stderr)
        return 2
    control = ControlServer(args.control or args.run_dir / f"{args.name}.sock", Commands(adapter))
    threads = [
        threading.Thread(target=receive_loop, args=(port, adapter, stop), name="receive", daemon=True),
        threading.Thread(
            target=timer_loop, args=(adapter, stop, args.ack_timeout / 4), name="timer", daemon=True
        ),
    ]
    for thread in threads:
        thread.start()
    control.start()
    log.info("agent %s up on %s: GID %s LID %d", args.name, args.iface, adapter.gid, args.lid)
    try:
        while not stop.wait(0.5):
            pass
    finally:
        control.stop()
        for thread in threads:
            thread.join(timeout=2)
        port.close()
        log.info("agent %s stopped: %s", args.name, adapter.counters.snapshot())
    return 0


if __name__ == "__main__":
    sys.exit(main())
