"""Resets the robot does itself (envs.resets run by RobotEnv.reset): routines as data, the pick-cube routine on the
twin putting a held cube back into its start region without a teleport, and a reset that does not settle stopping
the run after its retries."""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("gymnasium")

from controllers.transforms import axis_angle_to_quat, quat_mul
from envs.env import RobotEnv, RobotEnvConfig
from envs.resets import ROUTINES, ResetStep, check_routine
from envs.robot import RobotState
from robot_rl.errors import ConfigError, ResetError

pytestmark = pytest.mark.filterwarnings("ignore:.*Box observation space m.*:UserWarning")


def test_routines_are_checked_data() -> None:
    for steps in ROUTINES.values():
        check_routine(steps)
    with pytest.raises(ConfigError, match=r"step 1 \('jump'\)"):
        check_routine((ResetStep("wait"), ResetStep("jump")))
    with pytest.raises(ConfigError, match=r"then step 0.*wait_s=-1"):
        check_routine((ResetStep("if_held", then=(ResetStep("wait", wait_s=-1.0),)),))
    with pytest.raises(ConfigError, match="needs frame 'base'"):
        check_routine((ResetStep("move", pos_m=(None, 0.0, 0.0), frame="tcp"),))


class BlockedRobot:
    """A kinematic arm that cannot get below z = `floor_m` (an obstacle under the hand); counts its moves."""

    def __init__(self, floor_m: float) -> None:
        self.floor_m = floor_m
        self.pos = np.array([0.45, 0.0, 0.45])
        self.quat = quat_mul(axis_angle_to_quat(np.array([0.0, 0.0, math.pi / 4])), np.array([0.0, 1.0, 0.0, 0.0]))
        self.target = self.pos.copy()
        self.t = 0.0
        self.joint_resets = 0

    def state(self) -> RobotState:
        z3, z7 = np.zeros(3), np.zeros(7)
        return RobotState(self.t, z7, z7, self.pos.copy(), self.quat.copy(), np.zeros(6), 0.08, z3, z3, z7)

    def command(self, pos: np.ndarray, quat: np.ndarray, gripper_closed: float) -> None:
        self.target = np.asarray(pos, float).copy()
        self.quat = np.asarray(quat, float).copy()

    def wait(self, duration_s: float) -> None:
        self.pos = np.array([self.target[0], self.target[1], max(self.target[2], self.floor_m)])
        self.t += duration_s

    def set_gains(self, profile: str) -> None:
        pass

    def reset_joints(self, q: np.ndarray) -> None:
        self.joint_resets += 1

    def reset_scene(self, seed: int | None = None) -> None:
        pass

    def clear_errors(self) -> None:
        pass

    def stop(self) -> None:
        pass


def test_a_reset_that_does_not_settle_is_retried_then_stops_the_run() -> None:
    cfg = RobotEnvConfig(obs_mode="state", reset_timeout_s=0.5, reset_retries=2, reset_noise_m=0.0,
                         reset_noise_rad=0.0)
    robot = BlockedRobot(floor_m=0.40)  # reach's reset pose is at z = 0.40: reachable
    env = RobotEnv(robot, "reach", None, cfg)
    _, info = env.reset(seed=0)
    assert info["reset_settled"]
    robot.floor_m = 0.43  # now something is in the way, 3 cm above the reset pose
    t0, joint_resets = robot.t, robot.joint_resets
    with pytest.raises(ResetError, match=r"reset pose did not settle after 3 tries of 0.5 s \(TCP 3.0 cm"):
        env.reset()
    assert robot.t - t0 == pytest.approx(3 * 0.5, abs=0.11)  # three full tries, not one
    assert robot.joint_resets - joint_resets == 2 == env.reset_retry_count  # a joint reset before each retry
    # with the obstacle gone the same env resets again
    robot.floor_m = 0.0
    _, info = env.reset()
    assert info["reset_settled"]


def test_pick_cube_routine_puts_a_held_cube_back_without_a_teleport() -> None:
    pytest.importorskip("mujoco")
    from envs.env import make_twin_env
    from envs.twin.experts import ScriptedExpert
    from envs.twin.model import CUBE_XY_HIGH, CUBE_XY_LOW

    env = make_twin_env("pick_cube", obs_mode="state", faithful=True)
    robot = env.robot
    teleports = []
    real_reset_scene = robot.reset_scene
    robot.reset_scene = lambda seed=None: (teleports.append(seed), real_reset_scene(seed))  # type: ignore[method-assign]
    expert = ScriptedExpert("pick_cube", seed=0)
    spots = []
    env.reset(seed=0)
    for _ in range(3):
        expert.reset()
        for _ in range(60):  # the expert lifts the cube (true success: held 5 cm up); the faithful env goes on
            _, reward, terminated, _, info = env.step(expert.act(env.last_state))
            assert reward == 0.0 and not terminated
            if info["success"]:
                break
        assert info["success"] and env.last_state.gripper_width_m < 0.06  # held in the closed hand
        env.reset()
        s = env.last_state
        cube = s.objects["cube_pos"]
        # back on the table inside the start region, the hand open at the reset pose, and no teleport
        assert np.all(cube[:2] >= CUBE_XY_LOW) and np.all(cube[:2] <= CUBE_XY_HIGH) and abs(cube[2] - 0.02) < 0.003
        assert s.gripper_width_m > 0.07 and np.linalg.norm(s.pos_base_ee - np.array([0.5, 0.0, 0.25])) < 0.04
        spots.append(cube[:2].copy())
    assert len(teleports) == 1 == env.scene_teleports
    assert min(np.linalg.norm(a - b) for i, a in enumerate(spots) for b in spots[i + 1:]) > 0.005  # random spots
    env.close()


def test_joint_reset_every_n_episodes_comes_after_the_routine() -> None:
    cfg = RobotEnvConfig(obs_mode="state", scene_resets="first", joint_reset_every=2, joint_reset_on_seed=False)
    robot = BlockedRobot(floor_m=0.0)
    events: list[str] = []
    real_reset_joints, real_reset_scene = robot.reset_joints, robot.reset_scene
    robot.reset_joints = lambda q: (events.append("joints"), real_reset_joints(q))  # type: ignore[method-assign]
    robot.reset_scene = lambda seed=None: (events.append("scene"), real_reset_scene(seed))  # type: ignore[method-assign]
    env = RobotEnv(robot, "reach", None, cfg)
    real_routine = env._run_routine
    env._run_routine = lambda steps, rng: (events.append("routine"), real_routine(steps, rng))  # type: ignore
    for episode in range(5):
        events.append(f"reset {episode}")
        env.reset()
        env.step(np.zeros(7, np.float32))
    assert events == ["reset 0", "joints", "scene", "reset 1", "routine", "reset 2", "routine", "joints",
                      "reset 3", "routine", "reset 4", "routine", "joints"]
    assert env.scene_teleports == 1 and robot.joint_resets == 3
