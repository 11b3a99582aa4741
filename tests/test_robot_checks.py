"""The one Robot command check (envs.robot.check_command / check_duration / check_joint_target): property tests
with hypothesis, and every backend refusing the same bad commands with the same messages."""

from __future__ import annotations

import math
import os
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controllers.kinematics import PANDA_HOME_Q, PANDA_Q_MAX, PANDA_Q_MIN
from envs.robot import check_command, check_duration, check_joint_target
from robot_rl.errors import SafetyError

FINITE = st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False)
NON_FINITE = st.sampled_from([math.nan, math.inf, -math.inf])


def vectors(n: int, elements: st.SearchStrategy[float] = FINITE) -> st.SearchStrategy[list[float]]:
    return st.lists(elements, min_size=n, max_size=n)


def with_one_bad(n: int) -> st.SearchStrategy[list[float]]:
    """n finite values with one of them replaced by NaN or +-inf."""
    return st.tuples(vectors(n), st.integers(0, n - 1), NON_FINITE).map(
        lambda t: [t[2] if i == t[1] else v for i, v in enumerate(t[0])])


QUATS = vectors(4).filter(lambda q: float(np.linalg.norm(q)) >= 1e-3)


@given(pos=vectors(3), quat=QUATS, gripper=FINITE)
def test_a_valid_command_passes_with_a_unit_quaternion(pos: list[float], quat: list[float], gripper: float) -> None:
    p, q, g = check_command(pos, quat, gripper)
    assert p.dtype == np.float64 and p.shape == (3,) and np.array_equal(p, np.asarray(pos, np.float64))
    assert q.shape == (4,) and math.isclose(float(np.linalg.norm(q)), 1.0, rel_tol=1e-9)
    np.testing.assert_allclose(q * np.linalg.norm(quat), quat, rtol=1e-9, atol=1e-9)  # same direction
    assert g == gripper and isinstance(g, float)


@given(pos=with_one_bad(3), quat=QUATS)
def test_a_non_finite_position_is_refused(pos: list[float], quat: list[float]) -> None:
    with pytest.raises(SafetyError, match="pos_base_target: contains NaN/inf"):
        check_command(pos, quat, 0.0)
    check_command(pos, quat, 0.0, finite=False)  # a forwarding client checks shapes only


@given(pos=vectors(3), quat=with_one_bad(4))
def test_a_non_finite_quaternion_is_refused(pos: list[float], quat: list[float]) -> None:
    with pytest.raises(SafetyError, match="quat_base_target: contains NaN/inf"):
        check_command(pos, quat, 0.0)


@given(pos=vectors(3), quat=vectors(4, st.floats(-1e-7, 1e-7)))
def test_a_zero_quaternion_is_refused(pos: list[float], quat: list[float]) -> None:
    with pytest.raises(SafetyError, match="zero quaternion"):
        check_command(pos, quat, 0.0)


@given(gripper=NON_FINITE)
def test_a_non_finite_gripper_is_refused(gripper: float) -> None:
    with pytest.raises(SafetyError, match=r"gripper_closed: .* is not finite"):
        check_command([0.4, 0.0, 0.3], [0.0, 1.0, 0.0, 0.0], gripper)


@given(n=st.integers(0, 6).filter(lambda n: n != 3))
def test_wrong_shapes_and_types_are_refused_even_when_forwarding(n: int) -> None:
    for finite in (True, False):
        with pytest.raises(SafetyError, match=r"pos_base_target: expected shape \(3,\)"):
            check_command(np.zeros(n), [1.0, 0.0, 0.0, 0.0], 0.0, finite=finite)
        with pytest.raises(SafetyError, match="quat_base_target: expected shape"):
            check_command(np.zeros(3), np.ones(n + 5), 0.0, finite=finite)
        with pytest.raises(SafetyError, match="not a numeric array"):
            check_command(["a", "b", "c"], [1.0, 0.0, 0.0, 0.0], 0.0, finite=finite)
        with pytest.raises(SafetyError, match="gripper_closed: not a number"):
            check_command(np.zeros(3), [1.0, 0.0, 0.0, 0.0], "closed", finite=finite)


@given(d=st.floats(0.0, 1e6, allow_nan=False))
def test_finite_non_negative_durations_pass(d: float) -> None:
    assert check_duration(d) == d
    if d <= 10.0:
        assert check_duration(d, 10.0, "max_wait_s") == d
    else:
        with pytest.raises(SafetyError, match=r"in \[0, max_wait_s=10.0\]"):
            check_duration(d, 10.0, "max_wait_s")


@given(d=st.one_of(NON_FINITE, st.floats(max_value=-1e-12, allow_nan=False, allow_infinity=False)))
def test_negative_or_non_finite_durations_are_refused(d: float) -> None:
    with pytest.raises(SafetyError, match=r"duration_s=.* must be finite and >= 0"):
        check_duration(d)
    with pytest.raises(SafetyError, match="max_wait_s"):
        check_duration(d, 10.0, "max_wait_s")


@settings(max_examples=50)
@given(u=vectors(7, st.floats(0.0, 1.0)))
def test_joint_targets_within_the_limits_pass_and_outside_are_refused(u: list[float]) -> None:
    lo, hi = np.asarray(PANDA_Q_MIN), np.asarray(PANDA_Q_MAX)
    q = np.clip(lo + np.asarray(u) * (hi - lo), lo, hi)  # (lo + 1.0 * (hi - lo) can round one ulp past hi)
    np.testing.assert_array_equal(check_joint_target(q), q)
    out = q.copy()
    out[3] = hi[3] + 0.1
    with pytest.raises(SafetyError, match="outside the joint limits"):
        check_joint_target(out)
    np.testing.assert_array_equal(check_joint_target(out, limits=False), out)  # the server leaves them to the backend
    out[0] = math.nan
    with pytest.raises(SafetyError, match="q_rad: contains NaN/inf"):
        check_joint_target(out, limits=False)
    check_joint_target(out, finite=False)


BAD_COMMANDS: list[tuple[Any, Any, Any, str]] = [
    ([math.nan, 0.0, 0.3], [0.0, 1.0, 0.0, 0.0], 0.0, "pos_base_target: contains NaN/inf"),
    ([0.4, 0.0, 0.3], [0.0, 0.0, 0.0, 0.0], 0.0, "quat_base_target: zero quaternion"),
    ([0.4, 0.0, 0.3], [0.0, 1.0, 0.0, 0.0], math.inf, "gripper_closed: inf is not finite"),
    ([0.4, 0.0], [0.0, 1.0, 0.0, 0.0], 0.0, r"pos_base_target: expected shape \(3,\)"),
]


@pytest.mark.parametrize("backend", ["twin", "robot-server"])
def test_every_backend_refuses_bad_commands_with_the_shared_messages(backend: str) -> None:
    """The twin in process and a twin behind a robot server (RemoteRobot: shapes checked locally, the rest by the
    server) refuse the same commands with the same messages, and keep holding the pose."""
    pytest.importorskip("mujoco")
    os.environ.setdefault("MUJOCO_GL", "egl")
    from envs.twin import TwinRobot, TwinRobotConfig

    handle = None
    if backend == "twin":
        robot: Any = TwinRobot(TwinRobotConfig(task="reach", render=False))
    else:
        from envs.remote import RemoteRobot, RemoteRobotConfig
        from envs.robot_server import make_backend, serve_in_thread

        handle = serve_in_thread(lambda: make_backend("twin", "reach", cameras=False))
        robot = RemoteRobot(RemoteRobotConfig(address=handle.address))
    try:
        robot.reset_joints(np.asarray(PANDA_HOME_Q))
        before = robot.state()
        for pos, quat, gripper, message in BAD_COMMANDS:
            with pytest.raises(SafetyError, match=message):
                robot.command(pos, quat, gripper)
        for d in (-1.0, math.nan):
            with pytest.raises(SafetyError, match="duration_s"):
                robot.wait(d)
        with pytest.raises(SafetyError, match="q_rad: contains NaN/inf"):
            robot.reset_joints(np.full(7, math.nan))
        robot.command(before.pos_base_ee, 2.0 * before.quat_base_ee, 0.0)  # a scaled quaternion is fine
        robot.wait(0.05)
        assert float(np.linalg.norm(robot.state().pos_base_ee - before.pos_base_ee)) < 0.01
    finally:
        robot.stop()
        if handle is not None:
            handle.close()
