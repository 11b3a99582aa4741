"""Task files (robot_rl.task_file, envs.task_file): validation errors name the file and the field, a file round
trips through its writer, the twin presets are task files equal to the presets and tasks they always were, a v1
task config reads as a task file with a box from the lab, and a hardware backend refuses the twin's box."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any

import pytest

from envs.task_file import camera_configs, require_lab_box, resolve_task, task_of
from envs.tasks import TASKS
from robot_rl.errors import ConfigError
from robot_rl.presets import PRESETS, ForwardBackward, TaskPreset, get_preset
from robot_rl.task_file import GAIN_PROFILES, builtin, builtin_names, dump_task_file, load_task_file

LAB = """
[task]
name = "lab-pick"
base = "twin-pick-cube"
max_episode_steps = 150

[reset]
pos_m = [0.5, 0.05, 0.22]
home_joints_rad = [0.0, -0.7, 0.0, -2.3, 0.0, 1.6, 0.8]
routine = "pick_cube"

[box]
pos_min_m = [0.35, -0.2, 0.02]
pos_max_m = [0.65, 0.2, 0.35]

[box.recorded]
samples = 412
robot_ip = "172.16.0.2"

[gripper]
mode = "locked_closed"

[cameras.front]
kind = "realsense"
serial = "123456789012"
crop_xywh = [80, 0, 480, 480]
exposure_us = 8000.0

[cameras.wrist]
kind = "opencv"
device = "/dev/video0"

[observation]
cameras = ["front", "wrist"]
image_size = 96

[reward]
source = "classifier"
classifier = "classifiers/pick"
gate_k = 3

[control]
gains = "precision"
"""


def _write(tmp_path: Path, text: str, name: str = "lab.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_the_twin_presets_are_task_files_equal_to_the_presets_and_tasks_they_were() -> None:
    half = math.pi / 2
    expected = {
        "twin-reach": TaskPreset("twin-reach", "robot_rl/TwinReach-v0",
                                 "MuJoCo twin: move the gripper to a random goal marker (easy; for fast tests)"),
        "twin-pick-cube": TaskPreset("twin-pick-cube", "robot_rl/TwinPickCube-v0",
                                     "MuJoCo twin: grasp a 4 cm cube from the table and lift it"),
        "twin-peg-insert": TaskPreset("twin-peg-insert", "robot_rl/TwinPegInsert-v0",
                                      "MuJoCo twin: insert a grasped peg into a tight hole (needs compliance)"),
        "twin-cube-relocate": TaskPreset(
            "twin-cube-relocate", "robot_rl/TwinCubeRelocate-v0",
            "MuJoCo twin: move the cube from zone A to zone B and let go (forward/backward, reset-free)",
            forward_backward=ForwardBackward("twin-cube-relocate-back", "in_zone_b", "in_zone_a")),
        "twin-cube-relocate-back": TaskPreset(
            "twin-cube-relocate-back", "robot_rl/TwinCubeRelocateBack-v0",
            "MuJoCo twin: the backward direction of twin-cube-relocate (zone B to zone A)"),
    }
    assert list(PRESETS) == list(expected) == list(builtin_names())
    for name, preset in expected.items():
        assert PRESETS[name] == preset
        assert PRESETS[name].task_file is builtin(name)
        assert get_preset(name) == preset
    scenes = {"twin-reach": "reach", "twin-pick-cube": "pick_cube", "twin-peg-insert": "peg_insert",
              "twin-cube-relocate": "cube_relocate", "twin-cube-relocate-back": "cube_relocate_back"}
    for name, scene in scenes.items():
        assert task_of(builtin(name)) == TASKS[scene]  # every value the file declares is the twin task's
        assert resolve_task(name) == TASKS[scene]
        assert builtin(name).box_source == "twin"
    assert TASKS["pick_cube"].rot_max_rad[2] == half and TASKS["peg_insert"].gripper_locked


def test_the_task_files_are_shipped_as_package_data() -> None:
    text = Path("pyproject.toml").read_text()
    assert '"robot_rl" = ["task_files/*.toml"]' in text
    assert sorted(p.stem for p in Path("robot_rl/task_files").glob("*.toml")) == sorted(builtin_names())


def test_a_lab_file_extends_its_base_and_round_trips(tmp_path: Path) -> None:
    tf = load_task_file(_write(tmp_path, LAB))
    assert tf.name == "lab-pick" and tf.box_source == "lab"
    task = task_of(tf)
    assert task == dataclasses.replace(TASKS["pick_cube"], max_episode_steps=150, reset_pos_m=(0.5, 0.05, 0.22),
                                       pos_min_m=(0.35, -0.2, 0.02), pos_max_m=(0.65, 0.2, 0.35),
                                       gripper_locked=True, reset_gripper_closed=1.0)
    assert tf.env_fields(only_own=True) == {"home_q_rad": (0.0, -0.7, 0.0, -2.3, 0.0, 1.6, 0.8),
                                            "camera_names": ("front", "wrist"), "image_size": 96,
                                            "gains_profile": "precision"}
    assert tf.reward_arg() == f"classifier:{tmp_path / 'classifiers/pick'}"  # relative to the file
    assert tf.value("box", "recorded") == {"samples": 412, "robot_ip": "172.16.0.2"}
    assert camera_configs(tf) == [
        {"name": "front", "kind": "realsense", "image_size": 96, "device": "123456789012",
         "crop_xywh": (80, 0, 480, 480), "exposure_us": 8000.0},
        {"name": "wrist", "kind": "opencv", "image_size": 96, "device": "/dev/video0"}]
    preset = get_preset(str(tmp_path / "lab.toml"))
    assert (preset.name, preset.env_id) == ("lab-pick", "robot_rl/TwinPickCube-v0")
    kwargs = dict(preset.env_kwargs)
    assert kwargs["image_size"] == 96 and dict(kwargs["task_fields"])["pos_min_m"] == (0.35, -0.2, 0.02)
    # the writer's TOML reads back to the same sections (merged ones: a stand-alone file)
    again = load_task_file(_write(tmp_path, dump_task_file(tf.own), "again.toml"))
    assert again.sections == tf.sections and task_of(again) == task


@pytest.mark.parametrize("body, message", [
    ('[box]\npos_min_m = [0.3, "a", 0.1]\n', "box.pos_min_m[1] must be a number, got 'a'"),
    ("[box]\npos_min_m = [0.3, 0.1]\n", "box.pos_min_m must have 3 entries, got 2"),
    ("[box]\npos_min_m = 0.3\n", "box.pos_min_m must be a list, got 0.3 (float)"),
    ("[box]\npos_min_m = [0.7, 0.0, 0.0]\npos_max_m = [0.6, 0.1, 0.3]\n", "box.pos_min_m [0.7, 0.0, 0.0] exceeds"),
    ('[box]\nsource = "recorded"\n', "box.source must be one of ['twin', 'lab'], got 'recorded'"),
    ("[box]\npos_mni_m = [0.3, 0.1, 0.1]\n", "unknown key box.pos_mni_m; known:"),
    ("[boxx]\n", "unknown key boxx; known:"),
    ('[gripper]\nmode = "closed"\n', "gripper.mode must be one of ['free', 'locked_closed', 'locked_open']"),
    ("[task]\nmax_episode_steps = 0\n", "task.max_episode_steps must be an integer >= 1, got 0"),
    ("[task]\nmax_episode_steps = true\n", "task.max_episode_steps must be an integer >= 1, got True (bool)"),
    ("[reset]\nhome_joints_rad = [0, 0, 0]\n", "reset.home_joints_rad must have 7 entries, got 3"),
    ('[reset]\nroutine = "wiggle"\n', "reset.routine 'wiggle' is not a reset routine"),
    ("[cameras.front]\nserial = '1'\n", "cameras.front.kind is missing"),
    ("[cameras.front]\nkind = 'realsense'\n", "cameras.front.serial is missing"),
    ("[cameras.front]\nkind = 'opencv'\ndevice = '0'\ncrop_xywh = [0, 0, -1, 4]\n",
     "cameras.front.crop_xywh[2] must be an integer >= 0, got -1"),
    ("[cameras.front]\nkind = 'opencv'\ndevice = '0'\nzoom = 2\n", "unknown key cameras.front.zoom"),
    ("[cameras.front]\nkind = 'opencv'\ndevice = '0'\n[observation]\ncameras = ['front', 'side']\n",
     "observation.cameras names 'side', which no [cameras.side] declares"),
    ("[reward]\nsource = 'classifier'\n", "reward.classifier (the classifier's directory) is missing"),
    ("[robot]\ncollision_torque_nm = [20, 20, 20, 20, 20, 20, 20]\n",
     "robot.collision_torque_nm and robot.collision_force_n go together"),
    ("[robot]\ncollision_torque_nm = [20, 20, 20, 20, 20, 20, -1]\ncollision_force_n = [20, 20, 20, 20, 20, 20]\n",
     "robot.collision_torque_nm must be 7 finite numbers > 0"),
    ("[task]\nbatch_size = 256\n", "task.batch_size is a learner hyper-parameter, not part of a task"),
    ("[learner]\nactor_lr = 0.001\n", "learner is a learner hyper-parameter, not part of a task"),
    ("[control]\ndiscount = 0.9\n", "control.discount is a learner hyper-parameter"),
    ("[task]\nname = 'lab'\nbase = 'twin-pick-cub'\n", "task.base must name a built-in preset"),
    ("[task\n", "not valid TOML"),
])
def test_a_bad_field_is_a_config_error_naming_the_file_and_the_field(tmp_path: Path, body: str, message: str) -> None:
    named = '[task]\nname = "lab"\nbase = "twin-pick-cube"\n'
    if body.startswith("[task]\n") and "name =" not in body:
        body = body.replace("[task]\n", named, 1)
    head = "" if body.startswith("[task") else named
    path = _write(tmp_path, head + body)
    with pytest.raises(ConfigError) as err:
        task_of(load_task_file(path))
    assert str(err.value).startswith(f"task file {path}: ")
    assert message in str(err.value)


def test_a_missing_name_or_base_and_a_missing_file_are_clear(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"task.name is missing"):
        load_task_file(_write(tmp_path, '[task]\nbase = "twin-reach"\n'))
    with pytest.raises(ConfigError, match=r"task.base is missing: name the preset this task extends"):
        load_task_file(_write(tmp_path, '[task]\nname = "x"\n'))
    with pytest.raises(ConfigError, match=r"cannot read it"):
        get_preset(str(tmp_path / "nope.toml"))


def _v1(tmp_path: Path, overrides: dict[str, Any], recorded: dict[str, Any] | None = None) -> Path:
    path = tmp_path / "box.json"
    path.write_text(json.dumps({"format": "robot-rl-task-config", "version": 1, "task": "pick_cube",
                                "overrides": overrides, "recorded": recorded or {}}))
    return path


def test_a_v1_task_config_reads_as_a_task_file_with_the_lab_box(tmp_path: Path) -> None:
    from envs.hardware.safety_box import load_task_config

    path = _v1(tmp_path, {"pos_min_m": [0.3, -0.2, 0.05], "pos_max_m": [0.6, 0.2, 0.4]}, {"samples": 5})
    tf = load_task_file(path)
    assert (tf.name, tf.box_source, tf.value("box", "recorded")) == ("twin-pick-cube", "lab", {"samples": 5})
    assert load_task_config(path) == dataclasses.replace(TASKS["pick_cube"], pos_min_m=(0.3, -0.2, 0.05),
                                                         pos_max_m=(0.6, 0.2, 0.4))
    # the old loader's traceback: a non-numeric entry is now a ConfigError naming the field as the file spells it
    with pytest.raises(ConfigError, match=r"box.json: overrides.pos_min_m\[1\] must be a number, got 'a'"):
        load_task_config(_v1(tmp_path, {"pos_min_m": [0.3, "a", 0.05]}))
    with pytest.raises(ConfigError, match=r"overrides.pos_max_m must be a list, got 'high'"):
        load_task_config(_v1(tmp_path, {"pos_max_m": "high"}))
    with pytest.raises(ConfigError, match=r"overrides.tolerance_m is not a field a task config sets"):
        load_task_config(_v1(tmp_path, {"tolerance_m": 0.1}))


def test_a_hardware_backend_refuses_the_twins_box(tmp_path: Path) -> None:
    for backend in ("franky", "ros2"):
        with pytest.raises(ConfigError, match=r"robot-rl safety-box record"):
            require_lab_box(backend, "twin-pick-cube")
        with pytest.raises(ConfigError, match=r"the twin's"):
            require_lab_box(backend, "pick_cube")
    require_lab_box("twin", "twin-pick-cube")  # the twin runs in its own box
    require_lab_box("franky", "twin-pick-cube", allow_twin_box=True)  # the explicit exception
    require_lab_box("franky", str(_write(tmp_path, LAB)))
    require_lab_box("franky", str(_v1(tmp_path, {"pos_min_m": [0.3, -0.2, 0.05], "pos_max_m": [0.6, 0.2, 0.4]})))
    no_box = _write(tmp_path, '[task]\nname = "lab"\nbase = "twin-pick-cube"\n[gripper]\nmode = "free"\n', "nb.toml")
    with pytest.raises(ConfigError, match=r"workspace box is the twin's"):
        require_lab_box("franky", str(no_box))


def test_gain_profile_names_are_the_controllers() -> None:
    from controllers.gains import GAIN_PROFILES as CONTROLLER_PROFILES

    assert set(GAIN_PROFILES) == set(CONTROLLER_PROFILES)


def _lab_with_cameras(tmp_path: Path) -> Path:
    return _write(tmp_path, LAB.replace('source = "classifier"\nclassifier = "classifiers/pick"\ngate_k = 3\n',
                                        'source = "human"\n'))


def test_the_robot_server_serves_a_task_file_and_refuses_the_twin_box_on_hardware(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import envs.robot_server.run as server_run
    from envs.hardware.camera_source import CameraConfig

    seen: dict[str, Any] = {}

    def fake_backend(name: str, task: Any, **kw: Any) -> Any:
        seen.clear()
        seen.update(kw, task=task, name=name)
        return None, None, {}

    monkeypatch.setattr(server_run, "make_backend", fake_backend)
    franky = ["--backend", "franky", "--robot-ip", "172.16.0.2"]
    for argv in ([*franky, "--task", "twin-pick-cube"], ["--backend", "ros2", "--task", "pick_cube"]):
        with pytest.raises(ConfigError, match=r"safety-box record") as err:
            server_run._backend(server_run.parse_robot_server_args(argv))
        assert "--allow-twin-box" in str(err.value) and not seen
    server_run._backend(server_run.parse_robot_server_args([*franky, "--task", "twin-pick-cube", "--allow-twin-box"]))
    assert seen["task"] == TASKS["pick_cube"]
    server_run._backend(server_run.parse_robot_server_args(["--backend", "ros2", "--ros-twin", "--task", "twin-reach"]))
    assert seen["task"] == TASKS["reach"]  # ros2-twin drives the twin: its box is the right one
    lab = _lab_with_cameras(tmp_path)
    server_run._backend(server_run.parse_robot_server_args([*franky, "--task", str(lab)]))
    assert seen["task"].pos_min_m == (0.35, -0.2, 0.02) and seen["task"].gripper_locked
    assert seen["image_size"] == 96  # observation.image_size, without --image-size
    assert seen["camera_specs"] == (
        CameraConfig(name="front", kind="realsense", device="123456789012", crop_xywh=(80, 0, 480, 480),
                     exposure_us=8000.0, image_size=96),
        CameraConfig(name="wrist", kind="opencv", device="/dev/video0", image_size=96))
    server_run._backend(server_run.parse_robot_server_args([*franky, "--task", str(lab), "--image-size", "64",
                                                            "--camera", "opencv:/dev/video2=front"]))
    assert seen["image_size"] == 64 and seen["camera_specs"] == ("opencv:/dev/video2=front",)  # the flags win
    # the deprecated --task-config is --task FILE, with a note
    server_run._backend(server_run.parse_robot_server_args([*franky, "--task", "pick_cube", "--task-config",
                                                            str(lab)]))
    assert seen["task"].pos_max_m == (0.65, 0.2, 0.35)
    assert "--task-config is deprecated" in capsys.readouterr().err


def test_a_lab_file_runs_on_the_twin_with_its_values(tmp_path: Path) -> None:
    pytest.importorskip("mujoco")
    from robot_rl.gym_env import env_spec_of, make_task_env

    path = _write(tmp_path, '[task]\nname = "lab-reach"\nbase = "twin-reach"\nmax_episode_steps = 7\n'
                            '[box]\npos_min_m = [0.3, -0.1, 0.1]\npos_max_m = [0.6, 0.1, 0.45]\n'
                            '[control]\ngains = "precision"\n[reset]\nnoise_m = 0.0\n')
    env = make_task_env(str(path), obs_mode="state")
    try:
        robot_env: Any = env.unwrapped
        assert robot_env.task.pos_min_m == (0.3, -0.1, 0.1) and robot_env.task.max_episode_steps == 7
        assert robot_env.config.gains_profile == "precision" and robot_env.config.reset_noise_m == 0.0
        env.reset(seed=0)
        steps = 0
        done = False
        while not done:
            _, _, terminated, truncated, _ = env.step(env.action_space.sample() * 0)
            steps += 1
            done = terminated or truncated
        assert steps == 7
        assert robot_env.robot.gains_profile == "precision"
        assert env_spec_of(env, str(path)).task == "lab-reach"  # the file's name, whatever the path
    finally:
        env.close()


def test_an_actor_over_a_hardware_server_refuses_the_twin_box(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import envs.remote as remote
    from actors.actor_env import make_actor_env

    closed: list[bool] = []

    class FakeEnv:
        def __init__(self, **kw: Any) -> None:
            import gymnasium

            self.kw = kw
            self.observation_space = gymnasium.spaces.Dict({"state": gymnasium.spaces.Box(-1, 1, (3,))})
            self.robot = type("R", (), {"info": {"backend": "franky", "task": "pick_cube"}})()
            self.unwrapped = self

        def close(self) -> None:
            closed.append(True)

    made: list[FakeEnv] = []

    def fake_remote_env(address: str, **kw: Any) -> FakeEnv:
        made.append(FakeEnv(**kw))
        return made[-1]

    monkeypatch.setattr(remote, "make_remote_env", fake_remote_env)
    with pytest.raises(ConfigError, match=r"the franky backend moves a real arm.*safety-box record"):
        make_actor_env("twin-pick-cube", "state", None, "tcp://127.0.0.1:5560")
    assert closed == [True]
    lab = _lab_with_cameras(tmp_path)
    monkeypatch.setattr("actors.actor_env.check_operator_backend", lambda *a: None)
    env = make_actor_env(str(lab), "pixels", None, "tcp://127.0.0.1:5560")
    assert env is made[-1] and env.kw["task"].pos_min_m == (0.35, -0.2, 0.02)
    assert env.kw["image_size"] == 96 and env.kw["camera_names"] == ("front", "wrist")
    assert env.kw["gains_profile"] == "precision"
