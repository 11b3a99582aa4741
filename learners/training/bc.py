"""`robot-rl train-bc`'s library: behaviour cloning on demo episodes, evaluated in the env, so a user sees what the
demos alone give before any RL; the result is also a base policy for residual RL (AgentConfig.residual_base).

The policy is the agent's own (learners.agents.policy: encoder + tanh-Gaussian actor), built from the AgentConfig a
`robot-rl train` run of the same task would use (TrainConfig.agent_config: the task's recipe, `--set`), trained to
put its mode tanh(mean) on the demo actions (mean squared error, in the agent's [-1, 1]; demo actions are stored in
env units and converted with the env's action bounds). Episodes are split into training and held-out episodes
(`BCConfig.holdout`), whose loss is reported beside the training loss; the deterministic policy is evaluated in the
env (robot_rl.evaluation through learners.training.online.evaluate_episodes) every `eval_every` steps and at the
end.

Outputs in `out` (a new run directory: robot_rl.run_dir refuses one that holds a run): config.json,
agent_config.json, metrics.jsonl (step, train_loss, holdout_loss, success_rate, return), learning_curve.png,
checkpoints/ (group `policy`; meta: agent_config, spec, config), and the final policy as policy.safetensors with
policy.json beside it (learners.agents.residual.save_policy_file).

Usage::

    tcfg = TrainConfig(task="twin-pick-cube", obs_mode="state", demos="demos/pick")
    row = train_bc(tcfg, BCConfig(steps=5000), Path("runs/bc_pick"))    # the last metrics row
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from learners.agents.config import AgentConfig
from learners.agents.encoders import random_shift
from learners.agents.options import announce_agent_config
from learners.agents.policy import Policy, build_policy
from learners.agents.residual import save_policy_file
from learners.training.config import TrainConfig
from learners.training.online import action_bounds, evaluate_episodes, from_env_action
from learners.training.pretrain_encoder import with_run_encoder
from learners.training.run_env import make_run_env, resolve_action_box, run_env_spec
from robot_rl.checkpoint import save_checkpoint
from robot_rl.config import Config, require
from robot_rl.episodes import Episode, load_dir
from robot_rl.errors import ConfigError
from robot_rl.metrics import MetricsLog, plot_learning_curve, read_metrics
from robot_rl.run_dir import CHECKPOINTS_DIR, METRICS_FILE, check_run_dir
from robot_rl.specs import EnvSpec


@dataclasses.dataclass(frozen=True)
class BCConfig(Config):
    """Behaviour-cloning schedule."""

    steps: int = 5000
    """Gradient steps."""
    batch_size: int = 256
    """Demo steps per gradient step."""
    lr: float = 3e-4
    """Adam learning rate (actor and trainable encoder parts)."""
    holdout: float = 0.1
    """Fraction of demo episodes held out for the held-out loss (at least one episode when there are >= 5)."""
    eval_every: int = 1000
    """Evaluate the deterministic policy in the env every this many steps (and at the end)."""
    eval_episodes: int = 10
    """Episodes per evaluation."""
    seed: int = 0
    """Seed of the split, the batches and the evaluation episodes."""

    def validate(self) -> None:
        require(self.steps >= 1, "steps", self.steps, "must be >= 1")
        require(self.batch_size >= 1, "batch_size", self.batch_size, "must be >= 1")
        require(self.lr > 0, "lr", self.lr, "must be > 0")
        require(0.0 <= self.holdout < 1.0, "holdout", self.holdout, "must be in [0, 1)")
        require(self.eval_every >= 1, "eval_every", self.eval_every, "must be >= 1")
        require(self.eval_episodes >= 0, "eval_episodes", self.eval_episodes, "must be >= 0")


def demo_arrays(episodes: Sequence[Episode], bounds: tuple[np.ndarray, np.ndarray] | None,
                ) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """({path: (N, ...)} observations, (N, A) actions in [-1, 1]) of every demo step (obs t, action t)."""
    if not episodes:
        raise ConfigError("behaviour cloning needs at least one demo episode")
    obs = {k: np.concatenate([ep.observations[k][:-1] for ep in episodes]) for k in episodes[0].observations}
    acts = np.concatenate([from_env_action(ep.actions, bounds) for ep in episodes]).astype(np.float32)
    return obs, acts


class BehaviourCloning:
    """Trains `policy` (its actor and trainable encoder parts) to put tanh(mean) on the demo actions."""

    def __init__(self, policy: Policy, cfg: BCConfig) -> None:
        self.policy, self.cfg = policy, cfg
        params = list(policy.actor.parameters()) + policy.encoder.trainable_parameters()
        self.opt = torch.optim.Adam(params, lr=cfg.lr)
        self.gen = torch.Generator(device=policy.device)
        self.gen.manual_seed(cfg.seed + 11)

    def loss(self, obs: dict[str, np.ndarray], actions: np.ndarray, idx: np.ndarray, train: bool) -> torch.Tensor:
        pol = self.policy
        images, state = pol.layout.to_torch({k: v[idx] for k, v in obs.items()}, pol.device, batched=True)
        if train and images and pol.cfg.augment_pad > 0:
            images = {k: random_shift(v, pol.cfg.augment_pad, self.gen) for k, v in images.items()}
        mean, _ = pol.actor(pol.features(images, state))
        target = torch.as_tensor(actions[idx, : pol.arm_dim], device=pol.device)
        return (torch.tanh(mean) - target).pow(2).sum(-1).mean()

    def step(self, obs: dict[str, np.ndarray], actions: np.ndarray, idx: np.ndarray) -> float:
        self.policy.train()
        loss = self.loss(obs, actions, idx, train=True)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()
        return float(loss.detach())

    @torch.no_grad()
    def eval_loss(self, obs: dict[str, np.ndarray], actions: np.ndarray, batch: int = 1024) -> float:
        self.policy.eval()
        n = actions.shape[0]
        total = 0.0
        for i in range(0, n, batch):
            idx = np.arange(i, min(n, i + batch))
            total += float(self.loss(obs, actions, idx, train=False)) * len(idx)
        return total / max(n, 1)


def split_episodes(episodes: Sequence[Episode], holdout: float, seed: int) -> tuple[list[Episode], list[Episode]]:
    """(training, held-out) episodes: a random `holdout` fraction held out when there are >= 5 episodes."""
    n = len(episodes)
    k = round(holdout * n) if n >= 5 else 0
    k = max(1, k) if n >= 5 and holdout > 0 else k
    order = np.random.default_rng(seed).permutation(n)
    held = set(order[:k].tolist())
    return [ep for i, ep in enumerate(episodes) if i not in held], [ep for i, ep in enumerate(episodes) if i in held]



@dataclasses.dataclass(frozen=True)
class DemoSplit:
    """The demo steps as arrays: training ({path: (N, ...)} observations, (N, A) actions in [-1, 1]) and held out
    (None when no episode is held out), with the episode counts."""

    obs: dict[str, np.ndarray]
    actions: np.ndarray
    held: tuple[dict[str, np.ndarray], np.ndarray] | None
    train_episodes: int
    held_episodes: int

    @classmethod
    def of(cls, episodes: Sequence[Episode], bcfg: BCConfig, bounds: tuple[np.ndarray, np.ndarray] | None,
           ) -> DemoSplit:
        train_eps, held_eps = split_episodes(episodes, bcfg.holdout, bcfg.seed)
        obs, acts = demo_arrays(train_eps, bounds)
        return cls(obs, acts, demo_arrays(held_eps, bounds) if held_eps else None, len(train_eps), len(held_eps))


def bc_agent_config(tcfg: TrainConfig, spec: EnvSpec) -> AgentConfig:
    """The AgentConfig a `robot-rl train` run of `tcfg` would use; ConfigError for options BC does not clone
    (a residual base, the gripper head)."""
    agent_cfg = tcfg.agent_config(has_cameras=bool(spec.cameras))
    if agent_cfg.residual_base is not None:
        raise ConfigError("robot-rl train-bc trains a policy from demos alone; residual_base belongs on "
                          "robot-rl train (with this run as the base)")
    if agent_cfg.gripper_head:
        raise ConfigError("robot-rl train-bc clones continuous actions; gripper_head=true is not supported")
    return agent_cfg


def load_bc_demos(tcfg: TrainConfig, spec: EnvSpec) -> list[Episode]:
    """The readable episodes of --demos (others reported and skipped), each checked against the run's spec (its
    action box as --action-scale narrowed it)."""
    episodes, errors = load_dir(str(tcfg.demos))
    for err in errors:
        print(f"[train-bc] warning: skipped {err}", file=sys.stderr)
    if not episodes:
        raise ConfigError(f"--demos {tcfg.demos}: no readable episodes")
    for ep in episodes:
        if ep.spec is not None:
            ep_spec = EnvSpec.from_dict(ep.spec)
            if tcfg.action_low:  # recorded with the env's own bounds; --action-scale narrowed them
                ep_spec = dataclasses.replace(ep_spec, action=spec.action)
            spec.require_equal(ep_spec, what=f"demo episodes in {tcfg.demos}")
    return episodes


def normalise_from_demos(policy: Policy, obs: dict[str, np.ndarray], log: Callable[[str], Any]) -> None:
    """--obs-norm: the state's normalisation from the training demos' per-element mean and std."""
    norm = policy.encoder.state_norm
    _, state = policy.layout.to_torch(obs, policy.device, batched=True)
    if norm is None or state is None or state.shape[0] < 2:
        raise ConfigError("--obs-norm needs a state observation and at least 2 demo steps")
    norm.set(state.mean(0), state.std(0))
    log(f"[train-bc] observation normalisation from {state.shape[0]} demo steps")


def fit(bc: BehaviourCloning, data: DemoSplit, env: Any, bcfg: BCConfig, out: Path, meta: dict[str, Any],
        log: Callable[[str], Any]) -> dict[str, Any]:
    """The gradient steps; every `eval_every` steps (and at the end) a metrics row (losses, the env evaluation)
    and a checkpoint of the policy. Returns the last row."""
    rng = np.random.default_rng(bcfg.seed)
    metrics = MetricsLog(out / METRICS_FILE)
    losses: list[float] = []
    row: dict[str, Any] = {}
    t0 = time.perf_counter()
    for step in range(1, bcfg.steps + 1):
        losses.append(bc.step(data.obs, data.actions, rng.integers(0, data.actions.shape[0], bcfg.batch_size)))
        if step % bcfg.eval_every != 0 and step != bcfg.steps:
            continue
        row = {"step": step, "env_step": 0, "train_loss": float(np.mean(losses)), "seconds": time.perf_counter() - t0}
        if data.held is not None:
            row["holdout_loss"] = bc.eval_loss(*data.held)
        if bcfg.eval_episodes > 0:
            res = evaluate_episodes(env, bc.policy, episodes=bcfg.eval_episodes, seed=1_000_000 + bcfg.seed)
            row["success_rate"] = float(np.mean([r["success"] for r in res]))
            row["return"] = float(np.mean([r["return"] for r in res]))
        metrics.write(row)
        save_checkpoint(out / CHECKPOINTS_DIR, step, {"policy": bc.policy.trainable_state()},
                        {**meta, "counters": {"env_step": 0, "bc_step": step}})
        log(f"[train-bc] step {step}/{bcfg.steps}  loss {row['train_loss']:.4f}"
            + (f"  held-out {row['holdout_loss']:.4f}" if "holdout_loss" in row else "")
            + (f"  eval success {row['success_rate']:.0%}  return {row['return']:.2f}" if "success_rate" in row
               else ""))
        losses = []
    return row


def export_policy(policy: Policy, meta: dict[str, Any], out: Path, task: str, log: Callable[[str], Any]) -> None:
    """OUT/policy.safetensors + policy.json (a residual base) and the learning curve (when evaluated)."""
    exported = save_policy_file(policy, {k: meta[k] for k in ("kind", "agent_config", "spec", "config")},
                                out / "policy.safetensors")
    log(f"[train-bc] policy: {exported} (+ {exported.with_suffix('.json').name}); a base for residual RL: "
        f"robot-rl train ... --set residual_base={out}")
    rows = read_metrics(out / METRICS_FILE)
    if any("success_rate" in r for r in rows):
        plot_learning_curve([{**r, "env_step": r["step"]} for r in rows], out / "learning_curve.png",
                            title=f"BC {task}")


def train_bc(tcfg: TrainConfig, bcfg: BCConfig, out: Path, log: Callable[[str], Any] = print) -> dict[str, Any]:
    """Behaviour cloning for the env and agent of `tcfg` on its demos; writes `out`; returns the last row."""
    if not tcfg.demos:
        raise ConfigError("robot-rl train-bc needs --demos DIR")
    check_run_dir(out, resume=False, resumable=False, what="a train-bc run")
    torch.set_num_threads(tcfg.torch_threads)
    torch.manual_seed(bcfg.seed)
    tcfg = resolve_action_box(tcfg, log=log)
    env = make_run_env(tcfg)
    try:
        spec = run_env_spec(env, tcfg)
        agent_cfg = with_run_encoder(bc_agent_config(tcfg, spec), tcfg.demo_dirs(), out,
                                     log=lambda s: log(f"[train-bc] {s}"))  # pixels: pretrained on the demos
        data = DemoSplit.of(load_bc_demos(tcfg, spec), bcfg, action_bounds(env))
        policy = build_policy(spec, agent_cfg)
        if agent_cfg.obs_norm:
            normalise_from_demos(policy, data.obs, log)
        out.mkdir(parents=True, exist_ok=True)
        (out / "config.json").write_text(json.dumps({"train": tcfg.to_dict(), "bc": bcfg.to_dict()}, indent=1))
        announce_agent_config(agent_cfg, out, prefix="[train-bc]", log=log)
        log(f"[train-bc] {data.train_episodes} training episodes ({data.actions.shape[0]} steps), "
            f"{data.held_episodes} held out; {bcfg.steps} steps of batch {bcfg.batch_size}")
        meta = {"kind": "bc", "config": tcfg.to_dict(), "bc": bcfg.to_dict(), "agent_config": agent_cfg.to_dict(),
                "spec": spec.to_dict()}
        row = fit(BehaviourCloning(policy, bcfg), data, env, bcfg, out, meta, log)
        export_policy(policy, meta, out, spec.task, log)
        return row
    finally:
        env.close()
