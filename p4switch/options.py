"""simple_switch_grpc's command line, as p4switch reads it.

BMv2 splits its command line at ``--``: general options (interfaces, logging, pcap, device id, the program)
before it, the target's options (gRPC server, TLS, CPU port, ...) after it. p4switch reads both the same
way and also takes the target options before ``--`` (its own callers have always passed them there); a
general option after ``--`` is refused, as BMv2 refuses it.

Options whose effect users see are implemented; the options of BMv2 machinery p4switch does not have
(Thrift, nanomsg, the debugger, loadable modules, ...) are accepted so that scripts written for BMv2 run
unchanged, and each one named on the command line gives one note saying what p4switch does instead
(:func:`notes`)."""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass

from p4switch.dataplane import parse_interface

LOG_LEVELS = ("trace", "debug", "info", "warn", "warning", "error", "off")
DEFAULT_GRPC_ADDR = "127.0.0.1:9559"
"""BMv2 binds 0.0.0.0:9559; p4switch stays on the loopback unless told otherwise (a P4Runtime server can
reprogram the switch, so it should not face every network by default)."""
BMV2_VERSION = "1.15.5"
"""The simple_switch_grpc release whose command line this follows."""
DROP_PORT = 511

IGNORED: dict[str, str] = {
    "thrift_port": "p4switch has no Thrift server; program it over P4Runtime (--grpc-server-addr)",
    "nanolog": "p4switch publishes no nanomsg log; it logs with --log-file or --log-console",
    "notifications_addr": "p4switch sends no nanomsg notifications; digests and idle timeouts go to the "
                          "P4Runtime stream",
    "debugger": "p4switch has no debugger; -L trace logs every parser state, table and action per packet",
    "restore_state": "p4switch starts empty; its state comes from the P4Runtime controller",
    "load_modules": "p4switch loads no modules; its v1model externs are built in",
    "packet_in": "p4switch takes packets only from the -i interfaces (or --use-files)",
    "disable_swap": "p4switch always replaces the pipeline atomically on SetForwardingPipelineConfig",
    "priority_queues": "p4switch has one queue per port and serves packets in arrival order",
    "dp_grpc_server_addr": "p4switch serves no data-plane gRPC channel; bind interfaces with -i",
    "max_mc_groups": "p4switch's multicast groups are limited only by memory",
    "max_l1_entries": "p4switch's multicast entries are limited only by memory",
    "max_l2_entries": "p4switch's multicast entries are limited only by memory",
}
"""BMv2 options p4switch accepts without their BMv2 machinery: what it does instead."""


@dataclass(frozen=True)
class TlsOptions:
    """P4Runtime over TLS (``--grpc-server-ssl``); with ``client_auth`` clients need a certificate that
    ``cacert`` signed."""

    cert: str
    key: str
    cacert: str | None
    client_auth: bool


def _general(parser: argparse.ArgumentParser) -> None:
    """BMv2's general options (bm_sim's option parser), in its --help order."""
    g = parser.add_argument_group("general options (BMv2's, before --)")
    g.add_argument("-i", "--interface", action="append", default=[], metavar="PORT@IFACE",
                   help="attach interface IFACE as port PORT (repeatable)")
    g.add_argument("--pcap", metavar="DIR", nargs="?", const=".",
                   help="write IFACE_in.pcap and IFACE_out.pcap per port into DIR (default: .)")
    g.add_argument("--use-files", type=int, metavar="SECONDS",
                   help="ports are pcap files: read IFACE_in.pcap, write IFACE_out.pcap, after SECONDS")
    g.add_argument("--packet-in", metavar="ADDR", help="accepted; see the note it logs")
    g.add_argument("--thrift-port", type=int, metavar="PORT", help="accepted; see the note it logs")
    g.add_argument("--device-id", type=int, default=0, help="P4Runtime device id (default 0)")
    g.add_argument("--nanolog", metavar="ADDR", help="accepted; see the note it logs")
    g.add_argument("--log-console", action="store_true", help="log on stdout")
    g.add_argument("--log-file", metavar="FILE", help="log to FILE.txt, rotated as FILE.1.txt, ...")
    g.add_argument("-L", "--log-level", choices=LOG_LEVELS, default="trace",
                   help="trace, debug, info, warn, error or off (default trace, as BMv2)")
    g.add_argument("--log-flush", action="store_true", help="flush the log file after every message")
    g.add_argument("--log-file-max-size", type=int, default=5 * 1024 * 1024, metavar="BYTES",
                   help="rotate the log file at this size (default 5242880)")
    g.add_argument("--log-file-max-files", type=int, default=3, metavar="N",
                   help="rotated log files to keep (default 3)")
    g.add_argument("--notifications-addr", metavar="ADDR", help="accepted; see the note it logs")
    g.add_argument("--restore-state", metavar="FILE", help="accepted; see the note it logs")
    g.add_argument("--dump-packet-data", type=int, default=0, metavar="N",
                   help="log the first N bytes of every packet received and sent (at level info)")
    g.add_argument("-v", "--version", action="store_true", help="print the version and exit")
    g.add_argument("--json-version", action="store_true",
                   help="print the newest BMv2 JSON version p4switch loads and exit")
    g.add_argument("--no-p4", action="store_true", help="start without a program; wait for "
                   "SetForwardingPipelineConfig")
    g.add_argument("--max-port-count", type=int, default=512, metavar="N",
                   help="most interfaces that can be bound (default 512)")
    g.add_argument("--debugger", action="store_true", help="accepted; see the note it logs")
    g.add_argument("--engine", choices=("native", "python"),
                   help="p4switch's own: run programs compiled to C (native, the default when a C compiler "
                   "is installed) or in Python (default: $P4SWITCH_ENGINE when set)")
    g.add_argument("--stats-file", metavar="PATH",
                   help="p4switch's own: write the ports' counters, the kernel's drops included, as JSON to "
                   "PATH every second and at exit (for a launcher watching the emulator's fidelity)")
    parser.add_argument("program", nargs="?",
                        help="the program: p4switch-cc's IR JSON or p4c-bm2-ss's BMv2 JSON (or --no-p4)")


def _target(parser: argparse.ArgumentParser) -> None:
    """simple_switch_grpc's target options (after --)."""
    t = parser.add_argument_group("target options (simple_switch_grpc's, after --)")
    t.add_argument("--load-modules", metavar="LIST", help="accepted; see the note it logs")
    t.add_argument("--disable-swap", action="store_true", help="accepted; see the note it logs")
    t.add_argument("--grpc-server-addr", metavar="HOST:PORT",
                   help=f"P4Runtime listen address (default {DEFAULT_GRPC_ADDR})")
    t.add_argument("--grpc-server-ssl", action="store_true", help="serve P4Runtime over TLS")
    t.add_argument("--grpc-server-cacert", metavar="PEM", help="CA certificate that signs client "
                   "certificates")
    t.add_argument("--grpc-server-cert", metavar="PEM", help="the server's certificate")
    t.add_argument("--grpc-server-key", metavar="PEM", help="the server's private key")
    t.add_argument("--grpc-server-with-client-auth", action="store_true",
                   help="require a client certificate signed by --grpc-server-cacert (mutual TLS)")
    t.add_argument("--cpu-port", type=int, metavar="PORT", help="port number of the CPU port "
                   "(P4Runtime packet-in/packet-out)")
    t.add_argument("--drop-port", type=int, metavar="PORT", help=f"only {DROP_PORT}, v1model's drop port")
    t.add_argument("--dp-grpc-server-addr", metavar="ADDR", help="accepted; see the note it logs")
    t.add_argument("--priority-queues", type=int, metavar="N", help="accepted; see the note it logs")
    t.add_argument("--max-mc-groups", type=int, metavar="N", help="accepted; see the note it logs")
    t.add_argument("--max-l1-entries", type=int, metavar="N", help="accepted; see the note it logs")
    t.add_argument("--max-l2-entries", type=int, metavar="N", help="accepted; see the note it logs")


def _parsers(prog: str) -> tuple[argparse.ArgumentParser, argparse.ArgumentParser]:
    """The parser of the whole command line and the one for what follows ``--`` (target options only,
    defaults suppressed so that they do not undo options given before ``--``)."""
    whole = argparse.ArgumentParser(
        prog=prog, usage=f"{prog} [general options] [PROGRAM.json | --no-p4] [-- target options]",
        description="The p4switch P4 target with simple_switch_grpc's command line.")
    _general(whole)
    _target(whole)
    after = argparse.ArgumentParser(prog=f"{prog} ... --", argument_default=argparse.SUPPRESS,
                                    add_help=False)
    _target(after)
    return whole, after


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    """Parse and check a simple_switch_grpc command line; exits with status 2 and a message if it is
    wrong, as BMv2 does. Adds ``ports`` [(number, iface)], ``tls`` (TlsOptions or None) and ``level``."""
    argv = sys.argv[1:] if argv is None else list(argv)
    prog = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "p4switch"
    whole, after = _parsers(prog or "p4switch")
    before, target = (argv[:argv.index("--")], argv[argv.index("--") + 1:]) if "--" in argv else (argv, [])
    args = whole.parse_args(before)
    after.parse_args(target, namespace=args)
    if args.version or args.json_version:
        return args
    _check(whole, args)
    return args


def _check(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if bool(args.program) == args.no_p4:
        parser.error("give either a PROGRAM.json or --no-p4")
    if args.log_file_max_size <= 0 or args.log_file_max_files < 0:
        parser.error("--log-file-max-size must be positive and --log-file-max-files not negative")
    if args.dump_packet_data < 0:
        parser.error("--dump-packet-data must not be negative")
    if args.stats_file and args.use_files is not None:
        parser.error("--stats-file counts interfaces' frames; --use-files has none")
    if args.drop_port is not None and args.drop_port != DROP_PORT:
        parser.error(f"--drop-port {args.drop_port}: p4switch's drop port is always {DROP_PORT}")
    if args.cpu_port is not None and not 0 < args.cpu_port < DROP_PORT:
        parser.error(f"--cpu-port must be 1..{DROP_PORT - 1} (0 is not valid, {DROP_PORT} drops)")
    if len(args.interface) > args.max_port_count:
        parser.error(f"{len(args.interface)} interfaces exceed --max-port-count {args.max_port_count}")
    try:
        args.ports = [parse_interface(spec) for spec in args.interface]
    except ValueError as err:
        parser.error(str(err))
    numbers = [number for number, _ in args.ports]
    if len(set(numbers)) != len(numbers):
        parser.error("a port number is given to two interfaces")
    if args.cpu_port is not None and args.cpu_port in numbers:
        parser.error(f"--cpu-port {args.cpu_port} is also bound to an interface (-i)")
    args.grpc_server_addr = args.grpc_server_addr or DEFAULT_GRPC_ADDR
    args.tls = _tls(parser, args)


def _tls(parser: argparse.ArgumentParser, args: argparse.Namespace) -> TlsOptions | None:
    given = [f"--grpc-server-{name}" for name in ("cacert", "cert", "key")
             if getattr(args, f"grpc_server_{name}")]
    if args.grpc_server_with_client_auth:
        given.append("--grpc-server-with-client-auth")
    if not args.grpc_server_ssl:
        if given:  # BMv2 would serve plaintext here; a switch the user believes protected must not
            parser.error(f"{' '.join(given)} need --grpc-server-ssl (else P4Runtime would be plaintext)")
        return None
    if not (args.grpc_server_cert and args.grpc_server_key):
        parser.error("--grpc-server-ssl needs --grpc-server-cert and --grpc-server-key")
    if args.grpc_server_with_client_auth and not args.grpc_server_cacert:
        parser.error("--grpc-server-with-client-auth needs --grpc-server-cacert to verify clients")
    return TlsOptions(args.grpc_server_cert, args.grpc_server_key, args.grpc_server_cacert,
                      args.grpc_server_with_client_auth)


def notes(args: argparse.Namespace) -> list[str]:
    """One line per accepted-but-not-implemented option the command line names."""
    lines = []
    for dest, instead in IGNORED.items():
        value = getattr(args, dest, None)
        if value not in (None, False):
            flag = "--" + dest.replace("_", "-")
            shown = flag if value is True else f"{flag} {value}"
            lines.append(f"{shown} ignored: {instead}")
    if args.use_files is not None and args.pcap:
        lines.append("--pcap ignored with --use-files: the ports' IFACE_out.pcap files are the capture")
    return lines
