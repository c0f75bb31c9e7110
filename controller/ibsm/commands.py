"""The ``sm`` commands behind :mod:`ibsm.cli` (docs/subnet-manager.md).

``sm run`` logs to RUN_DIR/logs/sm.log, writes RUN_DIR/events.jsonl, answers ``sm status``,
``sm partitions`` and ``sm policy`` on RUN_DIR/sm.sock, and stops cleanly on SIGTERM or SIGINT. A bad
topology, partitions file, key database or option stops it at once with one line saying what is wrong and
where (exit status 2).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import signal
import sys
from pathlib import Path
from typing import Any

import finsy as fy
from ibsec import keys, mad_auth, names
from ibsec.cliopts import integer, number
from ibsec.control import CommandError
from ibsec.control import call as control_call
from ibsec.marking import TopologyTooLarge

from . import control, report
from .core import SmConfigError, SmOptions, SubnetManager
from .fabric import FabricError
from .keymgr import KeyOptions
from .partitions import PartitionError, check_partitions, load_partitions
from .sif import SifOptions
from .topology import Topology, TopologyError, load_topology
from .traps import TrapOptions

RUNS = (Path("runs"), Path(__file__).resolve().parents[2] / "runs")
"""Where `sm traceback` and `sm status` look for the newest run: ./runs, then the project's runs/."""
DAY = 86400.0
MAX_PACKETS = 10**9
CONFIG_ERRORS = (TopologyError, PartitionError, TopologyTooLarge, FabricError, SmConfigError,
                 keys.IbsecKeyError, mad_auth.ReplayStateError)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sm", description="the subnet manager of ibsec-fabric and the "
                                     "tools that inspect its runs (docs/subnet-manager.md)")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run the subnet manager",
                         formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    run.add_argument("--topology", type=Path, required=True, help="topology file (docs/topology-file.md)")
    run.add_argument("--run-dir", type=Path, help="run directory (default: the topology file's directory)")
    run.add_argument("--policy", choices=names.POLICIES, default=names.Policy.SIF.value, help="filter policy")
    run.add_argument("--partitions", type=Path, help="OpenSM partitions.conf (replaces the topology's)")
    run.add_argument("--keys", type=Path, help="SM key database (CA_SK per host, mode 0600); default "
                     "RUN_DIR/keys/sm.keys, created with per-host provisioning files if missing")
    run.add_argument("--p4info", type=Path, default=SmOptions.p4info, help="P4Info text file")
    run.add_argument("--config", type=Path, default=SmOptions.p4blob, help="program JSON pushed to switches")
    run.add_argument("--events", type=Path, help="events file (default RUN_DIR/events.jsonl)")
    run.add_argument("--log", type=Path, help="log file (default RUN_DIR/logs/sm.log)")
    run.add_argument("--control", type=Path, help="control socket (default RUN_DIR/sm.sock)")
    run.add_argument("--quiet-period", type=number(0, DAY, above=True), default=SifOptions.quiet_period,
                     help="SIF: seconds without violations before a filter is flushed")
    run.add_argument("--poll-interval", type=number(0, 60, above=True), default=SifOptions.poll_interval,
                     help="SIF: seconds between violation counter polls")
    run.add_argument("--suppress-window", type=number(0, DAY), default=TrapOptions.suppress_window,
                     help="seconds a repeated trap is only counted")
    run.add_argument("--max-trap-age", type=number(0, DAY, above=True), default=TrapOptions.max_age,
                     help="seconds after which an agent's MAD is stale (by its TransactionID's time)")
    run.add_argument("--punt-rate", type=integer(1, MAX_PACKETS), default=SmOptions.punt_rate,
                     help="packets/s per host port to the SM")
    run.add_argument("--punt-burst", type=integer(1, MAX_PACKETS), default=SmOptions.punt_burst,
                     help="punt meter burst, packets")
    run.add_argument("--key-timeout", type=number(0, 3600, above=True), default=KeyOptions.timeout,
                     help="seconds before a key MAD is first resent (then twice as long each attempt)")
    run.add_argument("--key-attempts", type=integer(1, 1000), default=KeyOptions.attempts,
                     help="sends per key MAD")
    run.add_argument("--key-window", type=integer(1, 100000), default=KeyOptions.window,
                     help="key MADs waiting for an ACK at once, across the fabric")
    run.add_argument("--no-keys", action="store_true", help="do not distribute keys")
    run.add_argument("--tls-cacert", type=Path, help="P4Runtime over TLS: the CA of the switches' certs")
    run.add_argument("--tls-cert", type=Path, help="mutual TLS: the SM's certificate (with --tls-key)")
    run.add_argument("--tls-key", type=Path, help="mutual TLS: the SM's private key (mode 0600)")
    run.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    for name, helptext in (("traceback", "traceback results of a run"), ("status", "state of a running SM"),
                           ("partitions", "partitions, memberships and multicast groups of a running SM")):
        cmd = sub.add_parser(name, help=helptext)
        cmd.add_argument("run_dir", type=Path, nargs="?", help="run directory (default: the newest in runs/)")
        cmd.add_argument("--json", action="store_true", help="JSON instead of a table")
        if name == "traceback":
            cmd.add_argument("--png", type=Path, help="draw the topology with the last traceback")
    policy = sub.add_parser("policy", help="switch a running SM's filter policy")
    policy.add_argument("policy", choices=names.POLICIES)
    policy.add_argument("run_dir", type=Path, nargs="?")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "run":
            return _run(args)
        run_dir = args.run_dir or _newest_run()
        if args.command == "traceback":
            return _traceback(run_dir, args)
        if args.command == "status":
            return _status(run_dir, args.json)
        if args.command == "partitions":
            return _partitions(run_dir, args.json)
        return _policy(run_dir, args.policy)
    except CONFIG_ERRORS as err:
        print(f"sm: error: {err}", file=sys.stderr)
        return 2


def _newest_run() -> Path:
    for root in RUNS:
        runs = sorted(p.parent for p in root.glob("*/events.jsonl"))
        if runs:
            return runs[-1]
    raise SmConfigError(f"no run directory with an events file under {' or '.join(map(str, RUNS))}; name one")


# ---------------------------------------------------------------------------------------------------------
# sm run
# ---------------------------------------------------------------------------------------------------------


def _keystore(topo: Topology, path: Path) -> keys.KeyStore:
    """Load the SM's key database, or create it (and each host's provisioning file) the first time."""
    if path.exists():
        store = keys.KeyStore.load(path)
    else:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        store = keys.KeyStore()
        for host in topo.hosts:
            store.enroll(host.guid)
            store.provision_host(host.guid, path.parent / f"{host.name}.keys")
        store.save(path)
        logging.getLogger("ibsm").info("created key database %s and %d provisioning files", path,
                                       len(topo.hosts))
    missing = [h.name for h in topo.hosts if h.guid not in store]
    if missing:
        raise SmConfigError(f"{path}: no CA key for {', '.join(missing)}")
    return store


def _setup_logging(path: Path, verbose: bool) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("%(asctime)s sm %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.DEBUG if verbose else logging.INFO)
    logging.getLogger("grpc").setLevel(logging.WARNING)


def build(args: argparse.Namespace) -> tuple[SubnetManager, Path]:
    """Everything ``sm run`` checks before it touches a switch (bad configuration fails here)."""
    topo = load_topology(args.topology)
    run_dir = args.run_dir or args.topology.resolve().parent
    warnings: list[str] = []  # what OpenSM would only log about the partitions file
    partitions = (load_partitions(args.partitions, warnings.append) if args.partitions
                  else list(topo.partitions))
    check_partitions(partitions, topo)
    _setup_logging(args.log or run_dir / "logs" / "sm.log", args.verbose)
    for warning in warnings:
        print(f"sm: warning: {warning}", file=sys.stderr)
        logging.getLogger("ibsm").warning("%s", warning)
    key_db = args.keys or run_dir / "keys" / "sm.keys"
    store = _keystore(topo, key_db)
    options = SmOptions(run_dir=run_dir, events=args.events, policy=args.policy, p4info=args.p4info,
                        p4blob=args.config, punt_rate=args.punt_rate, punt_burst=args.punt_burst,
                        distribute_keys=not args.no_keys,
                        generated_keys=key_db.parent / f"{key_db.stem}-generated.keys",
                        sif=SifOptions(quiet_period=args.quiet_period, poll_interval=args.poll_interval),
                        traps=TrapOptions(suppress_window=args.suppress_window, max_age=args.max_trap_age,
                                          replay_state=key_db.parent / f"{key_db.stem}-replay.state"),
                        keys=KeyOptions(timeout=args.key_timeout, attempts=args.key_attempts,
                                        window=args.key_window),
                        tls=_tls(args))
    if options.tls is not None:
        logging.getLogger("ibsm").info("P4Runtime over TLS: switches checked against %s%s", args.tls_cacert,
                                       f", the SM presents {args.tls_cert}" if args.tls_cert else "")
    return SubnetManager(topo, partitions, store, options), args.control or run_dir / "sm.sock"


def _tls(args: argparse.Namespace) -> fy.GRPCCredentialsTLS | None:
    """The switches' TLS settings from --tls-cacert [--tls-cert --tls-key] (None: plaintext)."""
    if (args.tls_cert is None) != (args.tls_key is None):
        raise SmConfigError("--tls-cert and --tls-key go together")
    if args.tls_cacert is None:
        if args.tls_cert is not None:
            raise SmConfigError("--tls-cert needs --tls-cacert (the CA that signed the switches)")
        return None
    return fy.GRPCCredentialsTLS(cacert=args.tls_cacert, cert=args.tls_cert, private_key=args.tls_key)


def _run(args: argparse.Namespace) -> int:
    try:
        sm, control_path = build(args)
    except OSError as err:  # a log, events or key path that cannot be written
        raise SmConfigError(f"{err.filename or ''}: {err.strerror or err}") from None
    log = logging.getLogger("ibsm")

    async def serve() -> None:
        task = asyncio.current_task()
        assert task is not None
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, task.cancel)
        server = await control.serve_control(sm, control_path)
        log.info("SM up: %d switches, policy %s, control %s", len(sm.topo.switches), sm.policy, control_path)
        try:
            await sm.run()
        finally:
            server.close()

    try:
        asyncio.run(serve())
    except asyncio.CancelledError:
        pass
    log.info("SM stopped: traps %s", dict(sm.traps.counters))
    return 0


# ---------------------------------------------------------------------------------------------------------
# inspecting a run
# ---------------------------------------------------------------------------------------------------------


def _traceback(run_dir: Path, args: argparse.Namespace) -> int:
    events = run_dir / "events.jsonl"
    if not events.exists():
        raise SmConfigError(f"{events} does not exist")
    rows = report.tracebacks(events)
    if args.json:
        print(json.dumps(rows, indent=1))
    else:
        print(report.table(rows) if rows else f"no traceback in {events}")
    if args.png:
        report.draw(load_topology(run_dir / "topology.json"), rows[-1] if rows else None, args.png)
        print(f"picture: {args.png}", file=sys.stderr)
    return 0


def _ask(run_dir: Path, cmd: str, timeout: float = 10.0, **args: Any) -> Any:
    """The running SM's result for ``cmd`` on its control socket (SmConfigError if it refused)."""
    try:
        return control_call(run_dir / "sm.sock", cmd, timeout=timeout, **args)
    except CommandError as err:
        raise SmConfigError(str(err)) from None
    except OSError as err:
        raise SmConfigError(f"no SM answers on {run_dir / 'sm.sock'} ({err.strerror or err})") from None


def _status(run_dir: Path, as_json: bool) -> int:
    status: dict[str, Any] = _ask(run_dir, "status")
    if as_json:
        print(json.dumps(status, indent=1))
        return 0
    print(f"policy {status['policy']}, marking {status['scheme']}, packet-ins {status['packet_ins']}, "
          f"key MADs outstanding {status['keys_outstanding']}")
    print("switches: " + ", ".join(f"{n} {s}" for n, s in sorted(status["switches"].items())))
    print(f"traps: {status['traps'] or 'none'}")
    if not status["filters"]:
        print("filters: none")
    for f in status["filters"]:
        print(f"filter: {f['switch']} port {f['port']} {f['mode']} {' '.join(f['pkeys'])} "
              f"violations {f['count']} for {f['active_s']} s")
    return 0


def _partitions(run_dir: Path, as_json: bool) -> int:
    parts: list[dict[str, Any]] = _ask(run_dir, "partitions")
    if as_json:
        print(json.dumps(parts, indent=1))
        return 0
    for part in parts:
        print(f"{part['name']} {part['pkey']}: secmode {part['secmode']}, sl {part['sl']}"
              + (", ipoib" if part["ipoib"] else ""))
        print(f"  members: {', '.join(part['members']) or 'none'}")
        print(f"  hosts: {', '.join(f'{h} {m}' for h, m in part['hosts'].items()) or 'none'}")
        if part["index0"]:
            print(f"  at index 0 of: {', '.join(part['index0'])}")
        for g in part["groups"]:
            print(f"  group {g['mgid']}: P_Key {g['pkey']}, Q_Key {g['qkey']}, mtu {g['mtu']}, "
                  f"rate {g['rate']}, sl {g['sl']}, scope {g['scope']}, TClass {g['tclass']}, "
                  f"FlowLabel {g['flow_label']}")
    return 0


def _policy(run_dir: Path, policy: str) -> int:
    result = _ask(run_dir, "policy", timeout=60, policy=policy)
    print(f"policy {result['old']} -> {result['new']}")
    return 0
