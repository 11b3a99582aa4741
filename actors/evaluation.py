"""Evaluating a policy on the actor's side: `evaluate` (deterministic episodes through robot_rl.evaluation's one
loop) and `evaluate_checkpoint` (`robot-rl actor --evaluate CKPT`: a learner checkpoint's policy on the actor's env,
printed as a success rate and written as a JSON summary).

Which success it counts is the run's reward (`--reward`, default the task file's `[reward]`): a classifier counts
its own success, with its gates (`--reward-gate-k`, else the file's gate_k, else the card's), as the actor's reward
model does (actors.actor_env), and on the twin the true success is reported beside it (metrics only); otherwise the
env's success, which on the twin is its true success. Over a hardware robot server the env cannot measure the task's
success (no object state), so there an evaluation without a classifier is refused, a `human` reward included (a
person's success key needs a teleop device, and evaluation runs without one). The summary says which success it
counted (`success_source`).

Usage::

    result = evaluate(env, policy, episodes=20, seed=10_000)       # success_rate, return, length, per episode
    result = evaluate_checkpoint(CheckpointEvalConfig(checkpoint=Path("runs/pick/checkpoints"),
                                                      task="twin-pick-cube", summary=Path("eval.json")))
    policy = load_learner_checkpoint(Path("runs/pick")).policy(env_spec_of(env, "twin-pick-cube"))
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from actors.actor_env import make_actor_env
from learners.agents.policy import AgentConfig, Policy
from robot_rl.config import Config, require
from robot_rl.errors import ConfigError
from robot_rl.evaluation import run_episodes, summarize
from robot_rl.gym_env import env_spec_of
from robot_rl.reward_source import parse_reward_source
from robot_rl.specs import EnvSpec
from robot_rl.timing import timing_overrides


def evaluate(env: Any, policy: Policy | None, episodes: int, seed: int = 10_000, deterministic: bool = True,
             rng_seed: int = 0, success_by: str = "env") -> dict[str, Any]:
    """Run `episodes` episodes (env seeded with seed+i) with the policy's mode (uniform random actions when
    `policy` is None) through robot_rl.evaluation's loop; returns its summary (success_rate, mean return / length
    and the per-episode lists; `success_by` "reward": a reward model's success, robot_rl.evaluation.summarize)."""
    rng = np.random.default_rng(rng_seed)

    def act(obs: Any) -> np.ndarray:
        if policy is None:
            return rng.uniform(-1.0, 1.0, env.action_space.shape).astype(np.float32)
        return policy.act(obs, deterministic=deterministic)

    return summarize(run_episodes(env, act, episodes, seed), seed=seed, deterministic=deterministic,
                     success_by=success_by)


@dataclasses.dataclass(frozen=True)
class CheckpointEvalConfig(Config):
    """What `evaluate_checkpoint` evaluates, on which env, and where the result goes."""

    checkpoint: Path = Path("checkpoints")
    """A checkpoint directory (ckpt_*), a run's checkpoints/ directory or a run directory (then: its newest)."""
    task: str = "twin-pick-cube"
    """Task preset of the env."""
    obs_mode: str = "state"
    """Observation mode (the run's)."""
    image_size: int | None = None
    """Camera image size (pixels mode; None: the preset's)."""
    robot: str | None = None
    """Robot server address (None: the twin in process)."""
    allow_twin_box: bool = False
    """Over a hardware server: run a task whose box is the twin's anyway (envs.task_file.require_lab_box)."""
    faithful: bool = False
    """Evaluate on the hardware-faithful observation (no object state), with its simulated timing."""
    reward: str = "env"
    """The run's reward (env, classifier:DIR, human): a classifier's success is what the evaluation counts."""
    reward_gate_k: int | None = None
    """A classifier's gate: K consecutive positive frames (None: the card's)."""
    camera_latency_ms: float | None = None
    """The twin's simulated camera latency (ms; None: the faithful default with `faithful`, else 0)."""
    action_delay_ms: float | None = None
    """The twin's simulated action delay (ms; None: as camera_latency_ms)."""
    episodes: int = 20
    """Deterministic episodes."""
    seed: int = 10_000
    """Seed of the first episode (then +1 each)."""
    summary: Path | None = None
    """Write the result here (JSON, atomically)."""

    def validate(self) -> None:
        require(self.episodes >= 1, "episodes", self.episodes, "must be >= 1")
        parse_reward_source(self.reward)
        require(self.reward_gate_k is None or self.reward_gate_k >= 1, "reward_gate_k", self.reward_gate_k,
                "must be an integer >= 1")


@dataclasses.dataclass(frozen=True, eq=False)
class LearnerCheckpoint:
    """A learner checkpoint's agent (`load_learner_checkpoint`): AgentConfig (on the CPU), arrays and meta."""

    path: Path
    agent_config: AgentConfig
    agent: dict[str, np.ndarray]
    meta: dict[str, Any]

    def policy(self, spec: EnvSpec) -> Policy:
        """The checkpoint's policy for an env of `spec`, on the CPU; ConfigError when the checkpoint was trained on
        another spec (the task name aside)."""
        from learners.agents.policy import build_policy

        if isinstance(self.meta.get("spec"), dict):
            diff = [f for f in spec.diff(EnvSpec.from_dict(self.meta["spec"])) if f != "task"]
            if diff:
                raise ConfigError(f"{self.path} was trained on another spec (differs in {diff}); pass the run's "
                                  f"--obs-mode / --image-size")
        policy = build_policy(spec, self.agent_config, device="cpu")
        prefix = "policy/"
        params = {k[len(prefix):]: np.array(v) for k, v in self.agent.items() if k.startswith(prefix)}
        policy.load_trainable_state({k: params[k] for k in policy.trainable_names() if k in params})
        return policy


def load_learner_checkpoint(path: Path) -> LearnerCheckpoint:
    """The learner checkpoint at `path` (a ckpt_* directory, a checkpoints/ directory or a run directory: the
    newest). ConfigError when there is none or it is not a learner's."""
    from learners.agents.policy import AgentConfig
    from robot_rl.checkpoint import latest_checkpoint, load_checkpoint

    if not (path / "meta.json").is_file():
        found = latest_checkpoint(path) or latest_checkpoint(path / "checkpoints")
        if found is None:
            raise ConfigError(f"--evaluate {path}: no checkpoint there (expected a ckpt_* directory, a checkpoints/ "
                              f"directory or a run directory)")
        path = found
    groups, meta = load_checkpoint(path)
    if not isinstance(meta.get("agent_config"), dict) or "agent" not in groups:
        raise ConfigError(f"{path}: not a learner checkpoint (no agent group / agent_config)")
    cfg = AgentConfig.from_dict(meta["agent_config"]).replace(device="cpu")
    return LearnerCheckpoint(path, cfg, dict(groups["agent"]), meta)


def served_hardware(env: Any) -> str | None:
    """The hardware backend a robot server behind `env` drives (envs.task_file.HARDWARE_BACKENDS; not a ROS 2
    twin), or None for the twin (in process or served)."""
    from envs.task_file import HARDWARE_BACKENDS

    info = getattr(getattr(getattr(env, "unwrapped", env), "robot", None), "info", None)
    info = info if isinstance(info, dict) else {}
    backend = str(info.get("backend", ""))
    return backend if backend in HARDWARE_BACKENDS and not info.get("twin") else None


def refuse_unmeasured_success(env: Any, reward: str) -> None:
    """ConfigError (the env closed) for an evaluation over a hardware robot server that would count the env's
    success: the arm cannot measure the task's success, only a classifier can (see the module docstring)."""
    backend = served_hardware(env)
    if backend is None:
        return
    env.close()
    why = ("the task's reward is human, a person's success key, which needs a teleop device (evaluation runs "
           "without one); " if reward == "human" else "")
    raise ConfigError(f"--evaluate over a {backend} robot server: the arm cannot measure the task's success (no "
                      f"object state), so an evaluation counts success by a reward classifier; {why}pass --reward "
                      f"classifier:DIR (robot-rl train-classifier), or set [reward] source = \"classifier\" in the "
                      f"task file")


def success_label(result: dict[str, Any], reward: str) -> str:
    """What the success rate of `result` counts, in words, for the evaluation's line."""
    if result["success_source"] != "env":
        truth = result.get("true_success_rate")
        return (f"by the classifier {parse_reward_source(reward)[1]} (gate k={result['reward_gate_k']})"
                + ("" if truth is None else f"; the twin's true success {truth:.2f}, metrics only"))
    human = "; the run's reward is human, and evaluation runs without a person" if reward == "human" else ""
    return f"the twin's true success{human}"


def evaluate_checkpoint(cfg: CheckpointEvalConfig) -> dict[str, Any]:
    """`robot-rl actor --evaluate CKPT`: `cfg.episodes` deterministic episodes with a checkpoint's policy on the
    actor's env (`evaluation=True`: a seeded, teleported scene); success counted by the run's classifier when its
    reward is one (the twin's true success beside it), else the env's (the twin's true success; refused over a
    hardware server). Prints the success rate, saying which success it counts, and writes `cfg.summary`. Returns
    the result (evaluate's summary + success_source, checkpoint, env_step, updates, task, seconds)."""
    ckpt = load_learner_checkpoint(Path(cfg.checkpoint))
    classifier = parse_reward_source(cfg.reward)[0] == "classifier"
    env = make_actor_env(cfg.task, cfg.obs_mode, cfg.image_size, cfg.robot, faithful=cfg.faithful, evaluation=True,
                         allow_twin_box=cfg.allow_twin_box, reward=cfg.reward if classifier else "env",
                         reward_gate_k=cfg.reward_gate_k,
                         timing=timing_overrides(cfg.faithful, cfg.camera_latency_ms, cfg.action_delay_ms))
    if not classifier:
        refuse_unmeasured_success(env, cfg.reward)
    try:
        policy = ckpt.policy(env_spec_of(env, cfg.task))
        t0 = time.monotonic()
        result = evaluate(env, policy, cfg.episodes, seed=cfg.seed, deterministic=True,
                          success_by="reward" if classifier else "env")
        if classifier:
            result.update(success_source=cfg.reward, reward_gate_k=int(env.model.k), reward_model=env.stats())
        else:
            result["success_source"] = "env"
    finally:
        env.close()
    counters = ckpt.meta.get("counters", {})
    result.update(checkpoint=str(ckpt.path), env_step=int(counters.get("env_step", -1)),
                  updates=int(counters.get("updates", -1)), task=cfg.task, eval_seconds=round(time.monotonic() - t0, 2))
    print(f"actor: evaluated {ckpt.path.name} (env_step {result['env_step']}): success rate "
          f"{result['success_rate']:.2f} ({success_label(result, cfg.reward)}) over {cfg.episodes} deterministic "
          f"episodes, mean return {result['return']:.3f}", flush=True)
    if cfg.summary is not None:
        write_json(cfg.summary, result)
    return result


def write_json(path: Path, data: dict[str, Any]) -> None:
    """`data` as indented JSON at `path` (parents created), atomically (write then rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, indent=1))
    tmp.replace(path)
