"""TwinRobot: the impedance-controlled twin behind the Robot seam (API, contact force bound, step responses,
force/torque reading, determinism)."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

from controllers.transforms import axis_angle_to_quat, orientation_error, quat_mul, quat_to_mat
from envs.robot import Robot, RobotState
from envs.twin import TwinRobot, TwinRobotConfig
from robot_rl.errors import ConfigError, RobotError, SafetyError


def _robot(task: str = "reach", **kw: object) -> TwinRobot:
    return TwinRobot(TwinRobotConfig(task=task, render=False, **kw))  # type: ignore[arg-type]


def _table_contact_force_world(robot: TwinRobot) -> np.ndarray:
    """Sum of the contact forces the table exerts on the robot (world frame, N)."""
    m, d = robot.model, robot.data
    table = m.geom("table").id
    total = np.zeros(3)
    f = np.zeros(6)
    for i in range(d.ncon):
        c = d.contact[i]
        if table not in (c.geom1, c.geom2):
            continue
        other = c.geom2 if c.geom1 == table else c.geom1
        assert m.body(m.geom_bodyid[other]).name in ("hand", "finger_left", "finger_right")
        mujoco.mj_contactForce(m, d, i, f)
        on_geom2 = c.frame.reshape(3, 3).T @ f[:3]  # contact frame -> world: force of geom1 on geom2
        total += on_geom2 if c.geom2 != table else -on_geom2
    return total


def test_config_validates_and_round_trips() -> None:
    cfg = TwinRobotConfig(task="pick_cube", physics_hz=1000.0, image_height=64)
    assert TwinRobotConfig.from_dict(cfg.to_dict()) == cfg
    with pytest.raises(ConfigError, match="task"):
        TwinRobotConfig(task="juggle")
    with pytest.raises(ConfigError, match="physics_hz"):
        TwinRobotConfig(physics_hz=0.0)
    with pytest.raises(ConfigError, match="camera_names"):
        TwinRobotConfig(camera_names=("front", "top"))
    with pytest.raises(ConfigError, match="home_q_rad"):
        TwinRobotConfig(home_q_rad=(0.0,) * 7)  # joint 4 must be negative


def test_state_snapshot_at_home() -> None:
    robot = _robot()
    assert isinstance(robot, Robot)
    s = robot.state()
    assert isinstance(s, RobotState)
    np.testing.assert_allclose(s.q_rad, robot.config.home_q_rad)
    np.testing.assert_allclose(s.pos_base_ee, [0.30689, 0.0, 0.48688], atol=1e-5)
    np.testing.assert_allclose(s.quat_base_ee, [0.0, 1.0, 0.0, 0.0], atol=1e-9)  # pointing down
    assert s.gripper_width_m == pytest.approx(0.08)
    for arr, shape in ((s.q_rad, (7,)), (s.dq_rad_per_s, (7,)), (s.twist_ee_body, (6,)), (s.force_ee_n, (3,)),
                       (s.torque_ee_nm, (3,)), (s.tau_j_nm, (7,))):
        assert arr.shape == shape and arr.dtype == np.float64
    assert set(s.objects) == {"goal_pos"} and s.error == ""
    s.q_rad[:] = 0.0  # a copy: the robot is unaffected
    assert robot.state().q_rad[3] != 0.0
    # holding still: gravity is compensated exactly, no drift, no external wrench
    robot.wait(0.5)
    s2 = robot.state()
    assert s2.time_s == pytest.approx(0.5)
    np.testing.assert_allclose(s2.pos_base_ee, s.pos_base_ee, atol=1e-5)
    assert np.abs(s2.force_ee_n).max() < 0.05 and np.abs(s2.torque_ee_nm).max() < 0.01


@pytest.mark.parametrize("physics_hz", [500.0, 1000.0])
def test_translation_step_settles_without_overshoot(physics_hz: float) -> None:
    robot = _robot(physics_hz=physics_hz)
    s0 = robot.state()
    for axis, sign in ((0, 1.0), (1, -1.0), (2, 1.0)):
        robot.reset_joints(np.asarray(robot.config.home_q_rad))
        target = s0.pos_base_ee.copy()
        target[axis] += sign * 0.05
        robot.command(target, s0.quat_base_ee, 0.0)
        err = []
        for _ in range(150):
            robot.wait(0.01)
            err.append(sign * (robot.state().pos_base_ee[axis] - target[axis]))
        e = np.array(err)
        assert e.max() < 0.005, f"axis {axis}: overshoot {e.max()}"
        assert np.all(np.abs(e[-20:]) < 0.002), f"axis {axis}: not settled within 2 mm after 1.3 s"
        other = np.delete(robot.state().pos_base_ee - target, axis)
        assert np.abs(other).max() < 0.002


def test_rotation_step_settles_without_overshoot() -> None:
    robot = _robot()
    s0 = robot.state()
    for axis in (np.array([0.0, 0.0, 1.0]), np.array([1.0, 0.0, 0.0])):
        robot.reset_joints(np.asarray(robot.config.home_q_rad))
        target = quat_mul(axis_angle_to_quat(0.2 * axis), s0.quat_base_ee)
        robot.command(s0.pos_base_ee, target, 0.0)
        err = []
        for _ in range(150):
            robot.wait(0.01)
            err.append(orientation_error(robot.state().quat_base_ee, target) @ axis)
        e = np.array(err)  # starts at -0.2 rad
        assert e.max() < 0.02, f"rotation overshoot {e.max()}"
        assert np.all(np.abs(e[-20:]) < 0.01)
        assert np.linalg.norm(robot.state().pos_base_ee - s0.pos_base_ee) < 0.003


@pytest.mark.parametrize("physics_hz", [500.0, 1000.0])
def test_pressing_into_the_table_is_force_bounded(physics_hz: float) -> None:
    """Target 10 cm inside the table under the compliance profile: the contact force is bounded by
    stiffness x clip = 2000 N/m x 0.01 m = 20 N (+10%), and the wrist F/T reads it."""
    robot = _robot(physics_hz=physics_hz)
    robot.set_gains("compliance")
    q_down = robot.state().quat_base_ee
    robot.command(np.array([0.45, 0.0, 0.05]), q_down, 1.0)
    robot.wait(2.0)
    s = robot.state()
    assert np.linalg.norm(_table_contact_force_world(robot)) == 0.0
    assert np.abs(s.force_ee_n).max() < 0.1  # free space: ~0 (a slow arm, hand weight removed)
    robot.command(np.array([0.45, 0.0, -0.1]), q_down, 1.0)
    robot.wait(1.5)
    forces = []
    for _ in range(5):
        robot.wait(0.1)
        forces.append(_table_contact_force_world(robot))
        s = robot.state()
        # the F/T sensor reads the table's push: along -z of the TCP frame (z points down into the table)
        np.testing.assert_allclose(s.force_ee_n, quat_to_mat(s.quat_base_ee).T @ forces[-1], atol=0.5)
        assert s.force_ee_n[2] < -15.0
    f = np.array(forces)
    assert np.all(f[:, 2] > 15.0), f"not pressing: {f[:, 2]}"
    assert np.all(np.linalg.norm(f, axis=1) <= 22.0), f"contact force above K * clip: {f}"
    assert s.pos_base_ee[2] > 0.0  # the fingertips rest on the table


def test_bad_commands_raise_and_keep_the_target() -> None:
    robot = _robot()
    s = robot.state()
    target = s.pos_base_ee + np.array([0.02, 0.0, 0.0])
    robot.command(target, s.quat_base_ee, 0.0)
    for pos, quat, grip in (([np.nan, 0, 0.3], s.quat_base_ee, 0.0), (s.pos_base_ee[:2], s.quat_base_ee, 0.0),
                            (s.pos_base_ee, [1.0, 0.0, 0.0], 0.0), (s.pos_base_ee, [0, 0, 0, 0], 0.0),
                            (s.pos_base_ee, s.quat_base_ee, np.inf), (s.pos_base_ee, [np.inf, 0, 0, 1], 0.0),
                            ("abc", s.quat_base_ee, 0.0)):
        with pytest.raises(SafetyError):
            robot.command(pos, np.asarray(quat), grip)  # type: ignore[arg-type]
    np.testing.assert_allclose(robot.controller.commanded_pos, target)
    with pytest.raises(SafetyError):
        robot.wait(float("nan"))
    with pytest.raises(SafetyError):
        robot.reset_joints(np.zeros(7))  # joint 4 outside its limits
    with pytest.raises(ConfigError, match="profile"):
        robot.set_gains("floppy")
    robot.set_gains("precision")
    assert robot.gains_profile == "precision"


def test_stop_refuses_commands_and_cameras() -> None:
    robot = _robot()
    s = robot.state()
    robot.command(s.pos_base_ee + np.array([0, 0, 0.05]), s.quat_base_ee, 0.0)
    robot.wait(0.05)
    robot.stop()
    held = robot.state().pos_base_ee
    with pytest.raises(RobotError, match="stopped"):
        robot.command(s.pos_base_ee, s.quat_base_ee, 0.0)
    robot.wait(0.5)  # holds the pose where stop() found it
    np.testing.assert_allclose(robot.state().pos_base_ee, held, atol=0.01)
    with pytest.raises(ConfigError, match="render"):
        robot.cameras()


def test_reset_joints_teleports_and_holds() -> None:
    robot = _robot()
    q = np.array([0.3, -0.5, 0.1, -2.2, 0.0, 1.8, 0.5])
    robot.wait(0.2)
    robot.reset_joints(q)
    s = robot.state()
    np.testing.assert_allclose(s.q_rad, q)
    assert np.all(s.dq_rad_per_s == 0.0)
    robot.wait(1.0)
    s2 = robot.state()
    np.testing.assert_allclose(s2.pos_base_ee, s.pos_base_ee, atol=2e-3)
    np.testing.assert_allclose(robot.controller.commanded_pos, s.pos_base_ee)


def test_gripper_opens_and_closes() -> None:
    robot = _robot()
    s = robot.state()
    robot.command(s.pos_base_ee, s.quat_base_ee, 1.0)
    robot.wait(0.6)
    assert robot.state().gripper_width_m < 0.002
    robot.command(s.pos_base_ee, s.quat_base_ee, 0.5)
    robot.wait(0.6)
    assert robot.state().gripper_width_m == pytest.approx(0.04, abs=0.002)
    robot.command(s.pos_base_ee, s.quat_base_ee, 0.0)
    robot.wait(0.6)
    assert robot.state().gripper_width_m == pytest.approx(0.08, abs=0.002)


def _run(robot: TwinRobot, seed: int) -> list[RobotState]:
    robot.reset_scene(seed)
    rng = np.random.default_rng(seed)
    s0 = robot.state()
    out = []
    for _ in range(8):
        robot.command(s0.pos_base_ee + rng.uniform(-0.05, 0.05, 3), s0.quat_base_ee, float(rng.integers(2)))
        robot.wait(0.1)
        out.append(robot.state())
    return out


def _same(a: RobotState, b: RobotState) -> bool:
    for name in ("q_rad", "dq_rad_per_s", "pos_base_ee", "quat_base_ee", "twist_ee_body", "force_ee_n",
                 "torque_ee_nm", "tau_j_nm"):
        if not np.array_equal(getattr(a, name), getattr(b, name)):
            return False
    return (a.time_s == b.time_s and a.gripper_width_m == b.gripper_width_m and a.objects.keys() == b.objects.keys()
            and all(np.array_equal(a.objects[k], b.objects[k]) for k in a.objects))


@pytest.mark.parametrize("task", ["pick_cube", "peg_insert"])
def test_same_seed_and_commands_give_identical_states(task: str) -> None:
    a, b = _run(_robot(task), 3), _run(_robot(task), 3)
    assert all(_same(x, y) for x, y in zip(a, b, strict=True))
    c = _run(_robot(task), 4)
    assert not _same(a[-1], c[-1])


def test_divergence_is_reported_and_recovered() -> None:
    robot = _robot("pick_cube")
    robot.wait(0.1)
    robot.data.qvel[0] = 1e11  # a blown-up simulation: MuJoCo resets its data
    robot.wait(0.1)
    s = robot.state()
    assert "diverged" in s.error
    np.testing.assert_allclose(s.q_rad, robot.config.home_q_rad)  # re-homed
    assert np.all(np.isfinite(s.dq_rad_per_s))
    with pytest.raises(RobotError, match="error state"):
        robot.command(s.pos_base_ee, s.quat_base_ee, 0.0)
    robot.clear_errors()
    assert robot.state().error == ""
    robot.command(s.pos_base_ee, s.quat_base_ee, 0.0)
    robot.wait(0.2)
    np.testing.assert_allclose(robot.state().pos_base_ee, s.pos_base_ee, atol=1e-3)
    robot.data.qvel[0] = np.nan  # NaN straight into the state: the controller refuses it, same recovery
    robot.wait(0.1)
    assert "diverged" in robot.state().error
    np.testing.assert_allclose(robot.state().q_rad, robot.config.home_q_rad)
