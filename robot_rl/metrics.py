"""Run metrics: an append-only JSON-lines log and the learning-curve plot.

Usage::

    log = MetricsLog(out / "metrics.jsonl")
    log.write({"env_step": 1000, "success_rate": 0.4, "return": 0.4})
    rows = read_metrics(out / "metrics.jsonl")        # skips a torn last line after a crash
    plot_learning_curve(rows, out / "learning_curve.png", title="twin-reach")
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from robot_rl.extras import optional_import


def _jsonable(v: Any) -> Any:
    if hasattr(v, "item"):
        v = v.item()
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


class MetricsLog:
    """Appends one JSON object per line to a file; each line is flushed (readable while the run goes on)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def write(self, row: Mapping[str, Any]) -> None:
        line = json.dumps({k: _jsonable(v) for k, v in row.items()})
        with open(self.path, "a") as f:
            f.write(line + "\n")


def read_metrics(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """All complete rows of a metrics file (a torn or garbled line is skipped)."""
    rows: list[dict[str, Any]] = []
    p = Path(path)
    if not p.exists():
        return rows
    for line in p.read_text().splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if isinstance(row, dict):
            rows.append(row)
    return rows


def plot_learning_curve(
    rows: Iterable[Mapping[str, Any]],
    path: str | os.PathLike[str],
    x: str = "env_step",
    ys: tuple[str, ...] = ("success_rate", "return"),
    title: str = "",
) -> Path:
    """Plot `ys` against `x` (rows lacking a key are skipped per series) to a PNG; returns the path."""
    matplotlib = optional_import("matplotlib", extra="sim", purpose="learning-curve plots")
    matplotlib.use("Agg")
    plt = optional_import("matplotlib.pyplot", extra="sim")
    data = list(rows)
    fig, axes = plt.subplots(1, len(ys), figsize=(5 * len(ys), 3.5), squeeze=False)
    for ax, key in zip(axes[0], ys, strict=True):
        pts = [(r[x], r[key]) for r in data if r.get(x) is not None and r.get(key) is not None]
        if pts:
            xs, vs = zip(*pts, strict=True)
            ax.plot(xs, vs, marker="o", markersize=3)
        ax.set_xlabel(x)
        ax.set_ylabel(key)
        ax.grid(alpha=0.3)
        if key == "success_rate":
            ax.set_ylim(-0.05, 1.05)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp.png")
    fig.savefig(tmp, dpi=100)
    plt.close(fig)
    tmp.replace(out)
    return out
