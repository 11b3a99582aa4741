"""The default agent on small standard gymnasium control tasks: `robot-rl train --env-id E` with no flags.

The bar: with the default agent and no flags, `robot-rl train --env-id ...` learns small standard gymnasium
control tasks within 8,000 env steps and 15 minutes on the 2-core CPU. For each env id this runs exactly that
command (`--max-env-steps 8000 --max-minutes 15`, plus the evaluation cadence and the seed), each run in its own
process (`--jobs` at a time; 1 = the machine to itself, which is what the 15-minute bar means), reads the run's
metrics.jsonl (deterministic evaluation every `--eval-every` env steps) and reports the first env step at which
the evaluation return reaches the env's bar, the final return, the wall time and the load average around the run.

Bars ("learned"): InvertedPendulum-v5: 950 (gymnasium's registered reward_threshold; the maximum is 1000);
Pendulum-v1: -400 (gymnasium registers none; a random policy scores about -1,200 to -1,500, SAC-level policies
-150 to -200). Other ids can be added with `--bar ID=VALUE`.

    python benchmarks/gym_defaults.py                                   # both envs, seed 0, one at a time
    python benchmarks/gym_defaults.py --envs Pendulum-v1 --seeds 0 1 --jobs 2
    python benchmarks/gym_defaults.py --steps 1000 --minutes 2 --out /tmp/x   # a smoke run

Writes benchmarks/results/gym_defaults.json and .png; prints a table.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from _prelude import (
    ROOT,
    add_out_dir,
    add_work_dir,
    bench_parser,
    cell,
    first_step_at,
    host_info,
    load_average,
    print_table,
    pyplot,
    robot_rl_command,
    save_figure,
    timestamp,
    work_dir,
    write_result,
)

from robot_rl.metrics import read_metrics

BARS = {"InvertedPendulum-v5": 950.0, "Pendulum-v1": -400.0}
"""Evaluation return that counts as learned, per env id (see the module docstring)."""


def train_argv(env_id: str, seed: int, steps: int, minutes: float, eval_every: int, eval_episodes: int,
               out: Path) -> list[str]:
    """The `robot-rl train` command line of one run (`python -m robot_rl.cli`, this checkout's code): the env, the
    budget, evaluation and seed, nothing else."""
    return [*robot_rl_command(prefer_installed=False), "train", "--env-id", env_id, "--max-env-steps", str(steps),
            "--max-minutes", str(minutes), "--eval-every", str(eval_every), "--eval-episodes", str(eval_episodes),
            "--seed", str(seed), "--out", str(out)]


def run_one(env_id: str, seed: int, args: argparse.Namespace, work: Path, bar: float) -> dict[str, Any]:
    out = work / f"{env_id}_seed{seed}"
    argv = train_argv(env_id, seed, args.steps, args.minutes, args.eval_every, args.eval_episodes, out)
    log = work / f"{env_id}_seed{seed}.log"
    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE", PYTHONUNBUFFERED="1")
    load0 = load_average()
    t0 = time.perf_counter()
    with open(log, "w") as f:
        rc = subprocess.call(argv, stdout=f, stderr=subprocess.STDOUT, env=env, cwd=ROOT)
    wall = time.perf_counter() - t0
    rows = read_metrics(out / "metrics.jsonl") if (out / "metrics.jsonl").is_file() else []
    curve: list[dict[str, Any]] = [{"env_step": int(r["env_step"]), "return": float(r["return"]),
              "updates": int(r.get("updates", 0)),
              "updates_per_s": r.get("updates_per_s")} for r in rows if r.get("return") is not None]
    first = first_step_at(rows, bar, key="return")
    return {"env_id": env_id, "seed": seed, "rc": rc, "bar": bar, "curve": curve, "wall_s": wall,
            "first_step_at_bar": first, "final_return": curve[-1]["return"] if curve else None,
            "best_return": max((c["return"] for c in curve), default=None),
            "env_steps_done": curve[-1]["env_step"] if curve else 0,
            "updates_per_s": curve[-1]["updates_per_s"] if curve else None,  # the run's learner rate (10 Hz bar)
            "learned": first is not None,  # the run itself stops at its first evaluation after --minutes
            "load_avg_before": load0, "load_avg_after": load_average(), "log": str(log), "argv": argv[2:]}


def plot(result: dict[str, Any], path: Path) -> None:
    plt = pyplot()

    envs = sorted({r["env_id"] for r in result["runs"]})
    fig, axes = plt.subplots(1, len(envs), figsize=(5 * len(envs), 3.6), squeeze=False)
    for ax, env_id in zip(axes[0], envs, strict=True):
        for r in (r for r in result["runs"] if r["env_id"] == env_id):
            ax.plot([c["env_step"] for c in r["curve"]], [c["return"] for c in r["curve"]], marker="o",
                    markersize=3, label=f"seed {r['seed']}")
            ax.axhline(r["bar"], color="grey", linestyle=":", linewidth=1)
        ax.set_title(f"{env_id}: robot-rl train, no flags")
        ax.set_xlabel("env steps")
        ax.set_ylabel("evaluation return")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    save_figure(fig, path)


def main(argv: list[str] | None = None) -> int:
    p = bench_parser(__doc__)
    p.add_argument("--envs", nargs="+", default=list(BARS))
    p.add_argument("--seeds", type=int, nargs="+", default=[0])
    p.add_argument("--steps", type=int, default=8000)
    p.add_argument("--minutes", type=float, default=15.0)
    p.add_argument("--eval-every", type=int, default=1000)
    p.add_argument("--eval-episodes", type=int, default=10)
    p.add_argument("--jobs", type=int, default=1, help="runs at a time (1: each run has the machine to itself)")
    p.add_argument("--bar", action="append", default=[], metavar="ID=VALUE", help="the learned bar of another env")
    add_work_dir(p, "run directories")
    add_out_dir(p)
    args = p.parse_args(argv)
    bars = dict(BARS)
    for item in args.bar:
        key, _, value = item.partition("=")
        try:
            bars[key.strip()] = float(value)
        except ValueError:
            p.error(f"--bar {item!r}: expected ID=NUMBER")
    missing = [e for e in args.envs if e not in bars]
    if missing:
        p.error(f"no learned bar for {missing}; pass --bar ID=VALUE")
    work = work_dir(args.work, "gym_defaults_")
    jobs = [(e, s) for e in args.envs for s in args.seeds]
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        runs = list(pool.map(lambda js: run_one(js[0], js[1], args, work, bars[js[0]]), jobs))
    result = {"benchmark": "gym_defaults", "steps": args.steps, "minutes": args.minutes,
              "eval_every": args.eval_every, "eval_episodes": args.eval_episodes, "jobs": args.jobs,
              **host_info(torch=False), "time": timestamp(), "runs": runs}
    print()
    print_table(f"{'env':22s} {'seed':>4s} {'rc':>3s} {'steps':>6s} {'first at bar':>12s} {'final':>9s} {'best':>9s} "
                f"{'wall min':>8s} {'learned':>7s}",
                [f"{r['env_id']:22s} {r['seed']:4d} {r['rc']:3d} {r['env_steps_done']:6d} "
                 f"{cell(r['first_step_at_bar'], '>12', missing='never')} "
                 f"{cell(r['final_return'], '9.1f')} {cell(r['best_return'], '9.1f')} {r['wall_s'] / 60:8.1f} "
                 f"{r['learned']!s:>7s}" for r in runs])
    write_result(result, args.out / "gym_defaults.json", plot)
    return 0 if all(r["rc"] == 0 for r in runs) else 1


if __name__ == "__main__":
    raise SystemExit(main())
