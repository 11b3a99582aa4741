"""The ROS 2 bridge over real DDS (rclpy from the `ros` extra; skipped with the reason when it is not installed):
`robot-server --backend ros2 -> DDS -> ros2-twin` runs a scripted expert episode to success, and `Ros2Robot`,
`Ros2Cameras` and the FZI profile work against the twin node in process.

Each test gets its own ROS_DOMAIN_ID, ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST and a ROS_LOG_DIR under tmp_path;
nothing is asserted before discovery: every check waits (with a deadline) for the condition it tests.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("rclpy", reason="rclpy is not installed (pip install 'robot-rl[ros]'; Python 3.10-3.13 wheels)")

from controllers.kinematics import PANDA_HOME_Q
from envs.ros2.cameras import Ros2Cameras
from envs.ros2.config import Ros2CamerasConfig, Ros2RobotConfig
from envs.ros2.robot import Ros2Robot
from envs.ros2.twin_node import TwinNode, TwinNodeConfig
from robot_rl.errors import RobotError, RobotTimeoutError

ROOT = Path(__file__).resolve().parents[1]
_DOMAINS = itertools.count()


@pytest.fixture
def ros_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, str]:
    """A DDS domain of this test's own, discovery on this machine only, ROS logs in tmp_path."""
    domain = str(10 + (os.getpid() * 7 + next(_DOMAINS)) % 90)
    values = {"ROS_DOMAIN_ID": domain, "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST",
              "ROS_LOG_DIR": str(tmp_path / "roslog")}
    for k, v in values.items():
        monkeypatch.setenv(k, v)
    return values


def wait_until(cond: Callable[[], bool], timeout_s: float, what: str) -> None:
    t_end = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > t_end:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.02)


class TwinThread:
    """A TwinNode built and spun on a thread of its own (the thread that renders owns the GL context)."""

    def __init__(self, config: TwinNodeConfig) -> None:
        self.stop = threading.Event()
        self.node: TwinNode | None = None
        self.error: BaseException | None = None
        self._ready = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(config,), daemon=True)
        self.thread.start()
        if not self._ready.wait(300):
            raise AssertionError("the twin node did not start")
        if self.error is not None:
            raise self.error

    def _run(self, config: TwinNodeConfig) -> None:
        try:
            self.node = TwinNode(config, log=lambda line: None)
        except BaseException as err:
            self.error = err
            self._ready.set()
            return
        self._ready.set()
        try:
            self.node.spin(self.stop)
        finally:
            self.node.close()

    def close(self) -> None:
        self.stop.set()
        self.thread.join(10)


@pytest.fixture
def twin(ros_env: dict[str, str]) -> Iterator[TwinThread]:
    t = TwinThread(TwinNodeConfig(task="twin-reach", image_size=32, camera_hz=20.0))
    yield t
    t.close()


def test_scripted_episode_over_dds_through_the_robot_server(ros_env: dict[str, str], tmp_path: Path) -> None:
    """robot-server --backend ros2 -> DDS -> ros2-twin, each its own process; the client is a plain RemoteRobot
    env (no ROS) with 32x32 images from the ROS image topics; the scripted expert reaches the goal."""
    from envs.remote import make_remote_env
    from envs.twin.experts import ScriptedExpert, run_episode

    env = {**os.environ, **ros_env, "MUJOCO_GL": "egl", "OMP_WAIT_POLICY": "PASSIVE", "PYTHONPATH": str(ROOT)}
    cli = [sys.executable, "-m", "robot_rl.cli"]
    twin_log, server_log = tmp_path / "twin.log", tmp_path / "server.log"
    with open(twin_log, "w") as tl:
        twin = subprocess.Popen([*cli, "ros2-twin", "--task", "twin-reach", "--image-size", "32", "--max-seconds",
                                 "400"], env=env, stdout=tl, stderr=subprocess.STDOUT)
    server = None
    try:
        # the twin first (a fresh checkout compiles the impedance kernel once): then the bridge's start-up wait
        # covers DDS discovery only
        def twin_up() -> bool:
            assert twin.poll() is None, twin_log.read_text()
            return "ros2-twin: task reach" in twin_log.read_text()

        wait_until(twin_up, 300, "the twin node")
        with open(server_log, "w") as sl:
            server = subprocess.Popen([*cli, "robot-server", "--backend", "ros2", "--ros-twin", "--task", "twin-reach",
                                       "--image-size", "32", "--bind", "tcp://127.0.0.1:0", "--max-seconds", "400",
                                       "--ros-set", "connect_timeout_s=30"], env=env, stdout=sl,
                                      stderr=subprocess.STDOUT)
        address = ""

        def served() -> bool:
            nonlocal address
            assert server is not None and server.poll() is None, server_log.read_text()
            for line in server_log.read_text().splitlines():
                if line.startswith("robot-server: serving"):
                    address = line.split(" on ")[1].split()[0]
            return bool(address)

        wait_until(served, 300, "the robot server (it waits for the twin's first state over DDS)")
        log = server_log.read_text()
        assert "ros2: crisp controller /cartesian_impedance_controller" in log and "topic gripper" in log, log
        robot_env = make_remote_env(address, obs_mode="pixels")
        try:
            assert robot_env.unwrapped.robot.info["backend"] == "ros2"
            frames: list[Any] = []
            result = run_episode(robot_env, ScriptedExpert("twin-reach"), seed=3, on_obs=frames.append)
            assert result["success"], result
            assert result["steps"] < 50
            front = np.stack([f["images"]["front"] for f in frames])
            assert front.shape[1:] == (32, 32, 3) and front.std() > 5  # rendered frames, not blanks
            assert not np.array_equal(front[0], front[-1])  # the arm moved in the camera's view
        finally:
            robot_env.close()
    finally:
        for p in (server, twin):
            if p is not None:
                p.terminate()
        for p in (server, twin):
            if p is not None:
                p.wait(30)
    assert "ros2-twin: stopped after publishing" in twin_log.read_text()


def test_ros2_robot_against_the_twin_node(twin: TwinThread) -> None:
    node = twin.node
    assert node is not None
    lines: list[str] = []
    robot = Ros2Robot(Ros2RobotConfig.for_twin(connect_timeout_s=60.0, max_state_age_s=0.5), log=lines.append)
    try:
        assert robot.gripper_path == "topic" and robot.recovery_path == "trigger"
        assert "gripper: topic gripper" in lines[0] and "error recovery: std_srvs/Trigger" in lines[0]
        s = robot.state()
        assert s.error == "" and s.q_rad.shape == (7,) and "goal_pos" in s.objects
        # gains: one atomic parameter call; the twin's controller gets the profile's values
        robot.set_gains("precision")
        assert node.robot.controller.commanded_gains.translational_stiffness_n_per_m == 3000.0
        robot.set_gains("compliance")
        assert node.robot.controller.commanded_gains.translational_stiffness_n_per_m == 2000.0
        # scene resets through the seed parameter: the same seed, the same goal
        robot.reset_scene(3)
        goal3 = robot.state().objects["goal_pos"]
        robot.reset_scene(4)
        assert not np.allclose(robot.state().objects["goal_pos"], goal3)
        robot.reset_scene(3)
        assert np.allclose(robot.state().objects["goal_pos"], goal3)
        # a Cartesian target 4 cm away is reached; the gripper closes through the topic path
        s = robot.state()
        target = s.pos_base_ee + np.array([0.04, 0.0, -0.03])
        robot.command(target, s.quat_base_ee, 1.0)
        wait_until(lambda: np.linalg.norm(robot.state().pos_base_ee - target) < 0.004, 20, "the TCP at the target")
        wait_until(lambda: robot.state().gripper_width_m < 0.005, 20, "the gripper closed")
        assert robot.state().twist_ee_body.shape == (6,)
        # reset_joints: a Cartesian move to the home pose's TCP (the twin's FK is Panda's)
        robot.reset_joints(np.asarray(PANDA_HOME_Q))
        assert np.linalg.norm(robot.state().q_rad - np.asarray(PANDA_HOME_Q)) < 0.1
        robot.clear_errors()  # the twin's Trigger service answers
        # the controller goes away: state turns stale and commands are refused
        twin.close()
        wait_until(lambda: "stale ROS state" in robot.state().error, 10, "stale state")
        assert "current_pose" in robot.state().error
        with pytest.raises(RobotError, match="stale"):
            robot.command(target, s.quat_base_ee, 0.0)
    finally:
        robot.stop()
    with pytest.raises(RobotError, match="stopped"):
        robot.command(target, s.quat_base_ee, 0.0)


def test_ros2_cameras_read_the_twin_images_and_report_a_stall(twin: TwinThread) -> None:
    cams = Ros2Cameras(Ros2CamerasConfig(image_size=16, connect_timeout_s=60.0, max_frame_age_s=0.5))
    try:
        assert cams.names == ("front", "wrist") and cams.image_shape == (16, 16, 3)
        frames = cams.read()
        assert set(frames) == {"front", "wrist"}
        assert all(f.shape == (16, 16, 3) and f.dtype == np.uint8 and f.std() > 5 for f in frames.values())
        assert not np.array_equal(frames["front"], frames["wrist"])
        assert max(cams.frame_ages_s().values()) < 1.0
        twin.close()
        def stalled() -> bool:
            try:
                cams.read()
            except RobotTimeoutError as err:
                assert "stalled" in str(err)
                return True
            return False
        wait_until(stalled, 10, "the stalled-camera error")
    finally:
        cams.close()
    with pytest.raises(RobotError, match="closed"):
        cams.read()


def test_fzi_profile_streams_interpolated_targets(ros_env: dict[str, str]) -> None:
    """FZI's controller wants smooth targets: a 10 Hz policy step arrives as a ramp at ~100 Hz."""
    from envs.ros2.runtime import RosRuntime, qos_profile, ros_messages

    t = TwinThread(TwinNodeConfig(task="twin-reach", profile="fzi", camera_hz=0.0, camera_names=()))
    spy = RosRuntime("spy")
    seen: list[tuple[float, float]] = []
    geometry = ros_messages("geometry_msgs.msg")
    from envs.ros2.logic import STATE_QOS

    spy.node.create_subscription(geometry.PoseStamped, "/target_frame",
                                 lambda m: seen.append((time.monotonic(), m.pose.position.x)), qos_profile(STATE_QOS))
    robot = Ros2Robot(Ros2RobotConfig.for_twin("fzi", connect_timeout_s=60.0))
    try:
        assert t.node is not None and t.node.iface.target_pose_topic == "target_frame"
        robot.set_gains("precision")
        assert t.node.robot.controller.commanded_gains.translational_stiffness_n_per_m == 3000.0
        wait_until(lambda: len(seen) > 5, 20, "the target stream")
        s = robot.state()
        x0 = float(seen[-1][1])
        seen.clear()
        robot.command(s.pos_base_ee + np.array([0.02, 0.0, 0.0]), s.quat_base_ee, 0.0)
        wait_until(lambda: any(abs(x - (x0 + 0.02)) < 1e-9 for _, x in seen), 10, "the goal in the stream")
        ramp = [x for _, x in seen if x0 + 1e-4 < x < x0 + 0.02 - 1e-4]
        assert len(ramp) >= 3, seen  # intermediate targets (0.1 s at ~100 Hz: ~10 of them), not one 2 cm step
        assert all(b >= a - 1e-12 for a, b in itertools.pairwise(ramp))  # monotone towards the goal
        target = s.pos_base_ee + np.array([0.02, 0.0, 0.0])
        wait_until(lambda: np.linalg.norm(robot.state().pos_base_ee - target) < 0.004, 20, "the TCP at the target")
    finally:
        robot.stop()
        spy.shutdown()
        t.close()


def test_the_guard_checks_every_state_the_ros2_backend_receives(twin: TwinThread) -> None:
    """The server's guard registers with Ros2Robot.add_state_listener: each joint-state message is checked in the
    executor thread, so a limit trips and the hold is commanded with no call from the control thread."""
    from envs.robot_server.safety import SafetyGuard, ServerSafetyConfig

    robot = Ros2Robot(Ros2RobotConfig.for_twin(connect_timeout_s=60.0))
    try:
        seen: list[float] = []
        robot.add_state_listener(lambda sample: seen.append(sample.time_s))
        guard = SafetyGuard(robot, ServerSafetyConfig(max_joint_speed_fraction=0.002))
        wait_until(lambda: guard.checked_samples >= 5 and len(seen) >= 5, 20, "joint states reaching the listeners")
        assert guard.stats()["trips"] == 0  # the arm holds still: nothing above the limit yet
        s = robot.state()
        guard.command(s.pos_base_ee + np.array([0.05, 0.0, 0.0]), s.quat_base_ee, 0.0)  # a move: joints speed up
        wait_until(lambda: guard.stats()["trips"] == 1, 20, "a trip from the listener thread")  # no state() call
        assert "moves at" in guard.stats()["tripped"] and guard.trip_time_s is not None
        with pytest.raises(RobotError, match="safety stop"):
            guard.command(s.pos_base_ee, s.quat_base_ee, 0.0)
    finally:
        robot.stop()


LAB_CAMERAS = """
[task]
name = "lab-reach"
base = "twin-reach"

[cameras.front]
kind = "ros2"
topic = "/lab/front/image_raw"
crop_xywh = [20, 4, 40, 40]
width = 64
height = 48

[observation]
cameras = ["front"]
image_size = 16
"""


def test_the_ros2_backend_takes_the_task_files_cameras(ros_env: dict[str, str], tmp_path: Path) -> None:
    """A lab's task file with [cameras.front] kind = "ros2" on a topic of its own, cropped: `robot-rl ros2-twin
    --task FILE` publishes 64x48 frames there; the robot server's ros2 cameras built from the same file read them
    and crop + resize each frame exactly as the franky server does (crop_resize); a file whose width x height the
    topic does not send is refused at start, naming the file and the camera."""
    from envs.hardware.cameras import crop_resize
    from envs.robot_server.run import image_size, parse_robot_server_args, ros2_options
    from envs.ros2.backend import cameras_config
    from envs.ros2.logic import image_from_fields
    from envs.ros2.twin_run import parse_ros2_twin_args
    from robot_rl.errors import ConfigError
    from robot_rl.task_file import load_task_file

    path = tmp_path / "lab.toml"
    path.write_text(LAB_CAMERAS)
    t = TwinThread(parse_ros2_twin_args(["--task", str(path), "--camera-hz", "20"]).node_config())
    try:
        assert t.node is not None and t.node.frame_wh == (64, 48)
        cfg = parse_robot_server_args(["--backend", "ros2", "--ros-twin", "--task", str(path)])
        names, options = ros2_options(cfg, load_task_file(path))
        ccfg = cameras_config(options, names, image_size(cfg)).replace(connect_timeout_s=60.0, max_frame_age_s=60.0)
        assert ccfg.names == ("front",) and ccfg.topic(0) == "/lab/front/image_raw"
        cams = Ros2Cameras(ccfg)
        try:
            assert cams.read()["front"].shape == (16, 16, 3)
            wrong = tmp_path / "wrong.toml"
            wrong.write_text(LAB_CAMERAS.replace("width = 64", "width = 640"))
            bad = cameras_config(ros2_options(cfg, load_task_file(wrong))[1], names, 16)
            with pytest.raises(ConfigError, match=rf"camera front \(/lab/front/image_raw; task file {wrong}, "
                                                  r"cameras.front\): the topic sends 64x48 frames, but its width x "
                                                  r"height say 640 x 48"):
                Ros2Cameras(bad.replace(connect_timeout_s=60.0))
            t.close()  # no new frames: what read() returns comes from the newest message the cameras hold
            time.sleep(0.5)
            msg = cams._latest["front"][0]
            raw = image_from_fields(msg.encoding, msg.height, msg.width, msg.step, msg.data)
            front = cams.read()["front"]
            assert raw.shape == (48, 64, 3) and raw.std() > 5
            assert np.array_equal(front, crop_resize(raw, 16, (20, 4, 40, 40)))
            assert not np.array_equal(front, crop_resize(raw, 16))  # the file's crop, not the centre square
        finally:
            cams.close()
    finally:
        t.close()
