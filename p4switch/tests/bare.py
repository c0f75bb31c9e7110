"""The bench's bare forwarder: p4switch's native packet I/O with no pipeline, what this machine can forward
over veths at all (the reference `make bench` compares the switch with).

    python -m p4switch.tests.bare -i 1@IFACE -i 2@IFACE [--pcap DIR]

Every frame received on the first port leaves on the second and the other way round, through the same
receive rings, bursts and batched sends as a native p4switch. It prints one line once forwarding and stops
cleanly on SIGTERM or SIGINT."""

from __future__ import annotations

import argparse
import logging
import sys

from p4switch.dataplane import parse_interface
from p4switch.native import build
from p4switch.native.io import NativeIo
from p4switch.signals import stop_on_signals


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m p4switch.tests.bare",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("-i", "--interface", action="append", required=True, type=parse_interface,
                        metavar="PORT@IFACE", help="exactly two ports")
    parser.add_argument("--pcap", metavar="DIR", help="write <iface>_in.pcap / _out.pcap per port")
    args = parser.parse_args(argv)
    if len(args.interface) != 2:
        parser.error("give exactly two -i PORT@IFACE")
    stop = stop_on_signals(logging.getLogger("bare"))
    try:
        io = NativeIo(args.interface, None, 0, args.pcap)
    except (OSError, build.NativeUnavailable) as err:
        print(f"bare forwarder: {err}", file=sys.stderr)
        return 2
    (a, _), (b, _) = args.interface
    io.lib.np_io_set_bare(io.io, a, b)
    io.lib.np_io_set_bare(io.io, b, a)
    io.start()
    print(f"bare forwarder: forwarding between ports {a} and {b}", flush=True)
    try:
        while not stop.wait(3600):
            pass
    finally:
        io.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
