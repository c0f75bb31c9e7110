"""Experiment 6: mixed security (seed 003 Table 1): only some connections secured, chosen per connection.

Nexus ran a coupled ocean/atmosphere model with encryption on no link, only on the coupler link, or on
every link. Our workload: four RC connections between two agents, each carrying the same number of
echoed messages one after another (a bulk-synchronous exchange); k of the four run in mode 2 (AEAD),
the rest in mode 0. Configurations are interleaved round by round and each keeps its fastest round.
"""

from __future__ import annotations

from typing import Any

from .agents import agent_pair, echo_connection, send_lat
from .common import Context, Section, Table, new_figure

LINKS = 4
SECURE_MODE = 2
SIZE = 256
CONFIGS = {0: "none secure", 1: "one link secure (coupler)", 2: "half secure", 4: "all secure"}
PAPER = {  # seed 003 Table 1: seconds per simulated day, MPL within partitions (TCP in brackets)
    0: "574 s (TCP 854 s)",
    1: "590 s, +2.8 % (TCP 897 s, +5.0 %)",
    2: "(not measured)",
    4: "1187 s, +107 % (TCP 1459 s, +71 %)",
}


def workload(a: Any, qpns: list[int], messages: int) -> float:
    """Seconds of communication for ``messages`` echoed messages on each connection in turn: each
    connection's median round trip times its messages, so a stall of the shared machine in one round
    trip does not count as the cost of security."""
    total = 0.0
    for qpn in qpns:
        result = send_lat(a, qpn, SIZE, messages, 60.0)
        if result["iterations"] < messages:
            raise RuntimeError(f"connection {qpn}: {result['lost']} messages lost")
        total += 2 * result["median_us"] * 1e-6 * messages
    return total


def run(ctx: Context) -> Section:
    p = ctx.profile
    best: dict[int, float] = {}
    with agent_pair() as (a, b):
        plain = [echo_connection(a, b, 0) for _ in range(LINKS)]
        secure = [echo_connection(a, b, SECURE_MODE) for _ in range(LINKS)]
        ctx.progress("6", f"{LINKS} plain and {LINKS} mode-{SECURE_MODE} connections up")
        for round_ in range(p.agent_rounds):
            for k in CONFIGS:
                took = workload(a, secure[:k] + plain[k:], p.mixed_messages)
                best[k] = min(best.get(k, took), took)
            ctx.progress(
                "6",
                f"round {round_ + 1}/{p.agent_rounds}: "
                + ", ".join(f"{k}/{LINKS} secure {best[k]:.2f} s" for k in CONFIGS),
            )
    rows: list[dict[str, Any]] = [
        {
            "secure_links": k,
            "links": LINKS,
            "config": name,
            "seconds": best[k],
            "messages_per_link": p.mixed_messages,
            "payload": SIZE,
            "cost_vs_none": best[k] / best[0] - 1,
        }
        for k, name in CONFIGS.items()
    ]
    section = Section(
        "6",
        "Mixed security: only some connections secured (seed 003 Table 1)",
        "Nexus: securing only the coupler link costs 3 % over no security (MPL: 590 vs 574 s per simulated "
        "day), securing everything 107 % (1187 s): security chosen per connection costs nothing where off.",
    )
    section.csvs = [ctx.write_csv("6_mixed_security", rows)]
    section.tables.append(
        Table(
            f"Communication time of {p.mixed_messages} echoed {SIZE}-byte messages on each of {LINKS} "
            f"connections (median round trip x messages, best of {p.agent_rounds} interleaved rounds)",
            ["configuration", "paper (seed 003 Table 1)", "ours: time", "ours: cost over none secure"],
            [
                [
                    str(r["config"]),
                    PAPER[int(r["secure_links"])],
                    f"{r['seconds']:.2f} s",
                    f"{100 * r['cost_vs_none']:+.1f} %",
                ]
                for r in rows
            ],
        )
    )
    section.figures = [plot(ctx, rows)]
    section.checks = {"all secure costs more than one secure link": best[4] > best[1]}
    return section


def plot(ctx: Context, rows: list[dict[str, Any]]) -> str:
    fig, ax = new_figure(
        "Mixed security: cost against the share of secured connections",
        "secured connections (of 4)",
        "cost over none secure (%)",
    )
    ks = [int(r["secure_links"]) for r in rows]
    ax.plot(ks, [100 * float(r["cost_vs_none"]) for r in rows], "o-", label="ours: agents, mode 2 AEAD")
    ax.plot(
        [0, 1, 4],
        [0, 100 * (590 / 574 - 1), 100 * (1187 / 574 - 1)],
        "k--s",
        label="paper seed 003 Table 1 (MPL; coupler = 1 link)",
    )
    ax.set_xticks(ks)
    ax.legend(fontsize=8)
    return ctx.save(fig, "6_mixed_security")
