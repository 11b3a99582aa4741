"""Sample efficiency: evaluation success rate vs env steps of `robot-rl train` (RLPD + scripted demos), per seed.

For each seed this records nothing new (the demos are recorded once with `robot-rl record-demos`, scripted expert,
seed 0) and runs the real training entry point (`learners.cli.train.main`) into its own run directory, then reads
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
        --budget-min 20                                                     # 64x64 cameras, small conv encoder
    python benchmarks/sample_efficiency.py --steps 2000 -- --utd 4 --batch-size 256   # override the recipe
    python benchmarks/sample_efficiency.py --label residual -- --set residual_base=runs/bc_pick   # a variant,
                                                      # written beside the plain run (..._state_residual.json)
    python benchmarks/sample_efficiency.py --backend jax --jobs 2           # the JAX learner backend (jax extra)

`--baseline FILE` puts a reference measured the same way beside a variant: a sample_efficiency result, or a
learned_reward result (its true-reward arm); the table adds the baseline's first steps at 90 %, the figure its
mean curve, and the result the ratio of the mean first steps (variant / baseline; a seed that never reaches 90 %
counts as the run's steps). The baseline must have the same task, mode, steps, evaluation period and episodes.

    python benchmarks/sample_efficiency.py --steps 6000 --eval-every 500 --label hlgauss \
        --baseline benchmarks/results/learned_reward_twin-pick-cube.json -- --set critic_loss=hl_gauss

Pixels mode uses the small conv encoder trained from scratch (`--encoder conv`, DrQ augmentation) on both
cameras; `--device auto` (the default) runs it on CUDA when there is one, unchanged. `--budget-min` stops a seed's
run at its first evaluation after that many minutes (`robot-rl train --max-minutes`); 0 = no budget.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

os.environ.setdefault("MUJOCO_GL", "egl")
os.environ.setdefault("PYOPENGL_PLATFORM", "egl")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np  # noqa: E402

from robot_rl.metrics import read_metrics  # noqa: E402

SUCCESS_BAR = 0.9


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
    from learners.cli import train as train_cli

    t0, c0 = time.perf_counter(), time.process_time()
    if train_cli.main([*train_argv, "--out", str(out)]) != 0:
        raise SystemExit(f"robot-rl train failed for {out}")
    return {"rows": read_metrics(out / "metrics.jsonl"), "wall_s": time.perf_counter() - t0,
            "cpu_s": time.process_time() - c0}


def run_jobs(jobs: list[tuple[list[str], Path]], n_parallel: int) -> list[dict[str, Any]]:
    """`run_seed` for each (train argv, run directory), `n_parallel` at a time in spawned processes (no forked
    torch/MuJoCo state; 1 core each at --threads 1), or in this process when `n_parallel` <= 1."""
    if n_parallel <= 1:
        return [run_seed(argv, out) for argv, out in jobs]
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(n_parallel, mp_context=multiprocessing.get_context("spawn")) as pool:
        return list(pool.map(run_seed, [j[0] for j in jobs], [j[1] for j in jobs]))


def summarize_run(seed: int, res: dict[str, Any], out: Path, steps: int) -> dict[str, Any]:
    """One seed's entry of a result file from its `run_seed` output: the evaluation curve (with the reward model's
    counters when the run had one), the first env step at >= 90 % success, final / best rates, updates/s."""
    rows = res["rows"]
    curve = []
    for r in rows:
        c = {"env_step": r["env_step"], "success_rate": r["success_rate"], "return": r.get("return"),
             "updates": r.get("updates"), "train_success_rate": r.get("train_success_rate")}
        c.update({k: v for k, v in r.items() if k.startswith("reward_")})
        curve.append(c)
    return {"seed": seed, "curve": curve, "wall_s": res["wall_s"], "cpu_s": res.get("cpu_s"),
            "stopped_by_budget": bool(rows) and rows[-1]["env_step"] < steps,
            "first_step_at_90": first_step_at(rows, SUCCESS_BAR),
            "final_success_rate": rows[-1]["success_rate"] if rows else None,
            "best_success_rate": max((r["success_rate"] for r in rows), default=None),
            "env_steps_done": rows[-1]["env_step"] if rows else 0,
            "updates_per_s": float(np.mean([r["updates_per_s"] for r in rows[1:]])) if len(rows) > 1 else None,
            "run_dir": str(out)}


def first_step_at(rows: list[dict[str, Any]], bar: float, key: str = "success_rate") -> int | None:
    """The env step of the first metrics row whose `key` reaches `bar` (None if none does)."""
    for r in rows:
        if r.get(key) is not None and r[key] >= bar:
            return int(r["env_step"])
    return None


def split_passthrough(argv: list[str]) -> tuple[list[str], list[str]]:
    """(this script's arguments, the ones after `--` that go on to the command it runs)."""
    if "--" not in argv:
        return argv, []
    i = argv.index("--")
    return argv[:i], argv[i + 1:]


def save_figure(fig: Any, path: Path) -> None:
    """Write a matplotlib figure to `path` atomically (a temporary file, then a rename) and close it."""
    import matplotlib.pyplot as plt

    tmp = path.with_name(path.name + ".tmp.png")
    fig.savefig(tmp, dpi=100)
    plt.close(fig)
    tmp.replace(path)


def pyplot() -> Any:
    """matplotlib.pyplot on the file-only Agg backend; MissingExtraError naming the `sim` extra without it."""
    from robot_rl.extras import optional_import

    matplotlib = optional_import("matplotlib", extra="sim", purpose="benchmark plots")
    matplotlib.use("Agg")
    return optional_import("matplotlib.pyplot", extra="sim")


def write_result(result: dict[str, Any], path: Path, plot_fn: Any) -> None:
    """Write a benchmark's result dict as JSON to `path` atomically (a temporary file, then a rename), draw its
    figure with `plot_fn(result, png_path)` beside it (same name, .png) and say where both went."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(result, indent=1))
    tmp.replace(path)
    plot_fn(result, path.with_suffix(".png"))
    print(f"wrote {path} and {path.with_suffix('.png').name}")


def _bin(env_step: int, every: int) -> int:
    """An evaluation's env step rounded to the nearest multiple of the evaluation period."""
    return int(round(env_step / every) * every) if every > 0 else int(env_step)


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


def mean_first_step(runs: list[dict[str, Any]], steps: int) -> float:
    """Mean over seeds of the first env step at >= 90 % (a seed that never reaches it counts as `steps`)."""
    return float(np.mean([steps if r["first_step_at_90"] is None else r["first_step_at_90"] for r in runs]))


def mean_curve(runs: list[dict[str, Any]], every: int) -> list[tuple[int, float]]:
    """(binned env step, mean success) where every seed has an evaluation."""
    grid: dict[int, list[float]] = {}
    for run in runs:
        for c in run["curve"]:
            grid.setdefault(_bin(c["env_step"], every), []).append(c["success_rate"])
    return sorted((x, float(np.mean(v))) for x, v in grid.items() if len(v) == len(runs))


def print_success_table(columns: list[tuple[str, dict[str, Any]]], every: int, width: int = 8,
                        mean: bool = True) -> None:
    """Evaluation success per binned env step (rows) and labelled run (columns), with the row mean unless `mean` is
    False; a run without an evaluation in a bin shows '-'."""
    steps = sorted({_bin(c["env_step"], every) for _, r in columns for c in r["curve"]})
    header = f"{'env steps':>9} " + " ".join(f"{label:>{width}}" for label, _ in columns) + \
        (f" {'mean':>6}" if mean else "")
    print(header)
    print("-" * len(header))
    for s in steps:
        vals = [next((c["success_rate"] for c in r["curve"] if _bin(c["env_step"], every) == s), None)
                for _, r in columns]
        shown = " ".join(f"{v:>{width}.0%}" if v is not None else f"{'-':>{width}}" for v in vals)
        have = [v for v in vals if v is not None]
        print(f"{s:>9} {shown} {np.mean(have):>6.0%}" if mean and have else f"{s:>9} {shown}")


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
    ax.set_xlabel("env steps")
    ax.set_ylabel(f"success ({result['eval_episodes']} eval episodes)")
    ax.set_ylim(-0.03, 1.03)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(f"{result['task']} ({result['obs_mode']}, {result.get('backend', 'torch')}), {result['demos']} "
                 "scripted demos")
    fig.tight_layout()
    save_figure(fig, path)


def main(argv: list[str] | None = None) -> int:
    argv, extra = split_passthrough(list(sys.argv[1:] if argv is None else argv))
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--task", default="twin-pick-cube")
    p.add_argument("--obs-mode", default="state", choices=("state", "pixels"))
    p.add_argument("--image-size", type=int, default=64, help="pixels mode: camera image size")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--steps", type=int, default=20_000, help="env steps per seed")
    p.add_argument("--eval-every", type=int, default=1000)
    p.add_argument("--eval-episodes", type=int, default=20)
    p.add_argument("--demos", type=int, default=20, help="scripted demo episodes")
    p.add_argument("--budget-min", type=float, default=0.0, help="wall-clock budget per seed in minutes (0 = none)")
    p.add_argument("--device", default="auto")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--jobs", type=int, default=1, help="seeds trained in parallel processes")
    p.add_argument("--backend", default="torch", choices=("torch", "jax"),
                   help="learner backend (robot-rl train --backend); results of jax get a _jax suffix")
    p.add_argument("--work", type=Path, default=None, help="demos + run directories (default: a temporary one)")
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    p.add_argument("--label", default="", help="suffix of the result files (a variant beside the plain run)")
    p.add_argument("--baseline", type=Path, default=None,
                   help="a result file measured the same way to compare with (sample_efficiency or learned_reward)")
    args = p.parse_args(argv)
    baseline = load_baseline(args.baseline) if args.baseline is not None else None
    if baseline is not None:
        for key in ("task", "obs_mode", "steps", "eval_every", "eval_episodes"):
            if baseline[key] != getattr(args, key):
                raise SystemExit(f"--baseline {args.baseline}: its {key} is {baseline[key]!r}, this run's "
                                 f"{getattr(args, key)!r}: compare runs measured the same way")

    import torch

    work = args.work or Path(tempfile.mkdtemp(prefix="sample_efficiency_"))
    pixels = args.obs_mode == "pixels"
    image_size = args.image_size if pixels else None
    demos = record_demos(args.task, args.obs_mode, image_size,
                         args.demos, work / f"demos_{args.task}_{args.obs_mode}{image_size or ''}")
    from learners.agents.recipes import recipe_for

    task_recipe = recipe_for(args.task)
    recipe = {"agent": task_recipe.overrides(args.obs_mode), "updates_per_step": task_recipe.updates_per_step}
    tag = (f"{args.task}_{args.obs_mode}{image_size or ''}{'' if args.backend == 'torch' else '_' + args.backend}"
           f"{'_' + args.label if args.label else ''}")
    runs = []
    jobs: list[tuple[int, list[str], Path]] = []
    for seed in args.seeds:
        out = work / f"run_{tag}_seed{seed}_{time.strftime('%H%M%S')}"
        train_argv = ["--task", args.task, "--obs-mode", args.obs_mode, "--demos", str(demos),
                      "--max-env-steps", str(args.steps), "--eval-every", str(args.eval_every),
                      "--eval-episodes", str(args.eval_episodes), "--checkpoint-every", str(args.steps),
                      "--seed", str(seed), "--device", args.device, "--threads", str(args.threads),
                      "--backend", args.backend,
                      *(["--image-size", str(image_size), "--replay-capacity", "30000"] if image_size else []),
                      *extra]
        if args.budget_min > 0:
            train_argv += ["--max-minutes", str(args.budget_min)]
        print(f"[sample-efficiency] seed {seed}: robot-rl train {' '.join(train_argv)} --out {out}", flush=True)
        jobs.append((seed, train_argv, out))
    results = run_jobs([(argv, out) for _, argv, out in jobs], args.jobs)
    for (seed, _, out), res in zip(jobs, results, strict=True):
        runs.append(summarize_run(seed, res, out, args.steps))
    dev = ("cuda" if torch.cuda.is_available() else "cpu") if args.device == "auto" else args.device
    result = {"benchmark": "sample_efficiency", "task": args.task, "obs_mode": args.obs_mode,
              "image_size": image_size, "demos": args.demos, "steps": args.steps, "eval_every": args.eval_every,
              "eval_episodes": args.eval_episodes, "seeds": args.seeds, "recipe": recipe, "extra_flags": extra,
              "label": args.label, "budget_min": args.budget_min, "backend": args.backend, "device": dev,
              "threads": args.threads,
              "jobs": args.jobs,
              "machine": platform.machine(), "cpu_count": os.cpu_count(), "torch": torch.__version__,
              "success_bar": SUCCESS_BAR, "runs": runs, "time": time.strftime("%Y-%m-%dT%H:%M:%S")}

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
