"""The one env builder (robot_rl.gym_env) and the one evaluation loop (robot_rl.evaluation)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from robot_rl.errors import ConfigError, UnknownTaskError
from robot_rl.evaluation import run_episodes, summarize
from robot_rl.gym_env import env_spec_of, make_gym_env, make_task_env


def test_task_env_has_the_presets_spaces_and_rate() -> None:
    env = make_task_env("twin-reach", obs_mode="state")
    try:
        spec = env_spec_of(env, "twin-reach")
        assert spec.task == "twin-reach"
        assert spec.control_hz == pytest.approx(10.0)
        assert spec.action.shape == (7,)
    finally:
        env.close()


def test_a_plain_gymnasium_env_has_no_known_rate() -> None:
    env = make_gym_env("Pendulum-v1")
    try:
        spec = env_spec_of(env, "Pendulum-v1")
        assert spec.control_hz == 0.0
        assert spec.action.shape == (1,)
    finally:
        env.close()


def test_typos_are_config_errors_naming_the_flag() -> None:
    with pytest.raises(ConfigError, match="--env-module no_such_module_xyz: no such module"):
        make_gym_env("Pendulum-v1", module="no_such_module_xyz")
    with pytest.raises(ConfigError, match="--env-id NoSuchEnv-v9"):
        make_gym_env("NoSuchEnv-v9")
    with pytest.raises(UnknownTaskError, match="known tasks"):
        make_task_env("twin-pik-cube")


class _CountingEnv:
    """Reward 1 per step; success once the action's sum exceeds 0 at step 3; ends after `length` steps."""

    def __init__(self, length: int | None) -> None:
        self.length, self.t, self.seeds = length, 0, []

    def reset(self, seed: int | None = None) -> tuple[np.ndarray, dict[str, Any]]:
        self.t = 0
        self.seeds.append(seed)
        return np.zeros(2), {}

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        self.t += 1
        info = {"success": bool(self.t == 3 and float(np.sum(action)) > 0)}
        done = self.length is not None and self.t >= self.length
        return np.full(2, self.t), 1.0, False, done, info


def test_run_episodes_counts_returns_lengths_success_and_seeds() -> None:
    env = _CountingEnv(length=5)
    res = run_episodes(env, lambda obs: np.ones(1), episodes=3, seed=100)
    assert env.seeds == [100, 101, 102]
    assert [r["length"] for r in res] == [5, 5, 5]
    assert [r["return"] for r in res] == [5.0, 5.0, 5.0]
    assert all(r["success"] for r in res)  # success at step 3 is remembered after it turns false again
    res = run_episodes(env, lambda obs: -np.ones(1), episodes=1)
    assert res[0]["success"] is False


def test_an_env_without_a_time_limit_stops_at_max_steps() -> None:
    res = run_episodes(_CountingEnv(length=None), lambda obs: np.zeros(1), episodes=1, max_steps=17)
    assert res[0]["length"] == 17


def test_summarize() -> None:
    res = [{"return": 1.0, "length": 10, "success": True}, {"return": 3.0, "length": 20, "success": False}]
    s = summarize(res, seed=7, deterministic=True)
    assert s["episodes"] == 2 and s["success_rate"] == 0.5 and s["return"] == 2.0 and s["episode_length"] == 15.0
    assert s["successes"] == [True, False] and s["returns"] == [1.0, 3.0] and s["seed"] == 7
    assert summarize([], seed=0, deterministic=False)["success_rate"] == 0.0
