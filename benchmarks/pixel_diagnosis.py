"""Pixel diagnosis: what a pixel run's critic, encoder and actor do, arm by arm (`robot-rl train --diagnostics`).

Each arm is one `robot-rl train --diagnostics` run (in process, the task's recipe plus the arm's flags; seed
`--seed`, scripted demos recorded once per observation mode and image size, seeds 0..) whose metrics rows carry
the learning diagnostics of learners.training.diagnostics at each evaluation: Q against Monte-Carlo returns on demo
and recent policy rows, the encoder's feature rank and drift, the BC term's share of the actor loss, the demo share,
the policy's std. Arms (`ARMS`):

- base:    the pixel recipe (64x64 front + wrist cameras, conv encoder from scratch, DrQ random shifts)
- noaug:   the same without augmentation (augment_pad=0)
- front:   the front camera alone (--cameras front)
- wrist:   the wrist camera alone (--cameras wrist)
- proprio: no camera at all: state mode restricted to the pixel recipe's proprio vector (TCP position, hand yaw,
           gripper width; no object state) with the pixel recipe's agent (batch 32, ensemble 2, 1-step returns,
           unfiltered BC): does the proprio vector alone explain the pixel runs' early successes?
- px96:    96x96 images
- n5q:     5-step returns + the Q-filtered BC term (the state pick-cube recipe's two changes)

Writes benchmarks/results/pixel_diagnosis_<task>_<arm>.json (the rows, the arm's flags, the resolved agent config,
wall and CPU time) and prints one table per arm. Usage::

    python benchmarks/pixel_diagnosis.py --arms proprio --steps 3000          # the cheap arm (no rendering)
    python benchmarks/pixel_diagnosis.py --arms base noaug --steps 3000 --eval-episodes 10
    python benchmarks/pixel_diagnosis.py --arms base -- --set bc_weight=10    # anything after -- goes to train
    python benchmarks/pixel_diagnosis.py --arms base --from-runs /tmp/pd/run_base_seed0_...   # a run made before
                                                  # (e.g. stopped early): its rows so far, no training
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from _prelude import (
    add_out_dir,
    add_work_dir,
    bench_parser,
    cell,
    host_info,
    print_table,
    set_env_defaults,
    split_passthrough,
    timestamp,
    training_run_flags,
    work_dir,
    write_json,
)

set_env_defaults()

PROPRIO = "state[0:3],state[5],state[12]"
"""The pixel recipe's state selection (learners.agents.recipes: TCP position, hand yaw, gripper width)."""

ARMS: dict[str, tuple[str, int | None, list[str]]] = {
    "base": ("pixels", 64, []),
    "noaug": ("pixels", 64, ["--set", "augment_pad=0"]),
    "front": ("pixels", 64, ["--cameras", "front"]),
    "wrist": ("pixels", 64, ["--cameras", "wrist"]),
    "proprio": ("state", None, ["--state-select", PROPRIO, "--set", "batch_size=32", "--set", "ensemble_size=2",
                                "--set", "n_step=1", "--set", "bc_q_filter=false"]),
    "px96": ("pixels", 96, []),
    "n5q": ("pixels", 64, ["--set", "n_step=5", "--set", "bc_q_filter=true"]),
}
"""arm -> (obs mode, image size, `robot-rl train` flags on top of the task's recipe)."""

COLUMNS = (("success", "success_rate", "8.0%"), ("demoQ-G", "diag_demo_bias", "+8.3f"),
           ("demo r", "diag_demo_corr", "7.2f"), ("polQ-G", "diag_policy_bias", "+8.3f"),
           ("pol r", "diag_policy_corr", "6.2f"), ("rank", "diag_encoder_rank", "6.1f"),
           ("drift", "diag_encoder_drift", "6.2f"), ("BC share", "diag_bc_share", "9.2f"),
           ("kept", "diag_bc_kept", "5.2f"), ("std", "diag_policy_std", "6.3f"))


def arm_result(arm: str, task: str, rows: list[dict[str, Any]], argv: list[str], out: Path, wall_s: float,
               cpu_s: float) -> dict[str, Any]:
    """The result file's content for one finished arm."""
    obs_mode, size, flags = ARMS[arm]
    agent_cfg = json.loads((out / "agent_config.json").read_text()) if (out / "agent_config.json").exists() else {}
    return {"benchmark": "pixel_diagnosis", "task": task, "arm": arm, "obs_mode": obs_mode, "image_size": size,
            "arm_flags": flags, "train_argv": argv, "agent_config": agent_cfg, "rows": rows, "wall_s": wall_s,
            "cpu_s": cpu_s, **host_info(), "time": timestamp()}


def print_arm(result: dict[str, Any]) -> None:
    size = f" {result['image_size']}px" if result["image_size"] else ""
    print(f"\n{result['task']} arm {result['arm']} ({result['obs_mode']}{size}), {result['wall_s'] / 60:.1f} min:")
    header = f"{'env step':>9}" + "".join(f" {name:>{len(cell(0.0, spec))}}" for name, _, spec in COLUMNS)
    print_table(header, [f"{r['env_step']:>9}" + "".join(f" {cell(r.get(key), spec):>{len(cell(0.0, spec))}}"
                                                         for _, key, spec in COLUMNS) for r in result["rows"]])


def main(argv: list[str] | None = None) -> int:
    argv, extra = split_passthrough(list(sys.argv[1:] if argv is None else argv))
    p = bench_parser(__doc__)
    p.add_argument("--task", default="twin-pick-cube")
    p.add_argument("--arms", nargs="+", default=list(ARMS), choices=list(ARMS))
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--steps", type=int, default=3000, help="env steps per arm")
    p.add_argument("--eval-every", type=int, default=1000)
    p.add_argument("--eval-episodes", type=int, default=10)
    p.add_argument("--demos", type=int, default=20, help="scripted demo episodes")
    p.add_argument("--device", default="auto")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--from-runs", type=Path, nargs="+", default=None, metavar="RUN_DIR",
                   help="no training: the result of these `robot-rl train --diagnostics` run directories (one per "
                        "--arms entry, in order)")
    add_work_dir(p, "demos + run directories")
    add_out_dir(p)
    args = p.parse_args(argv)

    from sample_efficiency import collected_run, record_demos, run_seed  # benchmarks/ is on sys.path

    if args.from_runs is not None:
        if len(args.from_runs) != len(args.arms):
            raise SystemExit(f"--from-runs: {len(args.from_runs)} run directories for {len(args.arms)} arms")
        for arm, out in zip(args.arms, args.from_runs, strict=True):
            res = collected_run(out)
            config = json.loads((out / "config.json").read_text())
            result = arm_result(arm, args.task, res["rows"], [], out, res["wall_s"], 0.0)
            result.update(from_run=str(out), cpu_s=None, run_config=config)
            print_arm(result)
            print(f"wrote {write_json(args.out / f'pixel_diagnosis_{args.task}_{arm}.json', result)}")
        return 0
    work = work_dir(args.work, "pixel_diagnosis_")
    for arm in args.arms:
        obs_mode, size, flags = ARMS[arm]
        demos = record_demos(args.task, obs_mode, size, args.demos, work / f"demos_{args.task}_{obs_mode}{size or ''}")
        out = work / f"run_{arm}_seed{args.seed}_{time.strftime('%H%M%S')}"
        train_argv = ["--task", args.task, "--obs-mode", obs_mode, "--demos", str(demos), "--diagnostics",
                      *training_run_flags(args.steps, args.eval_every, args.eval_episodes, args.seed),
                      "--device", args.device, "--threads", str(args.threads),
                      *(["--image-size", str(size), "--replay-capacity", "30000"] if size else []), *flags, *extra]
        print(f"[pixel-diagnosis] arm {arm}: robot-rl train {' '.join(train_argv)} --out {out}", flush=True)
        res = run_seed(train_argv, out)
        result = arm_result(arm, args.task, res["rows"], train_argv, out, res["wall_s"], res["cpu_s"])
        print_arm(result)
        print(f"wrote {write_json(args.out / f'pixel_diagnosis_{args.task}_{arm}.json', result)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
