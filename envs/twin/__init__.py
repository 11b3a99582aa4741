"""The MuJoCo twin: a Franka-Panda-like arm with a parallel gripper in task scenes, behind the Robot seam.

Usage::

    from envs.twin import TwinRobot, TwinRobotConfig, TWIN_TASKS
    robot = TwinRobot(TwinRobotConfig(task="pick_cube", image_height=128, image_width=128))
    robot.reset_scene(seed=0)
    images = robot.cameras().read()

Rendering runs headless through EGL: unless MUJOCO_GL is already set (or a display is available), importing
this package sets MUJOCO_GL=egl before mujoco is first imported.
"""

import os

if "MUJOCO_GL" not in os.environ and not os.environ.get("DISPLAY") and not os.environ.get("WAYLAND_DISPLAY"):
    os.environ["MUJOCO_GL"] = "egl"

from envs.twin.cameras import TwinCameras
from envs.twin.model import TWIN_TASKS, build_model
from envs.twin.robot import TwinRobot, TwinRobotConfig

__all__ = ["TWIN_TASKS", "TwinCameras", "TwinRobot", "TwinRobotConfig", "build_model"]
