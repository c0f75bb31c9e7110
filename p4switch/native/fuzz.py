"""Fuzzing the native engine under AddressSanitizer and UndefinedBehaviorSanitizer: a program's generated C
and the fuzz driver (p4switch/native/c/np_fuzz.c) in one sanitizer build, run on mutated frames with every
table, profile, parser value set, group and session filled at random and refilled while frames run. Any memory
error, undefined behaviour or leak aborts the run with the sanitizer's report.

    python -m p4switch.native.fuzz PROGRAM.p4 [--frames N] [--seed S] [--seeds FILE.pcap]

Seed frames are the RoCEv2, IPv4, ARP and 802.1Q frames of ``default_seeds`` and those of the program's STF
case beside it (or the frames of a pcap file); mutations truncate, flip bits, overwrite, extend them or
replace them with garbage or jumbo frames. The test suite runs a short run of each test program;
docs/native-engine.md has the long run."""

from __future__ import annotations

import argparse
import os
import shutil
import struct
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from p4switch import ir
from p4switch.engine.cgen import CCodegen
from p4switch.native import build

SANITIZER_ENV = {
    "ASAN_OPTIONS": "detect_leaks=1:abort_on_error=1:halt_on_error=1:detect_stack_use_after_return=1",
    "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1",
    "LSAN_OPTIONS": "exitcode=23",
}


@dataclass(frozen=True)
class FuzzRun:
    """One run: the counters the driver printed, its exit status and the sanitizers' output."""

    returncode: int
    frames: int
    outputs: int
    parser_errors: int
    internal_errors: int
    passes: int
    """resubmits and recirculations run"""
    report: str

    @property
    def clean(self) -> bool:
        return self.returncode == 0 and not self.internal_errors


def executable(program: ir.Program) -> Path:
    """The sanitizer build of the program with the fuzz driver (cached like every native build)."""
    source = CCodegen(program).generate() + '#include "np_fuzz.c"\n'
    return build.build("np_fuzz", {"fuzz.c": source}, flags=build.SANITIZE, shared=False)


def default_seeds() -> list[bytes]:
    """Valid frames of the kinds the project's programs parse: RoCEv2 over IPv6 (SEND, with a
    site-local GID), IPv4/UDP and TCP, ARP, an 802.1Q-tagged frame and a P4Runtime packet-out."""
    from scapy.contrib.roce import BTH
    from scapy.layers.inet import IP, TCP, UDP
    from scapy.layers.inet6 import IPv6
    from scapy.layers.l2 import ARP, Dot1Q, Ether

    eth = Ether(dst="02:00:00:00:00:02", src="02:00:00:00:00:01")
    frames: list[Any] = [
        eth / IPv6(src="fec0::1:0:0:0:10", dst="fec0::1:0:0:0:20") / UDP(sport=49152, dport=4791)
        / BTH(opcode=4, pkey=0xFFFF, dqpn=0x12, psn=1) / bytes(64),
        eth / IPv6(src="fec0::1:0:0:0:10", dst="fec0::1:0:0:0:20") / UDP(sport=49152, dport=4791)
        / BTH(opcode=4, pkey=0x7BAD, dqpn=0x1, psn=7) / bytes(16),
        eth / IP(src="10.0.0.1", dst="10.0.1.2", ttl=64) / UDP(sport=1234, dport=80) / bytes(32),
        eth / IP(src="10.0.0.1", dst="192.168.1.1") / TCP(sport=1, dport=2) / bytes(8),
        Ether(dst="ff:ff:ff:ff:ff:ff") / ARP(pdst="10.0.0.2"),
        eth / Dot1Q(vlan=100) / IP(dst="10.0.0.3") / bytes(20),
        bytes.fromhex("0200") + bytes(eth / IPv6() / UDP(dport=4791) / BTH()),
    ]
    return [bytes(f) for f in frames]


def stf_frames(path: Path) -> list[bytes]:
    """The frames an STF case beside the program sends (they are the program's own format)."""
    from p4switch import stf

    if not path.is_file():
        return []
    return [cmd.data for cmd in stf.load(path) if cmd.kind == "packet" and cmd.data]


def run(program: ir.Program, frames: int, seed: int = 1, seeds: list[bytes] | None = None,
        timeout: float = 3600.0) -> FuzzRun:
    """Build and run the fuzz driver. Raises build.NativeUnavailable when it cannot be built."""
    exe = executable(program)
    with tempfile.NamedTemporaryFile(prefix="p4switch-seeds-", delete=False) as f:
        for frame in seeds or default_seeds():
            f.write(struct.pack("<I", len(frame)) + frame)
        path = f.name
    try:
        done = subprocess.run([str(exe), path, str(frames), str(seed)], capture_output=True, text=True,
                              timeout=timeout, env={**os.environ, **SANITIZER_ENV})
    finally:
        os.unlink(path)
    counts = dict.fromkeys(("frames", "outputs", "parser_errors", "internal_errors", "passes"), 0)
    words = done.stdout.split()
    for name, value in zip(words[::2], words[1::2], strict=False):
        if name in counts:
            counts[name] = int(value)
    return FuzzRun(done.returncode, counts["frames"], counts["outputs"], counts["parser_errors"],
                   counts["internal_errors"], counts["passes"], done.stderr[-20000:])


def read_pcap_frames(path: Path) -> list[bytes]:
    from p4switch.pcapfiles import read_pcap

    with path.open("rb") as f:
        return [frame for _, frame in read_pcap(f, str(path))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m p4switch.native.fuzz",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("program", type=Path, help="a P4 program (compiled with p4switch-cc) or its IR JSON")
    parser.add_argument("--frames", type=int, default=100_000, help="mutated frames (default 100000)")
    parser.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    parser.add_argument("--seeds", type=Path, metavar="PCAP", help="seed frames from a pcap file")
    args = parser.parse_args(argv)
    from p4switch.engine.switch import read_program

    if args.program.suffix == ".p4":
        from p4switch.frontend.cli import compile_file

        program = read_program(compile_file(args.program).ir_json())
    else:
        program = read_program(args.program.read_bytes())
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        print("fuzz: needs a C compiler with AddressSanitizer (gcc)", file=sys.stderr)
        return 2
    seeds = read_pcap_frames(args.seeds) if args.seeds else default_seeds() + stf_frames(
        args.program.with_suffix(".stf"))
    print(f"fuzz: {args.program} under ASan+UBSan, {args.frames} frames, seed {args.seed} ...", flush=True)
    result = run(program, args.frames, args.seed, seeds)
    print(f"fuzz: exit status {result.returncode}; {result.frames} frames, {result.outputs} frames out, "
          f"{result.parser_errors} parser errors, {result.internal_errors} internal errors, "
          f"{result.passes} resubmits and recirculations")
    if not result.clean:
        print(result.report, file=sys.stderr)
        return 1
    print("fuzz: clean (no sanitizer report, no leak)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
