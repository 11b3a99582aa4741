"""The Robot seam: what every backend (MuJoCo twin, ROS 2, franky, remote over ZMQ) provides, the state it
reports, and the one check of a command's inputs every backend runs before acting. The env never knows which
backend is behind it.

Frames: `base` is the robot base frame (z up); `ee` is the tool centre point (TCP) between the fingertips.
Quaternions are (w, x, y, z), MuJoCo order.

Usage::

    robot: Robot = TwinRobot(TwinRobotConfig(task="reach"))
    robot.reset_scene(seed=0)                  # twin: randomise objects; hardware: no-op
    robot.set_gains("compliance")
    s = robot.state()
    robot.command(s.pos_base_ee + [0, 0, 0.01], s.quat_base_ee, gripper_closed=0.0)
    robot.wait(0.1)                            # let 100 ms of control pass (twin: simulate; real: sleep)

A backend's `command` / `wait` / `reset_joints` start with the shared checks (SafetyError naming the field; the
caller's target stays unchanged)::

    pos, quat, gripper = check_command(pos_base_target, quat_base_target, gripper_closed)   # quat: unit norm
    duration_s = check_duration(duration_s)
    q = check_joint_target(q_rad)                                                          # within the limits
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Protocol, runtime_checkable

import numpy as np

from controllers.kinematics import PANDA_Q_MAX, PANDA_Q_MIN
from controllers.safety import check_finite
from robot_rl.errors import SafetyError


@dataclasses.dataclass
class RobotState:
    """One snapshot of the arm. All arrays float64.

    time_s: robot clock (s). q_rad, dq_rad_per_s: joint positions/velocities, shape (7,).
    pos_base_ee (3,) metres, quat_base_ee (4,) wxyz: TCP pose in the base frame.
    twist_ee_body (6,): TCP twist [v (m/s); w (rad/s)] expressed in the TCP (body) frame.
    gripper_width_m: distance between the fingers (0 .. 0.08).
    force_ee_n (3,), torque_ee_nm (3,): external wrench measured at the wrist, in the TCP frame.
    tau_j_nm (7,): commanded joint torques of the last control tick.
    objects: privileged simulator state (e.g. {"cube_pos": (3,), "goal_pos": (3,)}); empty on hardware.
    error: non-empty when the backend is in an error state (reflex, lost connection); clear_errors() resets.
    """

    time_s: float
    q_rad: np.ndarray
    dq_rad_per_s: np.ndarray
    pos_base_ee: np.ndarray
    quat_base_ee: np.ndarray
    twist_ee_body: np.ndarray
    gripper_width_m: float
    force_ee_n: np.ndarray
    torque_ee_nm: np.ndarray
    tau_j_nm: np.ndarray
    objects: dict[str, np.ndarray] = dataclasses.field(default_factory=dict)
    error: str = ""

    def copy(self) -> RobotState:
        changes: dict[str, Any] = {f.name: np.array(getattr(self, f.name)) for f in dataclasses.fields(self)
                                   if isinstance(getattr(self, f.name), np.ndarray)}
        changes["objects"] = {k: np.array(v) for k, v in self.objects.items()}
        return dataclasses.replace(self, **changes)


@dataclasses.dataclass(frozen=True)
class StateSample:
    """What a safety check needs of one state message, as a backend receives it (no pose, no objects): robot clock
    `time_s`, q_rad / dq_rad_per_s (7,), force_ee_n / torque_ee_nm (3,) in the TCP frame. Backends that receive
    states in a thread of their own (ROS 2: one per joint-state or wrench message; franky: one per step of the
    tracker's 1 kHz loop, on franky's callback thread) hand each one to the callbacks registered with their optional
    `add_state_listener(callback)`; the callback runs in that thread and must be quick (a few vector norms). A
    backend whose controller can stop on a force by itself offers `set_force_limit(max_force_n)` too (franky: a
    reaction inside libfranka's loop holds the pose and the state that fired it goes to the listeners)."""

    time_s: float
    q_rad: np.ndarray
    dq_rad_per_s: np.ndarray
    force_ee_n: np.ndarray
    torque_ee_nm: np.ndarray


@runtime_checkable
class Robot(Protocol):
    """A compliant arm with a parallel gripper, commanded by Cartesian targets at the env rate.

    Backends run their own high-rate loop (the Cartesian impedance law at >= 500 Hz) between calls. Optional
    attribute `arm` (str): the arm model whose joint limits apply (controllers.arms: 'panda', 'fr3'; the server's
    guard enforces 'any', the tighter of both, for a backend without it).
    """

    def state(self) -> RobotState:
        """The latest state snapshot (a copy the caller may keep)."""
        ...

    def command(self, pos_base_target: np.ndarray, quat_base_target: np.ndarray, gripper_closed: float) -> None:
        """Set the impedance target pose (3,) + (4,) wxyz in the base frame and the gripper command
        (0 = open, 1 = closed). Raises robot_rl.errors.SafetyError on NaN/inf, a zero quaternion or wrong shapes
        (`check_command`)."""
        ...

    def wait(self, duration_s: float) -> None:
        """Let `duration_s` of control pass under the current target (twin: simulate; hardware: sleep)."""
        ...

    def set_gains(self, profile: str) -> None:
        """Switch to a named gain profile ('compliance' during episodes, 'precision' during resets)."""
        ...

    def reset_joints(self, q_rad: np.ndarray) -> None:
        """Move to joint configuration q (7,) (blocking; interpolated on hardware)."""
        ...

    def reset_scene(self, seed: int | None = None) -> None:
        """Randomise the task's objects (twin); a no-op on hardware."""
        ...

    def clear_errors(self) -> None:
        """Clear a recoverable error state (reflex) so commands are accepted again."""
        ...

    def stop(self) -> None:
        """Hold the current pose and release resources; further commands are refused."""
        ...


@runtime_checkable
class Cameras(Protocol):
    """Camera images, uint8 (H, W, 3) per named camera."""

    @property
    def names(self) -> tuple[str, ...]: ...

    def read(self) -> dict[str, np.ndarray]:
        """The latest frame of every camera, keyed by name."""
        ...


# --------------------------------------------------------------------------------------------- command checks

def _numeric(name: str, value: object, n: int) -> np.ndarray:
    """A float64 copy of `value` with shape (n,); SafetyError naming `name` if it is not that."""
    try:
        arr = np.array(value, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise SafetyError(f"{name}: not a numeric array ({err})") from None
    if arr.shape != (n,):
        raise SafetyError(f"{name}: expected shape ({n},), got {arr.shape}")
    return arr


def check_command(pos_base_target: object, quat_base_target: object, gripper_closed: object, *,
                  finite: bool = True) -> tuple[np.ndarray, np.ndarray, float]:
    """The checks on `Robot.command`'s inputs that every backend runs before acting.

    Returns (pos (3,) float64 m, quat (4,) float64 wxyz of unit norm, gripper float). Raises SafetyError naming
    the field when the position or quaternion is not a numeric array of shape (3,) / (4,), the gripper is not a
    number, or (with `finite`) any value is NaN/inf or the quaternion is (numerically) zero.
    `finite=False` checks shapes and types only and returns the quaternion as given: for a client that forwards
    the command to a server which runs the full check itself (envs.remote.RemoteRobot).
    """
    if not finite:
        pos, quat = _numeric("pos_base_target", pos_base_target, 3), _numeric("quat_base_target", quat_base_target, 4)
    else:
        pos = check_finite("pos_base_target", pos_base_target, (3,))
        quat = check_finite("quat_base_target", quat_base_target, (4,))
        norm = float(np.linalg.norm(quat))
        if norm < 1e-6:
            raise SafetyError(f"quat_base_target: zero quaternion {quat}")
        quat = quat / norm
    try:
        g = float(gripper_closed)  # type: ignore[arg-type]
    except (TypeError, ValueError) as err:
        raise SafetyError(f"gripper_closed: not a number ({err})") from None
    if finite and not math.isfinite(g):
        raise SafetyError(f"gripper_closed: {g} is not finite")
    return pos, quat, g


def check_duration(duration_s: float, max_s: float | None = None, max_name: str = "max_s") -> float:
    """`Robot.wait`'s duration (s) as a float; SafetyError unless it is finite and >= 0 (and <= `max_s`, named
    `max_name` in the message, when given)."""
    try:
        d = float(duration_s)
    except (TypeError, ValueError) as err:
        raise SafetyError(f"duration_s={duration_s!r}: not a number ({err})") from None
    if max_s is None:
        if not (math.isfinite(d) and d >= 0.0):
            raise SafetyError(f"duration_s={duration_s!r} must be finite and >= 0")
    elif not (math.isfinite(d) and 0.0 <= d <= max_s):
        raise SafetyError(f"duration_s={duration_s!r} must be finite and in [0, {max_name}={max_s}]")
    return d


def check_joint_target(q_rad: object, *, finite: bool = True, limits: bool = True) -> np.ndarray:
    """`Robot.reset_joints`'s target (7,) float64 rad; SafetyError unless numeric of shape (7,) and (with
    `finite`) finite and (with `limits`) within the Panda's joint limits (controllers.kinematics PANDA_Q_MIN /
    PANDA_Q_MAX). `finite=False`: shape and type only (a client forwarding to a checking server);
    `limits=False`: the limits are left to the backend (the robot server, which serves any backend)."""
    if not finite:
        return _numeric("q_rad", q_rad, 7)
    q = check_finite("q_rad", q_rad, (7,))
    if limits and (np.any(q < PANDA_Q_MIN) or np.any(q > PANDA_Q_MAX)):
        raise SafetyError(f"q_rad={q} is outside the joint limits")
    return q
