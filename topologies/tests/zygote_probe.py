"""What test_zygote's children run: a child's view of itself as one JSON line on its output (few imports,
so that a child starts at once even on a loaded machine)."""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

prepared_in: int | None = None
"""The pid of the process that called before_fork (the zygote's, as a child sees it)."""


def before_fork() -> None:
    """What the zygote calls once after importing this module, before it forks."""
    global prepared_in
    prepared_in = os.getpid()


def probe(argv: list[str]) -> int:
    """Print argv, program name, process name, network namespace, session, parent, the process that ran
    before_fork and stdin; pause if argv[1] is ``wait``; exit with the status argv[0] says."""
    print(json.dumps({"argv": argv, "prog": sys.argv[0], "comm": Path("/proc/self/comm").read_text().strip(),
                      "netns": os.stat("/proc/self/ns/net").st_ino, "sid": os.getsid(0),
                      "ppid": os.getppid(), "prepared_in": prepared_in,
                      "stdin": os.readlink("/proc/self/fd/0")}), flush=True)
    if argv[1:] == ["wait"]:
        signal.pause()
    return int(argv[0])
