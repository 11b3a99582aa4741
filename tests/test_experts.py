"""Scripted experts on the MuJoCo twin (state mode): >= 95% success over 100 seeded episodes per task.

reach and pick_cube run in the default suite (~5-15 s each on 2 shared cores); peg_insert (~10-40 s) is
marked slow.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

os.environ.setdefault("MUJOCO_GL", "egl")
pytest.importorskip("gymnasium")
pytest.importorskip("mujoco")

from envs.env import make_twin_env
from envs.twin.experts import ScriptedExpert, hand_yaw, run_episode, wrap

EPISODES = 100


def success_rate(task: str, episodes: int = EPISODES, noise_std: float = 0.0) -> tuple[float, list[int]]:
    env = make_twin_env(task, obs_mode="state")
    expert = ScriptedExpert(task, noise_std=noise_std, seed=0)
    try:
        results = [run_episode(env, expert, seed=1000 + i) for i in range(episodes)]
    finally:
        env.close()
    failed = [r["seed"] for r in results if not r["success"]]
    return 1.0 - len(failed) / episodes, failed


def test_reach_expert() -> None:
    rate, failed = success_rate("reach")
    assert rate >= 0.95, f"reach expert: {rate:.0%}, failed seeds {failed}"


def test_pick_cube_expert() -> None:
    rate, failed = success_rate("pick_cube")
    assert rate >= 0.95, f"pick_cube expert: {rate:.0%}, failed seeds {failed}"


@pytest.mark.slow
def test_peg_insert_expert() -> None:
    rate, failed = success_rate("peg_insert")
    assert rate >= 0.95, f"peg_insert expert: {rate:.0%}, failed seeds {failed}"


def test_peg_expert_leaves_the_locked_gripper_alone() -> None:
    """The peg expert commands 'keep' (0) on the gripper dim: the peg is held from the reset (the task locks the
    gripper) and its demos do not teach a policy to saturate a dim that does nothing."""
    grip: list[float] = []

    class Recording(ScriptedExpert):
        def act(self, state: object) -> np.ndarray:
            action = super().act(state)  # type: ignore[arg-type]
            grip.append(float(action[6]))
            return action

    env = make_twin_env("peg_insert", obs_mode="state")
    expert = Recording("peg_insert")
    try:
        result = run_episode(env, expert, seed=1000)
    finally:
        env.close()
    assert result["success"] and grip and set(grip) == {0.0}


def test_noisy_expert_still_mostly_succeeds() -> None:
    rate, failed = success_rate("pick_cube", episodes=10, noise_std=0.2)
    assert rate >= 0.8, f"noisy pick_cube expert: {rate:.0%}, failed seeds {failed}"


def test_expert_actions_are_valid_and_noise_is_seeded() -> None:
    env = make_twin_env("pick_cube", obs_mode="state")
    env.reset(seed=0)
    assert env.last_state is not None
    a1 = ScriptedExpert("twin-pick-cube", noise_std=0.5, seed=3).act(env.last_state)
    a2 = ScriptedExpert("pick_cube", noise_std=0.5, seed=3).act(env.last_state)
    assert a1.shape == (7,) and a1.dtype == np.float32 and np.all(np.abs(a1) <= 1.0)
    np.testing.assert_array_equal(a1, a2)
    env.close()
    with pytest.raises(Exception, match="unknown task"):
        ScriptedExpert("stack_cubes")


def test_yaw_helpers() -> None:
    from envs.twin.experts import down_at_yaw

    for yaw in (-2.0, -0.3, 0.0, 1.2, 3.0):
        assert hand_yaw(down_at_yaw(yaw)) == pytest.approx(yaw, abs=1e-9)
    assert wrap(np.pi / 2 + 0.1, np.pi / 2) == pytest.approx(0.1)
    assert wrap(-np.pi / 4 - 0.1, np.pi / 2) == pytest.approx(np.pi / 4 - 0.1)
