"""`robot-rl train-classifier` and `robot-rl eval-classifier`: reward classifiers from `record-labels` episodes.

train-classifier: loads the label directories, splits them by episode, trains the per-camera encoders + head with
augmentation, class weighting and early stopping, picks the threshold on the validation split for
`--target-precision`, prints the metrics table (precision / recall / false positives per 1,000 frames / ROC-AUC
at that threshold), the calibration table and the k-gate replay, and writes `--out` (model.safetensors +
card.json). See learners.rewards.training for the recipe.

eval-classifier: the same tables on new labels at the card's threshold, plus a PNG sheet of the worst false
positives and false negatives (`worst.png`) and `eval.json`, in `--out` (default: DIR/eval-<labels name>).

Usage::

    robot-rl record-labels --task twin-pick-cube --teleop scripted --out labels/pick --frames 3000 --image-size 64
    robot-rl train-classifier --labels labels/pick --out runs/cls
    robot-rl eval-classifier --classifier runs/cls --labels labels/pick-test
    robot-rl train --task twin-pick-cube --reward classifier:runs/cls ...
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from learners.rewards.classifier import CLASSIFIER_ENCODERS, ClassifierModelConfig, LoadedClassifier, load_classifier
from learners.rewards.labels import LabelledFrames, image_shapes, load_labels
from learners.rewards.metrics import binary_metrics, calibration_table
from learners.rewards.reward_model import ProprioPredicate
from learners.rewards.training import TrainClassifierConfig, gate_table, report_text, train_classifier
from robot_rl.episodes import episode_paths, load_episode
from robot_rl.errors import ConfigError, EpisodeFileError


def build_train_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="robot-rl train-classifier", description=__doc__.split("\n\n")[0])
    p.add_argument("--labels", required=True, nargs="+", type=Path, help="label episode directories (record-labels)")
    p.add_argument("--out", required=True, type=Path, help="classifier directory to write (must not exist)")
    p.add_argument("--cameras", default="", help="comma-separated observation paths, e.g. images/front "
                                                 "(default: every camera in the labels)")
    d = TrainClassifierConfig()
    m = ClassifierModelConfig()
    p.add_argument("--encoder", default=m.encoder, choices=CLASSIFIER_ENCODERS, help="per-camera backbone")
    p.add_argument("--encoder-weights", default=None, help="local safetensors file of ResNet-10 weights (resnet10)")
    p.add_argument("--conv-channels", default=",".join(map(str, m.conv_channels)),
                   help="conv backbone channels per layer")
    p.add_argument("--latent", type=int, default=m.image_latent_dim, help="per-camera feature size")
    p.add_argument("--target-precision", type=float, default=d.target_precision,
                   help="the threshold is the lowest with this precision on the validation split")
    p.add_argument("--precision-confidence", type=float, default=d.precision_confidence,
                   help="the precision's lower confidence bound must reach the target too (0: point estimate)")
    p.add_argument("--min-threshold", type=float, default=d.min_threshold,
                   help="floor on the chosen threshold (0: none)")
    p.add_argument("--val-fraction", type=float, default=d.val_fraction, help="share of episodes for validation")
    p.add_argument("--min-episodes", type=int, default=d.min_episodes, help="episodes each split needs at least")
    p.add_argument("--max-steps", type=int, default=d.max_steps, help="gradient steps at most")
    p.add_argument("--batch-size", type=int, default=d.batch_size)
    p.add_argument("--lr", type=float, default=d.lr, help="Adam learning rate")
    p.add_argument("--eval-every", type=int, default=d.eval_every, help="validation every N steps")
    p.add_argument("--patience", type=int, default=d.patience, help="early stop after N validations w/o progress")
    p.add_argument("--shift-pad", type=int, default=None, help="random-shift pad in pixels (default: 4 per 128)")
    p.add_argument("--jitter", type=float, default=d.jitter, help="colour jitter strength (0: off)")
    p.add_argument("--no-class-weighting", action="store_true", help="unweighted loss")
    p.add_argument("--gate-k", type=int, default=d.gate_k, help="run-time gate: consecutive positive frames")
    p.add_argument("--predicate", default=d.predicate,
                   help="run-time proprio predicate: auto (the task's), none, or e.g. 'state[12]>=0.01,state[2]>=-0.2'")
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--threads", type=int, default=d.threads, help="torch CPU threads")
    p.add_argument("--device", default=d.device, help="cpu, cuda[:N] or auto")
    return p


def _ints(text: str, flag: str) -> tuple[int, ...]:
    try:
        return tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError as err:
        raise ConfigError(f"{flag} {text!r}: expected comma-separated integers") from err


def main(argv: list[str]) -> int:
    """`robot-rl train-classifier`."""
    args = build_train_parser().parse_args(argv)
    model = ClassifierModelConfig(encoder=args.encoder, encoder_weights=args.encoder_weights,
                                  conv_channels=_ints(args.conv_channels, "--conv-channels"),
                                  image_latent_dim=args.latent)
    cfg = TrainClassifierConfig(
        cameras=tuple(c.strip() for c in args.cameras.split(",") if c.strip()), model=model,
        val_fraction=args.val_fraction, min_episodes=args.min_episodes, target_precision=args.target_precision,
        precision_confidence=args.precision_confidence, min_threshold=args.min_threshold,
        batch_size=args.batch_size, lr=args.lr, max_steps=args.max_steps, eval_every=args.eval_every,
        patience=args.patience, shift_pad=args.shift_pad, jitter=args.jitter,
        class_weighting=not args.no_class_weighting, gate_k=args.gate_k, predicate=args.predicate, seed=args.seed,
        threads=args.threads, device=args.device)
    result = train_classifier(cfg, args.labels, args.out, log=lambda s: print(s, flush=True))
    v = result.card.metrics["validation"]
    print(json.dumps({"out": str(args.out), "threshold": result.card.threshold, "precision": v["precision"],
                      "recall": v["recall"], "fp_per_1000": v["fp_per_1000"], "roc_auc": v["roc_auc"],
                      "train_seconds": round(result.card.training["seconds"], 1)}))
    return 0


# --------------------------------------------------------------------------------------------------- evaluation


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
    pred = ProprioPredicate(tuple(loaded.card.gate.get("predicate", ())))
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


def build_eval_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="robot-rl eval-classifier",
                                description="Evaluate a reward classifier on new labels: metrics, calibration, "
                                            "worst false positives / negatives.")
    p.add_argument("--classifier", required=True, type=Path, help="classifier directory (train-classifier --out)")
    p.add_argument("--labels", required=True, nargs="+", type=Path, help="label episode directories")
    p.add_argument("--out", type=Path, default=None, help="where eval.json and worst.png go "
                                                          "(default: CLASSIFIER/eval-<first labels dir name>)")
    p.add_argument("--worst", type=int, default=8, help="frames per row of the worst-frames sheet")
    return p


def eval_main(argv: list[str]) -> int:
    """`robot-rl eval-classifier`."""
    args = build_eval_parser().parse_args(argv)
    if args.worst < 1:
        raise ConfigError(f"--worst={args.worst} must be >= 1")
    loaded = load_classifier(args.classifier)
    ev = evaluate_classifier(loaded, args.labels, worst=args.worst)
    out = args.out if args.out is not None else args.classifier / f"eval-{Path(args.labels[0]).resolve().name}"
    out.mkdir(parents=True, exist_ok=True)
    sheet = write_worst_sheet(ev, loaded.card.threshold, out / "worst.png")
    (out / "eval.json").write_text(json.dumps({"classifier": str(args.classifier), **ev.to_dict()}, indent=1))
    print(report_text(loaded.card, ev.metrics, ev.calibration, ev.gate))
    m = ev.metrics["labels"]
    print(f"[eval-classifier] {m['frames']} frames from {len(ev.data.episodes)} episodes: {m['fp']} false positive(s), "
          f"{m['fn']} false negative(s); worst frames: {sheet}; results: {out / 'eval.json'}", file=sys.stderr)
    print(json.dumps({"precision": m["precision"], "recall": m["recall"], "fp_per_1000": m["fp_per_1000"],
                      "roc_auc": m["roc_auc"], "out": str(out)}))
    return 0
