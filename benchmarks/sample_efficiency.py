"""Sample efficiency: evaluation success rate vs env steps of `robot-rl train` (RLPD + scripted demos), per seed.

For each seed this records nothing new (the demos are recorded once with `robot-rl record-demos`, scripted expert,
seed 0) and runs the real training entry point (`robot-rl train`, in process) into its own run directory, then reads
that run's metrics.jsonl (one row per evaluation: deterministic policy, `--eval-episodes` episodes). Prints a table
(success per evaluation and seed, the first env step at >= 90 % success), writes JSON and a PNG (one curve per
seed + the mean) to benchmarks/results/.

Training uses the task's recipe (learners.agents.recipes, the same as `robot-rl train --task T` with no
flags); anything after `--` goes to `robot-rl train` and wins. Modes:

    python benchmarks/sample_efficiency.py                                  # TwinPickCube, state, 3 seeds, 20k steps
    python benchmarks/sample_efficiency.py --jobs 2                         # two seeds at a time (1 core each)
    python benchmarks/sample_efficiency.py --steps 5000 --seeds 0           # shorter
    python benchmarks/sample_efficiency.py --task twin-reach --steps 6000   # the CI learning test's task
    python benchmarks/sample_efficiency.py --obs-mode pixels --image-size 64 --steps 3000 --seeds 0 \\
        --budget-min 20                                                     # 64x64 cameras, the pixel defaults
    python benchmarks/sample_efficiency.py --steps 2000 -- --utd 4 --batch-size 256   # override the recipe
    python benchmarks/sample_efficiency.py --label residual -- --set residual_base=runs/bc_pick   # a variant,
                                                      # written beside the plain run (..._state_residual.json)
    python benchmarks/sample_efficiency.py --backend jax --jobs 2           # the JAX learner backend (jax extra)
    python benchmarks/sample_efficiency.py --obs-mode pixels --steps 3000 --seeds 0 1 --label n5q3k \
        --from-runs /tmp/se/run_..._seed0_... /tmp/se/run_..._seed1_...    # the result of runs already made
                                                      # (e.g. a study stopped early): no training

`--from-runs DIR ...` writes the result from finished (or stopped) run directories of this benchmark, one per
`--seeds` entry in order, instead of training: wall time from the run's files, no CPU time; a run that stopped
before `--steps` counts as stopped early (`stopped_by_budget`), and the result records `from_runs`.

`--baseline FILE` puts a reference measured the same way beside a variant: a sample_efficiency result, or a
learned_reward result (its true-reward arm); the table adds the baseline's first steps at 90 %, the figure its
mean curve, and the result the ratio of the mean first steps (variant / baseline; a seed that never reaches 90 %
counts as the run's steps). The baseline must have the same task, mode, steps, evaluation period and episodes.

    python benchmarks/sample_efficiency.py --steps 6000 --eval-every 500 --label hlgauss \
        --baseline benchmarks/results/learned_reward_twin-pick-cube.json -- --set critic_loss=hl_gauss

Pixels mode with demos trains the pixel defaults (learners.agents.recipes: a ResNet-10 each seed's run pretrains on the
demos at its start, frozen, beside a light trainable head) on both cameras; `--device auto` (the default) runs it on
CUDA when there is one, unchanged. `--budget-min` stops a seed's run at its first evaluation after that many minutes
(`robot-rl train --max-minutes`); 0 = no budget.
"""

from __future__ import annotations

import json
import re
import shlex
import sys
import time
from pathlib import Path
from typing import Any

from _prelude import (
    SUCCESS_BAR,
    add_label,
    add_out_dir,
    add_work_dir,
    bench_parser,
    device_name,
    host_info,
    mean_curve,
    mean_first_step,
    parallel_map,
    print_success_table,
    pyplot,
    rate_axes,
    recipe_summary,
    result_name,
    save_figure,
    set_env_defaults,
    split_passthrough,
    summarize_run,
    timestamp,
    training_run_flags,
    work_dir,
    write_result,
)

set_env_defaults()

from robot_rl.metrics import read_metrics  # noqa: E402
from robot_rl.task_file import looks_like_task_file  # noqa: E402


def record_demos(task: str, obs_mode: str, image_size: int | None, episodes: int, out: Path,
                 more: tuple[str, ...] = ()) -> Path:
    """Scripted demos via `robot-rl record-demos` (skipped when `out` already holds enough episodes); `more`: extra
    record-demos flags (e.g. ("--cube-start", "tray"))."""
    from demos.recording.demos import parse_record_demos_args, record_demos
    from robot_rl.episodes import episode_paths

    have = len(episode_paths(out)) if out.is_dir() else 0
    if have < episodes:
        argv = ["--task", task, "--episodes", str(episodes - have), "--out", str(out), "--obs-mode", obs_mode,
                "--seed", str(have)]
        if image_size is not None:
            argv += ["--image-size", str(image_size)]
        if record_demos(parse_record_demos_args([*argv, *more])) != 0:
            raise SystemExit(f"recording demos into {out} failed")
    return out


def run_seed(train_argv: list[str], out: Path) -> dict[str, Any]:
    """One `robot-rl train` run in this process; its metrics rows, wall time and CPU time (this process's, all
    threads: `train` steps the env, updates and evaluates in one process)."""
    from robot_rl.cli import main as robot_rl_main

    t0, c0 = time.perf_counter(), time.process_time()
    if robot_rl_main(["train", *train_argv, "--out", str(out)]) != 0:
        raise SystemExit(f"robot-rl train failed for {out}")
    return {"rows": read_metrics(out / "metrics.jsonl"), "wall_s": time.perf_counter() - t0,
            "cpu_s": time.process_time() - c0}


def run_jobs(jobs: list[tuple[list[str], Path]], n_parallel: int) -> list[dict[str, Any]]:
    """`run_seed` for each (train argv, run directory), `n_parallel` at a time in spawned processes (no forked
    torch/MuJoCo state; 1 core each at --threads 1), or in this process when `n_parallel` <= 1."""
    return parallel_map(run_seed, jobs, n_parallel)


def collected_run(out: Path) -> dict[str, Any]:
    """`run_seed`'s answer for a run directory made before (--from-runs): its metrics rows, the wall time from its
    config.json to its last metrics row, no CPU time."""
    metrics, config = out / "metrics.jsonl", out / "config.json"
    if not metrics.exists() or not config.exists():
        raise SystemExit(f"--from-runs {out}: not a robot-rl train run directory with metrics (no {metrics.name})")
    return {"rows": read_metrics(metrics), "wall_s": metrics.stat().st_mtime - config.stat().st_mtime,
            "cpu_s": None}


def load_baseline(path: Path) -> dict[str, Any]:
    """{"path", "runs"} of a sample_efficiency result file or a learned_reward one (its "true" arm); a clear
    SystemExit for a missing or foreign file."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise SystemExit(f"--baseline {path}: cannot read it as JSON ({e})") from None
    if data.get("benchmark") == "learned_reward":
        runs = data["arms"]["true"]["runs"]
    elif data.get("benchmark") == "sample_efficiency":
        runs = data["runs"]
    else:
        raise SystemExit(f"--baseline {path}: not a sample_efficiency or learned_reward result")
    return {"path": str(path), "task": data.get("task"), "obs_mode": data.get("obs_mode"),
            "steps": data.get("steps"), "eval_every": data.get("eval_every"),
            "eval_episodes": data.get("eval_episodes"), "runs": runs}


def plot(result: dict[str, Any], path: Path) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 3.8))
    for run in result["runs"]:
        xs = [r["env_step"] for r in run["curve"]]
        ys = [r["success_rate"] for r in run["curve"]]
        ax.plot(xs, ys, marker="o", markersize=3, alpha=0.6, label=f"seed {run['seed']}")
    n = len(result["runs"])
    mean = mean_curve(result["runs"], result["eval_every"])  # evaluations run at episode ends: binned
    if n > 1 and mean:
        ax.plot([m[0] for m in mean], [m[1] for m in mean], color="black", linewidth=2,
                label=f"mean{' (' + result['label'] + ')' if result.get('label') else ''}")
    base = result.get("baseline")
    if base:
        bm = mean_curve(base["runs"], result["eval_every"])
        ax.plot([m[0] for m in bm], [m[1] for m in bm], color="grey", linewidth=2, linestyle="--",
                label=f"baseline mean ({len(base['runs'])} seeds)")
    ax.axhline(SUCCESS_BAR, color="grey", linestyle=":", linewidth=1)
    rate_axes(ax, "env steps", f"success ({result['eval_episodes']} eval episodes)")
    ax.set_title(f"{result['task']} ({result['obs_mode']}, {result.get('backend', 'torch')}), {result['demos']} "
                 "scripted demos")
    save_figure(fig, path)


def main(argv: list[str] | None = None) -> int:
    argv, extra = split_passthrough(list(sys.argv[1:] if argv is None else argv))
    p = bench_parser(__doc__)
    p.add_argument("--task", default="twin-pick-cube")
    p.add_argument("--obs-mode", default="state", choices=("state", "pixels"))
    p.add_argument("--image-size", type=int, default=64, help="pixels mode: camera image size")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--steps", type=int, default=20_000, help="env steps per seed")
    p.add_argument("--eval-every", type=int, default=1000)
    p.add_argument("--eval-episodes", type=int, default=20)
    p.add_argument("--demos", type=int, default=20, help="scripted demo episodes")
    p.add_argument("--demo-flags", default="", metavar="FLAGS",
                   help="extra record-demos flags, e.g. \"--camera-latency-ms 100 --action-delay-ms 20\" (demos "
                        "recorded under a faithful run's timing); such demos get their own directory")
    p.add_argument("--budget-min", type=float, default=0.0, help="wall-clock budget per seed in minutes (0 = none)")
    p.add_argument("--device", default="auto")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--jobs", type=int, default=1, help="seeds trained in parallel processes")
    p.add_argument("--backend", default="torch", choices=("torch", "jax"),
                   help="learner backend (robot-rl train --backend); results of jax get a _jax suffix")
    add_work_dir(p, "demos + run directories")
    add_out_dir(p)
    add_label(p)
    p.add_argument("--from-runs", type=Path, nargs="+", default=None, metavar="RUN_DIR",
                   help="no training: the result of these run directories (one per --seeds entry, in order)")
    p.add_argument("--baseline", type=Path, default=None,
                   help="a result file measured the same way to compare with (sample_efficiency or learned_reward)")
    args = p.parse_args(argv)
    baseline = load_baseline(args.baseline) if args.baseline is not None else None
    if baseline is not None:
        for key in ("task", "obs_mode", "steps", "eval_every", "eval_episodes"):
            if baseline[key] != getattr(args, key):
                raise SystemExit(f"--baseline {args.baseline}: its {key} is {baseline[key]!r}, this run's "
                                 f"{getattr(args, key)!r}: compare runs measured the same way")

    work = work_dir(args.work, "sample_efficiency_")
    pixels = args.obs_mode == "pixels"
    image_size = args.image_size if pixels else None
    demo_more = tuple(shlex.split(args.demo_flags))
    slug = re.sub(r"[^A-Za-z0-9]+", "_", " ".join(demo_more)).strip("_")
    name = Path(args.task).stem if looks_like_task_file(args.task) else args.task  # a lab's task file: its stem
    demo_dir = work / f"demos_{name}_{args.obs_mode}{image_size or ''}{'_' + slug if slug else ''}"
    demos = demo_dir if args.from_runs else record_demos(args.task, args.obs_mode, image_size, args.demos, demo_dir,
                                                         demo_more)
    recipe = recipe_summary(args.task, args.obs_mode)
    tag = result_name(name, f"{args.obs_mode}{image_size or ''}", "" if args.backend == "torch" else args.backend,
                      args.label)
    runs = []
    jobs: list[tuple[int, list[str], Path]] = []
    for seed in args.seeds:
        out = work / f"run_{tag}_seed{seed}_{time.strftime('%H%M%S')}"
        train_argv = ["--task", args.task, "--obs-mode", args.obs_mode, "--demos", str(demos),
                      *training_run_flags(args.steps, args.eval_every, args.eval_episodes, seed),
                      "--device", args.device, "--threads", str(args.threads),
                      "--backend", args.backend,
                      *(["--image-size", str(image_size), "--replay-capacity", "30000"] if image_size else []),
                      *extra]
        if args.budget_min > 0:
            train_argv += ["--max-minutes", str(args.budget_min)]
        if args.from_runs is None:
            print(f"[sample-efficiency] seed {seed}: robot-rl train {' '.join(train_argv)} --out {out}", flush=True)
        jobs.append((seed, train_argv, out))
    if args.from_runs is not None:
        if len(args.from_runs) != len(args.seeds):
            raise SystemExit(f"--from-runs: {len(args.from_runs)} run directories for {len(args.seeds)} seeds")
        jobs = [(seed, [], out) for seed, out in zip(args.seeds, args.from_runs, strict=True)]
        results = [collected_run(out) for out in args.from_runs]
    else:
        results = run_jobs([(argv, out) for _, argv, out in jobs], args.jobs)
    for (seed, _, out), res in zip(jobs, results, strict=True):
        runs.append(summarize_run(seed, res, out, args.steps))
    dev = device_name(args.device)
    result = {"benchmark": "sample_efficiency", "task": args.task, "obs_mode": args.obs_mode,
              "image_size": image_size, "demos": args.demos, "demo_flags": list(demo_more), "steps": args.steps,
              "eval_every": args.eval_every, "eval_episodes": args.eval_episodes, "seeds": args.seeds,
              "recipe": recipe, "extra_flags": extra,
              "label": args.label, "budget_min": args.budget_min, "backend": args.backend, "device": dev,
              "threads": args.threads,
              "jobs": args.jobs, **host_info(),
              "success_bar": SUCCESS_BAR, "runs": runs, "time": timestamp()}
    if args.from_runs is not None:
        result["from_runs"] = [str(p) for p in args.from_runs]

    print(f"\n{args.task} ({args.obs_mode}{f' {image_size}px' if image_size else ''}, {args.backend}), "
          f"{args.demos} demos, "
          f"success over {args.eval_episodes} deterministic eval episodes:")
    print_success_table([(f"seed {r['seed']}", r) for r in runs], args.eval_every)
    for r in runs:
        print(f"seed {r['seed']}: first >= {SUCCESS_BAR:.0%} at {r['first_step_at_90'] or 'never'}, final "
              f"{r['final_success_rate']}, {r['env_steps_done']} env steps in {r['wall_s'] / 60:.1f} min "
              f"({(r['cpu_s'] or 0.0) / 60:.1f} CPU-min)"
              f"{' (budget)' if r['stopped_by_budget'] else ''}")
    if baseline is not None:
        ratio = mean_first_step(runs, args.steps) / max(mean_first_step(baseline["runs"], args.steps), 1.0)
        result["baseline"] = {**baseline, "mean_first_step_at_90": mean_first_step(baseline["runs"], args.steps),
                              "ratio_mean_first_step": ratio}
        result["mean_first_step_at_90"] = mean_first_step(runs, args.steps)
        print(f"baseline ({args.baseline}): first >= {SUCCESS_BAR:.0%} at "
              f"{[r['first_step_at_90'] for r in baseline['runs']]}, final "
              f"{[r['final_success_rate'] for r in baseline['runs']]}; mean first step, this run / baseline: "
              f"{ratio:.2f}x")
    write_result(result, args.out / f"sample_efficiency_{tag}.json", plot)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
