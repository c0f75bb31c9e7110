"""`p4switch`: the switch process, with simple_switch_grpc's command line (p4switch/options.py), and
``p4switch aliases DIR``, which installs the tools under BMv2's names (p4switch/aliases.py).

    p4switch [-i PORT@IFACE ...] [--device-id N] [--log-file F | --log-console] [-L LEVEL] [--pcap [DIR]]
             [--dump-packet-data N] [--use-files SECONDS] [--engine native|python] [PROGRAM.json | --no-p4]
             [-- --grpc-server-addr HOST:PORT --cpu-port N --grpc-server-ssl ...]

It serves P4Runtime on gRPC (over TLS with --grpc-server-ssl), receives and sends frames on the given
interfaces (or pcap files) and runs them through the program (from the command line, or pushed with
SetForwardingPipelineConfig). One line on stdout says when the gRPC port listens. SIGTERM and SIGINT stop
it cleanly (exit status 0).

Programs run on the native engine (compiled to C, frames served by a C thread: p4switch.engine.native,
p4switch.native.io) when a C compiler is installed, else on the Python engine; when a program or an
option needs the Python engine, one line on stdout says so and why."""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import stat
import sys
import threading
from collections.abc import Callable
from importlib import metadata

import grpc

from p4switch import aliases, logs, options, program
from p4switch.dataplane import Dataplane, open_port
from p4switch.engine import api as engine
from p4switch.native import build
from p4switch.native.io import IoLibrary, NativeDataplane
from p4switch.pcapfiles import FileDataplane
from p4switch.runtime.device import Device
from p4switch.runtime.server import P4RuntimeService, serve
from p4switch.signals import stop_on_signals


def version() -> str:
    try:
        ours = metadata.version("ibsec-fabric")
    except metadata.PackageNotFoundError:
        ours = "unknown"
    return f"p4switch {ours} (simple_switch_grpc {options.BMV2_VERSION} command line)"


def print_versions(args: argparse.Namespace) -> int:
    """-v and --json-version: print and exit, as BMv2."""
    if args.version:
        print(version())
        return 0
    print(program.BMV2_JSON_VERSION)
    return 0


class TlsFileError(ValueError):
    """A TLS file is not what its option says (the message names the file, never its content)."""


def tls_credentials(tls: options.TlsOptions, log: logging.Logger) -> grpc.ServerCredentials:
    """Server credentials from the PEM files (read once at start), checked first so that a wrong file is
    named instead of gRPC's "cannot listen". Raises OSError, TlsFileError."""
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    def read(path: str) -> bytes:
        with open(path, "rb") as f:
            return f.read()

    cert, key = read(tls.cert), read(tls.key)
    cacert = read(tls.cacert) if tls.cacert else None
    if os.stat(tls.key).st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        log.warning("the TLS key %s can be read by other users (chmod 600 it)", tls.key)
    try:
        chain = x509.load_pem_x509_certificates(cert)
    except ValueError:
        raise TlsFileError(f"--grpc-server-cert {tls.cert} is not a PEM certificate") from None
    try:
        private = serialization.load_pem_private_key(key, password=None)
    except (ValueError, TypeError):
        raise TlsFileError(f"--grpc-server-key {tls.key} is not an unencrypted PEM private key") from None
    spki = serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    if chain[0].public_key().public_bytes(*spki) != private.public_key().public_bytes(*spki):
        raise TlsFileError(f"--grpc-server-key {tls.key} is not the key of {tls.cert}")
    if cacert is not None:
        try:
            x509.load_pem_x509_certificates(cacert)
        except ValueError:
            raise TlsFileError(f"--grpc-server-cacert {tls.cacert} is not a PEM certificate") from None
    return grpc.ssl_server_credentials([(key, cert)], root_certificates=cacert,
                                       require_client_auth=tls.client_auth)


def load_program(device: Device, path: str) -> None:
    """Run the program file given on the command line. Raises OSError, engine.EngineError."""
    with open(path, "rb") as f:
        data = f.read()
    device.install(device.load(data), data)


Ports = Dataplane | NativeDataplane | FileDataplane


ENGINE_VARIABLE = "P4SWITCH_ENGINE"
"""--engine's default when set (native or python): runs a whole test suite or fabric on one engine."""


def choose_engine(args: argparse.Namespace) -> tuple[str, str | None]:
    """The engine programs run on, and why it is the Python one when the native one was not refused
    explicitly (None: nothing to say)."""
    wanted = args.engine or os.environ.get(ENGINE_VARIABLE) or "native"
    if wanted not in ("native", "python"):
        return "python", f"running the Python engine: ${ENGINE_VARIABLE}={wanted} is not native or python"
    if wanted == "python":
        return "python", None
    if logs.LEVELS[args.log_level] <= engine.TRACE and (args.log_file or args.log_console):
        return "python", ("running the Python engine: per-packet trace logging (-L trace, BMv2's default) "
                          "is the Python engine's; -L debug or above runs the native engine")
    try:
        build.toolchain()
    except build.NativeUnavailable as err:
        return "python", f"running the Python engine: {err}"
    return "native", None


def before_fork() -> None:
    """What topologies.zygote calls before it forks switches: the native engine's module and both cffi
    declarations (a pycparser parse each, about 1 MiB of a switch's own memory when every switch made
    them itself) and the compiled np_io library, made once and shared by every child. Nothing when the
    environment asks for the Python engine or no C compiler is there: the switches then never use them."""
    if os.environ.get(ENGINE_VARIABLE, "native") != "native":
        return
    from p4switch.engine import native

    native.ffi()
    with contextlib.suppress(build.NativeUnavailable):
        IoLibrary.get()


def open_dataplane(args: argparse.Namespace, device: Device, log: logging.Logger) -> Ports:
    """The ports: interfaces (served by the native I/O thread with the native engine), or pcap files
    with --use-files. Raises OSError."""
    if args.use_files is not None:
        return FileDataplane(device, args.ports, log, args.use_files, args.dump_packet_data)
    if device.back_end == "native":
        try:
            return NativeDataplane(device, args.ports, log, args.dump_packet_data, args.pcap)
        except build.NativeUnavailable as err:
            say(log, f"packet I/O in Python: the native data plane cannot be built: {err}")
    ports = [open_port(number, iface, args.pcap) for number, iface in args.ports]
    return Dataplane(device, ports, log, args.dump_packet_data)


_said: set[str] = set()


def say(log: logging.Logger, note: str) -> None:
    """A line on stdout (and in the log) said once per process: what runs where, and why."""
    if note not in _said:
        _said.add(note)
        log.warning("%s", note)
        print(f"p4switch: {note}", flush=True)


def say_engine_note(log: logging.Logger) -> Callable[[engine.Switch], None]:
    """Listener of Device.install: says once why a program runs on the Python engine."""
    def listener(switch: engine.Switch) -> None:
        if switch.engine_note:
            say(log, switch.engine_note)
    return listener


def start(args: argparse.Namespace, log: logging.Logger
          ) -> tuple[Device, Ports, P4RuntimeService, grpc.Server, int] | None:
    """Load, open the ports, start the gRPC server; None (after printing why) when any of it fails."""
    back_end, note = choose_engine(args)
    if note:
        say(log, note)
    device = Device(args.device_id, args.cpu_port, log.getChild("device"), back_end, release_memory=True)
    device.on_install.append(say_engine_note(log))
    try:
        credentials = tls_credentials(args.tls, log) if args.tls else None
    except OSError as err:
        print(f"p4switch: cannot read TLS file {err.filename}: {err.strerror}", file=sys.stderr)
        return None
    except TlsFileError as err:
        print(f"p4switch: {err}", file=sys.stderr)
        return None
    if args.program:
        try:
            load_program(device, args.program)
        except (OSError, engine.EngineError) as err:
            print(f"p4switch: cannot load {args.program}: {err}", file=sys.stderr)
            return None
    try:
        dataplane = open_dataplane(args, device, log.getChild("dataplane"))
    except (OSError, ValueError) as err:
        print(f"p4switch: cannot open port: {err}", file=sys.stderr)
        return None
    service = P4RuntimeService(device, log.getChild("p4runtime"))
    server, grpc_port = serve(service, args.grpc_server_addr, credentials=credentials)
    if grpc_port == 0:
        print(f"p4switch: cannot listen on {args.grpc_server_addr}", file=sys.stderr)
        service.close()
        dataplane.close()
        return None
    return device, dataplane, service, server, grpc_port


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["aliases"]:
        return aliases.main(argv[1:])
    args = options.parse(argv)
    if args.version or args.json_version:
        return print_versions(args)
    try:
        log = logs.setup(args)
    except OSError as err:
        print(f"p4switch: cannot open the log file {err.filename}: {err.strerror}", file=sys.stderr)
        return 2
    stop = stop_on_signals(log)
    for note in options.notes(args):
        log.info("%s", note)
        if not args.log_console:  # stdout is the log then: one line is enough
            print(f"p4switch: {note}", flush=True)
    started = start(args, log)
    if started is None:
        return 2
    device, dataplane, service, server, grpc_port = started
    host = args.grpc_server_addr.rsplit(":", 1)[0]
    scheme = ("mutual TLS" if args.tls.client_auth else "TLS") if args.tls else "plaintext"
    log.info("P4Runtime (%s) listening on %s:%d, ports %s", scheme, host, grpc_port,
             ", ".join(f"{n}@{i}" for n, i in args.ports) or "none")
    print(f"p4switch: device {args.device_id} P4Runtime server listening on {host}:{grpc_port} ({scheme})",
          flush=True)
    return run(device, dataplane, service, server, log, stop, args.stats_file)


STATS_INTERVAL = 1.0


def write_stats(path: str, dataplane: Dataplane | NativeDataplane) -> None:
    """--stats-file: the ports' counters as one JSON object, replaced whole (a reader never sees half)."""
    doc = {"ports": {str(number): counts for number, counts in dataplane.port_stats().items()}}
    with open(f"{path}.tmp", "w") as out:
        json.dump(doc, out)
    os.replace(f"{path}.tmp", path)


def stats_writer(path: str, dataplane: Dataplane | NativeDataplane, stop: threading.Event,
                 log: logging.Logger) -> threading.Thread:
    """A thread that writes --stats-file every STATS_INTERVAL until ``stop``."""

    def loop() -> None:
        while not stop.wait(STATS_INTERVAL):
            try:
                write_stats(path, dataplane)
            except OSError as err:
                log.warning("cannot write --stats-file %s: %s", path, err)
                return

    thread = threading.Thread(target=loop, name="stats-file", daemon=True)
    thread.start()
    return thread


def run(device: Device, dataplane: Ports, service: P4RuntimeService, server: grpc.Server,
        log: logging.Logger, stop: threading.Event, stats_file: str | None = None) -> int:
    """Serve until ``stop`` is set, then stop everything."""
    # options refuse --stats-file with --use-files: files have no kernel counters
    stats = (stats_file, dataplane) if stats_file and not isinstance(dataplane, FileDataplane) else None
    writer = stats_writer(*stats, stop, log) if stats else None
    try:
        dataplane.run(stop)
        while not stop.wait(0.5):  # pcap input replayed: keep serving P4Runtime
            pass
    finally:
        service.close()
        server.stop(grace=1).wait(2)
        if stats and writer:
            writer.join(timeout=2 * STATS_INTERVAL)
            with contextlib.suppress(OSError):
                write_stats(*stats)  # the last counts, before the ports close
        dataplane.close()
        log.info("stopped; pipeline stats: %s", dict(device.switch.stats) if device.switch else {})
        logging.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
