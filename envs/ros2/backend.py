"""The `ros2` backend of the robot server (`robot-rl robot-server --backend ros2`): a `Ros2Robot` and, unless
cameras are off, `Ros2Cameras` from image topics. `envs.robot_server.backends.make_backend` calls
`make_ros2_backend` with the server's options.

Cameras (`cameras_config`): a task file's `[cameras.NAME]` tables (`file_cameras`) give each camera its image topic
(`topic`; kind "ros2": default camera/NAME/image_raw), its crop (crop_xywh) and the frame size its topic must send
(width / height); the flags win: `--cameras` picks the names (default: the file's cameras, else front,wrist) and
`--ros-camera NAME=TOPIC` the topic of NAME (the file's crop and size still apply to NAME). A camera the server is
to serve whose file table names no topic (a realsense serial, an opencv device: cameras the franky server opens
itself) is a ConfigError naming the file and the field, unless --ros-camera gives its topic.

Usage::

    options = Ros2BackendOptions(profile="crisp", twin=True, settings=("stream_hz=100",))
    robot, cameras, info = make_ros2_backend("twin-reach", 128, ("front",), True, options)
    apply_settings(Ros2RobotConfig(), ["gripper=topic", "joint_names=j1,j2,j3,j4,j5,j6,j7"])
    options = Ros2BackendOptions(file_cameras=file_cameras(load_task_file("configs/lab.toml")))
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from envs.robot import Cameras, Robot
from envs.ros2.config import PROFILES, Ros2CamerasConfig, Ros2RobotConfig
from robot_rl.config import Config, require
from robot_rl.errors import ConfigError


@dataclasses.dataclass(frozen=True)
class FileCamera:
    """One `[cameras.NAME]` table of a task file as the ros2 backend reads it."""

    name: str
    topic: str
    """Its sensor_msgs/Image topic ('' = the table names none: a realsense / opencv camera without `topic`)."""
    crop_xywh: tuple[int, int, int, int] | None = None
    """Crop (x, y, width, height in pixels) before the resize; None = the centre square."""
    frame_wh: tuple[int, int] | None = None
    """(width, height) the topic must send, 0 = either (None: the table gives neither)."""
    describe: str = ""
    """What the table is, for errors: e.g. 'realsense camera (serial 123456789012)'."""
    source: str = ""
    """Where the table is written: 'task file PATH'."""


def file_cameras(tf: Any) -> tuple[FileCamera, ...]:
    """A task file's (robot_rl.task_file.TaskFile) `[cameras.NAME]` tables, inherited ones included, in file order."""
    out = []
    for name, cam in tf.sections.get("cameras", {}).items():
        kind = str(cam["kind"])
        topic = str(cam.get("topic", f"camera/{name}/image_raw" if kind == "ros2" else "")).strip()
        wh = (int(cam.get("width", 0)), int(cam.get("height", 0))) if "width" in cam or "height" in cam else None
        ident = {"realsense": f" (serial {cam.get('serial')})", "opencv": f" (device {cam.get('device')})"}
        out.append(FileCamera(name=str(name), topic=topic, crop_xywh=cam.get("crop_xywh"), frame_wh=wh,
                              describe=f"{kind} camera{ident.get(kind, '')}",
                              source=f"task file {tf.owner('cameras', name).path}"))
    return tuple(out)


@dataclasses.dataclass(frozen=True)
class Ros2BackendOptions(Config):
    """What `robot-rl robot-server --backend ros2` passes to the backend (its --ros-* flags)."""

    profile: str = "crisp"
    """Controller profile: 'crisp' or 'fzi'."""
    namespace: str = ""
    """ROS namespace of the controller's topics (and of relative camera topics)."""
    twin: bool = False
    """Talk to `robot-rl ros2-twin`: also use its objects topic, scene-seed parameter and clear_errors service."""
    camera_topics: tuple[str, ...] = ()
    """NAME=TOPIC per camera whose topic is not camera/NAME/image_raw."""
    settings: tuple[str, ...] = ()
    """FIELD=VALUE overrides of any Ros2RobotConfig field."""
    camera_timeout_s: float = 10.0
    """How long start-up waits for the first image of every camera."""
    file_cameras: tuple[FileCamera, ...] = ()
    """The task file's cameras (`file_cameras`): topics, crops and frame sizes, below the flags."""

    def validate(self) -> None:
        require(self.profile in PROFILES, "profile", self.profile, f"must be one of {list(PROFILES)}")


def apply_settings(config: Ros2RobotConfig, settings: Sequence[str]) -> Ros2RobotConfig:
    """`config` with FIELD=VALUE strings applied (values parsed by the field's type; tuples comma-separated);
    ConfigError names an unknown field or a bad value."""
    fields = {f.name: f for f in dataclasses.fields(config)}
    changes: dict[str, Any] = {}
    for item in settings:
        name, sep, raw = item.partition("=")
        name = name.strip()
        if not sep or name not in fields:
            raise ConfigError(f"--ros-set {item!r}: expected FIELD=VALUE with FIELD one of {sorted(fields)}")
        current = getattr(config, name)
        try:
            if isinstance(current, bool):
                if raw.lower() not in ("true", "false", "1", "0"):
                    raise ValueError("expected true or false")
                value: Any = raw.lower() in ("true", "1")
            elif isinstance(current, int | float):
                value = type(current)(float(raw)) if isinstance(current, float) else int(raw)
            elif isinstance(current, tuple):
                value = tuple(s.strip() for s in raw.split(",") if s.strip())
            else:
                value = raw
        except ValueError as err:
            raise ConfigError(f"--ros-set {item!r}: bad value for {name} ({err})") from None
        changes[name] = value
    return config.replace(**changes)


def robot_config(options: Ros2BackendOptions) -> Ros2RobotConfig:
    """The Ros2RobotConfig the options describe."""
    make = Ros2RobotConfig.for_twin if options.twin else Ros2RobotConfig.for_profile
    return apply_settings(make(options.profile, namespace=options.namespace), options.settings)


def cameras_config(options: Ros2BackendOptions, camera_names: Sequence[str], image_size: int) -> Ros2CamerasConfig:
    """Ros2CamerasConfig for `camera_names`: per name the topic of `camera_topics` (--ros-camera), else the task
    file's (`file_cameras`), else camera/NAME/image_raw; the file's crop and frame size for a name it declares.
    ConfigError for a bad --ros-camera, or a file camera with no topic and no --ros-camera (module docstring)."""
    explicit = {}
    for spec in options.camera_topics:
        name, sep, topic = spec.partition("=")
        if not sep or not name.strip() or not topic.strip():
            raise ConfigError(f"--ros-camera {spec!r}: expected NAME=TOPIC")
        explicit[name.strip()] = topic.strip()
    unknown = sorted(set(explicit) - set(camera_names))
    if unknown:
        raise ConfigError(f"--ros-camera names {unknown} are not among the cameras served {list(camera_names)} "
                          f"(--cameras, else the task file's [cameras.NAME], else front,wrist)")
    in_file = {c.name: c for c in options.file_cameras}
    topics, crops, sizes, sources = [], [], [], []
    for n in camera_names:
        fc = in_file.get(n)
        if n in explicit:
            topics.append(explicit[n])
        elif fc is not None and fc.topic:
            topics.append(fc.topic)
        elif fc is not None:
            raise ConfigError(f"{fc.source}: cameras.{n}.topic is missing: the ros2 backend reads every camera from "
                              f"a sensor_msgs/Image topic, and this {fc.describe} names none. Add topic = \"...\" "
                              f"(the topic its ROS driver publishes, e.g. realsense2_camera's "
                              f"/camera/{n}/color/image_raw) or pass --ros-camera {n}=TOPIC")
        else:
            topics.append(f"camera/{n}/image_raw")
        crops.append(fc.crop_xywh if fc is not None else None)
        sizes.append(fc.frame_wh if fc is not None else None)
        sources.append(f"{fc.source}, cameras.{n}" if fc is not None else "")
    return Ros2CamerasConfig(names=tuple(camera_names), topics=tuple(topics), namespace=options.namespace,
                             image_size=int(image_size), connect_timeout_s=options.camera_timeout_s,
                             crops=tuple(crops), frame_sizes=tuple(sizes), sources=tuple(sources))


def make_ros2_backend(task_name: str, image_size: int, camera_names: Sequence[str], cameras: bool,
                      options: Ros2BackendOptions | None = None) -> tuple[Robot, Cameras | None, dict[str, Any]]:
    """(Ros2Robot, Ros2Cameras or None, info) for a task; the robot is stopped again if the cameras fail."""
    from envs.ros2.cameras import Ros2Cameras
    from envs.ros2.robot import Ros2Robot

    options = options or Ros2BackendOptions()
    rcfg = robot_config(options)
    ccfg = cameras_config(options, camera_names, image_size) if cameras else None
    robot = Ros2Robot(rcfg)
    try:
        cams = Ros2Cameras(ccfg) if ccfg is not None else None
    except BaseException:
        robot.stop()
        raise
    info = {"backend": "ros2", "task": task_name, "profile": rcfg.profile, "gripper": robot.gripper_path,
            "error_recovery": robot.recovery_path, "twin": options.twin}
    return robot, cams, info
