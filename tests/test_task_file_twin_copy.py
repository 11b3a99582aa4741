"""A copy of a built-in twin task file, edited (episode length, box, home joints, noise, gains, gripper), runs the
twin with the copy's values: in process (robot_rl.gym_env), in the twin robot server and a lab file over it; what
the twin cannot honour (real cameras, collision thresholds, a camera it does not render, an env id of another
scene) is one line naming the file and the field. The built-in files equal the twin's own defaults, so an
unedited copy passes nothing."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

import pytest

from envs.task_file import resolve_task
from envs.tasks import TASKS
from robot_rl.errors import ConfigError
from robot_rl.presets import PRESETS, get_preset
from robot_rl.task_file import TASK_FILES_DIR, builtin, builtin_names

HOME = [0.1, -0.7, 0.0, -2.3, 0.0, 1.6, 0.8]


def copy_of(tmp_path: Path, name: str, edits: dict[str, str], extra: str = "", out: str = "mine.toml") -> Path:
    """The built-in file `name` copied to tmp_path/out, `edits` ({"key": "key = value"}) replacing the first line
    that sets each key, `extra` appended."""
    text = (TASK_FILES_DIR / f"{name}.toml").read_text()
    for key, line in edits.items():
        text, n = re.subn(rf"(?m)^{re.escape(key)} = .*$", line, text, count=1)
        assert n == 1, key
    path = tmp_path / out
    path.write_text(text + extra)
    return path


def test_an_unedited_copy_passes_nothing_and_the_built_in_files_are_the_twins_defaults(tmp_path: Path) -> None:
    pytest.importorskip("mujoco")
    from robot_rl.gym_env import make_task_env

    for name in builtin_names():
        assert PRESETS[name].env_kwargs == ()
        assert get_preset(str(copy_of(tmp_path, name, {}, out=f"{name}.toml"))).env_kwargs == ()
    env = make_task_env("twin-pick-cube", obs_mode="state")
    try:  # every env value a built-in file declares is the twin env's own (so a diff against the file is exact)
        cfg = env.unwrapped.config
        for name in builtin_names():
            for field, value in builtin(name).env_fields().items():
                assert getattr(cfg, field) == value, (name, field)
    finally:
        env.close()


def test_an_edited_copy_reaches_the_twin_env(tmp_path: Path) -> None:
    pytest.importorskip("mujoco")
    from robot_rl.gym_env import make_task_env

    path = copy_of(tmp_path, "twin-pick-cube", {
        "max_episode_steps": "max_episode_steps = 7", "pos_min_m": "pos_min_m = [0.35, -0.2, 0.02]",
        "home_joints_rad": f"home_joints_rad = {HOME}", "noise_m": "noise_m = 0.0", "gains": 'gains = "precision"',
        "mode": 'mode = "locked_closed"', "image_size": "image_size = 64"})
    kwargs = dict(get_preset(str(path)).env_kwargs)
    assert {k: v for k, v in kwargs.items() if k != "task_fields"} == {
        "home_q_rad": tuple(HOME), "reset_noise_m": 0.0, "gains_profile": "precision", "image_size": 64}
    assert dict(kwargs["task_fields"]) == {"max_episode_steps": 7, "pos_min_m": (0.35, -0.2, 0.02),
                                           "gripper_locked": True, "reset_gripper_closed": 1.0}
    expected_task = dataclasses.replace(TASKS["pick_cube"], max_episode_steps=7, pos_min_m=(0.35, -0.2, 0.02),
                                        gripper_locked=True, reset_gripper_closed=1.0)
    assert resolve_task(str(path)) == expected_task  # the robot server's Task (robot-rl sim serves it)
    env = make_task_env(str(path), obs_mode="state")
    try:
        robot_env: Any = env.unwrapped
        assert robot_env.task == expected_task
        assert robot_env.config.home_q_rad == tuple(HOME) and robot_env.config.reset_noise_m == 0.0
        assert robot_env.config.gains_profile == "precision" and robot_env.config.image_size == 64
        env.reset(seed=0)
        steps, done = 0, False
        while not done:
            _, _, terminated, truncated, _ = env.step(env.action_space.sample() * 0)
            steps += 1
            done = terminated or truncated
        assert steps == 7  # the copy's episode length, not the built-in 100
    finally:
        env.close()


def test_a_lab_file_over_an_edited_copy_keeps_the_copys_values(tmp_path: Path) -> None:
    copy_of(tmp_path, "twin-reach", {"max_episode_steps": "max_episode_steps = 9", "noise_m": "noise_m = 0.0"})
    lab = tmp_path / "lab.toml"
    lab.write_text('[task]\nname = "lab-reach"\nbase = "mine.toml"\n\n[control]\ngains = "precision"\n')
    kwargs = dict(get_preset(str(lab)).env_kwargs)
    assert kwargs["reset_noise_m"] == 0.0 and kwargs["gains_profile"] == "precision"
    assert dict(kwargs["task_fields"]) == {"max_episode_steps": 9}
    assert resolve_task(str(lab)).max_episode_steps == 9


@pytest.mark.parametrize(("edits", "extra", "message"), [
    ({}, '\n[cameras.front]\nkind = "realsense"\nserial = "123"\n'
         '[cameras.wrist]\nkind = "opencv"\ndevice = "/dev/video0"\n',
     r"mine.toml: cameras.front: the twin renders its own cameras \(\['front', 'wrist'\].*base = \"twin-pick-cube\""),
    ({}, "\n[robot]\ncollision_torque_nm = [20.0, 20.0, 18.0, 18.0, 16.0, 14.0, 12.0]\n"
         "collision_force_n = [20.0, 20.0, 20.0, 25.0, 25.0, 25.0]\n",
     r"mine.toml: robot.collision_torque_nm: the twin has no collision reflex"),
    ({"cameras": 'cameras = ["front", "top"]'}, "",
     r"mine.toml: observation.cameras names 'top', a camera the twin does not render"),
    ({"env_id": 'env_id = "robot_rl/TwinReach-v0"'}, "",
     r"mine.toml: task.env_id 'robot_rl/TwinReach-v0' .* does not run the twin scene 'pick_cube'"),
])
def test_what_the_twin_cannot_honour_is_refused_naming_the_file_and_field(
        tmp_path: Path, edits: dict[str, str], extra: str, message: str) -> None:
    path = copy_of(tmp_path, "twin-pick-cube", edits, extra)
    with pytest.raises(ConfigError, match=message):
        get_preset(str(path))


def test_a_state_id_copy_is_accepted(tmp_path: Path) -> None:
    path = copy_of(tmp_path, "twin-reach", {"env_id": 'env_id = "robot_rl/TwinReachState-v0"',
                                            "max_episode_steps": "max_episode_steps = 5"})
    preset = get_preset(str(path))
    assert preset.env_id == "robot_rl/TwinReachState-v0"
    assert dict(preset.env_kwargs)["task_fields"] == (("max_episode_steps", 5),)
