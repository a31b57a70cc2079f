"""The scale benchmark's PNG: one panel per metric against partitions (log x), and the connections panel.

matplotlib (the ``dev`` extra) draws with its Agg backend, chosen before pyplot is imported, so
no display is needed.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # after use(): the backend must be chosen first

#: (panel title, y label, [(figure key, line label)]) against partitions.
PARTITION_PANELS: tuple[tuple[str, str, tuple[tuple[str, str], ...]], ...] = (
    ("Produce, acks=all, fixed records", "records/s", (("produce_rps", "records/s"),)),
    (
        "Node memory (RSS), idle",
        "MB",
        (("rss_total_mb", "3 nodes, summed"), ("rss_max_node_mb", "largest node"), ("rss_loaded_mb", "after produce")),
    ),
    (
        "Start-up of one node",
        "s",
        (
            ("clean_serve_s", "after SIGTERM: serves"),
            ("clean_leaders_s", "after SIGTERM: all led"),
            ("unclean_serve_s", "after SIGKILL: serves"),
            ("unclean_leaders_s", "after SIGKILL: all led"),
        ),
    ),
    (
        "Controller failover (SIGKILL)",
        "s",
        (("failover_controller_s", "new controller named"), ("failover_leaders_s", "every partition led")),
    ),
    ("Metadata, all topics", "ms", (("metadata_p50_ms", "p50"), ("metadata_p99_ms", "p99"))),
)


def _series(steps: Sequence[dict[str, Any]], key: str) -> tuple[list[float], list[float]]:
    xs, ys = [], []
    for step in steps:
        value = step["figures"].get(key)
        if value is not None:
            xs.append(step["partitions"])
            ys.append(value)
    return xs, ys


def draw(
    path: Path,
    partition_steps: Sequence[dict[str, Any]],
    connection_steps: Sequence[dict[str, Any]],
    *,
    title: str,
    failover_goal_s: float,
) -> None:
    """Write the PNG to ``path``: ``partition_steps`` (each with ``partitions`` and ``figures``) and
    ``connection_steps`` (each with ``connections`` and ``figures``), as the report's JSON holds them."""
    fig, axes = plt.subplots(2, 3, figsize=(16, 9), constrained_layout=True)
    for ax, (panel, unit, lines) in zip(axes.flat, PARTITION_PANELS, strict=False):
        for key, label in lines:
            xs, ys = _series(partition_steps, key)
            if xs:
                ax.plot(xs, ys, marker="o", label=label)
        if panel.startswith("Controller failover"):
            ax.axhline(failover_goal_s, color="red", linestyle="--", linewidth=1, label=f"goal < {failover_goal_s:g} s")
        ax.set_xscale("log")
        ax.set_title(panel)
        ax.set_xlabel("partitions (site)")
        ax.set_ylabel(unit)
        ax.grid(True, which="both", alpha=0.3)
        if ax.get_legend_handles_labels()[0]:  # a panel with nothing measured has no legend
            ax.legend(fontsize="small")
    ax = axes.flat[5]
    counts = [s["connections"] for s in connection_steps]
    ax.plot(counts, [s["figures"].get("rss_node_mb") for s in connection_steps], marker="o", label="node RSS (MB)")
    ax.set_xscale("symlog", linthresh=10)
    ax.set_xlabel("idle connections to the node")
    ax.set_ylabel("MB")
    ax.set_title("Idle connections: memory and produce latency")
    ax.grid(True, which="both", alpha=0.3)
    latency = ax.twinx()
    for key, label, style in (
        ("latency_p50_ms", "latency p50 (ms)", "s--"),
        ("latency_p99_ms", "latency p99 (ms)", "^--"),
    ):
        latency.plot(counts, [s["figures"].get(key) for s in connection_steps], style, label=label)
    latency.set_ylabel("ms")
    handles = ax.get_legend_handles_labels()
    more = latency.get_legend_handles_labels()
    ax.legend(handles[0] + more[0], handles[1] + more[1], fontsize="small")
    fig.suptitle(title)
    fig.savefig(path, dpi=90)
    plt.close(fig)
