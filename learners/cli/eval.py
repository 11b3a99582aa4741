"""`robot-rl eval --checkpoint DIR --episodes K`: deterministic episodes with a checkpoint's policy, one JSON line.

DIR is any run directory this project writes, or a part of one (robot_rl.checkpoint.find_checkpoint):

- a `robot-rl train` run (OUT/checkpoints/ckpt_*/meta.json holds the TrainConfig: task or gymnasium env id);
- a `robot-rl train-bc` run (the same, with the cloned policy alone in a 'policy' group);
- a `robot-rl learner` run, and so `robot-rl sim`'s OUT, which is the learner's run directory (meta.json holds the
  AgentConfig and the EnvSpec: the task preset, state or pixels, and the image size come from the spec);
- a checkpoints/ directory (its newest checkpoint) or one ckpt_* directory.

Anything else (a demo directory, a run without a checkpoint yet, a typo) is a one-line error saying what DIR is
and what to pass instead.

Usage::

    robot-rl eval --checkpoint runs/reach --episodes 20                      # a train run
    robot-rl eval --checkpoint runs/sim-twin-pick-cube --episodes 20         # a sim / learner run
    robot-rl eval --checkpoint runs/reach/checkpoints/ckpt_00003000          # one checkpoint
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np
import torch

from learners.agents.agent import make_agent
from learners.agents.config import AgentConfig
from learners.agents.policy import build_policy
from learners.cli.train import TrainConfig, env_spec, make_env
from learners.training.online import evaluate_episodes
from robot_rl.checkpoint import CheckpointError, find_checkpoint, load_checkpoint
from robot_rl.errors import ConfigError
from robot_rl.presets import get_preset
from robot_rl.specs import EnvSpec


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="robot-rl eval", description=__doc__.split("\n\n")[0])
    p.add_argument("--checkpoint", required=True, type=Path,
                   help="run directory (train, learner or sim --out), its checkpoints/ or one ckpt_* directory")
    p.add_argument("--episodes", type=int, default=10)
    p.add_argument("--seed", type=int, default=2_000_000, help="env seed of the first episode (+1 per episode)")
    return p


def run_config(ckpt: Path, meta: dict[str, Any]) -> tuple[TrainConfig, AgentConfig | None, EnvSpec | None]:
    """How to rebuild the env and agent of a checkpoint: (env config, the learner's AgentConfig or None for a
    train run, the learner's EnvSpec or None)."""
    if isinstance(meta.get("config"), dict):  # robot-rl train
        saved = meta.get("agent_config")  # the config it trained with (older checkpoints: rebuilt from `config`)
        return (TrainConfig.from_dict(meta["config"]), AgentConfig.from_dict(saved) if isinstance(saved, dict)
                else None, None)
    if isinstance(meta.get("agent_config"), dict) and isinstance(meta.get("spec"), dict):  # robot-rl learner / sim
        spec = EnvSpec.from_dict(meta["spec"])
        get_preset(spec.task)  # the learner runs task presets; UnknownTaskError otherwise
        cams = spec.cameras
        env_cfg = TrainConfig(task=spec.task, obs_mode="pixels" if cams else "state",
                              image_size=cams[0].shape[0] if cams else None)
        return env_cfg, AgentConfig.from_dict(meta["agent_config"]), spec
    raise CheckpointError(f"{ckpt}: a checkpoint of neither robot-rl train (no 'config' in meta.json) nor robot-rl "
                          "learner (no 'agent_config' and 'spec'); cannot rebuild its env and agent")


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    if args.episodes < 1:
        raise ConfigError(f"--episodes={args.episodes} must be >= 1")
    ckpt = find_checkpoint(args.checkpoint)
    groups, meta = load_checkpoint(ckpt)
    if "agent" not in groups and "policy" not in groups:
        raise CheckpointError(f"{ckpt}: the checkpoint has neither an 'agent' nor a 'policy' (train-bc) group")
    cfg, agent_cfg, saved_spec = run_config(ckpt, meta)
    torch.set_num_threads(cfg.threads)
    # a hardware-faithful learner run (robot-rl learner / sim --faithful) observed no object state: evaluate the
    # same observation (the episodes still start from seeded scenes and report the true success)
    faithful_obs = saved_spec is not None and not saved_spec.cameras and "object" not in {
        s.name for s in saved_spec.observation}
    env = make_env(cfg, object_obs=False) if faithful_obs else make_env(cfg)
    try:
        spec = env_spec(env, cfg)
        if saved_spec is not None:
            diff = spec.diff(saved_spec)
            if diff:
                raise ConfigError(f"{ckpt}: the task's env today differs from the one the run trained on (in "
                                  f"{diff}); evaluate with the robot-rl version that trained it")
        if agent_cfg is None:
            agent_cfg = cfg.agent_config(has_cameras=bool(spec.cameras))
        actor: Any
        if "agent" in groups:
            actor = make_agent(spec, agent_cfg)  # the backend the run trained with (AgentConfig.backend)
            actor.load_state_dict(groups["agent"])
        else:  # a robot-rl train-bc run: the policy alone
            actor = build_policy(spec, agent_cfg)
            actor.load_trainable_state(groups["policy"])
        res = evaluate_episodes(env, actor, episodes=args.episodes, seed=args.seed)
    finally:
        env.close()
    print(json.dumps({"checkpoint": str(ckpt), "task": spec.task, "episodes": args.episodes,
                      "env_step": int(dict(meta.get("counters", {})).get("env_step", -1)),
                      "success_rate": float(np.mean([r["success"] for r in res])),
                      "mean_return": float(np.mean([r["return"] for r in res])),
                      "mean_length": float(np.mean([r["length"] for r in res]))}))
    return 0
