"""TwinCameras: offscreen rendering of the front and wrist cameras (MUJOCO_GL=egl on headless machines), and the
renderer's lifetime: closed with the env, or at exit before the EGL display goes (no shutdown tracebacks)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

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


# ----------------------------------------------------------------------------------------- renderer lifetime

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "MUJOCO_GL": "egl", "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}


def _clean_exit(res: subprocess.CompletedProcess[str]) -> None:
    assert res.returncode == 0, res.stderr[-3000:]
    assert "Traceback" not in res.stderr and "Exception ignored" not in res.stderr, res.stderr[-3000:]


def test_a_rendering_command_exits_without_renderer_tracebacks(tmp_path: Path) -> None:
    res = subprocess.run([sys.executable, "-m", "robot_rl.cli", "demo", "--task", "twin-reach", "--episodes", "1",
                          "--image-size", "32", "--out", str(tmp_path)], capture_output=True, text=True, env=ENV,
                         cwd=ROOT, timeout=300)
    _clean_exit(res)
    assert (tmp_path / "strip.png").is_file()


def test_cameras_left_open_are_closed_at_exit_before_the_gl_display_goes() -> None:
    """A pixels env never closed, kept alive by a reference cycle until interpreter shutdown: the atexit hook of
    envs.twin.cameras frees its renderer while EGL still works (the garbage collector would be too late)."""
    code = textwrap.dedent("""
        from envs.presets import make_env
        from envs.twin import cameras
        env = make_env("twin-reach", obs_mode="pixels", image_size=32)
        env.reset(seed=0)
        env.unwrapped.cycle = env
        assert len(cameras._OPEN) == 1
        del env
        print("left open")
    """)
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=ENV, cwd=ROOT,
                         timeout=300)
    _clean_exit(res)
    assert "left open" in res.stdout


def test_closing_the_env_closes_its_renderer() -> None:
    from envs.presets import make_env
    from envs.twin import cameras

    env = make_env("twin-reach", obs_mode="pixels", image_size=32)
    env.reset(seed=0)
    cams = env.unwrapped.robot.cameras()
    assert cams in cameras._OPEN
    env.close()
    assert cams not in cameras._OPEN
    with pytest.raises(RobotError, match="closed"):
        cams.read()
