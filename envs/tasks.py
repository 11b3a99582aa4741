"""Tasks: what an episode is for, independent of the robot backend.

A `Task` says where an episode starts (the reset pose), where the arm may go (the safety box), how long an
episode lasts, what privileged object state the state-mode observation carries, and when the episode is a
success. `RobotEnv` combines a task with any `Robot`; the MuJoCo twin builds the matching scene from
`Task.twin_task`.

Frames and units: positions in metres in the robot base frame (z up, the table top is z = 0 in the twin);
quaternions (w, x, y, z); orientation bounds are extrinsic x-y-z euler angles of R_reset^T R (the rotation
from the reset orientation to the TCP orientation, see controllers.safety.SafetyBox).

Usage::

    task = get_task("pick_cube")
    task.success(robot.state())                       # bool, from privileged twin state
    task.object_obs(robot.state(), origin_pos_m)      # float32 (task.object_dim,)

The twin tasks (numbers chosen for the twin's scene; see each class for the reasoning):

| task          | success                                          | max steps | object obs (dim)                  |
|---------------|--------------------------------------------------|-----------|-----------------------------------|
| reach         | TCP within 2 cm of the goal                      | 50        | goal (3)                          |
| pick_cube     | cube bottom >= 5 cm above the table, in the hand | 100       | cube pos (3) + quat (4) [^sym]    |
| peg_insert    | peg bottom <= 4 mm above the hole floor, centred | 100       | peg - hole, hole, tilt (9) [^peg] |
| cube_relocate | cube released, resting in zone B (_back: A)      | 120       | cube pos (3) + quat (4) [^sym]    |

[^sym]: the cube's orientation up to its 24 symmetries (`canonical_cube_quat`): a yaw reads in [-pi/4, pi/4].
[^peg]: peg bottom - hole floor (3), the hole floor (3), the peg's tilt/yaw error (3, `peg_alignment_error`):
its pose relative to the hole, which is what an insertion needs to the millimetre. A policy given the two
positions separately had to learn their difference to 1 mm and failed on it (README, "Learning on the twin").
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from controllers.transforms import euler_xyz_to_quat, orientation_error, quat_to_euler_xyz
from envs.robot import RobotState
from robot_rl.errors import UnknownTaskError

# Twin geometry the tasks and experts rely on (equal to envs.twin.model's constants, checked by the tests;
# repeated here so that tasks stay importable without mujoco).
CUBE_HALF_SIZE_M = 0.02
"""Half the edge of the twin's 4 cm cube."""
HOLE_DEPTH_M = 0.035
"""Depth of the twin's peg hole (its floor is the table)."""
PEG_BOTTOM_PAST_TCP_M = 0.055
"""How far the held peg's bottom sticks out past the TCP."""


@dataclasses.dataclass(frozen=True)
class Task:
    """Base task: subclasses override `object_obs`, `success` and the field defaults.

    Hardware tasks without privileged state keep `object_keys = ()` (an empty object observation) and
    decide success elsewhere (e.g. a learned reward classifier).
    """

    name: str = "task"
    """Short name (also the twin scene name, see `twin_task`)."""
    description: str = ""
    """One line for `robot-rl tasks`."""
    twin_task: str = ""
    """The MuJoCo twin scene (envs.twin.TWIN_TASKS) that implements this task; empty for hardware-only."""
    reset_pos_m: tuple[float, float, float] = (0.45, 0.0, 0.30)
    """TCP position at the start of an episode (before the reset noise), base frame."""
    reset_quat_wxyz: tuple[float, float, float, float] | None = None
    """TCP orientation at the start of an episode; None = the orientation the arm has at its home joint
    configuration (gripper pointing down, the hand's natural yaw), read once after the first joint reset."""
    reset_gripper_closed: float = 0.0
    """Gripper command held during the reset (0 open, 1 closed)."""
    gripper_locked: bool = False
    """The task never moves the gripper: the env holds `reset_gripper_closed` for the whole episode and ignores
    the action's gripper dim (SERL / HIL-SERL wrap insertion envs in a GripperCloseEnv for the same reason: an
    exploring policy would otherwise drop the part it holds, a failure nothing in the episode can undo)."""
    pos_min_m: tuple[float, float, float] = (0.25, -0.30, 0.02)
    """Safety box lower corner for the commanded TCP position."""
    pos_max_m: tuple[float, float, float] = (0.70, 0.30, 0.55)
    """Safety box upper corner for the commanded TCP position."""
    rot_min_rad: tuple[float, float, float] = (-0.3, -0.3, -0.8)
    """Lower bounds of the euler xyz angles of R_reset^T R_target."""
    rot_max_rad: tuple[float, float, float] = (0.3, 0.3, 0.8)
    """Upper bounds of the euler xyz angles of R_reset^T R_target."""
    max_episode_steps: int = 100
    """Default episode length in env steps (at 10 Hz: 10 s)."""
    reset_routine: str = "default"
    """The reset routine between episodes (envs.resets.ROUTINES name; "default": DEFAULT_ROUTINE)."""
    object_keys: tuple[str, ...] = ()
    """The `RobotState.objects` keys the task reads (all must be present on the twin)."""
    collision_torque_nm: tuple[float, ...] | None = None
    """Hardware (franky): libfranka's joint collision thresholds for this cell, 7 values in Nm, set when the robot
    server connects (a task config's `overrides`; robot-server --collision-torque wins); None: the robot's own."""
    collision_force_n: tuple[float, ...] | None = None
    """Hardware (franky): libfranka's Cartesian collision thresholds (fx fy fz N, tx ty tz Nm), 6 values; given
    together with collision_torque_nm."""

    @property
    def object_dim(self) -> int:
        """Length of `object_obs`."""
        return 0

    def object_obs(self, state: RobotState, origin_pos_m: np.ndarray) -> np.ndarray:
        """Privileged task state as float32 (object_dim,); positions relative to `origin_pos_m`."""
        return np.zeros(0, np.float32)

    def success(self, state: RobotState) -> bool:
        """Whether `state` completes the task."""
        return False

    def goals(self, state: RobotState) -> dict[str, bool]:
        """Named goal checks beside `success` (privileged, for info and metrics only), e.g. which zone a cube
        rests in; {} for most tasks."""
        return {}


def _cube_symmetries_wxyz() -> np.ndarray:
    """The 24 rotations that map a cube onto itself, as unit quaternions wxyz (one sign each), shape (24, 4).

    Up to sign they are the quaternions whose entries are a permutation of (1, 0, 0, 0) (identity, 180 deg about
    an axis), (1, 1, 0, 0) / sqrt(2) with any signs (90 deg about an axis, 180 deg about a face diagonal) or
    (1, 1, 1, 1) / 2 with any signs (120 deg about a body diagonal).
    """
    import itertools

    found: list[np.ndarray] = []
    for pattern in ((1.0, 0.0, 0.0, 0.0), (1.0, 1.0, 0.0, 0.0), (1.0, 1.0, 1.0, 1.0)):
        base = np.asarray(pattern) / np.linalg.norm(pattern)
        for perm in set(itertools.permutations(base)):
            for signs in itertools.product((1.0, -1.0), repeat=4):
                q = np.asarray(perm) * np.asarray(signs)
                q = -q if q[np.flatnonzero(np.abs(q) > 1e-9)[0]] < 0 else q  # one sign per rotation
                if not any(np.allclose(q, f) for f in found):
                    found.append(q)
    return np.stack(found)


CUBE_SYMMETRIES_WXYZ = _cube_symmetries_wxyz()


def canonical_cube_quat(quat_wxyz: np.ndarray) -> np.ndarray:
    """The orientation of a cube up to its 24 symmetries: of the 24 quaternions q * s (s a cube symmetry) that
    describe the same physical cube, the one closest to the identity (largest |w|), sign fixed to w >= 0.

    A cube turned by yaw theta reads as a yaw in [-pi/4, pi/4]; physically equal cubes read equal. This is what a
    policy needs (which way to turn the hand), without the 8-fold ambiguity of the raw quaternion's yaw.
    """
    q = np.asarray(quat_wxyz, np.float64)
    # w of q * s is dot(q, conj(s)); the group is closed under conj, so pick h maximising |q . h|, use s = conj(h)
    h = CUBE_SYMMETRIES_WXYZ[int(np.argmax(np.abs(CUBE_SYMMETRIES_WXYZ @ q)))]
    s = h * np.array([1.0, -1.0, -1.0, -1.0])
    w1, x1, y1, z1 = q
    w2, x2, y2, z2 = s
    out = np.array([w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2, w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
                    w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2, w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2])
    return -out if out[0] < 0 else out


def peg_alignment_error(peg_quat_wxyz: np.ndarray) -> np.ndarray:
    """Rotation vector (3,) rad, base frame, from the nearest orientation that fits the axis-aligned square hole
    (upright, yaw a multiple of 90 degrees) to the peg's: zero when the peg can go straight in."""
    yaw = float(quat_to_euler_xyz(np.asarray(peg_quat_wxyz, np.float64))[2])
    square_yaw = round(yaw / (math.pi / 2)) * (math.pi / 2)
    return orientation_error(np.asarray(peg_quat_wxyz, np.float64), euler_xyz_to_quat(np.array([0.0, 0.0, square_yaw])))


def _rel(state: RobotState, key: str, origin_pos_m: np.ndarray) -> np.ndarray:
    return np.asarray(state.objects[key], np.float64) - origin_pos_m


@dataclasses.dataclass(frozen=True)
class ReachTask(Task):
    """Move the TCP to a random goal point (a visual marker in the twin, no collision).

    Goals are drawn by the twin in x [0.35, 0.6], y [-0.2, 0.2], z [0.1, 0.35]. Success: the TCP is within
    `tolerance_m` = 2 cm of the goal (SERL-style reach tolerance; at 2 cm per step a policy can always land
    inside it). The episode starts at (0.45, 0, 0.40), above the goal region; 50 steps (5 s) is ~2x what
    the farthest goal needs at full speed (0.2 m/s). The safety box adds 10 cm of margin around the goal
    region and keeps the hand 5 cm above the table; orientation is free to +-0.3 rad roll/pitch and
    +-0.8 rad yaw, which the task does not need but a policy may explore.
    """

    name: str = "reach"
    description: str = "move the gripper to a random goal point (success: within 2 cm)"
    twin_task: str = "reach"
    reset_pos_m: tuple[float, float, float] = (0.45, 0.0, 0.40)
    pos_min_m: tuple[float, float, float] = (0.25, -0.30, 0.05)
    pos_max_m: tuple[float, float, float] = (0.70, 0.30, 0.50)
    max_episode_steps: int = 50
    gripper_locked: bool = True  # open (reset_gripper_closed 0): a reach holds nothing and grasps nothing
    object_keys: tuple[str, ...] = ("goal_pos",)
    tolerance_m: float = 0.02
    """Success radius around the goal."""

    @property
    def object_dim(self) -> int:
        return 3

    def object_obs(self, state: RobotState, origin_pos_m: np.ndarray) -> np.ndarray:
        return _rel(state, "goal_pos", origin_pos_m).astype(np.float32)

    def success(self, state: RobotState) -> bool:
        d = np.asarray(state.pos_base_ee) - np.asarray(state.objects["goal_pos"])
        return bool(np.linalg.norm(d) <= self.tolerance_m)


@dataclasses.dataclass(frozen=True)
class PickCubeTask(Task):
    """Grasp the 4 cm cube from the table and lift it.

    The twin places the cube at x [0.4, 0.6], y [-0.15, 0.15] with a random yaw. Success: the cube's bottom
    face is at least `lift_m` = 5 cm above the table (centre z >= 0.02 + 0.05) AND it is held: the fingers
    are apart by less than `held_max_width_m` (closed on something, not wide open) and more than
    `held_min_width_m` (not closed on nothing), and the cube centre is within `held_max_dist_m` of the TCP.
    "Held" rules out a cube that is knocked or thrown up. Start (0.5, 0, 0.25) is above the middle of the
    cube region, gripper open; 100 steps (10 s) leave ~3x the time the scripted expert needs. The safety box
    covers the cube region with 10 cm margin; its floor keeps the TCP 1 cm above the table: the twin's
    fingertips reach 9 mm past the TCP, so the fingers can grasp a 4 cm cube at mid-height (TCP at z = 2 cm)
    but cannot be driven into the table. Yaw is free to +-pi/2 (a 4-fold symmetric cube never needs more
    than pi/4), roll/pitch +-0.3 rad.
    """

    name: str = "pick_cube"
    description: str = "grasp the cube and lift it (success: bottom >= 5 cm above the table, held)"
    twin_task: str = "pick_cube"
    reset_pos_m: tuple[float, float, float] = (0.50, 0.0, 0.25)
    pos_min_m: tuple[float, float, float] = (0.30, -0.25, 0.01)
    pos_max_m: tuple[float, float, float] = (0.70, 0.25, 0.40)
    rot_min_rad: tuple[float, float, float] = (-0.3, -0.3, -math.pi / 2)
    rot_max_rad: tuple[float, float, float] = (0.3, 0.3, math.pi / 2)
    max_episode_steps: int = 100
    reset_routine: str = "pick_cube"
    object_keys: tuple[str, ...] = ("cube_pos", "cube_quat")
    lift_m: float = 0.05
    """Required height of the cube's bottom face above the table."""
    held_min_width_m: float = 0.02
    """Finger gap above which something is between the fingers (the cube is 4 cm; closed on air is ~0)."""
    held_max_width_m: float = 0.06
    """Finger gap below which the gripper is closing/closed (open is 0.08)."""
    held_max_dist_m: float = 0.04
    """Max distance from the TCP to the cube centre while held."""

    @property
    def object_dim(self) -> int:
        return 7

    def object_obs(self, state: RobotState, origin_pos_m: np.ndarray) -> np.ndarray:
        quat = canonical_cube_quat(np.asarray(state.objects["cube_quat"], np.float64))  # up to the cube's symmetry
        return np.concatenate([_rel(state, "cube_pos", origin_pos_m), quat]).astype(np.float32)

    def success(self, state: RobotState) -> bool:
        cube = np.asarray(state.objects["cube_pos"])
        lifted = cube[2] - CUBE_HALF_SIZE_M >= self.lift_m
        width = float(state.gripper_width_m)
        near = np.linalg.norm(cube - np.asarray(state.pos_base_ee)) <= self.held_max_dist_m
        return bool(lifted and near and self.held_min_width_m <= width <= self.held_max_width_m)


@dataclasses.dataclass(frozen=True)
class PegInsertTask(Task):
    """Insert the peg held in the hand into the hole of a fixed block.

    Twin geometry (envs.twin.model): a 20 x 20 x 70 mm square peg, a 22 x 22 mm square hole 35 mm deep
    (1 mm radial clearance) whose floor is the table, the fixture axis-aligned at x [0.45, 0.6],
    y [-0.1, 0.1]. After `reset_scene` the peg sits between the closed fingers, its bottom 55 mm past the
    TCP. `hole_pos` is the centre of the hole's floor, `peg_pos` the centre of the peg's bottom face.
    Success: the peg bottom is within `depth_tolerance_m` = 4 mm of the hole floor (inserted to within 4 mm
    of the full 35 mm depth) and within `lateral_tolerance_m` = 5 mm of the hole axis (inside the hole, not
    beside it). Start (0.52, 0, 0.15) is above the hole region with the peg bottom ~6 cm above the fixture
    top; 100 steps. The safety box covers the hole region with 5 cm margin; its floor (TCP z >= 4.5 cm) is
    1 cm below the TCP height of a fully inserted peg (5.5 cm), so pushing down presses with at most the
    impedance clip force (~20 N) and the fingertips never reach the fixture top. Orientation is limited to
    +-0.2 rad roll/pitch (an insertion needs the peg upright) and +-0.8 rad yaw (the square peg must be turned
    to the hole's yaw mod 90 degrees). The gripper is locked closed (`gripper_locked`): with it free, an exploring
    policy opened the hand and dropped the peg in most stochastic episodes (benchmarks/insertion_diagnosis.py).
    """

    name: str = "peg_insert"
    description: str = "insert the grasped peg into the hole (success: within 4 mm of full depth)"
    twin_task: str = "peg_insert"
    reset_pos_m: tuple[float, float, float] = (0.52, 0.0, 0.15)
    reset_gripper_closed: float = 1.0
    gripper_locked: bool = True
    pos_min_m: tuple[float, float, float] = (0.40, -0.15, 0.045)
    pos_max_m: tuple[float, float, float] = (0.65, 0.15, 0.30)
    rot_min_rad: tuple[float, float, float] = (-0.2, -0.2, -0.8)
    rot_max_rad: tuple[float, float, float] = (0.2, 0.2, 0.8)
    max_episode_steps: int = 100
    object_keys: tuple[str, ...] = ("peg_pos", "peg_quat", "hole_pos")
    depth_tolerance_m: float = 0.004
    """Max height of the peg bottom above the hole bottom."""
    lateral_tolerance_m: float = 0.005
    """Max horizontal distance of the peg bottom from the hole axis."""

    @property
    def object_dim(self) -> int:
        return 9

    def object_obs(self, state: RobotState, origin_pos_m: np.ndarray) -> np.ndarray:
        """peg bottom - hole floor (3, m), hole floor relative to `origin_pos_m` (3, m), `peg_alignment_error`
        (3, rad)."""
        peg = np.asarray(state.objects["peg_pos"], np.float64)
        hole = np.asarray(state.objects["hole_pos"], np.float64)
        return np.concatenate([peg - hole, hole - origin_pos_m, peg_alignment_error(state.objects["peg_quat"])]
                              ).astype(np.float32)

    def success(self, state: RobotState) -> bool:
        d = np.asarray(state.objects["peg_pos"]) - np.asarray(state.objects["hole_pos"])
        return bool(d[2] <= self.depth_tolerance_m and np.hypot(d[0], d[1]) <= self.lateral_tolerance_m)


RELOCATE_ZONE_A_M = ((0.44, -0.15), (0.56, -0.05))
"""Cube-relocate zone A: (x, y) low and high corners of the rectangle on the table (base frame, m)."""
RELOCATE_ZONE_B_M = ((0.44, 0.05), (0.56, 0.15))
"""Cube-relocate zone B (the mirror image of zone A across y = 0)."""


def relocate_zone_m(zone: str) -> tuple[tuple[float, float], tuple[float, float]]:
    """The rectangle (RELOCATE_ZONE_A_M or RELOCATE_ZONE_B_M) of cube-relocate zone "a" or "b"."""
    return RELOCATE_ZONE_A_M if zone == "a" else RELOCATE_ZONE_B_M


def in_zone(xy: np.ndarray, zone: tuple[tuple[float, float], tuple[float, float]]) -> bool:
    """Whether the point `xy` (2,) lies inside the rectangle `zone` ((x_low, y_low), (x_high, y_high))."""
    (x0, y0), (x1, y1) = zone
    return bool(x0 <= float(xy[0]) <= x1 and y0 <= float(xy[1]) <= y1)


@dataclasses.dataclass(frozen=True)
class CubeRelocateTask(Task):
    """Move the 4 cm cube from one zone of the table to the other and let go of it (SERL's bin relocation, on a
    table): "cube_relocate" from zone A (y < 0) to zone B (y > 0), "cube_relocate_back" from B to A.

    The twin draws the cube in the start zone (2 cm inside its edges) with a random yaw, on the first reset only
    in reset-free runs: after that the cube is wherever the last episode left it. Zones (`RELOCATE_ZONE_*_M`):
    12 x 10 cm rectangles at x [0.44, 0.56], y [-0.15, -0.05] (A) and [0.05, 0.15] (B), drawn on the table. Success:
    the cube's centre is inside the target zone, it rests on the table (centre z <= 2.6 cm, i.e. within 6 mm of
    resting) and the hand has let go (finger gap >= `released_width_m` = 5 cm; a held cube reads 4 cm). Requiring
    the release makes a success a state the other direction can start from. 120 steps (12 s): the scripted expert
    needs ~40-55 (grasp, carry 20 cm, put down, open). Start (0.5, 0, 0.25) above the middle between the zones.
    The zones lie in a tray (inner x [0.38, 0.62], y [-0.21, 0.21], 5 cm walls; as SERL's bins, a reset-free run
    cannot push the cube out of reach: over the first 3 cm walls, lower than the 4 cm cube, an exploring policy
    tipped it out within 8k steps); the safety box keeps the TCP 2 cm inside the walls (x [0.40, 0.60],
    y [-0.19, 0.19]), so a cube let go of falls into the tray. `goals` reports both zones ("in_zone_a",
    "in_zone_b"), so one env serves a forward/backward run whichever direction is active.
    """

    name: str = "cube_relocate"
    description: str = "move the cube from zone A to zone B and let go (success: resting in B, released)"
    twin_task: str = "cube_relocate"
    reset_pos_m: tuple[float, float, float] = (0.50, 0.0, 0.25)
    pos_min_m: tuple[float, float, float] = (0.40, -0.19, 0.01)
    pos_max_m: tuple[float, float, float] = (0.60, 0.19, 0.40)
    rot_min_rad: tuple[float, float, float] = (-0.3, -0.3, -math.pi / 2)
    rot_max_rad: tuple[float, float, float] = (0.3, 0.3, math.pi / 2)
    max_episode_steps: int = 120
    reset_routine: str = "cube_relocate"
    object_keys: tuple[str, ...] = ("cube_pos", "cube_quat")
    target_zone: str = "b"
    """"b" (forward: A -> B) or "a" (backward: B -> A)."""
    rest_max_z_m: float = CUBE_HALF_SIZE_M + 0.006
    """Max height of the cube's centre for "resting on the table"."""
    released_width_m: float = 0.05
    """Min finger gap for "let go"."""

    @property
    def object_dim(self) -> int:
        return 7

    def object_obs(self, state: RobotState, origin_pos_m: np.ndarray) -> np.ndarray:
        quat = canonical_cube_quat(np.asarray(state.objects["cube_quat"], np.float64))
        return np.concatenate([_rel(state, "cube_pos", origin_pos_m), quat]).astype(np.float32)

    def placed_in(self, state: RobotState, zone: str) -> bool:
        """The cube rests inside zone "a" or "b" and the hand has let go."""
        cube = np.asarray(state.objects["cube_pos"])
        return bool(in_zone(cube[:2], relocate_zone_m(zone)) and cube[2] <= self.rest_max_z_m
                    and float(state.gripper_width_m) >= self.released_width_m)

    def success(self, state: RobotState) -> bool:
        return self.placed_in(state, self.target_zone)

    def goals(self, state: RobotState) -> dict[str, bool]:
        return {"in_zone_a": self.placed_in(state, "a"), "in_zone_b": self.placed_in(state, "b")}


TASKS: dict[str, Task] = {t.name: t for t in (
    ReachTask(), PickCubeTask(), PegInsertTask(), CubeRelocateTask(),
    CubeRelocateTask(name="cube_relocate_back", twin_task="cube_relocate_back", target_zone="a",
                     reset_routine="cube_relocate_back",
                     description="move the cube from zone B back to zone A and let go (the backward direction)"),
)}
"""The built-in tasks by name."""


def get_task(task: str | Task) -> Task:
    """A task by name (or the task itself); `UnknownTaskError` lists the known names."""
    if isinstance(task, Task):
        return task
    try:
        return TASKS[task]
    except KeyError:
        raise UnknownTaskError(f"unknown task '{task}'; known: {', '.join(sorted(TASKS))}") from None
