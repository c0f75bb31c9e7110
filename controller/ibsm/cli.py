"""``sm``: the subnet manager and the tools that inspect its runs (docs/subnet-manager.md).

    sm run --topology FILE [--policy none|dt|if|sif] [--keys FILE] [--partitions partitions.conf] ...
    sm traceback [RUN_DIR] [--json] [--png FILE]
    sm status [RUN_DIR] [--json]
    sm policy POLICY [RUN_DIR]

This entry point imports nothing heavy before it can take a SIGTERM: ``sm run`` stopped while it is
still loading its modules exits 0 at once instead of dying on the default signal action; once running,
the SM's own handler stops it cleanly (:mod:`ibsm.commands`).
"""

from __future__ import annotations

import signal
import sys
from types import FrameType


def _stop_while_starting(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(0)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["run"]:
        signal.signal(signal.SIGTERM, _stop_while_starting)
    from .commands import main as run_command

    return run_command(args)


if __name__ == "__main__":
    sys.exit(main())
