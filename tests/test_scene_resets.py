"""Operator scene resets (learners.training.scene_resets): after K failed episodes in a row the next reset asks a
person to restore the scene (the twin teleports one), counted by the reward the loop sees, never the twin's truth."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
import pytest

from learners.training.scene_resets import OperatorSceneResets
from robot_rl.errors import ConfigError


class _Episodes(gymnasium.Env[np.ndarray, np.ndarray]):
    """One-step episodes whose outcome is scripted: "s" ends terminated with reward 1, "t" terminated with reward 0
    (a failure that terminated), "f" truncated with reward 0; info["success"] is always True (a privileged flag the
    wrapper must ignore). Records the reset options."""

    observation_space = gymnasium.spaces.Box(-1.0, 1.0, (1,), np.float32)
    action_space = gymnasium.spaces.Box(-1.0, 1.0, (1,), np.float32)

    def __init__(self, outcomes: str) -> None:
        self.outcomes, self.i, self.options_seen = outcomes, -1, []

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        self.i += 1
        self.options_seen.append(options)
        return np.zeros(1, np.float32), {}

    def step(self, action: Any) -> Any:
        o = self.outcomes[self.i]
        return np.zeros(1, np.float32), float(o == "s"), o in "st", o == "f", {"success": True}


def test_asks_after_k_failures_in_a_row_and_success_restarts_the_count() -> None:
    outcomes = "fffsfftfff"
    base = _Episodes(outcomes)
    asked: list[int] = []
    env = OperatorSceneResets(base, after=3, ask=asked.append)
    for _ in outcomes:
        env.reset()
        env.step(np.zeros(1, np.float32))
    env.reset()
    requested = [bool(o and o.get("scene_reset")) for o in base.options_seen]
    # f f f: reset 3 asks (the count starts again); s: none; f f t (a terminated failure counts): reset 7 asks;
    # f f f: reset 10 asks; the privileged info["success"] (always True here) changes nothing
    assert requested == [False, False, False, True, False, False, False, True, False, False, True]
    assert asked == [1, 2, 3] and env.requests == 3 and env.failed_in_a_row == 0


@pytest.mark.parametrize("after", [0, -1, 1.5, True])
def test_a_bad_count_is_refused(after: Any) -> None:
    with pytest.raises(ConfigError, match="after="):
        OperatorSceneResets(_Episodes("f"), after=after)


def test_the_twin_restores_a_seeded_scene_on_request_in_the_faithful_mode() -> None:
    from envs.env import make_twin_env

    env = make_twin_env("pick_cube", obs_mode="state", faithful=True)
    try:
        env.reset(seed=0)
        robot = env.unwrapped.robot
        cube = robot.state().objects["cube_pos"]
        robot.reset_scene(123)  # stand-in for a policy that moved the cube somewhere else ...
        moved = np.asarray(robot.state().objects["cube_pos"])
        assert not np.allclose(moved, cube)
        _, info = env.reset()  # ... where a robot reset leaves it
        assert not info["scene_reset"] and env.unwrapped.scene_teleports == 1
        np.testing.assert_allclose(robot.state().objects["cube_pos"][:2], moved[:2], atol=0.01)
        _, info = env.reset(options={"scene_reset": True})
        assert info["scene_reset"] and env.unwrapped.scene_teleports == 2
    finally:
        env.close()


def test_the_request_reaches_the_twin_through_the_run_env_wrappers() -> None:
    """Through gymnasium.make's wrappers and the run env's (learners.training.run_env): a failed episode, then a
    scene reset that teleports (scene_teleports 1 -> 2); the next reset after a request is a robot reset again."""
    from learners.training.config import TrainConfig
    from learners.training.run_env import make_run_env

    cfg = TrainConfig(task="twin-pick-cube", obs_mode="state")  # robot resets, no reward from the task (faithful's)
    env = OperatorSceneResets(make_run_env(cfg, scene_resets="first", task_reward=False), after=1)
    try:
        env.reset(seed=0)
        done = False
        while not done:  # hold still: the cube is never lifted, the faithful env never terminates
            _, _, terminated, truncated, _ = env.step(np.zeros(7, np.float32))
            done = terminated or truncated
        assert env.unwrapped.scene_teleports == 1
        _, info = env.reset()
        assert info["scene_reset"] and env.unwrapped.scene_teleports == 2 and env.requests == 1
    finally:
        env.close()


def test_train_counts_its_scene_resets_and_refuses_them_without_a_task(tmp_path: Path) -> None:
    from learners.training.config import TrainConfig
    from robot_rl.cli import main as cli_main
    from robot_rl.metrics import read_metrics

    out = tmp_path / "run"
    assert cli_main(["train", "--task", "twin-reach", "--obs-mode", "state", "--max-env-steps", "200",
                     "--eval-every", "200", "--eval-episodes", "1", "--learning-starts", "50", "--batch-size", "32",
                     "--hidden", "32", "--device", "cpu", "--operator-reset-after", "1", "--set", "compile=false",
                     "--out", str(out)]) == 0
    [row] = read_metrics(out / "metrics.jsonl")
    # a random policy misses the goal: every failed 50-step episode asks for the next scene (episodes 2-4 of 4)
    assert 1 <= row["operator_scene_resets"] <= row["episode"]
    with pytest.raises(ConfigError, match="operator_reset_after"):
        TrainConfig(env_id="Pendulum-v1", operator_reset_after=2)
    with pytest.raises(ConfigError, match="operator_reset_after"):
        TrainConfig(task="twin-reach", operator_reset_after=-1)
    with pytest.raises(ConfigError, match="operator_reset_after=3 is not for --forward-backward"):
        TrainConfig(task="twin-cube-relocate", operator_reset_after=3, forward_backward=True)
