"""The twin's MJCF scenes: they compile, survive random torques, and their kinematics match the modified-DH
Panda (controllers.kinematics) exactly."""

from __future__ import annotations

import math

import mujoco
import numpy as np
import pytest

from controllers.kinematics import PANDA_HOME_Q, PANDA_Q_MAX, PANDA_Q_MIN, panda_fk, panda_jacobian
from envs.twin import TWIN_TASKS, build_model
from envs.twin.model import (
    CUBE_HALF_SIZE_M,
    GRIPPER_FORCE_LIMIT_N,
    GRIPPER_MAX_WIDTH_M,
    HOLE_DEPTH_M,
    HOLE_HALF_WIDTH_M,
    PEG_HALF_WIDTH_M,
    PEG_LENGTH_M,
)
from robot_rl.errors import ConfigError, UnknownTaskError

# TCP of the home pose: flange at (0.3069, 0, 0.5903) (DH), TCP 0.1034 m below it, pointing down
HOME_TCP = np.array([0.30689057, 0.0, 0.48688205])


@pytest.mark.parametrize("task", TWIN_TASKS)
def test_scene_compiles_and_survives_random_torques(task: str) -> None:
    model = build_model(task, image_height=64, image_width=96)
    assert (model.vis.global_.offheight, model.vis.global_.offwidth) == (64, 96)
    assert model.vis.quality.shadowsize == 0 and model.vis.quality.offsamples == 0
    assert model.opt.integrator == mujoco.mjtIntegrator.mjINT_IMPLICITFAST
    data = mujoco.MjData(model)
    data.qpos[:7] = PANDA_HOME_Q
    mujoco.mj_forward(model, data)
    rng = np.random.default_rng(0)
    low, high = model.actuator_ctrlrange[:, 0], model.actuator_ctrlrange[:, 1]
    n = round(1.0 / model.opt.timestep)
    for i in range(n):
        if i % 20 == 0:  # a new random torque (and gripper width) every 20 ms
            data.ctrl[:] = rng.uniform(low, high)
        mujoco.mj_step(model, data)
    assert [int(w.number) for w in data.warning] == [0] * len(data.warning)
    assert np.all(np.isfinite(data.qpos)) and np.all(np.isfinite(data.qvel))
    assert data.time == pytest.approx(1.0)


def test_unknown_task_and_bad_sizes_are_refused() -> None:
    with pytest.raises(UnknownTaskError, match="known"):
        build_model("stack_blocks")
    with pytest.raises(ConfigError, match="image_width"):
        build_model("reach", image_width=0)


def test_actuators_match_the_panda() -> None:
    model = build_model("reach")
    limits = [model.actuator(f"motor{i}").ctrlrange[1] for i in range(1, 8)]
    assert limits == [87.0, 87.0, 87.0, 87.0, 12.0, 12.0, 12.0]
    grip = model.actuator("gripper")
    assert tuple(grip.ctrlrange) == (0.0, GRIPPER_MAX_WIDTH_M)
    assert tuple(grip.forcerange) == (-GRIPPER_FORCE_LIMIT_N, GRIPPER_FORCE_LIMIT_N)
    for j in range(1, 8):
        lo, hi = model.joint(f"joint{j}").range
        assert (lo, hi) == pytest.approx((PANDA_Q_MIN[j - 1], PANDA_Q_MAX[j - 1]))
    masses = [model.body(f"link{i}").mass[0] for i in range(1, 8)]
    assert masses == pytest.approx([4.97, 0.65, 3.23, 3.59, 1.23, 1.67, 0.74])
    assert model.body("hand").subtreemass[0] == pytest.approx(0.76)


def test_task_geometry_matches_the_constants() -> None:
    cube = build_model("pick_cube").geom("cube_geom")
    assert cube.size == pytest.approx([CUBE_HALF_SIZE_M] * 3)
    m = build_model("peg_insert")
    peg = m.geom("peg_geom")
    assert peg.size == pytest.approx([PEG_HALF_WIDTH_M, PEG_HALF_WIDTH_M, PEG_LENGTH_M / 2])
    assert peg.pos == pytest.approx([0, 0, PEG_LENGTH_M / 2])  # body frame at the bottom face
    # the four walls leave a square hole of half-width HOLE_HALF_WIDTH_M, HOLE_DEPTH_M deep
    px, py = m.geom("fixture_px"), m.geom("fixture_py")
    assert px.pos[0] - px.size[0] == pytest.approx(HOLE_HALF_WIDTH_M)
    assert py.pos[1] - py.size[1] == pytest.approx(HOLE_HALF_WIDTH_M)
    assert py.size[0] == pytest.approx(HOLE_HALF_WIDTH_M)
    for name in ("fixture_px", "fixture_nx", "fixture_py", "fixture_ny"):
        g = m.geom(name)
        assert g.pos[2] + g.size[2] == pytest.approx(HOLE_DEPTH_M)
        assert g.pos[2] - g.size[2] == pytest.approx(0.0)
    assert HOLE_HALF_WIDTH_M - PEG_HALF_WIDTH_M == pytest.approx(0.001)  # 1 mm radial clearance


def test_tcp_and_flange_match_the_modified_dh_fk() -> None:
    model = build_model("reach")
    data = mujoco.MjData(model)
    tcp, flange = model.site("tcp").id, model.site("flange").id
    rng = np.random.default_rng(1)
    for _ in range(30):
        q = rng.uniform(PANDA_Q_MIN, PANDA_Q_MAX)
        data.qpos[:7] = q
        mujoco.mj_kinematics(model, data)
        pos, R = panda_fk(q)
        np.testing.assert_allclose(data.site_xpos[tcp], pos, atol=1e-6)
        np.testing.assert_allclose(data.site_xmat[tcp].reshape(3, 3), R, atol=1e-6)
        pos_f, R_f = panda_fk(q, tcp_offset_m=0.0, tcp_yaw_rad=0.0)
        np.testing.assert_allclose(data.site_xpos[flange], pos_f, atol=1e-6)
        np.testing.assert_allclose(data.site_xmat[flange].reshape(3, 3), R_f, atol=1e-6)


def test_jacobian_matches_finite_differences_and_dh() -> None:
    model = build_model("reach")
    data = mujoco.MjData(model)
    tcp = model.site("tcp").id
    rng = np.random.default_rng(2)
    eps = 1e-6
    for _ in range(5):
        q = rng.uniform(np.array(PANDA_Q_MIN) + 0.01, np.array(PANDA_Q_MAX) - 0.01)
        data.qpos[:7] = q
        mujoco.mj_kinematics(model, data)
        mujoco.mj_comPos(model, data)
        jacp, jacr = np.zeros((3, model.nv)), np.zeros((3, model.nv))
        mujoco.mj_jacSite(model, data, jacp, jacr, tcp)
        J = np.vstack([jacp, jacr])[:, :7]
        p0, R0 = data.site_xpos[tcp].copy(), data.site_xmat[tcp].reshape(3, 3).copy()
        fd = np.zeros((6, 7))
        for i in range(7):
            data.qpos[:7] = q
            data.qpos[i] += eps
            mujoco.mj_kinematics(model, data)
            fd[:3, i] = (data.site_xpos[tcp] - p0) / eps
            dR = data.site_xmat[tcp].reshape(3, 3) @ R0.T  # ~ I + [w] eps
            fd[3:, i] = np.array([dR[2, 1] - dR[1, 2], dR[0, 2] - dR[2, 0], dR[1, 0] - dR[0, 1]]) / (2 * eps)
        np.testing.assert_allclose(J, fd, atol=1e-5)
        np.testing.assert_allclose(J, panda_jacobian(q), atol=1e-9)


def test_home_pose_points_down_at_the_expected_tcp() -> None:
    model = build_model("reach")
    data = mujoco.MjData(model)
    data.qpos[:7] = PANDA_HOME_Q
    mujoco.mj_kinematics(model, data)
    np.testing.assert_allclose(data.site_xpos[model.site("tcp").id], HOME_TCP, atol=1e-6)
    np.testing.assert_allclose(data.site_xpos[model.site("flange").id], HOME_TCP + np.array([0, 0, 0.1034]), atol=1e-6)
    R = data.site_xmat[model.site("tcp").id].reshape(3, 3)
    np.testing.assert_allclose(R, np.diag([1.0, -1.0, -1.0]), atol=1e-9)  # z down, x forward
    assert math.isclose(HOME_TCP[2], 0.59 - 0.1034, abs_tol=0.005)
