"""The scenes a faithful run leaves behind: where does the cube start when nothing teleports it back, and does the
policy still succeed from there?

For each run directory given (a `robot-rl train` run of twin-pick-cube, e.g. a faithful pixel run of
benchmarks/sample_efficiency.py; any checkpoint robot-rl eval accepts), the newest checkpoint's policy runs
--episodes consecutive episodes in two envs, deterministic and stochastic (one thread, the first episode seeded):
- "robot resets": the run's training env (a faithful run's: no teleport after the first reset, the robot's reset
  routine puts a held cube back and leaves a pushed one where it is; the run's reward model on top);
- "teleported": its evaluation env (every episode a seeded scene in the start region).
Per episode, from the twin's privileged state (metrics only: the policy never sees it): where the cube starts,
whether that is inside the start region the demos cover and inside the task's safety box (a cube whose centre lies
outside the box cannot be grasped: the TCP cannot reach its centre), whether the twin's success held at any step
(the cube lifted and held), and whether the run's reward model ended the episode. Summary per env and policy:
success rates, the share of episodes starting outside the region / the box, and the longest run of consecutive
episodes that left the cube where it started (a scene the policy is stuck in).

Run: `python benchmarks/faithful_scenes.py RUN_DIR [RUN_DIR ...] [--episodes 30] [--labels NAME ...] [--label L]`.
Writes benchmarks/results/faithful_scenes.json (faithful_scenes_L.json with --label).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from _prelude import (
    add_label,
    add_out_dir,
    add_run_labels,
    bench_parser,
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

START_REGION_M = ((0.4, 0.6), (-0.15, 0.15))
"""Where the twin's reset_scene puts the cube (x, y ranges; envs/assets/scene_pick_cube.xml)."""
UNMOVED_M = 0.005
SEED = 4_000_000


def run_episodes(env: Any, agent: Any, episodes: int, deterministic: bool) -> list[dict[str, Any]]:
    """`episodes` consecutive episodes (the first seeded); per episode the cube's start and end, success flags."""
    from learners.training.online import action_bounds, to_env_action

    bounds, dtype = action_bounds(env), env.action_space.dtype
    robot_env = env.unwrapped
    task = robot_env.task
    box_lo, box_hi = np.asarray(task.pos_min_m), np.asarray(task.pos_max_m)
    (x0, x1), (y0, y1) = START_REGION_M
    rows = []
    for i in range(episodes):
        obs, _ = env.reset(seed=SEED if i == 0 else None)
        start = np.asarray(robot_env.last_state.objects["cube_pos"], np.float64)
        true_success = reward_success = False
        for _ in range(1000):
            obs, _, terminated, truncated, info = env.step(
                to_env_action(agent.act(obs, deterministic=deterministic), bounds, dtype))
            true_success = true_success or bool(task.success(robot_env.last_state))
            reward_success = reward_success or bool(info.get("reward_success", False))
            if terminated or truncated:
                break
        end = np.asarray(robot_env.last_state.objects["cube_pos"], np.float64)
        rows.append({"cube_start_m": [round(float(v), 4) for v in start],
                     "in_start_region": bool(x0 <= start[0] <= x1 and y0 <= start[1] <= y1),
                     "in_box": bool(np.all(start[:2] >= box_lo[:2]) and np.all(start[:2] <= box_hi[:2])),
                     "true_success": true_success, "reward_success": reward_success,
                     "cube_unmoved": bool(np.linalg.norm(end - start) < UNMOVED_M)})
    return rows


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    longest = current = 0
    for r in rows:
        current = current + 1 if r["cube_unmoved"] and not r["true_success"] else 0
        longest = max(longest, current)
    return {"true_success_rate": float(np.mean([r["true_success"] for r in rows])),
            "reward_success_rate": float(np.mean([r["reward_success"] for r in rows])),
            "outside_start_region": float(np.mean([not r["in_start_region"] for r in rows])),
            "outside_box": float(np.mean([not r["in_box"] for r in rows])),
            "longest_unmoved_failures": longest, "episodes": rows}


def measure(run: Path, episodes: int) -> dict[str, Any]:
    import torch

    from learners.rewards.reward_model import RewardModelWrapper, camera_shapes_of_env, make_reward_model
    from learners.training.evaluation import checkpoint_actor, run_config
    from learners.training.run_env import make_run_env, run_env_spec
    from robot_rl.checkpoint import find_checkpoint, load_checkpoint
    from robot_rl.reward_source import parse_reward_source

    torch.set_num_threads(1)
    ckpt = find_checkpoint(run)
    groups, meta = load_checkpoint(ckpt)
    cfg, agent_cfg, _ = run_config(ckpt, meta, None)
    if cfg.task != "twin-pick-cube":
        raise SystemExit(f"{run}: a run of {cfg.task or cfg.env_id}, not twin-pick-cube")
    out: dict[str, Any] = {"run": str(run), "checkpoint": str(ckpt), "faithful": bool(cfg.faithful),
                           "reward": cfg.reward, "env_step": int(dict(meta.get("counters", {})).get("env_step", -1))}
    for name in ("robot resets", "teleported"):
        out[name] = {}
        for policy in ("deterministic", "stochastic"):  # a fresh env each: the first scene is the same seeded one
            env = make_run_env(cfg, for_reward_model=name == "robot resets")
            try:
                if name == "robot resets" and parse_reward_source(cfg.reward)[0] == "classifier":
                    model = make_reward_model(cfg.reward, camera_shapes_of_env(env), k=cfg.reward_gate_k,
                                              where=str(run))
                    assert model is not None  # a classifier's
                    env = RewardModelWrapper(env, model)
                spec = run_env_spec(env, cfg)
                agent = checkpoint_actor(groups, spec, agent_cfg or cfg.agent_config(has_cameras=bool(spec.cameras)))
                out[name][policy] = summarize(run_episodes(env, agent, episodes, policy == "deterministic"))
            finally:
                env.close()
    return out


def main() -> None:
    p = bench_parser(__doc__)
    p.add_argument("runs", nargs="+", type=Path, help="run directories (robot-rl train) of twin-pick-cube")
    p.add_argument("--episodes", type=int, default=30, help="consecutive episodes per env and policy")
    add_run_labels(p)
    add_out_dir(p)
    add_label(p)
    args = p.parse_args()
    labels = run_labels(p, args)
    from robot_rl.checkpoint import CheckpointError
    from robot_rl.errors import ConfigError

    try:
        results = [{"label": label, **measure(r, args.episodes)} for label, r in zip(labels, args.runs, strict=True)]
    except (CheckpointError, ConfigError) as err:
        raise SystemExit(f"faithful_scenes: {err}") from None
    lines = []
    for r in results:
        for env_name in ("robot resets", "teleported"):
            for policy in ("deterministic", "stochastic"):
                s = r[env_name][policy]
                lines.append(f"{r['label'][-24:]:>24} {env_name:>12} {policy:>13} {s['true_success_rate']:6.0%} "
                             f"{s['reward_success_rate']:6.0%} {s['outside_start_region']:7.0%} "
                             f"{s['outside_box']:7.0%} {s['longest_unmoved_failures']:6d}")
    print_table(f"{'run':>24} {'env':>12} {'policy':>13} {'true':>6} {'reward':>6} {'!region':>7} {'!box':>7} "
                f"{'stuck':>6}", lines)
    out = args.out / f"{result_name('faithful_scenes', args.label)}.json"
    write_json(out, {"benchmark": "faithful_scenes", "time": timestamp(), **host_info(),
                     "load_average": load_average(), "episodes": args.episodes, "first_seed": SEED,
                     "start_region_m": START_REGION_M, "unmoved_m": UNMOVED_M, "runs": results})
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
