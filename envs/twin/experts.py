"""Scripted experts for the twin tasks: small state machines over privileged state (`RobotState.objects`).

They produce `RobotEnv` actions (7,) in [-1, 1]: a proportional step toward a sub-goal, saturated at one
action unit (= `action_scale_m` per step), plus a rotation toward "gripper pointing down" at a chosen yaw
and a binary gripper command. Used for demos, the `robot-rl demo` command and as a sanity check of the twin.

- reach: move the TCP to the goal (gripper open).
- pick_cube: hover above the cube while turning the hand to the cube's yaw (mod 90 degrees), descend until
  the fingertips straddle the cube's middle, close, wait for the fingers to stop, lift 12 cm. If the cube
  slips out, open and start again.
- cube_relocate / cube_relocate_back: pick the cube as in pick_cube (lifting 8 cm), carry it above a spot of the
  target zone (the zone's centre +- 3 / 2.5 cm, drawn per episode), lower it until it nearly touches, open, and
  back off upwards. If the cube slips out on the way, open and start again.
- peg_insert: keep the peg upright, move its bottom above the hole, then descend compliantly (a constant
  downward push the impedance controller turns into a bounded force) while correcting the lateral error; the
  gripper command is 0 ("keep": the peg is held from the reset on and the task locks the gripper).

Usage::

    expert = ScriptedExpert("pick_cube", noise_std=0.1, seed=0)
    obs, info = env.reset(seed=0); expert.reset()
    while True:
        action = expert.act(env.unwrapped.last_state)
        obs, r, terminated, truncated, info = env.step(action)
        if terminated or truncated: break
    # or, the same loop: run_episode(env, expert, seed=0) -> {"seed", "steps", "success", "return"}
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from controllers.transforms import (
    euler_xyz_to_quat,
    orientation_error,
    quat_conj,
    quat_mul,
    quat_to_euler_xyz,
)
from envs.robot import RobotState
from envs.tasks import (
    CUBE_HALF_SIZE_M,
    HOLE_DEPTH_M,
    CubeRelocateTask,
    Task,
    get_task,
    relocate_zone_m,
)

Q_DOWN = np.array([0.0, 1.0, 0.0, 0.0])
"""Gripper pointing down (rotation pi about x): the reference the experts' yaw is measured from."""


def hand_yaw(quat_wxyz: np.ndarray) -> float:
    """Yaw of the hand about the base z axis relative to `Q_DOWN` (exact when the gripper points down)."""
    return float(quat_to_euler_xyz(quat_mul(quat_wxyz, quat_conj(Q_DOWN)))[2])


def down_at_yaw(yaw: float) -> np.ndarray:
    """The gripper-down orientation turned by `yaw` about the base z axis."""
    return quat_mul(euler_xyz_to_quat(np.array([0.0, 0.0, yaw])), Q_DOWN)


def wrap(angle: float, period: float = 2 * math.pi) -> float:
    """`angle` wrapped into [-period/2, period/2)."""
    return (angle + period / 2) % period - period / 2


class ScriptedExpert:
    """A scripted policy for one of the twin tasks (see the module docstring).

    task: a task name ("reach", "pick_cube", "peg_insert", "cube_relocate", "cube_relocate_back", or a preset name
    such as "twin-pick-cube") or a
    `Task`. noise_std: Gaussian noise added to the arm part of every action (then clipped to [-1, 1]), for
    diverse demos. seed: seeds that noise. action_scale_m / action_scale_rad must match the env's config.
    lift_m: how far pick_cube lifts the cube above its grasp (m; 0.12), or a range (lo, hi) drawn per episode from
    the seeded rng (record-labels --lift-cm: labels at the heights a learning policy lifts to).
    """

    def __init__(
        self,
        task: str | Task,
        noise_std: float = 0.0,
        seed: int | None = None,
        action_scale_m: float = 0.02,
        action_scale_rad: float = 0.1,
        gain: float = 0.6,
        lift_m: float | tuple[float, float] = 0.12,
    ) -> None:
        if isinstance(task, str) and task.startswith("twin-"):
            from envs.presets import twin_task

            task = twin_task(task)
        elif isinstance(task, str):  # a twin task's name, or a lab's task file: the twin task it extends
            from envs.task_file import resolve_task

            task = resolve_task(task)
        self.task = get_task(task)
        if self.task.name not in ("reach", "pick_cube", "peg_insert") and not isinstance(self.task, CubeRelocateTask):
            raise ValueError(f"no scripted expert for task '{self.task.name}'")
        self.noise_std = float(noise_std)
        self.rng = np.random.default_rng(seed)
        self.action_scale_m = float(action_scale_m)
        self.action_scale_rad = float(action_scale_rad)
        self.gain = float(gain)
        lo, hi = (lift_m, lift_m) if isinstance(lift_m, (int, float)) else lift_m
        if not 0.0 < lo <= hi:
            raise ValueError(f"lift_m={lift_m!r}: a height above the grasp (m) or a range (lo, hi) with 0 < lo <= hi")
        self.lift_range_m = (float(lo), float(hi))
        self.phase = ""
        self.reset()

    def reset(self) -> None:
        """Start a new episode (back to the first phase)."""
        self.phase = {"reach": "reach", "peg_insert": "align"}.get(self.task.name, "approach")
        self._phase_steps = 0
        self._grasp_z = 0.0
        self._last_width = math.inf
        lo, hi = self.lift_range_m  # pick_cube's lift above the grasp this episode (a range draws from the rng)
        self._lift_m = lo if lo == hi else float(self.rng.uniform(lo, hi))
        if isinstance(self.task, CubeRelocateTask):  # where in the target zone this episode puts the cube
            (x0, y0), (x1, y1) = relocate_zone_m(self.task.target_zone)
            centre = np.array([(x0 + x1) / 2, (y0 + y1) / 2])
            self._place_xy = centre + self.rng.uniform(-1.0, 1.0, 2) * np.array([0.03, 0.025])

    def act(self, state: RobotState) -> np.ndarray:
        """The action (7,) float32 in [-1, 1] for `state` (needs the twin's privileged `objects`)."""
        if self.task.name == "reach":
            action = self._reach(state)
        elif self.task.name == "pick_cube":
            action = self._pick(state)
        elif isinstance(self.task, CubeRelocateTask):
            action = self._relocate(state)
        else:
            action = self._peg(state)
        if self.noise_std > 0:
            action[:6] += self.rng.normal(0.0, self.noise_std, 6)
        return np.clip(action, -1.0, 1.0).astype(np.float32)

    # ------------------------------------------------------------------------------------------------------

    def _set_phase(self, phase: str) -> None:
        if phase != self.phase:
            self.phase = phase
            self._phase_steps = 0

    def _move(self, state: RobotState, target_pos: np.ndarray, target_quat: np.ndarray | None,
              gripper: float, max_speed: float = 1.0) -> np.ndarray:
        """A proportional step toward (target_pos, target_quat), saturated at `max_speed` action units."""
        action = np.zeros(7)
        delta = (np.asarray(target_pos) - state.pos_base_ee) * self.gain / self.action_scale_m
        n = float(np.max(np.abs(delta)))
        action[:3] = delta * (max_speed / n) if n > max_speed else delta
        if target_quat is not None:
            # env applies q_new = exp(a * scale) q (base frame); orientation_error = log(R R_t^T), so turn by -e
            rot = -orientation_error(state.quat_base_ee, target_quat) * self.gain / self.action_scale_rad
            action[3:6] = np.clip(rot, -1.0, 1.0)
        action[6] = gripper
        return action

    def _reach(self, state: RobotState) -> np.ndarray:
        self._phase_steps += 1
        return self._move(state, state.objects["goal_pos"], None, -1.0)

    def _pick(self, state: RobotState) -> np.ndarray:
        self._phase_steps += 1
        cube = np.asarray(state.objects["cube_pos"])
        cube_yaw = float(quat_to_euler_xyz(np.asarray(state.objects["cube_quat"]))[2])
        yaw = hand_yaw(state.quat_base_ee)
        target_quat = down_at_yaw(yaw + wrap(cube_yaw - yaw, math.pi / 2))
        tcp = state.pos_base_ee
        xy_err = float(np.hypot(*(cube[:2] - tcp[:2])))
        width = float(state.gripper_width_m)
        hover = cube + np.array([0.0, 0.0, 0.08])
        grasp = np.array([cube[0], cube[1], max(cube[2] - 0.005, CUBE_HALF_SIZE_M - 0.008)])

        if self.phase == "approach":
            yaw_err = abs(wrap(cube_yaw - yaw, math.pi / 2))
            if xy_err < 0.01 and abs(tcp[2] - hover[2]) < 0.03 and yaw_err < 0.08:
                self._set_phase("descend")
            else:
                return self._move(state, hover, target_quat, -1.0)
        if self.phase == "descend":
            if xy_err > 0.025:
                self._set_phase("approach")
                return self._move(state, hover, target_quat, -1.0)
            if tcp[2] - grasp[2] < 0.006 or self._phase_steps > 25:
                self._set_phase("grasp")
                self._last_width = math.inf
            else:
                return self._move(state, grasp, target_quat, -1.0)
        if self.phase == "grasp":
            settled = self._last_width - width < 0.0005 and width < 0.06
            self._last_width = width
            if settled and self._phase_steps >= 3:
                self._set_phase("lift")
                self._grasp_z = float(tcp[2])
            else:
                return self._move(state, grasp, target_quat, 1.0)
        # lift
        held = float(np.linalg.norm(cube - tcp)) < 0.04 and width > 0.01
        if not held and self._phase_steps > 2:
            self._set_phase("approach")
            return self._move(state, tcp + np.array([0.0, 0.0, 0.03]), target_quat, -1.0)
        lift_to = np.array([tcp[0], tcp[1], self._grasp_z + self._lift_m])
        return self._move(state, lift_to, target_quat, 1.0)

    def _relocate(self, state: RobotState) -> np.ndarray:
        """Pick (the pick_cube phases, lifting to 8 cm), carry, put down in the target zone, open, back off."""
        if self.phase in ("approach", "descend", "grasp"):
            return self._pick(state)
        self._phase_steps += 1
        cube = np.asarray(state.objects["cube_pos"])
        tcp = state.pos_base_ee
        width = float(state.gripper_width_m)
        held = float(np.linalg.norm(cube - tcp)) < 0.04 and width > 0.01
        if self.phase in ("lift", "carry", "lower") and not held and self._phase_steps > 2:
            self._set_phase("approach")
            return self._move(state, tcp + np.array([0.0, 0.0, 0.03]), None, -1.0)
        if self.phase == "lift":
            if tcp[2] >= self._grasp_z + 0.07:
                self._set_phase("carry")
            else:
                return self._move(state, np.array([tcp[0], tcp[1], self._grasp_z + 0.08]), None, 1.0)
        if self.phase == "carry":
            above = np.array([self._place_xy[0], self._place_xy[1], self._grasp_z + 0.08])
            if float(np.hypot(*(above[:2] - tcp[:2]))) < 0.006:
                self._set_phase("lower")
            else:
                return self._move(state, above, None, 1.0)
        if self.phase == "lower":
            place = np.array([self._place_xy[0], self._place_xy[1], self._grasp_z + 0.004])
            if tcp[2] - place[2] < 0.004 or self._phase_steps > 20:
                self._set_phase("release")
            else:
                return self._move(state, place, None, 1.0)
        if self.phase == "release":
            if width >= 0.07 and self._phase_steps >= 3:
                self._set_phase("retreat")
            else:
                return self._move(state, tcp, None, -1.0)
        return self._move(state, np.array([tcp[0], tcp[1], self._grasp_z + 0.12]), None, -1.0)

    def _peg(self, state: RobotState) -> np.ndarray:
        self._phase_steps += 1
        peg = np.asarray(state.objects["peg_pos"])
        hole = np.asarray(state.objects["hole_pos"])
        peg_quat = np.asarray(state.objects["peg_quat"])
        # the peg upright (its z axis up) and square to the hole (yaw a multiple of 90 degrees; the fixture is
        # axis-aligned): turn the hand by the base-frame rotation that takes the peg there (rigid grasp)
        peg_yaw = float(quat_to_euler_xyz(peg_quat)[2])
        peg_target = euler_xyz_to_quat(np.array([0.0, 0.0, peg_yaw - wrap(peg_yaw, math.pi / 2)]))
        turn = -orientation_error(peg_quat, peg_target) * self.gain / self.action_scale_rad
        tcp = state.pos_base_ee
        offset = tcp - peg  # TCP relative to the peg bottom
        lateral = float(np.hypot(*(hole[:2] - peg[:2])))
        opening_z = hole[2] + HOLE_DEPTH_M
        above = np.array([hole[0], hole[1], opening_z + 0.012])

        if self.phase == "align" and lateral < 0.0015 and peg[2] - above[2] < 0.006:
            self._set_phase("insert")
        elif self.phase == "insert" and lateral > 0.004 and peg[2] > opening_z - 0.002:
            self._set_phase("align")  # off the hole and not in it: back up and realign
        # gripper 0 = "keep": the hand holds the peg from the reset on (the task locks the gripper closed), and a
        # demo of +1 would teach a policy to saturate a dim that does nothing (tanh(mean) -> 1 drives the mean to
        # infinity and the entropy of that dim to -infinity, which the temperature makes up with noise elsewhere)
        if self.phase == "align":
            action = self._move(state, above + offset, None, 0.0)
        else:
            # lateral correction + a constant downward push (the impedance clip bounds the force)
            action = self._move(state, np.array([hole[0], hole[1], peg[2]]) + offset, None, 0.0)
            action[2] = -0.5
        action[3:6] = np.clip(turn, -1.0, 1.0)
        return action


def run_episode(
    env: Any, expert: ScriptedExpert, seed: int | None = None,
    on_obs: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Run one episode of `expert` on `env` (a RobotEnv, possibly wrapped by gymnasium.make).

    `on_obs` sees every observation (the reset one included). Returns {"seed", "steps", "success", "return"}.
    """
    robot_env = env.unwrapped
    obs, _ = env.reset(seed=seed)
    expert.reset()
    if on_obs is not None:
        on_obs(obs)
    steps, ret, success = 0, 0.0, False
    while True:
        obs, reward, terminated, truncated, info = env.step(expert.act(robot_env.last_state))
        if on_obs is not None:
            on_obs(obs)
        steps += 1
        ret += float(reward)
        success = success or bool(info["success"])
        if terminated or truncated:
            return {"seed": seed, "steps": steps, "success": success, "return": ret}
