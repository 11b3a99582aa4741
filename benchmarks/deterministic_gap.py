"""The deterministic gap on pick-cube: does the deterministic policy (the mode, what every evaluation runs) succeed
less often than the stochastic one (what training episodes run), and how do its failures look?

For each run directory given (`robot-rl train` or `robot-rl sim` runs of twin-pick-cube from state, any checkpoint
robot-rl eval accepts), the newest checkpoint's policy runs the same --episodes env seeds twice, deterministic and
stochastic (one thread, fixed seeds). Per episode: success, and for a failure where the cube ended (the twin's
privileged object position, the observation's `object` leaf: metrics only), the TCP's horizontal distance from it at
the end, and the policy's mean gripper action over its last 10 steps ([-1, 1]; the twin closes above +0.5, opens
below -0.5 and keeps its state between). Failures are sorted into: the cube never moved (< 1 cm: never grasped),
moved but never lifted (< 2 cm above its start: a push or a failed grasp), and lifted without success (dropped, or
not high enough). The run's last training success (metrics.jsonl; a sim run's summary.json) is printed beside, and
for a sim run how many of its training episodes its robot servers' safety guards stopped (their 'safety: STOP'
log lines: the external force limit, mostly the fingers striking the table).

Run: `python benchmarks/deterministic_gap.py RUN_DIR [RUN_DIR ...] [--episodes 50] [--labels NAME ...]`. Writes
benchmarks/results/deterministic_gap.json.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from _prelude import (
    add_out_dir,
    add_run_labels,
    bench_parser,
    cell,
    host_info,
    load_average,
    print_table,
    run_labels,
    set_env_defaults,
    timestamp,
    write_json,
)

set_env_defaults(one_thread=True)

import numpy as np  # noqa: E402

MOVED_M = 0.01
LIFTED_M = 0.02
SEED = 3_000_000


def episode(env: Any, agent: Any, seed: int, deterministic: bool) -> dict[str, Any]:
    """One seeded episode; success and, from the observation's `object` leaf and state[0:3], how it ended."""
    from learners.training.online import action_bounds, to_env_action

    bounds, dtype = action_bounds(env), env.action_space.dtype
    obs, _ = env.reset(seed=seed)
    first = np.asarray(obs["object"][:3], np.float64).copy()
    success, grip = False, []
    for _ in range(1000):
        action = agent.act(obs, deterministic=deterministic)
        grip.append(float(np.asarray(action).reshape(-1)[-1]))
        obs, _, terminated, truncated, info = env.step(to_env_action(action, bounds, dtype))
        success = success or bool(info.get("success", False))
        if terminated or truncated:
            break
    last = np.asarray(obs["object"][:3], np.float64)
    tcp = np.asarray(obs["state"][:3], np.float64)
    moved = float(np.linalg.norm(last[:2] - first[:2]))
    lifted = float(last[2] - first[2])
    outcome = ("success" if success else "not moved" if moved < MOVED_M and lifted < LIFTED_M
               else "not lifted" if lifted < LIFTED_M else "lifted, no success")
    return {"seed": seed, "success": success, "outcome": outcome, "cube_moved_m": moved, "cube_lifted_m": lifted,
            "tcp_cube_xy_m": float(np.linalg.norm(tcp[:2] - last[:2])),
            "gripper_action_last10": float(np.mean(grip[-10:]))}


def guard_trips(run: Path) -> dict[str, Any]:
    """A sim run's safety-guard trips (supervisor.sim.guard_stops: the robot servers' 'safety: STOP' log lines) and
    training episodes (its summary); {} for a run without robot servers (robot-rl train)."""
    from supervisor.sim import guard_stops

    trips = guard_stops(run / "logs")
    if trips is None:
        return {}
    summary = json.loads((run / "summary.json").read_text()) if (run / "summary.json").is_file() else {}
    return {"guard_trips": trips, "train_episodes": summary.get("episodes")}


def measure(run: Path, episodes: int) -> dict[str, Any]:
    import torch

    from learners.training.evaluation import checkpoint_actor, run_config
    from learners.training.run_env import make_run_env, run_env_spec
    from robot_rl.checkpoint import find_checkpoint, load_checkpoint

    torch.set_num_threads(1)
    ckpt = find_checkpoint(run)
    groups, meta = load_checkpoint(ckpt)
    cfg, agent_cfg, _ = run_config(ckpt, meta, None)
    env = make_run_env(cfg, reward_sources=())
    try:
        spec = run_env_spec(env, cfg)
        if spec.task != "twin-pick-cube" or spec.cameras or "object" not in {s.name for s in spec.observation}:
            raise SystemExit(f"{run}: not a twin-pick-cube state run with the object leaf (task {spec.task})")
        agent = checkpoint_actor(groups, spec, agent_cfg or cfg.agent_config(has_cameras=False))
        modes = {mode: [episode(env, agent, SEED + i, mode == "deterministic") for i in range(episodes)]
                 for mode in ("deterministic", "stochastic")}
    finally:
        env.close()
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()] \
        if (run / "metrics.jsonl").is_file() else []
    train = next((r.get("train_success_rate") for r in reversed(rows) if r.get("train_success_rate") is not None),
                 None)
    if train is None and (run / "summary.json").is_file():  # a sim run: its summary's last training episodes
        train = json.loads((run / "summary.json").read_text()).get("train_success_rate")
    out: dict[str, Any] = {"run": str(run), "checkpoint": str(ckpt),
                           "env_step": int(dict(meta.get("counters", {})).get("env_step", -1)),
                           "train_success_rate": train, **guard_trips(run)}
    for mode, eps in modes.items():
        fails = [e for e in eps if not e["success"]]
        out[mode] = {"success_rate": float(np.mean([e["success"] for e in eps])),
                     "outcomes": {k: sum(e["outcome"] == k for e in eps)
                                  for k in ("success", "not moved", "not lifted", "lifted, no success")},
                     "failed_tcp_cube_xy_m_median": float(np.median([e["tcp_cube_xy_m"] for e in fails]))
                     if fails else None,
                     "failed_gripper_action_last10": [round(e["gripper_action_last10"], 2) for e in fails],
                     "episodes": eps}
    return out


def main() -> None:
    p = bench_parser(__doc__)
    p.add_argument("runs", nargs="+", type=Path, help="run directories (robot-rl train / sim) of twin-pick-cube")
    p.add_argument("--episodes", type=int, default=50, help="env seeds per mode")
    add_run_labels(p)
    add_out_dir(p)
    args = p.parse_args()
    labels = run_labels(p, args)
    results = [{"label": label, **measure(r, args.episodes)} for label, r in zip(labels, args.runs, strict=True)]

    def outcomes(d: dict[str, Any]) -> str:
        o = d["outcomes"]
        return f"{o['not moved']:>3} {o['not lifted']:>3} {o['lifted, no success']:>3}"

    print_table(f"{'run':>28} {'step':>6} {'train':>6} {'det':>5} {'sto':>5} {'det fails: still/push/lift':>27} "
                f"{'miss cm':>7}",
                [f"{r['label'][-28:]:>28} {r['env_step']:>6} {cell(r['train_success_rate'], '6.0%')} "
                 f"{r['deterministic']['success_rate']:5.0%} {r['stochastic']['success_rate']:5.0%} "
                 f"{outcomes(r['deterministic']):>27} "
                 f"{cell(r['deterministic']['failed_tcp_cube_xy_m_median'] and 100 * r['deterministic']['failed_tcp_cube_xy_m_median'], '7.1f')}"  # noqa: E501
                 for r in results])
    out = args.out / "deterministic_gap.json"
    write_json(out, {"benchmark": "deterministic_gap", "time": timestamp(), **host_info(), "load_average":
                     load_average(), "episodes": args.episodes, "first_seed": SEED, "moved_m": MOVED_M,
                     "lifted_m": LIFTED_M, "runs": results})
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
