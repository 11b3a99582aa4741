"""The safety box (clip always lands inside, idempotent, identity inside, correct across the +-pi roll wrap),
the per-step delta limit, and the NaN/inf guard."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controllers.safety import SafetyBox, check_finite, clip_pose, contains, limit_step
from controllers.transforms import (
    axis_angle_to_quat,
    euler_xyz_to_quat,
    orientation_error,
    quat_angle,
    quat_conj,
    quat_mul,
    quat_to_euler_xyz,
)
from robot_rl.errors import ConfigError, SafetyError

DOWN = np.array([0.0, 1.0, 0.0, 0.0])  # gripper pointing down: pi about x
unit = st.floats(-1.0, 1.0)
quats = st.tuples(unit, unit, unit, unit).map(np.array).filter(lambda q: np.linalg.norm(q) > 0.1).map(
    lambda q: q / np.linalg.norm(q))
positions = st.tuples(*[st.floats(-1.5, 1.5)] * 3).map(np.array)


@st.composite
def boxes(draw: st.DrawFn) -> SafetyBox:
    def interval(lo: float, hi: float) -> tuple[float, float]:
        a, b = draw(st.floats(lo, hi)), draw(st.floats(lo, hi))
        return min(a, b), max(a, b)

    px, py, pz = interval(0.2, 0.8), interval(-0.4, 0.4), interval(0.0, 0.5)
    roll, pitch, yaw = (interval(-math.pi, math.pi), interval(-math.pi / 2 + 0.05, math.pi / 2 - 0.05),
                        interval(-math.pi, math.pi))
    nominal = draw(st.sampled_from([DOWN, euler_xyz_to_quat(np.array([math.pi, 0, 0.7])), np.array([1.0, 0, 0, 0])]))
    return SafetyBox(pos_min_m=(px[0], py[0], pz[0]), pos_max_m=(px[1], py[1], pz[1]),
                     nominal_quat_wxyz=tuple(nominal), rot_min_rad=(roll[0], pitch[0], yaw[0]),
                     rot_max_rad=(roll[1], pitch[1], yaw[1]))


# gripper down, yawed anywhere, tilted a little: the absolute roll of these sits at the +-pi wrap
down_yawed = st.tuples(st.floats(-math.pi, math.pi), st.floats(-0.3, 0.3), st.floats(-0.3, 0.3)).map(
    lambda t: quat_mul(euler_xyz_to_quat(np.array([t[1], t[2], t[0]])), DOWN))
orientations = st.one_of(quats, down_yawed)


@settings(max_examples=300, deadline=None)
@given(boxes(), positions, orientations)
def test_clip_lands_inside_and_is_idempotent(box: SafetyBox, pos: np.ndarray, quat: np.ndarray) -> None:
    p1, q1 = clip_pose(box, pos, quat)
    assert contains(box, p1, q1, tol=1e-7)
    p2, q2 = clip_pose(box, p1, q1)
    np.testing.assert_allclose(p2, p1, atol=1e-12)
    assert quat_angle(quat_mul(q2, quat_conj(q1))) < 1e-7
    assert float(np.dot(q1, quat)) >= 0.0  # the input's hemisphere is kept


fractions = st.tuples(*[st.floats(0.0, 1.0)] * 6).map(np.array)


@settings(max_examples=300, deadline=None)
@given(boxes(), fractions, st.booleans())
def test_poses_inside_are_unchanged(box: SafetyBox, frac: np.ndarray, flip: bool) -> None:
    lo = np.concatenate([box.pos_min_m, box.rot_min_rad])
    hi = np.concatenate([box.pos_max_m, box.rot_max_rad])
    x = np.clip(lo + frac * (hi - lo), lo, hi)  # lo + 1.0 * (hi - lo) can round one ulp past hi
    pos = x[:3]
    quat = quat_mul(box.nominal_quat, euler_xyz_to_quat(x[3:])) * (-1.0 if flip else 1.0)
    assert contains(box, pos, quat, tol=1e-9)
    p1, q1 = clip_pose(box, pos, quat)
    np.testing.assert_array_equal(p1, pos)
    np.testing.assert_allclose(q1, quat, atol=1e-15)


@settings(max_examples=300, deadline=None)
@given(st.floats(-0.3, 0.3), st.floats(-0.3, 0.3), st.floats(-1.0, 1.0))
def test_roll_wrap_is_handled_relative_to_the_nominal(roll: float, pitch: float, yaw: float) -> None:
    """Gripper down with tilts of either sign: inside a +-0.35 rad box, whatever the absolute roll's sign."""
    box = SafetyBox(rot_min_rad=(-0.35, -0.35, -1.2), rot_max_rad=(0.35, 0.35, 1.2))
    quat = quat_mul(euler_xyz_to_quat(np.array([roll, pitch, yaw])), DOWN)
    pos = np.array([0.5, 0.0, 0.3])
    assert contains(box, pos, quat)
    np.testing.assert_allclose(clip_pose(box, pos, quat)[1], quat, atol=1e-15)


def test_absolute_roll_straddles_pi_where_the_relative_one_does_not() -> None:
    """The anchor's bug, made concrete: two orientations 0.1 rad apart have absolute rolls ~ +pi and ~ -pi."""
    a = quat_mul(axis_angle_to_quat(np.array([0.05, 0, 0])), DOWN)
    b = quat_mul(axis_angle_to_quat(np.array([-0.05, 0, 0])), DOWN)
    assert quat_to_euler_xyz(a)[0] == pytest.approx(-math.pi + 0.05)
    assert quat_to_euler_xyz(b)[0] == pytest.approx(math.pi - 0.05)
    box = SafetyBox(rot_min_rad=(-0.1, -0.1, -0.1), rot_max_rad=(0.1, 0.1, 0.1))
    np.testing.assert_allclose(box.relative_euler(a), [0.05, 0, 0], atol=1e-12)
    np.testing.assert_allclose(box.relative_euler(b), [-0.05, 0, 0], atol=1e-12)
    # a tilt beyond the box is clipped to its near edge, not flipped to the far side
    c = quat_mul(axis_angle_to_quat(np.array([-0.3, 0, 0])), DOWN)
    _, c_clipped = clip_pose(box, np.array([0.5, 0.0, 0.3]), c)
    np.testing.assert_allclose(orientation_error(c_clipped, DOWN), [-0.1, 0, 0], atol=1e-12)


def test_roll_bounds_touching_pi_wrap_on_the_circle() -> None:
    """Relative roll bounds [-pi, -2.5]: roll +pi (== -pi) is inside, pi - 0.1 clips to the -pi edge (0.1 away
    on the circle), not to -2.5 (0.74 rad away), and 0 clips to the nearer edge -2.5."""
    box = SafetyBox(nominal_quat_wxyz=(1.0, 0.0, 0.0, 0.0), rot_min_rad=(-math.pi, -0.1, -0.1),
                    rot_max_rad=(-2.5, 0.1, 0.1))
    pos = np.array([0.5, 0.0, 0.3])
    flipped = euler_xyz_to_quat(np.array([math.pi, 0, 0]))
    assert contains(box, pos, flipped)
    np.testing.assert_array_equal(clip_pose(box, pos, flipped)[1], flipped)
    _, q = clip_pose(box, pos, euler_xyz_to_quat(np.array([math.pi - 0.1, 0, 0])))
    assert quat_angle(quat_mul(q, quat_conj(flipped))) == pytest.approx(0.0, abs=1e-12)
    _, q = clip_pose(box, pos, np.array([1.0, 0, 0, 0]))
    np.testing.assert_allclose(quat_to_euler_xyz(q), [-2.5, 0, 0], atol=1e-12)


def test_position_is_clipped_per_axis() -> None:
    box = SafetyBox(pos_min_m=(0.3, -0.2, 0.05), pos_max_m=(0.6, 0.2, 0.4))
    pos, quat = clip_pose(box, np.array([1.0, -1.0, 0.1]), DOWN)
    np.testing.assert_array_equal(pos, [0.6, -0.2, 0.1])
    np.testing.assert_array_equal(quat, DOWN)


@settings(max_examples=300, deadline=None)
@given(positions, quats, positions, quats, st.floats(0.0, 0.05), st.floats(0.0, 0.3))
def test_limit_step_never_exceeds_its_bounds(p0: np.ndarray, q0: np.ndarray, p1: np.ndarray, q1: np.ndarray,
                                             max_t: float, max_r: float) -> None:
    p, q = limit_step(p0, q0, p1, q1, max_t, max_r)
    assert np.linalg.norm(p - p0) <= max_t + 1e-12
    assert quat_angle(quat_mul(q, quat_conj(q0))) <= max_r + 1e-9
    # along the way: the translation keeps its direction, the rotation stays on the geodesic to the target
    total = quat_angle(quat_mul(q1, quat_conj(q0)))
    moved = quat_angle(quat_mul(q, quat_conj(q0)))
    assert quat_angle(quat_mul(q1, quat_conj(q))) == pytest.approx(total - moved, abs=1e-7)
    d = p1 - p0
    if np.linalg.norm(d) > 1e-9:
        np.testing.assert_allclose(np.cross(p - p0, d), 0.0, atol=1e-9)
        assert float(np.dot(p - p0, d)) >= 0.0


@settings(max_examples=200, deadline=None)
@given(positions, quats, st.tuples(*[st.floats(-0.01, 0.01)] * 3).map(np.array),
       st.tuples(*[st.floats(-0.05, 0.05)] * 3).map(np.array))
def test_limit_step_is_identity_for_small_steps(p0: np.ndarray, q0: np.ndarray, dp: np.ndarray,
                                                dr: np.ndarray) -> None:
    q1 = quat_mul(axis_angle_to_quat(dr), q0)
    p, q = limit_step(p0, q0, p0 + dp, q1, max_translation_m=0.02, max_rotation_rad=0.1)
    np.testing.assert_array_equal(p, p0 + dp)
    np.testing.assert_allclose(q, q1, atol=1e-15)  # normalised, else untouched


def test_limit_step_scales_to_the_bound() -> None:
    p, q = limit_step(np.zeros(3), DOWN, np.array([0.3, 0.4, 0.0]), quat_mul(axis_angle_to_quat(
        np.array([0, 0, 1.0])), DOWN), max_translation_m=0.05, max_rotation_rad=0.1)
    np.testing.assert_allclose(p, [0.03, 0.04, 0.0], atol=1e-15)
    np.testing.assert_allclose(orientation_error(q, DOWN), [0, 0, 0.1], atol=1e-12)


def test_check_finite_names_the_field() -> None:
    np.testing.assert_array_equal(check_finite("action", [1, 2]), [1.0, 2.0])
    with pytest.raises(SafetyError, match="action"):
        check_finite("action", np.array([0.0, np.nan]))
    with pytest.raises(SafetyError, match="target_pos"):
        check_finite("target_pos", [np.inf])
    with pytest.raises(SafetyError, match="pose"):
        check_finite("pose", "abc")
    with pytest.raises(SafetyError, match="quat"):
        clip_pose(SafetyBox(), np.zeros(3), np.array([np.nan, 0, 0, 1]))


@pytest.mark.parametrize(("field", "value"), [
    ("rot_min_rad", (-0.1, -math.pi / 2, -0.1)),   # pitch bound at the singularity
    ("rot_max_rad", (0.1, 1.6, 0.1)),
    ("rot_min_rad", (-3.5, -0.1, -0.1)),           # roll beyond -pi
    ("pos_min_m", (0.9, -0.35, 0.02)),              # min > max
    ("pos_max_m", (0.75, 0.35)),
    ("nominal_quat_wxyz", (0.0, 2.0, 0.0, 0.0)),
    ("pos_min_m", (math.nan, 0.0, 0.0)),
])
def test_invalid_box_raises(field: str, value: tuple[float, ...]) -> None:
    with pytest.raises(ConfigError, match=r"pos_min_m|pos_max_m|rot_min_rad|nominal_quat_wxyz"):
        SafetyBox(**{field: value})  # type: ignore[arg-type]
