"""Insertion diagnosis: what the scripted expert, the demos and a training run look like on a contact task.

Measures, for `--task` (default twin-peg-insert, state observations):

1. The scripted expert under Gaussian action noise (`--noise-levels`, arm dims, std in action units; 0 = the
   demos, whose episodes are seeded 0, 1, ...): success, episode length, peak wrist force, the share of steps
   whose target the env's safety box / step limit changed (`info["clipped"]`), the share of steps that end with
   the impedance controller's reference clip binding (|pose error| at the clip on a translation axis), and the
   largest gap between the commanded and the measured TCP position (the windup a pushing policy builds).
2. A training run (`robot-rl train`'s recipe and flags; anything after `--` is passed on like
   benchmarks/sample_efficiency.py does, plus `--set FIELD=VALUE` for any AgentConfig field) probed every
   `--probe-every` env steps: deterministic and stochastic
   episodes on fixed seeds with, per step, the critic's Q(s, a) (ensemble mean) against the discounted Monte
   Carlo return G that followed (the over-estimation Q - G), the policy's std per arm dim, the peak force, the
   windup, and at the end of failed episodes where the peg is (lateral offset from the hole axis, height above
   the hole floor, tilt); plus temperature and entropy averaged over the training episodes since the last probe,
   and on the demo rows Q(s, a_demo) against Q(s, pi(s)).

Writes benchmarks/results/insertion_diagnosis_<tag>.json. Usage::

    python benchmarks/insertion_diagnosis.py --steps 8000 --tag base           # the recipe as it is
    python benchmarks/insertion_diagnosis.py --steps 8000 --tag n5 -- --set n_step=5 --discount 0.9
    python benchmarks/insertion_diagnosis.py --expert-only                       # part 1 only (seconds)
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _prelude import (
    add_out_dir,
    add_work_dir,
    bench_parser,
    set_env_defaults,
    split_passthrough,
    timestamp,
    write_json,
)

set_env_defaults()

import numpy as np  # noqa: E402


def _episode_stats(env: Any, act: Any, seed: int, q_fn: Any = None, discount: float = 1.0) -> dict[str, Any]:
    """One episode of `act(obs, state) -> action` on `env` (a gymnasium.make'd RobotEnv) seeded `seed`."""
    from controllers.transforms import quat_to_euler_xyz

    re = env.unwrapped
    clip_m = float(re.robot.controller.gains.translational_clip_m)
    obs, _ = env.reset(seed=seed)
    force, boxed, ref, gap, qs, rewards, steps, flips = 0.0, 0, 0, 0.0, [], [], 0, 0
    info: dict[str, Any] = {}
    while True:
        action = act(obs, re.last_state)
        if q_fn is not None:
            qs.append(q_fn(obs, action))
        obs, reward, terminated, truncated, info = env.step(action)
        steps += 1
        rewards.append(float(reward))
        s = re.last_state
        force = max(force, float(np.linalg.norm(s.force_ee_n)))
        boxed += bool(info["clipped"])
        flips += bool(info["gripper_changed"])
        ref += bool(np.any(np.abs(re.robot.controller.last_pose_error[:3]) >= clip_m - 1e-9))
        gap = max(gap, float(np.linalg.norm(re.commanded_pose[0] - s.pos_base_ee)))
        if terminated or truncated:
            break
    out: dict[str, Any] = {"success": bool(info["success"]), "steps": steps, "max_force_n": force,
                           "box_clipped_share": boxed / steps, "ref_clip_share": ref / steps,
                           "max_windup_m": gap, "gripper_changes": flips}
    objects = info.get("objects", {})
    if "peg_pos" in objects:
        d = np.asarray(objects["peg_pos"]) - np.asarray(objects["hole_pos"])
        tilt = quat_to_euler_xyz(np.asarray(objects["peg_quat"]))[:2]
        held = np.linalg.norm(np.asarray(objects["peg_pos"]) - s.pos_base_ee) < 0.07
        out.update(lateral_m=float(np.hypot(d[0], d[1])), height_m=float(d[2]),
                   tilt_rad=float(np.max(np.abs(tilt))), dropped=float(not held))
    if q_fn is not None:
        g, returns = 0.0, []
        for r in reversed(rewards):
            g = r + discount * g
            returns.append(g)
        returns.reverse()
        out.update(q=float(np.mean(qs)), mc_return=float(np.mean(returns)),
                   overestimate=float(np.mean(np.asarray(qs) - np.asarray(returns))))
    return out


def _summary(eps: list[dict[str, Any]]) -> dict[str, Any]:
    keys = [k for k in eps[0] if k != "success"]
    out: dict[str, Any] = {"episodes": len(eps), "success_rate": float(np.mean([e["success"] for e in eps]))}
    for k in keys:
        out[k] = float(np.mean([e[k] for e in eps]))
    fails = [e for e in eps if not e["success"]]
    for k in ("lateral_m", "height_m", "tilt_rad", "max_force_n", "max_windup_m", "overestimate", "dropped",
              "gripper_changes"):
        if fails and k in fails[0]:
            out[f"fail_{k}"] = float(np.mean([e[k] for e in fails]))
    wins = [e for e in eps if e["success"]]
    if wins and "overestimate" in wins[0]:
        out["success_overestimate"] = float(np.mean([e["overestimate"] for e in wins]))
    return out


def expert_rows(task: str, noise_levels: list[float], episodes: int) -> list[dict[str, Any]]:
    """The scripted expert under action noise (seeds 0.. : noise 0 replays the demos' episodes)."""
    import gymnasium

    from envs.twin.experts import ScriptedExpert
    from robot_rl.presets import get_preset

    preset = get_preset(task)
    env = gymnasium.make(preset.env_id, **preset.make_kwargs(obs_mode="state"))
    rows = []
    for noise in noise_levels:
        expert = ScriptedExpert(task, noise_std=noise, seed=123)
        eps = []
        for i in range(episodes):
            expert.reset()
            eps.append(_episode_stats(env, lambda _o, s, e=expert: e.act(s), seed=i))
        row = {"noise_std": noise, **_summary(eps)}
        print(f"[diagnosis] expert noise {noise}: success {row['success_rate']:.0%}, length {row['steps']:.0f}, "
              f"peak force {row['max_force_n']:.1f} N, box-clipped {row['box_clipped_share']:.1%} of steps, "
              f"reference clip binding {row['ref_clip_share']:.1%}, windup {1e3 * row['max_windup_m']:.0f} mm",
              flush=True)
        rows.append(row)
    env.close()
    return rows


def probe(run: Any, episodes: int, window: list[dict[str, Any]]) -> dict[str, Any]:
    """Deterministic + stochastic episodes with Q vs Monte Carlo returns, and the demo rows' Q."""
    import torch

    agent = run.agent
    layout = agent.policy.layout
    gamma = agent.cfg.discount

    @torch.no_grad()
    def q_of(obs: Any, action: np.ndarray) -> float:
        images, state = layout.to_torch(obs, agent.device, batched=False)
        feats = agent.encoder(images, state)
        arm = torch.as_tensor(action[: agent.arm_dim], dtype=torch.float32, device=agent.device)[None]
        return float(agent.q_values(torch.cat([feats, arm], -1)).mean())

    stds: list[np.ndarray] = []

    def act(deterministic: bool) -> Any:
        def f(obs: Any, _state: Any) -> np.ndarray:
            with torch.no_grad():
                images, state = layout.to_torch(obs, agent.device, batched=False)
                _, log_std = agent.actor(agent.encoder(images, state))
                stds.append(log_std.exp()[0].cpu().numpy())
            return agent.act(obs, deterministic=deterministic)
        return f

    out: dict[str, Any] = {"env_step": run.counters.env_step}
    for name, det in (("deterministic", True), ("stochastic", False)):
        eps = [_episode_stats(run.eval_env, act(det), 3_000_000 + i, q_of, gamma) for i in range(episodes)]
        out[name] = _summary(eps)
    out["policy_std"] = np.mean(stds, 0).round(4).tolist()
    for k in ("temperature", "entropy", "q_mean", "critic_loss", "bc_loss", "bc_kept"):
        vals = [m[k] for m in window if k in m]
        if vals:
            out[k] = float(np.mean(vals))
    out["train_success_rate"] = float(np.mean([bool(m.get("success")) for m in window])) if window else None
    if run.demo is not None and len(run.demo):
        batch = run.demo.sample(256)
        with torch.no_grad():
            images, state = layout.to_torch(batch["obs"], agent.device, batched=True)
            feats = agent.encoder(images, state)
            demo_a = torch.as_tensor(batch["actions"][:, : agent.arm_dim], dtype=torch.float32)
            pi_a = torch.tanh(agent.actor(feats)[0])
            out["demo_q_demo_action"] = float(agent.q_values(torch.cat([feats, demo_a], -1)).mean())
            out["demo_q_policy_action"] = float(agent.q_values(torch.cat([feats, pi_a], -1)).mean())
            out["demo_policy_action_error"] = float((pi_a - demo_a).abs().mean())
    d, s = out["deterministic"], out["stochastic"]
    print(f"[diagnosis] {out['env_step']}: success det {d['success_rate']:.0%} / stoch {s['success_rate']:.0%} "
          f"(train {out['train_success_rate']}); Q - G det {d.get('overestimate', 0):+.3f} stoch "
          f"{s.get('overestimate', 0):+.3f}; temperature {out.get('temperature', float('nan')):.4f} entropy "
          f"{out.get('entropy', float('nan')):.2f}; std {np.round(out['policy_std'], 2).tolist()}", flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    argv, extra = split_passthrough(list(sys.argv[1:] if argv is None else argv))
    p = bench_parser(__doc__)
    p.add_argument("--task", default="twin-peg-insert")
    p.add_argument("--noise-levels", default="0,0.1,0.15,0.2,0.3")
    p.add_argument("--expert-episodes", type=int, default=20)
    p.add_argument("--expert-only", action="store_true")
    p.add_argument("--steps", type=int, default=8000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--probe-every", type=int, default=1000)
    p.add_argument("--probe-episodes", type=int, default=10)
    p.add_argument("--demos", type=int, default=20)
    p.add_argument("--tag", default="base")
    add_work_dir(p, "demos + the run directory")
    add_out_dir(p)
    args = p.parse_args(argv)

    sets: dict[str, Any] = {}
    while "--set" in extra:  # --set FIELD=VALUE (JSON value; lists become tuples), applied to the AgentConfig
        i = extra.index("--set")
        field, _, value = extra[i + 1].partition("=")
        parsed = json.loads(value)
        sets[field] = tuple(parsed) if isinstance(parsed, list) else parsed
        del extra[i:i + 2]
    result: dict[str, Any] = {"benchmark": "insertion_diagnosis", "task": args.task, "tag": args.tag,
                              "extra_flags": extra, "set": {k: str(v) for k, v in sets.items()},
                              "time": timestamp()}
    result["expert"] = expert_rows(args.task, [float(x) for x in args.noise_levels.split(",")],
                                   args.expert_episodes)
    if not args.expert_only:
        from sample_efficiency import record_demos  # benchmarks/ is on sys.path (this script's directory)

        from learners.training.flags import build_train_parser, train_config
        from learners.training.online import LoopConfig, train_online
        from learners.training.train import build_run

        work = args.work or Path(tempfile.mkdtemp(prefix="insertion_diagnosis_"))
        demos = record_demos(args.task, "state", None, args.demos, work / f"demos_{args.task}_state")
        ns = build_train_parser().parse_args(["--task", args.task, "--obs-mode", "state", "--demos",
                                              str(demos), "--seed", str(args.seed), "--device", "cpu",
                                              "--max-env-steps", str(args.steps), "--out", str(work), *extra])
        cfg = train_config(ns)
        run = build_run(cfg)
        if sets:  # AgentConfig fields beyond robot-rl train's flags
            from learners.agents.sac import SACAgent

            run.agent = SACAgent(run.spec, run.agent.cfg.replace(**sets))
        result["agent_config"] = run.agent.cfg.to_dict()
        result["updates_per_step"] = cfg.steps_per_update()
        loop = LoopConfig(total_steps=cfg.max_env_steps, start_steps=cfg.start_steps,
                          learning_starts=cfg.learning_starts, updates_per_step=cfg.steps_per_update(),
                          seed=cfg.seed)
        probes, window, last = [], [], 0
        t0 = time.perf_counter()
        for m in train_online(run.env, run.agent, run.online, loop, demo=run.demo, counters=run.counters,
                              rng=run.rng):
            window.append(m)
            step = run.counters.env_step
            if step // args.probe_every > last or step >= cfg.max_env_steps:
                last = step // args.probe_every
                probes.append(probe(run, args.probe_episodes, window))
                window = []
        if not probes or probes[-1]["env_step"] != run.counters.env_step:  # the run ended mid-episode
            probes.append(probe(run, args.probe_episodes, window))
        result["probes"] = probes
        result["wall_s"] = time.perf_counter() - t0
    print(f"wrote {write_json(args.out / f'insertion_diagnosis_{args.tag}.json', result)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
