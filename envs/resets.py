"""Reset routines as data: what the robot itself does between episodes when nobody puts the objects back.

On hardware nothing teleports a cube back to its start region; in the twin's hardware-faithful mode
(`RobotEnvConfig.scene_resets = "first"`) nothing does either, after the first reset of a run. Between episodes
`RobotEnv.reset` then runs the task's routine: a short tuple of `ResetStep`s executed through the Robot seam only
(`command`, `wait`, `set_gains`, `state`), so a routine runs unchanged on the twin and on any hardware backend.
After the routine come the joint reset (when due: `RobotEnvConfig.joint_reset_every`) and the env's usual move to
the reset pose plus uniform noise; a routine does not repeat them.

Ops (fields of `ResetStep` that each one reads):

| op        | fields                             | what the robot does                                            |
|-----------|------------------------------------|----------------------------------------------------------------|
| "gains"   | profile                            | `set_gains(profile)` ("precision" for resets, "compliance")   |
| "gripper" | closed, wait_s                     | command the gripper (0 open, 1 closed), hold the pose `wait_s` |
| "wait"    | wait_s                             | hold the current target for `wait_s`                           |
| "move"    | pos_m, frame, noise_m, orientation | walk the reference to the target at the reset speeds, settle   |
| "if_held" | held_width_m, then                 | run the steps in `then` only if something is in the fingers   |

"move" targets: frame "base" = absolute base-frame coordinates, where None keeps the TCP's current coordinate on
that axis; frame "tcp" = an offset from the TCP's current position (base-frame axes). Uniform noise of +-noise_m
per axis is added (a "random spot in a region" is the region's centre with its half-extent as noise). The
orientation is the task's nominal reset orientation (`orientation="reset"`, the default: an exploring policy may
leave the hand tilted where the arm cannot follow it, e.g. pitched back near the base puts joint 4 at its limit) or
the current commanded one ("keep": the routines' lifts, which must not turn open fingers around a cube); the target
is clipped to the task's safety box. A move with
`must_settle` that does not settle is retried (`RobotEnvConfig.reset_retries`) and then stops the run with
`robot_rl.errors.ResetError`; `must_settle=False` is for moves that may end in contact (putting a held cube down).
"if_held" decides from proprio alone (what a real gripper reports): the gripper is commanded closed and its width
is inside `held_width_m` (closed on nothing reads ~0, open 0.08 m).

Usage::

    routine = routine_for("pick_cube")          # the task's steps (DEFAULT_ROUTINE for a task without one)
    ResetStep("move", pos_m=(0.0, 0.0, 0.05), frame="tcp")              # lift 5 cm
    ResetStep("if_held", then=(ResetStep("gripper", closed=0.0),))      # drop what is held
    check_routine(routine)                      # ConfigError naming the step and field of a bad entry
"""

from __future__ import annotations

import dataclasses
import math

from robot_rl.errors import ConfigError

OPS = ("gains", "gripper", "wait", "move", "if_held")
FRAMES = ("base", "tcp")
ORIENTATIONS = ("reset", "keep")


@dataclasses.dataclass(frozen=True)
class ResetStep:
    """One step of a reset routine (see the module docstring for which fields each op reads)."""

    op: str
    """One of OPS."""
    profile: str = "precision"
    """gains: the gain profile name."""
    closed: float = 0.0
    """gripper: the command, 0 (open) .. 1 (closed)."""
    wait_s: float = 0.0
    """gripper / wait: seconds to hold afterwards."""
    pos_m: tuple[float | None, float | None, float | None] = (0.0, 0.0, 0.0)
    """move: the target (frame "base", None keeps the current coordinate) or the offset (frame "tcp"), metres."""
    frame: str = "tcp"
    """move: "base" or "tcp" (see the module docstring)."""
    noise_m: tuple[float, float, float] = (0.0, 0.0, 0.0)
    """move: uniform noise +- per axis added to the target, metres."""
    must_settle: bool = True
    """move: a move that does not settle is retried, then ResetError; False: time out silently (contact moves)."""
    orientation: str = "reset"
    """move: "reset" (the task's nominal reset orientation) or "keep" (the current commanded one)."""
    held_width_m: tuple[float, float] = (0.01, 0.07)
    """if_held: the finger gap range that means "something is held" (the twin's cube reads ~0.04)."""
    then: tuple[ResetStep, ...] = ()
    """if_held: the steps to run when something is held."""


def check_routine(steps: tuple[ResetStep, ...], where: str = "reset routine") -> None:
    """ConfigError naming the step index and field of the first invalid entry."""
    for i, st in enumerate(steps):
        at = f"{where} step {i} ({st.op!r})"
        if st.op not in OPS:
            raise ConfigError(f"{at}: op must be one of {OPS}")
        if not (math.isfinite(st.wait_s) and st.wait_s >= 0):
            raise ConfigError(f"{at}: wait_s={st.wait_s} must be finite and >= 0")
        if not 0.0 <= st.closed <= 1.0:
            raise ConfigError(f"{at}: closed={st.closed} must be in [0, 1]")
        if st.frame not in FRAMES:
            raise ConfigError(f"{at}: frame={st.frame!r} must be one of {FRAMES}")
        if st.orientation not in ORIENTATIONS:
            raise ConfigError(f"{at}: orientation={st.orientation!r} must be one of {ORIENTATIONS}")
        if len(st.pos_m) != 3 or any(v is not None and not math.isfinite(v) for v in st.pos_m):
            raise ConfigError(f"{at}: pos_m={st.pos_m} must be 3 finite numbers (or None on frame 'base')")
        if st.frame == "tcp" and any(v is None for v in st.pos_m):
            raise ConfigError(f"{at}: pos_m={st.pos_m}: None (keep the coordinate) needs frame 'base'")
        if len(st.noise_m) != 3 or any(not (math.isfinite(v) and v >= 0) for v in st.noise_m):
            raise ConfigError(f"{at}: noise_m={st.noise_m} must be 3 finite numbers >= 0")
        lo, hi = st.held_width_m
        if not 0.0 <= lo < hi:
            raise ConfigError(f"{at}: held_width_m={st.held_width_m} must satisfy 0 <= low < high")
        if st.op == "if_held":
            check_routine(st.then, where=f"{at} then")
        elif st.then:
            raise ConfigError(f"{at}: only 'if_held' takes 'then' steps")


def _lift(dz_m: float) -> ResetStep:
    """Straight up, the hand's orientation kept (turning it could sweep a cube that is still between the open
    fingers), best effort: a lift that stops short at a joint limit is fine, the moves after it must settle."""
    return ResetStep("move", pos_m=(0.0, 0.0, dz_m), frame="tcp", orientation="keep", must_settle=False)


_PUT_DOWN_HERE: tuple[ResetStep, ...] = (
    ResetStep("move", pos_m=(None, None, 0.025), frame="base", must_settle=False),  # cube ~1 cm above the table
    ResetStep("gripper", closed=0.0, wait_s=0.5),
    _lift(0.08),
)
"""Put a held cube down where the hand is (lower it until it nearly touches, open, lift clear)."""

DEFAULT_ROUTINE: tuple[ResetStep, ...] = (
    ResetStep("gains", profile="precision"),
    _lift(0.05),
)
"""A task without its own routine: precision gains and a 5 cm lift (clear of whatever the hand touched); the
gripper keeps its command (a peg-insert peg stays in the hand)."""

ROUTINES: dict[str, tuple[ResetStep, ...]] = {
    # pick-cube: a held cube goes back to a random spot of its start region (the twin draws x [0.4, 0.6],
    # y [-0.15, 0.15]; the spot stays 2-3 cm inside it): lift, carry over at 10 cm, put down, open, lift clear.
    # Then open (a gripper closed on nothing), lift 5 cm.
    "pick_cube": (
        ResetStep("gains", profile="precision"),
        ResetStep("if_held", then=(
            _lift(0.03),
            ResetStep("move", pos_m=(0.50, 0.0, 0.10), frame="base", noise_m=(0.08, 0.12, 0.0)),
            *_PUT_DOWN_HERE,
        )),
        ResetStep("gripper", closed=0.0, wait_s=0.3),
        _lift(0.05),
    ),
    # cube-relocate (either direction): a cube still held when the episode ended is put down where it is (the
    # other direction's policy takes it from there), then open and lift.
    "cube_relocate": (
        ResetStep("gains", profile="precision"),
        ResetStep("if_held", then=_PUT_DOWN_HERE),
        ResetStep("gripper", closed=0.0, wait_s=0.3),
        _lift(0.05),
    ),
}
ROUTINES["cube_relocate_back"] = ROUTINES["cube_relocate"]

for _name, _steps in ROUTINES.items():
    check_routine(_steps, where=f"envs.resets.ROUTINES[{_name!r}]")
check_routine(DEFAULT_ROUTINE, where="envs.resets.DEFAULT_ROUTINE")


def routine_for(task_name: str) -> tuple[ResetStep, ...]:
    """The reset routine of task `task_name` (envs.tasks names), DEFAULT_ROUTINE when it has none."""
    return ROUTINES.get(task_name, DEFAULT_ROUTINE)
