"""The twin's task scenes: names, geometry constants, randomisation ranges and `build_model`.

One MuJoCo model per task, all sharing the arm of envs/assets/panda.xml and the world of twin_world.xml
(table top = the plane z = 0 of the robot base frame, robot base at the origin):

- "reach": a goal marker (mocap body "goal", a visible non-colliding 2 cm sphere).
- "pick_cube": a free 4 cm cube ("cube", 70 g) on the table.
- "peg_insert": a square hole fixture (mocap body "fixture", hole 22 x 22 mm, 35 mm deep, its floor is the
  table) and a 20 x 20 x 70 mm peg ("peg", 50 g, body frame at the centre of its bottom face, z along its
  axis) held between the fingers: 1 mm radial clearance.

Usage::

    model = build_model("reach", image_height=64, image_width=64)
    data = mujoco.MjData(model)
"""

from __future__ import annotations

import mujoco
import numpy as np

from envs.assets import asset_path
from robot_rl.errors import ConfigError, UnknownTaskError
from robot_rl.reward_source import POLICY_CAMERAS

TWIN_TASKS: tuple[str, ...] = ("reach", "pick_cube", "peg_insert", "cube_relocate", "cube_relocate_back")
"""The task scenes of the twin (envs/assets/scene_<task>.xml; both cube-relocate directions share one file)."""
CUBE_TASKS: tuple[str, ...] = ("pick_cube", "cube_relocate", "cube_relocate_back")
"""The scenes with the free cube (objects cube_pos, cube_quat)."""

ARM_JOINTS = tuple(f"joint{i}" for i in range(1, 8))
FINGER_JOINTS = ("finger_joint1", "finger_joint2")
TCP_SITE = "tcp"
FT_SITE = "ft"
HAND_BODY = "hand"
GRIPPER_ACTUATOR = "gripper"
CAMERA_NAMES: tuple[str, ...] = ("front", "wrist", "side", "level")
"""Every camera of the twin's scene: front (a fixed view of the workspace), wrist (on the hand), side (25 cm above
the table beside the cube region, looking across it and slightly down: a lab's separate reward camera) and level
(the same place at the height of pick-cube's success line, looking level: the line is one image row at every
depth; another reward camera)."""
DEFAULT_CAMERAS: tuple[str, ...] = POLICY_CAMERAS
"""The cameras a twin renders unless told otherwise: those a pixel policy observes (robot_rl.reward_source)."""

GRIPPER_MAX_WIDTH_M = 0.08
"""Fully open gripper: the distance between the finger pads (two fingers, 0.04 m each)."""
GRIPPER_FORCE_LIMIT_N = 70.0
"""Force limit of the gripper's position servo: the squeeze on a grasped object."""

# reach
GOAL_LOW = np.array([0.35, -0.2, 0.1])
GOAL_HIGH = np.array([0.6, 0.2, 0.35])
"""reset_scene draws the goal uniformly in [GOAL_LOW, GOAL_HIGH] (base frame, m)."""

# pick_cube
CUBE_HALF_SIZE_M = 0.02
CUBE_XY_LOW = np.array([0.4, -0.15])
CUBE_XY_HIGH = np.array([0.6, 0.15])
"""reset_scene draws the cube centre uniformly in this box (z = CUBE_HALF_SIZE_M) and its yaw in [-pi, pi)."""

# cube_relocate (zones: envs.tasks.RELOCATE_ZONE_*_M; the start regions stay 2 cm inside them)
RELOCATE_START_XY: dict[str, tuple[np.ndarray, np.ndarray]] = {
    "cube_relocate": (np.array([0.46, -0.13]), np.array([0.54, -0.07])),        # in zone A
    "cube_relocate_back": (np.array([0.46, 0.07]), np.array([0.54, 0.13])),     # in zone B
}
"""reset_scene draws the cube centre uniformly in the scene's start region (z = CUBE_HALF_SIZE_M), yaw in [-pi, pi)."""
RELOCATE_TRAY_XY: tuple[np.ndarray, np.ndarray] = (np.array([0.42, -0.17]), np.array([0.58, 0.17]))
"""TwinRobotConfig.cube_start = "tray": the cube centre anywhere in this rectangle (the tray floor, the cube's centre
4 cm from the inner walls), outside the task's target zone: the starts a reset-free run leaves behind."""

# peg_insert
HOLE_HALF_WIDTH_M = 0.011
HOLE_DEPTH_M = 0.035
"""The hole's floor is the table (z = 0); its opening is HOLE_DEPTH_M above, at the fixture's top face."""
PEG_HALF_WIDTH_M = 0.01
PEG_LENGTH_M = 0.07
PEG_BOTTOM_PAST_TCP_M = 0.055
"""When held, the peg's bottom face is this far past the TCP along the TCP z axis (its top 15 mm behind)."""
FIXTURE_XY_LOW = np.array([0.45, -0.1])
FIXTURE_XY_HIGH = np.array([0.6, 0.1])
"""reset_scene draws the hole centre uniformly in this box; the fixture is not rotated (faces along x/y)."""


def scene_file(task: str) -> str:
    """The MJCF file name of `task`'s scene; UnknownTaskError for an unknown task."""
    if task not in TWIN_TASKS:
        raise UnknownTaskError(f"unknown twin task {task!r}; known: {list(TWIN_TASKS)}")
    return "scene_cube_relocate.xml" if task in RELOCATE_START_XY else f"scene_{task}.xml"


def build_model(task: str, image_height: int = 128, image_width: int = 128) -> mujoco.MjModel:
    """Compile `task`'s scene with the offscreen framebuffer sized to the camera images (software GL renders
    fastest when the buffer is exactly the image size). The timestep is the XML's 1 ms; TwinRobot sets it from
    its physics_hz."""
    for name, value in (("image_height", image_height), ("image_width", image_width)):
        if not isinstance(value, int | np.integer) or isinstance(value, bool) or not 1 <= value <= 4096:
            raise ConfigError(f"{name}={value!r} must be an int in [1, 4096]")
    model = mujoco.MjModel.from_xml_path(str(asset_path(scene_file(task))))
    model.vis.global_.offwidth = int(image_width)
    model.vis.global_.offheight = int(image_height)
    return model
