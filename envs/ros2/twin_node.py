"""`TwinNode`: the MuJoCo twin (envs.twin.TwinRobot) as a ROS 2 node that speaks a Cartesian impedance
controller's interface (CRISP's by default, FZI's with profile='fzi'), so a ROS setup can be checked without a
robot and `Ros2Robot` can be tested end to end over real DDS (`robot-rl ros2-twin`).

The node is named like the controller (`cartesian_impedance_controller` for CRISP) and, in its namespace:

| direction | topic / service | type | what |
|---|---|---|---|
| in | target_pose (FZI: target_frame) | geometry_msgs/PoseStamped | impedance target, base frame |
| in | gripper/command | std_msgs/Float64 | commanded finger distance (m) |
| out | current_pose | geometry_msgs/PoseStamped | TCP pose (`state_hz`) |
| out | joint_states | sensor_msgs/JointState | fr3_joint1..7: position, velocity, effort (commanded torque) |
| out | current_twist (CRISP) | geometry_msgs/TwistStamped | TCP twist, base frame |
| out | (1) | geometry_msgs/WrenchStamped | wrench the environment applies on the hand |
| out | gripper/joint_states | sensor_msgs/JointState | the two finger positions (width = their sum) |
| out | twin/objects | std_msgs/Float64MultiArray | privileged object state (one layout dim per key) |
| out | camera/NAME/image_raw (or `camera_topics`) | sensor_msgs/Image rgb8 | each camera at `camera_hz`, `frame_wh` |
| param | task.k_pos_x ... nullspace.stiffness (FZI: stiffness.*) | double | the impedance gains (set atomically) |
| param | scene_seed | int | setting it re-randomises the scene (-1: unseeded) |
| service | twin/clear_errors | std_srvs/Trigger | clears the twin's error flag |

(1) franka_robot_state_broadcaster/external_wrench_in_base_frame (base frame); FZI: ft_sensor_wrench (TCP frame).

Not implemented: CRISP's `target_joint` (the twin's nullspace posture stays at the home configuration; Ros2Robot's
reset_joints moves the TCP in Cartesian space, which the twin follows), controller switching, franka_msgs actions.

Time: physics runs in real time, paced by the wall clock: every 1 / state_hz seconds the node simulates the
physics steps that are due (at most 0.1 s worth, so a stalled process does not burst) and publishes the state.
Everything runs on the thread that spins the node (the renderer's GL context belongs to it).

Usage::

    node = TwinNode(TwinNodeConfig(task="twin-reach"))
    node.spin(stop_event)            # until stop_event is set
    node.close()
"""

from __future__ import annotations

import dataclasses
import math
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from controllers.gains import gain_profile
from envs.ros2.config import PROFILES, Ros2CamerasConfig, Ros2RobotConfig
from envs.ros2.logic import (
    IMAGE_QOS,
    TWIN_STATE_QOS,
    gain_parameters,
    gains_from_parameters,
    gripper_closed_from_width,
    image_to_fields,
    objects_to_layout,
    pose_from_xyzw,
    pose_to_xyzw,
    vector_to_base,
)
from envs.ros2.runtime import RosRuntime, qos_profile, ros_messages
from robot_rl.config import Config, require
from robot_rl.errors import ConfigError, RobotRLError
from robot_rl.reward_source import POLICY_CAMERAS


@dataclasses.dataclass(frozen=True)
class TwinNodeConfig(Config):
    """Options of `robot-rl ros2-twin`."""

    task: str = "twin-pick-cube"
    """Task or twin preset (its MuJoCo scene)."""
    profile: str = "crisp"
    """Which controller interface to speak: 'crisp' or 'fzi' (topic and parameter names of envs.ros2.config)."""
    namespace: str = ""
    """ROS namespace of the node and its topics."""
    physics_hz: float = 500.0
    """Twin physics rate."""
    state_hz: float = 100.0
    """Physics pacing and state publishing rate."""
    camera_hz: float = 15.0
    """Image publishing rate (0: no images)."""
    image_size: int = 128
    """Rendered image height and width."""
    frame_wh: tuple[int, int] | None = None
    """Rendered (width, height) instead of image_size squares (a task file's camera size: the frames a lab's
    cameras send, for the robot server to crop and resize as it will on the lab's topics)."""
    camera_names: tuple[str, ...] = POLICY_CAMERAS
    """Cameras to publish (camera/NAME/image_raw)."""
    camera_topics: tuple[str, ...] = ()
    """One image topic per camera name (relative names resolve in `namespace`); () = camera/NAME/image_raw each."""

    def validate(self) -> None:
        require(self.profile in PROFILES, "profile", self.profile, f"must be one of {list(PROFILES)}")
        for name in ("physics_hz", "state_hz"):
            v = getattr(self, name)
            require(math.isfinite(v) and v > 0, name, v, "must be finite and > 0")
        require(math.isfinite(self.camera_hz) and self.camera_hz >= 0, "camera_hz", self.camera_hz,
                "must be finite and >= 0")
        require(isinstance(self.image_size, int) and 1 <= self.image_size <= 4096, "image_size", self.image_size,
                "must be an int in [1, 4096]")
        require(self.frame_wh is None or (len(self.frame_wh) == 2 and 1 <= min(self.frame_wh)
                                          and max(self.frame_wh) <= 4096), "frame_wh", self.frame_wh,
                "must be (width, height) in [1, 4096], or None")
        require(len(self.camera_topics) in (0, len(self.camera_names)) and all(self.camera_topics), "camera_topics",
                self.camera_topics, "must be empty or give one non-empty topic per camera name")


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class TwinNode:
    """The twin behind a ROS 2 controller interface (module docstring)."""

    def __init__(self, config: TwinNodeConfig | None = None, log: Callable[[str], None] = _stderr) -> None:
        config = TwinNodeConfig() if config is None else config
        config.validate()
        self.config = config
        from envs.task_file import resolve_task
        from envs.twin import TwinRobot, TwinRobotConfig

        task = resolve_task(config.task)
        if not task.twin_task:
            raise ConfigError(f"task={config.task!r} has no MuJoCo twin scene")
        self.task_name = task.name
        self.frame_wh = config.frame_wh or (config.image_size, config.image_size)
        """(width, height) of the published frames."""
        render = config.camera_hz > 0 and bool(config.camera_names)
        self.robot = TwinRobot(TwinRobotConfig(task=task.twin_task, physics_hz=config.physics_hz,
                                               image_height=self.frame_wh[1], image_width=self.frame_wh[0],
                                               camera_names=tuple(config.camera_names) or ("front",),
                                               render=render))
        self.iface = Ros2RobotConfig.for_twin(config.profile, namespace=config.namespace)
        self._cams_cfg = Ros2CamerasConfig(names=tuple(config.camera_names),
                                           topics=config.camera_topics
                                           or tuple(f"camera/{n}/image_raw" for n in config.camera_names),
                                           namespace=config.namespace) if render else None
        try:
            self._setup(render, log)
        except BaseException:
            self.robot.stop()
            raise

    def _setup(self, render: bool, log: Callable[[str], None]) -> None:
        cfg, iface = self.config, self.iface
        geometry = ros_messages("geometry_msgs.msg")
        sensor = ros_messages("sensor_msgs.msg")
        std = ros_messages("std_msgs.msg")
        srv = ros_messages("std_srvs.srv")
        self._msgs = (geometry, sensor, std)
        self._rcl_msg = ros_messages("rcl_interfaces.msg")
        self._rt = RosRuntime(iface.controller_node, namespace=cfg.namespace, spin_in_thread=False)
        node = self._rt.node
        self._gain_values = gain_parameters(gain_profile("compliance"), iface.profile)
        for name, value in self._gain_values.items():
            node.declare_parameter(name, value)
        node.declare_parameter(iface.scene_seed_parameter, -1)
        node.add_on_set_parameters_callback(self._on_parameters)
        sq = qos_profile(TWIN_STATE_QOS)
        t = iface.topic
        self._pub_pose = node.create_publisher(geometry.PoseStamped, t(iface.current_pose_topic), sq)
        self._pub_joints = node.create_publisher(sensor.JointState, t(iface.joint_states_topic), sq)
        self._pub_twist = (node.create_publisher(geometry.TwistStamped, t(iface.twist_topic), sq)
                           if iface.twist_topic else None)
        self._pub_wrench = (node.create_publisher(geometry.WrenchStamped, t(iface.wrench_topic), sq)
                            if iface.wrench_topic else None)
        self._pub_gripper = node.create_publisher(sensor.JointState, t(iface.gripper_state_topic), sq)
        self._pub_objects = node.create_publisher(std.Float64MultiArray, t(iface.objects_topic), sq)
        # targets arrive reliable or best effort: a best-effort subscription matches both
        self._subs = [
            node.create_subscription(geometry.PoseStamped, t(iface.target_pose_topic), self._on_target,
                                     qos_profile(TWIN_STATE_QOS)),
            node.create_subscription(std.Float64, t(iface.gripper_command_topic), self._on_gripper,
                                     qos_profile(TWIN_STATE_QOS)),
        ]
        self._srv = node.create_service(srv.Trigger, t(iface.recovery_service), self._on_clear_errors)
        self._cams = self.robot.cameras() if render else None
        self._pub_images: dict[str, Any] = {}
        if self._cams is not None and self._cams_cfg is not None:
            for i, name in enumerate(self._cams_cfg.names):
                self._pub_images[name] = node.create_publisher(sensor.Image, self._cams_cfg.topic(i),
                                                               qos_profile(IMAGE_QOS))
        self._target: tuple[np.ndarray, np.ndarray] | None = None
        self._gripper_closed = 0.0
        self._dirty = False
        self._steps_done = 0
        self._t0 = time.monotonic()
        self._sim_start = self.robot.data.time
        self._timers = [node.create_timer(1.0 / cfg.state_hz, self._tick)]
        if self._cams is not None:
            self._timers.append(node.create_timer(1.0 / cfg.camera_hz, self._publish_images))
        self.published_states = 0
        self._publish_state()
        cams = (f"cameras {','.join(self._pub_images)} {self.frame_wh[0]}x{self.frame_wh[1]} at {cfg.camera_hz:g} Hz"
                if self._pub_images else "no cameras")
        log(f"ros2-twin: task {self.task_name}, {iface.profile} interface as node {iface.controller_fqn}: targets "
            f"on {t(iface.target_pose_topic)}, state on {t(iface.current_pose_topic)} at {cfg.state_hz:g} Hz, "
            f"{cams}")

    # ------------------------------------------------------------------------------------------------------
    # callbacks (the spinning thread)

    def _on_target(self, msg: Any) -> None:
        p, o = msg.pose.position, msg.pose.orientation
        try:
            self._target = pose_from_xyzw(p.x, p.y, p.z, o.x, o.y, o.z, o.w)
        except RobotRLError:
            return  # a non-finite target: ignored, the twin holds the previous one
        self._dirty = True

    def _on_gripper(self, msg: Any) -> None:
        if math.isfinite(msg.data):
            self._gripper_closed = gripper_closed_from_width(msg.data, self.iface.gripper_max_width_m)
            self._dirty = True

    def _on_clear_errors(self, request: Any, response: Any) -> Any:
        self.robot.clear_errors()
        response.success, response.message = True, "twin errors cleared"
        return response

    def _on_parameters(self, params: list[Any]) -> Any:
        result = self._rcl_msg.SetParametersResult(successful=True)
        gains: dict[str, float] = {}
        for p in params:
            if p.name == self.iface.scene_seed_parameter:
                seed = int(p.value)
                self.robot.reset_scene(None if seed < 0 else seed)
                self._target = None  # hold wherever reset_scene left the arm
                self._publish_state()
            elif p.name in self._gain_values:
                gains[p.name] = float(p.value)
        if gains:
            merged = {**self._gain_values, **gains}
            try:
                new = gains_from_parameters(merged, self.iface.profile, self.robot.controller.commanded_gains)
                self.robot.controller.set_gains(new)
            except RobotRLError as err:
                result.successful, result.reason = False, str(err)
                return result
            self._gain_values = merged
        return result

    def _tick(self) -> None:
        """Simulate the physics steps due by the wall clock (at most 0.1 s worth), then publish the state."""
        if self._dirty:
            self._dirty = False
            pos, quat = self._target if self._target is not None else (self.robot.controller.target_pos,
                                                                       self.robot.controller.target_quat)
            try:
                self.robot.command(pos, quat, self._gripper_closed)
            except RobotRLError:
                pass  # in an error state: the target is ignored until twin/clear_errors
        due = int((time.monotonic() - self._t0) * self.config.physics_hz) - self._steps_done
        max_steps = int(0.1 * self.config.physics_hz)
        if due > max_steps:  # fell behind (a stall): skip ahead instead of bursting
            self._steps_done += due - max_steps
            due = max_steps
        if due > 0:
            self.robot.wait(due / self.config.physics_hz)
            self._steps_done += due
        self._publish_state()

    def _header(self, msg: Any, frame: str) -> None:
        msg.header.stamp = self._rt.now_msg()
        msg.header.frame_id = frame

    def _publish_state(self) -> None:
        geometry, sensor, std = self._msgs
        s = self.robot.state()
        base = self.iface.base_frame
        pose = geometry.PoseStamped()
        self._header(pose, base)
        x, y, z, qx, qy, qz, qw = pose_to_xyzw(s.pos_base_ee, s.quat_base_ee)
        pose.pose.position.x, pose.pose.position.y, pose.pose.position.z = x, y, z
        pose.pose.orientation.x, pose.pose.orientation.y = qx, qy
        pose.pose.orientation.z, pose.pose.orientation.w = qz, qw
        js = sensor.JointState()
        self._header(js, base)
        js.name = list(self.iface.joint_names)
        js.position = [float(v) for v in s.q_rad]
        js.velocity = [float(v) for v in s.dq_rad_per_s]
        js.effort = [float(v) for v in s.tau_j_nm]
        self._pub_pose.publish(pose)
        self._pub_joints.publish(js)
        if self._pub_twist is not None:
            tw = geometry.TwistStamped()
            self._header(tw, base)
            v = vector_to_base(s.twist_ee_body[:3], s.quat_base_ee)
            w = vector_to_base(s.twist_ee_body[3:], s.quat_base_ee)
            tw.twist.linear.x, tw.twist.linear.y, tw.twist.linear.z = (float(a) for a in v)
            tw.twist.angular.x, tw.twist.angular.y, tw.twist.angular.z = (float(a) for a in w)
            self._pub_twist.publish(tw)
        if self._pub_wrench is not None:
            wr = geometry.WrenchStamped()
            in_base = self.iface.wrench_frame == "base"
            self._header(wr, base if in_base else "tcp")
            f = vector_to_base(s.force_ee_n, s.quat_base_ee) if in_base else s.force_ee_n
            tq = vector_to_base(s.torque_ee_nm, s.quat_base_ee) if in_base else s.torque_ee_nm
            wr.wrench.force.x, wr.wrench.force.y, wr.wrench.force.z = (float(a) for a in f)
            wr.wrench.torque.x, wr.wrench.torque.y, wr.wrench.torque.z = (float(a) for a in tq)
            self._pub_wrench.publish(wr)
        g = sensor.JointState()
        self._header(g, base)
        g.name = ["fr3_finger_joint1", "fr3_finger_joint2"]
        g.position = [s.gripper_width_m / 2, s.gripper_width_m / 2]
        self._pub_gripper.publish(g)
        labels, sizes, data = objects_to_layout(s.objects)
        obj = std.Float64MultiArray()
        obj.layout.dim = [std.MultiArrayDimension(label=lb, size=n, stride=n) for lb, n in zip(labels, sizes,
                                                                                               strict=True)]
        obj.data = data
        self._pub_objects.publish(obj)
        self.published_states += 1

    def _publish_images(self) -> None:
        if self._cams is None:
            return
        _, sensor, _ = self._msgs
        for name, img in self._cams.read().items():
            pub = self._pub_images.get(name)
            if pub is None:
                continue
            encoding, h, w, step, data = image_to_fields(img)
            msg = sensor.Image()
            self._header(msg, f"{name}_camera")
            msg.encoding, msg.height, msg.width, msg.step, msg.is_bigendian = encoding, h, w, step, 0
            msg.data = data
            pub.publish(msg)

    # ------------------------------------------------------------------------------------------------------

    def spin(self, stop: threading.Event, max_seconds: float | None = None) -> None:
        """Run (on this thread) until `stop` is set or `max_seconds` pass."""
        self._t0 = time.monotonic() - self._steps_done / self.config.physics_hz
        self._rt.spin(stop, max_seconds)

    def close(self) -> None:
        try:
            self._rt.shutdown()
        finally:
            self.robot.stop()

