"""The safety box recorded on the real workspace, and task configs that carry it.

`robot-rl safety-box record` (envs.cli.safety_box) samples the TCP pose while an operator guides the arm
by hand through the corners of the allowed workspace (Franka guiding mode; the robot is opened read-only), and
writes a task config: a JSON file of `Task` field overrides on a named task. `load_task_config` turns it back into
a `Task`; `robot-rl robot-server --task-config FILE` enforces its box server-side and `robot-rl actor
--task-config FILE` clips the env's targets to it.

File format (JSON, `format` "robot-rl-task-config", version 1)::

    {"format": "robot-rl-task-config", "version": 1, "task": "pick_cube",
     "overrides": {"pos_min_m": [...], "pos_max_m": [...], "rot_min_rad": [...], "rot_max_rad": [...]},
     "recorded": {"samples": 412, "seconds": 30.0, "margin_m": 0.0, "margin_rad": 0.0, "robot_ip": "..."}}

Usage::

    box = box_from_poses(positions, quats, nominal_quat_wxyz=(0, 1, 0, 0), margin_m=0.0)   # dict of overrides
    write_task_config("box.json", "pick_cube", box, {"samples": 412})
    task = load_task_config("box.json")            # get_task("pick_cube") with the recorded box
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from controllers.transforms import quat_conj, quat_mul, quat_to_euler_xyz
from envs.tasks import Task, get_task
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
    """The named task with the file's overrides; ConfigError naming the file and the problem."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as err:
        raise ConfigError(f"task config {path}: cannot read it ({err})") from err
    if not isinstance(data, dict) or data.get("format") != FORMAT or data.get("version") != VERSION:
        raise ConfigError(f"task config {path}: not a {FORMAT} version {VERSION} file")
    task = get_task(str(data.get("task", "")))
    overrides = data.get("overrides") or {}
    known = {f.name for f in dataclasses.fields(task)} - {"name"}
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise ConfigError(f"task config {path}: unknown task fields {unknown}")
    fixed: dict[str, Any] = {k: tuple(float(x) for x in v) if isinstance(v, list) else v
                             for k, v in overrides.items()}
    for k in BOX_FIELDS:
        if k in fixed and len(fixed[k]) != 3:
            raise ConfigError(f"task config {path}: {k} must have 3 numbers, got {overrides[k]}")
    lo, hi = fixed.get("pos_min_m", task.pos_min_m), fixed.get("pos_max_m", task.pos_max_m)
    if any(a > b for a, b in zip(lo, hi, strict=True)):
        raise ConfigError(f"task config {path}: pos_min_m {lo} exceeds pos_max_m {hi}")
    return dataclasses.replace(task, **fixed)
