"""`robot-rl train --forward-backward`: reset-free forward/backward training in one process (two agents).

`train_forward_backward(cfg, out)` reads as its phases: check the task and the run directory, build the run
(`build_fb_run`: the reset-free env, the evaluation envs, two directions), write its files, then
`FBSession.run()` (learners.training.forward_backward.forward_backward with evaluations and checkpoints).

One env of the task (twin-cube-relocate), made reset-free (`scene_resets="first"`: the objects are teleported on
the first reset only, afterwards the robot's reset routine runs) and without the task's reward (`task_reward=False`;
`--faithful` also drops the object observation). Two agents, each with its own online buffer, demo buffer
(`--demos` forward, `--backward-demos` backward, e.g. recorded on twin-cube-relocate-back) and reward model
(`--reward` forward, `--backward-reward` backward, learners.rewards.reward_model: "env" = the twin's true success of the
direction's goal, a privileged stand-in for a classifier, or classifier:DIR; `--faithful` needs classifiers; with
`--obs-mode state` the env renders the classifiers' cameras into info for them, learners.rewards.reward_model), take
turns as learners.training.forward_backward describes (hand-over guard included). Each agent updates from its own
buffers at the task recipe's updates per env step while it acts.

Evaluation (metrics only): the deterministic forward policy on `--eval-episodes` episodes of the forward task and
the backward policy on the backward task, each in its own evaluation env whose scene IS teleported to a seeded
start (a fixed test set; the training env never teleports after its first reset).

Outputs in `--out DIR`: config.json, agent_config.json (forward) and agent_config_backward.json, metrics.jsonl (per
evaluation: forward_success_rate (= success_rate), backward_success_rate, hand-overs, false-positive hand-overs,
hand-overs without true success, scene_teleports, per-direction training episodes and true success rates since the
last row, updates/s, buffer sizes), learning_curve.png, checkpoints/ (the forward agent's) and
checkpoints_backward/ (each a `robot-rl train` checkpoint directory: `robot-rl eval --checkpoint DIR` evaluates the
forward policy, `--checkpoint DIR/checkpoints_backward` the backward one); TensorBoard scalars in tensorboard/
(robot_rl.run_dir). `--resume` is not supported yet for forward/backward runs. A distributed variant (one actor,
two learners, as in SERL) is not built: this runs both agents in the trainer's process.

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
from learners.replay.buffer import ReplayBuffer
from learners.rewards.reward_model import camera_shapes_of_env, parse_reward_source
from learners.training.config import TrainConfig
from learners.training.demos import load_demo_buffer
from learners.training.forward_backward import (
    Direction,
    FBCounters,
    ForwardBackwardConfig,
    direction_reward,
    forward_backward,
)
from learners.training.online import evaluate_episodes
from learners.training.pretrain_encoder import with_run_encoder
from learners.training.run_env import make_run_env, run_env_spec
from learners.training.run_state import TrainingRun
from learners.training.scalars import ScalarWriter
from robot_rl.errors import ConfigError
from robot_rl.metrics import MetricsLog, plot_learning_curve, read_metrics
from robot_rl.presets import PRESETS, ForwardBackward, get_preset
from robot_rl.run_dir import CHECKPOINTS_DIR, METRICS_FILE, check_run_dir, tensorboard_dir
from robot_rl.specs import EnvSpec

REWARD_NOTE = ("the twin's TRUE success of the direction's goal (privileged state; a stand-in for a reward classifier "
               "that hardware would need)")
BACKWARD_CHECKPOINTS_DIR = "checkpoints_backward"
"""The backward agent's checkpoints, beside the forward agent's OUT/checkpoints."""


@dataclasses.dataclass
class FBRun:
    """Everything a forward/backward run holds in memory: the reset-free training env, the two evaluation envs
    (forward, backward), the two directions and the backward agent's TrainConfig."""

    cfg: TrainConfig
    backward_cfg: TrainConfig
    env: Any
    eval_envs: tuple[Any, Any]
    forward: Direction
    backward: Direction

    def close(self) -> None:
        """Close the directions' audit logs and every env."""
        for d in (self.forward, self.backward):
            audit = getattr(d.reward, "audit", None)  # a classifier's audit log
            close = getattr(audit, "close", None)
            if callable(close):
                close()
        for e in (self.env, *self.eval_envs):
            e.close()


def check_forward_backward(cfg: TrainConfig, out: Path, resume: bool) -> ForwardBackward:
    """The task's forward/backward pairing; ConfigError for a task without one, a human reward, --resume or an
    --out that holds a run."""
    assert cfg.task is not None  # TrainConfig.validate: faithful / forward_backward runs are task presets
    fb = get_preset(cfg.task).forward_backward
    if fb is None:
        have = sorted(n for n, p in PRESETS.items() if p.forward_backward is not None)
        raise ConfigError(f"--forward-backward: task {cfg.task} has no backward direction; tasks with one: {have}")
    for flag, source in (("--reward", cfg.reward), ("--backward-reward", cfg.backward_reward)):
        if parse_reward_source(source)[0] == "human":
            raise ConfigError(f"--forward-backward: {flag} human needs a teleop device's success key, and robot-rl "
                              f"train runs none; use env (twin) or classifier:DIR")
    if resume:
        raise ConfigError("--resume is not supported with --forward-backward yet: start a new run (--out)")
    check_run_dir(out, resume=False, resumable=False, checkpoint_dirs=(CHECKPOINTS_DIR, BACKWARD_CHECKPOINTS_DIR))
    return fb


def direction_config(cfg: TrainConfig, backward_task: str) -> TrainConfig:
    """The TrainConfig the backward agent is built with (and its checkpoints record): the backward preset, its
    demos and reward, another seed."""
    return cfg.replace(task=backward_task, demos=cfg.backward_demos, backward_demos=None, forward_backward=False,
                       reward=cfg.backward_reward, backward_reward="env", reward_gate_k=None, seed=cfg.seed + 1)


def build_direction(name: str, dcfg: TrainConfig, spec: EnvSpec, goal: str, source: str, demos: str | None,
                    shapes: Any, out: Path) -> Direction:
    """One direction: its agent, online buffer, demo buffer and reward model (audit in OUT/reward_audit/NAME)."""
    agent = SACAgent(spec, with_run_encoder(dcfg.agent_config(has_cameras=bool(spec.cameras)),
                                            [demos] if demos else [], out / name))  # pixels: pretrained on its demos
    online = ReplayBuffer(spec, dcfg.replay_capacity, seed=dcfg.seed)
    backward = name == "backward"
    demo = load_demo_buffer(demos, spec, seed=dcfg.seed + 1, flag=f"--{'backward-' * backward}demos") \
        if demos else None
    model = direction_reward(source, goal, shapes, out / "reward_audit" / name,
                             flag="--backward-reward" if backward else "--reward", k=dcfg.reward_gate_k)
    return Direction(name, agent, online, demo, model, goal=goal)


def build_fb_run(cfg: TrainConfig, fb: ForwardBackward, out: Path) -> FBRun:
    """The reset-free training env (the twin teleports on its first reset only; `--faithful` also drops the object
    observation), one evaluation env per direction (seeded, teleported starts) and the two directions."""
    torch.set_num_threads(cfg.torch_threads)
    train_kw: dict[str, Any] = {"faithful": True} if cfg.faithful else {"scene_resets": "first", "task_reward": False}
    # a classifier with --obs-mode state: the training env renders the cards' cameras into info, not the observation
    env = make_run_env(cfg, reward_sources=(cfg.reward, cfg.backward_reward), **train_kw)
    eval_envs = (make_run_env(cfg), make_run_env(cfg, task=fb.backward_task))
    bcfg = direction_config(cfg, fb.backward_task)
    try:
        spec_f = run_env_spec(env, cfg)
        shapes = camera_shapes_of_env(env)
        fwd = build_direction("forward", cfg, spec_f, fb.forward_goal, cfg.reward, cfg.demos, shapes, out)
        bwd = build_direction("backward", bcfg, dataclasses.replace(spec_f, task=fb.backward_task), fb.backward_goal,
                              cfg.backward_reward, cfg.backward_demos, shapes, out)
    except BaseException:
        for e in (env, *eval_envs):
            e.close()
        raise
    return FBRun(cfg, bcfg, env, eval_envs, fwd, bwd)


def write_fb_files(run: FBRun, out: Path, log: Any = print) -> None:
    """config.json, agent_config.json (forward), agent_config_backward.json; what each direction trains with."""
    cfg = run.cfg
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(cfg.to_dict(), indent=1))
    announce_agent_config(run.forward.agent.cfg, out, prefix="[train] forward", log=log)
    (out / "agent_config_backward.json").write_text(json.dumps(run.backward.agent.cfg.to_dict(), indent=1))
    for d, src in ((run.forward, cfg.reward), (run.backward, cfg.backward_reward)):
        note = REWARD_NOTE if src == "env" else src
        log(f"[train] {d.name} ({d.goal}): reward from {note}; demos {len(d.demo) if d.demo else 0} transitions")
    log(f"[train] env: {'hardware-faithful' if cfg.faithful else 'reset-free (object state observed)'}; the scene is "
        "teleported on the first reset only, then the robot's reset routine runs")


class FBSession:
    """The loop of a forward/backward run: learners.training.forward_backward.forward_backward, an evaluation of
    both policies every `eval_every` env steps, checkpoints of both agents every `checkpoint_every`."""

    def __init__(self, run: FBRun, out: Path, log: Any = print) -> None:
        self.run_, self.cfg, self.out, self.log = run, run.cfg, out, log
        self.counters = FBCounters()
        self.metrics = MetricsLog(out / METRICS_FILE)
        self.tb = ScalarWriter(tensorboard_dir(out))
        self.window: list[dict[str, Any]] = []
        self.t0 = self.started = time.perf_counter()
        self.updates0 = 0

    def run(self) -> dict[str, Any]:
        """Train to --max-env-steps (or the --max-minutes budget); the last metrics row. Closes everything."""
        cfg, run = self.cfg, self.run_
        loop_cfg = ForwardBackwardConfig(total_steps=cfg.max_env_steps, start_steps=cfg.start_steps,
                                         learning_starts=cfg.learning_starts, updates_per_step=cfg.steps_per_update(),
                                         seed=cfg.seed)
        last_eval = last_ckpt = 0
        row: dict[str, Any] = {}
        try:
            for m in forward_backward(run.env, (run.forward, run.backward), loop_cfg, self.counters):
                self.window.append(m)
                step = self.counters.env_step
                done = step >= cfg.max_env_steps
                if step // cfg.eval_every > last_eval or done:
                    last_eval = step // cfg.eval_every
                    row = self.evaluate(step)
                    if cfg.max_minutes > 0 and time.perf_counter() - self.started > 60.0 * cfg.max_minutes \
                            and not done:
                        self.log(f"[train] stopping at env step {step}: --max-minutes {cfg.max_minutes} reached")
                        done = True
                if step // cfg.checkpoint_every > last_ckpt or done:
                    last_ckpt = step // cfg.checkpoint_every
                    self.checkpoint()
                if done:
                    break
            if not row or row.get("env_step") != self.counters.env_step:
                row = self.evaluate(self.counters.env_step)
                self.checkpoint()
        finally:
            self.tb.close()
            run.close()
        return row

    def evaluate(self, step: int) -> dict[str, Any]:
        """Both deterministic policies on their evaluation envs; the metrics row (file, TensorBoard, plot, line)."""
        cfg, fwd, bwd, counters = self.cfg, self.run_.forward, self.run_.backward, self.counters
        res_f = evaluate_episodes(self.run_.eval_envs[0], fwd.agent, episodes=cfg.eval_episodes,
                                  seed=1_000_000 + cfg.seed)
        res_b = evaluate_episodes(self.run_.eval_envs[1], bwd.agent, episodes=cfg.eval_episodes,
                                  seed=2_000_000 + cfg.seed)
        r = self.metrics_row(step, res_f, res_b)
        self.metrics.write(r)
        self.tb.write(r, step)
        plot_learning_curve(read_metrics(self.out / METRICS_FILE), self.out / "learning_curve.png",
                            ys=("forward_success_rate", "backward_success_rate"), title=f"{cfg.task} forward/backward")
        self.log(f"[train] step {step}/{cfg.max_env_steps}  episode {counters.episode}  eval success forward "
                 f"{r['forward_success_rate']:.0%} backward {r['backward_success_rate']:.0%}  hand-overs "
                 f"{counters.handovers} (false positive {counters.false_positive_handovers})  teleports "
                 f"{r['scene_teleports']}  updates {r['updates']} ({r['updates_per_s']:.1f}/s)")
        self.window, self.t0, self.updates0 = [], time.perf_counter(), r["updates"]
        return r

    def metrics_row(self, step: int, res_f: list[dict[str, Any]], res_b: list[dict[str, Any]]) -> dict[str, Any]:
        """One row: both success rates, the hand-over counters, per-direction training episodes since the last
        row, the mean losses, updates/s."""
        run, counters = self.run_, self.counters
        updates = run.forward.updates + run.backward.updates
        dt = max(time.perf_counter() - self.t0, 1e-9)
        r: dict[str, Any] = {
            "env_step": step, "episode": counters.episode, "updates": updates,
            "success_rate": float(np.mean([e["success"] for e in res_f])),
            "forward_success_rate": float(np.mean([e["success"] for e in res_f])),
            "backward_success_rate": float(np.mean([e["success"] for e in res_b])),
            "return": float(np.mean([e["return"] for e in res_f])),
            "updates_per_s": (updates - self.updates0) / dt, "minutes": (time.perf_counter() - self.started) / 60.0,
            "handovers": counters.handovers, "false_positive_handovers": counters.false_positive_handovers,
            "handovers_without_true_success": counters.handovers_without_true_success,
            "timeout_handovers": counters.timeout_handovers, "withdrawn_rewards": counters.withdrawn_rewards,
            "scene_teleports": int(getattr(run.env.unwrapped, "scene_teleports", -1)),
            "reset_retries": int(getattr(run.env.unwrapped, "reset_retry_count", -1)),
        }
        for d in (run.forward, run.backward):
            r.update({f"{d.name}_{k}": v for k, v in d.counters().items()})
            r[f"{d.name}_online_buffer"] = len(d.online)
            eps = [m for m in self.window if m["direction"] == d.name]
            if eps:
                r[f"train_{d.name}_true_success_rate"] = float(np.mean([bool(m["true_success"]) for m in eps]))
                r[f"train_{d.name}_episodes"] = len(eps)
        for k in ("critic_loss", "actor_loss", "q_mean"):
            vals = [m[k] for m in self.window if k in m]
            if vals:
                r[k] = float(np.mean(vals))
        return r

    def checkpoint(self) -> None:
        """Each agent's run (agent, buffers, counters) in its own checkpoints directory: a `robot-rl train`
        checkpoint each, so `robot-rl eval` evaluates either policy."""
        for d, dcfg in ((self.run_.forward, self.cfg), (self.run_.backward, self.run_.backward_cfg)):
            counts = {"env_step": self.counters.env_step, "episode": d.episodes, "updates": d.updates}
            meta = {"config": dcfg.to_dict(), "agent_config": d.agent.cfg.to_dict(), "direction": d.name,
                    "forward_backward": dataclasses.asdict(self.counters)}
            assert isinstance(d.agent, SACAgent)
            where = self.out / (CHECKPOINTS_DIR if d.name == "forward" else BACKWARD_CHECKPOINTS_DIR)
            TrainingRun(d.agent, d.online, d.demo, counts).save(where, extra_meta=meta)


def train_forward_backward(cfg: TrainConfig, out: Path, resume: bool = False, log: Any = print) -> dict[str, Any]:
    """Run a forward/backward training into `out` (module docstring); returns the last metrics row."""
    fb = check_forward_backward(cfg, out, resume)
    run = build_fb_run(cfg, fb, out)
    write_fb_files(run, out, log=log)
    return FBSession(run, out, log=log).run()
