"""`robot-rl task init`: write a lab's task file (robot_rl.task_file) from what the lab's tools recorded.

The box comes from `robot-rl safety-box record` (its JSON task config: the box, marked as the lab's, and the task
it was recorded for, which becomes the file's `base`); the cameras (kind, serial or device, capture size, fixed
exposure) and the home joints from `robot-rl check-hardware --report FILE`, or the cameras from `--camera
KIND:ID=NAME` specs. Everything else is inherited from the base preset, and written as commented lines for the
person to fill in (the reset pose, routine, episode length, crops, reward classifier, gains, collision thresholds).
The file written loads back (it is checked before it is written); a file without a box says how to record one,
and a hardware backend refuses it until it has one.

Usage::

    text = task_init_text(TaskInitConfig(out="configs/lab.toml", from_box="configs/box.json",
                                         check_hardware="hw.json", name="lab-pick"))
    init_task_file(TaskInitConfig(out="configs/lab.toml", base="twin-pick-cube", cameras=("realsense:123=front",)))
"""

from __future__ import annotations

import dataclasses
import json
import tempfile
from pathlib import Path
from typing import Any

from robot_rl.config import Config
from robot_rl.errors import ConfigError
from robot_rl.task_file import builtin, builtin_names, load_task_file, toml_value


@dataclasses.dataclass(frozen=True)
class TaskInitConfig(Config):
    """Options of `robot-rl task init`."""

    out: str = "configs/task.toml"
    """The task file to write."""
    base: str | None = None
    """The preset the task extends (default: the task the box was recorded for)."""
    name: str | None = None
    """The task's name (default: the file's stem)."""
    from_box: str | None = None
    """`robot-rl safety-box record`'s JSON (the lab's box)."""
    check_hardware: str | None = None
    """`robot-rl check-hardware --report`'s JSON (cameras, home joints)."""
    cameras: tuple[str, ...] = ()
    """Camera specs KIND:ID=NAME (instead of, or beside, the report's)."""
    image_size: int | None = None
    """The observation's image size (default: the report's, else the base's)."""
    force: bool = False
    """Overwrite an existing file."""


def _json(path: str, what: str) -> dict[str, Any]:
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as err:
        raise ConfigError(f"{what} {path}: cannot read it ({err})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{what} {path}: not a JSON object")
    return data


def _line(key: str, value: Any, note: str = "", commented: bool = False) -> list[str]:
    out = [f"# {note}"] if note else []
    out.append(f"{'# ' if commented else ''}{key} = {toml_value(value)}")
    return out


def _camera_from_spec(spec: str) -> tuple[str, dict[str, Any]]:
    from envs.hardware.cameras import parse_camera_spec

    cfg = parse_camera_spec(spec, 128)
    ident = "serial" if cfg.kind == "realsense" else "device"
    return cfg.name, {"kind": cfg.kind, ident: cfg.device}


def task_init_text(cfg: TaskInitConfig) -> str:
    """The task file's text (checked: it loads back)."""
    box: dict[str, Any] = {}
    base = cfg.base
    if cfg.from_box:
        from robot_rl.task_file import V1_FORMAT

        data = _json(cfg.from_box, "--from-box")
        if data.get("format") != V1_FORMAT:
            raise ConfigError(f"--from-box {cfg.from_box}: not a `robot-rl safety-box record` file ({V1_FORMAT})")
        recorded_for = load_task_file(cfg.from_box)  # validated: a bad box fails here, naming the field
        base = base or next(n for n in builtin_names() if builtin(n).name == recorded_for.name)
        box = {k: recorded_for.own["box"][k] for k in ("pos_min_m", "pos_max_m", "rot_min_rad", "rot_max_rad")
               if k in recorded_for.own.get("box", {})}
        box["recorded"] = dict(recorded_for.own.get("box", {}).get("recorded", {}))
        box["recorded"]["from"] = str(cfg.from_box)
    if base is None:
        raise ConfigError(f"--base: name the preset the task extends ({', '.join(builtin_names())}), or pass "
                          f"--from-box (the task the box was recorded for)")
    if base not in builtin_names():
        raise ConfigError(f"--base {base!r}: not a preset; known: {', '.join(builtin_names())}")
    parent = builtin(base)
    report = _json(cfg.check_hardware, "--check-hardware") if cfg.check_hardware else {}
    cameras: dict[str, dict[str, Any]] = {}
    for cam in report.get("cameras", []):
        entry = {"kind": cam["kind"]}
        entry["serial" if cam["kind"] == "realsense" else "device"] = str(cam.get("serial") or cam.get("device"))
        entry.update({k: int(cam[k]) for k in ("width", "height", "fps") if isinstance(cam.get(k), int | float)})
        if cam.get("exposure_us") and cam.get("auto_exposure") in (False, 0, "0", "False", "false"):
            entry["exposure_us"] = float(cam["exposure_us"])
        cameras[str(cam["name"])] = entry
    for spec in cfg.cameras:
        name, entry = _camera_from_spec(spec)
        cameras[name] = entry
    name = cfg.name or Path(cfg.out).stem
    size = cfg.image_size or report.get("image_size") or parent.value("observation", "image_size", 128)
    pv = parent.value
    lines = [f"# robot-rl task file for {name}: extends the preset {base} (robot-rl tasks lists them); every value",
             f"# not set here is {base}'s. Commented lines are for you to fill in. Reference: robot_rl.task_file.",
             "", "[task]", *_line("name", name), *_line("base", base),
             *_line("description", "", "one line for humans", commented=True),
             *_line("max_episode_steps", pv("task", "max_episode_steps"), "episode length in env steps (10 Hz)",
                    commented=True), "", "[reset]"]
    robot = report.get("robot") or {}
    if robot.get("q_rad"):
        lines += _line("home_joints_rad", robot["q_rad"], "the joints check-hardware read: guide the arm to the "
                       "home pose before you record the report")
    else:
        lines += _line("home_joints_rad", pv("reset", "home_joints_rad"), "the joint reset's pose", commented=True)
    tcp = robot.get("tcp_pos_m")
    lines += _line("pos_m", tcp or pv("reset", "pos_m"), "the TCP position an episode starts at (base frame, m)",
                   commented=True)
    lines += _line("routine", pv("reset", "routine"), "between episodes: default, pick_cube, cube_relocate "
                   "(envs.resets)", commented=True)
    lines += ["", "[box]"]
    if box:
        lines += ["# recorded in the lab by robot-rl safety-box record", *_line("source", "lab")]
        for k in ("pos_min_m", "pos_max_m", "rot_min_rad", "rot_max_rad"):
            if k in box:
                lines += _line(k, box[k])
        lines += ["", "[box.recorded]"] + [f"{k} = {toml_value(v)}" for k, v in box["recorded"].items()]
    else:
        lines += ["# NO BOX YET: a hardware backend refuses this task until it has the lab's box. Record it by",
                  "# guiding the arm: robot-rl safety-box record --robot-ip IP --task BASE --out configs/box.json,",
                  "# then rerun robot-rl task init with --from-box configs/box.json (or write the box below and",
                  "# set source = \"lab\").",
                  *_line("pos_min_m", pv("box", "pos_min_m"), commented=True),
                  *_line("pos_max_m", pv("box", "pos_max_m"), commented=True)]
    lines += ["", "[gripper]", *_line("mode", pv("gripper", "mode"), "free, locked_closed or locked_open")]
    for cam_name, cam in cameras.items():
        lines += ["", f"[cameras.{cam_name}]"] + [f"{k} = {toml_value(v)}" for k, v in cam.items()]
        lines += _line("crop_xywh", [0, 0, 480, 480], "crop of the captured frame before the resize (x, y, w, h; "
                       "robot-rl cameras strip shows the framing); unset: the centre square", commented=True)
        if "exposure_us" not in cam:
            lines += _line("exposure_us", 8000.0, "fixed exposure in us (unset: auto)", commented=True)
    lines += ["", "[observation]", *_line("mode", "pixels", "the actor's and the learner's --obs-mode when not given: "
                                           "pixels (cameras + proprio); a robot has no object state")]
    if cameras:
        lines += _line("cameras", list(cameras), "the cameras the policy sees, in order")
    lines += _line("image_size", int(size))
    lines += ["", "[reward]", *_line("source", "human", "env (twin only), classifier (with classifier = DIR), or "
                                      "human (the teleop device's success key)"),
              *_line("classifier", "classifiers/NAME", "robot-rl train-classifier's output, relative to this file",
                     commented=True),
              "", "[control]", *_line("gains", pv("control", "gains"), "compliance or precision"),
              "", "# [robot]  libfranka's collision thresholds, both or neither",
              "# collision_torque_nm = [20.0, 20.0, 18.0, 18.0, 16.0, 14.0, 12.0]",
              "# collision_force_n = [20.0, 20.0, 20.0, 25.0, 25.0, 25.0]", ""]
    text = "\n".join(lines)
    with tempfile.TemporaryDirectory() as tmp:  # the file must load back before it is written
        check = Path(tmp) / "check.toml"
        check.write_text(text)
        try:
            load_task_file(check)
        except ConfigError as err:
            raise ConfigError(str(err).replace(str(check), cfg.out)) from None
    return text


def init_task_file(cfg: TaskInitConfig) -> Path:
    """Write the task file (refusing to overwrite one unless `force`); prints what it wrote; returns the path."""
    out = Path(cfg.out)
    if out.exists() and not cfg.force:
        raise ConfigError(f"--out {out}: exists; pass --force to overwrite it")
    text = task_init_text(cfg)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    tf = load_task_file(out)
    box = "the lab's box" if tf.box_source == "lab" else "NO lab box yet (record one: robot-rl safety-box record)"
    print(f"task init: wrote {out} ({tf.name}, extends {tf.base.name if tf.base else '-'}; {box}; "
          f"{len(tf.sections.get('cameras', {}))} cameras); edit the commented lines, then pass --task {out}",
          flush=True)
    return out
