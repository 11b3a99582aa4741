"""Warm start without keeping offline data (WSRL, Zhou et al. 2024): does success dip at the offline-to-online
switch, by how much, and how long until it is back?

Per seed, with the real entry point (`robot_rl.cli.main(["train", ...])`, i.e. `robot-rl train`):

1. data, recorded once for all seeds: `--demos` scripted demonstrations (`robot-rl record-demos`, human rows) and
   `--rollouts` recorded rollouts of a noisy scripted policy (Gaussian noise `--rollout-noise` on the arm actions,
   failures kept, saved with intervention = False: not human rows), a stand-in for an earlier policy's rollouts;
2. the offline phase: `robot-rl train --demos DEMOS ROLLOUTS --offline-updates N --max-env-steps 0` (N agent
   updates on that data alone, then an evaluation and a checkpoint);
3. the warm start: `robot-rl train --init-from OFFLINE_RUN --warmup-steps W --max-env-steps STEPS`: the loaded agent
   is evaluated at env step 0 (the level at the switch), collects W steps with no updates, then fine-tunes on online
   data only (with `--retain`: on online + the offline data at the demo ratio, the comparison WSRL argues against).

Reads both runs' metrics.jsonl (deterministic evaluations of `--eval-episodes` seeded episodes) and reports per
seed: success at the switch (env step 0 of the warm start), the minimum in the first `--dip-window` env steps after
it (and where), the dip (switch - minimum), the first evaluation after the minimum back at the switch level, the
final and best success. Prints a table and writes benchmarks/results/warm_start_<task>[_<label>].json and .png.
Anything after `--` goes to both `robot-rl train` runs.

    python benchmarks/warm_start.py                                       # pick-cube (state), 3 seeds
    python benchmarks/warm_start.py --jobs 2 --work runs/ws_pick          # two seeds at a time (1 core each)
    python benchmarks/warm_start.py --retain --label retain --work runs/ws_pick   # keep the offline data
    python benchmarks/warm_start.py --seeds 0 --steps 300 --offline-updates 50 --demos 2 --rollouts 2 \\
        --eval-every 100 --eval-episodes 2 --warmup-steps 50 --dip-window 200 --out /tmp/ws   # smoke (~1-2 min)
"""

from __future__ import annotations

import dataclasses
import sys
import time
from pathlib import Path
from typing import Any

from _prelude import (
    add_label,
    add_out_dir,
    add_work_dir,
    bench_parser,
    cell,
    device_name,
    host_info,
    mean_curve,
    parallel_map,
    print_table,
    pyplot,
    rate_axes,
    recipe_summary,
    result_name,
    save_figure,
    set_env_defaults,
    split_passthrough,
    timestamp,
    work_dir,
    write_result,
)

set_env_defaults()

import numpy as np  # noqa: E402
from sample_efficiency import record_demos  # noqa: E402

from robot_rl.metrics import read_metrics  # noqa: E402


def record_rollouts(task: str, episodes: int, noise: float, out: Path, seed: int = 100_000) -> Path:
    """`episodes` rollouts of the scripted expert with Gaussian noise `noise` on its arm actions (failures kept),
    saved with intervention = False (not human rows); skipped when `out` already holds enough episodes."""
    from demos.devices.teleop import make_device
    from demos.recording.demos import make_recording_env, record_episode
    from robot_rl.episodes import episode_paths, save_episode
    from robot_rl.presets import get_preset

    have = len(episode_paths(out)) if out.is_dir() else 0
    if have >= episodes:
        return out
    env_kwargs = get_preset(task).make_kwargs(obs_mode="state", image_size=None)
    env = make_recording_env(task, None, None, **env_kwargs)
    device = make_device("scripted", task=task, seed=seed + have, noise_std=noise)
    try:
        for i in range(have, episodes):
            ep = record_episode(env, device, seed=seed + i, task=task, env_kwargs=env_kwargs)
            ep = dataclasses.replace(ep, intervention=np.zeros_like(ep.intervention),
                                     info={**ep.info, "teleop": f"scripted rollout, noise {noise}"})
            save_episode(ep, out)
    finally:
        env.close()
    return out


def rollout_success(directory: Path) -> tuple[int, int]:
    """(successful episodes, episodes) in an episode directory."""
    from robot_rl.episodes import load_dir

    eps = load_dir(directory)[0]
    return sum(bool(ep.is_success) for ep in eps), len(eps)


def switch_stats(rows: list[dict[str, Any]], window: int) -> dict[str, Any]:
    """The dip of a warm start's evaluation rows (the first at env step 0): success at the switch, the minimum over
    the evaluations in (0, window] env steps and its step, the dip (switch - minimum, >= 0), the first evaluation
    after the minimum (after the switch when there is no dip) at or above the switch level, the final and best."""
    if not rows or rows[0]["env_step"] != 0:
        raise SystemExit("the warm start's metrics have no evaluation at env step 0")
    switch = float(rows[0]["success_rate"])
    after = [r for r in rows[1:] if r["env_step"] <= window]
    low = min(after, key=lambda r: (r["success_rate"], r["env_step"])) if after else None
    min_after = float(low["success_rate"]) if low is not None else None
    start = int(low["env_step"]) if low is not None and min_after is not None and min_after < switch else 0
    back = next((int(r["env_step"]) for r in rows[1:] if r["env_step"] >= max(start, 1)
                 and r["success_rate"] >= switch), None)
    return {"switch_success": switch, "min_after_switch": min_after,
            "min_step": int(low["env_step"]) if low is not None else None,
            "dip": max(0.0, switch - min_after) if min_after is not None else None,
            "back_at_switch_level_step": back, "final_success": float(rows[-1]["success_rate"]),
            "best_success": max(float(r["success_rate"]) for r in rows), "env_steps_done": int(rows[-1]["env_step"])}


def run_seed(offline_argv: list[str], warm_argv: list[str], offline_out: Path, warm_out: Path) -> dict[str, Any]:
    """The offline phase, then the warm start from it, in this process; both runs' metrics rows and wall times."""
    from robot_rl.cli import main as robot_rl_main

    t0 = time.perf_counter()
    if not (offline_out / "checkpoints").is_dir():  # a finished offline phase in --work is reused
        if robot_rl_main(["train", *offline_argv, "--out", str(offline_out)]) != 0:
            raise SystemExit(f"robot-rl train (offline phase) failed for {offline_out}")
    t1 = time.perf_counter()
    if robot_rl_main(["train", *warm_argv, "--init-from", str(offline_out), "--out", str(warm_out)]) != 0:
        raise SystemExit(f"robot-rl train (warm start) failed for {warm_out}")
    return {"offline_rows": read_metrics(offline_out / "metrics.jsonl"), "offline_wall_s": t1 - t0,
            "warm_rows": read_metrics(warm_out / "metrics.jsonl"), "warm_wall_s": time.perf_counter() - t1}


def plot(result: dict[str, Any], path: Path) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.5, 3.8))
    for run in result["runs"]:
        xs = [r["env_step"] for r in run["curve"]]
        ys = [r["success_rate"] for r in run["curve"]]
        line = ax.plot(xs, ys, marker="o", markersize=3, alpha=0.7, label=f"seed {run['seed']}")[0]
        ax.axhline(run["switch_success"], color=line.get_color(), linestyle=":", linewidth=1)
    n = len(result["runs"])
    mean = mean_curve(result["runs"], result["eval_every"])  # evaluations run at episode ends: binned
    if n > 1 and mean:
        ax.plot([m[0] for m in mean], [m[1] for m in mean], color="black", linewidth=2, label="mean")
    ax.axvline(result["warmup_steps"], color="grey", linestyle="--", linewidth=1, label="end of warm-up")
    rate_axes(ax, "online env steps after the switch", f"success ({result['eval_episodes']} eval episodes)",
              legend_fontsize=7)
    data = "online + offline data" if result["retain"] else "online data only"
    ax.set_title(f"{result['task']} warm start after {result['offline_updates']} offline updates ({data}); "
                 "dotted: level at the switch", fontsize=8)
    save_figure(fig, path)


def main(argv: list[str] | None = None) -> int:
    argv, extra = split_passthrough(list(sys.argv[1:] if argv is None else argv))
    p = bench_parser(__doc__)
    p.add_argument("--task", default="twin-pick-cube")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--demos", type=int, default=20, help="scripted demo episodes (human rows)")
    p.add_argument("--rollouts", type=int, default=40, help="recorded noisy rollouts (not human; failures kept)")
    p.add_argument("--rollout-noise", type=float, default=1.0,
                   help="std of the Gaussian noise on the rollouts' arm actions ([-1, 1] units; on pick-cube 1.0 "
                        "left 6 of 8 rollouts successful in a check, 2.0 1 of 8)")
    p.add_argument("--offline-updates", type=int, default=20_000, help="agent updates of the offline phase")
    p.add_argument("--warmup-steps", type=int, default=200, help="WSRL warm-up: env steps before the first update")
    p.add_argument("--steps", type=int, default=20_000, help="online env steps of the warm start")
    p.add_argument("--eval-every", type=int, default=500)
    p.add_argument("--eval-episodes", type=int, default=20)
    p.add_argument("--dip-window", type=int, default=5000, help="env steps after the switch searched for the minimum")
    p.add_argument("--retain", action="store_true", help="the warm start also samples the offline data (--demos)")
    p.add_argument("--device", default="auto")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--jobs", type=int, default=1, help="seeds run in parallel processes")
    add_work_dir(p, "data + run directories")
    add_out_dir(p)
    add_label(p)
    args = p.parse_args(argv)

    work = work_dir(args.work, "warm_start_")
    demos = record_demos(args.task, "state", None, args.demos, work / f"demos_{args.task}_state")
    rollouts = record_rollouts(args.task, args.rollouts, args.rollout_noise,
                               work / f"rollouts_{args.task}_noise{args.rollout_noise}")
    rollout_ok, rollout_n = rollout_success(rollouts)
    print(f"[warm-start] data: {args.demos} demos in {demos}; {rollout_n} rollouts in {rollouts} "
          f"({rollout_ok} successful, {rollout_n - rollout_ok} failed)", flush=True)
    tag = result_name(args.task, args.label)
    common = ["--task", args.task, "--obs-mode", "state", "--eval-episodes", str(args.eval_episodes),
              "--device", args.device, "--threads", str(args.threads)]
    jobs: list[tuple[int, list[str], list[str], Path, Path]] = []
    for seed in args.seeds:
        offline_out = work / f"offline_{args.task}_{args.offline_updates}_seed{seed}"
        warm_out = work / f"warm_{tag}_seed{seed}_{time.strftime('%H%M%S')}"
        offline_argv = [*common, "--demos", str(demos), str(rollouts), "--offline-updates", str(args.offline_updates),
                        "--max-env-steps", "0", "--seed", str(seed), *extra]
        warm_argv = [*common, "--warmup-steps", str(args.warmup_steps), "--max-env-steps", str(args.steps),
                     "--eval-every", str(args.eval_every), "--checkpoint-every", str(args.steps), "--seed", str(seed),
                     *(["--demos", str(demos), str(rollouts)] if args.retain else []), *extra]
        print(f"[warm-start] seed {seed}: robot-rl train {' '.join(offline_argv)} --out {offline_out}\n"
              f"[warm-start] seed {seed}: robot-rl train {' '.join(warm_argv)} --init-from {offline_out} "
              f"--out {warm_out}", flush=True)
        jobs.append((seed, offline_argv, warm_argv, offline_out, warm_out))
    results = parallel_map(run_seed, [j[1:] for j in jobs], args.jobs)  # 1 core each at --threads 1
    runs = []
    for (seed, _, _, offline_out, warm_out), res in zip(jobs, results, strict=True):
        rows, off = res["warm_rows"], res["offline_rows"]
        curve = [{"env_step": r["env_step"], "success_rate": r["success_rate"], "return": r.get("return"),
                  "updates": r.get("updates"), "train_success_rate": r.get("train_success_rate"),
                  "q_mean": r.get("q_mean")} for r in rows]
        runs.append({"seed": seed, **switch_stats(rows, args.dip_window), "curve": curve,
                     "offline_success": off[-1]["success_rate"] if off else None,
                     "offline_q_mean": off[-1].get("q_mean") if off else None,
                     "offline_wall_s": res["offline_wall_s"], "warm_wall_s": res["warm_wall_s"],
                     "offline_run_dir": str(offline_out), "warm_run_dir": str(warm_out)})
    dev = device_name(args.device)
    result = {"benchmark": "warm_start", "task": args.task, "obs_mode": "state", "demos": args.demos,
              "rollouts": rollout_n, "rollout_successes": rollout_ok, "rollout_noise": args.rollout_noise,
              "offline_updates": args.offline_updates, "warmup_steps": args.warmup_steps, "steps": args.steps,
              "eval_every": args.eval_every, "eval_episodes": args.eval_episodes, "dip_window": args.dip_window,
              "retain": args.retain, "seeds": args.seeds, "label": args.label, "extra_flags": extra,
              "recipe": recipe_summary(args.task),
              "device": dev, "threads": args.threads, "jobs": args.jobs, **host_info(), "runs": runs,
              "time": timestamp()}

    data = "online + offline data" if args.retain else "online data only"
    print(f"\n{args.task} (state): offline phase of {args.offline_updates} updates on {args.demos} demos + {rollout_n} "
          f"rollouts, then a warm start ({args.warmup_steps} warm-up steps, {data}); success over "
          f"{args.eval_episodes} deterministic eval episodes:")
    print_table(f"{'seed':>4} {'switch':>7} {f'min <= {args.dip_window}':>12} {'at step':>8} {'dip':>6} "
                f"{'back at':>8} {'final':>6} {'best':>6}",
                [f"{r['seed']:>4} {cell(r['switch_success'], '>7.0%')} {cell(r['min_after_switch'], '>12.0%')} "
                 f"{cell(r['min_step'], '>8')} {cell(r['dip'], '>6.0%')} "
                 f"{r['back_at_switch_level_step'] or 'never':>8} {cell(r['final_success'], '>6.0%')} "
                 f"{cell(r['best_success'], '>6.0%')}" for r in runs])
    for r in runs:
        print(f"seed {r['seed']}: offline {r['offline_wall_s'] / 60:.1f} min, warm start {r['env_steps_done']} env "
              f"steps in {r['warm_wall_s'] / 60:.1f} min")
    write_result(result, args.out / f"warm_start_{tag}.json", plot)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
