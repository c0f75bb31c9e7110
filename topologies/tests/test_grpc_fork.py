"""A launch forks the commands that build the fabric while its gRPC threads run: importing ``topologies``
turns gRPC's fork support off first, so every forked command runs (with it on, gRPC restarted its poller in
each child, and a loaded CI run saw about one child in eight die before its command)."""

from __future__ import annotations

import os
import subprocess
import sys

FORKS = 300
FORKING = f"""
import os, subprocess
import topologies  # first, as the launcher and the demo import it
from concurrent import futures
import grpc
server = grpc.server(futures.ThreadPoolExecutor(2))
port = server.add_insecure_port("127.0.0.1:0")
server.start()
channel = grpc.insecure_channel(f"127.0.0.1:{{port}}")
grpc.channel_ready_future(channel).result(timeout=60)
def forked() -> str:  # preexec_fn: a real fork(), as Mininet's commands are made
    return subprocess.run(["echo", "ran"], capture_output=True, text=True, preexec_fn=os.setpgrp).stdout
ran = sum(forked() == "ran\\n" for _ in range({FORKS}))
print(os.environ.get("GRPC_ENABLE_FORK_SUPPORT", "unset"), ran)
"""


def test_every_command_forked_while_grpc_runs_runs() -> None:
    env = {k: v for k, v in os.environ.items() if k != "GRPC_ENABLE_FORK_SUPPORT"}  # as a user's shell has it
    done = subprocess.run([sys.executable, "-c", FORKING], env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.stdout.split() == ["false", str(FORKS)], done.stdout + done.stderr[-2000:]
    assert "epoll" not in done.stderr
