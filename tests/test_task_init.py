"""`robot-rl task init`: a task file from safety-box record's box and check-hardware's report; it loads back as
the lab's task (box from the lab, cameras, home joints), refuses to overwrite, and a file without a box is one a
hardware backend refuses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envs.hardware.safety_box import write_task_config
from envs.task_file import camera_configs, require_lab_box, task_of
from robot_rl.cli import main
from robot_rl.errors import ConfigError
from robot_rl.task_file import load_task_file

BOX = {"pos_min_m": [0.3, -0.2, 0.03], "pos_max_m": [0.6, 0.2, 0.4], "rot_min_rad": [-0.2, -0.2, -1.0],
       "rot_max_rad": [0.2, 0.2, 1.0]}


def _report(tmp_path: Path) -> Path:
    path = tmp_path / "hw.json"
    path.write_text(json.dumps({
        "format": "robot-rl-hardware-report", "version": 1, "image_size": 96,
        "robot": {"robot_ip": "172.16.0.2", "q_rad": [0.0, -0.7, 0.0, -2.3, 0.0, 1.6, 0.8],
                  "tcp_pos_m": [0.5, 0.0, 0.3]},
        "cameras": [{"name": "front", "kind": "realsense", "serial": "123456789012", "width": 640, "height": 480,
                     "fps": 30, "exposure_us": 8000.0, "auto_exposure": False},
                    {"name": "wrist", "kind": "opencv", "device": "/dev/video0", "width": 640, "height": 480,
                     "exposure_us": 100.0, "auto_exposure": True}]}))
    return path


def test_task_init_writes_the_labs_task_from_the_box_and_the_report(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    box = write_task_config(tmp_path / "box.json", "peg_insert", BOX, {"samples": 400})
    out = tmp_path / "lab.toml"
    assert main(["task", "init", "--out", str(out), "--from-box", str(box), "--check-hardware",
                 str(_report(tmp_path))]) == 0
    assert "the lab's box" in capsys.readouterr().out
    text = out.read_text()
    assert "# max_episode_steps = 100" in text and "# crop_xywh" in text  # left for the person, commented
    tf = load_task_file(out)
    assert (tf.name, tf.base.name if tf.base else None, tf.box_source) == ("lab", "twin-peg-insert", "lab")
    task = task_of(tf)
    assert task.pos_min_m == (0.3, -0.2, 0.03) and task.rot_max_rad == (0.2, 0.2, 1.0)
    assert task.gripper_locked  # the base's gripper mode, written out
    assert tf.env_fields(only_own=True)["home_q_rad"] == (0.0, -0.7, 0.0, -2.3, 0.0, 1.6, 0.8)
    assert tf.value("box", "recorded")["samples"] == 400
    assert camera_configs(tf) == [
        {"name": "front", "kind": "realsense", "image_size": 96, "device": "123456789012", "exposure_us": 8000.0,
         "width": 640, "height": 480, "fps": 30},
        {"name": "wrist", "kind": "opencv", "image_size": 96, "device": "/dev/video0", "width": 640, "height": 480}]
    require_lab_box("franky", str(out))  # a hardware backend takes it
    # a lab's file observes pixels (a robot has no object state): the actor's and the learner's default --obs-mode
    from actors.run import parse_actor_args
    from learners.distributed.flags import build_learner_parser

    assert tf.obs_mode == "pixels" and parse_actor_args(["--task", str(out)]).obs_mode == "pixels"
    assert build_learner_parser().parse_args(["--task", str(out), "--out", "run"]).obs_mode == "pixels"
    assert parse_actor_args(["--task", str(out), "--obs-mode", "state"]).obs_mode == "state"  # a flag wins
    assert parse_actor_args(["--task", "twin-peg-insert"]).obs_mode == "state"  # the presets do not say
    # an existing file is kept unless --force
    assert main(["task", "init", "--out", str(out), "--from-box", str(box)]) == 1
    assert "exists; pass --force" in capsys.readouterr().err
    assert main(["task", "init", "--out", str(out), "--from-box", str(box), "--force", "--name", "peg"]) == 0
    assert load_task_file(out).name == "peg"


def test_task_init_without_a_box_writes_a_file_hardware_refuses(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "nobox.toml"
    assert main(["task", "init", "--out", str(out), "--base", "twin-pick-cube", "--camera",
                 "opencv:/dev/video0=wrist"]) == 0
    assert "NO lab box yet" in capsys.readouterr().out
    assert "robot-rl safety-box record" in out.read_text()
    tf = load_task_file(out)
    assert tf.box_source == "twin" and tf.value("observation", "cameras") == ("wrist",)
    with pytest.raises(ConfigError, match="safety-box record"):
        require_lab_box("franky", str(out))
    assert main(["task", "init", "--out", str(tmp_path / "x.toml")]) == 1
    assert "--base: name the preset the task extends" in capsys.readouterr().err
    (tmp_path / "bad.json").write_text(json.dumps({"format": "robot-rl-task-config", "version": 1,
                                                   "task": "pick_cube", "overrides": {"pos_min_m": [0, "a", 0]}}))
    assert main(["task", "init", "--out", str(tmp_path / "y.toml"), "--from-box", str(tmp_path / "bad.json")]) == 1
    assert "overrides.pos_min_m[1] must be a number" in capsys.readouterr().err
