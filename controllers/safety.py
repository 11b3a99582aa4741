"""Workspace safety: a pose box, a per-step delta limit and a NaN/inf guard for commanded targets.

The orientation part of the box bounds the extrinsic x-y-z euler angles of the orientation RELATIVE to a
nominal one, rpy(R_nom^T R), not the absolute euler angles. With the gripper pointing down (nominal = rotation
pi about x) the absolute roll sits at +-pi and wraps as the gripper tilts, so absolute bounds such as SERL's
(roll in [pi - 0.1, pi + 0.1] or the like) cut the allowed set in two and clip a slightly tilted gripper to the
far side; relative to the nominal the same box is the interval [-0.1, 0.1] around 0, continuous.

Usage::

    box = SafetyBox(pos_min_m=(0.3, -0.2, 0.02), pos_max_m=(0.6, 0.2, 0.3))
    pos, quat = limit_step(cur_pos, cur_quat, want_pos, want_quat, max_translation_m=0.02, max_rotation_rad=0.1)
    pos, quat = clip_pose(box, pos, quat)
    assert contains(box, pos, quat)
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import numpy.typing as npt

from controllers import _kernels as _k
from controllers.transforms import euler_xyz_to_quat, quat_angle, quat_normalize, quat_to_euler_xyz
from robot_rl.config import Config, require, require_finite
from robot_rl.errors import SafetyError, ShapeError


@dataclasses.dataclass(frozen=True)
class SafetyBox(Config):
    """Allowed TCP poses in the base frame: a position box and euler bounds relative to a nominal orientation."""

    pos_min_m: tuple[float, float, float] = (0.25, -0.35, 0.02)
    """Lower corner of the position box (m)."""
    pos_max_m: tuple[float, float, float] = (0.75, 0.35, 0.6)
    """Upper corner of the position box (m)."""
    nominal_quat_wxyz: tuple[float, float, float, float] = (0.0, 1.0, 0.0, 0.0)
    """Centre orientation (w, x, y, z); default: gripper pointing down (rotation pi about x)."""
    rot_min_rad: tuple[float, float, float] = (-0.6, -0.6, -math.pi / 2)
    """Lower bounds of (roll, pitch, yaw) of R_nom^T R, extrinsic x-y-z (rad)."""
    rot_max_rad: tuple[float, float, float] = (0.6, 0.6, math.pi / 2)
    """Upper bounds of (roll, pitch, yaw) of R_nom^T R (rad)."""

    def validate(self) -> None:
        for name in ("pos_min_m", "pos_max_m", "rot_min_rad", "rot_max_rad"):
            v = getattr(self, name)
            require(len(v) == 3, name, v, "must have 3 entries")
            require_finite(name, v)
        require(len(self.nominal_quat_wxyz) == 4, "nominal_quat_wxyz", self.nominal_quat_wxyz, "must have 4 entries")
        require_finite("nominal_quat_wxyz", self.nominal_quat_wxyz)
        require(abs(float(np.linalg.norm(self.nominal_quat_wxyz)) - 1.0) < 1e-3, "nominal_quat_wxyz",
                self.nominal_quat_wxyz, "must be a unit quaternion")
        for i in range(3):
            require(self.pos_min_m[i] <= self.pos_max_m[i], "pos_min_m", self.pos_min_m, "must be <= pos_max_m")
            require(self.rot_min_rad[i] <= self.rot_max_rad[i], "rot_min_rad", self.rot_min_rad,
                    "must be <= rot_max_rad")
        half_pi = math.pi / 2
        require(-half_pi < self.rot_min_rad[1] and self.rot_max_rad[1] < half_pi, "rot_min_rad/rot_max_rad",
                (self.rot_min_rad[1], self.rot_max_rad[1]), "pitch bounds must be strictly inside (-pi/2, pi/2)")
        for i, axis in ((0, "roll"), (2, "yaw")):
            require(-math.pi <= self.rot_min_rad[i] and self.rot_max_rad[i] <= math.pi, "rot_min_rad/rot_max_rad",
                    (self.rot_min_rad[i], self.rot_max_rad[i]), f"{axis} bounds must be inside [-pi, pi]")

    @property
    def nominal_quat(self) -> np.ndarray:
        return quat_normalize(np.asarray(self.nominal_quat_wxyz, dtype=np.float64))

    def relative_euler(self, quat: npt.ArrayLike) -> np.ndarray:
        """(roll, pitch, yaw) of R_nom^T R, the coordinates the box bounds."""
        return quat_to_euler_xyz(_k.quat_mul(_k.quat_conj(self.nominal_quat), quat_normalize(quat)))


_TWO_PI = 2.0 * math.pi


def _angle_in(v: float, lo: float, hi: float, tol: float) -> float | None:
    """The representative of angle v (v or v +- 2 pi) inside [lo - tol, hi + tol], or None."""
    for cand in (v, v - _TWO_PI, v + _TWO_PI):
        if lo - tol <= cand <= hi + tol:
            return cand
    return None


def _clip_angle(v: float, lo: float, hi: float) -> float:
    """Clip an angle on the circle into [lo, hi]: v unchanged if v or v +- 2 pi is inside, else the bound that is
    nearer along the circle (so roll/yaw bounds that touch +-pi behave like any others)."""
    if _angle_in(v, lo, hi, 0.0) is not None:
        return v
    return lo if (lo - v) % _TWO_PI < (v - hi) % _TWO_PI else hi


def _clip_rpy(box: SafetyBox, rpy: np.ndarray) -> np.ndarray:
    return np.array([_clip_angle(rpy[0], box.rot_min_rad[0], box.rot_max_rad[0]),
                     min(max(rpy[1], box.rot_min_rad[1]), box.rot_max_rad[1]),
                     _clip_angle(rpy[2], box.rot_min_rad[2], box.rot_max_rad[2])])


def check_finite(name: str, array: object, shape: tuple[int, ...] | None = None) -> np.ndarray:
    """A float64 copy of `array`; raises SafetyError naming `name` if it is not numeric, holds NaN/inf, or
    (when `shape` is given) has another shape."""
    try:
        arr = np.array(array, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise SafetyError(f"{name}: not a numeric array ({err})") from None
    if shape is not None and arr.shape != shape:
        raise SafetyError(f"{name}: expected shape {shape}, got {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise SafetyError(f"{name}: contains NaN/inf: {arr}")
    return arr


def _pose(pos: object, quat: object) -> tuple[np.ndarray, np.ndarray]:
    p = check_finite("pos", pos)
    q = check_finite("quat", quat)
    if p.shape != (3,):
        raise ShapeError(f"pos: expected shape (3,), got {p.shape}")
    if q.shape != (4,):
        raise ShapeError(f"quat: expected shape (4,), got {q.shape}")
    try:
        return p, quat_normalize(q)
    except ValueError:
        raise SafetyError(f"quat: zero quaternion {q}") from None


def clip_pose(box: SafetyBox, pos: npt.ArrayLike, quat: npt.ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """The pose clipped into the box: position per axis; orientation by clipping rpy(R_nom^T R) per axis.
    A pose inside the box comes back unchanged (quaternion normalised); the returned quaternion keeps the
    input's sign (hemisphere), so consecutive commands stay continuous."""
    p, q = _pose(pos, quat)
    p_out = np.clip(p, box.pos_min_m, box.pos_max_m)
    rpy = box.relative_euler(q)
    rpy_c = _clip_rpy(box, rpy)
    if np.array_equal(rpy_c, rpy):
        return p_out, q
    q_out = _k.quat_mul(box.nominal_quat, euler_xyz_to_quat(rpy_c))
    if float(np.dot(q_out, q)) < 0.0:
        q_out = -q_out
    return p_out, q_out


def contains(box: SafetyBox, pos: npt.ArrayLike, quat: npt.ArrayLike, tol: float = 1e-9) -> bool:
    """True if the pose is inside the box, up to `tol` (m for position, rad for the relative euler angles)."""
    p, q = _pose(pos, quat)
    if np.any(p < np.asarray(box.pos_min_m) - tol) or np.any(p > np.asarray(box.pos_max_m) + tol):
        return False
    roll, pitch, yaw = box.relative_euler(q)
    return (box.rot_min_rad[1] - tol <= pitch <= box.rot_max_rad[1] + tol
            and _angle_in(roll, box.rot_min_rad[0], box.rot_max_rad[0], tol) is not None
            and _angle_in(yaw, box.rot_min_rad[2], box.rot_max_rad[2], tol) is not None)


def limit_step(pos_from: npt.ArrayLike, quat_from: npt.ArrayLike, pos_to: npt.ArrayLike, quat_to: npt.ArrayLike,
               max_translation_m: float, max_rotation_rad: float) -> tuple[np.ndarray, np.ndarray]:
    """Move from (pos_from, quat_from) toward (pos_to, quat_to) by at most max_translation_m (Euclidean norm of
    the translation; the direction is kept) and max_rotation_rad (angle of the relative rotation; the step
    follows the geodesic, i.e. slerp). A step within both bounds returns the target unchanged."""
    for name, bound in (("max_translation_m", max_translation_m), ("max_rotation_rad", max_rotation_rad)):
        if not (math.isfinite(bound) and bound >= 0):
            raise SafetyError(f"{name}={bound!r} must be finite and >= 0")
    p0, q0 = _pose(pos_from, quat_from)
    p1, q1 = _pose(pos_to, quat_to)
    delta = p1 - p0
    dist = float(np.linalg.norm(delta))
    p_out = p0 + delta * (max_translation_m / dist) if dist > max_translation_m else p1
    angle = quat_angle(_k.quat_mul(q1, _k.quat_conj(q0)))
    q_out = _k.quat_slerp(q0, q1, max_rotation_rad / angle) if angle > max_rotation_rad else q1
    return p_out, q_out
