"""`robot-rl train-bc`: behaviour cloning on demo episodes, evaluated in the env, so a user sees what the demos
alone give before any RL; the result is also a base policy for residual RL (AgentConfig.residual_base).

The policy is the agent's own (learners.agents.policy: encoder + tanh-Gaussian actor), built from the AgentConfig a
`robot-rl train` run of the same task would use (the task's recipe: state selection and scale, image encoder;
`--set FIELD=VALUE` as on train), trained to put its mode tanh(mean) on the demo actions (mean squared error, in the
agent's [-1, 1]; demo actions are stored in env units and converted with the env's action bounds). Episodes are
split into training and held-out episodes (`--holdout`), whose loss is reported beside the training loss; the
deterministic policy is evaluated in the env every `--eval-every` steps and at the end.

Outputs in `--out DIR`: `config.json`, `agent_config.json`, `metrics.jsonl` (step, train_loss, holdout_loss,
success_rate, return), `learning_curve.png`, checkpoints in `checkpoints/` (numpy + JSON, no pickle; group `policy`:
the policy's weights; meta: agent_config, spec, config), which `robot-rl eval --checkpoint DIR` evaluates and
`robot-rl train --set residual_base=DIR` uses as a frozen base, and the final policy as `policy.safetensors` with
`policy.json` (agent_config, spec) beside it (also a residual base: `--set residual_base=DIR/policy.safetensors`).
With `--obs-norm` the state is normalised by the training demos' per-element mean and std (kept in the weights).

Usage::

    robot-rl record-demos --task twin-pick-cube --episodes 20 --out demos/pick --obs-mode state
    robot-rl train-bc --task twin-pick-cube --obs-mode state --demos demos/pick --out runs/bc_pick
    robot-rl train --task twin-pick-cube --obs-mode state --demos demos/pick --out runs/res_pick \\
        --set residual_base=runs/bc_pick
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from learners.agents.encoders import random_shift
from learners.agents.options import add_set_option, announce_agent_config
from learners.agents.policy import Policy, build_policy
from learners.agents.residual import save_policy_file
from learners.cli.train import TrainConfig, env_spec, make_env, resolve_action_box
from learners.training.online import action_bounds, evaluate_episodes, from_env_action
from robot_rl.checkpoint import save_checkpoint
from robot_rl.config import Config, require
from robot_rl.episodes import Episode, load_dir
from robot_rl.errors import ConfigError
from robot_rl.metrics import MetricsLog, plot_learning_curve, read_metrics
from robot_rl.presets import PRESETS
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


def train_bc(tcfg: TrainConfig, bcfg: BCConfig, out: Path, log: Callable[[str], Any] = print) -> dict[str, Any]:
    """Behaviour cloning for the env and agent of `tcfg` on its demos; writes `out`; returns the last row."""
    demos = tcfg.demos
    if not demos:
        raise ConfigError("robot-rl train-bc needs --demos DIR")
    if (out / "metrics.jsonl").exists():
        raise ConfigError(f"output directory {out} already holds a train-bc run; choose another --out")
    torch.set_num_threads(tcfg.threads)
    torch.manual_seed(bcfg.seed)
    tcfg = resolve_action_box(tcfg, log=log)
    env = make_env(tcfg)
    try:
        spec = env_spec(env, tcfg)
        agent_cfg = tcfg.agent_config(has_cameras=bool(spec.cameras))
        if agent_cfg.residual_base is not None:
            raise ConfigError("robot-rl train-bc trains a policy from demos alone; residual_base belongs on "
                              "robot-rl train (with this run as the base)")
        if agent_cfg.gripper_head:
            raise ConfigError("robot-rl train-bc clones continuous actions; gripper_head=true is not supported")
        episodes, errors = load_dir(demos)
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
        bounds = action_bounds(env)
        train_eps, held_eps = split_episodes(episodes, bcfg.holdout, bcfg.seed)
        obs, acts = demo_arrays(train_eps, bounds)
        held = demo_arrays(held_eps, bounds) if held_eps else None
        policy = build_policy(spec, agent_cfg)
        if agent_cfg.obs_norm:
            norm = policy.encoder.state_norm
            _, state = policy.layout.to_torch(obs, policy.device, batched=True)
            if norm is None or state is None or state.shape[0] < 2:
                raise ConfigError("--obs-norm needs a state observation and at least 2 demo steps")
            norm.set(state.mean(0), state.std(0))
            log(f"[train-bc] observation normalisation from {state.shape[0]} demo steps")
        out.mkdir(parents=True, exist_ok=True)
        (out / "config.json").write_text(json.dumps({"train": tcfg.to_dict(), "bc": bcfg.to_dict()}, indent=1))
        announce_agent_config(agent_cfg, out, prefix="[train-bc]", log=log)
        log(f"[train-bc] {len(train_eps)} training episodes ({acts.shape[0]} steps), {len(held_eps)} held out; "
            f"{bcfg.steps} steps of batch {bcfg.batch_size}")
        bc = BehaviourCloning(policy, bcfg)
        rng = np.random.default_rng(bcfg.seed)
        metrics = MetricsLog(out / "metrics.jsonl")
        meta = {"kind": "bc", "config": tcfg.to_dict(), "bc": bcfg.to_dict(), "agent_config": agent_cfg.to_dict(),
                "spec": spec.to_dict()}
        losses: list[float] = []
        row: dict[str, Any] = {}
        t0 = time.perf_counter()
        for step in range(1, bcfg.steps + 1):
            losses.append(bc.step(obs, acts, rng.integers(0, acts.shape[0], bcfg.batch_size)))
            if step % bcfg.eval_every == 0 or step == bcfg.steps:
                row = {"step": step, "env_step": 0, "train_loss": float(np.mean(losses)),
                       "seconds": time.perf_counter() - t0}
                if held is not None:
                    row["holdout_loss"] = bc.eval_loss(*held)
                if bcfg.eval_episodes > 0:
                    res = evaluate_episodes(env, policy, episodes=bcfg.eval_episodes, seed=1_000_000 + bcfg.seed)
                    row["success_rate"] = float(np.mean([r["success"] for r in res]))
                    row["return"] = float(np.mean([r["return"] for r in res]))
                metrics.write(row)
                save_checkpoint(out / "checkpoints", step, {"policy": policy.trainable_state()},
                                {**meta, "counters": {"env_step": 0, "bc_step": step}})
                log(f"[train-bc] step {step}/{bcfg.steps}  loss {row['train_loss']:.4f}"
                    + (f"  held-out {row['holdout_loss']:.4f}" if "holdout_loss" in row else "")
                    + (f"  eval success {row['success_rate']:.0%}  return {row['return']:.2f}"
                       if "success_rate" in row else ""))
                losses = []
        exported = save_policy_file(policy, {k: meta[k] for k in ("kind", "agent_config", "spec", "config")},
                                    out / "policy.safetensors")
        log(f"[train-bc] policy: {exported} (+ {exported.with_suffix('.json').name}); a base for residual RL: "
            f"robot-rl train ... --set residual_base={out}")
        rows = read_metrics(out / "metrics.jsonl")
        if any("success_rate" in r for r in rows):
            plot_learning_curve([{**r, "env_step": r["step"]} for r in rows], out / "learning_curve.png",
                                title=f"BC {spec.task}")
        return row
    finally:
        env.close()


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="robot-rl train-bc", description=__doc__.split("\n\n")[0])
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--task", help=f"task preset ({', '.join(PRESETS)})")
    src.add_argument("--env-id", help="any gymnasium env id (Box action; Box or Dict observation)")
    p.add_argument("--env-module", help="module to import first (registers --env-id)")
    p.add_argument("--obs-mode", choices=("state", "pixels"), help="twin presets: observation mode")
    p.add_argument("--image-size", type=int, help="twin presets in pixels mode: camera image size")
    p.add_argument("--demos", required=True, help="directory of demo episodes")
    p.add_argument("--out", required=True, type=Path, help="run directory")
    p.add_argument("--no-recipe", action="store_true", help="ignore the task's training recipe")
    p.add_argument("--success-key", default="success", help="info key the env reports success under")
    p.add_argument("--action-scale", default=None, help="'auto' or S: narrow the action bounds (as on train)")
    p.add_argument("--obs-norm", action="store_true", help="normalise the state by the demos' mean and std")
    p.add_argument("--device", default="auto", help="auto, cpu, cuda[:N]")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    for f in dataclasses.fields(BCConfig):
        p.add_argument("--" + f.name.replace("_", "-"), type=type(f.default), default=f.default,
                       help=f"(default: {f.default})")
    add_set_option(p, dest="agent_set")
    return p


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    bcfg = BCConfig(**{f.name: getattr(args, f.name) for f in dataclasses.fields(BCConfig)})
    tcfg = TrainConfig(task=args.task, env_id=args.env_id, env_module=args.env_module, obs_mode=args.obs_mode,
                       image_size=args.image_size, demos=args.demos, no_recipe=args.no_recipe,
                       success_key=args.success_key, action_scale=args.action_scale, obs_norm=args.obs_norm,
                       device=args.device,
                       threads=args.threads, seed=args.seed, agent_set=tuple(args.agent_set))
    row = train_bc(tcfg, bcfg, args.out)
    print(json.dumps({"out": str(args.out), **{k: row.get(k) for k in ("step", "success_rate", "return",
                                                                       "holdout_loss")}}))
    return 0
