"""The one evaluation loop: run whole episodes with a policy and report return, length and success.

Every command that evaluates (`robot-rl train`, `eval`, `train-bc`, `actor --evaluate`, forward/backward
training) runs its episodes through `run_episodes`; they differ only in the function that turns an observation
into the env's action (an agent's deterministic mode mapped to the env's action box, an actor policy, random
actions), which they pass in. No torch and no gymnasium here: `env` is any object with gymnasium's `reset(seed=)`
and `step(action)`.

Which success an evaluation counts: the env's own (`info["success"]`: on the twin its true success), or, when the
env is wrapped in a reward model (learners.rewards.reward_model.RewardModelWrapper: a classifier with its gates),
the model's (`info["reward_success"]`), as the actor's reward counts it; then the env's true success is reported
beside it (metrics only) where the env measures one (the twin; on hardware `info["success"]` is a placeholder,
robot_rl.reward_source.SUCCESS_UNKNOWN_INFO_KEY). `summarize(..., success_by="reward")` counts the model's.

Usage::

    results = run_episodes(env, lambda obs: policy.act(obs, deterministic=True), episodes=10, seed=10_000)
    results[0]                    # {"return": 3.0, "length": 41, "success": True}
    summary = summarize(results, seed=10_000, deterministic=True)
    summary["success_rate"]       # fraction of episodes whose info ever reported success
    summary = summarize(results, seed=10_000, deterministic=True, success_by="reward")
    summary["success_rate"], summary["true_success_rate"]   # the reward model's; the twin's truth beside it
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from robot_rl.reward_source import SUCCESS_UNKNOWN_INFO_KEY

SUCCESS_BY = ("env", "reward")
"""What an evaluation counts as success: the env's `info["success"]`, or a reward model's `info["reward_success"]`."""

MAX_EPISODE_STEPS = 100_000
"""A guard against envs without a time limit: an episode ends after this many steps."""


def run_episodes(env: Any, act: Callable[[Any], np.ndarray], episodes: int, seed: int = 10_000,
                 max_steps: int = MAX_EPISODE_STEPS) -> list[dict[str, Any]]:
    """Run `episodes` episodes, the env reset with seed `seed + i` for episode i, each action `act(obs)`.

    One dict per episode: "return" (sum of rewards), "length" (steps), "success" (True when any step's
    `info["success"]` was true; False for envs that never report it); with a reward model on the env also
    "reward_success" (any step's `info["reward_success"]`), and "success_unknown" (True) when the env says its
    "success" is no measurement (hardware). An episode ends when the env terminates or truncates, or after
    `max_steps` steps."""
    results: list[dict[str, Any]] = []
    for i in range(episodes):
        obs, _ = env.reset(seed=seed + i)
        total, length, success = 0.0, 0, False
        extra: dict[str, bool] = {}
        for _ in range(max_steps):
            obs, reward, terminated, truncated, info = env.step(act(obs))
            total += float(reward)
            length += 1
            info = info if isinstance(info, dict) else {}
            success = success or bool(info.get("success", False))
            if "reward_success" in info:
                extra["reward_success"] = extra.get("reward_success", False) or bool(info["reward_success"])
            if info.get(SUCCESS_UNKNOWN_INFO_KEY):
                extra["success_unknown"] = True
            if terminated or truncated:
                break
        results.append({"return": total, "length": length, "success": success, **extra})
    return results


def summarize(results: Sequence[dict[str, Any]], seed: int, deterministic: bool,
              success_by: str = "env") -> dict[str, Any]:
    """The summary every evaluation report uses: episodes, success_rate, mean return and episode_length, the
    per-episode successes and returns, and how the episodes were run (seed, deterministic). `success_by` "reward":
    success_rate and successes are the reward model's, and true_success_rate / true_successes (the env's own) come
    beside them when the env measured its success in every episode (None otherwise: hardware)."""
    if success_by not in SUCCESS_BY:
        raise ValueError(f"success_by must be one of {SUCCESS_BY}, got {success_by!r}")
    truth = [bool(r["success"]) for r in results]
    successes = [bool(r.get("reward_success", False)) for r in results] if success_by == "reward" else truth
    returns = [float(r["return"]) for r in results]
    lengths = [int(r["length"]) for r in results]
    out = {"episodes": len(results), "success_rate": float(np.mean(successes)) if successes else 0.0,
           "return": float(np.mean(returns)) if returns else 0.0,
           "episode_length": float(np.mean(lengths)) if lengths else 0.0,
           "successes": successes, "returns": returns, "seed": seed, "deterministic": deterministic}
    if success_by == "reward":
        known = bool(results) and not any(r.get("success_unknown") for r in results)
        out["true_success_rate"] = float(np.mean(truth)) if known else None
        out["true_successes"] = truth if known else None
    return out
