"""Traceback results from a run's events file: a table for people, JSON for machines, a picture.

Each ``traceback`` event is joined with the ``filter-installed`` and ``filter-flushed`` events of the
port it named, so one row says who was attacked, with which key, whom the packets claimed to come from,
where they really entered the fabric, and what SIF did about it.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from .events import read_events
from .topology import Topology

COLUMNS = (("time", "time"), ("victim", "victim"), ("bad key", "bad_key"), ("claimed source", "claimed"),
           ("traced host", "traced_host"), ("switch", "traced_switch"), ("port", "traced_port"),
           ("scheme", "scheme"), ("packets", "packets_needed"), ("filter", "filter"))


_FIELDS = ("victim", "bad_key", "claimed_source", "claimed_host", "traced_host", "traced_switch",
           "traced_port", "scheme", "packets_needed", "mf")


def tracebacks(events_file: Path) -> list[dict[str, Any]]:
    """One record per traceback event, with the filter that followed on the traced port."""
    rows: list[dict[str, Any]] = []
    open_rows: dict[tuple[str, int], dict[str, Any]] = {}
    for event in read_events(events_file):
        kind = event.get("event")
        if kind == "traceback":
            row: dict[str, Any] = {k: event.get(k) for k in _FIELDS}
            wall = float(event["wall"])
            row["wall"] = wall
            row["time"] = time.strftime("%H:%M:%S", time.localtime(wall)) + f".{int(wall * 1000) % 1000:03d}"
            row["claimed"] = event.get("claimed_host") or event.get("claimed_source")
            row["filter"] = "-"
            rows.append(row)
            open_rows[(row["traced_switch"], row["traced_port"])] = row
        elif kind in ("filter-installed", "filter-deduplicated", "filter-flushed"):
            found = open_rows.get((str(event.get("switch")), int(event.get("port", 0))))
            if found is None:
                continue
            row = found
            if kind == "filter-installed":
                row["filter"] = f"{event.get('mode')} in {event.get('latency_ms')} ms"
            elif kind == "filter-deduplicated" and row["filter"] == "-":
                row["filter"] = f"already {event.get('mode')}"
            elif kind == "filter-flushed":
                row["filter"] = f"{row['filter']}, flushed after {event.get('active_s')} s"
                del open_rows[(event["switch"], event["port"])]
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    """A plain text table, one line per traceback."""
    cells = [[title for title, _ in COLUMNS]] + [[str(r.get(key, "")) for _, key in COLUMNS] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(COLUMNS))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def draw(topo: Topology, row: dict[str, Any] | None, path: Path) -> None:
    """The fabric with the victim, the claimed source, the true attacker and the filtered port marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import networkx as nx

    graph = nx.Graph()
    for sw in topo.switches:
        graph.add_node(sw.name, kind="switch")
    for link in topo.links:
        graph.add_edge(link.a[0], link.b[0])
    for host in topo.hosts:
        graph.add_node(host.name, kind="host")
        graph.add_edge(host.name, host.switch, port=host.port)
    pos = _layout(topo, graph)
    colours = {}
    if row:
        colours = {row.get("claimed_host"): "orange", row.get("victim"): "tab:blue",
                   row.get("traced_host"): "tab:red"}
    fig, ax = plt.subplots(figsize=(max(7.5, 0.9 * len(topo.hosts) + 2.0), 5.0))
    nx.draw_networkx_edges(graph, pos, ax=ax, edge_color="0.7")
    if row and row.get("traced_host"):
        edge = [(row["traced_host"], row["traced_switch"])]
        nx.draw_networkx_edges(graph, pos, edgelist=edge, ax=ax, edge_color="tab:red", width=4)
        nx.draw_networkx_edge_labels(graph, pos, edge_labels={edge[0]: f"port {row['traced_port']}"}, ax=ax,
                                     font_size=8, font_color="tab:red")
    switches = [n for n, d in graph.nodes(data=True) if d["kind"] == "switch"]
    hosts = [n for n, d in graph.nodes(data=True) if d["kind"] == "host"]
    nx.draw_networkx_nodes(graph, pos, nodelist=switches, node_shape="s", node_color="0.85", ax=ax,
                           edgecolors="0.3")
    nx.draw_networkx_nodes(graph, pos, nodelist=hosts, ax=ax, edgecolors="0.3",
                           node_color=[colours.get(h, "white") for h in hosts])
    nx.draw_networkx_labels(graph, pos, ax=ax, font_size=8)
    title = f"{topo.name} ({topo.kind})"
    if row:
        title += (f"\n{row.get('victim')} got P_Key {row.get('bad_key')} claiming {row.get('claimed')}; "
                  f"traced to {row.get('traced_host')} at {row.get('traced_switch')} port "
                  f"{row.get('traced_port')} ({row.get('scheme')}, {row.get('packets_needed')} packet)")
        handles = [plt.Line2D([], [], marker="o", ls="", color=c, label=label) for c, label in
                   (("tab:red", "attacker (traced)"), ("tab:blue", "victim"), ("orange", "claimed source"))]
        handles.append(plt.Line2D([], [], color="tab:red", lw=4, label="filtered port"))
        ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8, frameon=False)
    ax.set_title(title, fontsize=9)
    ax.axis("off")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _layout(topo: Topology, graph: Any) -> dict[str, tuple[float, float]]:
    """Fat trees by level (leaves low, hosts below them); grids by coordinate (hosts beside)."""
    pos: dict[str, tuple[float, float]] = {}
    if topo.kind == "fat-tree":
        levels: dict[int, list[str]] = {}
        for sw in topo.switches:
            levels.setdefault(sw.level or 0, []).append(sw.name)
        width = max(len(topo.hosts), *(len(v) for v in levels.values()))
        for level, names in levels.items():
            for i, name in enumerate(names):
                pos[name] = ((i + 0.5) * width / len(names), float(level + 1))
        for i, host in enumerate(topo.hosts):
            pos[host.name] = (i + 0.5, 0.0)
        return pos
    for sw in topo.switches:
        coord = sw.coord or (0, 0)
        x = coord[0] + (0.4 * coord[2] if len(coord) > 2 else 0)
        y = (coord[1] if len(coord) > 1 else 0) + (0.4 * sum(coord[2:]) if len(coord) > 2 else 0)
        pos[sw.name] = (2.0 * x, 2.0 * y)
    for sw in topo.switches:
        for j, host in enumerate(topo.hosts_on(sw.name)):
            x, y = pos[sw.name]
            pos[host.name] = (x + 0.6 + 0.3 * j, y - 0.6)
    return pos
