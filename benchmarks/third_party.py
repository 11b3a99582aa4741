"""Third-party env: `robot-rl train` on gym-hil's PandaPickCubeBase-v0 with the cube at a seeded random position
(benchmarks/gym_hil_random.py), an env no default was tuned on, installed from PyPI (the `bench` extra), with demos
of a scripted privileged-state expert (benchmarks/third_party_expert.py).

Steps: (1) the expert's success rate is measured over `--expert-episodes` seeds, without noise and with the demos'
noise; (2) `--demos` successful expert episodes (position noise `--demo-noise` x its largest step, so the demos are
more varied than the cube positions alone make them) are recorded into
WORK/demos_gym_hil_pick_cube_noiseN in the project's episode format (kept between runs with the same --work:
episodes already there count); (3) for each seed, the real training entry point runs in process,

    robot-rl train --env-id robot_rl_bench/PandaPickCubeRandom-v0 --env-module gym_hil_random --demos DIR
        --success-key succeed --action-scale auto --max-env-steps STEPS --eval-every E --eval-episodes N --seed S
        --threads 1 ...

with no recipe (an --env-id run gets the AgentConfig defaults); anything after `--` goes on to `robot-rl train`
and wins. Why the two env flags: gym-hil reports success as info["succeed"] (`--success-key succeed`; without it
every success rate reads 0), and its position actions are metres per step with bounds of +-1 m, while the expert's
steps are a few cm (`--action-scale auto`: the agent's [-1, 1] covers the demos' range per dim).

The learning curves come from the runs' metrics.jsonl (deterministic policy, `--eval-episodes` episodes, each from
its own seeded cube position).
Prints the expert's figures and a success table (per evaluation and seed, first env step at >= 90 %), writes
benchmarks/results/third_party_gym_hil_pick_cube[_LABEL].json (expert success rates, demo count and recording
stats, the train flags, per-seed curves) and its PNG.

    python benchmarks/third_party.py                                   # 3 seeds x 10k env steps, 20 demos
    python benchmarks/third_party.py --jobs 3 --work /tmp/tp           # seeds in parallel, demos kept in /tmp/tp
    python benchmarks/third_party.py --seeds 0 --steps 3000 -- --obs-norm   # shorter; extra train flags
"""

from __future__ import annotations

import sys
import time
from importlib import metadata
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
    print_success_table,
    print_table,
    result_name,
    split_passthrough,
    summarize_run,
    timestamp,
    training_run_flags,
    work_dir,
    write_result,
)
from sample_efficiency import plot, run_jobs  # sets the environment defaults before numpy loads
from third_party_expert import ENV_ID, ENV_MODULE, SUCCESS_KEY, ExpertConfig, measure, record_demos

RESULT_STEM = "third_party_gym_hil_pick_cube"
ENV_FLAGS = ["--env-id", ENV_ID, "--env-module", ENV_MODULE, "--success-key", SUCCESS_KEY, "--action-scale", "auto"]
"""The `robot-rl train` flags this env needs (see the module docstring)."""


def version_of(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def main(argv: list[str] | None = None) -> int:
    argv, extra = split_passthrough(list(sys.argv[1:] if argv is None else argv))
    p = bench_parser(__doc__)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="training seeds")
    p.add_argument("--steps", type=int, default=10_000, help="env steps per seed")
    p.add_argument("--eval-every", type=int, default=1000, help="env steps between evaluations")
    p.add_argument("--eval-episodes", type=int, default=20, help="episodes per evaluation")
    p.add_argument("--demos", type=int, default=20, help="expert demo episodes (successful ones)")
    p.add_argument("--demo-noise", type=float, default=0.3,
                   help="the demos' position noise, std as a fraction of the expert's largest step")
    p.add_argument("--expert-episodes", type=int, default=30, help="episodes of the expert's success measurement")
    p.add_argument("--device", default="auto")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads per run")
    p.add_argument("--jobs", type=int, default=1, help="seeds trained in parallel processes")
    add_work_dir(p, "demos + run directories")
    add_out_dir(p)
    add_label(p)
    args = p.parse_args(argv)
    if min(args.steps, args.eval_every, args.eval_episodes, args.demos, args.expert_episodes) < 1 \
            or args.demo_noise < 0:
        raise SystemExit("--steps, --eval-every, --eval-episodes, --demos and --expert-episodes must be >= 1, "
                         "--demo-noise >= 0")
    if version_of("gym-hil") is None:
        raise SystemExit("gym-hil is not installed: pip install -e '.[bench]' (the bench extra)")

    expert = [measure(args.expert_episodes, ExpertConfig(noise=n)) for n in sorted({0.0, args.demo_noise})]
    print_table(f"{'expert noise':>12} {'success':>8} {'episodes':>9} {'steps (mean)':>13}",
                [f"{r['noise']:>12.2f} {r['success_rate']:>8.0%} {r['episodes']:>9} "
                 f"{r['steps_mean'] or float('nan'):>13.1f}" for r in expert])
    work = work_dir(args.work, "third_party_")
    demo_dir = work / f"demos_gym_hil_pick_cube_noise{args.demo_noise:g}"
    recording = record_demos(demo_dir, args.demos, ExpertConfig(noise=args.demo_noise), first_seed=0)
    if recording["kept"] < args.demos:
        raise SystemExit(f"the expert kept {recording['kept']} of {args.demos} demos in {recording['attempts']} "
                         f"attempts ({demo_dir})")

    tag = result_name(RESULT_STEM, args.label)
    jobs: list[tuple[list[str], Path]] = []
    for seed in args.seeds:
        out = work / f"run_{tag}_seed{seed}_{time.strftime('%H%M%S')}"
        train_argv = [*ENV_FLAGS, "--demos", str(demo_dir),
                      *training_run_flags(args.steps, args.eval_every, args.eval_episodes, seed),
                      "--device", args.device, "--threads", str(args.threads), *extra]
        print(f"[third-party] seed {seed}: robot-rl train {' '.join(train_argv)} --out {out}", flush=True)
        jobs.append((train_argv, out))
    runs = [summarize_run(seed, res, out, args.steps)
            for seed, (_, out), res in zip(args.seeds, jobs, run_jobs(jobs, args.jobs), strict=True)]

    result: dict[str, Any] = {
        "benchmark": "third_party", "env_id": ENV_ID, "task": ENV_ID, "obs_mode": "state",
        "versions": {d: version_of(d) for d in ("gym-hil", "mujoco", "torch")},
        "expert": {"success_rate": expert[0]["success_rate"], "episodes": args.expert_episodes,
                   "by_noise": expert},
        "demos": args.demos, "demo_noise": args.demo_noise, "demo_recording": recording, "demo_dir": str(demo_dir),
        "steps": args.steps, "eval_every": args.eval_every, "eval_episodes": args.eval_episodes,
        "seeds": args.seeds, "train_flags": ENV_FLAGS, "extra_flags": extra, "label": args.label,
        "device": device_name(args.device), "threads": args.threads, "jobs": args.jobs, **host_info(),
        "success_bar": SUCCESS_BAR, "runs": runs, "time": timestamp()}
    print(f"\n{ENV_ID} (state), {args.demos} expert demos (expert success {expert[0]['success_rate']:.0%} over "
          f"{args.expert_episodes} seeds), success over {args.eval_episodes} deterministic eval episodes:")
    print_success_table([(f"seed {r['seed']}", r) for r in runs], args.eval_every)
    for r in runs:
        print(f"seed {r['seed']}: first >= {SUCCESS_BAR:.0%} at {r['first_step_at_90'] or 'never'}, final "
              f"{r['final_success_rate']}, {r['env_steps_done']} env steps in {r['wall_s'] / 60:.1f} min")
    write_result(result, args.out / f"{tag}.json", plot)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
