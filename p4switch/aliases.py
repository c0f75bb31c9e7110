"""``p4switch aliases DIR``: p4switch's tools under the names P4 scripts call, as symbolic links in DIR.

    DIR/simple_switch_grpc -> p4switch       (BMv2's command line, p4switch/options.py)
    DIR/p4c                -> p4switch-cc    (called p4c, it takes the p4c driver's command line)
    DIR/p4c-bm2-ss         -> p4switch-cc    (p4c-bm2-ss's command line)

With DIR first on PATH, Makefiles and scripts written for p4c and BMv2 (p4lang/tutorials, for one) run
p4switch unchanged. The links point into the environment p4switch is installed in, so they also work
under ``sudo PATH=$PATH ...``. Links this command made before are replaced; any other file of those names
is left alone and reported."""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

ALIASES = {"simple_switch_grpc": "p4switch", "p4c": "p4switch-cc", "p4c-bm2-ss": "p4switch-cc"}


class AliasError(RuntimeError):
    """An alias could not be made (message names the file)."""


def tool_path(tool: str) -> Path:
    """The installed console script ``tool``: beside this interpreter (a venv's bin), else on PATH."""
    beside = Path(sys.executable).parent / tool
    found = beside if beside.exists() else shutil.which(tool)
    if not found:
        raise AliasError(f"{tool} is not installed beside {sys.executable} nor on PATH")
    return Path(found).absolute()


def make_aliases(directory: Path) -> dict[str, Path]:
    """Make (or renew) the links in ``directory``; returns alias name -> the tool it runs."""
    directory.mkdir(parents=True, exist_ok=True)
    made = {}
    for alias, tool in ALIASES.items():
        link, target = directory / alias, tool_path(tool)
        if link.is_symlink() and Path(link.readlink()).name in set(ALIASES.values()):
            link.unlink()
        elif link.exists() or link.is_symlink():
            raise AliasError(f"{link} exists and is not a p4switch alias: left as it is")
        link.symlink_to(target)
        made[alias] = target
    return made


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="p4switch aliases", description=__doc__.split("\n\n")[0])
    parser.add_argument("directory", type=Path, help="where the links go (created if missing)")
    args = parser.parse_args(argv)
    try:
        made = make_aliases(args.directory)
    except (AliasError, OSError) as err:
        print(f"p4switch aliases: {err}", file=sys.stderr)
        return 1
    for alias, target in made.items():
        print(f"{args.directory / alias} -> {target}")
    print(f"put it first on PATH: export PATH={args.directory.absolute()}:$PATH")
    return 0
