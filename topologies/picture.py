"""The traceback picture: the fabric, who attacked, whom the packets claimed to be, and where SIF filtered.

Fat trees are drawn by level (hosts under their leaves), grids by coordinate (a 3-D mesh flattened
layer by layer), hypercubes as two squares. The true attacker and the traced port are red, the claimed
(spoofed) source is grey with a dashed outline, the victim blue, and the path the flood took bold.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import networkx as nx  # noqa: E402

from .fabrics import Fabric  # noqa: E402

Position = dict[str, tuple[float, float]]


@dataclass(frozen=True)
class TracebackView:
    attacker: str
    claimed: str | None
    victim: str
    traced_switch: str | None
    traced_port: int | None
    path: Sequence[str] = ()


def layout(fabric: Fabric) -> Position:
    """Node positions that show the fabric's structure."""
    graph = fabric.graph
    pos: Position = {}
    if fabric.kind == "fat-tree":
        by_level: dict[int, list[str]] = {}
        for name, data in graph.nodes(data=True):
            if data["role"] == "switch":
                by_level.setdefault(data["level"], []).append(name)
        for level, names in by_level.items():
            for i, name in enumerate(sorted(names)):
                pos[name] = (float(i) * 2 + 0.5, float(level + 1))
    else:
        for name, data in graph.nodes(data=True):
            if data["role"] == "switch":
                pos[name] = _grid_position(fabric.kind, data["coord"])
    hosts = sorted((n for n, d in graph.nodes(data=True) if d["role"] == "host"),
                   key=lambda n: graph.nodes[n]["index"])
    for name in hosts:
        (switch,) = graph[name]
        siblings = [h for h in hosts if switch in graph[h]]
        offset = (siblings.index(name) - (len(siblings) - 1) / 2) * 0.45
        x, y = pos[switch]
        pos[name] = (x + offset, y - 0.55) if fabric.kind == "fat-tree" else (x + 0.3 + offset, y - 0.3)
    return pos


def _grid_position(kind: str, coord: Sequence[int]) -> tuple[float, float]:
    if kind == "hypercube":
        x = coord[0] + 2.5 * (coord[2] if len(coord) > 2 else 0) + 0.6 * (coord[1] if len(coord) > 1 else 0)
        y = (coord[1] if len(coord) > 1 else 0) * 1.2 + 0.4 * (coord[2] if len(coord) > 2 else 0)
        return (x * 1.5, y * 1.5)
    layer = coord[2] if len(coord) > 2 else 0
    return (float(coord[0]) + layer * 0.35, float(coord[1] if len(coord) > 1 else 0) + layer * 5.0)


def draw(fabric: Fabric, view: TracebackView, path: Path, title: str) -> Path:
    """Write the picture to ``path`` (PNG)."""
    graph = fabric.graph
    pos = layout(fabric)
    fig, ax = plt.subplots(figsize=(11, 7))
    switches = [n for n, d in graph.nodes(data=True) if d["role"] == "switch"]
    hosts = [n for n, d in graph.nodes(data=True) if d["role"] == "host"]
    flood_edges = set(zip(view.path, view.path[1:], strict=False))
    on_path = [e for e in graph.edges if e in flood_edges or e[::-1] in flood_edges]
    nx.draw_networkx_edges(graph, pos, ax=ax, edge_color="#bbbbbb", width=1.0)
    nx.draw_networkx_edges(graph, pos, edgelist=on_path, ax=ax, edge_color="#d62728", width=3.0)
    nx.draw_networkx_nodes(graph, pos, nodelist=switches, ax=ax, node_shape="s", node_color="#dddddd",
                           edgecolors="#555555", node_size=650)
    colours = {view.attacker: "#d62728", view.victim: "#1f77b4"}
    nx.draw_networkx_nodes(graph, pos, nodelist=hosts, ax=ax, edgecolors="#333333", node_size=380,
                           node_color=[colours.get(h, "#ffffff") for h in hosts])
    if view.claimed and view.claimed in pos:
        nx.draw_networkx_nodes(graph, pos, nodelist=[view.claimed], ax=ax, node_color="#aaaaaa",
                               edgecolors="#333333", linewidths=2.0, node_size=380).set_linestyle("--")
    nx.draw_networkx_labels(graph, pos, ax=ax, font_size=7)
    if view.traced_switch and view.traced_switch in pos:
        x, y = pos[view.traced_switch]
        ax.annotate(f"traced to {view.traced_switch} port {view.traced_port}", (x, y), (x + 0.4, y + 0.35),
                    color="#d62728", fontsize=9, arrowprops={"arrowstyle": "->", "color": "#d62728"})
    handles = [plt.Line2D([], [], marker="o", ls="", color=c, markeredgecolor="#333333", label=label)
               for c, label in (("#d62728", f"true attacker {view.attacker}"),
                                ("#aaaaaa", f"claimed source {view.claimed or '-'}"),
                                ("#1f77b4", f"victim {view.victim}"))]
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    ax.set_title(title, fontsize=10)
    ax.axis("off")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
