"""The ROS 2 bridge's pure logic, without ROS: message fields <-> RobotState parts, target interpolation, QoS
choices, staleness, gain parameters, image / object encodings, the profiles and the backend options."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from controllers.gains import gain_profile
from controllers.transforms import axis_angle_to_quat, quat_mul, quat_to_mat
from envs.ros2.adapters import choose_gripper, choose_recovery
from envs.ros2.backend import Ros2BackendOptions, apply_settings, cameras_config, robot_config
from envs.ros2.config import Ros2CamerasConfig, Ros2RobotConfig, resolve_name
from envs.ros2.logic import (
    COMMAND_QOS,
    IMAGE_QOS,
    STATE_QOS,
    TWIN_STATE_QOS,
    QosSpec,
    StreamWatch,
    TargetInterpolator,
    gain_parameters,
    gains_from_parameters,
    gripper_closed_from_width,
    gripper_width_command,
    image_from_fields,
    image_to_fields,
    move_duration_s,
    objects_from_layout,
    objects_to_layout,
    pick_joints,
    pose_close,
    pose_from_xyzw,
    pose_to_xyzw,
    qos_compatible,
    s_to_stamp,
    stamp_to_s,
    state_from_parts,
    twist_from_poses,
    vector_to_base,
    vector_to_ee,
)
from robot_rl.errors import ConfigError, ShapeError

DOWN = np.array([0.0, 1.0, 0.0, 0.0])  # gripper pointing down (180 deg about x)


def test_pose_fields_round_trip_and_reorder_the_quaternion() -> None:
    q = quat_mul(axis_angle_to_quat(np.array([0.0, 0.0, 0.3])), DOWN)
    fields = pose_to_xyzw(np.array([0.4, -0.1, 0.3]), q)
    assert fields[3:] == pytest.approx((q[1], q[2], q[3], q[0]))  # ROS order x, y, z, w
    pos, quat = pose_from_xyzw(*fields)
    assert np.allclose(pos, [0.4, -0.1, 0.3]) and np.allclose(quat, q)
    # a non-unit, w < 0 quaternion comes back unit with w >= 0 (the same rotation)
    g = axis_angle_to_quat(np.array([0.3, -0.2, 0.5]))  # w > 0
    _, quat2 = pose_from_xyzw(0, 0, 0, -2 * g[1], -2 * g[2], -2 * g[3], -2 * g[0])
    assert np.allclose(quat2, g)
    with pytest.raises(ShapeError):
        pose_from_xyzw(0, 0, math.nan, 0, 0, 0, 1)
    with pytest.raises(ShapeError):
        pose_from_xyzw(0, 0, 0, 0, 0, 0, 0)


def test_stamps_round_trip() -> None:
    sec, nsec = s_to_stamp(12.345678901)
    assert (sec, nsec) == (12, 345678901)
    assert stamp_to_s(sec, nsec) == pytest.approx(12.345678901, abs=1e-9)
    assert s_to_stamp(3.9999999999)[1] <= 999_999_999


def test_pick_joints_by_name_in_any_order() -> None:
    wanted = [f"fr3_joint{i}" for i in range(1, 8)]
    names = ["fr3_finger_joint1", *reversed(wanted)]
    pos = [0.04, *range(7, 0, -1)]
    vel = [0.0, *[10.0 * v for v in range(7, 0, -1)]]
    q, dq = pick_joints(names, pos, vel, wanted)
    assert q.tolist() == [1, 2, 3, 4, 5, 6, 7] and dq.tolist() == [10, 20, 30, 40, 50, 60, 70]
    q, dq = pick_joints(wanted, range(7), [], wanted)  # no velocities published: zeros
    assert dq.tolist() == [0.0] * 7
    with pytest.raises(ShapeError, match="fr3_joint7"):
        pick_joints(wanted[:6], range(6), range(6), wanted)


def test_frames_rotate_between_base_and_tcp() -> None:
    q = quat_mul(axis_angle_to_quat(np.array([0.0, 0.0, 0.5])), DOWN)
    v = np.array([0.1, -0.2, 0.3])
    assert np.allclose(vector_to_base(vector_to_ee(v, q), q), v)
    # gripper down: the TCP's z axis is the base's -z, so pressing down on the table (+z push in base) reads -z
    assert np.allclose(vector_to_ee(np.array([0.0, 0.0, 5.0]), DOWN), [0.0, 0.0, -5.0])


def test_twist_from_two_poses() -> None:
    q0 = DOWN
    w_base = np.array([0.0, 0.0, 0.4])  # yawing at 0.4 rad/s
    q1 = quat_mul(axis_angle_to_quat(w_base * 0.01), q0)
    p0, p1 = np.array([0.4, 0.0, 0.3]), np.array([0.4, 0.002, 0.3])  # 0.2 m/s along +y
    tw = twist_from_poses(p0, q0, 1.00, p1, q1, 1.01)
    R1 = quat_to_mat(q1)
    assert np.allclose(tw[:3], R1.T @ [0.0, 0.2, 0.0], atol=1e-9)
    assert np.allclose(tw[3:], R1.T @ w_base, atol=1e-6)
    assert np.all(twist_from_poses(p0, q0, 1.0, p1, q1, 1.0) == 0)  # same stamp: no estimate


def test_state_from_parts_copies_everything() -> None:
    q = np.arange(7.0)
    s = state_from_parts(1.5, q, np.zeros(7), np.ones(3), DOWN, np.zeros(6), 0.03, np.ones(3), np.zeros(3),
                         objects={"goal_pos": np.array([1.0, 2.0, 3.0])}, error="x")
    q[0] = 99.0
    assert s.q_rad[0] == 0.0 and s.gripper_width_m == 0.03 and s.error == "x" and s.tau_j_nm.shape == (7,)
    assert s.objects["goal_pos"].tolist() == [1.0, 2.0, 3.0] and s.time_s == 1.5


def test_objects_layout_round_trip_and_mismatch() -> None:
    objects = {"cube_pos": np.array([0.5, 0.1, 0.02]), "cube_quat": np.array([1.0, 0.0, 0.0, 0.0])}
    labels, sizes, data = objects_to_layout(objects)
    assert labels == ["cube_pos", "cube_quat"] and sizes == [3, 4] and len(data) == 7
    back = objects_from_layout(labels, sizes, data)
    assert set(back) == set(objects) and all(np.array_equal(back[k], objects[k]) for k in objects)
    assert objects_from_layout(*objects_to_layout({})) == {}
    with pytest.raises(ShapeError):
        objects_from_layout(labels, [3, 3], data)


def test_crisp_gain_parameters_round_trip() -> None:
    precision = gain_profile("precision")
    params = gain_parameters(precision, "crisp")
    assert params["task.k_pos_x"] == params["task.k_pos_z"] == precision.translational_stiffness_n_per_m
    assert params["task.d_rot_y"] == precision.rotational_damping_nms_per_rad
    assert params["task.error_clip.z"] == precision.translational_clip_m
    assert params["task.error_clip.rx"] == precision.rotational_clip_rad
    assert params["nullspace.stiffness"] == precision.nullspace_stiffness
    back = gains_from_parameters(params, "crisp", gain_profile("compliance"))
    for field in ("translational_stiffness_n_per_m", "translational_damping_ns_per_m",
                  "rotational_stiffness_nm_per_rad", "rotational_damping_nms_per_rad", "translational_clip_m",
                  "rotational_clip_rad", "nullspace_stiffness"):
        assert getattr(back, field) == getattr(precision, field), field
    with pytest.raises(ConfigError, match="differ per axis"):
        gains_from_parameters({**params, "task.k_pos_y": 1.0}, "crisp", precision)


def test_fzi_gain_parameters_are_per_axis_stiffness_only() -> None:
    params = gain_parameters(gain_profile("precision"), "fzi")
    assert set(params) == {f"stiffness.{k}_{a}" for k in ("trans", "rot") for a in "xyz"}
    assert params["stiffness.trans_y"] == 3000.0
    assert gains_from_parameters(params, "fzi", gain_profile("compliance")).translational_stiffness_n_per_m == 3000.0
    with pytest.raises(ConfigError):
        gain_parameters(gain_profile("precision"), "ur")


def test_interpolator_streams_the_goal_at_once_without_duration() -> None:
    it = TargetInterpolator(0.0)
    assert not it.has_target
    with pytest.raises(RuntimeError):
        it.sample(0.0)
    it.hold(np.zeros(3), DOWN)
    it.set(np.array([0.1, 0.0, 0.0]), DOWN, now_s=10.0)
    assert np.allclose(it.sample(10.0)[0], [0.1, 0, 0]) and it.done(10.0)


def test_interpolator_moves_linearly_and_slerps_from_the_streamed_target() -> None:
    it = TargetInterpolator(0.1)
    it.hold(np.zeros(3), DOWN)
    q_goal = quat_mul(axis_angle_to_quat(np.array([0.0, 0.0, 0.2])), DOWN)
    it.set(np.array([0.02, 0.0, 0.0]), q_goal, now_s=0.0)
    pos, quat = it.sample(0.05)
    assert np.allclose(pos, [0.01, 0.0, 0.0])
    assert np.allclose(quat, quat_mul(axis_angle_to_quat(np.array([0.0, 0.0, 0.1])), DOWN))
    assert not it.done(0.05) and it.done(0.1)
    # a new goal mid-way starts from where the stream is, not from the old goal: no jump
    it.set(np.array([0.0, 0.0, 0.0]), DOWN, now_s=0.05)
    assert np.allclose(it.sample(0.05)[0], [0.01, 0.0, 0.0])
    assert np.allclose(it.sample(0.10)[0], [0.005, 0.0, 0.0])
    # a per-goal duration (the reset move) and then back to the default
    it.set(np.array([1.0, 0.0, 0.0]), DOWN, now_s=1.0, duration_s=2.0)
    assert np.allclose(it.sample(2.0)[0], [0.5, 0.0, 0.0])
    with pytest.raises(ConfigError):
        TargetInterpolator(-1.0)


def test_move_duration_and_pose_close() -> None:
    q1 = quat_mul(axis_angle_to_quat(np.array([0.0, 0.0, 0.6])), DOWN)
    assert move_duration_s(np.zeros(3), DOWN, np.array([0.3, 0, 0]), DOWN, 0.15, 0.6) == pytest.approx(2.0)
    assert move_duration_s(np.zeros(3), DOWN, np.zeros(3), q1, 0.15, 0.6) == pytest.approx(1.0)
    assert move_duration_s(np.zeros(3), DOWN, np.zeros(3), DOWN, 0.15, 0.6) == 0.5  # the minimum
    assert pose_close(np.zeros(3), DOWN, np.array([0.005, 0, 0]), DOWN)
    assert not pose_close(np.zeros(3), DOWN, np.array([0.02, 0, 0]), DOWN)
    assert not pose_close(np.zeros(3), DOWN, np.zeros(3), q1)


def test_stream_watch_names_stale_and_missing_streams() -> None:
    w = StreamWatch(0.5, required=("current_pose", "joint_states"))
    assert w.stale(0.0) == ["current_pose", "joint_states"] and "never received" in w.describe(0.0)
    w.seen("current_pose", 10.0)
    w.seen("joint_states", 10.2)
    assert w.stale(10.4) == [] and w.describe(10.4) == ""
    assert w.stale(10.6) == ["current_pose"]
    assert "current_pose 0.60 s old" in w.describe(10.6) and "max age 0.5" in w.describe(10.6)
    assert w.count("current_pose") == 1 and math.isinf(w.age_s("other", 1.0))


def test_qos_choices_match_every_counterpart() -> None:
    reliable, best_effort = QosSpec("reliable", 10), QosSpec("best_effort", 10)
    # our state/image subscriptions match both kinds of publisher (franka_ros2's broadcaster is best effort)
    for sub in (STATE_QOS, IMAGE_QOS):
        assert qos_compatible(reliable, sub) and qos_compatible(best_effort, sub)
        assert sub.depth == 1  # newest only
    # our target publisher matches a reliable and a best-effort (sensor-data) subscriber, and is not latched
    assert qos_compatible(COMMAND_QOS, reliable) and qos_compatible(COMMAND_QOS, best_effort)
    assert COMMAND_QOS.durability == "volatile" and COMMAND_QOS.depth == 1
    assert not qos_compatible(best_effort, reliable)  # the rule itself
    assert not qos_compatible(reliable, QosSpec("reliable", 1, "transient_local"))
    assert qos_compatible(TWIN_STATE_QOS, STATE_QOS)


@pytest.mark.parametrize("encoding", ["rgb8", "bgr8", "rgba8", "bgra8", "mono8"])
def test_image_fields_decode_every_encoding_with_row_padding(encoding: str) -> None:
    rng = np.random.default_rng(0)
    rgb = rng.integers(0, 256, (5, 7, 3), dtype=np.uint8)
    if encoding == "mono8":
        rgb[:] = rgb[:, :, :1]
        raw = rgb[:, :, 0:1]
    elif encoding.startswith("bgr"):
        raw = rgb[:, :, ::-1]
    else:
        raw = rgb
    if encoding.endswith("a8"):
        raw = np.concatenate([raw, np.full((5, 7, 1), 200, np.uint8)], axis=2)
    c = raw.shape[2]
    step = 7 * c + 3  # 3 bytes of padding per row
    buf = np.zeros((5, step), np.uint8)
    buf[:, :7 * c] = raw.reshape(5, 7 * c)
    out = image_from_fields(encoding, 5, 7, step, buf.tobytes())
    assert out.dtype == np.uint8 and out.shape == (5, 7, 3) and np.array_equal(out, rgb)


def test_image_fields_refuse_bad_input_and_round_trip() -> None:
    with pytest.raises(ShapeError, match="16UC1"):
        image_from_fields("16UC1", 2, 2, 4, b"\0" * 8)
    with pytest.raises(ShapeError, match="too short"):
        image_from_fields("rgb8", 2, 2, 6, b"\0" * 10)
    img = np.arange(2 * 3 * 3, dtype=np.uint8).reshape(2, 3, 3)
    enc, h, w, step, data = image_to_fields(img)
    assert (enc, h, w, step) == ("rgb8", 2, 3, 9)
    assert np.array_equal(image_from_fields(enc, h, w, step, data), img)
    import array
    assert np.array_equal(image_from_fields(enc, h, w, step, array.array("B", data)), img)  # rclpy's type


def test_gripper_width_mapping() -> None:
    assert gripper_width_command(0.0, 0.08) == 0.08 and gripper_width_command(1.0, 0.08) == 0.0
    assert gripper_width_command(7.0, 0.08) == 0.0
    assert gripper_closed_from_width(0.02, 0.08) == pytest.approx(0.75)


def test_profiles_and_names() -> None:
    crisp = Ros2RobotConfig()
    assert crisp.target_pose_topic == "target_pose" and crisp.interpolate_s == 0 and crisp.stream_hz == 50
    fzi = Ros2RobotConfig.for_profile("fzi", namespace="arm")
    assert fzi.target_pose_topic == "target_frame" and fzi.interpolate_s == pytest.approx(0.1)
    assert fzi.stream_hz == 100 and fzi.joint_target_topic == "" and fzi.wrench_frame == "ee"
    assert fzi.topic("target_frame") == "/arm/target_frame" and fzi.topic("/abs/t") == "/abs/t"
    assert fzi.controller_fqn == "/arm/cartesian_compliance_controller"
    twin = Ros2RobotConfig.for_twin()
    assert twin.objects_topic and twin.scene_seed_parameter and twin.gripper == "topic"
    assert resolve_name("", "x") == "/x" and resolve_name("/a/", "x") == "/a/x" and resolve_name("a", "") == ""
    with pytest.raises(ConfigError, match="profile"):
        Ros2RobotConfig.for_profile("ur")
    with pytest.raises(ConfigError, match="joint_names"):
        Ros2RobotConfig(joint_names=("a",) * 7)
    with pytest.raises(ConfigError, match="stream_hz"):
        Ros2RobotConfig(stream_hz=0.0)


def test_camera_specs() -> None:
    cams = Ros2CamerasConfig.from_specs(["front=/cam/color/image_raw", "wrist"], namespace="/r", image_size=64)
    assert cams.names == ("front", "wrist") and cams.topic(0) == "/cam/color/image_raw"
    assert cams.topic(1) == "/r/camera/wrist/image_raw"
    with pytest.raises(ConfigError, match="NAME=TOPIC"):
        Ros2CamerasConfig.from_specs(["front="])
    with pytest.raises(ConfigError, match="names"):
        Ros2CamerasConfig.from_specs(["a", "a"])


def test_backend_options_build_the_configs() -> None:
    cfg = robot_config(Ros2BackendOptions(profile="fzi", namespace="/arm", twin=True,
                                          settings=("stream_hz=200", "gripper=none", "joint_names=a,b,c,d,e,f,g")))
    assert cfg.profile == "fzi" and cfg.stream_hz == 200.0 and cfg.gripper == "none"
    assert cfg.joint_names == tuple("abcdefg") and cfg.objects_topic == "twin/objects"
    assert apply_settings(Ros2RobotConfig(), ["max_state_age_s=1"]).max_state_age_s == 1.0
    for bad in ("nope=1", "stream_hz", "stream_hz=fast"):
        with pytest.raises(ConfigError, match="--ros-set"):
            apply_settings(Ros2RobotConfig(), [bad])
    cams = cameras_config(Ros2BackendOptions(camera_topics=("front=/rs/color/image_raw",)), ("front", "wrist"), 96)
    assert cams.topics == ("/rs/color/image_raw", "camera/wrist/image_raw") and cams.image_size == 96
    with pytest.raises(ConfigError, match="not among"):
        cameras_config(Ros2BackendOptions(camera_topics=("side=/x",)), ("front",), 96)


def test_gripper_and_recovery_paths() -> None:
    assert choose_gripper("auto", franka_available=True) == "franka"
    assert choose_gripper("auto", franka_available=False) == "topic"
    assert choose_gripper("none", franka_available=True) == "none"
    with pytest.raises(ConfigError, match="franka_msgs"):
        choose_gripper("franka", franka_available=False)
    assert choose_recovery("auto", True, "") == "franka"
    assert choose_recovery("auto", False, "/svc") == "trigger"
    assert choose_recovery("auto", False, "") == "none"
    with pytest.raises(ConfigError, match="recovery_service"):
        choose_recovery("trigger", False, "")


def test_a_sourced_distro_beside_the_venv_is_explained() -> None:
    """Which rclpy is loaded, and what to do: the venv's own wheels alone say nothing; a sourced Humble whose rclpy
    shadows the venv's names the distro, its Python and both ways out; a sourced Jazzy beside the venv's wheels is a
    note about DDS interop."""
    from envs.ros2.runtime import ros_setup_notes

    venv = "/home/lab/robot-rl/.venv"
    own = f"{venv}/lib/python3.11/site-packages/rclpy/__init__.py"
    assert ros_setup_notes(own, None, venv, "3.11") == []
    (shadow,) = ros_setup_notes("/opt/ros/humble/lib/python3.10/site-packages/rclpy/__init__.py", "humble", venv,
                                "3.11")
    assert "the sourced ROS 2 humble (/opt/ros/humble/" in shadow and "built for its own Python (3.10; this is 3.11)" \
        in shadow and "not sourced" in shadow and "--system-site-packages" in shadow
    (beside,) = ros_setup_notes(own, "jazzy", venv, "3.11")
    assert "ROS 2 jazzy is sourced" in beside and "DDS" in beside and "ROS_DOMAIN_ID" in beside


def test_a_shadowing_distro_rclpy_that_fails_to_import_says_what_to_do(tmp_path: Any,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A sourced distro's rclpy built for another Python fails to import: the error names the extra AND the way
    out, in one message."""
    import sys

    from envs.ros2.runtime import rclpy_module
    from robot_rl.errors import MissingExtraError

    site = tmp_path / "opt" / "ros" / "humble" / "lib" / "python3.10" / "site-packages"
    (site / "rclpy").mkdir(parents=True)
    (site / "rclpy" / "__init__.py").write_text("from rclpy._rclpy_pybind11 import *  # built for python3.10\n")
    monkeypatch.setenv("ROS_DISTRO", "humble")
    monkeypatch.syspath_prepend(str(site))
    for name in [m for m in sys.modules if m == "rclpy" or m.startswith("rclpy.")]:
        monkeypatch.delitem(sys.modules, name)
    with pytest.raises(MissingExtraError, match=r"\[ros\]'.*the sourced ROS 2 humble .*3\.10.*not sourced"):
        rclpy_module()


def test_the_franka_gripper_namespace_follows_franka_ros2() -> None:
    """franka_ros2 names its gripper node ARM_gripper: with FR3 joint names the franka path talks to /fr3_gripper,
    with a Panda's to /panda_gripper; an explicit namespace wins; other names fall back to /franka_gripper."""
    from envs.ros2.config import FR3_JOINT_NAMES

    assert Ros2RobotConfig().joint_names == FR3_JOINT_NAMES
    assert Ros2RobotConfig().franka_gripper_namespace == "/fr3_gripper"
    panda = tuple(f"panda_joint{i}" for i in range(1, 8))
    assert Ros2RobotConfig().replace(joint_names=panda).franka_gripper_namespace == "/panda_gripper"
    assert Ros2RobotConfig().replace(franka_gripper_ns="/arm/gripper/").franka_gripper_namespace == "/arm/gripper"
    other = tuple(f"joint{i}" for i in range(1, 8))
    assert Ros2RobotConfig().replace(joint_names=other).franka_gripper_namespace == "/franka_gripper"
