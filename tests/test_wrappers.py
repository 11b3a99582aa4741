"""Env wrappers on the MuJoCo twin (state mode): relative frame, gripper penalty, env checker, config errors."""

from __future__ import annotations

import math
import os
import warnings
from typing import Any

import numpy as np
import pytest

os.environ.setdefault("MUJOCO_GL", "egl")
pytest.importorskip("gymnasium")
pytest.importorskip("mujoco")
import gymnasium
from hypothesis import given, settings
from hypothesis import strategies as st

from controllers.transforms import axis_angle_to_quat, orientation_error, quat_mul, quat_normalize, quat_to_mat
from envs.env import make_twin_env
from envs.twin.scripted_human import ScriptedHuman, ScriptedHumanConfig
from envs.wrappers import (
    GripperPenaltyConfig,
    GripperPenaltyWrapper,
    InterventionWrapper,
    RelativeFrameConfig,
    RelativeFrameWrapper,
    base_to_tcp_action,
    tcp_to_base_action,
)
from robot_rl.errors import ConfigError, RobotRLError, ShapeError

unit = st.floats(-1.0, 1.0, allow_nan=False)
actions = st.lists(unit, min_size=7, max_size=7).map(lambda v: np.array(v))
quats = st.lists(st.floats(-1.0, 1.0, allow_nan=False), min_size=4, max_size=4).filter(
    lambda v: float(np.linalg.norm(v)) > 0.1).map(lambda v: quat_normalize(np.array(v)))


def _parallel(a: np.ndarray, b: np.ndarray) -> bool:
    """Same direction; below 1e-9 a vector has none, and then the other must be as small (2e-9: the conversions scale
    by at most sqrt(3), so a 1e-9 vector and its 0.99999999e-9 round trip are not told apart by which side of 1e-9
    each rounds to)."""
    na, nb = np.linalg.norm(a), np.linalg.norm(b)
    if na < 1e-9 or nb < 1e-9:
        return bool(na < 2e-9 and nb < 2e-9)
    return bool(np.dot(a, b) / (na * nb) > 1 - 1e-9)


# ------------------------------------------------------------------------------------------- pure conversions
@settings(max_examples=200, deadline=None)
@given(actions, quats)
def test_tcp_to_base_keeps_direction_and_fits_the_box(a: np.ndarray, q: np.ndarray) -> None:
    b = tcp_to_base_action(a, q)
    R = quat_to_mat(q)
    assert np.all(np.abs(b) <= 1.0 + 1e-12)
    assert _parallel(b[:3], R @ a[:3]) and _parallel(b[3:6], R @ a[3:6])
    assert b[6] == a[6]
    # a part that fits after rotation is not scaled
    for sl in (slice(0, 3), slice(3, 6)):
        if np.max(np.abs(R @ a[sl])) <= 1.0:
            np.testing.assert_allclose(b[sl], R @ a[sl], atol=1e-12)


@settings(max_examples=200, deadline=None)
@given(actions, quats)
def test_base_to_tcp_round_trip_is_a_scaled_copy_and_a_fixed_point(b: np.ndarray, q: np.ndarray) -> None:
    t = base_to_tcp_action(b, q)
    assert np.all(np.abs(t) <= 1.0 + 1e-12)
    back = tcp_to_base_action(t, q)
    for sl in (slice(0, 3), slice(3, 6)):
        assert _parallel(back[sl], b[sl])
        n_b = np.linalg.norm(b[sl])
        if n_b > 1e-9:
            s = np.linalg.norm(back[sl]) / n_b
            assert 1 / math.sqrt(3) - 1e-9 <= s <= 1 + 1e-9
    # replaying the stored TCP action is stable: converting again gives the same action
    np.testing.assert_allclose(base_to_tcp_action(back, q), t, atol=1e-12)


def test_conversions_reject_bad_shapes_and_pass_nan_through() -> None:
    q = np.array([1.0, 0.0, 0.0, 0.0])
    with pytest.raises(ShapeError):
        tcp_to_base_action(np.zeros(6), q)
    with pytest.raises(ShapeError):
        base_to_tcp_action(np.zeros(8), q)
    a = np.full(7, np.nan)
    assert np.all(np.isnan(tcp_to_base_action(a, q)))


# ------------------------------------------------------------------------------------------- relative frame
def _rotated_reach_env(**kwargs: Any) -> Any:
    """A reach env whose TCP has been yawed ~0.5 rad about the base z axis (besides pointing down)."""
    env = make_twin_env("reach", obs_mode="state", reset_noise_m=0.0, reset_noise_rad=0.0, **kwargs)
    env.reset(seed=0)
    for _ in range(5):
        env.step(np.array([0, 0, 0, 0, 0, 1.0, -1], np.float32))
    for _ in range(5):
        env.step(np.array([0, 0, 0, 0, 0, 0, -1], np.float32))
    return env


def test_tcp_x_action_moves_along_the_tcp_x_axis_in_the_base_frame() -> None:
    base = _rotated_reach_env()
    env = RelativeFrameWrapper(base)
    try:
        R = quat_to_mat(base.last_state.quat_base_ee)
        yaw = math.atan2(R[1, 0], R[0, 0])
        assert 0.3 < abs(yaw) < 0.7, f"test setup: TCP yaw {yaw:.2f} rad"
        cmd0, _ = base.commanded_pose
        _, _, _, _, info = env.step(np.array([1.0, 0, 0, 0, 0, 0, -1], np.float32))
        np.testing.assert_allclose(info["base_frame_action"][:3], R[:, 0], atol=1e-6)
        np.testing.assert_allclose(base.commanded_pose[0] - cmd0, 0.02 * R[:, 0], atol=1e-7)
        # the TCP physically moves along its own x axis (not the base's)
        p0 = base.last_state.pos_base_ee.copy()
        for _ in range(3):
            env.step(np.array([1.0, 0, 0, 0, 0, 0, -1], np.float32))
        d = base.last_state.pos_base_ee - p0
        assert float(np.dot(d, R[:, 0]) / np.linalg.norm(d)) > 0.98
        assert abs(float(np.dot(d, np.array([1.0, 0, 0])) / np.linalg.norm(d))) < 0.95
    finally:
        env.close()


def test_tcp_rotation_action_turns_about_the_tcp_axis() -> None:
    base = _rotated_reach_env()
    env = RelativeFrameWrapper(base)
    try:
        R = quat_to_mat(base.last_state.quat_base_ee)
        _, q_cmd0 = base.commanded_pose
        _, _, _, _, info = env.step(np.array([0, 0, 0, 0, 0, 0.5, -1], np.float32))
        np.testing.assert_allclose(info["base_frame_action"][3:6], 0.5 * R[:, 2], atol=1e-6)
        expected = quat_mul(axis_angle_to_quat(0.05 * R[:, 2]), q_cmd0)
        assert np.linalg.norm(orientation_error(base.commanded_pose[1], expected)) < 1e-6
    finally:
        env.close()


def test_rotated_box_corner_is_scaled_not_clipped() -> None:
    base = _rotated_reach_env()
    env = RelativeFrameWrapper(base)
    try:
        R = quat_to_mat(base.last_state.quat_base_ee)
        want = R @ np.array([1.0, 1.0, 0.0])
        assert np.max(np.abs(want)) > 1.05  # the corner leaves the base-frame box
        _, _, _, _, info = env.step(np.array([1.0, 1.0, 0, 0, 0, 0, -1], np.float32))
        b = info["base_frame_action"][:3].astype(np.float64)
        assert np.max(np.abs(b)) == pytest.approx(1.0, abs=1e-6)
        assert float(np.dot(b, want) / (np.linalg.norm(b) * np.linalg.norm(want))) > 1 - 1e-6
        assert not info["clipped"]
    finally:
        env.close()


def test_observation_in_reset_frame() -> None:
    base = make_twin_env("reach", obs_mode="state")
    env = RelativeFrameWrapper(base, RelativeFrameConfig(obs_in_reset_frame=True))
    plain = make_twin_env("reach", obs_mode="state")
    try:
        obs, _ = env.reset(seed=3)
        obs_plain, _ = plain.reset(seed=3)
        assert base.reset_pose is not None and base.last_state is not None
        reset_pos, reset_quat = base.reset_pose
        rel = base.last_state.pos_base_ee - reset_pos
        np.testing.assert_allclose(obs_plain["state"][:3], rel, atol=1e-6)
        np.testing.assert_allclose(obs["state"][:3], quat_to_mat(reset_quat).T @ rel, atol=1e-6)
        assert np.max(np.abs(obs["state"][:3] - obs_plain["state"][:3])) > 1e-3  # the frames really differ
        np.testing.assert_array_equal(obs["state"][3:], obs_plain["state"][3:])
        np.testing.assert_array_equal(obs["object"], obs_plain["object"])
        assert obs["state"].dtype == np.float32 and env.observation_space.contains(obs)
    finally:
        env.close()
        plain.close()


# ------------------------------------------------------------------------------------------- gripper penalty
def test_grasp_penalty_on_flips_only() -> None:
    env = GripperPenaltyWrapper(make_twin_env("reach", obs_mode="state", task_fields=(("gripper_locked", False),)),
                                penalty=-0.02)  # a free gripper (reach's is locked open)
    try:
        env.reset(seed=0)
        grips = [1.0, 1.0, -1.0, -1.0, -1.0, 0.0, 1.0]
        got = []
        for g in grips:
            _, reward, _, _, info = env.step(np.array([0, 0, 0, 0, 0, 0, g], np.float32))
            got.append((info["grasp_penalty"], info["gripper_changed"]))
            assert reward == 0.0  # the reward itself is untouched
        # close (flip), hold, open refused by the env's debounce (no flip, no penalty), open (flip), ...
        assert [c for _, c in got] == [True, False, False, True, False, False, True]
        assert [p for p, _ in got] == [-0.02 if c else 0.0 for _, c in got]
    finally:
        env.close()


class _NoGripperInfoEnv(gymnasium.Env[dict[str, Any], np.ndarray]):
    """A gymnasium env with RobotEnv's spaces but no robot and no gripper info."""

    observation_space = gymnasium.spaces.Dict({"state": gymnasium.spaces.Box(-1.0, 1.0, (19,), np.float32)})
    action_space = gymnasium.spaces.Box(-1.0, 1.0, (7,), np.float32)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        return {"state": np.zeros(19, np.float32)}, {}

    def step(self, action: np.ndarray) -> Any:
        return {"state": np.zeros(19, np.float32)}, 0.0, False, False, {}


def test_gripper_penalty_errors() -> None:
    with pytest.raises(ConfigError, match="penalty"):
        GripperPenaltyConfig(penalty=0.5)
    with pytest.raises(ConfigError):
        GripperPenaltyWrapper(_NoGripperInfoEnv(), penalty=-0.1, config=GripperPenaltyConfig())
    env = GripperPenaltyWrapper(_NoGripperInfoEnv())
    env.reset()
    with pytest.raises(RobotRLError, match="gripper_changed"):
        env.step(np.zeros(7, np.float32))


def test_relative_frame_needs_a_robot_env() -> None:
    env = RelativeFrameWrapper(_NoGripperInfoEnv())
    env.reset()
    with pytest.raises(RobotRLError, match="last_state"):
        env.step(np.zeros(7, np.float32))
    with pytest.raises(ConfigError, match="Box"):
        RelativeFrameWrapper(gymnasium.make("CartPole-v1"))


# ------------------------------------------------------------------------------------------- env checker
def test_gymnasium_env_checker_passes_on_the_full_stack() -> None:
    from gymnasium.utils.env_checker import check_env

    base = make_twin_env("pick_cube", obs_mode="state", max_episode_steps=20)
    env = InterventionWrapper(
        GripperPenaltyWrapper(RelativeFrameWrapper(base, RelativeFrameConfig(obs_in_reset_frame=True))),
        ScriptedHuman(ScriptedHumanConfig(task="pick_cube", seed=0)),
    )
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            check_env(env, skip_render_check=True)
        # acceptable: the checker prefers the unwrapped env; RobotEnv's own unbounded proprio Box
        problems = [str(w.message) for w in caught
                    if "unwrapped" not in str(w.message) and "Box observation space m" not in str(w.message)]
        assert not problems, problems
    finally:
        env.close()
