"""`p4switch-cc`: the p4switch front end, a drop-in for p4c-bm2-ss.

    p4switch-cc PROGRAM.p4 -o PROGRAM.json --p4runtime-files PROGRAM.p4info.txtpb [-I DIR] [-D NAME=VALUE]

Errors are printed as `file:line:col: message` and exit with status 1.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from google.protobuf import json_format, text_format

from p4switch.frontend import p4info
from p4switch.frontend.elaborate import Elaborator
from p4switch.frontend.errors import P4Error
from p4switch.frontend.parser import parse
from p4switch.frontend.preprocess import preprocess


@dataclass
class Compiled:
    """The two outputs of a compile: the IR (docs/p4switch-ir.md) and the P4Info message."""

    ir: dict[str, Any]
    p4info: Any

    def ir_json(self) -> str:
        return json.dumps(self.ir, indent=1) + "\n"

    def p4info_text(self) -> str:
        return str(text_format.MessageToString(self.p4info))

    def write_p4info(self, path: Path) -> None:
        """Write the P4Info in the format p4c picks from the extension: .json, .bin/.pb, else text."""
        if path.suffix == ".json":
            path.write_text(json_format.MessageToJson(self.p4info))
        elif path.suffix in (".bin", ".pb"):
            path.write_bytes(self.p4info.SerializeToString())
        else:
            path.write_text(self.p4info_text())


def compile_file(
    path: Path, include_dirs: list[Path] | None = None, defines: dict[str, str] | None = None
) -> Compiled:
    """Compile one P4 program; raises P4Error (with file:line:col) for bad input."""
    text, smap = preprocess(path, include_dirs, defines)
    tree = parse(text, smap)
    elab = Elaborator(tree, smap, text, path.name)
    ir = elab.run()
    info = p4info.build(ir, elab)
    return Compiled(ir, info)


def _define(text: str) -> tuple[str, str]:
    name, _, value = text.partition("=")
    return name, value if _ else "1"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="p4switch-cc", description="Compile P4_16 (v1model) for p4switch.")
    ap.add_argument("program", type=Path, metavar="PROGRAM.p4", help="P4_16 source for v1model")
    ap.add_argument(
        "-o", "--output", type=Path, metavar="PROGRAM.json", help="IR JSON output (default: PROGRAM.json)"
    )
    ap.add_argument(
        "--p4runtime-files", type=Path, metavar="P4INFO", help="P4Info output (.txt/.txtpb text, .json, .bin)"
    )
    ap.add_argument(
        "-I", dest="include", action="append", type=Path, default=[], metavar="DIR", help="include directory"
    )
    ap.add_argument(
        "-D",
        dest="define",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="NAME=VALUE macro definition",
    )
    ap.add_argument("--arch", default="v1model", help="architecture (only v1model)")
    ap.add_argument("--std", default="p4-16", help="language (only p4-16)")
    ap.add_argument("--p4v", default="16", help="language version, as p4c-bm2-ss (only 16)")
    ap.add_argument("--target", default="bmv2", help="accepted for p4c compatibility")
    args = ap.parse_args(argv)
    if args.arch != "v1model" or args.std not in ("p4-16", "p4_16") or args.p4v != "16":
        print("p4switch-cc: only --arch v1model and P4_16 are supported by p4switch", file=sys.stderr)
        return 1
    try:
        result = compile_file(args.program, args.include, dict(_define(d) for d in args.define))
    except P4Error as exc:
        print(str(exc), file=sys.stderr)
        return 1
    out = args.output or args.program.with_suffix(".json")
    try:
        out.write_text(result.ir_json())
        if args.p4runtime_files:
            result.write_p4info(args.p4runtime_files)
    except OSError as exc:
        print(f"p4switch-cc: cannot write {exc.filename}: {exc.strerror}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
