"""Two host agents on a veth pair in their own namespaces (``labs.agent_lab``), for experiments 2, 5 and 6.

Everything a lab starts is stopped by pid and every namespace deleted when the ``with`` block ends, even
after an error.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from labs.agent_lab import Agent, AgentLab, provision, rc_pair, start_agents

AGENT_ARGS = ("--ack-timeout", "0.25")


@contextmanager
def agent_pair(*extra: str) -> Iterator[tuple[Agent, Agent]]:
    """Two provisioned agents (sender, echoing peer) sharing one secured partition."""
    with tempfile.TemporaryDirectory(prefix="ibsec-eval-") as tmp:
        run_dir = Path(tmp)
        (run_dir / "logs").mkdir()
        fabric = AgentLab.create(run_dir, 2)
        try:
            prov = provision(fabric, fabric.hosts)
            a, b = start_agents(fabric, fabric.hosts, prov, None, *AGENT_ARGS, *extra)
            yield a, b
        finally:
            fabric.close()


def echo_connection(a: Agent, b: Agent, mode: int, scope: str = "session", pd: int | None = None) -> int:
    """An RC connection a -> b in ``mode`` (owned by a's protection domain ``pd``, if given) whose far end
    echoes every message; a's QPN."""
    qpn, remote = rc_pair(a, b, mode, scope, pd=pd)
    b.call("serve", qpn=remote)
    return qpn


def send_lat(a: Agent, qpn: int, size: int, iterations: int, duration: float) -> dict[str, float]:
    """The agent's ib_send_lat-style ping-pong: one-way latency summary in microseconds."""
    result: dict[str, float] = a.call(
        "perf", test="send_lat", qpn=qpn, size=size, iterations=iterations, duration=duration
    )
    return result
