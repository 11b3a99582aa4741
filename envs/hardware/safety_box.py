"""The safety box recorded on the real workspace, and task configs that carry it.

`robot-rl safety-box record` (envs.cli.safety_box) samples the TCP pose while an operator guides the arm
by hand through the corners of the allowed workspace (Franka guiding mode; the robot is opened read-only), and
writes a task config: a JSON file of `Task` field overrides on a named task, read as a task file (robot_rl.task_file)
that extends the task's preset with a box from the lab. `load_task_config` turns it back into a `Task`; `robot-rl
task init --from-box FILE` makes a TOML task file of it; `--task FILE` (robot-server, actor, ...) runs it.

File format (JSON, `format` "robot-rl-task-config", version 1)::

    {"format": "robot-rl-task-config", "version": 1, "task": "pick_cube",
     "overrides": {"pos_min_m": [...], "pos_max_m": [...], "rot_min_rad": [...], "rot_max_rad": [...]},
     "recorded": {"samples": 412, "seconds": 30.0, "margin_m": 0.0, "margin_rad": 0.0, "robot_ip": "..."}}

`record_safety_box` is the recording itself: it samples the TCP at `rate` for `seconds` (Ctrl-C ends early and
keeps what was sampled) and writes the box that holds every sample, grown by `margin_m` / `margin_rad`.

Usage::

    record_safety_box(SafetyBoxRecordConfig(robot_ip="172.16.0.2", task="pick_cube", out="configs/box.json"))
    box = box_from_poses(positions, quats, nominal_quat_wxyz=(0, 1, 0, 0), margin_m=0.0)   # dict of overrides
    write_task_config("box.json", "pick_cube", box, {"samples": 412})
    task = load_task_config("box.json")            # get_task("pick_cube") with the recorded box
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from controllers.transforms import quat_conj, quat_mul, quat_to_euler_xyz
from envs.tasks import Task, get_task
from robot_rl.config import Config, require
from robot_rl.errors import ConfigError

FORMAT = "robot-rl-task-config"
VERSION = 1
BOX_FIELDS = ("pos_min_m", "pos_max_m", "rot_min_rad", "rot_max_rad")


def box_from_poses(positions: Sequence[Any], quats_wxyz: Sequence[Any],
                   nominal_quat_wxyz: Sequence[float], margin_m: float = 0.0,
                   margin_rad: float = 0.0) -> dict[str, list[float]]:
    """The smallest box holding every sampled TCP pose (positions in the base frame; orientations as extrinsic
    x-y-z euler angles of R_nominal^T R, the SafetyBox convention), grown by the margins."""
    pos = np.asarray(positions, np.float64).reshape(-1, 3)
    if len(pos) == 0:
        raise ConfigError("no pose was sampled: nothing to build a box from")
    nom_conj = quat_conj(np.asarray(nominal_quat_wxyz, np.float64))
    rpy = np.array([quat_to_euler_xyz(quat_mul(nom_conj, q)) for q in np.asarray(quats_wxyz, np.float64)])
    return {"pos_min_m": (pos.min(0) - margin_m).round(4).tolist(),
            "pos_max_m": (pos.max(0) + margin_m).round(4).tolist(),
            "rot_min_rad": (rpy.min(0) - margin_rad).round(4).tolist(),
            "rot_max_rad": (rpy.max(0) + margin_rad).round(4).tolist()}


def write_task_config(path: str | os.PathLike[str], task: str, overrides: Mapping[str, Any],
                      recorded: Mapping[str, Any] | None = None) -> Path:
    """Write a task config (atomically: write then rename)."""
    get_task(task)  # an unknown name fails here, not when the file is loaded on the robot
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(out.suffix + ".tmp")
    tmp.write_text(json.dumps({"format": FORMAT, "version": VERSION, "task": task, "overrides": dict(overrides),
                               "recorded": dict(recorded or {})}, indent=1) + "\n")
    tmp.replace(out)
    return out


def load_task_config(path: str | os.PathLike[str]) -> Task:
    """The task a task config (or any task file, robot_rl.task_file) declares: the named task with the file's
    overrides; ConfigError naming the file and the field (e.g. "overrides.pos_min_m[1] must be a number")."""
    from envs.task_file import task_of
    from robot_rl.task_file import load_task_file

    return task_of(load_task_file(path))


@dataclasses.dataclass(frozen=True)
class SafetyBoxRecordConfig(Config):
    """Options of `record_safety_box` (`robot-rl safety-box record`)."""

    robot_ip: str = ""
    """The robot's FCI address."""
    task: str = "pick_cube"
    """The task whose box this is."""
    out: str = "box.json"
    """Task config file to write (JSON)."""
    seconds: float = 30.0
    """How long to sample (Ctrl-C ends early)."""
    rate: float = 20.0
    """Samples per second."""
    margin_m: float = 0.0
    """Grow the position box by this much (m)."""
    margin_rad: float = 0.0
    """Grow the orientation bounds by this much (rad)."""

    def validate(self) -> None:
        require(self.rate > 0, "rate", self.rate, "must be > 0")


def record_safety_box(cfg: SafetyBoxRecordConfig) -> Path:
    """Sample the TCP of the arm at `cfg.robot_ip` (opened read-only: the operator guides it by hand) and write the
    task config with the box that holds every sample; prints what it does; returns the file."""
    from envs.task_file import resolve_task

    task = resolve_task(cfg.task)
    from envs.hardware.franky_robot import FrankyRobot, FrankyRobotConfig

    robot = FrankyRobot(FrankyRobotConfig(robot_ip=cfg.robot_ip, gripper=False, control=False))
    positions, quats = [], []
    t0 = time.monotonic()
    print(f"safety-box: sampling the TCP for {cfg.seconds:g} s: guide the arm through the workspace's extremes "
          "(Ctrl-C ends early)", flush=True)
    try:
        while time.monotonic() - t0 < cfg.seconds:
            s = robot.state()
            positions.append(s.pos_base_ee)
            quats.append(s.quat_base_ee)
            time.sleep(max(0.0, 1.0 / cfg.rate - (time.monotonic() - t0) % (1.0 / cfg.rate)))
    except KeyboardInterrupt:
        print("safety-box: stopped early", flush=True)
    finally:
        robot.stop()
    nominal = task.reset_quat_wxyz if task.reset_quat_wxyz is not None else (0.0, 1.0, 0.0, 0.0)
    box = box_from_poses(positions, quats, nominal, cfg.margin_m, cfg.margin_rad)
    out = write_task_config(cfg.out, task.name, box, {
        "samples": len(positions), "seconds": round(time.monotonic() - t0, 2), "margin_m": cfg.margin_m,
        "margin_rad": cfg.margin_rad, "robot_ip": cfg.robot_ip, "nominal_quat_wxyz": list(nominal)})
    print(f"safety-box: {len(positions)} samples -> position box {box['pos_min_m']} .. {box['pos_max_m']} m, "
          f"euler {box['rot_min_rad']} .. {box['rot_max_rad']} rad; wrote {out}", flush=True)
    return out
