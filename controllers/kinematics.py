"""Franka Panda kinematics from the public modified-DH table (../shared/REFERENCE.md), in plain numpy.

Used as an independent check of the MuJoCo twin (its TCP pose and Jacobian must match these) and by the
controller tests (finite differences of `panda_fk` against `panda_jacobian`). Not used in the 1 kHz loop: the
twin takes the Jacobian from MuJoCo, hardware from libfranka.

Frames: base = the robot's link0 (z up). TCP = Franka's default end-effector frame of the hand: the flange
rotated by -pi/4 about z and moved 0.1034 m along z (the fingertip centre). At the home pose
PANDA_HOME_Q the TCP is at about (0.307, 0, 0.487) m with the gripper pointing down (R ~ diag(1, -1, -1)).

Usage::

    pos, R = panda_fk(PANDA_HOME_Q)          # TCP pose in the base frame
    J = panda_jacobian(PANDA_HOME_Q)         # (6, 7): [linear; angular] velocity of the TCP in the base frame
    v = J @ dq
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from robot_rl.errors import ShapeError

# modified DH (Craig): rows (a_{i-1}, d_i, alpha_{i-1}) for joints 1..7, then the flange (fixed)
PANDA_MDH = np.array([
    [0.0, 0.333, 0.0],
    [0.0, 0.0, -math.pi / 2],
    [0.0, 0.316, math.pi / 2],
    [0.0825, 0.0, math.pi / 2],
    [-0.0825, 0.384, -math.pi / 2],
    [0.0, 0.0, math.pi / 2],
    [0.088, 0.0, math.pi / 2],
])
PANDA_FLANGE_D_M = 0.107
PANDA_TCP_OFFSET_M = 0.1034
"""Flange to fingertip centre along the flange z axis (Franka hand)."""
PANDA_TCP_YAW_RAD = -math.pi / 4
"""The hand is mounted rotated -45 deg about the flange z axis."""
PANDA_HOME_Q = (0.0, -math.pi / 4, 0.0, -3 * math.pi / 4, 0.0, math.pi / 2, math.pi / 4)
PANDA_TORQUE_LIMITS_NM = (87.0, 87.0, 87.0, 87.0, 12.0, 12.0, 12.0)
PANDA_Q_MIN = (-2.8973, -1.7628, -2.8973, -3.0718, -2.8973, -0.0175, -2.8973)
PANDA_Q_MAX = (2.8973, 1.7628, 2.8973, -0.0698, 2.8973, 3.7525, 2.8973)
PANDA_DQ_MAX = (2.175, 2.175, 2.175, 2.175, 2.61, 2.61, 2.61)


def _mdh(a: float, d: float, alpha: float, theta: float) -> np.ndarray:
    """RotX(alpha) TransX(a) RotZ(theta) TransZ(d) as a 4x4 transform."""
    ca, sa, ct, st = math.cos(alpha), math.sin(alpha), math.cos(theta), math.sin(theta)
    return np.array([
        [ct, -st, 0.0, a],
        [st * ca, ct * ca, -sa, -d * sa],
        [st * sa, ct * sa, ca, d * ca],
        [0.0, 0.0, 0.0, 1.0],
    ])


def _joint_frames(q: npt.ArrayLike, tcp_offset_m: float, tcp_yaw_rad: float) -> tuple[list[np.ndarray], np.ndarray]:
    qa = np.asarray(q, dtype=np.float64)
    if qa.shape != (7,):
        raise ShapeError(f"q: expected shape (7,), got {qa.shape}")
    T = np.eye(4)
    frames = []
    for (a, d, alpha), theta in zip(PANDA_MDH, qa, strict=True):
        T = T @ _mdh(a, d, alpha, theta)
        frames.append(T)
    T_tcp = T @ _mdh(0.0, PANDA_FLANGE_D_M, 0.0, 0.0) @ _mdh(0.0, tcp_offset_m, 0.0, tcp_yaw_rad)
    return frames, T_tcp


def panda_fk(q: npt.ArrayLike, tcp_offset_m: float = PANDA_TCP_OFFSET_M,
             tcp_yaw_rad: float = PANDA_TCP_YAW_RAD) -> tuple[np.ndarray, np.ndarray]:
    """(pos (3,), R (3, 3)) of the TCP in the base frame; tcp_offset_m=0, tcp_yaw_rad=0 give the flange."""
    _, T = _joint_frames(q, tcp_offset_m, tcp_yaw_rad)
    return T[:3, 3].copy(), T[:3, :3].copy()


def panda_jacobian(q: npt.ArrayLike, tcp_offset_m: float = PANDA_TCP_OFFSET_M,
                   tcp_yaw_rad: float = PANDA_TCP_YAW_RAD) -> np.ndarray:
    """Geometric Jacobian (6, 7) of the TCP in the base frame: rows [linear; angular] velocity."""
    frames, T = _joint_frames(q, tcp_offset_m, tcp_yaw_rad)
    p = T[:3, 3]
    J = np.empty((6, 7))
    for i, Ti in enumerate(frames):
        z, o = Ti[:3, 2], Ti[:3, 3]
        J[:3, i] = np.cross(z, p - o)
        J[3:, i] = z
    return J
