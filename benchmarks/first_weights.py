"""The first weights an arm runs: the policy a learner publishes first, with and without its offline phase on the
demos (`robot-rl learner --offline-updates N`), measured on the twin.

Without an offline phase a learner's first weights are a few updates old (published at its first `publish_every`
updates after `learning_starts` online transitions): close to the untrained stochastic policy. With it, the first
weights come after N updates on the demo buffer alone. Per N: a fresh agent of the task's state recipe (pick-cube, 20
scripted demos recorded with `robot-rl record-demos`), N updates through the learner's own offline phase
(learners.training.online.train_offline, the function the learner runs), then --episodes episodes of the policy as an
actor runs it (stochastic: the actor's default) and deterministic, seeded; and the action spread on the demos'
states: the policy's sampled actions (8 per state) against the demo's action there (mean |a - a_demo| per dim), and
the std of those samples per dim beside the demos' own action std across their states. N = 0 stands for the
untrained policy (today's first weights are at most a few updates from it).

Run: `python benchmarks/first_weights.py [--updates 0 250 1000]`. Writes benchmarks/results/first_weights.json. One
thread, fixed seeds.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from _prelude import (
    add_out_dir,
    bench_parser,
    host_info,
    load_average,
    print_table,
    set_env_defaults,
    timestamp,
    write_json,
)

set_env_defaults(one_thread=True)

import numpy as np  # noqa: E402
from sample_efficiency import record_demos  # noqa: E402


def _obs_at(flat: dict[str, np.ndarray], i: int) -> dict[str, Any]:
    """Row i of a replay batch's observations ({'state': ..., 'object/cube_pos': ...}) as the env's nested dict."""
    from learners.agents.obs import nested

    return nested({path: arr[i] for path, arr in flat.items()})


def measure(task: str, demos: Path, updates: int, episodes: int, seed: int) -> dict[str, Any]:
    import torch

    from learners.training.config import TrainConfig
    from learners.training.online import LoopCounters, evaluate_episodes, train_offline
    from learners.training.train import build_run

    torch.manual_seed(seed)
    run = build_run(TrainConfig(task=task, obs_mode="state", demos=str(demos), offline_updates=max(1, updates),
                                max_env_steps=0, seed=seed, threads=1))
    try:
        assert run.demo is not None
        for _ in train_offline(run.agent, run.demo, updates, LoopCounters(), report_every=max(1, updates)):
            pass
        out: dict[str, Any] = {"offline_updates": updates, "demo_transitions": len(run.demo)}
        for mode, det in (("stochastic", False), ("deterministic", True)):
            eps = evaluate_episodes(run.eval_env, run.agent, episodes, seed=20_000, deterministic=det)
            out[f"success_{mode}"] = float(np.mean([e["success"] for e in eps]))
            out[f"length_{mode}"] = float(np.mean([e["length"] for e in eps]))
        rows = run.demo.sample(min(len(run.demo), 256))
        obs, acts = rows["obs"], np.asarray(rows["actions"], np.float64)
        samples = np.stack([np.stack([run.agent.act(_obs_at(obs, i), deterministic=False)
                                      for i in range(len(acts))]) for _ in range(8)])  # (8, B, A)
        out["abs_error_to_demo"] = float(np.mean(np.abs(samples - acts[None])))
        out["policy_sample_std"] = float(np.mean(samples.std(axis=0)))
        out["demo_action_std"] = float(np.mean(acts.std(axis=0)))
        return out
    finally:
        run.close()


def main() -> None:
    p = bench_parser(__doc__)
    add_out_dir(p)
    p.add_argument("--task", default="twin-pick-cube")
    p.add_argument("--updates", type=int, nargs="+", default=[0, 250, 1000])
    p.add_argument("--episodes", type=int, default=10)
    p.add_argument("--demos", type=int, default=20)
    p.add_argument("--work", type=Path, default=Path("/tmp/first_weights"))
    args = p.parse_args()
    demos = record_demos(args.task, "state", None, args.demos, args.work / f"demos_{args.task}_state")
    rows = [measure(args.task, demos, n, args.episodes, seed=0) for n in args.updates]
    print_table(f"{'offline updates':>15} {'success stoch':>13} {'success det':>11} {'|a - a_demo|':>12} "
                f"{'sample std':>10} {'demo std':>8}",
                [f"{r['offline_updates']:15d} {r['success_stochastic']:13.2f} {r['success_deterministic']:11.2f} "
                 f"{r['abs_error_to_demo']:12.3f} {r['policy_sample_std']:10.3f} {r['demo_action_std']:8.3f}"
                 for r in rows])
    out = args.out / "first_weights.json"
    write_json(out, {"benchmark": "first_weights", "time": timestamp(), **host_info(), "load_average": load_average(),
                     "task": args.task, "demos": args.demos, "episodes": args.episodes, "rows": rows})
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
