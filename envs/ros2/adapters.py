"""Gripper and error-recovery adapters of `Ros2Robot`: franka_ros2's interfaces (franka_msgs actions, only in a
full ROS install) when importable, else paths that need only standard messages.

- `FrankaGripper` (needs franka_msgs): franka_gripper `grasp` when closing (width 0, epsilon 8 cm,
  `grasp_force_n`) and `move` when opening; the width comes from `<ns>/joint_states`.
- `TopicGripper` (std_msgs, sensor_msgs): std_msgs/Float64 commanded finger distance (m) on
  `gripper_command_topic`; width = the sum of the finger positions in `gripper_state_topic`.
- `FrankaRecovery` (franka_msgs): franka_ros2's `ErrorRecovery` action (`franka_recovery_action`).
- `TriggerRecovery` (std_srvs): a std_srvs/Trigger service (`recovery_service`; `robot-rl ros2-twin` has one).

`choose_gripper` / `choose_recovery` resolve 'auto' (pure functions, tested without ROS); `Ros2Robot` prints the
chosen paths at start-up.

Usage::

    path = choose_gripper(config.gripper, franka_msgs_available())    # 'franka' | 'topic' | 'none'
    gripper = make_gripper(path, runtime, config); gripper.command(1.0); gripper.width_m()
"""

from __future__ import annotations

import importlib.util
import math
import threading
import time
from typing import Any, Protocol

from envs.ros2.config import Ros2RobotConfig
from envs.ros2.logic import COMMAND_QOS, STATE_QOS, gripper_width_command
from envs.ros2.runtime import RosRuntime, qos_profile, ros_messages
from robot_rl.errors import ConfigError, RobotError, RobotTimeoutError


def franka_msgs_available() -> bool:
    """Whether franka_msgs (a full ROS install's franka_ros2) can be imported."""
    try:
        return importlib.util.find_spec("franka_msgs") is not None
    except (ImportError, ValueError):
        return False


def choose_gripper(setting: str, franka_available: bool) -> str:
    """'franka', 'topic' or 'none' for a `Ros2RobotConfig.gripper` setting; ConfigError when 'franka' is asked for
    without franka_msgs."""
    if setting == "auto":
        return "franka" if franka_available else "topic"
    if setting == "franka" and not franka_available:
        raise ConfigError("gripper='franka' needs franka_msgs (franka_ros2, a full ROS install: source its setup "
                          "file before starting robot-rl), or use gripper='topic' (standard messages only)")
    return setting


def choose_recovery(setting: str, franka_available: bool, trigger_service: str) -> str:
    """'franka', 'trigger' or 'none' for a `Ros2RobotConfig.error_recovery` setting."""
    if setting == "auto":
        if franka_available:
            return "franka"
        return "trigger" if trigger_service else "none"
    if setting == "franka" and not franka_available:
        raise ConfigError("error_recovery='franka' needs franka_msgs (franka_ros2, a full ROS install)")
    if setting == "trigger" and not trigger_service:
        raise ConfigError("error_recovery='trigger' needs recovery_service (a std_srvs/Trigger service name)")
    return setting


class Gripper(Protocol):
    """What Ros2Robot needs from a gripper path."""

    description: str

    def command(self, closed: float) -> None:
        """0 = open, 1 = closed (values between: proportional width where the path supports it)."""
        ...

    def width_m(self) -> float | None:
        """The latest measured finger distance (None before the first reading)."""
        ...

    def age_s(self) -> float:
        """Seconds since the last reading (inf: never)."""
        ...


class _WidthFromJointStates:
    """Finger distance = sum of the positions of a sensor_msgs/JointState topic."""

    def __init__(self, rt: RosRuntime, topic: str) -> None:
        sensor = ros_messages("sensor_msgs.msg")
        self._lock = threading.Lock()
        self._width: float | None = None
        self._t = -math.inf
        self._sub = rt.node.create_subscription(sensor.JointState, topic, self._on_state, qos_profile(STATE_QOS))

    def _on_state(self, msg: Any) -> None:
        if len(msg.position) == 0:
            return
        with self._lock:
            self._width = float(sum(msg.position))
            self._t = time.monotonic()

    def width_m(self) -> float | None:
        with self._lock:
            return self._width

    def age_s(self) -> float:
        with self._lock:
            return time.monotonic() - self._t


class TopicGripper(_WidthFromJointStates):
    """The standard-messages path (module docstring)."""

    def __init__(self, rt: RosRuntime, config: Ros2RobotConfig) -> None:
        super().__init__(rt, config.topic(config.gripper_state_topic))
        std = ros_messages("std_msgs.msg")
        self._msg = std.Float64
        self._max = config.gripper_max_width_m
        self._pub = rt.node.create_publisher(std.Float64, config.topic(config.gripper_command_topic),
                                             qos_profile(COMMAND_QOS))
        self.description = (f"topic gripper (std_msgs/Float64 width on {config.topic(config.gripper_command_topic)}, "
                            f"state {config.topic(config.gripper_state_topic)})")

    def command(self, closed: float) -> None:
        self._pub.publish(self._msg(data=gripper_width_command(closed, self._max)))


class FrankaGripper(_WidthFromJointStates):
    """franka_ros2's franka_gripper actions; a goal is sent only when the binary open/closed command changes."""

    def __init__(self, rt: RosRuntime, config: Ros2RobotConfig) -> None:
        ns = config.franka_gripper_namespace
        super().__init__(rt, f"{ns}/joint_states")
        from rclpy.action import ActionClient

        actions = ros_messages("franka_msgs.action")
        self._actions = actions
        self._move: Any = ActionClient(rt.node, actions.Move, f"{ns}/move")
        self._grasp: Any = ActionClient(rt.node, actions.Grasp, f"{ns}/grasp")
        self._config = config
        self._closed: bool | None = None
        self.description = f"franka_ros2 gripper actions ({ns}/move, {ns}/grasp; franka_msgs)"

    def command(self, closed: float) -> None:
        want = float(closed) >= 0.5
        if want == self._closed:
            return
        cfg = self._config
        if want:
            goal = self._actions.Grasp.Goal()
            goal.width = 0.0
            goal.speed = cfg.gripper_speed_m_per_s
            goal.force = cfg.grasp_force_n
            goal.epsilon.inner = cfg.gripper_max_width_m
            goal.epsilon.outer = cfg.gripper_max_width_m
            client = self._grasp
        else:
            goal = self._actions.Move.Goal()
            goal.width = cfg.gripper_max_width_m
            goal.speed = cfg.gripper_speed_m_per_s
            client = self._move
        if not client.server_is_ready():
            raise RobotError(f"franka gripper action server {client._action_name} is not available")
        client.send_goal_async(goal)  # fire and forget: the width reading reports progress
        self._closed = want


class NoGripper:
    description = "no gripper"

    def command(self, closed: float) -> None:
        return None

    def width_m(self) -> float | None:
        return 0.0

    def age_s(self) -> float:
        return 0.0


def make_gripper(path: str, rt: RosRuntime, config: Ros2RobotConfig) -> Gripper:
    if path == "franka":
        return FrankaGripper(rt, config)
    if path == "topic":
        return TopicGripper(rt, config)
    return NoGripper()


class Recovery(Protocol):
    description: str

    def recover(self, timeout_s: float) -> None:
        """Clear the controller's error state; RobotError / RobotTimeoutError when it fails."""
        ...


class TriggerRecovery:
    def __init__(self, rt: RosRuntime, service: str) -> None:
        srv = ros_messages("std_srvs.srv")
        self._rt = rt
        self._request = srv.Trigger.Request
        self._client: Any = rt.node.create_client(srv.Trigger, service)
        self.description = f"std_srvs/Trigger service {service}"

    def recover(self, timeout_s: float) -> None:
        result = self._rt.call(self._client, self._request(), timeout_s, "error recovery")
        if not result.success:
            raise RobotError(f"error recovery failed: {result.message}")


class FrankaRecovery:
    def __init__(self, rt: RosRuntime, action: str) -> None:
        from rclpy.action import ActionClient

        actions = ros_messages("franka_msgs.action")
        self._goal = actions.ErrorRecovery.Goal
        self._client: Any = ActionClient(rt.node, actions.ErrorRecovery, action)
        self.description = f"franka_ros2 ErrorRecovery action {action} (franka_msgs)"

    def recover(self, timeout_s: float) -> None:
        if not self._client.wait_for_server(timeout_sec=timeout_s):
            raise RobotTimeoutError(f"error recovery: action server {self._client._action_name} is not available")
        sent = threading.Event()
        future = self._client.send_goal_async(self._goal())
        future.add_done_callback(lambda _f: sent.set())
        if not sent.wait(timeout_s):
            raise RobotTimeoutError("error recovery: the goal was not accepted in time")
        handle: Any = future.result()
        if handle is None or not handle.accepted:
            raise RobotError("error recovery: the goal was rejected")
        done = threading.Event()
        result_future = handle.get_result_async()
        result_future.add_done_callback(lambda _f: done.set())
        if not done.wait(timeout_s):
            raise RobotTimeoutError(f"error recovery did not finish within {timeout_s:g} s")


class NoRecovery:
    description = "none (clear_errors only clears robot-rl's own error flag)"

    def recover(self, timeout_s: float) -> None:
        return None


def make_recovery(path: str, rt: RosRuntime, config: Ros2RobotConfig) -> Recovery:
    if path == "franka":
        return FrankaRecovery(rt, config.franka_recovery_action)
    if path == "trigger":
        return TriggerRecovery(rt, config.topic(config.recovery_service))
    return NoRecovery()
