"""`robot-rl train --forward-backward`: reset-free forward/backward training in one process (two agents).

One env of the task (twin-cube-relocate), made reset-free (`scene_resets="first"`: the objects are teleported on
the first reset only, afterwards the robot's reset routine runs) and without the task's reward (`task_reward=False`;
`--faithful` also drops the object observation). Two agents, each with its own online buffer, demo buffer
(`--demos` forward, `--backward-demos` backward, e.g. recorded on twin-cube-relocate-back) and reward model
(`--reward` forward, `--backward-reward` backward, learners.rewards.reward_model: "env" = the twin's true success of the
direction's goal, a privileged stand-in for a classifier, or classifier:DIR; `--faithful` needs classifiers; with
`--obs-mode state` the env renders the classifiers' cameras into info for them, learners.rewards.reward_model), take
turns as learners.training.forward_backward describes (hand-over guard included). Each agent updates from its own
buffers
at the task recipe's updates per env step while it acts.

Evaluation (metrics only): the deterministic forward policy on `--eval-episodes` episodes of the forward task and
the backward policy on the backward task, each in its own evaluation env whose scene IS teleported to a seeded
start (a fixed test set; the training env never teleports after its first reset).

Outputs in `--out DIR`: config.json, agent_config.json (forward) and agent_config_backward.json, metrics.jsonl (per
evaluation: forward_success_rate (= success_rate), backward_success_rate, hand-overs, false-positive hand-overs,
hand-overs without true success, scene_teleports, per-direction training episodes and true success rates since the
last row, updates/s, buffer sizes), learning_curve.png, checkpoints/ (the forward agent's) and
checkpoints_backward/ (each a `robot-rl train` checkpoint directory: `robot-rl eval --checkpoint DIR` evaluates the
forward policy, `--checkpoint DIR/checkpoints_backward` the backward one). `--resume` is not supported yet for
forward/backward runs. A distributed variant (one actor, two learners, as in SERL) is not built:
this runs both agents in the trainer's process.

Usage::

    robot-rl record-demos --task twin-cube-relocate --episodes 20 --out demos/fwd --obs-mode state
    robot-rl record-demos --task twin-cube-relocate-back --episodes 20 --out demos/bwd --obs-mode state
    robot-rl train --task twin-cube-relocate --obs-mode state --forward-backward --demos demos/fwd \\
        --backward-demos demos/bwd --max-env-steps 20000 --out runs/fb
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from learners.agents.options import announce_agent_config
from learners.agents.sac import SACAgent
from learners.cli.train import ScalarWriter, TrainConfig, env_spec, load_demo_buffer, make_env
from learners.replay.buffer import ReplayBuffer
from learners.rewards.reward_model import camera_shapes_of_env, parse_reward_source
from learners.training.forward_backward import (
    Direction,
    FBCounters,
    ForwardBackwardConfig,
    direction_reward,
    forward_backward,
)
from learners.training.online import evaluate_episodes
from learners.training.run_state import TrainingRun
from robot_rl.errors import ConfigError
from robot_rl.metrics import MetricsLog, plot_learning_curve, read_metrics
from robot_rl.presets import PRESETS, get_preset

REWARD_NOTE = ("the twin's TRUE success of the direction's goal (privileged state; a stand-in for a reward classifier "
               "that hardware would need)")


def _prepare(out: Path, resume: bool) -> None:
    if resume:
        raise ConfigError("--resume is not supported with --forward-backward yet: start a new run (--out)")
    if any((out / d).is_dir() and any((out / d).iterdir()) for d in ("checkpoints", "checkpoints_backward")) \
            or (out / "metrics.jsonl").is_file():
        raise ConfigError(f"output directory {out} already holds a run; choose another --out")


def _direction_config(cfg: TrainConfig, backward_task: str) -> TrainConfig:
    """The TrainConfig the backward agent is built with (and its checkpoints record): the backward preset, its
    demos and reward, another seed."""
    return cfg.replace(task=backward_task, demos=cfg.backward_demos, backward_demos=None, forward_backward=False,
                       reward=cfg.backward_reward, backward_reward="env", seed=cfg.seed + 1)


def train_forward_backward(cfg: TrainConfig, out: Path, resume: bool = False, log: Any = print) -> dict[str, Any]:
    """Run a forward/backward training into `out` (module docstring); returns the last metrics row."""
    assert cfg.task is not None  # TrainConfig.validate: faithful / forward_backward runs are task presets
    fb = get_preset(cfg.task).forward_backward
    if fb is None:
        have = sorted(n for n, p in PRESETS.items() if p.forward_backward is not None)
        raise ConfigError(f"--forward-backward: task {cfg.task} has no backward direction; tasks with one: {have}")
    for flag, source in (("--reward", cfg.reward), ("--backward-reward", cfg.backward_reward)):
        if parse_reward_source(source)[0] == "human":
            raise ConfigError(f"--forward-backward: {flag} human needs a teleop device's success key, and robot-rl "
                              f"train runs none; use env (twin) or classifier:DIR")
    _prepare(out, resume)
    torch.set_num_threads(cfg.threads)
    train_kw: dict[str, Any] = {"faithful": True} if cfg.faithful else {"scene_resets": "first", "task_reward": False}
    # a classifier with --obs-mode state: the training env renders the cards' cameras into info, not the observation
    env = make_env(cfg, reward_sources=(cfg.reward, cfg.backward_reward), **train_kw)
    eval_envs = (make_env(cfg), make_env(cfg, task=fb.backward_task))
    bcfg = _direction_config(cfg, fb.backward_task)
    try:
        spec_f = env_spec(env, cfg)
        spec_b = dataclasses.replace(spec_f, task=fb.backward_task)
        has_cams = bool(spec_f.cameras)
        shapes = camera_shapes_of_env(env)
        directions = []
        for name, dcfg, spec, goal, source_spec, demos in (
                ("forward", cfg, spec_f, fb.forward_goal, cfg.reward, cfg.demos),
                ("backward", bcfg, spec_b, fb.backward_goal, cfg.backward_reward, cfg.backward_demos)):
            agent = SACAgent(spec, dcfg.agent_config(has_cameras=has_cams))
            online = ReplayBuffer(spec, cfg.replay_capacity, seed=dcfg.seed)
            demo = load_demo_buffer(demos, spec, seed=dcfg.seed + 1, flag=f"--{'backward-' * (name == 'backward')}"
                                    "demos") if demos else None
            flag = "--backward-reward" if name == "backward" else "--reward"
            model = direction_reward(source_spec, goal, shapes, out / "reward_audit" / name, flag=flag)
            directions.append(Direction(name, agent, online, demo, model, goal=goal))
        fwd, bwd = directions
    except BaseException:
        for e in (env, *eval_envs):
            e.close()
        raise
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(cfg.to_dict(), indent=1))
    announce_agent_config(fwd.agent.cfg, out, prefix="[train] forward", log=log)
    (out / "agent_config_backward.json").write_text(json.dumps(bwd.agent.cfg.to_dict(), indent=1))
    for d, src in ((fwd, cfg.reward), (bwd, cfg.backward_reward)):
        note = REWARD_NOTE if src == "env" else src
        log(f"[train] {d.name} ({d.goal}): reward from {note}; demos {len(d.demo) if d.demo else 0} transitions")
    log(f"[train] env: {'hardware-faithful' if cfg.faithful else 'reset-free (object state observed)'}; the scene is "
        "teleported on the first reset only, then the robot's reset routine runs")

    loop_cfg = ForwardBackwardConfig(total_steps=cfg.max_env_steps, start_steps=cfg.start_steps,
                                     learning_starts=cfg.learning_starts, updates_per_step=cfg.steps_per_update(),
                                     seed=cfg.seed)
    counters = FBCounters()
    metrics = MetricsLog(out / "metrics.jsonl")
    tb = ScalarWriter(out / "tb")
    window: list[dict[str, Any]] = []
    t0 = started = time.perf_counter()
    updates0 = 0
    last_eval = last_ckpt = 0
    row: dict[str, Any] = {}

    def evaluate_now(step: int) -> dict[str, Any]:
        nonlocal window, t0, updates0
        res_f = evaluate_episodes(eval_envs[0], fwd.agent, episodes=cfg.eval_episodes, seed=1_000_000 + cfg.seed)
        res_b = evaluate_episodes(eval_envs[1], bwd.agent, episodes=cfg.eval_episodes, seed=2_000_000 + cfg.seed)
        updates = fwd.updates + bwd.updates
        dt = max(time.perf_counter() - t0, 1e-9)
        r: dict[str, Any] = {
            "env_step": step, "episode": counters.episode, "updates": updates,
            "success_rate": float(np.mean([e["success"] for e in res_f])),
            "forward_success_rate": float(np.mean([e["success"] for e in res_f])),
            "backward_success_rate": float(np.mean([e["success"] for e in res_b])),
            "return": float(np.mean([e["return"] for e in res_f])),
            "updates_per_s": (updates - updates0) / dt, "minutes": (time.perf_counter() - started) / 60.0,
            "handovers": counters.handovers, "false_positive_handovers": counters.false_positive_handovers,
            "handovers_without_true_success": counters.handovers_without_true_success,
            "timeout_handovers": counters.timeout_handovers, "withdrawn_rewards": counters.withdrawn_rewards,
            "scene_teleports": int(getattr(env.unwrapped, "scene_teleports", -1)),
            "reset_retries": int(getattr(env.unwrapped, "reset_retry_count", -1)),
        }
        for d in (fwd, bwd):
            r.update({f"{d.name}_{k}": v for k, v in d.counters().items()})
            r[f"{d.name}_online_buffer"] = len(d.online)
            eps = [m for m in window if m["direction"] == d.name]
            if eps:
                r[f"train_{d.name}_true_success_rate"] = float(np.mean([bool(m["true_success"]) for m in eps]))
                r[f"train_{d.name}_episodes"] = len(eps)
        for k in ("critic_loss", "actor_loss", "q_mean"):
            vals = [m[k] for m in window if k in m]
            if vals:
                r[k] = float(np.mean(vals))
        metrics.write(r)
        tb.write(r, step)
        plot_learning_curve(read_metrics(out / "metrics.jsonl"), out / "learning_curve.png",
                            ys=("forward_success_rate", "backward_success_rate"), title=f"{cfg.task} forward/backward")
        log(f"[train] step {step}/{cfg.max_env_steps}  episode {counters.episode}  eval success forward "
            f"{r['forward_success_rate']:.0%} backward {r['backward_success_rate']:.0%}  hand-overs "
            f"{counters.handovers} (false positive {counters.false_positive_handovers})  teleports "
            f"{r['scene_teleports']}  updates "
            f"{updates} ({r['updates_per_s']:.1f}/s)")
        window, t0, updates0 = [], time.perf_counter(), updates
        return r

    def checkpoint() -> None:
        for d, dcfg in ((fwd, cfg), (bwd, bcfg)):
            counts = {"env_step": counters.env_step, "episode": d.episodes, "updates": d.updates}
            meta = {"config": dcfg.to_dict(), "agent_config": d.agent.cfg.to_dict(), "direction": d.name,
                    "forward_backward": dataclasses.asdict(counters)}
            assert isinstance(d.agent, SACAgent)
            where = out / ("checkpoints" if d.name == "forward" else "checkpoints_backward")
            TrainingRun(d.agent, d.online, d.demo, counts).save(where, extra_meta=meta)

    try:
        for m in forward_backward(env, (fwd, bwd), loop_cfg, counters):
            window.append(m)
            step = counters.env_step
            done = step >= cfg.max_env_steps
            if step // cfg.eval_every > last_eval or done:
                last_eval = step // cfg.eval_every
                row = evaluate_now(step)
                if cfg.max_minutes > 0 and time.perf_counter() - started > 60.0 * cfg.max_minutes and not done:
                    log(f"[train] stopping at env step {step}: --max-minutes {cfg.max_minutes} reached")
                    done = True
            if step // cfg.checkpoint_every > last_ckpt or done:
                last_ckpt = step // cfg.checkpoint_every
                checkpoint()
            if done:
                break
        if not row or row.get("env_step") != counters.env_step:
            row = evaluate_now(counters.env_step)
            checkpoint()
    finally:
        tb.close()
        for d in (fwd, bwd):
            audit = getattr(d.reward, "audit", None)  # a classifier's audit log
            close = getattr(audit, "close", None)
            if callable(close):
                close()
        for e in (env, *eval_envs):
            e.close()
    return row
