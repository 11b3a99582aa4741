"""Rotations and poses: quaternions (w, x, y, z, MuJoCo order), matrices, rotation vectors, euler angles.

Conventions
- A quaternion is a float64 array (4,) = (w, x, y, z); q and -q are the same rotation. Functions that return
  a quaternion return a unit one; `mat_to_quat` and `axis_angle_to_quat` return the representative with w >= 0.
- `quat_mul(a, b)` is the Hamilton product: the rotation b first, then a (R(a*b) = R(a) R(b)).
- Euler angles are extrinsic x-y-z = (roll, pitch, yaw): R = Rz(yaw) Ry(pitch) Rx(roll), pitch in
  [-pi/2, pi/2], roll and yaw in (-pi, pi]. At pitch = +-pi/2 (gimbal lock) only roll -+ yaw is defined;
  `quat_to_euler_xyz` then returns yaw = 0.
- `orientation_error(q, q_target)` is the rotation vector of R R_target^T (a vector in the base frame):
  R = exp([e]) R_target, so with base-frame angular velocity w, de/dt ~= w for small e. It takes the short way
  round (angle in [0, pi]) whatever the signs of q and q_target.

The arithmetic is shared with the compiled impedance kernel (`controllers._kernels`, written in the subset of
Python numba compiles); the functions here check shapes and call it as plain Python.

Usage::

    q = euler_xyz_to_quat(np.array([np.pi, 0.0, 0.3]))   # gripper down, yawed 0.3 rad
    R = quat_to_mat(q)
    e = orientation_error(q, np.array([0.0, 1.0, 0.0, 0.0]))   # [0, 0, 0.3]: R R_target^T = Rz(0.3)
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from controllers import _kernels as _k
from robot_rl.errors import ShapeError


def _as_vec(name: str, value: object, n: int) -> np.ndarray:
    arr = np.asarray(value, dtype=np.float64)
    if arr.shape != (n,):
        raise ShapeError(f"{name}: expected shape ({n},), got {arr.shape}")
    return arr


def _as_quat(name: str, value: object) -> np.ndarray:
    return _as_vec(name, value, 4)


# ------------------------------------------------------------------------------------------------------------
# public API


def quat_normalize(q: npt.ArrayLike) -> np.ndarray:
    """Unit quaternion along `q`; raises ValueError for a zero or non-finite quaternion."""
    qa = _as_quat("q", q)
    n = float(np.linalg.norm(qa))
    if not (n > 0.0 and math.isfinite(n)):
        raise ValueError(f"cannot normalise quaternion {qa!r}")
    return qa / n


def quat_mul(a: npt.ArrayLike, b: npt.ArrayLike) -> np.ndarray:
    """Hamilton product a*b (apply b, then a)."""
    return _k.quat_mul(_as_quat("a", a), _as_quat("b", b))


def quat_conj(q: npt.ArrayLike) -> np.ndarray:
    """Conjugate (the inverse of a unit quaternion)."""
    return _k.quat_conj(_as_quat("q", q))


def quat_slerp(q0: npt.ArrayLike, q1: npt.ArrayLike, t: float) -> np.ndarray:
    """Spherical linear interpolation along the short arc; t=0 gives q0, t=1 gives +-q1."""
    return _k.quat_slerp(quat_normalize(q0), quat_normalize(q1), float(t))


def quat_to_mat(q: npt.ArrayLike) -> np.ndarray:
    """Rotation matrix (3, 3) of a quaternion (normalised first)."""
    return _k.quat_to_mat(quat_normalize(q))


def mat_to_quat(R: npt.ArrayLike) -> np.ndarray:
    """Unit quaternion (w >= 0) of a rotation matrix (Shepperd's method, stable for every angle)."""
    Rm = np.asarray(R, dtype=np.float64)
    if Rm.shape != (3, 3):
        raise ShapeError(f"R: expected shape (3, 3), got {Rm.shape}")
    tr = Rm[0, 0] + Rm[1, 1] + Rm[2, 2]
    diag = (Rm[0, 0], Rm[1, 1], Rm[2, 2])
    if tr >= max(diag):
        s = 2.0 * math.sqrt(max(1.0 + tr, 0.0))
        q = np.array([0.25 * s, (Rm[2, 1] - Rm[1, 2]) / s, (Rm[0, 2] - Rm[2, 0]) / s, (Rm[1, 0] - Rm[0, 1]) / s])
    elif diag[0] >= diag[1] and diag[0] >= diag[2]:
        s = 2.0 * math.sqrt(max(1.0 + Rm[0, 0] - Rm[1, 1] - Rm[2, 2], 0.0))
        q = np.array([(Rm[2, 1] - Rm[1, 2]) / s, 0.25 * s, (Rm[0, 1] + Rm[1, 0]) / s, (Rm[0, 2] + Rm[2, 0]) / s])
    elif diag[1] >= diag[2]:
        s = 2.0 * math.sqrt(max(1.0 - Rm[0, 0] + Rm[1, 1] - Rm[2, 2], 0.0))
        q = np.array([(Rm[0, 2] - Rm[2, 0]) / s, (Rm[0, 1] + Rm[1, 0]) / s, 0.25 * s, (Rm[1, 2] + Rm[2, 1]) / s])
    else:
        s = 2.0 * math.sqrt(max(1.0 - Rm[0, 0] - Rm[1, 1] + Rm[2, 2], 0.0))
        q = np.array([(Rm[1, 0] - Rm[0, 1]) / s, (Rm[0, 2] + Rm[2, 0]) / s, (Rm[1, 2] + Rm[2, 1]) / s, 0.25 * s])
    q /= np.linalg.norm(q)
    return -q if q[0] < 0.0 else q


def axis_angle_to_quat(rotvec: npt.ArrayLike) -> np.ndarray:
    """Unit quaternion of a rotation vector (axis * angle, radians); w >= 0 for angles up to pi."""
    return _k.rotvec_to_quat(_as_vec("rotvec", rotvec, 3))


def quat_to_rotvec(q: npt.ArrayLike) -> np.ndarray:
    """Rotation vector (axis * angle, angle in [0, pi]) of a quaternion of either sign."""
    return _k.quat_to_rotvec(quat_normalize(q))


def orientation_error(q: npt.ArrayLike, q_target: npt.ArrayLike) -> np.ndarray:
    """Rotation vector of R R_target^T in the base frame (short way round; q/-q give the same answer)."""
    return _k.orientation_error(quat_normalize(q), quat_normalize(q_target))


def euler_xyz_to_quat(rpy: npt.ArrayLike) -> np.ndarray:
    """Quaternion of extrinsic x-y-z euler angles (roll, pitch, yaw): R = Rz(yaw) Ry(pitch) Rx(roll)."""
    r, p, y = _as_vec("rpy", rpy, 3)
    cr, sr = math.cos(0.5 * r), math.sin(0.5 * r)
    cp, sp = math.cos(0.5 * p), math.sin(0.5 * p)
    cy, sy = math.cos(0.5 * y), math.sin(0.5 * y)
    # qz(yaw) * qy(pitch) * qx(roll)
    return np.array([
        cy * cp * cr + sy * sp * sr,
        cy * cp * sr - sy * sp * cr,
        cy * sp * cr + sy * cp * sr,
        sy * cp * cr - cy * sp * sr,
    ])


def mat_to_euler_xyz(R: npt.ArrayLike) -> np.ndarray:
    """(roll, pitch, yaw) with R = Rz(yaw) Ry(pitch) Rx(roll); pitch in [-pi/2, pi/2]; yaw = 0 at gimbal lock."""
    Rm = np.asarray(R, dtype=np.float64)
    if Rm.shape != (3, 3):
        raise ShapeError(f"R: expected shape (3, 3), got {Rm.shape}")
    cp = math.hypot(Rm[0, 0], Rm[1, 0])
    pitch = math.atan2(-Rm[2, 0], cp)
    if cp > 1e-9:
        roll = math.atan2(Rm[2, 1], Rm[2, 2])
        yaw = math.atan2(Rm[1, 0], Rm[0, 0])
    else:  # gimbal lock: R = Rz(yaw) Ry(+-pi/2) Rx(roll) depends only on roll -+ yaw; put it all in roll
        roll = math.atan2(-Rm[1, 2], Rm[1, 1])
        yaw = 0.0
    return np.array([roll, pitch, yaw])


def quat_to_euler_xyz(q: npt.ArrayLike) -> np.ndarray:
    """(roll, pitch, yaw) of a quaternion; see `mat_to_euler_xyz`."""
    return mat_to_euler_xyz(quat_to_mat(q))


def quat_angle(q: npt.ArrayLike) -> float:
    """Rotation angle of q in [0, pi]."""
    qn = quat_normalize(q)
    return 2.0 * math.atan2(float(np.linalg.norm(qn[1:])), abs(float(qn[0])))
