"""The `ros2` backend of the robot server (`robot-rl robot-server --backend ros2`): a `Ros2Robot` and, unless
cameras are off, `Ros2Cameras` from image topics. `envs.robot_server.backends.make_backend` calls
`make_ros2_backend` with the server's options.

Usage::

    options = Ros2BackendOptions(profile="crisp", twin=True, settings=("stream_hz=100",))
    robot, cameras, info = make_ros2_backend("twin-reach", 128, ("front",), True, options)
    apply_settings(Ros2RobotConfig(), ["gripper=topic", "joint_names=j1,j2,j3,j4,j5,j6,j7"])
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
    """Ros2CamerasConfig for `camera_names`: topic camera/NAME/image_raw unless `camera_topics` names another."""
    explicit = {}
    for spec in options.camera_topics:
        name, sep, topic = spec.partition("=")
        if not sep or not name.strip() or not topic.strip():
            raise ConfigError(f"--ros-camera {spec!r}: expected NAME=TOPIC")
        explicit[name.strip()] = topic.strip()
    unknown = sorted(set(explicit) - set(camera_names))
    if unknown:
        raise ConfigError(f"--ros-camera names {unknown} are not among --cameras {list(camera_names)}")
    specs = [f"{n}={explicit[n]}" if n in explicit else n for n in camera_names]
    return Ros2CamerasConfig.from_specs(specs, namespace=options.namespace, image_size=int(image_size),
                                        connect_timeout_s=options.camera_timeout_s)


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
