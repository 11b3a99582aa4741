"""`robot-rl train-classifier`: a reward classifier from `record-labels` episodes (learners.rewards.training).

Loads the label directories, splits them by episode, trains the per-camera encoders + head with augmentation,
class weighting and early stopping, picks the threshold on the validation split for `--target-precision`, prints
the metrics table (precision / recall / false positives per 1,000 frames / ROC-AUC at that threshold), the
calibration table and the k-gate replay, and writes `--out` (model.safetensors + card.json). See
learners.rewards.training for the recipe; `robot-rl eval-classifier` (learners.cli.eval_classifier) scores a
classifier on new labels.

Usage::

    robot-rl record-labels --task twin-pick-cube --teleop scripted --out labels/pick --frames 3000 --image-size 64
    robot-rl train-classifier --labels labels/pick --out runs/cls
    robot-rl eval-classifier --classifier runs/cls --labels labels/pick-test
    robot-rl train --task twin-pick-cube --reward classifier:runs/cls ...
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from learners.rewards.classifier import CLASSIFIER_ENCODERS, ClassifierModelConfig, classifier_encoder
from learners.rewards.training import TrainClassifierConfig, train_classifier
from robot_rl.errors import ConfigError


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="robot-rl train-classifier", description=__doc__.split("\n\n")[0])
    p.add_argument("--labels", required=True, nargs="+", type=Path, help="label episode directories (record-labels)")
    p.add_argument("--out", required=True, type=Path, help="classifier directory to write (must not exist)")
    p.add_argument("--cameras", default="", help="comma-separated observation paths, e.g. images/front "
                                                 "(default: every camera in the labels)")
    d = TrainClassifierConfig()
    m = ClassifierModelConfig()
    p.add_argument("--encoder", default=None, choices=CLASSIFIER_ENCODERS,
                   help=f"per-camera backbone (default: {m.encoder}, or the architecture --encoder-weights names)")
    p.add_argument("--encoder-weights", default=None,
                   help="local weights file of a ResNet (resnet10, resnet18; robot-rl convert-encoder writes one)")
    p.add_argument("--conv-channels", default=",".join(map(str, m.conv_channels)),
                   help="conv backbone channels per layer")
    p.add_argument("--conv-strides", default=None,
                   help="conv backbone stride per layer (default: 1 for the first layer, 2 after)")
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
    args = build_parser().parse_args(argv)
    model = ClassifierModelConfig(encoder=classifier_encoder(args.encoder, args.encoder_weights),
                                  encoder_weights=args.encoder_weights,
                                  conv_channels=_ints(args.conv_channels, "--conv-channels"),
                                  conv_strides=None if args.conv_strides is None
                                  else _ints(args.conv_strides, "--conv-strides"),
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
