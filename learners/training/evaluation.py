"""`robot-rl eval`'s library: deterministic episodes with a checkpoint's policy, summarised in one row.

The checkpoint may come from any run this project writes (robot_rl.checkpoint.find_checkpoint: a run directory,
its checkpoints/ or one ckpt_* directory): a `robot-rl train` run (meta.json holds the TrainConfig: task or
gymnasium env id, and the AgentConfig it trained with), a `robot-rl train-bc` run (the same, the policy alone in a
'policy' group), or a `robot-rl learner` / `sim` run (meta.json holds the AgentConfig and the EnvSpec: the task
preset, state or pixels, and the image size come from the spec). The env is rebuilt through
learners.training.run_env (robot_rl.gym_env) and the episodes run through robot_rl.evaluation.

Which success it counts is the run's reward: `reward` (`--reward`), else the train run's (its TrainConfig), else the
task file's `[reward]` (a learner run records only its task's name: `task`, `--task FILE`, names the file). A
classifier counts its own success with its gate (`reward_gate_k`, else the run's or the file's gate_k, else the
card's), as the run's reward model did, and the env's true success is reported beside it (`true_success_rate`,
metrics only); otherwise the env's own success (on the twin its true success; a `human` reward has no person
here). The row says which (`success_source`).

Usage::

    row = evaluate_checkpoint(Path("runs/reach"), episodes=20, seed=2_000_000)
    row["success_rate"], row["mean_return"], row["env_step"], row["success_source"]        # ..., "env"
    row = evaluate_checkpoint(Path("runs/pick"), episodes=20, reward="classifier:runs/cls", reward_gate_k=3)
    row["success_rate"], row["true_success_rate"]      # the classifier's success; the twin's true success
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np
import torch

from learners.agents.agent import make_agent
from learners.agents.config import AgentConfig
from learners.agents.policy import build_policy
from learners.rewards.reward_model import RewardModelWrapper, camera_shapes_of_env, make_reward_model
from learners.training.config import TrainConfig
from learners.training.online import evaluate_episodes
from learners.training.run_env import camera_source, make_run_env, run_env_spec
from robot_rl.checkpoint import CheckpointError, find_checkpoint, load_checkpoint
from robot_rl.errors import ConfigError
from robot_rl.evaluation import summarize
from robot_rl.presets import get_preset, task_reward
from robot_rl.reward_source import parse_reward_source
from robot_rl.specs import EnvSpec


def run_config(ckpt: Path, meta: dict[str, Any], task: str | None = None,
               ) -> tuple[TrainConfig, AgentConfig | None, EnvSpec | None]:
    """How to rebuild the env and agent of a checkpoint: (env config, the learner's AgentConfig or None for a
    train run, the learner's EnvSpec or None). `task`: the preset or task file a learner run trained on (its
    meta holds only the task's name); ConfigError when its name is not the run's."""
    if isinstance(meta.get("config"), dict):  # robot-rl train
        saved = meta.get("agent_config")  # the config it trained with (older checkpoints: rebuilt from `config`)
        return (TrainConfig.from_dict(meta["config"]), AgentConfig.from_dict(saved) if isinstance(saved, dict)
                else None, None)
    if isinstance(meta.get("agent_config"), dict) and isinstance(meta.get("spec"), dict):  # robot-rl learner / sim
        spec = EnvSpec.from_dict(meta["spec"])
        if task is not None and get_preset(task).name != spec.task:
            raise ConfigError(f"--task {task}: its task is {get_preset(task).name!r}, but {ckpt} trained on "
                              f"{spec.task!r}")
        get_preset(task or spec.task)  # the learner runs task presets; UnknownTaskError otherwise
        cams = spec.cameras
        env_cfg = TrainConfig(task=task or spec.task, obs_mode="pixels" if cams else "state",
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


def run_reward(cfg: TrainConfig, train_run: bool, reward: str | None, gate_k: int | None) -> tuple[str, int | None]:
    """The reward an evaluation counts success by and its gate (see the module docstring)."""
    file_reward, file_gate_k = task_reward(cfg.task) if cfg.task is not None else (None, None)
    if reward is None:
        reward = cfg.reward if train_run else file_reward or "env"
    if gate_k is None:
        gate_k = cfg.reward_gate_k if train_run else file_gate_k
    parse_reward_source(reward)
    if gate_k is not None and gate_k < 1:
        raise ConfigError(f"--reward-gate-k={gate_k} must be an integer >= 1")
    return reward, gate_k


def run_timing(cfg: TrainConfig, ckpt: Path, learner_run: bool, camera_latency_ms: float | None,
               action_delay_ms: float | None) -> TrainConfig:
    """`cfg` with the twin's simulated timing the evaluation runs with: the flags when either is given (the other
    then its default: 0, or with --faithful the faithful one); otherwise a train run's own (its config) or a learner
    / sim run's, from the sim's summary.json in the run directory (its `timing`; none without that file)."""
    if camera_latency_ms is None and action_delay_ms is None:
        if not learner_run:
            return cfg
        saved: Any = {}
        try:
            saved = json.loads((ckpt.parent.parent / "summary.json").read_text()).get("timing")
        except (OSError, ValueError, AttributeError):
            pass
        if not isinstance(saved, dict) or not saved:
            return cfg
        camera_latency_ms, action_delay_ms = saved.get("camera_latency_ms"), saved.get("action_delay_ms")
    return dataclasses.replace(cfg, camera_latency_ms=camera_latency_ms, action_delay_ms=action_delay_ms)


def evaluate_checkpoint(path: Path, episodes: int, seed: int = 2_000_000, reward: str | None = None,
                        reward_gate_k: int | None = None, task: str | None = None,
                        camera_latency_ms: float | None = None, action_delay_ms: float | None = None,
                        per_episode: bool = False) -> dict[str, Any]:
    """Evaluate the checkpoint `path` names on `episodes` deterministic episodes (env seeds seed, seed + 1, ...);
    one row: checkpoint, task, episodes, env_step, success_rate (counted as `success_source` says; a classifier's
    with `reward_gate_k` and true_success_rate beside it), mean_return, mean_length, and the simulated `timing`
    when there is one. `reward`, `reward_gate_k`, `task`: see the module docstring; `camera_latency_ms`,
    `action_delay_ms`: the twin's simulated timing (None: the run's own, `run_timing`). `per_episode`: the row also
    holds "episode_successes", each episode's success (the env's own, the twin's truth, even with a classifier)."""
    if episodes < 1:
        raise ConfigError(f"--episodes={episodes} must be >= 1")
    ckpt = find_checkpoint(path)
    groups, meta = load_checkpoint(ckpt)
    if "agent" not in groups and "policy" not in groups:
        raise CheckpointError(f"{ckpt}: the checkpoint has neither an 'agent' nor a 'policy' (train-bc) group")
    cfg, agent_cfg, saved_spec = run_config(ckpt, meta, task)
    cfg = run_timing(cfg, ckpt, saved_spec is not None, camera_latency_ms, action_delay_ms)
    timing = cfg.env_timing()  # (a bad value or an --env-id run: ConfigError from TrainConfig, naming the flag)
    reward, reward_gate_k = run_reward(cfg, isinstance(meta.get("config"), dict), reward, reward_gate_k)
    classifier = parse_reward_source(reward)[0] == "classifier"
    torch.set_num_threads(cfg.torch_threads)
    # a hardware-faithful learner run (robot-rl learner / sim --faithful) observed no object state: evaluate the
    # same observation (the episodes still start from seeded scenes and report the true success)
    faithful_obs = saved_spec is not None and not saved_spec.cameras and "object" not in {
        s.name for s in saved_spec.observation}
    env_kwargs: dict[str, Any] = {"object_obs": False} if faithful_obs else {}
    if classifier:  # the classifier decides when an episode ends, as in the run (not the twin's own success)
        env_kwargs["terminate_on_success"] = False
    env = make_run_env(cfg, reward_sources=(reward,) if classifier else (), **env_kwargs)
    if classifier:
        try:
            model = make_reward_model(reward, camera_shapes_of_env(env), k=reward_gate_k,
                                      where=f"the {cfg.task or cfg.env_id} {camera_source(cfg.obs_mode)}")
        except Exception:
            env.close()
            raise
        assert model is not None  # a classifier's
        env = RewardModelWrapper(env, model)
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
        counted = summarize(res, seed, True, success_by="reward" if classifier else "env")
        row: dict[str, Any] = {"checkpoint": str(ckpt), "task": spec.task, "episodes": episodes,
                               "env_step": int(dict(meta.get("counters", {})).get("env_step", -1)),
                               "success_rate": counted["success_rate"], "success_source": "env"}
        if timing:
            row["timing"] = timing
        if classifier:
            row.update(success_source=reward, reward_gate_k=int(env.model.k),
                       true_success_rate=counted["true_success_rate"])
        elif reward == "human":
            row["run_reward"] = "human"  # a person's success key: no person evaluates here, the env's success counts
    finally:
        env.close()
    if per_episode:
        row["episode_successes"] = [bool(r["success"]) for r in res]
    return {**row, "mean_return": float(np.mean([r["return"] for r in res])),
            "mean_length": float(np.mean([r["length"] for r in res]))}
