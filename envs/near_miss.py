"""Scripted near misses for pick-cube: episodes that look almost like success and are not, for reward-classifier
labels (HIL-SERL: negatives near success are the most useful ones).

Kinds (`NEAR_MISS_KINDS`), each a short state machine over the twin's privileged state that ends by itself:

- "lift-drop": grasp the cube like the expert, lift it only `small_lift_m` (0.5-1.5 cm commanded; the cube
  ends up 1.5-2 cm up, a third of the task's 5 cm), hold it there, open the gripper (the cube drops), then rise
  to the hover height.
- "grip-beside": descend with the fingers closed next to the cube (5-7 cm from its centre, in a random
  direction), then lift the closed gripper 12 cm as a success would, with nothing in it, and hold.
- "push": lower the closed gripper to the table 6 cm from the cube and sweep through the cube's position,
  pushing it 4-6 cm along the table, then rise.

None of them can meet the task's success condition (the cube never goes 5 cm up, or is never held), so labels
from `info["success"]` mark every frame negative. `NearMissOperator` wraps a routine as a teleop-like device
(the `demos.labels_cli` recorder and `envs.wrappers.InterventionDevice` interface: `reset()`, `poll(state)`
-> `HumanCommand`, `close()`) with a `done` flag the recorder ends the segment on.

Usage::

    op = NearMissOperator("lift-drop", seed=0)
    obs, _ = env.reset(seed=0); op.reset()
    while not op.done:
        obs, r, term, trunc, info = env.step(op.poll(env.unwrapped.last_state).action())
"""

from __future__ import annotations

import math

import numpy as np

from controllers.transforms import quat_to_euler_xyz
from envs.experts import ScriptedExpert, down_at_yaw, hand_yaw, wrap
from envs.robot import RobotState
from envs.tasks import CUBE_HALF_SIZE_M
from envs.wrappers import HumanCommand
from robot_rl.errors import ConfigError

NEAR_MISS_KINDS = ("lift-drop", "grip-beside", "push")
"""The pick-cube near-miss routines, in the order a recorder cycles through them."""


class NearMissExpert(ScriptedExpert):
    """One pick-cube near-miss routine (see the module docstring); `done` once it has finished.

    kind: one of NEAR_MISS_KINDS. seed: draws the routine's free parameters (lift height, offset direction,
    push length) per episode. max_steps: the routine gives up (done) after this many steps.
    """

    def __init__(self, kind: str, seed: int | None = None, max_steps: int = 90, action_scale_m: float = 0.02,
                 action_scale_rad: float = 0.1) -> None:
        if kind not in NEAR_MISS_KINDS:
            raise ConfigError(f"near-miss kind {kind!r}: must be one of {NEAR_MISS_KINDS}")
        self.kind = kind
        self.max_steps = int(max_steps)
        super().__init__("pick_cube", noise_std=0.0, seed=seed, action_scale_m=action_scale_m,
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
        if self.kind != "lift-drop":
            self.phase = "hover"

    def act(self, state: RobotState) -> np.ndarray:
        self.steps += 1
        if self.steps >= self.max_steps:
            self.done = True
        action = {"lift-drop": self._lift_drop, "grip-beside": self._grip_beside, "push": self._push}[self.kind](
            state)
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


class NearMissOperator:
    """A near-miss routine as a device: always active, no events; `done` when the routine has finished.

    Usage::

        op = NearMissOperator("push", seed=3); op.reset(); cmd = op.poll(state); cmd.action(); op.done
    """

    def __init__(self, kind: str, seed: int | None = None, max_steps: int = 90) -> None:
        self.expert = NearMissExpert(kind, seed=seed, max_steps=max_steps)
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
