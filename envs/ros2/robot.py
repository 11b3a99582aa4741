"""`Ros2Robot`: the Robot seam (envs.robot) over ROS 2, bridging to a running ros2_control Cartesian impedance
controller: CRISP's topic / parameter interface by default, FZI's cartesian_compliance_controller as a second
profile (envs.ros2.config). A thin rclpy adapter over envs.ros2.logic.

What it does with the controller:
- state(): the newest `current_pose` (PoseStamped), `joint_states` (the 7 arm joints by name), `current_twist`
  (or a finite difference of poses), the external wrench (rotated into the TCP frame), the gripper width, and on
  the twin the privileged objects. `error` is set when a required stream is older than `max_state_age_s`.
- command(): the new target is published at once from the caller's thread (a guard's hold goes out with its
  check) and then re-published at `stream_hz` from the node's own thread (interpolated over `interpolate_s` for
  FZI); the gripper command goes to the gripper adapter. Refused
  (RobotError) while the state is stale or after stop().
- wait(s): sleeps (the controller runs in real time; the stream keeps going).
- set_gains(profile): the profile's gains as controller parameters, one `set_parameters_atomically` call.
- reset_joints(q): publishes q on `joint_target_topic` (CRISP's nullspace / joint target) and moves the target in
  a straight Cartesian line to the TCP pose of q (Panda forward kinematics) at `reset_speed_*`, then waits until
  the TCP is within 1 cm / 0.05 rad (RobotTimeoutError after `reset_timeout_s`). No controller switching:
  that needs controller_manager_msgs, which only a full ROS install has.
- reset_scene(seed): a no-op on hardware; on `robot-rl ros2-twin` it sets the twin's `scene_seed` parameter.
- clear_errors(): the error-recovery adapter (franka_ros2's action, a Trigger service, or none), then holds the
  measured pose.
- stop(): holds the measured pose, then destroys the node.

Start-up waits up to `connect_timeout_s` for the first pose and joint states (RobotTimeoutError naming what is
missing, with the ROS_DOMAIN_ID in use) and prints one line saying which controller, gripper path and recovery
path are in use.

Usage::

    robot = Ros2Robot(Ros2RobotConfig())                 # CRISP topics in the root namespace
    robot.set_gains("compliance")
    s = robot.state(); robot.command(s.pos_base_ee + [0, 0, 0.01], s.quat_base_ee, 0.0); robot.wait(0.1)
    robot.stop()
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from controllers.gains import gain_profile
from controllers.kinematics import panda_fk
from controllers.transforms import mat_to_quat
from envs.robot import RobotState, StateSample, check_command, check_duration, check_joint_target
from envs.ros2.adapters import (
    choose_gripper,
    choose_recovery,
    franka_msgs_available,
    make_gripper,
    make_recovery,
)
from envs.ros2.config import Ros2RobotConfig
from envs.ros2.logic import (
    COMMAND_QOS,
    STATE_QOS,
    StreamWatch,
    TargetInterpolator,
    move_duration_s,
    objects_from_layout,
    pick_joints,
    pose_close,
    pose_from_xyzw,
    pose_to_xyzw,
    stamp_to_s,
    state_from_parts,
    twist_from_poses,
    vector_to_ee,
)
from envs.ros2.runtime import RosRuntime, qos_profile, ros_messages
from robot_rl.errors import RobotError, RobotTimeoutError, SafetyError


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class Ros2Robot:
    """A compliant arm behind a ROS 2 Cartesian impedance controller (implements envs.robot.Robot)."""

    def __init__(self, config: Ros2RobotConfig | None = None, log: Callable[[str], None] = _stderr) -> None:
        config = Ros2RobotConfig() if config is None else config
        config.validate()
        self._config = config
        self._log = log
        from controllers.arms import arm_for_joint_names

        self.arm = arm_for_joint_names(config.joint_names) or "any"
        """The arm model (controllers.arms) the joint names say (fr3_joint*: 'fr3', panda_joint*: 'panda'),
        'any' otherwise: the server's guard enforces its joint limits."""
        geometry = ros_messages("geometry_msgs.msg")
        sensor = ros_messages("sensor_msgs.msg")
        std = ros_messages("std_msgs.msg")
        params = ros_messages("rcl_interfaces.srv")
        self._rcl_msg = ros_messages("rcl_interfaces.msg")
        self._PoseStamped = geometry.PoseStamped
        self._JointState = sensor.JointState
        self._SetAtomically = params.SetParametersAtomically
        self._rt = RosRuntime(config.node_name)
        try:
            self._setup(geometry, sensor, std)
        except BaseException:
            self._rt.shutdown()
            raise

    # ------------------------------------------------------------------------------------------------------
    # set-up

    def _setup(self, geometry: Any, sensor: Any, std: Any) -> None:
        cfg, node = self._config, self._rt.node
        self._lock = threading.Lock()
        self._pose: tuple[np.ndarray, np.ndarray, float] | None = None
        self._prev_pose: tuple[np.ndarray, np.ndarray, float] | None = None
        self._joints: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self._twist_base: np.ndarray | None = None
        self._wrench: np.ndarray | None = None
        self._objects: dict[str, np.ndarray] = {}
        self._error = ""
        self._stopped = False
        self._listeners: list[Callable[[StateSample], None]] = []
        required = ["current_pose", "joint_states"]
        if cfg.twist_topic:
            required.append("twist")
        if cfg.wrench_topic:
            required.append("wrench")
        if cfg.objects_topic:
            required.append("objects")
        self._watch = StreamWatch(cfg.max_state_age_s, required)
        sq = qos_profile(STATE_QOS)
        self._subs = [
            node.create_subscription(geometry.PoseStamped, cfg.topic(cfg.current_pose_topic), self._on_pose, sq),
            node.create_subscription(sensor.JointState, cfg.topic(cfg.joint_states_topic), self._on_joints, sq),
        ]
        if cfg.twist_topic:
            self._subs.append(node.create_subscription(geometry.TwistStamped, cfg.topic(cfg.twist_topic),
                                                       self._on_twist, sq))
        if cfg.wrench_topic:
            self._subs.append(node.create_subscription(geometry.WrenchStamped, cfg.topic(cfg.wrench_topic),
                                                       self._on_wrench, sq))
        if cfg.objects_topic:
            self._subs.append(node.create_subscription(std.Float64MultiArray, cfg.topic(cfg.objects_topic),
                                                       self._on_objects, sq))
        cq = qos_profile(COMMAND_QOS)
        self._target_pub = node.create_publisher(geometry.PoseStamped, cfg.topic(cfg.target_pose_topic), cq)
        self._joint_pub = (node.create_publisher(sensor.JointState, cfg.topic(cfg.joint_target_topic), cq)
                           if cfg.joint_target_topic else None)
        self._params: Any = node.create_client(self._SetAtomically, f"{cfg.controller_fqn}/set_parameters_atomically")
        self._interp = TargetInterpolator(cfg.interpolate_s)
        franka = franka_msgs_available()
        self._gripper_path = choose_gripper(cfg.gripper, franka)
        self._recovery_path = choose_recovery(cfg.error_recovery, franka, cfg.recovery_service)
        self._gripper = make_gripper(self._gripper_path, self._rt, cfg)
        self._recovery = make_recovery(self._recovery_path, self._rt, cfg)
        self._gripper_cmd = 0.0
        self._wait_for_first_state()
        s = self.state()
        with self._lock:
            self._interp.hold(s.pos_base_ee, s.quat_base_ee)
        self._timer = node.create_timer(1.0 / cfg.stream_hz, self._publish_target)
        interp = f", interpolated over {cfg.interpolate_s:g} s" if cfg.interpolate_s > 0 else ""
        why = " (franka_msgs not importable)" if self._gripper_path == "topic" and cfg.gripper == "auto" else ""
        self._log(f"ros2: {cfg.profile} controller {cfg.controller_fqn}: targets on {cfg.topic(cfg.target_pose_topic)} "
                  f"at {cfg.stream_hz:g} Hz{interp}; gripper: {self._gripper.description}{why}; "
                  f"error recovery: {self._recovery.description}")

    def _wait_for_first_state(self) -> None:
        cfg = self._config
        t_end = time.monotonic() + cfg.connect_timeout_s
        while time.monotonic() < t_end:
            now = time.monotonic()
            if not self._watch.stale(now) and (self._gripper_path == "none" or self._gripper.width_m() is not None):
                return
            time.sleep(0.02)
        now = time.monotonic()
        missing = self._watch.stale(now)
        if self._gripper_path != "none" and self._gripper.width_m() is None:
            where = (f"{cfg.franka_gripper_namespace}/joint_states" if self._gripper_path == "franka"
                     else cfg.topic(cfg.gripper_state_topic))
            missing.append(f"gripper state on {where} (no gripper: --ros-set gripper=none)")
        raise RobotTimeoutError(
            f"no ROS 2 robot state after {cfg.connect_timeout_s:g} s: missing {', '.join(missing)} "
            f"(pose {cfg.topic(cfg.current_pose_topic)}, joints {cfg.topic(cfg.joint_states_topic)}; "
            f"ROS_DOMAIN_ID={os.environ.get('ROS_DOMAIN_ID', '0 (unset)')}). Is the controller running?")

    # ------------------------------------------------------------------------------------------------------
    # callbacks (executor thread)

    def _on_pose(self, msg: Any) -> None:
        p, o = msg.pose.position, msg.pose.orientation
        try:
            pos, quat = pose_from_xyzw(p.x, p.y, p.z, o.x, o.y, o.z, o.w)
        except Exception as err:  # a malformed message: report it, keep the previous pose
            self._error = f"bad current_pose message: {err}"
            return
        t = stamp_to_s(msg.header.stamp.sec, msg.header.stamp.nanosec)
        with self._lock:
            self._prev_pose, self._pose = self._pose, (pos, quat, t)
            self._watch.seen("current_pose", time.monotonic())

    def _on_joints(self, msg: Any) -> None:
        try:
            q, dq = pick_joints(msg.name, msg.position, msg.velocity, self._config.joint_names)
        except Exception:
            return  # another JointState on the same topic (e.g. only the fingers): not ours
        effort = np.zeros(7)
        if len(msg.effort) >= len(msg.name):
            index = {n: i for i, n in enumerate(msg.name)}
            effort = np.asarray([msg.effort[index[n]] for n in self._config.joint_names], np.float64)
        with self._lock:
            self._joints = (q, dq, effort)
            self._watch.seen("joint_states", time.monotonic())
        self._notify()

    def _on_twist(self, msg: Any) -> None:
        v, w = msg.twist.linear, msg.twist.angular
        with self._lock:
            self._twist_base = np.array([v.x, v.y, v.z, w.x, w.y, w.z], np.float64)
            self._watch.seen("twist", time.monotonic())

    def _on_wrench(self, msg: Any) -> None:
        f, t = msg.wrench.force, msg.wrench.torque
        with self._lock:
            self._wrench = np.array([f.x, f.y, f.z, t.x, t.y, t.z], np.float64)
            self._watch.seen("wrench", time.monotonic())
        self._notify()

    def _notify(self) -> None:
        """Hand the state as it stands after a joint-state or wrench message to the state listeners (the server's
        safety guard checks every state this way, in this executor thread)."""
        if not self._listeners:
            return
        with self._lock:
            if self._pose is None or self._joints is None:
                return
            _, quat, t = self._pose
            q, dq, _ = self._joints
            wrench = self._wrench if self._wrench is not None else np.zeros(6)
        force, torque = self._wrench_ee(wrench, quat)
        sample = StateSample(t, q.copy(), dq.copy(), force, torque)
        for listener in list(self._listeners):
            try:
                listener(sample)
            except Exception as err:  # a listener's bug must not stop the executor that feeds every other stream
                self._log(f"ros2: a state listener failed: {type(err).__name__}: {err}")

    def _on_objects(self, msg: Any) -> None:
        try:
            objects = objects_from_layout([d.label for d in msg.layout.dim], [d.size for d in msg.layout.dim],
                                          list(msg.data))
        except Exception:
            return
        with self._lock:
            self._objects = objects
            self._watch.seen("objects", time.monotonic())

    def _publish_target(self) -> None:
        if self._stopped:
            return
        with self._lock:
            if not self._interp.has_target:
                return
            pos, quat = self._interp.sample(time.monotonic())
        msg = self._PoseStamped()
        msg.header.stamp = self._rt.now_msg()
        msg.header.frame_id = self._config.base_frame
        x, y, z, qx, qy, qz, qw = pose_to_xyzw(pos, quat)
        msg.pose.position.x, msg.pose.position.y, msg.pose.position.z = x, y, z
        msg.pose.orientation.x, msg.pose.orientation.y, msg.pose.orientation.z, msg.pose.orientation.w = qx, qy, qz, qw
        self._target_pub.publish(msg)

    # ------------------------------------------------------------------------------------------------------
    # the Robot protocol

    @property
    def config(self) -> Ros2RobotConfig:
        return self._config

    @property
    def gripper_path(self) -> str:
        """'franka', 'topic' or 'none': the gripper adapter in use."""
        return self._gripper_path

    @property
    def recovery_path(self) -> str:
        """'franka', 'trigger' or 'none': the error-recovery adapter in use."""
        return self._recovery_path

    def _wrench_ee(self, wrench: np.ndarray, quat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Force (3,) N and torque (3,) Nm in the TCP frame from the wrench message's (6,) in `wrench_frame`."""
        if self._config.wrench_frame == "base":
            return vector_to_ee(wrench[:3], quat), vector_to_ee(wrench[3:], quat)
        return wrench[:3].copy(), wrench[3:].copy()

    def add_state_listener(self, callback: Callable[[StateSample], None]) -> None:
        """Call `callback(StateSample)` for every joint-state and wrench message from now on (in the executor
        thread; envs.robot.StateSample)."""
        self._listeners.append(callback)

    def stale(self) -> str:
        """'' when every required stream is fresh, else a line naming the stale ones."""
        with self._lock:
            return self._watch.describe(time.monotonic())

    def state(self) -> RobotState:
        now = time.monotonic()
        cfg = self._config
        with self._lock:
            if self._pose is None or self._joints is None:
                raise RobotError("no robot state received yet")
            pos, quat, t = self._pose
            q, dq, effort = self._joints
            if self._twist_base is not None and cfg.twist_topic:
                twist = np.concatenate([vector_to_ee(self._twist_base[:3], quat),
                                        vector_to_ee(self._twist_base[3:], quat)])
            elif self._prev_pose is not None:
                twist = twist_from_poses(self._prev_pose[0], self._prev_pose[1], self._prev_pose[2], pos, quat, t)
            else:
                twist = np.zeros(6)
            wrench = self._wrench if self._wrench is not None else np.zeros(6)
            force, torque = self._wrench_ee(wrench, quat)
            objects = dict(self._objects)
            error = self._error or self._watch.describe(now)
        width = self._gripper.width_m()
        return state_from_parts(t, q, dq, pos, quat, twist, 0.0 if width is None else width, force, torque,
                                objects=objects, error=error, tau_j_nm=effort)

    def command(self, pos_base_target: np.ndarray, quat_base_target: np.ndarray, gripper_closed: float) -> None:
        if self._stopped:
            raise RobotError("Ros2Robot is stopped: commands are refused")
        pos, quat, g = check_command(pos_base_target, quat_base_target, gripper_closed)
        problem = self._error or self.stale()
        if problem:
            raise RobotError(f"Ros2Robot refuses the command: {problem}")
        with self._lock:
            self._interp.set(pos, quat, time.monotonic())
        self._publish_target()  # now, not at the stream's next tick (a guard's hold leaves at once)
        self._gripper_cmd = g
        self._gripper.command(g)

    def wait(self, duration_s: float) -> None:
        duration_s = check_duration(duration_s)
        time.sleep(duration_s)

    def set_gains(self, profile: str) -> None:
        from envs.ros2.logic import gain_parameters

        values = gain_parameters(gain_profile(profile), self._config.profile)  # ConfigError for an unknown name
        self._set_parameters(values, f"set_gains({profile!r})")

    def _set_parameters(self, values: dict[str, Any], what: str) -> None:
        m = self._rcl_msg
        request = self._SetAtomically.Request()
        for name, value in values.items():
            v = m.ParameterValue()
            if isinstance(value, bool):
                v.type, v.bool_value = m.ParameterType.PARAMETER_BOOL, value
            elif isinstance(value, int):
                v.type, v.integer_value = m.ParameterType.PARAMETER_INTEGER, value
            else:
                v.type, v.double_value = m.ParameterType.PARAMETER_DOUBLE, float(value)
            request.parameters.append(m.Parameter(name=name, value=v))
        response = self._rt.call(self._params, request, self._config.service_timeout_s, what)
        if not response.result.successful:
            raise RobotError(f"{what}: the controller {self._config.controller_fqn} refused the parameters: "
                             f"{response.result.reason or 'no reason given'}")

    def reset_joints(self, q_rad: np.ndarray) -> None:
        cfg = self._config
        q = check_joint_target(q_rad)
        if self._stopped:
            raise RobotError("Ros2Robot is stopped: commands are refused")
        if self._joint_pub is not None:
            msg = self._JointState()
            msg.header.stamp = self._rt.now_msg()
            msg.name = list(cfg.joint_names)
            msg.position = [float(x) for x in q]
            self._joint_pub.publish(msg)
        pos_goal, R_goal = panda_fk(q)
        quat_goal = mat_to_quat(R_goal)
        s = self.state()
        duration = move_duration_s(s.pos_base_ee, s.quat_base_ee, pos_goal, quat_goal, cfg.reset_speed_m_per_s,
                                   cfg.reset_speed_rad_per_s)
        with self._lock:
            self._interp.hold(s.pos_base_ee, s.quat_base_ee)
            self._interp.set(pos_goal, quat_goal, time.monotonic(), duration_s=duration)
        limit_s = max(cfg.reset_timeout_s, duration + 1.0)
        t_end = time.monotonic() + limit_s
        while time.monotonic() < t_end:
            time.sleep(0.05)
            s = self.state()
            if s.error:
                raise RobotError(f"reset_joints: {s.error}")
            with self._lock:
                moved = self._interp.done(time.monotonic())
            if moved and pose_close(s.pos_base_ee, s.quat_base_ee, pos_goal, quat_goal):
                return
        raise RobotTimeoutError(f"reset_joints: the TCP did not reach the pose of q={np.round(q, 3).tolist()} within "
                                f"{limit_s:.1f} s")

    def reset_scene(self, seed: int | None = None) -> None:
        cfg = self._config
        if not cfg.scene_seed_parameter:
            return  # hardware: the scene is whatever the operator set up
        value = -1 if seed is None else int(seed)
        if value < -1:
            raise SafetyError(f"seed={seed} must be >= 0 or None")
        with self._lock:
            before = self._watch.count("objects")
        self._set_parameters({cfg.scene_seed_parameter: value}, f"reset_scene({seed})")
        t_end = time.monotonic() + cfg.service_timeout_s
        while time.monotonic() < t_end:  # the twin publishes the new scene with its next state
            with self._lock:
                if self._watch.count("objects") >= before + 2:
                    break
            time.sleep(0.01)
        s = self.state()
        with self._lock:
            self._interp.hold(s.pos_base_ee, s.quat_base_ee)

    def clear_errors(self) -> None:
        self._recovery.recover(self._config.service_timeout_s)
        self._error = ""
        s = self.state()
        with self._lock:
            self._interp.hold(s.pos_base_ee, s.quat_base_ee)

    def stop(self) -> None:
        if self._stopped:
            return
        try:
            with self._lock:
                pose = self._pose
                if pose is not None:
                    self._interp.hold(pose[0], pose[1])
            if pose is not None:
                self._publish_target()
        finally:
            self._stopped = True
            self._rt.shutdown()

    def __enter__(self) -> Ros2Robot:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
