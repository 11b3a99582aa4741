"""How `envs.env.RobotEnv` moves the arm: the per-step impedance target for a policy action (a pure function of
the config, the commanded pose, the measured state and the safety box), and the reset moves through the Robot seam
(a reference walked at the reset speeds until the TCP settles, retried, with error recovery).

Per-step target (`step_target`): the action's delta goes onto the current *commanded* pose, is limited per step
(controllers.safety.limit_step), kept within a bounded lead of the *measured* pose, and clipped to the task's
safety box (controllers.safety.clip_pose).

Bounded lead (the choice between SERL's delta-on-measured and delta-on-commanded): the policy cannot see the
commanded target, so with plain delta-on-commanded a policy pushing into the table winds the target up toward
the box edge (the arm stays pressed for several steps after the policy says 'up'), and with delta-on-measured
(SERL) a zero action re-targets the measured pose every step, so any steady tracking error (gravity,
friction: ~1-2 mm on franky-sim) accumulates into drift. Here the delta goes onto the commanded pose (no drift),
and on every axis where the arm is not following its target (the previous target already led it by half the
bound or more and it moves slower than `lead_stall_m_per_s` along the axis: in contact) the target may lead the
measured pose by at most `max_lead_m` (default: the compliance profile's error clip, the controller's
reference-limiting distance; `max_lead_rad` / `lead_stall_rad_per_s` for the orientation). In contact the target
therefore stays within the reference-limiting distance (tested: pressing on the twin's table for 20 steps) and the
arm lifts off as soon as the policy says so. In free motion the bound does not act: the arm moving at full speed
lags its target by ~5 cm (the target's 0.2 s low-pass filter plus v D / K), and a fixed 1 cm bound would cap its
speed at ~4 cm/s (measured).

Reset moves (`ResetMover`): `move_to` walks the reference to a pose at the reset speeds and waits until the TCP
settles (or `reset_timeout_s` passes); `settled_move` tries that 1 + `reset_retries` times (clearing a robot error
and, with `joint_reset_before_retry`, resetting the joints in between), then raises `ResetError`; `retries` counts
the extra tries.

Usage::

    pos, quat, clipped = step_target(cfg, action, cmd_pos, cmd_quat, env.last_state, env.safety_box)
    mover = ResetMover(robot, cfg)
    state, settled = mover.settled_move(pos, quat, gripper=0.0, what="the reset pose")
"""

from __future__ import annotations

import numpy as np

from controllers.safety import SafetyBox, clip_pose, limit_step
from controllers.transforms import (
    axis_angle_to_quat,
    orientation_error,
    quat_angle,
    quat_conj,
    quat_mul,
    quat_normalize,
    quat_to_mat,
)
from envs.env_config import RobotEnvConfig
from envs.robot import Robot, RobotState
from robot_rl.errors import ResetError, RobotError


def step_target(cfg: RobotEnvConfig, action: np.ndarray, cmd_pos: np.ndarray, cmd_quat: np.ndarray,
                measured: RobotState | None, box: SafetyBox) -> tuple[np.ndarray, np.ndarray, bool]:
    """The next impedance target (pos (3,) m, quat (4,) wxyz, base frame) for a clipped action (7,) in [-1, 1]
    (its first 6 values: delta xyz * `action_scale_m`, rotation vector * `action_scale_rad`, applied on the left of
    the commanded orientation), and whether the step limit, the bounded lead or the box changed it (`clipped`).
    See the module docstring for the order of the limits."""
    delta_pos = action[:3] * cfg.action_scale_m
    rotvec = action[3:6] * cfg.action_scale_rad
    want_pos = cmd_pos + delta_pos
    want_quat = quat_mul(axis_angle_to_quat(rotvec), cmd_quat)
    pos, quat = want_pos, want_quat
    # the per-step limit binds only if the config makes it tighter than the action range (by default
    # sqrt(3) * scale < limit, so a clipped action never exceeds it); skip the call when it cannot bind
    if (float(np.linalg.norm(delta_pos)) > cfg.max_step_translation_m
            or float(np.linalg.norm(rotvec)) > cfg.max_step_rotation_rad):
        pos, quat = limit_step(cmd_pos, cmd_quat, want_pos, want_quat, cfg.max_step_translation_m,
                               cfg.max_step_rotation_rad)
    if measured is not None and (cfg.max_lead_m > 0 or cfg.max_lead_rad > 0):
        # an axis is "not following" when the previous target already led the arm by half the bound or more
        # along it and the arm moves slower than the stall speed (a start from rest is never held back)
        R = quat_to_mat(measured.quat_base_ee)
        twist = np.asarray(measured.twist_ee_body, np.float64)
        led = np.abs(cmd_pos - measured.pos_base_ee) >= 0.5 * cfg.max_lead_m
        stalled = led & (np.abs(R @ twist[:3]) < cfg.lead_stall_m_per_s)
        prev_angle = quat_angle(quat_mul(cmd_quat, quat_conj(measured.quat_base_ee)))
        held = prev_angle >= 0.5 * cfg.max_lead_rad and float(np.linalg.norm(twist[3:])) < cfg.lead_stall_rad_per_s
        pos, quat = bound_lead(pos, quat, measured.pos_base_ee, measured.quat_base_ee,
                               np.where(stalled, cfg.max_lead_m, 0.0), cfg.max_lead_rad if held else 0.0)
    pos, quat = clip_pose(box, pos, quat)
    # limit_step and clip_pose keep the quaternion's sign, so a plain comparison detects a change
    clipped = bool(np.max(np.abs(pos - want_pos)) > 1e-9 or np.max(np.abs(quat - want_quat)) > 1e-9)
    return pos, quat, clipped


def bound_lead(pos: np.ndarray, quat: np.ndarray, measured_pos: np.ndarray, measured_quat: np.ndarray,
               max_lead_m: float | np.ndarray, max_lead_rad: float) -> tuple[np.ndarray, np.ndarray]:
    """The target (pos, quat) pulled back to within `max_lead_m` (per base axis; a scalar or (3,)) of the measured
    position and `max_lead_rad` (geodesic angle) of the measured orientation; a bound of 0 leaves that axis / the
    orientation unbounded. The quaternion keeps the target's sign."""
    m = np.asarray(measured_pos, np.float64)
    lead = np.asarray(pos, np.float64) - m
    bound = np.broadcast_to(np.asarray(max_lead_m, np.float64), (3,))
    pos = m + np.where(bound > 0, np.clip(lead, -bound, bound), lead)
    if max_lead_rad > 0:
        mq = np.asarray(measured_quat, np.float64)
        mq = -mq if float(np.dot(mq, quat)) < 0 else mq  # the measured orientation on the target's hemisphere
        _, quat = limit_step(pos, mq, pos, quat, 0.0, max_lead_rad)
    return pos, quat


class ResetMover:
    """The env's moves outside the policy's steps, through the Robot seam (see the module docstring).

    Usage::

        mover = ResetMover(robot, cfg)
        state, settled = mover.settled_move(pos, quat, 0.0, "the reset pose")   # ResetError if it never settles
        mover.retries                                                         # extra tries so far
    """

    def __init__(self, robot: Robot, config: RobotEnvConfig) -> None:
        self.robot, self.config = robot, config
        self.retries = 0
        """How many moves had to be tried again (see `RobotEnvConfig.reset_retries`)."""

    def move_to(self, pos: np.ndarray, quat: np.ndarray, gripper: float) -> tuple[RobotState, bool]:
        """Walk the reference to (pos, quat) at the reset speeds and wait until the TCP settles there; (the last
        state, whether it settled within `reset_timeout_s`)."""
        cfg = self.config
        dt = cfg.period_s
        state = self.robot.state()
        ref_pos, ref_quat = np.array(state.pos_base_ee, float), quat_normalize(state.quat_base_ee)
        t = 0.0
        while True:
            ref_pos, ref_quat = limit_step(ref_pos, ref_quat, pos, quat, cfg.reset_speed_m_per_s * dt,
                                           cfg.reset_speed_rad_per_s * dt)
            try:
                self.robot.command(ref_pos, ref_quat, gripper)
            except RobotError:  # a trip during the move (e.g. a joint at its margin): the caller retries
                return self.robot.state(), False
            self.robot.wait(dt)
            t += dt
            state = self.robot.state()
            arrived = (
                np.linalg.norm(ref_pos - pos) < 1e-9
                and np.linalg.norm(state.pos_base_ee - pos) < cfg.reset_tolerance_m
                and np.linalg.norm(orientation_error(state.quat_base_ee, quat)) < cfg.reset_tolerance_rad
                and np.linalg.norm(state.twist_ee_body[:3]) < cfg.reset_settle_speed_m_per_s
            )
            if arrived:
                return state, True
            if t >= cfg.reset_timeout_s:
                return state, False

    def clear_or_recover(self) -> bool:
        """clear_errors(); when the robot refuses (the condition persists, e.g. a joint still inside its safety
        margin: holding the pose cannot fix that) a joint reset home, the one motion a tripped robot server
        allows, then clear_errors() again. True when the joint reset ran."""
        try:
            self.robot.clear_errors()
            return False
        except RobotError as refused:
            try:
                self.robot.reset_joints(np.asarray(self.config.home_q_rad, np.float64))
                self.robot.clear_errors()
            except RobotError as err:  # the robot cannot recover: its first answer says why
                raise refused from err
            return True

    def settled_move(self, pos: np.ndarray, quat: np.ndarray, gripper: float, what: str,
                     must_settle: bool = True) -> tuple[RobotState, bool]:
        """`move_to`, tried 1 + `reset_retries` times (clearing a robot error in between) until it settles; then
        ResetError naming the target, how far off the TCP is and any robot error. `must_settle=False`: one try,
        its outcome returned."""
        cfg = self.config
        tries = 1 + cfg.reset_retries if must_settle else 1
        state, settled = self.robot.state(), False
        for i in range(tries):
            joint_reset = False
            if state.error:
                joint_reset = self.clear_or_recover()
            if i > 0:
                self.retries += 1
                if cfg.joint_reset_before_retry and not joint_reset:
                    self.robot.reset_joints(np.asarray(cfg.home_q_rad, np.float64))
            state, settled = self.move_to(pos, quat, gripper)
            if settled or not must_settle:
                return state, settled
        off_m = float(np.linalg.norm(state.pos_base_ee - pos))
        off_rad = float(np.linalg.norm(orientation_error(state.quat_base_ee, quat)))
        speed = float(np.linalg.norm(state.twist_ee_body[:3]))
        raise ResetError(
            f"reset: the move to {what} did not settle after {tries} tries of {cfg.reset_timeout_s:g} s (TCP "
            f"{100 * off_m:.1f} cm / {off_rad:.2f} rad from the target, moving {100 * speed:.1f} cm/s"
            f"{', robot error: ' + state.error if state.error else ''}); the run stops: check the workspace for an "
            f"obstacle or a trapped object, then restart")
