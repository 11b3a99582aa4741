"""The previous step's action in the observation (`RobotEnvConfig.last_action_obs`, task file observation.last_action):
what a policy needs beside late frames or a late arm. The env leaf itself, the task file switch, and a lab's task
file walked through the scripted expert (record-demos on the twin) into the demos and a policy's state selection."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("mujoco")

from envs.env import make_twin_env

ACTIONS = [np.array([0.5, -0.3, 2.0, 0.0, 0.1, 0.0, 1.0], np.float32),  # z beyond the box: clipped to 1
           np.array([-0.2, 0.4, -0.6, 0.0, 0.0, -0.1, -1.0], np.float32)]


def test_the_leaf_holds_the_previous_executed_action_and_zeros_after_a_reset() -> None:
    env = make_twin_env("pick_cube", obs_mode="state", last_action_obs=True)
    assert env.observation_space["last_action"].shape == (7,)
    obs, _ = env.reset(seed=0)
    assert np.array_equal(obs["last_action"], np.zeros(7, np.float32))
    for a in ACTIONS:
        obs, *_ = env.step(a)
        assert obs["last_action"].dtype == np.float32
        assert np.array_equal(obs["last_action"], np.clip(a, -1.0, 1.0))
        assert env.observation_space.contains(obs)
    obs, _ = env.reset(seed=1)
    assert not obs["last_action"].any()
    plain = make_twin_env("pick_cube", obs_mode="state")
    assert "last_action" not in plain.observation_space.spaces
    assert "last_action" not in plain.reset(seed=0)[0]


def lab_file(tmp_path: Path) -> Path:
    path = tmp_path / "lab.toml"
    path.write_text('[task]\nname = "lab-pick"\nbase = "twin-pick-cube"\n\n[observation]\nlast_action = true\n'
                    'state = ["state[0:3]", "state[12]", "object", "last_action"]\n')
    return path


def test_a_lab_task_file_switches_it_on_and_records_demos_with_the_scripted_expert(tmp_path: Path) -> None:
    from robot_rl.cli import main
    from robot_rl.task_file import load_task_file

    lab = lab_file(tmp_path)
    assert load_task_file(lab).env_fields()["last_action_obs"] is True
    out = tmp_path / "demos"
    # the scripted expert over a lab's file (the twin task it extends): this used to fail with "unknown task"
    assert main(["record-demos", "--task", str(lab), "--obs-mode", "state", "--episodes", "1", "--out", str(out)]) == 0
    (episode,) = sorted(out.glob("episode_*.npz"))
    with np.load(episode) as ep:
        last, actions = ep["obs/last_action"], ep["actions"]
    assert not last[0].any() and np.array_equal(last[1:], actions)  # obs t+1 shows the action of step t
    assert tuple(load_task_file(lab).state_selection("state")) == ("state[0:3]", "state[12]", "object", "last_action")


def test_a_selection_naming_it_without_the_switch_says_how_to_add_it(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    from robot_rl.cli import main

    path = tmp_path / "lab.toml"
    path.write_text('[task]\nname = "lab-pick"\nbase = "twin-pick-cube"\n\n[observation]\n'
                    'state = ["state[0:3]", "last_action"]\n')
    assert main(["train", "--task", str(path), "--obs-mode", "state", "--max-env-steps", "10",
                 "--out", str(tmp_path / "run")]) == 1
    err = capsys.readouterr().err
    assert "'last_action' is not a state leaf" in err and "observation.last_action = true" in err, err
    assert "Traceback" not in err
