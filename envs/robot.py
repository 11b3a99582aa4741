"""The Robot seam: what every backend (MuJoCo twin, ROS 2, franky, remote over ZMQ) provides, and the
state it reports. The env never knows which backend is behind it.

Frames: `base` is the robot base frame (z up); `ee` is the tool centre point (TCP) between the fingertips.
Quaternions are (w, x, y, z), MuJoCo order.

Usage::

    robot: Robot = TwinRobot(TwinRobotConfig(task="reach"))
    robot.reset_scene(seed=0)                  # twin: randomise objects; hardware: no-op
    robot.set_gains("compliance")
    s = robot.state()
    robot.command(s.pos_base_ee + [0, 0, 0.01], s.quat_base_ee, gripper_closed=0.0)
    robot.wait(0.1)                            # let 100 ms of control pass (twin: simulate; real: sleep)
"""

from __future__ import annotations

import dataclasses
from typing import Any, Protocol, runtime_checkable

import numpy as np


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


@runtime_checkable
class Robot(Protocol):
    """A compliant arm with a parallel gripper, commanded by Cartesian targets at the env rate.

    Backends run their own high-rate loop (the Cartesian impedance law at >= 500 Hz) between calls.
    """

    def state(self) -> RobotState:
        """The latest state snapshot (a copy the caller may keep)."""
        ...

    def command(self, pos_base_target: np.ndarray, quat_base_target: np.ndarray, gripper_closed: float) -> None:
        """Set the impedance target pose (3,) + (4,) wxyz in the base frame and the gripper command
        (0 = open, 1 = closed). Raises robot_rl.errors.SafetyError on NaN/inf or wrong shapes."""
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
