"""Safety on hardware, tested against the twin (and the robot server over it): the env's bounded lead in contact,
the server-side guard (workspace box, wrench limit, joint and velocity margins), the e-stop (a call and
SIGINT / SIGTERM on the server) and the actor's hold before the first weights."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from envs.env import RobotEnv, RobotEnvConfig
from envs.tasks import Task


def _press_env(**config: object) -> RobotEnv:
    """The twin's reach scene (its table top is z = 0) with a box that lets the target go 5 cm into the table."""
    from envs.twin import TwinRobot, TwinRobotConfig

    task = Task(name="press", twin_task="reach", reset_pos_m=(0.45, 0.0, 0.03), pos_min_m=(0.25, -0.3, -0.05),
                pos_max_m=(0.7, 0.3, 0.5), max_episode_steps=100)
    robot = TwinRobot(TwinRobotConfig(task="reach", render=False))
    return RobotEnv(robot, task, None, RobotEnvConfig(obs_mode="state", reset_noise_m=0.0, reset_noise_rad=0.0,
                                                      **config))  # type: ignore[arg-type]


@pytest.mark.parametrize("bounded", [True, False])
def test_pressing_on_the_table_keeps_the_target_near_the_arm(bounded: bool) -> None:
    """20 steps of 'down' from 3 cm above the table: with the bounded lead (the default) the target stays within
    the controller's error clip (1 cm per axis) of the measured TCP at every step in contact, the contact force
    stays ~K * clip (20 N), and 'up' starts lifting the arm at once (measured 2.9 mm in 3 steps; the twin's target
    filter slows the start). Unbounded (delta on the commanded pose, max_lead_m=0) the target winds 5 cm into the
    table, to the box edge, and 3 steps of 'up' do not lift it at all: the failure this guards against."""
    env = _press_env(**({} if bounded else {"max_lead_m": 0.0, "max_lead_rad": 0.0}))
    try:
        env.reset(seed=0)
        down = np.zeros(7, np.float32)
        down[2] = -1.0
        leads, forces = [], []
        for _ in range(20):
            before = env.last_state  # the measurement the step's target is bounded against
            assert before is not None
            env.step(down)
            leads.append(float(np.max(np.abs(env.commanded_pose[0] - before.pos_base_ee))))
            assert env.last_state is not None
            forces.append(float(np.linalg.norm(env.last_state.force_ee_n)))
        s = env.last_state
        assert s is not None and s.pos_base_ee[2] < 0.015 and forces[-1] > 10.0  # the fingers press on the table
        cmd_z_pressed = env.commanded_pose[0][2]
        in_contact = [lead for lead, f in zip(leads, forces, strict=True) if f > 10.0]
        assert len(in_contact) >= 15
        up = np.zeros(7, np.float32)
        up[2] = 1.0
        z0 = s.pos_base_ee[2]
        for _ in range(3):  # 0.3 s of 'up'
            env.step(up)
        assert env.last_state is not None
        rise = env.last_state.pos_base_ee[2] - z0
        print(f"bounded={bounded}: max lead in contact {1e3 * max(in_contact[1:]):.2f} mm, force {forces[-1]:.1f} N, "
              f"rise after 3 up steps {1e3 * rise:.1f} mm")
        if bounded:
            assert max(in_contact[1:]) <= 0.01 + 1e-9  # from the first step that starts in contact
            assert 15.0 < forces[-1] < 25.0  # K * clip = 2000 N/m * 1 cm
            assert rise > 0.002  # lifts off at once
        else:
            assert cmd_z_pressed == pytest.approx(-0.05) and leads[-1] > 0.04  # wound 5 cm into the table
            assert rise < 0.002  # still pressing: the wound-up target is below the table
    finally:
        env.close()


def test_bounded_lead_leaves_free_motion_alone() -> None:
    """In free space the arm follows its target, so the bound does not act once the arm moves: the commanded
    path is exactly the one without the bound (at full action the target leads the arm by ~5-6 cm: its 0.2 s
    low-pass filter plus v D / K)."""
    paths = {}
    for bounded in (True, False):
        env = _press_env(**({} if bounded else {"max_lead_m": 0.0, "max_lead_rad": 0.0}))
        try:
            env.reset(seed=0)
            a = np.zeros(7, np.float32)
            a[0], a[1], a[2] = 1.0, -0.5, 1.0
            path = []
            for _ in range(10):
                env.step(a)
                path.append(env.commanded_pose[0])
            paths[bounded] = np.array(path)
        finally:
            env.close()
    np.testing.assert_allclose(paths[True], paths[False], atol=1e-12)


def test_bound_lead_math() -> None:
    from controllers.transforms import axis_angle_to_quat, quat_angle, quat_conj, quat_mul
    from envs.env import bound_lead

    q_meas = np.array([0.0, 1.0, 0.0, 0.0])
    q_tgt = quat_mul(axis_angle_to_quat(np.array([0.0, 0.0, 0.3])), q_meas)
    pos, quat = bound_lead(np.array([0.5, 0.0, 0.2]), -q_tgt, np.array([0.45, 0.0, 0.21]), q_meas, 0.01, 0.05)
    np.testing.assert_allclose(pos, [0.46, 0.0, 0.2])
    assert quat_angle(quat_mul(quat, quat_conj(q_meas))) == pytest.approx(0.05, abs=1e-9)
    assert float(np.dot(quat, -q_tgt)) > 0  # the target's sign is kept
    same = bound_lead(np.array([0.452, 0.0, 0.2]), q_meas, np.array([0.45, 0.0, 0.2]), q_meas, 0.01, 0.05)
    np.testing.assert_allclose(same[0], [0.452, 0.0, 0.2])
    assert dataclasses.is_dataclass(RobotEnvConfig()) and RobotEnvConfig().max_lead_m == 0.01
