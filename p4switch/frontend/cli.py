"""`p4switch-cc`: the p4switch front end, with the command lines of p4c-bm2-ss and of the p4c driver.

    p4switch-cc PROGRAM.p4 -o PROGRAM.json --p4runtime-files A.p4info.txtpb[,B.json,...] [-I DIR] [-D N=V]
    p4c --target bmv2 --arch v1model -o DIR --p4runtime-files DIR/NAME.p4info.txtpb PROGRAM.p4

Called by any other name (or as ``p4c-bm2-ss``) it is p4c-bm2-ss: ``-o`` names the program file. Called
as ``p4c`` (``p4switch aliases DIR`` makes that name) it is p4c's driver: ``-o`` names a directory that
gets NAME.json and the preprocessed NAME.p4i. The P4Info goes to every file of ``--p4runtime-files``, in
the format its extension says (.json, .bin/.pb, otherwise text), or to the deprecated
``--p4runtime-file`` in ``--p4runtime-format``. Errors are printed as `file:line:col: message` and exit
with status 1.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from p4switch.frontend.errors import P4Error
from p4switch.frontend.passes import Compiled, compile_file

__all__ = ["Compiled", "compile_file", "main"]  # compile_file lives in p4switch.frontend (passes.py)


def _define(text: str) -> tuple[str, str]:
    name, _, value = text.partition("=")
    return name, value if _ else "1"


def _common(ap: argparse.ArgumentParser) -> None:
    """The options p4c-bm2-ss and the p4c driver share."""
    ap.add_argument("program", type=Path, nargs="?", metavar="PROGRAM.p4", help="P4_16 source for v1model")
    ap.add_argument("-I", dest="include", action="append", type=Path, default=[], metavar="DIR",
                    help="include directory")
    ap.add_argument("-D", dest="define", action="append", default=[], metavar="NAME=VALUE",
                    help="macro definition")
    ap.add_argument("-U", dest="undefine", action="append", default=[], metavar="NAME",
                    help="undefine a macro defined by an earlier -D")
    ap.add_argument("--p4runtime-files", metavar="FILES",
                    help="comma-separated P4Info outputs (.txt/.txtpb text, .json, .bin)")
    ap.add_argument("--p4runtime-file", type=Path, metavar="FILE",
                    help="P4Info output in --p4runtime-format (deprecated in p4c)")
    ap.add_argument("--p4runtime-format", choices=("binary", "json", "text"), default="binary",
                    help="format of --p4runtime-file (default binary, as p4c)")
    ap.add_argument("--arch", "-a", default="v1model", help="architecture (only v1model)")
    ap.add_argument("--std", "-x", default="p4-16", help="language (only p4-16)")
    ap.add_argument("--version", "-V", action="store_true", help="print the version and exit")


def bm2ss_parser(prog: str) -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog=prog, description="Compile P4_16 (v1model) for p4switch, with "
                                 "p4c-bm2-ss's command line.")
    _common(ap)
    ap.add_argument("-o", "--output", type=Path, metavar="PROGRAM.json",
                    help="program JSON output (default: PROGRAM.json beside the source)")
    ap.add_argument("--p4v", default="16", help="language version, as p4c-bm2-ss (only 16)")
    ap.add_argument("--target", default="bmv2", help="accepted for p4c compatibility")
    return ap


def driver_parser(prog: str) -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog=prog, description="Compile P4_16 (v1model) for p4switch, with "
                                 "the p4c driver's command line.")
    _common(ap)
    ap.add_argument("-o", "--output", type=Path, default=Path("."), metavar="DIR",
                    help="output directory: DIR/NAME.json and DIR/NAME.p4i (default .)")
    ap.add_argument("-b", "--target", default="bmv2", help="target (only bmv2)")
    for flag, what in (("-c", "compile (always)"), ("-g", "debug information (always in the IR)"),
                       ("-v", "verbose (accepted)"), ("--ndebug", "non-debug mode (accepted)")):
        ap.add_argument(flag, action="store_true", help=what)
    return ap


def _p4info_outputs(args: argparse.Namespace) -> list[tuple[Path, str | None]]:
    outputs: list[tuple[Path, str | None]] = [
        (Path(name), None) for name in (args.p4runtime_files or "").split(",") if name]
    if args.p4runtime_file:
        outputs.append((args.p4runtime_file, args.p4runtime_format))
    return outputs


def _unsupported(args: argparse.Namespace) -> str | None:
    if args.arch != "v1model" or args.std not in ("p4-16", "p4_16") or getattr(args, "p4v", "16") != "16":
        return "only --arch v1model and P4_16 are supported by p4switch"
    if args.target != "bmv2":
        return f"target {args.target}: p4switch-cc compiles for bmv2 (p4switch) only"
    return None


def main(argv: list[str] | None = None, prog: str | None = None) -> int:
    """p4switch-cc; as p4c's driver when called ``p4c`` (``prog`` or the program name says how)."""
    prog = prog or os.path.basename(sys.argv[0] if sys.argv and sys.argv[0] else "p4switch-cc")
    driver = prog == "p4c"
    parser = (driver_parser if driver else bm2ss_parser)(prog)
    args = parser.parse_args(argv)
    if args.version:
        print(f"{prog} (p4switch-cc, {'p4c driver' if driver else 'p4c-bm2-ss'} command line)")
        return 0
    if args.program is None:
        parser.error("no input P4 program")
    if reason := _unsupported(args):
        print(f"p4switch-cc: {reason}", file=sys.stderr)
        return 1
    defines = dict(_define(d) for d in args.define)
    for name in args.undefine:
        defines.pop(name, None)
    try:
        result = compile_file(args.program, args.include, defines)
    except P4Error as exc:
        print(str(exc), file=sys.stderr)
        return 1
    try:
        if driver:
            args.output.mkdir(parents=True, exist_ok=True)
            stem = args.program.name.removesuffix(".p4")
            (args.output / f"{stem}.p4i").write_text(result.preprocessed)
            (args.output / f"{stem}.json").write_text(result.ir_json())
        else:
            (args.output or args.program.with_suffix(".json")).write_text(result.ir_json())
        for path, fmt in _p4info_outputs(args):
            result.write_p4info(path, fmt)
    except OSError as exc:
        print(f"p4switch-cc: cannot write {exc.filename}: {exc.strerror}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
