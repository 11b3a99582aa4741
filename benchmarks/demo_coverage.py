"""Where a policy fails, against where its demos were: does it fail on scenes no demo showed?

For each run directory given (any run `robot-rl eval` accepts, with its demos: a `robot-rl sim` run's own demos/,
or `--demos DIR` per run), its newest checkpoint runs `--episodes` deterministic episodes on seeded scenes
(learners.training.evaluation.evaluate_checkpoint: the run's own timing and reward; success is the twin's truth).
Each evaluation scene's start and each demo's (from the seed in its episode file) are read off the twin's objects
after a reset at that seed (`demos.recording.scenes.scene_point`: the `*_pos` entries, privileged: metrics only),
and each evaluation scene gets its distance to the nearest demo's. The table: the success rate, the success on
scenes within and beyond `--near-cm` of a demo, the median nearest-demo distance of the failed and the successful
scenes, and the demos' cover (the largest nearest-demo distance over the evaluation scenes).

Run: `python benchmarks/demo_coverage.py RUN [RUN ...] [--labels NAME ...] [--demos DIR ...] [--episodes 100]
[--label L]`. Writes benchmarks/results/demo_coverage.json (demo_coverage_L.json with --label).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from _prelude import (
    add_label,
    add_out_dir,
    add_run_labels,
    bench_parser,
    cell,
    host_info,
    load_average,
    print_table,
    result_name,
    run_labels,
    set_env_defaults,
    timestamp,
    write_json,
)

set_env_defaults(one_thread=True)

import numpy as np  # noqa: E402

SEED = 2_000_000


def demo_seeds(demos: Path) -> list[int]:
    """The env seed of each episode file in `demos` (its info's "seed"; record-demos writes it)."""
    from robot_rl.episodes import load_dir

    episodes, errors = load_dir(demos)
    if errors or not episodes:
        raise SystemExit(f"{demos}: no loadable demos ({len(errors)} unreadable)")
    seeds = [ep.info.get("seed") for ep in episodes]
    ints = [s for s in seeds if isinstance(s, int)]
    if len(ints) != len(seeds):
        raise SystemExit(f"{demos}: an episode without its env seed (info['seed']): not recorded by record-demos")
    return ints


def scene_points(task: str, seeds: list[int]) -> np.ndarray:
    """The twin's object positions after a reset at each seed, shape (len(seeds), D), metres."""
    from demos.recording.scenes import scene_points as points_of
    from robot_rl.gym_env import make_task_env

    env = make_task_env(task, obs_mode="state")
    try:
        return points_of(env, seeds)
    finally:
        env.close()


def measure(run: Path, demos: Path, episodes: int, near_m: float) -> dict[str, Any]:
    from learners.training.evaluation import evaluate_checkpoint

    row = evaluate_checkpoint(run, episodes, seed=SEED, per_episode=True)
    ok = np.array(row.pop("episode_successes"), bool)
    seeds = demo_seeds(demos)
    points = scene_points(row["task"], [SEED + i for i in range(episodes)] + seeds)  # one twin for both
    starts, shown = points[:episodes], points[episodes:]
    nearest = np.linalg.norm(starts[:, None] - shown[None], axis=-1).min(axis=1)
    near = nearest < near_m

    def rate(mask: np.ndarray) -> float | None:
        return float(ok[mask].mean()) if mask.any() else None

    def median(mask: np.ndarray) -> float | None:
        return float(np.median(nearest[mask])) if mask.any() else None

    return {"run": str(run), "demos": str(demos), "demo_seeds": seeds, **row,
            "true_success_rate": float(ok.mean()), "near_scenes": int(near.sum()),
            "success_near": rate(near), "success_far": rate(~near),
            "failed_nearest_demo_m_median": median(~ok), "succeeded_nearest_demo_m_median": median(ok),
            "cover_m": float(nearest.max()),
            "episodes_detail": [{"seed": SEED + i, "success": bool(ok[i]), "nearest_demo_m": float(nearest[i]),
                                 "start": starts[i].round(4).tolist()} for i in range(episodes)]}


def main(argv: list[str] | None = None) -> None:
    p = bench_parser(__doc__)
    p.add_argument("runs", nargs="+", type=Path, help="run directories (or checkpoints) robot-rl eval accepts")
    add_run_labels(p)
    p.add_argument("--demos", nargs="+", type=Path, default=None,
                   help="each run's demo directory (default: RUN/demos, where robot-rl sim records them)")
    p.add_argument("--episodes", type=int, default=100)
    p.add_argument("--near-cm", type=float, default=5.0, help="a scene this close to a demo's counts as shown")
    add_label(p)
    add_out_dir(p)
    args = p.parse_args(argv)
    labels = run_labels(p, args)
    demos = args.demos or [r / "demos" for r in args.runs]
    if len(demos) != len(args.runs):
        p.error(f"--demos: {len(demos)} given for {len(args.runs)} runs")
    results = [{"label": name, **measure(run, d, args.episodes, args.near_cm / 100.0)}
               for run, d, name in zip(args.runs, demos, labels, strict=True)]
    cm = lambda v: cell(v and 100 * v, "6.1f")  # noqa: E731
    print_table(f"{'run':>24} {'demos':>5} {'success':>7} {'near':>5} {'far':>5} {'fail cm':>7} {'ok cm':>6} "
                f"{'cover':>6}",
                [f"{r['label'][-24:]:>24} {len(r['demo_seeds']):5d} {r['true_success_rate']:7.0%} "
                 f"{cell(r['success_near'], '5.0%')} {cell(r['success_far'], '5.0%')} "
                 f"{cm(r['failed_nearest_demo_m_median']):>7} {cm(r['succeeded_nearest_demo_m_median'])} "
                 f"{cm(r['cover_m'])}" for r in results])
    out = args.out / f"{result_name('demo_coverage', args.label)}.json"
    write_json(out, {"benchmark": "demo_coverage", "time": timestamp(), **host_info(), "load_average":
                     load_average(), "episodes": args.episodes, "first_seed": SEED, "near_m": args.near_cm / 100.0,
                     "runs": results})
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
