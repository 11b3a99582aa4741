"""Configuration of the ROS 2 bridge (pure: no rclpy): which controller interface `Ros2Robot` talks to (topic and
parameter names, rates, frames, gripper and error-recovery paths) and which image topics `Ros2Cameras` reads.

Two controller profiles (`PROFILES`, `Ros2RobotConfig.for_profile`):

- crisp (default): utiasDSL crisp_controllers' `cartesian_impedance_controller`. Targets on `target_pose`,
  streamed at 50 Hz without interpolation (CRISP clips the pose error itself); state on `current_pose`,
  `joint_states`, `current_twist`, franka_ros2's external wrench; gains as the rcl_interfaces parameters
  `task.k_pos_x` .. `task.d_rot_z`, `task.error_clip.*`, `nullspace.stiffness`; `target_joint` for resets.
- fzi: FZI's `cartesian_compliance_controller`. Targets on `target_frame` at 100 Hz, each 10 Hz policy target
  interpolated over 0.1 s (it wants smooth targets); wrench from `ft_sensor_wrench` (TCP frame); gains
  `stiffness.trans_x` .. `stiffness.rot_z`; no joint target (resets move in Cartesian space).

Every topic name is a field: relative names resolve in the controller's namespace (`namespace`), absolute names
(leading '/') are used as they are. A topic set to "" is not used (e.g. no `twist_topic`: the twist is estimated
from successive poses; no `joint_target_topic`: `reset_joints` moves in Cartesian space only).

Gripper paths (`gripper`): 'franka' = franka_ros2's franka_gripper Move/Grasp actions (needs `franka_msgs`, only in
a full ROS install); 'topic' = standard messages only (std_msgs/Float64 width command, sensor_msgs/JointState
finger positions); 'auto' = franka when franka_msgs imports, else topic; 'none'. Error recovery
(`error_recovery`): 'franka' = franka_ros2's ErrorRecovery action; 'trigger' = a std_srvs/Trigger service;
'auto' = franka when importable, else trigger when `recovery_service` is set, else none. `Ros2Robot` says at
start-up which paths are in use.

Usage::

    cfg = Ros2RobotConfig()                                   # CRISP, namespace ''
    cfg = Ros2RobotConfig.for_profile("fzi", namespace="/arm")
    cfg = Ros2RobotConfig().replace(current_pose_topic="/franka/current_pose", gripper="topic")
    cams = Ros2CamerasConfig.from_specs(["front=/cam_front/color/image_raw", "wrist"], image_size=128)
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from robot_rl.config import Config, require
from robot_rl.errors import ConfigError
from robot_rl.reward_source import POLICY_CAMERAS

PROFILES = ("crisp", "fzi")
GRIPPER_PATHS = ("auto", "franka", "topic", "none")
RECOVERY_PATHS = ("auto", "franka", "trigger", "none")
FR3_JOINT_NAMES = tuple(f"fr3_joint{i}" for i in range(1, 8))
"""franka_ros2's joint names for an FR3 (a Panda under franka_ros2 uses panda_joint1..7)."""


@dataclasses.dataclass(frozen=True)
class Ros2RobotConfig(Config):
    """How `Ros2Robot` reaches a running Cartesian impedance controller (defaults: CRISP's interface)."""

    profile: str = "crisp"
    """Controller family: 'crisp' or 'fzi' (decides the gain-parameter names; see `for_profile` for topics)."""
    namespace: str = ""
    """Prefix for relative topic names and the controller node ('' = the root namespace)."""
    node_name: str = "robot_rl_bridge"
    """Name of our own ROS node."""
    controller_node: str = "cartesian_impedance_controller"
    """The controller's node: gains go to its `set_parameters_atomically` service."""
    target_pose_topic: str = "target_pose"
    """geometry_msgs/PoseStamped target we publish (CRISP: target_pose; FZI: target_frame)."""
    current_pose_topic: str = "current_pose"
    """geometry_msgs/PoseStamped TCP pose in the base frame (required)."""
    joint_states_topic: str = "joint_states"
    """sensor_msgs/JointState of the arm (required; picked by `joint_names`)."""
    twist_topic: str = "current_twist"
    """geometry_msgs/TwistStamped TCP twist in the base frame; '' = estimated from successive poses."""
    wrench_topic: str = "franka_robot_state_broadcaster/external_wrench_in_base_frame"
    """geometry_msgs/WrenchStamped external wrench; '' = reported as zero."""
    wrench_frame: str = "base"
    """Frame of `wrench_topic`: 'base' (franka_ros2's *_in_base_frame) or 'ee' (already in the TCP frame)."""
    joint_target_topic: str = "target_joint"
    """sensor_msgs/JointState nullspace / joint target (CRISP); '' = not published."""
    joint_names: tuple[str, ...] = FR3_JOINT_NAMES
    """The 7 arm joints, in order, as named in `joint_states_topic`."""
    base_frame: str = "base"
    """header.frame_id of the targets we publish."""
    stream_hz: float = 50.0
    """Rate at which the current target is (re-)published (CRISP's client: 50 Hz; FZI: ~100 Hz)."""
    interpolate_s: float = 0.0
    """> 0: each new target is reached by interpolating from the previous one over this long (FZI: 0.1 s, one
    policy period); 0: the new target is streamed at once."""
    max_state_age_s: float = 0.5
    """State older than this (by arrival) is stale: state().error says so and commands are refused."""
    connect_timeout_s: float = 10.0
    """How long start-up waits for the first pose and joint states (discovery takes 0.4-4 s)."""
    service_timeout_s: float = 3.0
    """Deadline of one parameter / recovery service call."""
    reset_speed_m_per_s: float = 0.15
    """Speed of the interpolated Cartesian move of `reset_joints`."""
    reset_speed_rad_per_s: float = 0.6
    """Angular speed of that move."""
    reset_timeout_s: float = 15.0
    """`reset_joints` gives up (RobotTimeoutError) when the TCP is not within 1 cm / 0.05 rad by then."""
    gripper: str = "auto"
    """'auto', 'franka' (franka_msgs actions), 'topic' (standard messages) or 'none' (module docstring)."""
    gripper_command_topic: str = "gripper/command"
    """Topic path: std_msgs/Float64 commanded finger distance (m)."""
    gripper_state_topic: str = "gripper/joint_states"
    """Topic path: sensor_msgs/JointState of the fingers; width = sum of their positions."""
    franka_gripper_ns: str = "auto"
    """franka path: namespace of franka_gripper's `move` / `grasp` actions and `joint_states`; 'auto': franka_ros2's
    node name, ARM_gripper after the joint names' arm (fr3_joint* -> /fr3_gripper, panda_joint* -> /panda_gripper),
    else /franka_gripper (`franka_gripper_namespace`)."""
    gripper_max_width_m: float = 0.08
    """Fully open finger distance."""
    grasp_force_n: float = 20.0
    """franka path: grasp force."""
    gripper_speed_m_per_s: float = 0.1
    """franka path: finger speed."""
    error_recovery: str = "auto"
    """'auto', 'franka' (ErrorRecovery action), 'trigger' (std_srvs/Trigger) or 'none'."""
    franka_recovery_action: str = "/action_server/error_recovery"
    """franka path: franka_ros2's error-recovery action."""
    recovery_service: str = ""
    """trigger path: a std_srvs/Trigger service that clears the controller's error ('' = none)."""
    objects_topic: str = ""
    """Twin only: std_msgs/Float64MultiArray of privileged object state (`objects_to_msg`); '' on hardware."""
    scene_seed_parameter: str = ""
    """Twin only: integer parameter of `controller_node` whose setting re-randomises the scene; '' on hardware
    (reset_scene is then a no-op)."""

    def validate(self) -> None:
        require(self.profile in PROFILES, "profile", self.profile, f"must be one of {list(PROFILES)}")
        require(self.gripper in GRIPPER_PATHS, "gripper", self.gripper, f"must be one of {list(GRIPPER_PATHS)}")
        require(self.error_recovery in RECOVERY_PATHS, "error_recovery", self.error_recovery,
                f"must be one of {list(RECOVERY_PATHS)}")
        require(self.wrench_frame in ("base", "ee"), "wrench_frame", self.wrench_frame, "must be 'base' or 'ee'")
        for name in ("current_pose_topic", "joint_states_topic", "target_pose_topic", "controller_node",
                     "node_name"):
            require(isinstance(getattr(self, name), str) and bool(getattr(self, name)), name, getattr(self, name),
                    "must be a non-empty name")
        require(len(self.joint_names) == 7 and len(set(self.joint_names)) == 7, "joint_names", self.joint_names,
                "must be 7 distinct joint names")
        for name in ("stream_hz", "max_state_age_s", "connect_timeout_s", "service_timeout_s",
                     "reset_speed_m_per_s", "reset_speed_rad_per_s", "reset_timeout_s", "gripper_max_width_m",
                     "gripper_speed_m_per_s"):
            v = getattr(self, name)
            require(isinstance(v, int | float) and math.isfinite(v) and v > 0, name, v, "must be finite and > 0")
        require(math.isfinite(self.interpolate_s) and self.interpolate_s >= 0, "interpolate_s", self.interpolate_s,
                "must be finite and >= 0")
        require(math.isfinite(self.grasp_force_n) and self.grasp_force_n >= 0, "grasp_force_n", self.grasp_force_n,
                "must be finite and >= 0")

    @classmethod
    def for_profile(cls, profile: str, **changes: Any) -> Ros2RobotConfig:
        """The defaults of a controller profile ('crisp' or 'fzi'), with `changes` applied on top."""
        if profile not in PROFILES:
            raise ConfigError(f"ROS 2 controller profile {profile!r} is unknown; known: {list(PROFILES)}")
        base: dict[str, Any] = {"profile": profile}
        if profile == "fzi":
            base.update(controller_node="cartesian_compliance_controller", target_pose_topic="target_frame",
                        twist_topic="", joint_target_topic="", wrench_topic="ft_sensor_wrench", wrench_frame="ee",
                        stream_hz=100.0, interpolate_s=0.1)
        base.update(changes)
        return cls(**base)

    @classmethod
    def for_twin(cls, profile: str = "crisp", **changes: Any) -> Ros2RobotConfig:
        """The profile's defaults plus what `robot-rl ros2-twin` offers beyond hardware: privileged objects, scene
        resets, the topic gripper and a Trigger error-recovery service."""
        twin: dict[str, Any] = {"objects_topic": TWIN_OBJECTS_TOPIC, "scene_seed_parameter": TWIN_SEED_PARAMETER,
                                "gripper": "topic", "error_recovery": "trigger",
                                "recovery_service": TWIN_RECOVERY_SERVICE}
        twin.update(changes)
        return cls.for_profile(profile, **twin)

    @property
    def franka_gripper_namespace(self) -> str:
        """The franka path's action / state namespace (`franka_gripper_ns`, 'auto' resolved), without a trailing /."""
        if self.franka_gripper_ns != "auto":
            return self.franka_gripper_ns.rstrip("/")
        from controllers.arms import arm_for_joint_names

        arm = arm_for_joint_names(self.joint_names)
        return f"/{arm}_gripper" if arm else "/franka_gripper"

    def topic(self, name: str) -> str:
        """`name` resolved against `namespace` ('' stays '')."""
        return resolve_name(self.namespace, name)

    @property
    def controller_fqn(self) -> str:
        """Fully qualified name of the controller node (for its parameter services)."""
        return resolve_name(self.namespace, self.controller_node)


TWIN_OBJECTS_TOPIC = "twin/objects"
TWIN_SEED_PARAMETER = "scene_seed"
TWIN_RECOVERY_SERVICE = "twin/clear_errors"


def resolve_name(namespace: str, name: str) -> str:
    """A topic / node / service name in `namespace`: absolute names ('/x') stay, relative ones get the prefix;
    '' stays '' (an unused topic)."""
    if not name or name.startswith("/"):
        return name
    ns = namespace.strip("/")
    return f"/{ns}/{name}" if ns else f"/{name}"


@dataclasses.dataclass(frozen=True)
class Ros2CamerasConfig(Config):
    """Cameras from sensor_msgs/Image topics (`Ros2Cameras`): newest frame only, cropped and resized to
    `image_size` as the franky server's cameras are (envs.hardware.cameras.crop_resize)."""

    names: tuple[str, ...] = POLICY_CAMERAS
    """Camera names, in observation order."""
    topics: tuple[str, ...] = ("camera/front/image_raw", "camera/wrist/image_raw")
    """One sensor_msgs/Image topic per name (relative names resolve in `namespace`)."""
    namespace: str = ""
    """Prefix for relative topics."""
    image_size: int = 128
    """Frames are cropped (`crops`) and resized by area averaging to this size; 0 = as sent (cropped)."""
    crops: tuple[tuple[int, int, int, int] | None, ...] = ()
    """Per name: the crop (x, y, width, height in pixels) of the frames before the resize, None = the centre
    square (a task file's cameras.NAME.crop_xywh); () = None for every camera."""
    frame_sizes: tuple[tuple[int, int] | None, ...] = ()
    """Per name: the (width, height) the topic must send (a task file's cameras.NAME.width / height; another size
    is an error naming the camera), 0 = either, None = any; () = None for every camera."""
    sources: tuple[str, ...] = ()
    """Per name: where its settings come from, named in errors (e.g. 'task file lab.toml, cameras.front'); () =
    none."""
    max_frame_age_s: float = 1.0
    """read() raises RobotTimeoutError when a camera's newest frame is older than this (a stalled camera)."""
    connect_timeout_s: float = 10.0
    """How long start-up waits for a first frame from every camera."""
    node_name: str = "robot_rl_cameras"
    """Name of the subscribing node."""

    def validate(self) -> None:
        require(len(self.names) > 0 and len(set(self.names)) == len(self.names), "names", self.names,
                "must be distinct camera names")
        require(len(self.topics) == len(self.names) and all(self.topics), "topics", self.topics,
                "must give one non-empty topic per camera name")
        require(isinstance(self.image_size, int) and 0 <= self.image_size <= 4096, "image_size", self.image_size,
                "must be an int in [0, 4096]")
        for name in ("crops", "frame_sizes", "sources"):
            v = getattr(self, name)
            require(len(v) in (0, len(self.names)), name, v, "must be empty or give one entry per camera name")
        for crop in self.crops:
            require(crop is None or (len(crop) == 4 and min(crop) >= 0 and crop[2] > 0 and crop[3] > 0), "crops",
                    self.crops, "must be (x, y, width, height) with x, y >= 0 and width, height > 0, or None")
        for size in self.frame_sizes:
            require(size is None or (len(size) == 2 and min(size) >= 0), "frame_sizes", self.frame_sizes,
                    "must be (width, height) >= 0 (0: either), or None")
        for name in ("max_frame_age_s", "connect_timeout_s"):
            v = getattr(self, name)
            require(math.isfinite(v) and v > 0, name, v, "must be finite and > 0")

    @classmethod
    def from_specs(cls, specs: list[str] | tuple[str, ...], **changes: Any) -> Ros2CamerasConfig:
        """From 'NAME' (topic camera/NAME/image_raw) or 'NAME=TOPIC' strings; ConfigError names a bad one."""
        names, topics = [], []
        for spec in specs:
            name, sep, topic = spec.partition("=")
            name, topic = name.strip(), topic.strip()
            if not name or (sep and not topic):
                raise ConfigError(f"camera spec {spec!r}: expected NAME or NAME=TOPIC")
            names.append(name)
            topics.append(topic if sep else f"camera/{name}/image_raw")
        return cls(names=tuple(names), topics=tuple(topics), **changes)

    def topic(self, i: int) -> str:
        return resolve_name(self.namespace, self.topics[i])

    def crop(self, i: int) -> tuple[int, int, int, int] | None:
        return self.crops[i] if self.crops else None

    def frame_size(self, i: int) -> tuple[int, int] | None:
        return self.frame_sizes[i] if self.frame_sizes else None

    def describe(self, i: int) -> str:
        """'NAME (TOPIC)', with the camera's source when it has one: how errors name a camera."""
        src = f"; {self.sources[i]}" if self.sources and self.sources[i] else ""
        return f"{self.names[i]} ({self.topic(i)}{src})"
