"""Task files (robot_rl.task_file) made into what the envs and the robot server use: the `Task`, the real cameras'
specs, and the rule that a hardware backend runs only inside a box recorded in the lab.

`resolve_task` is the one place a `--task` value (a preset name, a twin task name, or a task file's path) becomes a
`Task`: the twin scene's task class (its success check) with the file's values (reset pose, box, episode length,
gripper mode, reset routine, collision thresholds). `camera_configs` turns `[cameras.NAME]` tables into
envs.hardware.camera_source.CameraConfig fields. `require_lab_box` is the hardware guard.

Usage::

    task = resolve_task("configs/lab_pick.toml")         # PickCubeTask with the lab's box, reset pose, ...
    task = resolve_task("twin-pick-cube")                # == get_task("pick_cube")
    require_lab_box("franky", "twin-pick-cube")          # ConfigError: record the lab's box first
    camera_configs(load_task_file("configs/lab_pick.toml"), image_size=128)   # [{"kind": "realsense", ...}, ...]
"""

from __future__ import annotations

import dataclasses
from typing import Any

from controllers.arms import COLLISION_THRESHOLD_COUNTS, collision_values_ok
from envs.resets import ROUTINES
from envs.tasks import TASKS, Task, get_task
from robot_rl.errors import ConfigError, UnknownTaskError
from robot_rl.task_file import TaskFile, load_task_file, looks_like_task_file

HARDWARE_BACKENDS = ("franky", "ros2")
"""Backends that move a real arm (ros2 with --ros-twin drives the twin and is not one)."""

ALLOW_TWIN_BOX_FLAG = "--allow-twin-box"


def with_task_fields(task: Task, fields: dict[str, Any], where: str) -> Task:
    """`task` with Task `fields` (from a task file) applied; ConfigError naming `where` and the field."""
    routine = fields.get("reset_routine")
    if routine is not None and routine != "default" and routine not in ROUTINES:
        raise ConfigError(f"{where}: reset.routine {routine!r} is not a reset routine; known: "
                          f"{['default', *sorted(ROUTINES)]}")
    for name, n in COLLISION_THRESHOLD_COUNTS.items():
        v = fields.get(name)
        if v is not None and not collision_values_ok(v, n):
            raise ConfigError(f"{where}: robot.{name} must be {n} finite numbers > 0, got {list(v)}")
    known = {f.name for f in dataclasses.fields(task)}
    unknown = sorted(set(fields) - known)
    if unknown:
        raise ConfigError(f"{where}: task fields {unknown} are not fields of {type(task).__name__}")
    return dataclasses.replace(task, **fields)


def task_of(tf: TaskFile) -> Task:
    """The Task a task file declares: its twin scene's task class with every value the file (and its base) sets."""
    scene = str(tf.value("task", "twin_scene", ""))
    if scene not in TASKS:
        raise ConfigError(f"task file {tf.path}: task.twin_scene {scene!r} is not a twin task; known: {sorted(TASKS)}")
    return with_task_fields(get_task(scene), tf.task_fields(), f"task file {tf.path}")


def task_file_of(arg: str) -> TaskFile | None:
    """The task file behind a `--task` value: a file's path, a preset's name; None for a twin task name
    ('pick_cube'), which has no file."""
    from robot_rl.presets import PRESETS

    if arg in PRESETS:
        return PRESETS[arg].task_file
    if arg in TASKS:
        return None
    if looks_like_task_file(arg):
        return load_task_file(arg)
    raise UnknownTaskError(f"unknown task '{arg}'; known: {', '.join(sorted([*TASKS, *PRESETS]))}, or a task file's "
                           f"path (.toml)")


def resolve_task(arg: str | Task) -> Task:
    """A `--task` value (a Task, a twin task name, a preset name or a task file's path) as a Task."""
    if isinstance(arg, Task):
        return arg
    tf = task_file_of(arg)
    return get_task(arg) if tf is None else task_of(tf)


def box_is_from_the_lab(arg: str | Task | None, tf: TaskFile | None = None) -> bool:
    """Whether the task's box was recorded (or written) for the lab (robot_rl.task_file: `box_source`)."""
    if tf is None and isinstance(arg, str):
        tf = task_file_of(arg)
    return tf is not None and tf.box_source == "lab"


def require_lab_box(backend: str, task: str, allow_twin_box: bool = False) -> None:
    """ConfigError unless the task on a hardware `backend` has the lab's own box (or `allow_twin_box`)."""
    if backend not in HARDWARE_BACKENDS or allow_twin_box or box_is_from_the_lab(task):
        return
    raise ConfigError(
        f"--task {task}: the {backend} backend moves a real arm, and this task's workspace box is the twin's, not one "
        f"from your lab. Record the lab's box by guiding the arm by hand: `robot-rl safety-box record --robot-ip IP "
        f"--task {task} --out configs/box.json`, then `robot-rl task init --from-box configs/box.json --out "
        f"configs/lab.toml` and pass --task configs/lab.toml (or `[box] source = \"lab\"` in a task file whose box you "
        f"measured). {ALLOW_TWIN_BOX_FLAG} runs inside the twin's box anyway, at your own risk.")


def check_served_box(env: Any, task: str, allow_twin_box: bool = False) -> None:
    """`require_lab_box` for an env over a robot server (envs.remote): on the backend the server says it drives
    (`env.robot.info`: backend, twin), before anything moves; the env is closed when the task is refused. Every
    command that acts over a server checks this (actor, checkpoint evaluation, record-demos, record-labels)."""
    info = getattr(getattr(env, "robot", None), "info", None) or {}
    backend = str(info.get("backend", ""))
    if backend in HARDWARE_BACKENDS and not info.get("twin"):
        try:
            require_lab_box(backend, task, allow_twin_box)
        except ConfigError:
            env.close()
            raise


def camera_configs(tf: TaskFile, image_size: int | None = None) -> list[dict[str, Any]]:
    """The `[cameras.NAME]` tables as envs.hardware.camera_source.CameraConfig fields (name, kind, device, crop,
    exposure, capture size), at `image_size` (default: observation.image_size, else 128): the cameras the franky
    server opens itself. A kind = "ros2" camera (an image topic only) is a ConfigError naming the file and field;
    a camera's `topic` is the ros2 server's (envs.ros2.backend.file_cameras) and is left out here."""
    size = int(image_size or tf.value("observation", "image_size", 128))
    out = []
    for name, cam in tf.sections.get("cameras", {}).items():
        if cam["kind"] == "ros2":
            raise ConfigError(f"task file {tf.owner('cameras', name).path}: cameras.{name}.kind = \"ros2\" is an "
                              f"image topic, which only --backend ros2 reads; the franky server opens its cameras "
                              f"itself (kind = \"realsense\" with a serial, or \"opencv\" with a device)")
        fields: dict[str, Any] = {"name": name, "kind": cam["kind"], "image_size": size,
                                  "device": cam.get("serial", cam.get("device", ""))}
        for key, field in (("crop_xywh", "crop_xywh"), ("exposure_us", "exposure_us"), ("width", "width"),
                           ("height", "height"), ("fps", "fps")):
            if key in cam:
                fields[field] = cam[key]
        out.append(fields)
    return out
