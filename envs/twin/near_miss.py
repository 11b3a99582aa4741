"""Scripted near misses for pick-cube and cube-relocate: episodes that look almost like success and are not, for
reward-classifier labels (HIL-SERL: negatives near success are the most useful ones).

Each kind is a short state machine over the twin's privileged state that ends by itself (or after `max_steps`).
`near_miss_kinds(task)` names a task's kinds. Pick-cube (`NEAR_MISS_KINDS`):

- "lift-drop": grasp the cube like the expert, lift it only `small_lift_m` (0.5-1.5 cm commanded; the cube
  ends up 1.5-2 cm up, a third of the task's 5 cm), hold it there, open the gripper (the cube drops), then rise
  to the hover height.
- "grip-beside": descend with the fingers closed next to the cube (5-7 cm from its centre, in a random
  direction), then lift the closed gripper 12 cm as a success would, with nothing in it, and hold.
- "push": lower the closed gripper to the table 6 cm from the cube and sweep through the cube's position,
  pushing it 4-6 cm along the table, then rise.

Cube-relocate, either direction (`RELOCATE_NEAR_MISS_KINDS`; "the zone" is the task's target zone, B for
cube_relocate, A for cube_relocate_back):

- "place-outside": grasp and carry like the expert (`ScriptedExpert._relocate`), but put the cube down just
  outside the zone, open and rise: its centre aimed 2-5 cm beyond one edge (at most 3.2 cm where a tray wall
  is behind the edge; the edge drawn among those with room for 2.5 cm), the hand turned on the way so that the
  fingers lie parallel to that edge (across it they would hit the wall). The cube ends released, resting,
  outside (on the twin 1.5-5 cm beyond the edge: it may settle a few mm when let go).
- "empty-visit": leave the cube where it is; move the hand (closed or open, drawn per episode, at a random yaw)
  above the expert's release spot in the zone, lower it to the expert's release height, open, rise: the arm
  pose of a success with no cube in the zone.
- "hold-over": grasp and carry like the expert to its release spot in the zone, then hold the cube there 2-4 cm
  above where it would rest (cube bottom ~2-4 cm above the table), closed, for a few steps: not resting, not
  released.

None of them can meet the task's success condition (pick-cube: the cube never goes 5 cm up, or is never held;
cube-relocate: the cube is never released resting inside the zone; the relocate routines assume it starts outside
the zone, as every teleporting reset puts it), so labels from `info["success"]` mark every frame negative. A cube
lost from the hand while carrying ends a relocate routine (the expert would open and pick it up again, which
could release it inside the zone). `NearMissOperator` wraps a routine as a teleop-like device
(the one device interface, `envs.devices.HumanDevice`: `reset()`, `poll(state) -> HumanCommand`, `close()`) with
a `done` flag the label recorder (`demos.recording.labels`) ends the segment on.

Usage::

    op = NearMissOperator("lift-drop", seed=0)      # or NearMissOperator("place-outside", task="cube_relocate")
    obs, _ = env.reset(seed=0); op.reset()
    while not op.done:
        obs, r, term, trunc, info = env.step(op.poll(env.unwrapped.last_state).action())
"""

from __future__ import annotations

import math

import numpy as np

from controllers.transforms import quat_to_euler_xyz
from envs.devices import HumanCommand
from envs.robot import RobotState
from envs.tasks import CUBE_HALF_SIZE_M, CubeRelocateTask, Task, get_task, relocate_zone_m
from envs.twin.experts import ScriptedExpert, down_at_yaw, hand_yaw, wrap
from robot_rl.errors import ConfigError

NEAR_MISS_KINDS = ("lift-drop", "grip-beside", "push")
"""The pick-cube near-miss routines, in the order a recorder cycles through them."""
RELOCATE_NEAR_MISS_KINDS = ("place-outside", "empty-visit", "hold-over")
"""The cube-relocate near-miss routines (both directions), in the order a recorder cycles through them."""

OUTSIDE_M = (0.02, 0.05)
"""place-outside: range of the cube centre's distance beyond the zone edge (m)."""
WALL_CLEARANCE_M = 0.008
"""place-outside: the cube centre stays this far inside the safety box (m); the box lies a cube half size (2 cm)
inside the tray walls, so the put-down cube clears them by this much (the fingers, turned parallel to the edge,
stick out less than the cube)."""


def _resolve(task: str | Task) -> Task:
    if isinstance(task, str) and task.startswith("twin-"):
        from envs.presets import twin_task

        task = twin_task(task)
    return get_task(task)


def near_miss_kinds(task: str | Task) -> tuple[str, ...]:
    """The near-miss kinds of `task` (a task name, a twin preset name such as "twin-cube-relocate", or a Task):
    `NEAR_MISS_KINDS` for pick-cube, `RELOCATE_NEAR_MISS_KINDS` for either cube-relocate direction, () otherwise."""
    t = _resolve(task)
    if t.name == "pick_cube":
        return NEAR_MISS_KINDS
    if isinstance(t, CubeRelocateTask):
        return RELOCATE_NEAR_MISS_KINDS
    return ()


class NearMissExpert(ScriptedExpert):
    """One near-miss routine of a pick-cube or cube-relocate task (see the module docstring); `done` once it has
    finished.

    kind: one of `near_miss_kinds(task)`. seed: draws the routine's free parameters (lift height, offset
    direction, push length, edge and distance, hand closed or open, ...) per episode. max_steps: the routine gives
    up (done) after this many steps (None: 10 fewer than the task's episode, 90 for pick-cube, 110 for
    cube-relocate). task: "pick_cube", "cube_relocate", "cube_relocate_back", a twin preset name or a Task.
    """

    def __init__(self, kind: str, seed: int | None = None, max_steps: int | None = None,
                 action_scale_m: float = 0.02, action_scale_rad: float = 0.1, task: str | Task = "pick_cube") -> None:
        the_task = _resolve(task)
        kinds = near_miss_kinds(the_task)
        if not kinds:
            raise ConfigError(f"no scripted near misses for task {the_task.name!r} (only pick-cube and cube-relocate)")
        if kind not in kinds:
            raise ConfigError(f"near-miss kind {kind!r} for task {the_task.name!r}: must be one of {kinds}")
        self.kind = kind
        self.max_steps = int(max_steps) if max_steps is not None else the_task.max_episode_steps - 10
        super().__init__(the_task, noise_std=0.0, seed=seed, action_scale_m=action_scale_m,
                         action_scale_rad=action_scale_rad)

    def reset(self) -> None:
        super().reset()
        self.done = False
        self.steps = 0
        self._hold = 0
        self._anchor: np.ndarray | None = None  # the routine's reference point, fixed when first needed
        rng = self.rng
        self.small_lift_m = float(rng.uniform(0.005, 0.015))
        angle = float(rng.uniform(-math.pi, math.pi))
        self.direction = np.array([math.cos(angle), math.sin(angle), 0.0])
        self.offset_m = float(rng.uniform(0.05, 0.07))
        self.push_m = float(rng.uniform(0.04, 0.06))
        self.hold_steps = int(rng.integers(3, 7))
        if self.kind in ("grip-beside", "push"):
            self.phase = "hover"
        if isinstance(self.task, CubeRelocateTask):  # drawn after the pick-cube ones: those stay as they were
            self._reset_relocate()

    def act(self, state: RobotState) -> np.ndarray:
        self.steps += 1
        if self.steps >= self.max_steps:
            self.done = True
        action = {"lift-drop": self._lift_drop, "grip-beside": self._grip_beside, "push": self._push,
                  "place-outside": self._place_outside, "empty-visit": self._empty_visit,
                  "hold-over": self._hold_over}[self.kind](state)
        return np.clip(action, -1.0, 1.0).astype(np.float32)

    # ------------------------------------------------------------------------------------------------------

    def _cube(self, state: RobotState) -> tuple[np.ndarray, np.ndarray]:
        """(cube centre (3,), the hand orientation aligned with the cube's yaw mod 90 degrees)."""
        cube = np.asarray(state.objects["cube_pos"], np.float64)
        cube_yaw = float(quat_to_euler_xyz(np.asarray(state.objects["cube_quat"]))[2])
        yaw = hand_yaw(state.quat_base_ee)
        return cube, down_at_yaw(yaw + wrap(cube_yaw - yaw, math.pi / 2))

    def _hold_then(self, next_phase: str) -> bool:
        """Count a hold step; switch to `next_phase` after `hold_steps` of them. True while still holding."""
        self._hold += 1
        if self._hold >= self.hold_steps:
            self._hold = 0
            self._set_phase(next_phase)
            return False
        return True

    def _lift_drop(self, state: RobotState) -> np.ndarray:
        _, quat = self._cube(state)
        tcp = state.pos_base_ee
        if self.phase in ("approach", "descend", "grasp"):
            action = self._pick(state)  # the expert's approach / descend / grasp; it turns to "lift" when closed
            if self.phase != "lift":
                return action
            self._set_phase("small-lift")
            self._anchor = np.array([tcp[0], tcp[1], self._grasp_z + self.small_lift_m])
        if self.phase == "small-lift":
            assert self._anchor is not None
            if abs(tcp[2] - self._anchor[2]) < 0.003 or self._phase_steps > 8:
                self._hold_then("drop")
            return self._move(state, self._anchor, quat, 1.0, max_speed=0.5)
        if self.phase == "drop":
            assert self._anchor is not None
            self._hold_then("rise")
            return self._move(state, self._anchor, quat, -1.0)
        # rise to the hover height with the gripper open, then stop
        target = np.array([tcp[0], tcp[1], CUBE_HALF_SIZE_M + 0.10])
        if abs(tcp[2] - target[2]) < 0.01:
            self.done = True
        return self._move(state, target, quat, -1.0)

    def _grip_beside(self, state: RobotState) -> np.ndarray:
        cube, quat = self._cube(state)
        tcp = state.pos_base_ee
        if self._anchor is None:
            self._anchor = cube + self.offset_m * self.direction
            self._anchor[2] = CUBE_HALF_SIZE_M - 0.005
        beside = self._anchor
        hover = beside + np.array([0.0, 0.0, 0.08])
        if self.phase == "hover":
            if float(np.hypot(*(hover[:2] - tcp[:2]))) < 0.01 and abs(tcp[2] - hover[2]) < 0.03:
                self._set_phase("descend")
            return self._move(state, hover, quat, 1.0)  # the fingers close on the way: nothing between them
        if self.phase == "descend":
            if tcp[2] - beside[2] < 0.008 or self._phase_steps > 25:
                self._set_phase("lift")
            return self._move(state, beside, quat, 1.0)
        if self.phase == "lift":
            top = beside + np.array([0.0, 0.0, 0.12])
            if abs(tcp[2] - top[2]) < 0.01 or self._phase_steps > 15:
                self._set_phase("hold")
            return self._move(state, top, quat, 1.0)
        if not self._hold_then("end"):
            self.done = True
        return self._move(state, beside + np.array([0.0, 0.0, 0.12]), quat, 1.0)

    def _push(self, state: RobotState) -> np.ndarray:
        cube, quat = self._cube(state)
        tcp = state.pos_base_ee
        if self._anchor is None:
            self._anchor = cube - 0.06 * self.direction
            self._anchor[2] = CUBE_HALF_SIZE_M
        start = self._anchor
        end = start + (0.035 + self.push_m) * self.direction  # first contact ~3.5 cm along
        if self.phase == "hover":
            hover = start + np.array([0.0, 0.0, 0.08])
            if float(np.hypot(*(hover[:2] - tcp[:2]))) < 0.01 and abs(tcp[2] - hover[2]) < 0.03:
                self._set_phase("descend")
            return self._move(state, hover, quat, 1.0)
        if self.phase == "descend":
            if tcp[2] - start[2] < 0.008 or self._phase_steps > 25:
                self._set_phase("sweep")
            return self._move(state, start, quat, 1.0)
        if self.phase == "sweep":
            if float(np.hypot(*(end[:2] - tcp[:2]))) < 0.01 or self._phase_steps > 30:
                self._set_phase("rise")
            return self._move(state, end, quat, 1.0, max_speed=0.5)
        top = end + np.array([0.0, 0.0, 0.08])
        if abs(tcp[2] - top[2]) < 0.01 or self._phase_steps > 15:
            self.done = True
        return self._move(state, top, quat, 1.0)


    # ------------------------------------------------------------------------------------------------------
    # cube-relocate

    def _reset_relocate(self) -> None:
        """Draw the relocate routines' free parameters (the expert's reset has drawn `_place_xy`, its release
        spot in the target zone)."""
        task = self.task
        assert isinstance(task, CubeRelocateTask)
        rng = self.rng
        self.zone = relocate_zone_m(task.target_zone)
        (x0, y0), (x1, y1) = self.zone
        lo = np.asarray(task.pos_min_m[:2]) + WALL_CLEARANCE_M
        hi = np.asarray(task.pos_max_m[:2]) - WALL_CLEARANCE_M
        # (name, axis, outward sign, edge coordinate, room for the cube centre beyond the edge)
        edges = [("x-low", 0, -1.0, x0, x0 - lo[0]), ("x-high", 0, 1.0, x1, hi[0] - x1),
                 ("y-low", 1, -1.0, y0, y0 - lo[1]), ("y-high", 1, 1.0, y1, hi[1] - y1)]
        edges = [e for e in edges if e[4] >= OUTSIDE_M[0] + 0.005]
        if not edges:
            raise ConfigError(f"task {task.name!r}: no room for a cube {OUTSIDE_M[0]} m outside its target zone "
                              "inside the safety box")
        self.edge, axis, sign, coord, room = edges[int(rng.integers(len(edges)))]
        self.outside_m = float(rng.uniform(OUTSIDE_M[0], min(OUTSIDE_M[1], room)))
        self.outside_xy = np.zeros(2)
        self.outside_xy[axis] = coord + sign * self.outside_m
        span = (self.zone[0][1 - axis] + 0.01, self.zone[1][1 - axis] - 0.01)  # along the edge, beside the zone
        self.outside_xy[1 - axis] = float(rng.uniform(*span))
        self.closed_visit = bool(rng.random() < 0.5)
        self.visit_yaw = float(rng.uniform(-math.pi / 4, math.pi / 4))
        self.hold_above_m = float(rng.uniform(0.02, 0.04))
        self._yaw0: float | None = None

    def _lost(self, state: RobotState) -> np.ndarray | None:
        """End the routine (the gripper command kept) when the cube has left the hand after the grasp, before the
        expert's slip recovery would open the hand, possibly over the target zone; None while all is well."""
        if self.phase not in ("lift", "carry", "lower", "hold") or self._phase_steps < 2:
            return None
        cube = np.asarray(state.objects["cube_pos"], np.float64)
        held = float(np.linalg.norm(cube - state.pos_base_ee)) < 0.04 and float(state.gripper_width_m) > 0.01
        if held:
            return None
        self.done = True
        return np.zeros(7)  # gripper 0: keep

    def _place_outside(self, state: RobotState) -> np.ndarray:
        cube = np.asarray(state.objects["cube_pos"], np.float64)
        tcp = state.pos_base_ee
        if self._yaw0 is None:
            self._yaw0 = hand_yaw(state.quat_base_ee)
        if self.phase in ("lift", "carry"):  # aim the cube, not the TCP, at the spot (the grasp is off by mm)
            self._place_xy = self.outside_xy + (tcp[:2] - cube[:2])
        lost = self._lost(state)
        if lost is not None:
            return lost
        if self.phase == "retreat" and (tcp[2] >= self._grasp_z + 0.11 or self._phase_steps > 15):
            self.done = True
        action = self._relocate(state)  # pick, carry, lower, release, retreat: the expert's, to another spot
        if self.phase in ("lift", "carry", "lower"):
            # turn the fingers parallel to the edge: near a tray wall, fingers across it would hit it (they reach
            # 3.2 cm from the cube's centre closed, 5.2 cm open); the fingers open across hand yaw + pi/2
            yaw = hand_yaw(state.quat_base_ee)
            along = 0.0 if self.edge.startswith("x") else math.pi / 2
            target = yaw + wrap(along - yaw, math.pi) - self._yaw0  # the nearest such yaw, from the reset yaw
            lim = self.task.rot_max_rad[2] - 0.02  # inside the safety box's yaw bound (+-pi/2 from the reset)
            action[3:6] = self._move(state, tcp, down_at_yaw(self._yaw0 + float(np.clip(target, -lim, lim))),
                                     1.0)[3:6]
        return action

    def _hold_over(self, state: RobotState) -> np.ndarray:
        lost = self._lost(state)
        if lost is not None:
            return lost
        if self.phase != "hold":
            action = self._relocate(state)
            if self.phase != "lower":  # the expert's pick and carry, up to above its release spot
                return action
            self._set_phase("hold")
        self._phase_steps += 1
        target = np.array([self._place_xy[0], self._place_xy[1], self._grasp_z + 0.004 + self.hold_above_m])
        if abs(state.pos_base_ee[2] - target[2]) < 0.004 or self._phase_steps > 15:
            self._hold += 1
            if self._hold >= self.hold_steps:
                self.done = True
        return self._move(state, target, None, 1.0)

    def _empty_visit(self, state: RobotState) -> np.ndarray:
        self._phase_steps += 1
        tcp = state.pos_base_ee
        if self._yaw0 is None:
            self._yaw0 = hand_yaw(state.quat_base_ee)
        quat = down_at_yaw(self._yaw0 + self.visit_yaw)
        # the expert's TCP height at a release: grasped 5 mm below the cube's centre, put down 4 mm above that
        spot = np.array([self._place_xy[0], self._place_xy[1], CUBE_HALF_SIZE_M - 0.005 + 0.004])
        gripper = 1.0 if self.closed_visit else -1.0
        if self.phase == "approach":
            above = spot + np.array([0.0, 0.0, 0.08])
            if float(np.hypot(*(above[:2] - tcp[:2]))) < 0.006 and abs(tcp[2] - above[2]) < 0.02:
                self._set_phase("lower")
            else:
                return self._move(state, above, quat, gripper)
        if self.phase == "lower":
            if tcp[2] - spot[2] < 0.004 or self._phase_steps > 20:
                self._set_phase("release")
            else:
                return self._move(state, spot, quat, gripper)
        if self.phase == "release":
            if float(state.gripper_width_m) >= 0.07 and self._phase_steps >= 3:
                self._set_phase("rise")
            else:
                return self._move(state, spot, quat, -1.0)
        top = spot + np.array([0.0, 0.0, 0.12])
        if abs(tcp[2] - top[2]) < 0.01 or self._phase_steps > 15:
            self.done = True
        return self._move(state, top, quat, -1.0)


class NearMissOperator:
    """A near-miss routine as a device: always active, no events; `done` when the routine has finished.
    Arguments as `NearMissExpert`.

    Usage::

        op = NearMissOperator("push", seed=3); op.reset(); cmd = op.poll(state); cmd.action(); op.done
        op = NearMissOperator("empty-visit", seed=3, task="cube_relocate_back")
    """

    def __init__(self, kind: str, seed: int | None = None, max_steps: int | None = None,
                 task: str | Task = "pick_cube") -> None:
        self.expert = NearMissExpert(kind, seed=seed, max_steps=max_steps, task=task)
        self.kind = kind
        self.name = f"near-miss:{kind}"

    @property
    def done(self) -> bool:
        return self.expert.done

    def reset(self) -> None:
        self.expert.reset()

    def poll(self, state: RobotState) -> HumanCommand:
        a = self.expert.act(state)
        return HumanCommand(delta_ee=a[:6].astype(np.float64), gripper=float(a[6]), active=True)

    def close(self) -> None:
        pass
