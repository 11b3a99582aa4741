"""`robot-rl eval-classifier`: a reward classifier's metrics table, calibration and k-gate replay on new label
episodes at its card's threshold, plus a PNG sheet of the worst false positives and false negatives (`worst.png`)
and `eval.json`, in `--out` (default: CLASSIFIER/eval-<labels name>). The library is learners.rewards.evaluation.

Usage::

    robot-rl train-classifier --labels labels/pick --out runs/cls
    robot-rl eval-classifier --classifier runs/cls --labels labels/pick-test
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from learners.rewards.evaluation import evaluate_classifier_dir
from learners.rewards.training import report_text


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="robot-rl eval-classifier",
                                description="Evaluate a reward classifier on new labels: metrics, calibration, "
                                            "worst false positives / negatives.")
    p.add_argument("--classifier", required=True, type=Path, help="classifier directory (train-classifier --out)")
    p.add_argument("--labels", required=True, nargs="+", type=Path, help="label episode directories")
    p.add_argument("--out", type=Path, default=None, help="where eval.json and worst.png go "
                                                          "(default: CLASSIFIER/eval-<first labels dir name>)")
    p.add_argument("--worst", type=int, default=8, help="frames per row of the worst-frames sheet")
    return p


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    report = evaluate_classifier_dir(args.classifier, args.labels, out=args.out, worst=args.worst)
    ev = report.evaluation
    print(report_text(report.loaded.card, ev.metrics, ev.calibration, ev.gate))
    m = ev.metrics["labels"]
    print(f"[eval-classifier] {m['frames']} frames from {len(ev.data.episodes)} episodes: {m['fp']} false positive(s), "
          f"{m['fn']} false negative(s); worst frames: {report.sheet}; results: {report.out / 'eval.json'}",
          file=sys.stderr)
    print(json.dumps({"precision": m["precision"], "recall": m["recall"], "fp_per_1000": m["fp_per_1000"],
                      "roc_auc": m["roc_auc"], "out": str(report.out)}))
    return 0
