"""TwinCameras: offscreen rendering of the front and wrist cameras (MUJOCO_GL=egl on headless machines), and the
renderer's lifetime: closed with the env, or at exit before the EGL display goes (no shutdown tracebacks)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import mujoco
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


def _lowest_cube_row(r: mujoco.Renderer, m: mujoco.MjModel, d: mujoco.MjData, cube_xyz: tuple[float, float, float],
                     camera: str) -> int:
    """The lowest image row (0 = top) where `camera` sees the cube at `cube_xyz` (centre, m): the rows that differ
    from the same scene with the cube far out of view."""
    qa = m.jnt_qposadr[m.body("cube").jntadr[0]]
    frames = []
    for xyz in (cube_xyz, (0.5, 5.0, 0.02)):
        d.qpos[qa:qa + 3], d.qpos[qa + 3:qa + 7] = xyz, (1.0, 0.0, 0.0, 0.0)
        mujoco.mj_forward(m, d)
        r.update_scene(d, camera=camera)
        frames.append(r.render().astype(int))
    rows = np.nonzero(np.abs(frames[0] - frames[1]).sum(axis=(1, 2)) > 30)[0]
    assert rows.size, f"{camera} does not see the cube at {cube_xyz}"
    return int(rows.max())


def test_the_level_camera_sees_pick_cubes_line_as_one_row_at_every_depth() -> None:
    """`level` sits at the height of pick-cube's line (the cube's bottom 5 cm up), so a cube's bottom edge shows on
    the same image row at every distance from the camera, and crosses one row when it crosses the line; from the
    `side` camera, 20 cm higher and looking down, the row of the same heights moves with the distance."""
    from envs.tasks import PickCubeTask
    from envs.twin.model import CAMERA_NAMES, CUBE_HALF_SIZE_M, build_model

    assert "level" in CAMERA_NAMES
    line_m = PickCubeTask().lift_m
    model = build_model("pick_cube", 64, 64)
    data = mujoco.MjData(model)
    renderer = mujoco.Renderer(model, 64, 64)
    try:
        def rows(camera: str, bottom_m: float) -> set[int]:
            return {_lowest_cube_row(renderer, model, data, (0.5, y, bottom_m + CUBE_HALF_SIZE_M), camera)
                    for y in (-0.15, 0.0, 0.15)}  # the near, middle and far edge of the cube region

        below, above = rows("level", line_m - 0.004), rows("level", line_m + 0.004)
        assert len(below) == 1 and len(above) == 1, (below, above)  # one row at every depth
        assert above == {below.pop() - 1}  # crossing the line moves the bottom edge up by one row
        assert len(rows("side", line_m - 0.004)) > 1  # from above, depth moves the row
    finally:
        renderer.close()
