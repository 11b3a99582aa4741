"""Panda modified-DH kinematics: known poses, and the geometric Jacobian against finite differences of FK."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controllers.kinematics import PANDA_HOME_Q, PANDA_Q_MAX, PANDA_Q_MIN, panda_fk, panda_jacobian
from controllers.transforms import mat_to_quat, orientation_error
from robot_rl.errors import ShapeError

joint_configs = st.tuples(*[st.floats(lo, hi) for lo, hi in zip(PANDA_Q_MIN, PANDA_Q_MAX, strict=True)]).map(
    np.array)
joint_velocities = st.tuples(*[st.floats(-2.0, 2.0)] * 7).map(np.array)


def test_home_pose() -> None:
    pos, R = panda_fk(np.array(PANDA_HOME_Q))
    np.testing.assert_allclose(pos, [0.30689, 0.0, 0.48688], atol=1e-5)
    np.testing.assert_allclose(R, np.diag([1.0, -1.0, -1.0]), atol=1e-12)  # gripper pointing down
    flange, _ = panda_fk(np.array(PANDA_HOME_Q), tcp_offset_m=0.0, tcp_yaw_rad=0.0)
    np.testing.assert_allclose(flange, [0.30689, 0.0, 0.59028], atol=1e-5)


def test_zero_pose_is_the_stretched_arm() -> None:
    # all joints zero: the arm points up; x = a4 + a5 + a7 = 0.088, z = 0.333 + 0.316 + 0.384 - 0.107 - 0.1034
    pos, _ = panda_fk(np.zeros(7))
    np.testing.assert_allclose(pos, [0.088, 0.0, 0.333 + 0.316 + 0.384 - 0.107 - 0.1034], atol=1e-12)


@settings(max_examples=60, deadline=None)
@given(joint_configs, joint_velocities)
def test_jacobian_times_dq_matches_finite_difference_of_the_pose(q: np.ndarray, dq: np.ndarray) -> None:
    h = 1e-6
    p1, R1 = panda_fk(q + h * dq)
    p0, R0 = panda_fk(q - h * dq)
    v_fd = (p1 - p0) / (2 * h)
    # base-frame angular velocity: R1 R0^T = exp([w] 2h)
    w_fd = orientation_error(mat_to_quat(R1), mat_to_quat(R0)) / (2 * h)
    J = panda_jacobian(q)
    np.testing.assert_allclose(J @ dq, np.concatenate([v_fd, w_fd]), atol=1e-7)


def test_jacobian_columns_are_unit_joint_axes() -> None:
    J = panda_jacobian(np.array(PANDA_HOME_Q))
    np.testing.assert_allclose(np.linalg.norm(J[3:], axis=0), 1.0, atol=1e-12)
    np.testing.assert_allclose(J[3:, 0], [0, 0, 1], atol=1e-12)  # joint 1 turns about the base z axis
    assert math.isclose(np.linalg.matrix_rank(J), 6)


def test_shape_error() -> None:
    with pytest.raises(ShapeError, match="q"):
        panda_fk(np.zeros(6))
