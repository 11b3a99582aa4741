"""The twin's task scenes through TwinRobot: randomisation ranges, grasping the cube, the peg held at reset and
a compliant insertion into the 1 mm-clearance hole."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from controllers.transforms import axis_angle_to_quat, quat_angle, quat_mul
from envs.twin import TwinRobot, TwinRobotConfig
from envs.twin.model import (
    CUBE_HALF_SIZE_M,
    CUBE_XY_HIGH,
    CUBE_XY_LOW,
    FIXTURE_XY_HIGH,
    FIXTURE_XY_LOW,
    GOAL_HIGH,
    GOAL_LOW,
    HOLE_DEPTH_M,
    PEG_BOTTOM_PAST_TCP_M,
)


def _robot(task: str, physics_hz: float = 500.0) -> TwinRobot:
    return TwinRobot(TwinRobotConfig(task=task, render=False, physics_hz=physics_hz))


def test_reset_scene_draws_within_the_ranges() -> None:
    reach, cube, peg = _robot("reach"), _robot("pick_cube"), _robot("peg_insert")
    goals, cubes, holes = [], [], []
    for seed in range(20):
        reach.reset_scene(seed)
        goals.append(reach.state().objects["goal_pos"])
        cube.reset_scene(seed)
        o = cube.state().objects
        cubes.append(o["cube_pos"])
        assert o["cube_quat"][1:3] == pytest.approx([0.0, 0.0])  # yaw only
        peg.reset_scene(seed)
        holes.append(peg.state().objects["hole_pos"])
    g, c, h = np.array(goals), np.array(cubes), np.array(holes)
    assert np.all(g >= GOAL_LOW) and np.all(g <= GOAL_HIGH) and np.ptp(g, axis=0).min() > 0.05
    assert np.all(c[:, :2] >= CUBE_XY_LOW) and np.all(c[:, :2] <= CUBE_XY_HIGH)
    assert c[:, 2] == pytest.approx(np.full(20, CUBE_HALF_SIZE_M))
    assert np.all(h[:, :2] >= FIXTURE_XY_LOW) and np.all(h[:, :2] <= FIXTURE_XY_HIGH) and np.all(h[:, 2] == 0)
    reach.reset_scene(7)
    again = reach.state().objects["goal_pos"]
    np.testing.assert_array_equal(again, goals[7])


@pytest.mark.parametrize("physics_hz", [500.0, 1000.0])
def test_cube_rests_and_is_lifted_by_a_closed_gripper(physics_hz: float) -> None:
    robot = _robot("pick_cube", physics_hz)
    robot.reset_scene(1)
    robot.wait(0.5)
    s = robot.state()
    cube, cube_quat = s.objects["cube_pos"], s.objects["cube_quat"]
    assert cube[2] == pytest.approx(CUBE_HALF_SIZE_M, abs=5e-4)  # resting on the table
    # align the fingers with the cube's faces (its yaw modulo 90 deg)
    yaw = 2 * np.arctan2(cube_quat[3], cube_quat[0])
    yaw = (yaw + np.pi / 4) % (np.pi / 2) - np.pi / 4
    q_grasp = quat_mul(axis_angle_to_quat(np.array([0.0, 0.0, yaw])), s.quat_base_ee)
    robot.command(cube + np.array([0, 0, 0.1]), q_grasp, 0.0)
    robot.wait(1.5)
    robot.command(cube, q_grasp, 0.0)
    robot.wait(1.5)
    robot.command(robot.state().pos_base_ee, q_grasp, 1.0)
    robot.wait(0.6)
    width = robot.state().gripper_width_m
    assert width == pytest.approx(2 * CUBE_HALF_SIZE_M, abs=0.002)  # stopped by the cube
    robot.command(cube + np.array([0, 0, 0.15]), q_grasp, 1.0)
    robot.wait(2.0)
    s = robot.state()
    assert s.objects["cube_pos"][2] > 0.15  # it rose with the hand
    np.testing.assert_allclose(s.objects["cube_pos"], s.pos_base_ee, atol=0.003)
    assert s.force_ee_n[2] == pytest.approx(0.07 * 9.81, abs=0.1)  # its weight, along the TCP z (down)
    # opening drops it
    robot.command(s.pos_base_ee, q_grasp, 0.0)
    robot.wait(1.0)
    assert robot.state().objects["cube_pos"][2] == pytest.approx(CUBE_HALF_SIZE_M, abs=1e-3)


@pytest.mark.parametrize("physics_hz", [500.0, 1000.0])
def test_peg_is_held_at_reset_and_inserts_compliantly(physics_hz: float) -> None:
    robot = _robot("peg_insert", physics_hz)
    robot.reset_scene(5)
    s = robot.state()
    o = s.objects
    assert set(o) == {"peg_pos", "peg_quat", "hole_pos"}
    np.testing.assert_allclose(o["peg_pos"], s.pos_base_ee + np.array([0, 0, -PEG_BOTTOM_PAST_TCP_M]), atol=1e-6)
    assert quat_angle(o["peg_quat"]) < 1e-6  # upright (body z up) under a downward gripper
    assert s.gripper_width_m == pytest.approx(0.02, abs=1e-3)
    hole, q_down = o["hole_pos"], s.quat_base_ee
    robot.wait(0.5)  # the grasp holds: the peg does not slip under its weight
    s = robot.state()
    np.testing.assert_allclose(s.objects["peg_pos"] - s.pos_base_ee, [0, 0, -PEG_BOTTOM_PAST_TCP_M], atol=5e-4)
    # above the hole, then push 1 cm deeper than the floor: the compliant arm slides the peg in
    robot.command(hole + np.array([0, 0, PEG_BOTTOM_PAST_TCP_M + HOLE_DEPTH_M + 0.02]), q_down, 1.0)
    robot.wait(2.0)
    assert robot.state().objects["peg_pos"][2] > HOLE_DEPTH_M
    robot.command(hole + np.array([0, 0, PEG_BOTTOM_PAST_TCP_M - 0.01]), q_down, 1.0)
    robot.wait(2.0)
    s = robot.state()
    peg = s.objects["peg_pos"]
    assert np.linalg.norm(peg[:2] - hole[:2]) < 0.001  # inside the 1 mm clearance
    assert peg[2] == pytest.approx(hole[2], abs=0.002)  # on the hole's floor
    assert -22.0 < s.force_ee_n[2] < -5.0  # pressing on the floor through the peg, bounded by K * clip
    # reset_joints re-seats the peg in the hand
    robot.reset_joints(np.asarray(robot.config.home_q_rad))
    s = robot.state()
    held = s.pos_base_ee + np.array([0, 0, -PEG_BOTTOM_PAST_TCP_M])
    np.testing.assert_allclose(s.objects["peg_pos"], held, atol=1e-6)


def test_peg_misaligned_by_3mm_does_not_go_in() -> None:
    """The clearance is real: a peg 3 mm off the hole's axis lands on the fixture."""
    robot = _robot("peg_insert")
    robot.reset_scene(5)
    s = robot.state()
    hole, q_down = s.objects["hole_pos"], s.quat_base_ee
    robot.command(hole + np.array([0.003, 0, PEG_BOTTOM_PAST_TCP_M + HOLE_DEPTH_M + 0.02]), q_down, 1.0)
    robot.wait(2.0)
    robot.command(hole + np.array([0.003, 0, PEG_BOTTOM_PAST_TCP_M + HOLE_DEPTH_M - 0.01]), q_down, 1.0)
    robot.wait(1.5)
    assert robot.state().objects["peg_pos"][2] > HOLE_DEPTH_M - 0.002


def test_peg_observation_is_its_pose_relative_to_the_hole() -> None:
    """The privileged peg observation: peg - hole (m), the hole relative to the origin, the peg's rotation away
    from the nearest orientation that fits the square hole (upright, yaw a multiple of 90 degrees)."""
    from controllers.transforms import euler_xyz_to_quat
    from envs.tasks import get_task, peg_alignment_error

    task = get_task("peg_insert")
    robot = _robot("peg_insert")
    robot.reset_scene(3)
    s = robot.state()
    origin = np.array([0.5, 0.0, 0.1])
    obs = task.object_obs(s, origin)
    assert obs.shape == (task.object_dim,) == (9,) and obs.dtype == np.float32
    np.testing.assert_allclose(obs[:3], s.objects["peg_pos"] - s.objects["hole_pos"], atol=1e-6)
    np.testing.assert_allclose(obs[3:6], s.objects["hole_pos"] - origin, atol=1e-6)
    np.testing.assert_allclose(obs[6:], peg_alignment_error(s.objects["peg_quat"]), atol=1e-6)
    for rpy, want in (((0, 0, 0), (0, 0, 0)), ((0, 0, np.pi / 2), (0, 0, 0)), ((0, 0, -np.pi), (0, 0, 0)),
                      ((0, 0, 0.3), (0, 0, 0.3)), ((0, 0, np.pi / 2 - 0.2), (0, 0, -0.2)),
                      ((0.1, 0, 0), (0.1, 0, 0)), ((0.1, 0, np.pi / 2), (0, 0.1, 0))):
        np.testing.assert_allclose(peg_alignment_error(euler_xyz_to_quat(np.array(rpy, float))), want, atol=1e-9)
    inserted = dataclasses.replace(s, objects={**s.objects, "peg_pos": s.objects["hole_pos"]})
    assert np.allclose(task.object_obs(inserted, origin)[:3], 0.0) and task.success(inserted)


def _yaw_quat(yaw: float) -> np.ndarray:
    return np.array([np.cos(yaw / 2), 0.0, 0.0, np.sin(yaw / 2)])


def test_cube_symmetry_group_and_canonical_orientation() -> None:
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from controllers.transforms import quat_to_mat
    from envs.tasks import CUBE_SYMMETRIES_WXYZ, canonical_cube_quat

    group = CUBE_SYMMETRIES_WXYZ
    assert group.shape == (24, 4) and np.allclose(np.linalg.norm(group, axis=1), 1.0)
    mats = [quat_to_mat(g) for g in group]
    for R in mats:  # each maps the cube's face normals (the axes, both signs) onto face normals
        assert np.allclose(np.abs(R).sum(axis=0), 1.0) and np.allclose(np.abs(R).sum(axis=1), 1.0)
    assert len({tuple(np.round(R, 6).ravel()) for R in mats}) == 24  # 24 distinct rotations

    for yaw in np.linspace(-np.pi, np.pi, 37):  # a yaw-only cube reads as a yaw in [-pi/4, pi/4]
        c = canonical_cube_quat(_yaw_quat(yaw))
        canon_yaw = 2 * np.arctan2(c[3], c[0])
        assert abs(canon_yaw) <= np.pi / 4 + 1e-9 and np.allclose(c[1:3], 0.0)
        assert np.isclose(np.cos(4 * canon_yaw), np.cos(4 * yaw))  # the same cube: equal modulo 90 degrees

    @settings(max_examples=200, deadline=None)
    @given(st.lists(st.floats(-1, 1), min_size=4, max_size=4), st.integers(0, 23))
    def check(raw: list[float], k: int) -> None:
        q = np.asarray(raw)
        if np.linalg.norm(q) < 1e-3:
            return
        q = q / np.linalg.norm(q)
        c = canonical_cube_quat(q)
        # the same physical cube: c = q * s for a symmetry s (rotation matrices equal up to a face permutation)
        rel = quat_to_mat(q).T @ quat_to_mat(c)
        assert any(np.allclose(rel, R, atol=1e-9) for R in mats)
        assert c[0] >= 0 and c[0] >= np.cos(np.pi / 3) - 1e-9  # never farther than the group allows from identity
        turned = quat_mul(q, group[k])  # any other description of the same cube gives the same reading ...
        c2 = canonical_cube_quat(turned)
        if np.sort(np.abs(group @ q))[-2] < np.abs(group @ q).max() - 1e-6:  # ... away from exact ties
            assert np.allclose(c2, c, atol=1e-9)

    check()
