"""Reward classifier on the twin: labels recorded with the scripted device (expert segments with back-out
negatives + near misses: cube lifted ~1.5 cm then dropped, fingers closed beside the cube, cube pushed), a
classifier trained on them, evaluated on held-out episodes (other seeds), at 64x64 and at 128x128 from the two
twin cameras. Goal: precision >= 0.99 at recall >= 0.9 on the held-out frames. Training time on this CPU.

Per image size:
1. `robot-rl record-labels --task twin-pick-cube --teleop scripted` (hold 8 success frames, then back out; one
   near-miss segment after each expert segment): training labels (seeds 20000..) and held-out labels (seeds
   90000..), the same trajectories at both sizes;
2. `train-classifier` defaults (small conv net per camera, split by episode, shift + colour jitter, class
   weighting, early stopping, threshold for precision 0.99 at 90 % confidence on the validation split), one
   torch thread;
3. the held-out labels at the card's threshold: precision, recall, false positives per 1,000 frames, ROC-AUC,
   calibration, false positives per near-miss kind; the k-consecutive-frames gate replayed over the held-out
   episodes (with and without the proprio predicate);
4. the gate on live twin episodes (the run-time reward model's view: per frame the classifier's probability,
   the predicate and the TRUE success): 30 scripted-expert episodes, 30 near-miss episodes (10 per kind) and
   30 noisy-expert episodes (action noise 0.5: some succeed, some fail). For k = 1..4: episodes the gate would
   end without true success (false ends), successful episodes it never ends (misses), and the delay after the
   true success. This is the measurement behind learners.rewards.reward_model.DEFAULT_GATE_K.

Run: `nice -n 10 python benchmarks/classifier.py [--sizes 64 128] [--quick]`. Writes
benchmarks/results/classifier.json (+ prints the tables). Label files go to --work (default: a temp dir).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import platform
import shutil
import time
from pathlib import Path
from typing import Any

from _prelude import (
    RESULTS,
    add_work_dir,
    bench_parser,
    load_average,
    result_name,
    set_env_defaults,
    work_dir,
    write_json,
)

set_env_defaults(one_thread=True)  # before numpy: its BLAS reads the thread count when it loads

import numpy as np  # noqa: E402

TASK = "twin-pick-cube"
KS = (1, 2, 3, 4)


def record(out: Path, frames: int, size: int, seed: int) -> dict[str, Any]:
    from demos.recording.labels import parse_record_labels_args, record_labels

    t0 = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()) as buf:
        rc = record_labels(parse_record_labels_args(["--task", TASK, "--out", str(out), "--frames", str(frames),
                                                     "--image-size", str(size), "--hold-steps", "8",
                                                     "--seed", str(seed)]))
    if rc != 0:
        raise RuntimeError(f"record-labels failed:\n{buf.getvalue()}")
    return {"seconds": time.perf_counter() - t0, "summary": buf.getvalue().strip().splitlines()[-1]}


def per_kind_false_positives(ev: Any, threshold: float) -> dict[str, Any]:
    """Frames called positive among the negatives of each segment kind (expert back-outs, each near miss)."""
    data, probs = ev.data, ev.probs
    out = {}
    for kind in sorted({e.segment for e in data.episodes}):
        eps = [i for i, e in enumerate(data.episodes) if e.segment == kind]
        m = np.isin(data.episode, eps) & ~data.labels
        out[kind] = {"episodes": len(eps), "negative_frames": int(m.sum()),
                     "false_positives": int((probs[m] >= threshold).sum())}
    return out


def live_episodes(size: int, classifier_dir: Path, episodes: int, seed0: int = 70_000) -> list[dict[str, Any]]:
    """Twin episodes (expert / near miss / noisy expert): per frame the classifier's probability, the proprio
    predicate and the TRUE success; the env does not end episodes on success (the expert keeps holding)."""
    from envs.presets import make_env
    from envs.twin.experts import ScriptedExpert
    from envs.twin.near_miss import NEAR_MISS_KINDS, NearMissOperator
    from learners.rewards.classifier import load_classifier
    from learners.rewards.reward_model import ClassifierReward

    loaded = load_classifier(classifier_dir)
    model = ClassifierReward(loaded)
    env = make_env(TASK, image_size=size, terminate_on_success=False)
    out = []
    try:
        plans: list[tuple[str, Any]] = []
        for i in range(episodes):
            plans.append(("expert", ScriptedExpert(TASK, seed=i)))
        for i in range(episodes):
            kind = NEAR_MISS_KINDS[i % len(NEAR_MISS_KINDS)]
            plans.append((f"near-miss:{kind}", NearMissOperator(kind, seed=i)))
        for i in range(episodes):
            plans.append(("noisy-expert", ScriptedExpert(TASK, noise_std=0.5, seed=1000 + i)))
        for j, (kind, driver) in enumerate(plans):
            obs, _ = env.reset(seed=seed0 + j)
            driver.reset()
            probs, pred, true = [], [], []
            for _ in range(100):
                state = env.unwrapped.last_state
                action = driver.poll(state).action() if isinstance(driver, NearMissOperator) else driver.act(state)
                obs, _, terminated, truncated, info = env.step(action)
                probs.append(model.prob(obs))
                pred.append(model.predicate(obs))
                true.append(bool(info["success"]))
                if terminated or truncated or getattr(driver, "done", False):
                    break
            out.append({"kind": kind, "probs": np.array(probs), "pred": np.array(pred), "true": np.array(true)})
    finally:
        env.close()
    return out


def live_gate_table(eps: list[dict[str, Any]], threshold: float, use_predicate: bool) -> list[dict[str, Any]]:
    from learners.rewards.metrics import first_gated_index

    rows = []
    for k in KS:
        false_ends, misses, delays, fired, early, in_failed = 0, 0, [], 0, [], 0
        by_kind: dict[str, int] = {}
        for e in eps:
            idx = first_gated_index(e["probs"] >= threshold, k, e["pred"] if use_predicate else None)
            succeeded = bool(e["true"].any())
            if idx is not None:
                fired += 1
                if not e["true"][idx]:
                    false_ends += 1
                    by_kind[e["kind"]] = by_kind.get(e["kind"], 0) + 1
                    if succeeded:  # ended before (or between) the episode's true successes: steps to the next one
                        later = np.flatnonzero(e["true"][idx:])
                        early.append(int(later[0]) if later.size else -1)
                    else:
                        in_failed += 1
                else:
                    delays.append(idx - int(np.flatnonzero(e["true"])[0]))
            elif succeeded:
                misses += 1
        rows.append({"k": k, "episodes": len(eps), "true_success_episodes": sum(bool(e["true"].any()) for e in eps),
                     "fired": fired, "false_ends": false_ends, "false_ends_by_kind": by_kind,
                     "false_ends_in_failed_episodes": in_failed, "false_ends_steps_before_true_success": early,
                     "misses": misses,
                     "delay_steps_mean": float(np.mean(delays)) if delays else float("nan"),
                     "delay_steps_max": int(max(delays)) if delays else None})
    return rows


def run_size(size: int, work: Path, args: argparse.Namespace) -> dict[str, Any]:
    import torch

    from learners.rewards.classifier import ClassifierModelConfig, load_classifier
    from learners.rewards.evaluation import evaluate_classifier
    from learners.rewards.reward_model import ProprioPredicate
    from learners.rewards.training import TrainClassifierConfig, gate_table, train_classifier

    torch.set_num_threads(1)
    train_dir, test_dir, cls_dir = work / f"train{size}", work / f"test{size}", work / f"cls{size}"
    rec_file = work / f"recording{size}.json"
    rec: dict[str, Any]
    if args.reuse and (cls_dir / "card.json").is_file():
        rec = json.loads(rec_file.read_text()) if rec_file.is_file() else {"reused": str(work)}
        print(f"[classifier {size}] reusing the labels and the classifier in {work}", flush=True)
    else:
        for d in (train_dir, test_dir, cls_dir):
            shutil.rmtree(d, ignore_errors=True)
        rec_train = record(train_dir, args.train_frames, size, 20_000)
        rec_test = record(test_dir, args.test_frames, size, 90_000)
        rec = {"train": rec_train, "test": rec_test}
        rec_file.write_text(json.dumps(rec))
        print(f"[classifier {size}] labels: train {rec_train['summary']}; test {rec_test['summary']}", flush=True)
        cfg = TrainClassifierConfig(model=ClassifierModelConfig(), max_steps=args.max_steps, seed=args.seed)
        train_classifier(cfg, [train_dir], cls_dir, log=lambda s: print(f"[classifier {size}] {s}", flush=True))
    loaded = load_classifier(cls_dir)
    card = loaded.card
    ev = evaluate_classifier(loaded, [test_dir], worst=8, k_values=KS)
    from learners.rewards.evaluation import write_worst_sheet

    write_worst_sheet(ev, card.threshold, RESULTS / f"classifier_worst_{size}.png")
    test_m = ev.metrics["labels"]
    no_pred = gate_table(ev.data, np.arange(len(ev.data)), ev.probs, card.threshold, ProprioPredicate(()), ks=KS)
    t0 = time.perf_counter()
    live = live_episodes(size, cls_dir, args.live_episodes)
    live_s = time.perf_counter() - t0
    from learners.rewards.metrics import expected_calibration_error

    result = {
        "image_size": size, "cameras": card.cameras, "recording": rec,
        "labels": {"train": card.label_sources, "test": ev.data.sources()},
        "model": card.model,
        "training": {k: card.training[k] for k in ("steps", "best_step", "seconds", "total_seconds", "pos_weight",
                                                     "shift_pad", "jitter", "batch_size", "lr", "threads")},
        "threshold": card.threshold, "threshold_rule": card.metrics["threshold_rule"],
        "validation": card.metrics["validation"], "test": test_m,
        "test_calibration": ev.calibration, "test_ece": expected_calibration_error(ev.calibration),
        "test_false_positives_by_kind": per_kind_false_positives(ev, card.threshold),
        "test_gate_with_predicate": ev.gate, "test_gate_without_predicate": no_pred,
        "live_gate_with_predicate": live_gate_table(live, card.threshold, True),
        "live_gate_without_predicate": live_gate_table(live, card.threshold, False),
        "live_seconds": live_s, "predicate": card.gate["predicate"],
        "goal": {"precision": 0.99, "recall": 0.9,
                 "met": bool(test_m["precision"] >= 0.99 and test_m["recall"] >= 0.9)},
    }
    print_size(result)
    return result


def print_size(r: dict[str, Any]) -> None:
    from learners.rewards.metrics import format_calibration_table, format_metrics_table

    s, tr = r["image_size"], r["training"]
    print(f"\n=== {s}x{s}, cameras {r['cameras']}: trained {tr['steps']} steps (best {tr['best_step']}) in "
          f"{tr['seconds']:.0f} s on 1 CPU thread; threshold {r['threshold']:.4f} ({r['threshold_rule']})")
    print(format_metrics_table({"validation": r["validation"], "held-out": r["test"]}))
    print(f"goal precision >= 0.99 at recall >= 0.9 on held-out frames: {'MET' if r['goal']['met'] else 'NOT MET'}")
    print(format_calibration_table(r["test_calibration"]))
    print("held-out false positives by segment kind:", json.dumps(r["test_false_positives_by_kind"]))
    for name in ("test_gate_with_predicate", "test_gate_without_predicate"):
        print(f"{name}: " + "; ".join(f"k={g['k']}: {g['false_fires']} false / {g['fired']} fired, "
                                       f"{g['missed']} missed" for g in r[name]))
    for name in ("live_gate_with_predicate", "live_gate_without_predicate"):
        print(f"{name}: " + "; ".join(f"k={g['k']}: {g['false_ends']} false ends {g['false_ends_by_kind']} "
                                       f"({g['false_ends_in_failed_episodes']} in failed episodes, early by "
                                       f"{g['false_ends_steps_before_true_success']}), "
                                       f"{g['misses']} misses of {g['true_success_episodes']}, delay "
                                       f"{g['delay_steps_mean']:.2f}" for g in r[name]))


def main() -> int:
    p = bench_parser(__doc__)
    p.add_argument("--sizes", type=int, nargs="+", default=[64, 128])
    p.add_argument("--train-frames", type=int, default=6000)
    p.add_argument("--test-frames", type=int, default=3000)
    p.add_argument("--max-steps", type=int, default=3000)
    p.add_argument("--live-episodes", type=int, default=30, help="per kind (expert, near miss, noisy expert)")
    p.add_argument("--seed", type=int, default=0)
    add_work_dir(p, "label and classifier directory")
    p.add_argument("--quick", action="store_true", help="small smoke run (not the reported numbers)")
    p.add_argument("--tag", default="", help="suffix of the results file")
    p.add_argument("--reuse", action="store_true",
                   help="reuse the labels and classifiers already in --work (re-evaluate only)")
    args = p.parse_args()
    if args.quick:
        args.train_frames, args.test_frames, args.max_steps, args.live_episodes = 600, 300, 200, 3
    work = work_dir(args.work, "robot-rl-classifier-")
    RESULTS.mkdir(parents=True, exist_ok=True)
    import torch

    out: dict[str, Any] = {
        "benchmark": "classifier", "task": TASK, "quick": args.quick,
        "machine": {"cpu": platform.processor() or platform.machine(), "cpus": os.cpu_count(),
                    "load_avg_at_start": load_average(), "torch": torch.__version__, "torch_threads": 1,
                    "nice": os.nice(0)},
        "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "sizes": {},
    }
    path = RESULTS / f"{result_name('classifier', args.tag, 'quick' if args.quick else '')}.json"
    for size in args.sizes:
        out["sizes"][str(size)] = run_size(size, work, args)
        write_json(path, out, default=float)  # after each size: a long run keeps what it measured
    print(f"\nwrote {path}")
    if args.work is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
