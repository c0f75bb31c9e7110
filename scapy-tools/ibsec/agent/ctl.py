"""``ibsec-agentctl``: talk to a running agent over its control socket.

Examples::

    ibsec-agentctl -s runs/x/h0.sock info
    ibsec-agentctl -s runs/x/h0.sock connect fec0::1:200:ff:fe00:1 --service RC --mode 2 --scope session
    ibsec-agentctl -s runs/x/h1.sock serve 256
    ibsec-agentctl -s runs/x/h0.sock perf send_lat 256 --size 64 --iterations 10000
    ibsec-agentctl -s runs/x/h0.sock counters
    ibsec-agentctl -s runs/x/h0.sock call '{"cmd": "qps"}'

Output is JSON; progress lines of long runs go to stderr as they arrive.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ibsec.control import ControlClient


def _int(text: str) -> int:
    return int(text, 0)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ibsec-agentctl",
        description=__doc__.splitlines()[0],
        epilog=__doc__.split("Examples::", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("-s", "--socket", type=Path, required=True, help="the agent's control socket")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for a reply")
    sub = parser.add_subparsers(dest="cmd", required=True)
    for name in ("ping", "info", "counters", "qps", "mrs", "alloc-pd"):
        sub.add_parser(name)
    p = sub.add_parser("listen", help="connections accepted in a partition join this protection domain")
    p.add_argument("--pkey", type=_int, required=True)
    p.add_argument("--pd", type=_int, required=True)
    p = sub.add_parser("create-qp", help="create an RC or UD QP")
    p.add_argument("--service", choices=("RC", "UD"), default="UD")
    _security_options(p)
    p.add_argument("--qkey", type=_int)
    p.add_argument("--pd", type=_int, help="protection domain (default: the partition's own)")
    p = sub.add_parser("connect", help="CM handshake (RC: REQ/REP/RTU, UD: SIDR)")
    p.add_argument("remote_gid")
    p.add_argument("--service", choices=("RC", "UD"), default="RC")
    p.add_argument("--qpn", type=_int, help="UD: the local QP to resolve from (default: a new one)")
    p.add_argument("--remote-qpn", type=_int, help="UD: the remote QP to resolve")
    p.add_argument("--pd", type=_int, help="protection domain (default: the partition's own)")
    _security_options(p)
    p = sub.add_parser("disconnect", help="DREQ/DREP: tear down an RC connection")
    p.add_argument("qpn", type=_int)
    p = sub.add_parser("serve", help="echo every message received on a QP (ib_send_lat server)")
    p.add_argument("qpn", type=_int)
    p = sub.add_parser("send", help="SEND a message")
    p.add_argument("qpn", type=_int)
    p.add_argument("data")
    p.add_argument("--dest-gid")
    p.add_argument("--dest-qpn", type=_int)
    p = sub.add_parser("recv", help="take the next received message")
    p.add_argument("qpn", type=_int)
    p.add_argument("--wait", type=float, default=5.0)
    p = sub.add_parser("reg-mr", help="register a memory region")
    p.add_argument("length", type=_int)
    p.add_argument("--pkey", type=_int, help="partition whose own PD it joins (default 0xffff)")
    p.add_argument("--pd", type=_int, help="a protection domain from alloc-pd instead")
    p.add_argument("--access", choices=("any", "authenticated"), help="authenticated: writes in modes 1-3")
    p.add_argument("--ext-depth", type=_int, help="extended memory protection with this delegation depth")
    p = sub.add_parser("read-mr", help="read a local region")
    p.add_argument("rkey", type=_int)
    p.add_argument("--offset", type=_int, default=0)
    p.add_argument("--length", type=_int)
    p = sub.add_parser("mr-key", help="key of a (sub-)region, to delegate it")
    p.add_argument("rkey", type=_int)
    p.add_argument("--start", type=_int)
    p.add_argument("--length", type=_int)
    p = sub.add_parser("write", help="RDMA WRITE")
    p.add_argument("qpn", type=_int)
    p.add_argument("va", type=_int)
    p.add_argument("rkey", type=_int)
    p.add_argument("data")
    p.add_argument("--memory-key-hex")
    p = sub.add_parser("perf", help="perftest-like run: send_lat or write_bw")
    p.add_argument("test", choices=("send_lat", "write_bw"))
    p.add_argument("qpn", type=_int)
    p.add_argument("--size", type=_int, default=64)
    p.add_argument("--iterations", type=_int, default=1000)
    p.add_argument("--duration", type=float, default=10.0)
    p.add_argument("--va", type=_int)
    p.add_argument("--rkey", type=_int)
    p.add_argument("--window", type=_int, default=32)
    p = sub.add_parser("call", help="send a raw JSON request")
    p.add_argument("request")
    return parser


def _security_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--pkey", type=_int, default=0xFFFF)
    p.add_argument("--mode", type=_int, choices=range(5), help="security mode (default: the partition's)")
    p.add_argument("--scope", choices=("partition", "session", "derived"))


_RENAMES = {"wait": "timeout"}


def request_of(args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    """The control request for parsed arguments."""
    if args.cmd == "call":
        request = json.loads(args.request)
        return str(request.pop("cmd")), request
    skip = {"socket", "timeout", "cmd"}
    fields = {_RENAMES.get(k, k): v for k, v in vars(args).items() if k not in skip and v is not None}
    return args.cmd.replace("-", "_"), fields


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    cmd, fields = request_of(args)
    try:
        with ControlClient(args.socket, timeout=args.timeout) as client:
            final: dict[str, Any] = {}
            for final in client.stream(cmd, **fields):
                if "progress" in final:
                    print(json.dumps(final["progress"]), file=sys.stderr, flush=True)
    except OSError as exc:
        print(f"ibsec-agentctl: cannot reach {args.socket}: {exc}", file=sys.stderr)
        return 2
    if not final.get("ok"):
        print(f"ibsec-agentctl: {final.get('error', 'no reply')}", file=sys.stderr)
        return 1
    print(json.dumps(final.get("result"), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
