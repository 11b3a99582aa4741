"""Task files: a task written by hand (TOML), validated, with errors that name the file and the field.

A task file declares what a preset declares: the gymnasium env it runs on (or the preset it extends), the reset
(home joints, reset pose, reset routine), the workspace box (and whether it was recorded in the lab), the gripper
mode, the episode length, the cameras (kind, serial, crop, exposure, capture size), the observation (cameras,
image size, privileged object state), the reward (the env's, a classifier and its gate, or a person's key) and
the gains profile. Learner hyper-parameters are not part of a task: a key such as `batch_size` or `discount`, or
a `[learner]` table, is refused with a message pointing at the learner's command line; a new task trains on the
agent's defaults (learners.agents.recipes has recipes for the twin presets only).

Design: TOML, because a person writes it (comments, no quoting of keys, tomllib is in the standard library); the
writer (`dump_task_file`) emits the small subset of TOML the format needs (key = value, [section] tables), so no
dependency is added. The built-in twin presets are task files of this same format (robot_rl/task_files/*.toml,
shipped in the wheel; robot_rl.presets builds its table from them). A lab's file usually extends one of them
(`base = "twin-pick-cube"`): it inherits every value and the twin scene (its success check, used in simulation),
and overrides what differs in the lab. A file may extend another lab file instead (`base = "lab_pick.toml"`, a
path relative to the file): e.g. one arm's cameras over the lab's shared box; a cycle of bases is an error.
A copy of a built-in file, edited, is a stand-alone twin task: robot_rl.presets.twin_file_kwargs passes every value
where it differs from the built-in file of its scene to the twin env, and refuses what the twin cannot honour.
The older JSON task config of `robot-rl safety-box record` ("format":
"robot-rl-task-config", version 1: a named task plus field overrides) is read as a task file that extends that
task's preset, its box marked as recorded in the lab.

Sections and keys (`SCHEMA` is the authority; `robot-rl task init` writes a commented template)::

    [task]         name, description, base (a preset or a task file it extends) | env_id + env_module + twin_scene
                   (twin files),
                   max_episode_steps
    [reset]        pos_m (3), quat_wxyz (4), home_joints_rad (7), routine, joint_reset_every, noise_m, noise_rad
    [box]          pos_min_m, pos_max_m (3, m), rot_min_rad, rot_max_rad (3, rad), source ("twin" | "lab")
    [box.recorded] what `robot-rl safety-box record` noted (samples, seconds, robot_ip, ...): free-form
    [gripper]      mode ("free" | "locked_closed" | "locked_open")
    [cameras.NAME] kind ("realsense" | "opencv" | "ros2"), serial (realsense) | device (opencv), topic, crop_xywh
                   (4), exposure_us, width, height, fps
    [observation]  mode ("state" | "pixels": the --obs-mode of actor and learner when not given; a lab's file says
                   pixels), cameras (names, in order), image_size, object_state (twin only), last_action (the
                   previous step's action in the observation: envs.env_config.RobotEnvConfig.last_action_obs; name
                   "last_action" in state / pixels_state to feed it to the policy), state / pixels_state
                   (the state leaves a policy observes with --obs-mode state / pixels: 'leaf', 'leaf[i]', 'leaf[a:b]')
    [reward]       source ("env" | "classifier" | "human"), classifier (a directory; relative to the file), gate_k
    [control]      gains ("compliance" | "precision": the profile an episode runs with)
    [robot]        collision_torque_nm (7), collision_force_n (6)
    [forward_backward]  backward_task, forward_goal, backward_goal (reset-free training pairs)

Cameras: the franky robot server opens a realsense / opencv camera itself (serial / device, capture width x height
at fps, exposure_us). The ros2 robot server reads every camera from a sensor_msgs/Image topic: `topic` (relative
names resolve in the server's --ros-namespace), by default camera/NAME/image_raw for kind "ros2" (a camera only ROS
publishes: no serial, no device; its exposure and rate are its driver's parameters, so exposure_us and fps are
refused there, and width / height, when given, are the frame size the topic must send). A realsense or opencv
camera may name the `topic` its ROS driver publishes, so one file serves both backends. Both backends crop
(crop_xywh, default the centre square) and resize to observation.image_size the same way.

A box is "from the lab" when the file says `source = "lab"`, or when the file itself (not its base) gives the
position box; a hardware backend refuses a task whose box is the twin's (envs.task_file.require_lab_box).

Usage::

    tf = load_task_file("configs/lab_pick.toml")      # ConfigError: "task file lab_pick.toml: box.pos_min_m[1] ..."
    tf.name, tf.value("box", "pos_min_m"), tf.box_source, tf.reward_arg()
    tf.task_fields(), tf.env_fields()                 # the envs.tasks.Task / RobotEnvConfig fields it sets
    text = dump_task_file(tf.sections)                # TOML again (round trip)
    looks_like_task_file("configs/lab_pick.toml")     # True (a path); "twin-pick-cube" is a preset name
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from robot_rl.errors import ConfigError
from robot_rl.specs import parse_select

TASK_FILES_DIR = Path(__file__).with_name("task_files")
"""The built-in task files (the twin presets), one `NAME.toml` each."""

SUFFIXES = (".toml", ".json")
V1_FORMAT = "robot-rl-task-config"

# kind: ("str",) ("int", lo) ("float", lo) ("bool",) ("floats", n) ("ints", n) ("strs",) ("choice", options)
# ("table",) (free-form scalars)
_S: dict[str, dict[str, tuple[Any, ...]]] = {
    "task": {"name": ("str",), "description": ("str",), "base": ("str",), "env_id": ("str",),
             "env_module": ("str",), "twin_scene": ("str",), "max_episode_steps": ("int", 1)},
    "reset": {"pos_m": ("floats", 3), "quat_wxyz": ("floats", 4), "home_joints_rad": ("floats", 7),
              "routine": ("str",), "joint_reset_every": ("int", 0), "noise_m": ("float", 0.0),
              "noise_rad": ("float", 0.0)},
    "box": {"pos_min_m": ("floats", 3), "pos_max_m": ("floats", 3), "rot_min_rad": ("floats", 3),
            "rot_max_rad": ("floats", 3), "source": ("choice", ("twin", "lab")), "recorded": ("table",)},
    "gripper": {"mode": ("choice", ("free", "locked_closed", "locked_open"))},
    "observation": {"mode": ("choice", ("state", "pixels")), "cameras": ("strs",), "image_size": ("int", 8),
                    "object_state": ("bool",), "last_action": ("bool",),
                    "state": ("select",), "pixels_state": ("select",)},
    "reward": {"source": ("choice", ("env", "classifier", "human")), "classifier": ("str",), "gate_k": ("int", 1)},
    "control": {"gains": ("choice", ("compliance", "precision"))},
    "robot": {"collision_torque_nm": ("floats", 7), "collision_force_n": ("floats", 6)},
    "forward_backward": {"backward_task": ("str",), "forward_goal": ("str",), "backward_goal": ("str",)},
}
CAMERA_KINDS = ("realsense", "opencv", "ros2")
"""[cameras.NAME] kind: a camera the franky server opens (realsense, opencv), or an image topic only (ros2)."""
ROS_CAMERA_UNSET = ("exposure_us", "fps")
"""Keys a kind = "ros2" camera refuses: its driver's parameters, not the server's."""
CAMERA_KEYS: dict[str, tuple[Any, ...]] = {
    "kind": ("choice", CAMERA_KINDS), "serial": ("str",), "device": ("str",), "topic": ("str",),
    "crop_xywh": ("ints", 4),
    "exposure_us": ("float", 0.0), "width": ("int", 1), "height": ("int", 1), "fps": ("int", 1)}
SCHEMA: Mapping[str, Mapping[str, tuple[Any, ...]]] = {**_S, "cameras": {"NAME": ("table",)}}
"""Section -> key -> kind (see the module docstring); `[cameras.NAME]` tables take `CAMERA_KEYS`."""

GAIN_PROFILES = ("compliance", "precision")
"""The gains profiles a task may name (controllers.gains.GAIN_PROFILES, checked by the tests)."""

LEARNER_SECTIONS = ("learner", "agent", "training", "recipe", "hyperparameters")
LEARNER_KEYS = frozenset({
    "batch_size", "discount", "gamma", "tau", "lr", "learning_rate", "actor_lr", "critic_lr", "temperature_lr",
    "temperature_init", "target_entropy", "utd", "updates_per_step", "hidden_dims", "ensemble_size", "n_step",
    "encoder", "encoder_weights", "freeze_encoder", "demo_ratio", "bc_weight", "grad_clip_norm", "critic_loss",
    "layer_norm", "buffer_size", "replay_size", "warmup_steps", "seed", "device"})
"""Keys that are learner hyper-parameters: refused with a message naming the learner's command line."""

# Which task-file values set which envs.tasks.Task fields, and which envs.env_config.RobotEnvConfig fields.
TASK_FIELD_OF = {("task", "max_episode_steps"): "max_episode_steps", ("reset", "pos_m"): "reset_pos_m",
                 ("reset", "quat_wxyz"): "reset_quat_wxyz", ("reset", "routine"): "reset_routine",
                 ("box", "pos_min_m"): "pos_min_m", ("box", "pos_max_m"): "pos_max_m",
                 ("box", "rot_min_rad"): "rot_min_rad", ("box", "rot_max_rad"): "rot_max_rad",
                 ("robot", "collision_torque_nm"): "collision_torque_nm",
                 ("robot", "collision_force_n"): "collision_force_n"}
ENV_FIELD_OF = {("reset", "home_joints_rad"): "home_q_rad", ("reset", "joint_reset_every"): "joint_reset_every",
                ("reset", "noise_m"): "reset_noise_m", ("reset", "noise_rad"): "reset_noise_rad",
                ("observation", "cameras"): "camera_names", ("observation", "image_size"): "image_size",
                ("observation", "object_state"): "object_obs", ("observation", "last_action"): "last_action_obs",
                ("control", "gains"): "gains_profile"}
GRIPPER_MODES = {"free": (False, 0.0), "locked_closed": (True, 1.0), "locked_open": (True, 0.0)}
"""gripper.mode -> (Task.gripper_locked, Task.reset_gripper_closed)."""


def looks_like_task_file(arg: str) -> bool:
    """Whether a `--task` value names a file (.toml or .json, or an existing file) rather than a preset."""
    return arg.endswith(SUFFIXES) or os.path.isfile(arg)


def _what(v: Any) -> str:
    return repr(v) if isinstance(v, str) else f"{v!r} ({type(v).__name__})"


def _number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def _check(where: str, field: str, kind: tuple[Any, ...], v: Any) -> Any:
    """The value `v` of `field` normalised (lists -> tuples, ints -> floats where floats are due), or ConfigError."""
    k = kind[0]
    bad = f"{where}: {field}"
    if k == "str":
        if not isinstance(v, str):
            raise ConfigError(f"{bad} must be a string, got {_what(v)}")
        return v
    if k == "choice":
        if v not in kind[1]:
            raise ConfigError(f"{bad} must be one of {list(kind[1])}, got {_what(v)}")
        return v
    if k == "bool":
        if not isinstance(v, bool):
            raise ConfigError(f"{bad} must be true or false, got {_what(v)}")
        return v
    if k == "int":
        if not isinstance(v, int) or isinstance(v, bool) or v < kind[1]:
            raise ConfigError(f"{bad} must be an integer >= {kind[1]}, got {_what(v)}")
        return v
    if k == "float":
        if not _number(v) or v < kind[1]:
            raise ConfigError(f"{bad} must be a finite number >= {kind[1]:g}, got {_what(v)}")
        return float(v)
    if k == "table":
        if not isinstance(v, dict):
            raise ConfigError(f"{bad} must be a table, got {_what(v)}")
        for key, x in v.items():
            if not (isinstance(x, str | bool) or _number(x) or (isinstance(x, list) and all(_number(e) for e in x))):
                raise ConfigError(f"{bad}.{key} must be a string, a number, true/false or a list of numbers, got "
                                  f"{_what(x)}")
        return {key: tuple(x) if isinstance(x, list) else x for key, x in v.items()}
    if not isinstance(v, list | tuple):
        raise ConfigError(f"{bad} must be a list, got {_what(v)}")
    if k == "select":  # state selection entries: 'leaf', 'leaf[i]', 'leaf[a:b]' (robot_rl.specs.parse_select)
        for i, x in enumerate(v):
            if not isinstance(x, str) or not x.strip():
                raise ConfigError(f"{bad}[{i}] must be a non-empty string, got {_what(x)}")
            try:
                parse_select(x)
            except ConfigError:
                raise ConfigError(f"{bad}[{i}] {x!r}: expected 'leaf', 'leaf[i]' or 'leaf[a:b]' (e.g. 'object', "
                                  f"'state[5]', 'state[0:3]')") from None
        return tuple(x.strip() for x in v)
    if k == "strs":
        for i, x in enumerate(v):
            if not isinstance(x, str) or not x:
                raise ConfigError(f"{bad}[{i}] must be a non-empty string, got {_what(x)}")
        if len(set(v)) != len(v):
            raise ConfigError(f"{bad} must not repeat a name, got {list(v)}")
        return tuple(v)
    if len(v) != kind[1]:
        raise ConfigError(f"{bad} must have {kind[1]} entries, got {len(v)}: {list(v)}")
    for i, x in enumerate(v):
        if k == "ints" and (not isinstance(x, int) or isinstance(x, bool) or x < 0):
            raise ConfigError(f"{bad}[{i}] must be an integer >= 0, got {_what(x)}")
        if not _number(x):
            raise ConfigError(f"{bad}[{i}] must be a number, got {_what(x)}")
    return tuple(int(x) for x in v) if k == "ints" else tuple(float(x) for x in v)


def _unknown(where: str, field: str, known: Any) -> ConfigError:
    leaf = field.rsplit(".", 1)[-1]
    if leaf in LEARNER_KEYS or field.split(".")[0] in LEARNER_SECTIONS:
        return ConfigError(f"{where}: {field} is a learner hyper-parameter, not part of a task: pass it on the "
                           f"learner's command line (robot-rl train / learner --set FIELD=VALUE); a task runs on the "
                           f"agent's defaults")
    return ConfigError(f"{where}: unknown key {field}; known: {sorted(known)}")


def validate_sections(data: Mapping[str, Any], where: str) -> dict[str, dict[str, Any]]:
    """The raw file contents checked against SCHEMA and normalised; ConfigError naming `where` and the field."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"{where}: must hold [section] tables, got {_what(data)}")
    out: dict[str, dict[str, Any]] = {}
    for section, body in data.items():
        if section not in SCHEMA:
            raise _unknown(where, section, SCHEMA)
        if not isinstance(body, Mapping):
            raise ConfigError(f"{where}: {section} must be a [{section}] table, got {_what(body)}")
        if section == "cameras":
            out[section] = {}
            for name, cam in body.items():
                if not isinstance(cam, Mapping):
                    raise ConfigError(f"{where}: cameras.{name} must be a [cameras.{name}] table, got {_what(cam)}")
                checked = {}
                for key, v in cam.items():
                    if key not in CAMERA_KEYS:
                        raise _unknown(where, f"cameras.{name}.{key}", CAMERA_KEYS)
                    checked[key] = _check(where, f"cameras.{name}.{key}", CAMERA_KEYS[key], v)
                out[section][name] = checked
            continue
        out[section] = {}
        for key, v in body.items():
            if key not in SCHEMA[section]:
                raise _unknown(where, f"{section}.{key}", SCHEMA[section])
            out[section][key] = _check(where, f"{section}.{key}", SCHEMA[section][key], v)
    return out


def _merge(base: Mapping[str, Mapping[str, Any]], own: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    merged: dict[str, dict[str, Any]] = {s: dict(v) for s, v in base.items()}
    for s, body in own.items():
        if s == "cameras":  # a lab's cameras replace the base's (the twin renders its own)
            merged[s] = {n: dict(c) for n, c in body.items()}
        else:
            merged.setdefault(s, {}).update(body)
    base_name = merged["task"].pop("base", None) or own["task"].get("base")
    if "description" not in own.get("task", {}):
        merged["task"]["description"] = f"extends {base_name}"
    return merged


@dataclasses.dataclass(frozen=True)
class TaskFile:
    """A loaded, validated task file: `sections` (merged over its base), `own` (this file's values only)."""

    path: str
    sections: Mapping[str, Mapping[str, Any]]
    own: Mapping[str, Mapping[str, Any]]
    base: TaskFile | None = None

    @property
    def name(self) -> str:
        return str(self.sections["task"]["name"])

    @property
    def description(self) -> str:
        return str(self.sections["task"].get("description", ""))

    def value(self, section: str, key: str, default: Any = None) -> Any:
        return self.sections.get(section, {}).get(key, default)

    @property
    def box_source(self) -> str:
        """'lab' when the box was recorded or written for the lab (see the module docstring), else 'twin'."""
        if "source" in self.own.get("box", {}):
            return str(self.own["box"]["source"])
        if "pos_min_m" in self.own.get("box", {}) and self.base is not None:
            return "lab"
        if self.base is not None:  # a file extending a lab's file keeps that file's box (and its source)
            return self.base.box_source
        return str(self.value("box", "source", "twin"))

    def _fields(self, table: Mapping[tuple[str, str], str], only_own: bool) -> dict[str, Any]:
        src = self.own if only_own else self.sections
        return {f: src[s][k] for (s, k), f in table.items() if k in src.get(s, {})}

    def task_fields(self, only_own: bool = False) -> dict[str, Any]:
        """The envs.tasks.Task fields this file sets (`only_own`: leaving out what it inherits)."""
        out = self._fields(TASK_FIELD_OF, only_own)
        src = self.own if only_own else self.sections
        mode = src.get("gripper", {}).get("mode")
        if mode is not None:
            out["gripper_locked"], out["reset_gripper_closed"] = GRIPPER_MODES[mode]
        return out

    def env_fields(self, only_own: bool = False) -> dict[str, Any]:
        """The envs.env_config.RobotEnvConfig fields this file sets."""
        return self._fields(ENV_FIELD_OF, only_own)

    def reward_arg(self) -> str | None:
        """The reward as the actor's `--reward` value (env, classifier:DIR, human), None when not declared."""
        r = self.sections.get("reward", {})
        if "source" not in r:
            return None
        return f"classifier:{r['classifier']}" if r["source"] == "classifier" else str(r["source"])

    def owner(self, section: str, key: str) -> TaskFile:
        """The file (this one or a base) that writes `section.key` itself; the last base when none does."""
        tf = self
        while tf.base is not None and key not in tf.own.get(section, {}):
            tf = tf.base
        return tf

    @property
    def obs_mode(self) -> str | None:
        """observation.mode: the --obs-mode of actor, learner, train and sim when not given (None: not declared)."""
        mode = self.sections.get("observation", {}).get("mode")
        return None if mode is None else str(mode)

    def state_selection(self, obs_mode: str) -> tuple[str, ...] | None:
        """observation.state (`obs_mode` 'state') or observation.pixels_state ('pixels'): the state leaves a policy
        observes (AgentConfig.state_select entries); None when the file does not say."""
        sel = self.sections.get("observation", {}).get("pixels_state" if obs_mode == "pixels" else "state")
        return None if sel is None else tuple(sel)

    @property
    def reward_gate_k(self) -> int | None:
        """reward.gate_k: consecutive positive frames before a classifier's success counts (None: the card's)."""
        k = self.sections.get("reward", {}).get("gate_k")
        return None if k is None else int(k)


def _read(path: Path) -> dict[str, Any]:
    where = f"task file {path}"
    try:
        text = path.read_text()
    except OSError as err:
        raise ConfigError(f"{where}: cannot read it ({err.strerror or err})") from None
    try:
        data = json.loads(text) if path.suffix == ".json" else tomllib.loads(text)
    except (ValueError, tomllib.TOMLDecodeError) as err:
        raise ConfigError(f"{where}: not valid {'JSON' if path.suffix == '.json' else 'TOML'} ({err})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: must hold [section] tables, got {_what(data)}")
    return data


def _from_v1(data: dict[str, Any], where: str) -> dict[str, Any]:
    """A version-1 task config (a named task + Task field overrides) as task-file sections extending the preset."""
    if data.get("version") != 1:
        raise ConfigError(f"{where}: {V1_FORMAT} version {data.get('version')!r} is not supported (version 1 is)")
    task = data.get("task")
    base = next((n for n in builtin_names() if builtin(n).value("task", "twin_scene") == task or n == task), None)
    if base is None:
        raise ConfigError(f"{where}: task must name a built-in task (e.g. pick_cube), got {_what(task)}")
    overrides = data.get("overrides") or {}
    if not isinstance(overrides, dict):
        raise ConfigError(f"{where}: overrides must be an object, got {_what(overrides)}")
    inverse = {f: sk for sk, f in TASK_FIELD_OF.items()}
    out: dict[str, Any] = {"task": {"name": base, "base": base}}  # the same task, the lab's values
    for field, v in overrides.items():
        if field == "gripper_locked" or field == "reset_gripper_closed":
            raise ConfigError(f"{where}: overrides.{field}: set the gripper mode in a task file ([gripper] mode)")
        if field not in inverse:
            raise ConfigError(f"{where}: overrides.{field} is not a field a task config sets; known: "
                              f"{sorted(inverse)}")
        s, k = inverse[field]
        out.setdefault(s, {})[k] = v
    box = out.setdefault("box", {})
    if "pos_min_m" in box or data.get("recorded"):
        box["source"] = "lab"
        if isinstance(data.get("recorded"), dict) and data["recorded"]:
            box["recorded"] = {k: v for k, v in data["recorded"].items() if v is not None}
    # name the v1 fields as they are spelt in the file
    return {"__v1__": {f: inverse[f] for f in overrides if f in inverse}, **out}


def load_task_file(path: str | os.PathLike[str], _chain: tuple[Path, ...] = ()) -> TaskFile:
    """Read, validate and resolve (its base) a task file; ConfigError naming the file and the field. `_chain`: the
    files that extend this one (a cycle of bases is an error)."""
    p = Path(path)
    where = f"task file {p}"
    data = _read(p)
    v1names: dict[str, tuple[str, str]] = {}
    if data.get("format") == V1_FORMAT:
        data = _from_v1(data, where)
        v1names = data.pop("__v1__")
    try:
        own = validate_sections(data, where)
    except ConfigError as err:
        msg = str(err)
        for field, (s, k) in v1names.items():  # a v1 file's field names, as the person wrote them
            msg = msg.replace(f": {s}.{k}", f": overrides.{field}")
        raise ConfigError(msg) from None
    if "classifier" in own.get("reward", {}) and not Path(own["reward"]["classifier"]).is_absolute():
        own["reward"]["classifier"] = str(p.parent / own["reward"]["classifier"])
    return _resolve(own, where, p, _chain)


def _base_file(name: str, where: str, path: Path, chain: tuple[Path, ...]) -> TaskFile:
    """The task file `task.base = name` names (a path, relative to the file `path`), loaded; ConfigError for a
    missing file or a cycle of bases."""
    base = Path(name) if Path(name).is_absolute() else path.parent / name
    here = path.resolve()
    seen = (*chain, here)
    if base.resolve() in seen:
        loop = " -> ".join(str(f) for f in (*seen[seen.index(base.resolve()):], base.resolve()))
        raise ConfigError(f"{where}: task.base {name!r} makes a cycle of bases ({loop}); a task file extends a "
                          f"preset or a file that does not extend it back")
    if not base.is_file():
        raise ConfigError(f"{where}: task.base {name!r}: no such task file ({base}); name a preset "
                          f"({', '.join(builtin_names())}) or a task file's path, relative to this file")
    return load_task_file(base, seen)


def _resolve(own: dict[str, dict[str, Any]], where: str, path: Path, chain: tuple[Path, ...] = ()) -> TaskFile:
    t = own.get("task", {})
    if "name" not in t:
        raise ConfigError(f"{where}: task.name is missing (the name runs, checkpoints and handshakes carry)")
    base: TaskFile | None = None
    if "base" in t:
        if "env_id" in t or "twin_scene" in t:
            raise ConfigError(f"{where}: task.base and task.env_id / task.twin_scene exclude each other (the base "
                              f"gives the env)")
        if t["base"] in builtin_names():
            base = builtin(t["base"])
        elif looks_like_task_file(t["base"]) or "/" in t["base"]:
            base = _base_file(t["base"], where, path, chain)
        else:
            raise ConfigError(f"{where}: task.base must name a built-in preset ({', '.join(builtin_names())}) or a "
                              f"task file (.toml, relative to this file), got {t['base']!r}")
        sections = _merge(base.sections, own)
    elif "env_id" in t:
        sections = {s: dict(v) for s, v in own.items()}
    else:
        raise ConfigError(f"{where}: task.base is missing: name the preset this task extends (e.g. base = "
                          f"\"twin-pick-cube\"; `robot-rl tasks` lists them)")
    tf = TaskFile(str(path), sections, own, base)
    _check_whole(tf, where)
    return tf


def _check_whole(tf: TaskFile, where: str) -> None:
    box = tf.sections.get("box", {})
    for lo_k, hi_k in (("pos_min_m", "pos_max_m"), ("rot_min_rad", "rot_max_rad")):
        lo, hi = box.get(lo_k), box.get(hi_k)
        if lo is not None and hi is not None and any(a > b for a, b in zip(lo, hi, strict=True)):
            raise ConfigError(f"{where}: box.{lo_k} {list(lo)} exceeds box.{hi_k} {list(hi)} on some axis")
    robot = tf.sections.get("robot", {})
    if ("collision_torque_nm" in robot) != ("collision_force_n" in robot):
        raise ConfigError(f"{where}: robot.collision_torque_nm and robot.collision_force_n go together (libfranka "
                          "sets both at once)")
    reward = tf.sections.get("reward", {})
    if reward.get("source") == "classifier" and not reward.get("classifier"):
        raise ConfigError(f"{where}: reward.classifier (the classifier's directory) is missing for source = "
                          f"\"classifier\"")
    for name, cam in tf.sections.get("cameras", {}).items():
        _check_camera(where, name, cam)
    obs = tf.own.get("observation", {}).get("cameras")
    cams = tf.own.get("cameras")
    if obs is not None and cams:
        missing = [c for c in obs if c not in cams]
        if missing:
            raise ConfigError(f"{where}: observation.cameras names {missing[0]!r}, which no [cameras.{missing[0]}] "
                              f"declares; declared: {sorted(cams)}")


def _check_camera(where: str, name: str, cam: Mapping[str, Any]) -> None:
    """One [cameras.NAME] table as a whole: its kind, the identifier that kind needs, a crop inside the frame."""
    if "kind" not in cam:
        raise ConfigError(f"{where}: cameras.{name}.kind is missing ({', '.join(CAMERA_KINDS)})")
    if cam["kind"] == "ros2":
        for key in ("serial", "device", *ROS_CAMERA_UNSET):
            if key in cam:
                raise ConfigError(f"{where}: cameras.{name}.{key}: a kind = \"ros2\" camera is an image topic "
                                  f"(cameras.{name}.topic, default camera/{name}/image_raw); its {key} is set in its "
                                  f"ROS driver, not here (or give kind = \"realsense\" / \"opencv\" with a topic, "
                                  f"for a camera the franky server opens too)")
    else:
        ident = "serial" if cam["kind"] == "realsense" else "device"
        if ident not in cam:
            raise ConfigError(f"{where}: cameras.{name}.{ident} is missing (the {cam['kind']} camera's "
                              f"{'serial number' if ident == 'serial' else 'device, e.g. /dev/video0'})")
    if "topic" in cam and not cam["topic"].strip():
        raise ConfigError(f"{where}: cameras.{name}.topic must name a sensor_msgs/Image topic, got ''")
    crop, w, h = cam.get("crop_xywh"), cam.get("width"), cam.get("height")
    if crop is not None:
        x, y, cw, ch = crop
        if cw == 0 or ch == 0:
            raise ConfigError(f"{where}: cameras.{name}.crop_xywh {list(crop)}: width and height must be > 0")
        if w is not None and h is not None and (x + cw > w or y + ch > h):
            raise ConfigError(f"{where}: cameras.{name}.crop_xywh {list(crop)} must lie inside the {w}x{h} frame "
                              f"(cameras.{name}.width / height)")


def builtin_names() -> tuple[str, ...]:
    """The built-in task files' names (the twin presets), in table order."""
    return _BUILTIN_ORDER


_BUILTIN_ORDER = ("twin-reach", "twin-pick-cube", "twin-peg-insert", "twin-cube-relocate", "twin-cube-relocate-back")
_BUILTIN_CACHE: dict[str, TaskFile] = {}


def builtin(name: str) -> TaskFile:
    """The built-in task file `name` (cached)."""
    if name not in _BUILTIN_CACHE:
        _BUILTIN_CACHE[name] = load_task_file(TASK_FILES_DIR / f"{name}.toml")
    return _BUILTIN_CACHE[name]


def toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)  # a TOML basic string is a JSON string for everything a task file holds
    if isinstance(v, list | tuple):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    raise ConfigError(f"cannot write {v!r} ({type(v).__name__}) to a task file")


def dump_task_file(sections: Mapping[str, Mapping[str, Any]], comments: Mapping[str, str] | None = None) -> str:
    """`sections` as TOML text (key = value lines under [section] headers; `comments` maps a section or
    "section.key" to a comment line written above it)."""
    notes = dict(comments or {})
    lines: list[str] = []

    def table(header: str, body: Mapping[str, Any]) -> None:
        if notes.get(header):
            lines.extend(f"# {c}" for c in notes[header].splitlines())
        lines.append(f"[{header}]")
        nested = []
        for k, v in body.items():
            if isinstance(v, Mapping):
                nested.append((f"{header}.{k}", v))
                continue
            if notes.get(f"{header}.{k}"):
                lines.extend(f"# {c}" for c in notes[f"{header}.{k}"].splitlines())
            lines.append(f"{k} = {toml_value(v)}")
        lines.append("")
        for h, b in nested:
            table(h, b)

    for section, body in sections.items():
        if section == "cameras":
            for name, cam in body.items():
                table(f"cameras.{name}", cam)
        else:
            table(section, body)
    return "\n".join(lines)
