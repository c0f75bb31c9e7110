"""`p4switch`: the switch process, a drop-in for BMv2's simple_switch_grpc.

    p4switch [--device-id N] [-i PORT@IFACE ...] [--grpc-server-addr 127.0.0.1:9559] [--cpu-port N]
             [--log-file F] [--log-level trace|debug|info|warn] [--pcap DIR] [--no-p4 | PROGRAM.json]

Options may also follow a ``--`` as simple_switch_grpc's target options do.

It serves P4Runtime on gRPC, receives and sends frames on the given interfaces and runs them through the
program (from the command line, or pushed with SetForwardingPipelineConfig). One line on stdout says when
the gRPC port listens. SIGTERM and SIGINT stop it cleanly (exit status 0)."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from types import FrameType

from p4switch.dataplane import Dataplane, open_port, parse_interface
from p4switch.engine import api as engine
from p4switch.runtime.device import Device
from p4switch.runtime.server import P4RuntimeService, serve

LEVELS = {"trace": engine.TRACE, "debug": logging.DEBUG, "info": logging.INFO, "warn": logging.WARNING,
          "warning": logging.WARNING, "error": logging.ERROR}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="p4switch", description=__doc__.split("\n\n")[0])
    parser.add_argument("program", nargs="?", help="program JSON from p4switch-cc (or use --no-p4)")
    parser.add_argument("--no-p4", action="store_true", help="start without a program; wait for "
                        "SetForwardingPipelineConfig")
    parser.add_argument("--device-id", type=int, default=0)
    parser.add_argument("-i", "--interface", action="append", default=[], metavar="PORT@IFACE",
                        help="bind switch port PORT to interface IFACE (repeatable)")
    parser.add_argument("--grpc-server-addr", default="127.0.0.1:9559", help="P4Runtime listen address")
    parser.add_argument("--cpu-port", type=int, default=None, help="port number of the CPU port "
                        "(packet-in/packet-out)")
    parser.add_argument("--log-file", help="log file (default: stderr)")
    parser.add_argument("--log-level", choices=sorted(LEVELS), default="info")
    parser.add_argument("--pcap", metavar="DIR", nargs="?", const=".",
                        help="write <iface>_in.pcap and <iface>_out.pcap per port into DIR (default: .)")
    parser.add_argument("--log-console", action="store_true", help="ignored (BMv2 compatibility)")
    parser.add_argument("--thrift-port", type=int, help="ignored (BMv2 compatibility: no Thrift here)")
    argv = sys.argv[1:] if argv is None else argv
    if "--" in argv:  # simple_switch_grpc puts its target options after "--": take them alike
        at = argv.index("--")
        argv = argv[:at] + argv[at + 1:]
    args = parser.parse_args(argv)
    if bool(args.program) == args.no_p4:
        parser.error("give either a PROGRAM.json or --no-p4")
    try:
        args.ports = [parse_interface(spec) for spec in args.interface]
    except ValueError as err:
        parser.error(str(err))
    return args


def setup_logging(args: argparse.Namespace) -> logging.Logger:
    handler: logging.Handler = logging.StreamHandler()
    if args.log_file:
        handler = logging.FileHandler(args.log_file)
    handler.setFormatter(logging.Formatter(
        f"%(asctime)s [dev {args.device_id}] %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger("p4switch")
    root.handlers[:] = [handler]
    root.setLevel(LEVELS[args.log_level])
    root.propagate = False
    return root


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    log = setup_logging(args)
    for flag in ("log_console", "thrift_port"):
        if getattr(args, flag):
            print(f"p4switch: --{flag.replace('_', '-')} is accepted for BMv2 compatibility and ignored",
                  flush=True)
    device = Device(args.device_id, args.cpu_port, log.getChild("device"))
    if args.program:
        try:
            with open(args.program, "rb") as f:
                program = f.read()
            device.install(device.load(program), program)
        except (OSError, engine.EngineError) as err:
            print(f"p4switch: cannot load {args.program}: {err}", file=sys.stderr)
            return 2
    try:
        ports = [open_port(number, iface, args.pcap) for number, iface in args.ports]
    except OSError as err:
        print(f"p4switch: cannot open interface: {err}", file=sys.stderr)
        return 2
    dataplane = Dataplane(device, ports, log.getChild("dataplane"))
    service = P4RuntimeService(device, log.getChild("p4runtime"))
    server, grpc_port = serve(service, args.grpc_server_addr)
    if grpc_port == 0:
        print(f"p4switch: cannot listen on {args.grpc_server_addr}", file=sys.stderr)
        service.close()
        dataplane.close()
        return 2
    host = args.grpc_server_addr.rsplit(":", 1)[0]
    log.info("P4Runtime listening on %s:%d, ports %s", host, grpc_port,
             ", ".join(f"{n}@{i}" for n, i in args.ports) or "none")
    print(f"p4switch: device {args.device_id} P4Runtime server listening on {host}:{grpc_port}", flush=True)

    stop = threading.Event()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        log.info("%s received: stopping", signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        if ports:
            dataplane.run(stop)
        else:
            while not stop.wait(0.5):
                pass
    finally:
        service.close()
        server.stop(grace=1).wait(2)
        dataplane.close()
        log.info("stopped; pipeline stats: %s", dict(device.switch.stats) if device.switch else {})
    return 0


if __name__ == "__main__":
    sys.exit(main())
