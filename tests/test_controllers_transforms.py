"""Rotation conventions of controllers.transforms: round trips, matrix products, euler angles, the
orientation error against first-order finite differences, and slerp's constant speed along the geodesic."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controllers.transforms import (
    axis_angle_to_quat,
    euler_xyz_to_quat,
    mat_to_euler_xyz,
    mat_to_quat,
    orientation_error,
    quat_angle,
    quat_conj,
    quat_mul,
    quat_normalize,
    quat_slerp,
    quat_to_euler_xyz,
    quat_to_mat,
    quat_to_rotvec,
)
from robot_rl.errors import ShapeError

finite = st.floats(-1.0, 1.0, allow_nan=False)
quats = st.tuples(finite, finite, finite, finite).map(np.array).filter(lambda q: np.linalg.norm(q) > 0.1).map(
    lambda q: q / np.linalg.norm(q))
# rotation vectors with angle < pi - 1e-3 (at exactly pi the axis sign is ambiguous)
rotvecs = st.tuples(finite, finite, finite).map(np.array).filter(
    lambda v: np.linalg.norm(v) > 1e-12).flatmap(
    lambda v: st.floats(0.0, math.pi - 1e-3).map(lambda a: v / np.linalg.norm(v) * a))


def rx(a: float) -> np.ndarray:
    c, s = math.cos(a), math.sin(a)
    return np.array([[1, 0, 0], [0, c, -s], [0, s, c]])


def ry(a: float) -> np.ndarray:
    c, s = math.cos(a), math.sin(a)
    return np.array([[c, 0, s], [0, 1, 0], [-s, 0, c]])


def rz(a: float) -> np.ndarray:
    c, s = math.cos(a), math.sin(a)
    return np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]])


def skew(v: np.ndarray) -> np.ndarray:
    return np.array([[0, -v[2], v[1]], [v[2], 0, -v[0]], [-v[1], v[0], 0]])


def same_rotation(q1: np.ndarray, q2: np.ndarray, tol: float = 1e-9) -> bool:
    return bool(min(np.abs(q1 - q2).max(), np.abs(q1 + q2).max()) < tol)


def test_known_values() -> None:
    # rotation pi/2 about z maps x to y; MuJoCo order w, x, y, z
    q = np.array([math.cos(math.pi / 4), 0.0, 0.0, math.sin(math.pi / 4)])
    np.testing.assert_allclose(quat_to_mat(q) @ [1, 0, 0], [0, 1, 0], atol=1e-12)
    np.testing.assert_allclose(quat_to_rotvec(q), [0, 0, math.pi / 2], atol=1e-12)
    # gripper down = pi about x
    np.testing.assert_allclose(quat_to_mat([0, 1, 0, 0]), np.diag([1.0, -1.0, -1.0]), atol=1e-12)
    np.testing.assert_allclose(quat_to_euler_xyz([0, 1, 0, 0]), [math.pi, 0, 0], atol=1e-12)


@settings(max_examples=200)
@given(quats)
def test_quat_matrix_round_trip(q: np.ndarray) -> None:
    R = quat_to_mat(q)
    np.testing.assert_allclose(R @ R.T, np.eye(3), atol=1e-12)
    assert np.linalg.det(R) == pytest.approx(1.0, abs=1e-12)
    q2 = mat_to_quat(R)
    assert q2[0] >= 0.0
    assert same_rotation(q, q2)
    np.testing.assert_allclose(quat_to_mat(q2), R, atol=1e-12)


@settings(max_examples=200)
@given(quats, quats)
def test_quat_mul_is_matrix_product(a: np.ndarray, b: np.ndarray) -> None:
    np.testing.assert_allclose(quat_to_mat(quat_mul(a, b)), quat_to_mat(a) @ quat_to_mat(b), atol=1e-12)
    np.testing.assert_allclose(quat_to_mat(quat_conj(a)), quat_to_mat(a).T, atol=1e-12)


@settings(max_examples=200)
@given(rotvecs)
def test_rotvec_round_trip(v: np.ndarray) -> None:
    q = axis_angle_to_quat(v)
    assert np.linalg.norm(q) == pytest.approx(1.0, abs=1e-12)
    np.testing.assert_allclose(quat_to_rotvec(q), v, atol=1e-9)
    np.testing.assert_allclose(quat_to_rotvec(-q), v, atol=1e-9)  # either sign, same rotation vector
    # Rodrigues: the matrix of the rotation vector
    angle = np.linalg.norm(v)
    K = skew(v / angle) if angle > 0 else np.zeros((3, 3))
    R = np.eye(3) + math.sin(angle) * K + (1 - math.cos(angle)) * K @ K
    np.testing.assert_allclose(quat_to_mat(q), R, atol=1e-12)


def test_rotvec_tiny_angles_use_series() -> None:
    for a in (0.0, 1e-15, 1e-10, 1e-9, 1e-7):
        v = np.array([a, -2 * a, 0.5 * a])
        np.testing.assert_allclose(quat_to_rotvec(axis_angle_to_quat(v)), v, rtol=1e-12, atol=1e-300)


@settings(max_examples=200)
@given(st.floats(-math.pi + 1e-6, math.pi - 1e-6), st.floats(-math.pi / 2 + 1e-3, math.pi / 2 - 1e-3),
       st.floats(-math.pi + 1e-6, math.pi - 1e-6))
def test_euler_round_trip_away_from_gimbal_lock(roll: float, pitch: float, yaw: float) -> None:
    q = euler_xyz_to_quat(np.array([roll, pitch, yaw]))
    np.testing.assert_allclose(quat_to_mat(q), rz(yaw) @ ry(pitch) @ rx(roll), atol=1e-12)
    np.testing.assert_allclose(quat_to_euler_xyz(q), [roll, pitch, yaw], atol=1e-8)


@pytest.mark.parametrize("pitch", [math.pi / 2, -math.pi / 2])
def test_euler_at_gimbal_lock_still_reconstructs_the_rotation(pitch: float) -> None:
    R = rz(0.3) @ ry(pitch) @ rx(-1.1)
    rpy = mat_to_euler_xyz(R)
    assert rpy[1] == pytest.approx(pitch, abs=1e-7)
    assert rpy[2] == 0.0
    np.testing.assert_allclose(rz(rpy[2]) @ ry(rpy[1]) @ rx(rpy[0]), R, atol=1e-9)


@settings(max_examples=200)
@given(quats, rotvecs.map(lambda v: v * 1e-3))
def test_orientation_error_small_rotation_matches_finite_difference(q_target: np.ndarray, delta: np.ndarray) -> None:
    """q = exp(delta) q_target (a base-frame rotation by delta): e == delta, and to first order
    R R_t^T - I == [e]x, which checks the sign and frame without going through the rotvec code."""
    q = quat_mul(axis_angle_to_quat(delta), q_target)
    e = orientation_error(q, q_target)
    np.testing.assert_allclose(e, delta, atol=1e-12)
    fd = quat_to_mat(q) @ quat_to_mat(q_target).T - np.eye(3)
    np.testing.assert_allclose(fd, skew(e), atol=2 * np.linalg.norm(delta) ** 2 + 1e-14)


@settings(max_examples=200)
@given(quats, quats)
def test_orientation_error_double_cover_and_short_way(q: np.ndarray, q_target: np.ndarray) -> None:
    e = orientation_error(q, q_target)
    for a, b in ((-q, q_target), (q, -q_target), (-q, -q_target)):
        np.testing.assert_allclose(orientation_error(a, b), e, atol=1e-9)
    assert np.linalg.norm(e) <= math.pi + 1e-12
    # applying -e to q lands on the target
    assert same_rotation(quat_mul(axis_angle_to_quat(-e), q), q_target, tol=1e-9)


def test_orientation_error_across_the_roll_wrap() -> None:
    """Gripper down tilted +-0.05 rad about x: absolute roll is pi - 0.05 vs -pi + 0.05, yet the error is 0.1."""
    a = euler_xyz_to_quat(np.array([math.pi - 0.05, 0, 0]))
    b = euler_xyz_to_quat(np.array([-math.pi + 0.05, 0, 0]))
    np.testing.assert_allclose(orientation_error(a, b), [-0.1, 0, 0], atol=1e-12)


@settings(max_examples=200)
@given(quats, quats, st.floats(0.0, 1.0))
def test_slerp_moves_at_constant_speed_along_the_geodesic(q0: np.ndarray, q1: np.ndarray, t: float) -> None:
    total = quat_angle(quat_mul(q1, quat_conj(q0)))
    qt = quat_slerp(q0, q1, t)
    assert quat_angle(quat_mul(qt, quat_conj(q0))) == pytest.approx(t * total, abs=1e-9)
    assert quat_angle(quat_mul(q1, quat_conj(qt))) == pytest.approx((1 - t) * total, abs=1e-9)


def test_slerp_tiny_angle() -> None:
    q0 = euler_xyz_to_quat(np.array([0.1, 0.2, 0.3]))
    q1 = quat_mul(axis_angle_to_quat(np.array([0, 0, 1e-9])), q0)
    mid = quat_slerp(q0, q1, 0.5)
    np.testing.assert_allclose(orientation_error(mid, q0), [0, 0, 0.5e-9], atol=1e-15)


def test_shape_and_value_errors() -> None:
    with pytest.raises(ShapeError, match="q"):
        quat_to_mat(np.zeros(3))
    with pytest.raises(ValueError, match="normalise"):
        quat_normalize(np.zeros(4))
    with pytest.raises(ShapeError, match="R"):
        mat_to_quat(np.eye(4))
