"""The one evaluation loop: run whole episodes with a policy and report return, length and success.

Every command that evaluates (`robot-rl train`, `eval`, `train-bc`, `actor --evaluate`, forward/backward
training) runs its episodes through `run_episodes`; they differ only in the function that turns an observation
into the env's action (an agent's deterministic mode mapped to the env's action box, an actor policy, random
actions), which they pass in. No torch and no gymnasium here: `env` is any object with gymnasium's `reset(seed=)`
and `step(action)`.

Usage::

    results = run_episodes(env, lambda obs: policy.act(obs, deterministic=True), episodes=10, seed=10_000)
    results[0]                    # {"return": 3.0, "length": 41, "success": True}
    summary = summarize(results, seed=10_000, deterministic=True)
    summary["success_rate"]       # fraction of episodes whose info ever reported success
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

MAX_EPISODE_STEPS = 100_000
"""A guard against envs without a time limit: an episode ends after this many steps."""


def run_episodes(env: Any, act: Callable[[Any], np.ndarray], episodes: int, seed: int = 10_000,
                 max_steps: int = MAX_EPISODE_STEPS) -> list[dict[str, Any]]:
    """Run `episodes` episodes, the env reset with seed `seed + i` for episode i, each action `act(obs)`.

    One dict per episode: "return" (sum of rewards), "length" (steps), "success" (True when any step's
    `info["success"]` was true; False for envs that never report it). An episode ends when the env terminates or
    truncates, or after `max_steps` steps."""
    results: list[dict[str, Any]] = []
    for i in range(episodes):
        obs, _ = env.reset(seed=seed + i)
        total, length, success = 0.0, 0, False
        for _ in range(max_steps):
            obs, reward, terminated, truncated, info = env.step(act(obs))
            total += float(reward)
            length += 1
            success = success or bool(isinstance(info, dict) and info.get("success", False))
            if terminated or truncated:
                break
        results.append({"return": total, "length": length, "success": success})
    return results


def summarize(results: Sequence[dict[str, Any]], seed: int, deterministic: bool) -> dict[str, Any]:
    """The summary every evaluation report uses: episodes, success_rate, mean return and episode_length, the
    per-episode successes and returns, and how the episodes were run (seed, deterministic)."""
    successes = [bool(r["success"]) for r in results]
    returns = [float(r["return"]) for r in results]
    lengths = [int(r["length"]) for r in results]
    return {"episodes": len(results), "success_rate": float(np.mean(successes)) if successes else 0.0,
            "return": float(np.mean(returns)) if returns else 0.0,
            "episode_length": float(np.mean(lengths)) if lengths else 0.0,
            "successes": successes, "returns": returns, "seed": seed, "deterministic": deterministic}
