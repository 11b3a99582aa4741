"""RobotEnv over a kinematic fake robot: the env's own logic, fast and independent of MuJoCo.

The fake moves its TCP toward the commanded target at a bounded speed, so the env's action mapping, safety
box, gripper logic, reset routine, timing and gymnasium API can be checked exactly.
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np
import pytest

pytest.importorskip("gymnasium")

from gymnasium.error import ResetNeeded
from gymnasium.utils.env_checker import check_env

from controllers.safety import contains
from controllers.transforms import axis_angle_to_quat, orientation_error, quat_mul, quat_slerp
from envs.env import STATE_DIM, RobotEnv, RobotEnvConfig
from envs.robot import Cameras, Robot, RobotState
from envs.tasks import PickCubeTask, get_task
from envs.twin.experts import ScriptedExpert
from robot_rl.errors import ConfigError, SafetyError, ShapeError

pytestmark = pytest.mark.filterwarnings("ignore:.*Box observation space m.*:UserWarning")

HOME_POS = np.array([0.31, 0.0, 0.49])
HOME_QUAT = quat_mul(axis_angle_to_quat(np.array([0.0, 0.0, math.pi / 4])), np.array([0.0, 1.0, 0.0, 0.0]))


class FakeRobot:
    """Kinematic arm: the TCP moves toward the target at <= 0.3 m/s and 2 rad/s; reach scene only."""

    def __init__(self) -> None:
        self.t = 0.0
        self.pos, self.quat = HOME_POS.copy(), HOME_QUAT.copy()
        self.vel = np.zeros(3)
        self.target_pos, self.target_quat = self.pos.copy(), self.quat.copy()
        self.gripper = 0.0
        self.width = 0.08
        self.goal = np.array([0.5, 0.0, 0.2])
        self.calls: list[tuple[str, Any]] = []
        self.commands: list[tuple[np.ndarray, np.ndarray, float]] = []
        self.stopped = False

    def state(self) -> RobotState:
        return RobotState(
            time_s=self.t, q_rad=np.zeros(7), dq_rad_per_s=np.zeros(7), pos_base_ee=self.pos.copy(),
            quat_base_ee=self.quat.copy(), twist_ee_body=np.concatenate([self.vel, np.zeros(3)]),
            gripper_width_m=self.width, force_ee_n=np.zeros(3), torque_ee_nm=np.zeros(3), tau_j_nm=np.zeros(7),
            objects={"goal_pos": self.goal.copy()},
        )

    def command(self, pos_base_target: np.ndarray, quat_base_target: np.ndarray, gripper_closed: float) -> None:
        p, q = np.asarray(pos_base_target, float), np.asarray(quat_base_target, float)
        if not (np.all(np.isfinite(p)) and np.all(np.isfinite(q))):
            raise SafetyError("non-finite target")
        self.target_pos, self.target_quat, self.gripper = p.copy(), q.copy(), float(gripper_closed)
        self.commands.append((p.copy(), q.copy(), float(gripper_closed)))

    def wait(self, duration_s: float) -> None:
        d = self.target_pos - self.pos
        dist = float(np.linalg.norm(d))
        step = min(dist, 0.3 * duration_s)
        old = self.pos.copy()
        if dist > 0:
            self.pos = self.pos + d * (step / dist)
        self.vel = (self.pos - old) / duration_s if duration_s > 0 else np.zeros(3)
        angle = float(np.linalg.norm(orientation_error(self.quat, self.target_quat)))
        t = 1.0 if angle <= 2.0 * duration_s else 2.0 * duration_s / angle
        self.quat = quat_slerp(self.quat, self.target_quat, t)
        self.width = 0.0 if self.gripper > 0.5 else 0.08
        self.t += duration_s

    def set_gains(self, profile: str) -> None:
        self.calls.append(("set_gains", profile))

    def reset_joints(self, q_rad: np.ndarray) -> None:
        self.calls.append(("reset_joints", np.asarray(q_rad).copy()))
        self.pos, self.quat, self.vel = HOME_POS.copy(), HOME_QUAT.copy(), np.zeros(3)
        self.target_pos, self.target_quat = self.pos.copy(), self.quat.copy()

    def reset_scene(self, seed: int | None = None) -> None:
        self.calls.append(("reset_scene", seed))
        rng = np.random.default_rng(seed)
        self.goal = rng.uniform([0.35, -0.2, 0.1], [0.6, 0.2, 0.35])

    def clear_errors(self) -> None:
        self.calls.append(("clear_errors", None))

    def stop(self) -> None:
        self.stopped = True


class FakeCameras:
    """Images that depend on the TCP position (so determinism checks see the trajectory)."""

    def __init__(self, robot: FakeRobot, size: int, names: tuple[str, ...] = ("front", "wrist")) -> None:
        self.robot, self.size, self._names = robot, size, names
        self.reads = 0

    @property
    def names(self) -> tuple[str, ...]:
        return self._names

    def read(self) -> dict[str, np.ndarray]:
        self.reads += 1
        value = (np.abs(self.robot.pos) * 1000).astype(np.uint8)
        return {n: np.broadcast_to(value + i, (self.size, self.size, 3)).copy() for i, n in enumerate(self._names)}


class NoCameras:
    names = ("front", "wrist")

    def read(self) -> dict[str, np.ndarray]:
        raise AssertionError("state mode must never read a camera")


def make(obs_mode: str = "state", **cfg: Any) -> tuple[RobotEnv, FakeRobot]:
    robot = FakeRobot()
    config = RobotEnvConfig(obs_mode=obs_mode, image_size=cfg.pop("image_size", 32), **cfg)
    cams = FakeCameras(robot, config.image_size) if obs_mode == "pixels" else None
    return RobotEnv(robot, "reach", cams, config), robot


def test_fakes_satisfy_the_protocols() -> None:
    robot = FakeRobot()
    assert isinstance(robot, Robot)
    assert isinstance(FakeCameras(robot, 8), Cameras)


@pytest.mark.parametrize("obs_mode", ["state", "pixels"])
def test_check_env_passes(obs_mode: str) -> None:
    env, _ = make(obs_mode)
    check_env(env, skip_render_check=True)


@pytest.mark.parametrize("obs_mode", ["state", "pixels"])
def test_observation_shapes_and_dtypes(obs_mode: str) -> None:
    env, _ = make(obs_mode, image_size=24)
    obs, info = env.reset(seed=1)
    assert obs["state"].shape == (STATE_DIM,) and obs["state"].dtype == np.float32
    if obs_mode == "pixels":
        assert set(obs) == {"state", "images"}
        assert set(obs["images"]) == {"front", "wrist"}
        for img in obs["images"].values():
            assert img.shape == (24, 24, 3) and img.dtype == np.uint8
    else:
        assert set(obs) == {"state", "object"}
        assert obs["object"].shape == (3,) and obs["object"].dtype == np.float32
    assert obs in env.observation_space
    assert "success" in info and "objects" in info
    obs, reward, terminated, truncated, info = env.step(np.zeros(7, np.float32))
    assert obs in env.observation_space
    assert isinstance(reward, float) and "success" in info and "jitter_ms" in info
    assert terminated is False and truncated is False


def test_proprio_is_relative_to_the_reset_pose() -> None:
    env, robot = make("state", reset_noise_m=0.0, reset_noise_rad=0.0)
    obs, _ = env.reset(seed=0)
    assert env.reset_pose is not None
    np.testing.assert_allclose(env.reset_pose[0], get_task("reach").reset_pos_m)
    np.testing.assert_allclose(env.reset_pose[1], HOME_QUAT, atol=1e-9)  # reset_quat None -> home orientation
    np.testing.assert_allclose(obs["state"][:6], 0.0, atol=1e-4)
    np.testing.assert_allclose(obs["state"][12], 0.08)  # gripper width
    # object: goal relative to the reset position
    np.testing.assert_allclose(obs["object"], robot.goal - env.reset_pose[0], atol=1e-6)
    obs, *_ = env.step(np.array([1.0, 0, 0, 0, 0, 0, 0]))
    np.testing.assert_allclose(obs["state"][:3], [0.02, 0, 0], atol=1e-6)


def test_actions_move_the_commanded_pose_by_the_scales() -> None:
    env, robot = make("state")
    env.reset(seed=3)
    pos0, quat0 = env.commanded_pose
    env.step(np.array([0.5, -1.0, 0.25, 0.0, 0.0, 1.0, 0.0]))
    pos1, quat1 = env.commanded_pose
    np.testing.assert_allclose(pos1 - pos0, [0.01, -0.02, 0.005], atol=1e-12)
    np.testing.assert_allclose(orientation_error(quat1, quat0), [0, 0, 0.1], atol=1e-9)  # base-frame rotvec
    np.testing.assert_allclose(robot.commands[-1][0], pos1)
    # out-of-range actions are clipped to [-1, 1]
    env.step(np.array([5.0, 0, 0, 0, 0, 0, 0]))
    np.testing.assert_allclose(env.commanded_pose[0] - pos1, [0.02, 0, 0], atol=1e-12)


def test_per_step_limit_binds_when_tighter_than_the_action_range() -> None:
    env, _ = make("state", max_step_translation_m=0.01, max_step_rotation_rad=0.05)
    env.reset(seed=0)
    pos0, quat0 = env.commanded_pose
    _, _, _, _, info = env.step(np.array([1.0, 1.0, -1.0, 0.0, 1.0, 0.0, 0.0]))
    pos1, quat1 = env.commanded_pose
    np.testing.assert_allclose(np.linalg.norm(pos1 - pos0), 0.01, rtol=1e-9)  # 0.0346 asked, 0.01 allowed
    np.testing.assert_allclose((pos1 - pos0) / 0.01, np.array([1.0, 1.0, -1.0]) / math.sqrt(3), atol=1e-9)
    np.testing.assert_allclose(orientation_error(quat1, quat0), [0, 0.05, 0], atol=1e-9)  # 0.1 asked
    assert info["clipped"]
    _, _, _, _, info = env.step(np.array([0.2, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]))  # 4 mm: within the limit
    assert not info["clipped"]


def test_reset_routine_gains_joint_reset_and_noise() -> None:
    env, robot = make("state", joint_reset_every=2, joint_reset_on_seed=False)
    env.reset(seed=0)
    names = [c[0] for c in robot.calls]
    assert names[:3] == ["set_gains", "reset_joints", "reset_scene"]
    assert robot.calls[0][1] == "precision" and robot.calls[-1] == ("set_gains", "compliance")
    assert env.reset_pose is not None
    pos0 = env.reset_pose[0]
    starts = []
    joint_resets = []
    for _ in range(6):
        robot.calls.clear()
        _, info = env.reset()
        joint_resets.append(info["joint_reset"])
        assert ("reset_joints" in [c[0] for c in robot.calls]) == info["joint_reset"]
        cmd_pos, cmd_quat = env.commanded_pose
        starts.append(cmd_pos)
        assert np.all(np.abs(cmd_pos - pos0) <= 0.02 + 1e-12)
        assert np.all(np.abs(orientation_error(cmd_quat, env.reset_pose[1])) <= 0.05 * math.sqrt(3) + 1e-9)
        np.testing.assert_allclose(robot.pos, cmd_pos, atol=env.config.reset_tolerance_m)
    assert joint_resets == [False, True, False, True, False, True]  # episodes 1..6, every 2nd
    assert np.std(np.array(starts), axis=0).min() > 1e-3  # the noise is there


def test_same_seed_same_trajectory() -> None:
    actions = np.random.default_rng(7).uniform(-1, 1, (30, 7))

    def rollout() -> list[np.ndarray]:
        env, _ = make("pixels", image_size=16)
        out = []
        obs, _ = env.reset(seed=42)
        out.append(np.concatenate([obs["state"], obs["images"]["front"].ravel()]))
        for a in actions:
            obs, *_ = env.step(a)
            out.append(np.concatenate([obs["state"], obs["images"]["front"].ravel()]))
        return out

    a, b = rollout(), rollout()
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x, y)
    env, _ = make("state")
    o1, _ = env.reset(seed=1)
    o2, _ = env.reset(seed=2)
    assert not np.array_equal(o1["object"], o2["object"])


def test_commanded_target_stays_in_the_safety_box() -> None:
    env, robot = make("state", max_episode_steps=1000)
    env.reset(seed=0)
    box = env.safety_box
    assert box is not None
    rng = np.random.default_rng(0)
    biased = np.array([1.0, 1.0, -1.0, 1.0, -1.0, 1.0, 0.0])  # push hard into a corner, then random
    clipped = 0
    for i in range(300):
        a = biased if i < 100 else rng.uniform(-1, 1, 7) * 3
        _, _, _, _, info = env.step(a)
        clipped += info["clipped"]
        pos, quat, _ = robot.commands[-1]
        assert contains(box, pos, quat, tol=1e-9), (i, pos, box.relative_euler(quat))
    assert clipped > 10


def test_nan_action_raises_and_holds_pose() -> None:
    env, robot = make("state")
    env.reset(seed=0)
    env.step(np.full(7, 0.3))
    held = env.commanded_pose
    n = len(robot.commands)
    for bad in (np.array([np.nan, 0, 0, 0, 0, 0, 0]), np.array([0, 0, 0, np.inf, 0, 0, 0])):
        with pytest.raises(SafetyError):
            env.step(bad)
    assert len(robot.commands) == n + 2  # the last safe target was re-sent, nothing else
    for pos, quat, _ in robot.commands[n:]:
        np.testing.assert_array_equal(pos, held[0])
        np.testing.assert_array_equal(quat, held[1])
    with pytest.raises(ShapeError):
        env.step(np.zeros(6))
    env.step(np.zeros(7))  # the episode goes on


def test_success_terminates_with_reward_and_info() -> None:
    env, robot = make("state")
    _, info = env.reset(seed=5)
    assert info["success"] is False
    expert = ScriptedExpert("reach", seed=0)
    for _ in range(env.max_episode_steps):
        assert env.last_state is not None
        _, reward, terminated, truncated, info = env.step(expert.act(env.last_state))
        assert isinstance(info["success"], bool)
        if terminated or truncated:
            break
    assert terminated and not truncated and info["success"] and reward == 1.0
    assert np.linalg.norm(robot.pos - robot.goal) <= 0.02
    assert "timing" in info
    with pytest.raises(ResetNeeded):
        env.step(np.zeros(7))


def test_truncated_at_max_steps() -> None:
    env, robot = make("state", max_episode_steps=5)
    env.reset(seed=0)
    robot.goal = np.array([10.0, 10.0, 10.0])  # unreachable
    flags = [env.step(np.zeros(7))[2:4] for _ in range(5)]  # (terminated, truncated)
    assert flags[:4] == [(False, False)] * 4 and flags[4] == (False, True)


def test_step_before_reset_raises() -> None:
    env, _ = make("state")
    with pytest.raises(ResetNeeded):
        env.step(np.zeros(7))


def test_gripper_threshold_and_debounce() -> None:
    import dataclasses

    robot = FakeRobot()  # a free gripper (reach's is locked open)
    env = RobotEnv(robot, dataclasses.replace(get_task("reach"), gripper_locked=False), None,
                   RobotEnvConfig(obs_mode="state", gripper_debounce_steps=2))
    env.reset(seed=0)
    seq = [0.3, 0.6, -0.6, -0.6, -0.6, 0.0, 1.0, 1.0, 1.0]
    got = []
    for g in seq:
        env.step(np.array([0, 0, 0, 0, 0, 0, g]))
        got.append(robot.commands[-1][2])
    # 0.3 keeps open; 0.6 closes; open is refused for 2 steps after the change; 0.0 keeps; close waits again
    assert got == [0.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 1.0, 1.0]


def test_a_locked_gripper_ignores_the_action() -> None:
    """A task with gripper_locked (peg insertion) keeps its reset command whatever the gripper dim says."""
    import dataclasses

    task = dataclasses.replace(get_task("pick_cube"), reset_gripper_closed=1.0, gripper_locked=True)
    env = RobotEnv(FakeRobot(), task, None, RobotEnvConfig(obs_mode="state", gripper_debounce_steps=0))
    robot = env.robot
    assert isinstance(robot, FakeRobot)
    env.reset(seed=0)
    changed = []
    for g in (-1.0, -1.0, 0.0, 1.0, -1.0):
        _, _, _, _, info = env.step(np.array([0, 0, 0, 0, 0, 0, g]))
        changed.append(info["gripper_changed"])
        assert robot.commands[-1][2] == 1.0
    assert not any(changed)
    # the same task unlocked opens on the first -1
    env2 = RobotEnv(FakeRobot(), dataclasses.replace(task, gripper_locked=False), None,
                    RobotEnvConfig(obs_mode="state", gripper_debounce_steps=0))
    env2.reset(seed=0)
    env2.step(np.array([0, 0, 0, 0, 0, 0, -1.0]))
    assert env2.robot.commands[-1][2] == 0.0  # type: ignore[attr-defined]
    assert get_task("peg_insert").gripper_locked and not get_task("pick_cube").gripper_locked
    assert get_task("reach").gripper_locked and get_task("reach").reset_gripper_closed == 0.0  # grasps nothing


def test_state_mode_never_reads_cameras() -> None:
    robot = FakeRobot()
    env = RobotEnv(robot, "reach", NoCameras(), RobotEnvConfig(obs_mode="state"))
    env.reset(seed=0)
    for _ in range(5):
        env.step(env.action_space.sample())
    env.close()
    assert robot.stopped


def test_realtime_mode_paces_the_loop_and_reports_jitter() -> None:
    env, robot = make("state", realtime=True, control_hz=100.0, max_episode_steps=1000)
    env.reset(seed=0)
    t_robot = robot.t
    t0 = time.perf_counter()
    for _ in range(20):
        _, _, _, _, info = env.step(np.zeros(7))
        assert info["jitter_ms"] >= 0.0  # a deadline is never met early
    # the env slept to each deadline: 20 periods of 10 ms cannot pass in less than 200 ms
    assert time.perf_counter() - t0 >= 20 * 0.01
    assert robot.t - t_robot < 20 * 0.01  # and asked the robot only for the rest of each period
    stats = env.timing_stats()
    assert stats["steps"] == 20 and stats["realtime"]
    assert 0.0 <= stats["jitter_ms_p50"] <= stats["jitter_ms_p99"] <= stats["jitter_ms_max"]
    assert stats["overruns"] >= 0


def test_not_realtime_lets_the_robot_simulate_and_never_sleeps(monkeypatch: pytest.MonkeyPatch) -> None:
    import envs.env_timing

    def no_sleep(*_: object) -> None:
        raise AssertionError("a simulated (not realtime) env must not sleep")

    monkeypatch.setattr(envs.env_timing, "sleep_until", no_sleep)
    monkeypatch.setattr(envs.env_timing.time, "sleep", no_sleep)
    env, robot = make("state", max_episode_steps=1000)
    env.reset(seed=0)
    t_robot = robot.t
    for _ in range(50):
        _, _, _, _, info = env.step(np.zeros(7))
        assert info["jitter_ms"] == 0.0
    assert robot.t == pytest.approx(t_robot + 50 * 0.1)  # robot.wait(period) each step
    stats = env.timing_stats()
    assert "jitter_ms_p50" not in stats and stats["steps"] == 50


def test_config_validation() -> None:
    with pytest.raises(ConfigError, match="obs_mode"):
        RobotEnvConfig(obs_mode="rgb")
    with pytest.raises(ConfigError, match="action_scale_m"):
        RobotEnvConfig(action_scale_m=0.0)
    with pytest.raises(ConfigError, match="home_q_rad"):
        RobotEnvConfig(home_q_rad=(0.0,) * 6)
    cfg = RobotEnvConfig(image_size=64, camera_names=("front",))
    assert RobotEnvConfig.from_dict(cfg.to_dict()) == cfg


def test_pick_cube_success_rule() -> None:
    task = PickCubeTask()
    robot = FakeRobot()
    s = robot.state()
    s.pos_base_ee = np.array([0.5, 0.0, 0.08])
    s.objects = {"cube_pos": np.array([0.5, 0.0, 0.075]), "cube_quat": np.array([1.0, 0, 0, 0])}
    s.gripper_width_m = 0.039
    assert task.success(s)
    s.gripper_width_m = 0.08  # not closed: not held
    assert not task.success(s)
    s.gripper_width_m = 0.039
    s.objects["cube_pos"] = np.array([0.5, 0.0, 0.065])  # bottom only 4.5 cm up
    assert not task.success(s)
    obs = task.object_obs(s, np.array([0.5, 0.0, 0.0]))
    assert obs.shape == (7,) and obs.dtype == np.float32
