"""`robot-rl eval`'s library: deterministic episodes with a checkpoint's policy, summarised in one row.

The checkpoint may come from any run this project writes (robot_rl.checkpoint.find_checkpoint: a run directory,
its checkpoints/ or one ckpt_* directory): a `robot-rl train` run (meta.json holds the TrainConfig: task or
gymnasium env id, and the AgentConfig it trained with), a `robot-rl train-bc` run (the same, the policy alone in a
'policy' group), or a `robot-rl learner` / `sim` run (meta.json holds the AgentConfig and the EnvSpec: the task
preset, state or pixels, and the image size come from the spec). The env is rebuilt through
learners.training.run_env (robot_rl.gym_env) and the episodes run through robot_rl.evaluation.

Usage::

    row = evaluate_checkpoint(Path("runs/reach"), episodes=20, seed=2_000_000)
    row["success_rate"], row["mean_return"], row["env_step"]
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from learners.agents.agent import make_agent
from learners.agents.config import AgentConfig
from learners.agents.policy import build_policy
from learners.training.config import TrainConfig
from learners.training.online import evaluate_episodes
from learners.training.run_env import make_run_env, run_env_spec
from robot_rl.checkpoint import CheckpointError, find_checkpoint, load_checkpoint
from robot_rl.errors import ConfigError
from robot_rl.presets import get_preset
from robot_rl.specs import EnvSpec


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


def checkpoint_actor(groups: dict[str, Any], spec: EnvSpec, agent_cfg: AgentConfig) -> Any:
    """What acts in the evaluation: the whole agent (the backend it trained with, AgentConfig.backend) or, for a
    train-bc checkpoint, its policy alone."""
    if "agent" in groups:
        agent = make_agent(spec, agent_cfg)
        agent.load_state_dict(groups["agent"])
        return agent
    policy = build_policy(spec, agent_cfg)
    policy.load_trainable_state(groups["policy"])
    return policy


def evaluate_checkpoint(path: Path, episodes: int, seed: int = 2_000_000) -> dict[str, Any]:
    """Evaluate the checkpoint `path` names on `episodes` deterministic episodes (env seeds seed, seed + 1, ...);
    one row: checkpoint, task, episodes, env_step, success_rate, mean_return, mean_length."""
    if episodes < 1:
        raise ConfigError(f"--episodes={episodes} must be >= 1")
    ckpt = find_checkpoint(path)
    groups, meta = load_checkpoint(ckpt)
    if "agent" not in groups and "policy" not in groups:
        raise CheckpointError(f"{ckpt}: the checkpoint has neither an 'agent' nor a 'policy' (train-bc) group")
    cfg, agent_cfg, saved_spec = run_config(ckpt, meta)
    torch.set_num_threads(cfg.torch_threads)
    # a hardware-faithful learner run (robot-rl learner / sim --faithful) observed no object state: evaluate the
    # same observation (the episodes still start from seeded scenes and report the true success)
    faithful_obs = saved_spec is not None and not saved_spec.cameras and "object" not in {
        s.name for s in saved_spec.observation}
    env = make_run_env(cfg, object_obs=False) if faithful_obs else make_run_env(cfg)
    try:
        spec = run_env_spec(env, cfg)
        if saved_spec is not None:
            diff = spec.diff(saved_spec)
            if diff:
                raise ConfigError(f"{ckpt}: the task's env today differs from the one the run trained on (in "
                                  f"{diff}); evaluate with the robot-rl version that trained it")
        if agent_cfg is None:
            agent_cfg = cfg.agent_config(has_cameras=bool(spec.cameras))
        res = evaluate_episodes(env, checkpoint_actor(groups, spec, agent_cfg), episodes=episodes, seed=seed)
    finally:
        env.close()
    return {"checkpoint": str(ckpt), "task": spec.task, "episodes": episodes,
            "env_step": int(dict(meta.get("counters", {})).get("env_step", -1)),
            "success_rate": float(np.mean([r["success"] for r in res])),
            "mean_return": float(np.mean([r["return"] for r in res])),
            "mean_length": float(np.mean([r["length"] for r in res]))}
