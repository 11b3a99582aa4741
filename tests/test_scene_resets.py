"""Operator scene resets (robot_rl.scene_resets): after K failed episodes in a row the next reset asks a
person to restore the scene (the twin teleports one), counted by the reward the loop sees, never the twin's truth."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
import pytest

from robot_rl.errors import ConfigError
from robot_rl.scene_resets import OperatorSceneResets


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


class _Stdin:
    def __init__(self, tty: bool, lines: list[str]) -> None:
        self.tty, self.lines = tty, lines

    def isatty(self) -> bool:
        return self.tty

    def readline(self) -> str:
        return self.lines.pop(0) if self.lines else ""


def test_resolve_confirm_reads_enter_only_from_a_terminal() -> None:
    from robot_rl.scene_resets import resolve_confirm

    assert resolve_confirm("auto", _Stdin(True, [])) == "enter"
    assert resolve_confirm("auto", _Stdin(False, [])) == "pause"
    assert resolve_confirm("pause", _Stdin(True, [])) == "pause"
    with pytest.raises(ConfigError, match=r"stdin is not a terminal.*--operator-reset-confirm pause"):
        resolve_confirm("enter", _Stdin(False, []))
    with pytest.raises(ConfigError, match="must be one of"):
        resolve_confirm("button", _Stdin(True, []))


def test_the_prompt_waits_for_enter_or_the_pause_on_a_robot_and_only_logs_on_the_twin(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from robot_rl import scene_resets
    from robot_rl.scene_resets import operator_prompt

    lines: list[str] = []
    slept: list[float] = []
    read: list[int] = []
    twin = operator_prompt("twin", 3, "enter", log=lines.append, read_line=lambda: read.append(1) or "\n",
                           sleep=slept.append)
    twin(1)
    assert read == [] and slept == [] and "twin teleports" in lines[-1] and "3 episodes in a row" in lines[-1]
    monkeypatch.setattr(scene_resets.sys, "stdin", _Stdin(True, []))
    stdin = _Stdin(True, ["\n"])
    robot = operator_prompt("franky", 3, "auto", pause_s=7.0, log=lines.append, read_line=stdin.readline,
                            sleep=slept.append)
    lines.clear()
    robot(2)  # Enter read from the terminal: no pause
    assert "press Enter" in lines[0] and lines[-1] == "scene reset 2: done, resetting" and slept == []
    robot(3)  # stdin closed meanwhile (readline returns ''): the pause stands in
    assert slept == [7.0] and any("stdin closed" in line for line in lines)
    headless = operator_prompt("ros2", 2, "pause", pause_s=4.5, log=lines.append, sleep=slept.append)
    lines.clear()
    headless(1)
    assert slept == [7.0, 4.5] and "the reset starts in 4.5 s" in lines[0]
    with pytest.raises(ConfigError, match="pause"):
        operator_prompt("franky", 2, "pause", pause_s=-1.0)


class _HardwareEpisodes(gymnasium.Env[Any, np.ndarray]):
    """A hardware-like env (no twin robot) whose 2-step episodes all fail (reward 0, truncated); records the reset
    options."""

    observation_space = gymnasium.spaces.Dict({"state": gymnasium.spaces.Box(-1, 1, (3,), np.float32)})
    action_space = gymnasium.spaces.Box(-1, 1, (2,), np.float32)

    def __init__(self) -> None:
        self.options_seen: list[Any] = []
        self.t = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        self.options_seen.append(options)
        self.t = 0
        return {"state": np.zeros(3, np.float32)}, {}

    def step(self, action: Any) -> Any:
        self.t += 1
        return {"state": np.zeros(3, np.float32)}, 0.0, False, self.t == 2, {"success": False}


def test_an_actor_on_a_robot_asks_a_person_after_k_failed_episodes(capsys: pytest.CaptureFixture[str]) -> None:
    from actors.run import ActorRunConfig, parse_actor_args, with_operator_resets
    from tests.test_faithful import in_memory_actor

    cfg = parse_actor_args(["--task", "twin-reach", "--operator-reset-after", "2", "--operator-reset-confirm",
                            "pause", "--operator-reset-pause-s", "0"])
    assert (cfg.operator_reset_after, cfg.operator_reset_confirm, cfg.operator_reset_pause_s) == (2, "pause", 0.0)
    base = _HardwareEpisodes()
    env = with_operator_resets(base, cfg, "a0")
    actor, learner_ep, actor_ep = in_memory_actor(env, chunk_steps=2)
    actor.start()
    for _ in range(10):  # 5 failed episodes: the resets after episodes 2 and 4 ask
        actor.step()
    assert actor.stats()["operator_scene_resets"] == 2  # reported to the learner (its status.json per actor)
    actor.close(flush_s=0.1)
    actor_ep.close()
    learner_ep.close()
    asked = [bool(o and o.get("scene_reset")) for o in base.options_seen]
    assert asked == [False, False, True, False, True, False] and env.requests == 2
    err = capsys.readouterr().err
    assert "actor a0: a person puts the scene back after 2 episodes in a row without success (confirm: pause)" in err
    assert err.count("Put the scene back as the task starts") == 2
    with pytest.raises(ConfigError, match="operator_reset_after"):
        ActorRunConfig(task="twin-reach", operator_reset_after=-1)
    with pytest.raises(ConfigError, match="operator_reset_pause_s"):
        ActorRunConfig(task="twin-reach", operator_reset_pause_s=-2.0)
