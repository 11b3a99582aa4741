"""What the distributed learner reports, and where: per-actor records, the live status (``status.json``), metrics
rows (``metrics.jsonl`` and TensorBoard scalars) and the learning-curve plot. No learning logic here:
`learners.distributed.learner.Learner` fills these in and decides when to write them.

Files in the learner's run directory ``OUT``: ``status.json`` (rewritten atomically; `robot-rl sim` renders it),
``metrics.jsonl`` (robot_rl.metrics rows), ``tensorboard/`` (when enabled and tensorboard is installed; skipped
with a warning otherwise), ``learning_curve.png`` (when matplotlib is installed).

Usage::

    outputs = LearnerOutputs(out_dir, title="twin-reach (learner)", tensorboard=True)
    rec = ActorRecord.new(window=20)                    # one per actor id; checkpointed via to_json/from_json
    rec.successes.append(1.0)
    outputs.write_status({"env_step": 10, "actors": {"actor-0": actor_status(rec, peer=None)}})
    means = UpdateMeans(); means.add({"critic_loss": 0.5}); means.pop()   # {"critic_loss": 0.5}
    outputs.write_metrics({"env_step": 10, "success_rate": 1.0})        # metrics.jsonl + TensorBoard
    outputs.plot()                                                      # learning_curve.png
    outputs.close()
"""

from __future__ import annotations

import collections
import dataclasses
import json
import logging
import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from robot_rl.metrics import MetricsLog, plot_learning_curve, read_metrics
from robot_rl.run_dir import METRICS_FILE, tensorboard_dir
from robot_rl.transport import PeerStats

log = logging.getLogger("robot_rl.learner")


@dataclasses.dataclass
class ActorRecord:
    """What the learner knows about one actor (survives restarts through checkpoints)."""

    transitions: int = 0
    episodes: int = 0
    duplicates: int = 0
    successes: collections.deque[float] = dataclasses.field(default_factory=lambda: collections.deque(maxlen=20))
    returns: collections.deque[float] = dataclasses.field(default_factory=lambda: collections.deque(maxlen=20))
    interventions: int = 0
    last_seen: float = -math.inf
    rejected: int = 0

    @classmethod
    def new(cls, window: int) -> ActorRecord:
        """An empty record whose rolling success / return windows hold `window` episodes."""
        return cls(successes=collections.deque(maxlen=window), returns=collections.deque(maxlen=window))

    def to_json(self) -> dict[str, Any]:
        return {"transitions": self.transitions, "episodes": self.episodes, "duplicates": self.duplicates,
                "successes": list(self.successes), "returns": list(self.returns),
                "interventions": self.interventions}

    @classmethod
    def from_json(cls, d: Mapping[str, Any], window: int) -> ActorRecord:
        rec = cls(int(d.get("transitions", 0)), int(d.get("episodes", 0)), int(d.get("duplicates", 0)),
                  collections.deque((float(x) for x in d.get("successes", [])), maxlen=window),
                  collections.deque((float(x) for x in d.get("returns", [])), maxlen=window),
                  int(d.get("interventions", 0)))
        return rec


def mean_or_none(values: Iterable[float]) -> float | None:
    """The mean of `values`, or None when there are none (shown as '-' / null)."""
    vals = list(values)
    return float(np.mean(vals)) if vals else None


def actor_status(rec: ActorRecord, peer: PeerStats | None) -> dict[str, Any]:
    """One actor's entry in status.json: the learner's record of it plus what its endpoint peer reports (None:
    the endpoint has not seen it in this process, e.g. right after a restart)."""
    reported = dict(peer.reported) if peer is not None else {}
    return {
        "alive": bool(peer.alive) if peer is not None else False,
        "transitions": rec.transitions, "episodes": rec.episodes,
        "success_rate": mean_or_none(rec.successes), "return": mean_or_none(rec.returns),
        "interventions": rec.interventions, "duplicates": rec.duplicates + (peer.duplicates if peer else 0),
        "rejected": rec.rejected,
        "weights_version": peer.weights_version if peer is not None else -1,
        "session": peer.session if peer is not None else "",
        "acked_upto": peer.acked_upto if peer is not None else -1,
        "last_seen_s": None if peer is None else round(peer.last_seen_age_s, 2),
        "intervention_rate": reported.get("intervention_rate"),
        "operator_scene_resets": reported.get("operator_scene_resets"),
        "env_steps_per_s": reported.get("env_steps_per_s"),
        "paused": reported.get("paused"),
    }


class UpdateMeans:
    """Sums of the agent's update metrics (losses, temperature, ...) between two metrics rows."""

    def __init__(self) -> None:
        self._sums: dict[str, float] = {}
        self._n = 0

    def add(self, metrics: Mapping[str, Any]) -> None:
        for k, v in metrics.items():
            self._sums[k] = self._sums.get(k, 0.0) + float(v)
        self._n += 1

    def pop(self) -> dict[str, float]:
        """The means since the last pop ({} when no update happened), and start over."""
        means = {k: v / self._n for k, v in self._sums.items()} if self._n else {}
        self._sums, self._n = {}, 0
        return means


def write_json_atomic(path: Path, data: Mapping[str, Any]) -> None:
    """Write `data` as JSON to `path` through a temp file and a rename (readers never see half a file)."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, indent=1, default=float))
    tmp.replace(path)


class LearnerOutputs:
    """The learner's report files in `out`: status.json, metrics.jsonl, TensorBoard scalars, learning_curve.png."""

    def __init__(self, out: Path, title: str, tensorboard: bool = True) -> None:
        self.out = Path(out)
        self.title = title
        self.metrics_log = MetricsLog(self.out / METRICS_FILE)
        self._tb: Any = None
        self._tb_failed = not tensorboard

    def write_status(self, status: Mapping[str, Any]) -> None:
        write_json_atomic(self.out / "status.json", status)

    def write_metrics(self, row: Mapping[str, Any]) -> None:
        """Append `row` to metrics.jsonl and its finite numbers (but env_step, the x axis) to TensorBoard."""
        self.metrics_log.write(row)
        self._tensorboard(row)

    def _tensorboard(self, row: Mapping[str, Any]) -> None:
        if self._tb_failed:
            return
        if self._tb is None:
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError as err:
                from robot_rl.extras import install_hint

                log.warning("learner: TensorBoard logging off (%s); install it with %s", err, install_hint("learn"))
                self._tb_failed = True
                return
            self._tb = SummaryWriter(str(tensorboard_dir(self.out)))
        step = int(row["env_step"])
        for k, v in row.items():
            if k != "env_step" and isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v):
                self._tb.add_scalar(k, v, step)
        self._tb.flush()

    def plot(self) -> Path | None:
        """Redraw learning_curve.png from metrics.jsonl (None when matplotlib is missing)."""
        try:
            return plot_learning_curve(read_metrics(self.out / METRICS_FILE), self.out / "learning_curve.png",
                                       title=self.title)
        except ImportError as err:
            log.warning("learner: no learning-curve plot (%s)", err)
            return None

    def close(self) -> None:
        """Close the TensorBoard writer (the other files are complete after every write)."""
        if self._tb is not None:
            self._tb.close()
            self._tb = None
