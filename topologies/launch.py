"""``ibsec-fabric`` (or ``python -m topologies.launch``): launch a fabric and get the Mininet CLI.

    ibsec-fabric fat-tree                              # k=2, three levels: 12 switches, 8 hosts
    ibsec-fabric fat-tree --k 4 --levels 2             # 8 switches, 16 hosts
    ibsec-fabric mesh --dims 4x4 --routing adaptive
    ibsec-fabric torus | hypercube --cube 3 | mesh3d --dims 3x2x2 | paper16
    ibsec-fabric mesh --policy dt --security icrc-mac --partitions 4 --bw 100 --delay 1ms
    ibsec-fabric fat-tree --k 4 --levels 2 --partitions 5 --security none,icrc-mac,sth-aead,sth-auth,sth-hdr
    ibsec-fabric clean                                 # remove what a killed launcher left behind

It builds the P4 program for the target (``--target`` or ``TARGET``: p4switch or bmv2), writes the run
directory, starts the switches, the SM and one agent per host, prints where everything is, and offers the
Mininet CLI when the terminal is interactive (otherwise it waits for Ctrl-C or ``--duration``). Leaving
the CLI, SIGTERM, Ctrl-C without the CLI (inside it Ctrl-C interrupts the host command, as in ``mn``) or
an error tears everything down.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import sys
import threading
import time
from types import FrameType

from ibsec import names
from ibsec.cliopts import integer, number
from ibsm.traps import TrapOptions

from p4switch import targets

from . import fabrics, network, run, topofile

DESCRIPTION = ("Launch a fabric of P4 switches with the subnet manager and one host agent per host, and get "
               "the Mininet CLI.")


MAX_DIM = 1024
DELAY = re.compile(r"\d+(\.\d+)?(us|ms|s)")


def parse_dims(text: str) -> tuple[int, ...]:
    try:
        dims = tuple(int(part) for part in text.lower().replace(",", "x").split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"dimensions look like 4x4 or 3x2x2, not {text!r}") from None
    if not all(2 <= d <= MAX_DIM for d in dims):
        raise argparse.ArgumentTypeError(f"{text}: every dimension needs 2..{MAX_DIM} switches")
    return dims


def security_modes(text: str) -> str:
    """One security mode, or a comma-separated list of them (one per partition, round robin)."""
    bad = [m for m in text.split(",") if m not in names.SECURITY_MODES]
    if bad:
        raise argparse.ArgumentTypeError(f"{bad[0]!r}: expected {', '.join(names.SECURITY_MODES)} "
                                         "or a comma-separated list of them")
    return text


def link_delay(text: str) -> str:
    """A tc delay: a number and us, ms or s (what Mininet's TCLink passes to netem)."""
    if not DELAY.fullmatch(text):
        raise argparse.ArgumentTypeError(f"{text!r}: expected a number and us, ms or s, e.g. 1ms")
    return text


def servers(text: str) -> tuple[str, ...]:
    """Comma-separated server names or addresses, as ssh takes them."""
    names = tuple(name.strip() for name in text.split(","))
    if not all(names) or any(c.isspace() or c in "'\"\\;$`" for name in names for c in name):
        raise argparse.ArgumentTypeError(f"{text!r}: expected SERVER[,SERVER...], names or addresses")
    return names


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ibsec-fabric", description=DESCRIPTION,
                                     epilog=__doc__.split("\n\n", 1)[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("fabric", choices=(*fabrics.FABRICS, "clean"), nargs="?", default="fat-tree")
    shape = parser.add_argument_group("shape")
    shape.add_argument("--k", type=integer(2, 255), default=2, help="fat tree: ports up and down per switch")
    shape.add_argument("--levels", type=integer(1, 8), default=3, help="fat tree: levels of switches")
    shape.add_argument("--hosts-per-leaf", type=integer(1, 255),
                       help="fat tree: hosts per leaf switch (1..k, default k)")
    shape.add_argument("--dims", type=parse_dims, help="mesh, torus, mesh3d: switches per dimension")
    shape.add_argument("--cube", type=integer(1, 9), default=3, help="hypercube: dimensions")
    shape.add_argument("--bw", type=number(0, 1000, above=True), help="link bandwidth, Mbit/s (TCLink)")
    shape.add_argument("--delay", type=link_delay,
                       help="link delay, e.g. 1ms (TCLink; needs the kernel's sch_netem)")
    ctl = parser.add_argument_group("control")
    ctl.add_argument("--target", choices=tuple(targets.TARGETS), default=os.environ.get("TARGET", "p4switch"))
    ctl.add_argument("--routing", choices=topofile.ROUTINGS, default="deterministic")
    ctl.add_argument("--partitions", type=integer(1, 0x7FFE), default=2,
                     help="partitions, hosts assigned round robin")
    ctl.add_argument("--security", type=security_modes, default="sth-aead",
                     help=f"security mode of every partition ({', '.join(names.SECURITY_MODES)}), or a "
                     "comma-separated list, one per partition")
    ctl.add_argument("--policy", choices=names.POLICIES, default=names.Policy.SIF.value,
                     help="partition filter policy")
    ctl.add_argument("--quiet-period", type=number(0, 86400, above=True), default=3.0,
                     help="SIF: seconds without violations before a filter is flushed")
    ctl.add_argument("--no-sm", action="store_true", help="no SM (agents get their P_Key tables from files)")
    ctl.add_argument("--tls", action="store_true", help="P4Runtime over mutual TLS (a CA and certificates "
                     "for this run, removed at teardown)")
    cl = parser.add_argument_group("cluster (Mininet's cluster mode, docs/cluster.md)")
    cl.add_argument("--cluster", type=servers, default=(), metavar="SERVER[,SERVER...]",
                    help="place switches and hosts across these servers (ssh as root; localhost, where the "
                    "launcher and the SM run, is the first)")
    cl.add_argument("--ssh-config", type=run.Path, help="ssh client configuration for the servers "
                    "(keys, ports, known hosts; default ssh's own)")
    parser.add_argument("--run-dir", type=run.Path, help="run directory (default runs/<UTC time>-<fabric>)")
    parser.add_argument("--no-cli", action="store_true", help="no Mininet CLI: wait for Ctrl-C or --duration")
    parser.add_argument("--duration", type=number(0, 1e7, above=True),
                        help="with --no-cli: stop after this many seconds")
    parser.add_argument("-v", "--verbose", action="store_true", help="Mininet's own progress output")
    return parser


def options_from(args: argparse.Namespace) -> run.RunOptions:
    return run.RunOptions(fabric=args.fabric, k=args.k, levels=args.levels,
                          hosts_per_leaf=args.hosts_per_leaf, dims=args.dims, cube=args.cube,
                          target=args.target, routing=args.routing,
                          partitions=args.partitions, security=args.security, policy=args.policy,
                          quiet_period=args.quiet_period, bandwidth_mbit=args.bw, delay=args.delay,
                          sm=not args.no_sm, run_dir=args.run_dir, verbose=args.verbose, tls=args.tls,
                          cluster=args.cluster, ssh_config=args.ssh_config)


def stop_on_sigterm() -> None:
    """SIGTERM unwinds the launcher so the teardown runs. SystemExit, not KeyboardInterrupt: Mininet's CLI
    catches the latter (Ctrl-C interrupts the command it runs, as in ``mn``) and would go on."""

    def leave(signum: int, frame: FrameType | None) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, leave)


def wake_the_cli_on_sigterm() -> None:
    """CPython's readline looks at signals only when its select() is interrupted, so a SIGTERM that lands
    just before it blocks is seen at the next key press. Python writes each signal's number to a wakeup
    fd; a thread reading it interrupts the main thread again (a no-op SIGUSR1) until the handler has run."""
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    signal.set_wakeup_fd(write_fd)
    signal.signal(signal.SIGUSR1, lambda signum, frame: None)
    main_thread = threading.main_thread().ident
    assert main_thread is not None

    def nudge() -> None:
        while signal.SIGTERM not in os.read(read_fd, 512):
            pass
        for _ in range(100):  # the handler raises SystemExit at the first interruption; bounded anyway
            signal.pthread_kill(main_thread, signal.SIGUSR1)
            time.sleep(0.1)

    threading.Thread(target=nudge, name="sigterm-nudge", daemon=True).start()


def check_together(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """What one option alone cannot say: the fabric is built as a graph now (hosts per leaf against k,
    ...), and the SM's quiet period must outlast its trap suppression window; a refusal ends the launcher
    like a bad option, before anything starts."""
    if args.fabric == "clean":
        return
    try:
        options_from(args).build_fabric()
    except ValueError as err:
        parser.error(f"{args.fabric}: {err}")
    if args.cluster and (args.bw or args.delay):
        parser.error("argument --cluster: links are not shaped across servers (no --bw or --delay)")
    if not args.no_sm and args.quiet_period <= TrapOptions.suppress_window:
        parser.error(f"argument --quiet-period: {args.quiet_period:g} must be longer than the SM's trap "
                     f"suppression window ({TrapOptions.suppress_window:g} s)")


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    check_together(parser, args)
    if os.geteuid() != 0:
        print("ibsec-fabric: needs root (network namespaces, veths, raw sockets)", file=sys.stderr)
        return 2
    if args.fabric == "clean":
        removed = run.clean_leftovers()
        print(f"ibsec-fabric: removed {len(removed)} leftovers", *removed)
        return 0
    stop_on_sigterm()
    try:
        with run.FabricRun(options_from(args), say=lambda line: print(line, flush=True)) as fabric_run:
            print(fabric_run.describe(), flush=True)
            interact(fabric_run, args)
    except network.FabricError as err:
        print(f"ibsec-fabric: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("ibsec-fabric: interrupted; everything stopped", file=sys.stderr)
        return 130
    return 0


def interact(fabric_run: run.FabricRun, args: argparse.Namespace) -> None:
    if not args.no_cli and sys.stdin.isatty():
        from mininet.cli import CLI

        wake_the_cli_on_sigterm()
        print("Mininet CLI: e.g. `h0 ibsec-agentctl -s <run>/h0.sock counters`; exit or Ctrl-D tears down.")
        assert fabric_run.net is not None
        CLI(fabric_run.net.net)
        return
    limit = f" (or after {args.duration:.0f} s)" if args.duration else ""
    print(f"running; Ctrl-C stops{limit}", flush=True)
    deadline = time.monotonic() + args.duration if args.duration else None
    while deadline is None or time.monotonic() < deadline:
        time.sleep(0.5)


if __name__ == "__main__":
    sys.exit(main())
