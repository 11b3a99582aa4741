"""TwinCameras: offscreen rendering of the front and wrist cameras (MUJOCO_GL=egl on headless machines)."""

from __future__ import annotations

import numpy as np
import pytest

from envs.robot import Cameras
from envs.twin import TwinCameras, TwinRobot, TwinRobotConfig
from robot_rl.errors import ConfigError, RobotError


@pytest.mark.parametrize("size", [64, 128])
def test_both_cameras_render_uint8_images(size: int) -> None:
    robot = TwinRobot(TwinRobotConfig(task="pick_cube", image_height=size, image_width=size))
    try:
        cams = robot.cameras()
        assert isinstance(cams, Cameras) and isinstance(cams, TwinCameras)
        assert cams.names == ("front", "wrist")
        frames = cams.read()
        assert set(frames) == {"front", "wrist"}
        for name, img in frames.items():
            assert img.dtype == np.uint8 and img.shape == (size, size, 3), name
            assert img.std() > 10.0, f"{name} is (nearly) constant"
        assert not np.array_equal(frames["front"], frames["wrist"])
        # fresh arrays each read; the images follow the simulation
        again = cams.read()
        assert again["front"] is not frames["front"]
        s = robot.state()
        robot.command(s.pos_base_ee + np.array([0.1, 0.0, -0.15]), s.quat_base_ee, 1.0)
        robot.wait(1.0)
        moved = cams.read()
        assert np.abs(moved["wrist"].astype(int) - frames["wrist"]).mean() > 2.0
        assert robot.cameras() is cams  # one renderer, created once
    finally:
        robot.stop()
    with pytest.raises(RobotError):
        cams.read()


def test_reach_goal_marker_is_visible() -> None:
    robot = TwinRobot(TwinRobotConfig(task="reach", image_height=64, image_width=64, camera_names=("front",)))
    try:
        robot.reset_scene(0)
        before = robot.cameras().read()["front"]
        robot.reset_scene(1)
        after = robot.cameras().read()["front"]
        changed = np.abs(after.astype(int) - before).sum(axis=2) > 30
        assert 2 <= changed.sum() < 0.2 * changed.size  # a small red blob moved, nothing else
        red = after[..., 0].astype(int) - after[..., 1:].max(axis=2)
        assert (red > 80).sum() >= 2  # the marker is red
    finally:
        robot.stop()


def test_render_false_never_creates_a_renderer() -> None:
    robot = TwinRobot(TwinRobotConfig(render=False))
    with pytest.raises(ConfigError, match="render"):
        robot.cameras()
