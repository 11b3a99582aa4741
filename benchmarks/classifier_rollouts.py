"""The reward classifier on the policy's own rollouts: its frame precision and recall during training on the twin.

A classifier made by the documented commands (`robot-rl record-labels`, scripted teleop with near misses, 64x64, both
cameras; `robot-rl train-classifier` defaults) gives the reward of a pick-cube training run (`robot-rl train
--obs-mode state --reward classifier:DIR`: the state recipe, 20 scripted demos; the env renders the classifier's
cameras into info only). Every training frame's classifier decision (prob >= the card's threshold, before the k-gate)
is compared with the twin's TRUE success (learners.rewards.reward_model.RewardModelWrapper; a twin-only diagnostic,
hardware has no truth), and the run's metrics.jsonl has the counts per evaluation window. Arms (each its own
classifier and its own training run, the same seed):

- base: labels only (--label-frames frames, seeds 20000..);
- noisy: + the same number of frames recorded with action noise 0.5 (seeds 30000..): states nearer to a learning
  policy's;
- audit: + the base run's audited positive frames, labelled by the twin's true success (`robot-rl audit-labels
  --true-success`: the privileged stand-in for the person of the audit loop): hard negatives from the policy's rollouts;
- pretrained: the noisy arm's labels, the classifier on a frozen ResNet-10 pretrained on the cell's own frames
  (`robot-rl pretrain-encoder` over both label sets: what a lab can make without downloading anything) instead of the
  small conv net trained from scratch.

Reported per arm: the card's validation precision / recall, then on the training run's frames per evaluation window
and in all: precision, recall and the counts, the evaluation success (true), and the episodes the classifier ended
without true success. Existing steps in --work are reused (labels, classifiers, finished runs), so a run that stopped
can continue; the commands are printed.

    nice -n 10 python benchmarks/classifier_rollouts.py --work W --arms base noisy
    python benchmarks/classifier_rollouts.py --work W --arms base noisy audit --steps 3000

Writes benchmarks/results/classifier_rollouts.json and prints a table.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

from _prelude import (
    add_out_dir,
    add_work_dir,
    bench_parser,
    cell,
    load_average,
    print_table,
    robot_rl_command,
    set_env_defaults,
    timestamp,
    training_run_flags,
    work_dir,
    write_json,
)

set_env_defaults(one_thread=True)

TASK = "twin-pick-cube"
ARMS = {  # arm: (classifier dir, run dir, label dirs)
    "base": ("cls", "run1", ("labels",)),
    "noisy": ("cls2", "run2", ("labels", "labels_noisy")),
    "audit": ("cls3", "run3", ("labels", "audit1")),
    "pretrained": ("cls4", "run4", ("labels", "labels_noisy")),
}
ENCODER = "encoder.safetensors"
"""The pretrained arm's backbone (robot-rl pretrain-encoder over the label sets), in the work directory."""


def sh(argv: list[str], log: Path) -> None:
    print("$ robot-rl " + " ".join(argv[len(robot_rl_command(False)):]), flush=True)
    with open(log, "a") as f:
        subprocess.run(argv, check=True, stdout=f, stderr=subprocess.STDOUT)


def prepare(w: Path, args: Any, arms: list[str]) -> None:
    cli = robot_rl_command(False)
    labels = {"labels": ["--seed", "20000"], "labels_noisy": ["--seed", "30000", "--noise", "0.5"]}
    for name, more in labels.items():
        if not (w / name).exists() and any(name in ARMS[a][2] for a in arms):
            sh([*cli, "record-labels", "--task", TASK, "--teleop", "scripted", "--out", str(w / name), "--frames",
                str(args.label_frames), "--image-size", str(args.image_size), *more], w / "log.txt")
    if not (w / "demos").exists():
        sh([*cli, "record-demos", "--task", TASK, "--teleop", "scripted", "--episodes", "20", "--out", str(w / "demos"),
            "--obs-mode", "state"], w / "log.txt")
    if "pretrained" in arms and not (w / ENCODER).exists():
        sh([*cli, "pretrain-encoder", str(w / "labels"), str(w / "labels_noisy"), "--out", str(w / ENCODER),
            "--threads", "1"], w / "log.txt")
    if "audit" in arms and not (w / "audit1").exists():
        sh([*cli, "audit-labels", "--audit", str(w / ARMS["base"][1] / "reward_audit"), "--classifier",
            str(w / ARMS["base"][0]), "--out", str(w / "audit1"), "--true-success"], w / "log.txt")


def run_arm(w: Path, arm: str, args: Any) -> dict[str, Any]:
    cli = robot_rl_command(False)
    cls, run, label_dirs = ARMS[arm]
    if not (w / cls / "card.json").exists():
        encoder = ["--encoder-weights", str(w / ENCODER)] if arm == "pretrained" else []
        sh([*cli, "train-classifier", "--labels", *[str(w / d) for d in label_dirs], "--out", str(w / cls),
            "--threads", "1", *encoder], w / "log.txt")
    metrics = w / run / "metrics.jsonl"
    rows = [json.loads(x) for x in metrics.read_text().splitlines()] if metrics.exists() else []
    if not rows or rows[-1]["env_step"] < args.steps:
        sh([*cli, "train", "--task", TASK, "--obs-mode", "state", "--demos", str(w / "demos"), "--reward",
            f"classifier:{w / cls}", *training_run_flags(args.steps, args.eval_every, args.eval_episodes, args.seed),
            "--device", "cpu", "--threads", "1", "--out", str(w / run)], w / "log.txt")
        rows = [json.loads(x) for x in metrics.read_text().splitlines()]
    card = json.loads((w / cls / "card.json").read_text())
    val = card.get("metrics", {}).get("validation", {})
    window = [{"env_step": r["env_step"], "success_rate": r["success_rate"],
               **{k.removeprefix("reward_window_"): r.get(k) for k in r if k.startswith("reward_window_frame_")}}
              for r in rows if r["env_step"] > 0]
    last = rows[-1]
    return {"arm": arm, "labels": list(label_dirs), "encoder": card.get("model", {}).get("encoder"),
            "label_frames": sum(int(src.get("frames", 0)) for src in card.get("label_sources", [])),
            "threshold": card.get("threshold"), "validation_precision": val.get("precision"),
            "validation_recall": val.get("recall"), "windows": window,
            "total": {k.removeprefix("reward_"): last.get(k) for k in last if k.startswith("reward_frame_")},
            "episodes": last.get("reward_episodes"), "ended_by_model": last.get("reward_ended_by_model"),
            "ended_without_true_success": last.get("reward_ended_without_true_success"),
            "final_success_rate": last["success_rate"], "best_success_rate": max(r["success_rate"] for r in rows),
            "env_steps": last["env_step"]}


def main() -> None:
    p = bench_parser(__doc__)
    add_out_dir(p)
    add_work_dir(p, "labels, classifiers, demos and run directories")
    p.add_argument("--arms", nargs="+", default=["base", "noisy"], choices=list(ARMS))
    p.add_argument("--label-frames", type=int, default=1500, help="labelled frames per record-labels call")
    p.add_argument("--image-size", type=int, default=64)
    p.add_argument("--steps", type=int, default=3000, help="env steps per training run")
    p.add_argument("--eval-every", type=int, default=500)
    p.add_argument("--eval-episodes", type=int, default=10)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    w = work_dir(args.work, "cls_rollouts_")
    t0 = time.time()
    prepare(w, args, args.arms)
    arms = [run_arm(w, arm, args) for arm in args.arms]
    print_table(f"{'arm':6} {'val P':>6} {'val R':>6} {'roll P':>7} {'roll R':>7} {'tp':>4} {'fp':>4} {'fn':>4} "
                f"{'eval':>5} {'false ends':>10}",
                [f"{a['arm']:6} {cell(a['validation_precision'], '6.3f')} {cell(a['validation_recall'], '6.3f')} "
                 f"{cell(a['total'].get('frame_precision'), '7.3f')} {cell(a['total'].get('frame_recall'), '7.3f')} "
                 f"{a['total'].get('frame_tp', 0):4d} {a['total'].get('frame_fp', 0):4d} "
                 f"{a['total'].get('frame_fn', 0):4d} {cell(a['final_success_rate'], '5.2f')} "
                 f"{a['ended_without_true_success']!s:>10}" for a in arms])
    out = args.out / "classifier_rollouts.json"
    write_json(out, {"benchmark": "classifier_rollouts", "task": TASK, "time": timestamp(),
                     "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
                     "load_average": load_average(), "wall_s": time.time() - t0, "arms": arms,
                     "note": "frame decisions vs the twin's true success: a twin-only diagnostic"})
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
