"""`robot-rl eval-classifier`'s library: a reward classifier scored on new label episodes at its card's threshold
(the metrics table, calibration, the k-frame gate replayed per episode), the worst false positives and false
negatives as a PNG sheet, and eval.json.

Usage::

    loaded = load_classifier("runs/cls")                            # learners.rewards.classifier
    ev = evaluate_classifier(loaded, [Path("labels/pick-test")])
    ev.metrics["labels"]["precision"], ev.gate[0]["false_fires"]
    report = evaluate_classifier_dir(Path("runs/cls"), [Path("labels/pick-test")])   # + worst.png, eval.json
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from learners.rewards.classifier import LoadedClassifier, load_classifier
from learners.rewards.labels import LabelledFrames, image_shapes, load_labels
from learners.rewards.metrics import binary_metrics, calibration_table
from learners.rewards.reward_model import card_predicate
from learners.rewards.training import gate_table
from robot_rl.episodes import episode_paths, load_episode
from robot_rl.errors import ConfigError, EpisodeFileError


@dataclasses.dataclass
class Evaluation:
    """eval-classifier's result (also written as eval.json)."""

    metrics: dict[str, Any]
    calibration: list[dict[str, Any]]
    gate: list[dict[str, Any]]
    worst_false_positives: list[dict[str, Any]]
    worst_false_negatives: list[dict[str, Any]]
    probs: np.ndarray
    data: LabelledFrames

    def to_dict(self) -> dict[str, Any]:
        return {"metrics": self.metrics, "calibration": self.calibration, "gate_by_k": self.gate,
                "worst_false_positives": self.worst_false_positives,
                "worst_false_negatives": self.worst_false_negatives,
                "label_sources": self.data.sources()}


def check_label_files(loaded: LoadedClassifier, directories: Sequence[Path]) -> None:
    """ConfigError naming the first label file whose cameras or image size differ from the classifier's card."""
    for d in directories:
        try:
            paths = episode_paths(d)
        except EpisodeFileError as err:
            raise ConfigError(f"--labels {d}: {err}") from err
        if not paths:
            raise ConfigError(f"--labels {d}: no episode files (episode_*.npz)")
        try:
            ep = load_episode(paths[0])
        except EpisodeFileError as err:
            raise ConfigError(str(err)) from err
        loaded.check_cameras(image_shapes(ep), where=str(paths[0]))


def evaluate_classifier(loaded: LoadedClassifier, directories: Sequence[Path], worst: int = 8,
                        k_values: Sequence[int] = (1, 2, 3, 4, 5)) -> Evaluation:
    """Score every labelled frame of `directories` with the classifier; metrics at the card's threshold."""
    check_label_files(loaded, directories)
    data = load_labels(directories, loaded.card.cameras, require_both_classes=False)
    # load_labels checked every later file against the first one
    loaded.check_cameras({cam: data.images[cam].shape[1:] for cam in data.cameras}, where=data.episodes[0].path)
    probs = loaded.predict_proba(data.images)
    th = loaded.card.threshold
    y = data.labels
    metrics = {"labels": binary_metrics(probs, y, th)}
    pred = card_predicate(loaded.card)
    gate = gate_table(data, np.arange(len(data)), probs, th, pred, ks=k_values)

    def rows(idx: np.ndarray) -> list[dict[str, Any]]:
        return [{"file": data.episodes[int(data.episode[i])].path, "step": int(data.step[i]), "prob": float(probs[i]),
                 "label": bool(y[i]), "frame": int(i)} for i in idx]

    neg, pos = np.flatnonzero(~y), np.flatnonzero(y)
    worst_fp = neg[np.argsort(-probs[neg], kind="stable")][:worst]
    worst_fn = pos[np.argsort(probs[pos], kind="stable")][:worst]
    return Evaluation(metrics, calibration_table(probs, y), gate, rows(worst_fp), rows(worst_fn), probs, data)


def write_worst_sheet(ev: Evaluation, threshold: float, path: Path) -> Path:
    """A PNG sheet: the most confident negatives (false positives when p >= threshold) on the first row(s), the
    least confident positives (false negatives when p < threshold) below; cameras side by side per frame."""
    from robot_rl.extras import optional_import

    matplotlib = optional_import("matplotlib", extra="learn", purpose="the worst-frames sheet")
    matplotlib.use("Agg")
    plt = optional_import("matplotlib.pyplot", extra="learn")
    groups = [("false positive", "most confident negative", ev.worst_false_positives, lambda p: p >= threshold),
              ("false negative", "least confident positive", ev.worst_false_negatives, lambda p: p < threshold)]
    ncol = max(1, max(len(g[2]) for g in groups))
    fig, axes = plt.subplots(2, ncol, figsize=(3.2 * ncol, 4.4), squeeze=False)
    for r, (wrong, near, items, is_wrong) in enumerate(groups):
        for c in range(ncol):
            ax = axes[r][c]
            ax.axis("off")
            if c >= len(items):
                continue
            it = items[c]
            frame = np.concatenate([ev.data.images[cam][it["frame"]] for cam in ev.data.cameras], axis=1)
            ax.imshow(frame)
            kind = wrong if is_wrong(it["prob"]) else f"({near})"
            ax.set_title(f"{kind}\np={it['prob']:.3f} {Path(it['file']).name[8:14]} t{it['step']}", fontsize=7,
                         color="red" if is_wrong(it["prob"]) else "black")
    fig.suptitle(f"worst frames at threshold {threshold:.3f}: top false positives, bottom false negatives",
                 fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp.png")
    fig.savefig(tmp, dpi=110)
    plt.close(fig)
    tmp.replace(path)
    return path


@dataclasses.dataclass(frozen=True)
class EvaluationReport:
    """What `evaluate_classifier_dir` wrote and found."""

    evaluation: Evaluation
    loaded: LoadedClassifier
    out: Path
    """The directory of eval.json and worst.png."""
    sheet: Path
    """The worst-frames PNG."""


def evaluate_classifier_dir(classifier: Path, labels: Sequence[Path], out: Path | None = None, worst: int = 8,
                            ) -> EvaluationReport:
    """`robot-rl eval-classifier`: evaluate the classifier in directory `classifier` on `labels`; write
    OUT/worst.png and OUT/eval.json (OUT: `out`, else CLASSIFIER/eval-<first labels directory's name>)."""
    if worst < 1:
        raise ConfigError(f"--worst={worst} must be >= 1")
    loaded = load_classifier(classifier)
    ev = evaluate_classifier(loaded, labels, worst=worst)
    where = out if out is not None else classifier / f"eval-{Path(labels[0]).resolve().name}"
    where.mkdir(parents=True, exist_ok=True)
    sheet = write_worst_sheet(ev, loaded.card.threshold, where / "worst.png")
    (where / "eval.json").write_text(json.dumps({"classifier": str(classifier), **ev.to_dict()}, indent=1))
    return EvaluationReport(ev, loaded, where, sheet)
