"""Robot server, the safety guard: `SafetyGuard` wraps any backend the server serves (twin, franky) and enforces,
server-side and whatever the client does:

- the workspace box: every commanded target is clipped into the task's safety box grown by a margin and
  stretched to contain the home pose (the env clips to the task's box itself and walks its resets from the home
  pose; inside the box a target passes bit-identical), counted in `clips`;
- an external wrench limit: |force| > `max_force_n` or |torque| > `max_torque_nm` (RobotState.force_ee_n /
  torque_ee_nm: the twin's wrist sensor, franky's O_F_ext_hat_K) trips the guard;
- joint position and velocity margins: a joint closer than `joint_margin_rad` to its limit, or faster than
  `max_joint_speed_fraction` of its velocity limit, trips the guard; the limits are the arm's (controllers.arms:
  `arm`, or with 'auto' the backend's `arm` attribute: the twin is a Panda, franky's arm follows its libfranka,
  ROS 2's its joint names; a backend that cannot tell gets 'any', the tighter limits of Panda and FR3);
- the e-stop: `estop()` (thread-safe: the server's I/O thread calls it while a long call may be running) latches;
  the backend's own `estop()` runs at once when it has one (franky: robot.stop() preempts the motion), and the
  control thread holds the current pose at its next call or tick (the twin moves only inside wait()).

A trip stops and holds: the guard re-targets the measured pose, reports the reason in `RobotState.error` (the env
ends the episode) and refuses commands with RobotError (except a recovery `reset_joints` to a configuration inside
the joint margins: the way out of a joint-limit trip) until `clear_errors()`, which clears only when the
condition is gone (it waits up to `clear_settle_s` holding the measured pose; a wrench still above the limit, a
joint still in its margin: it raises). The e-stop latches
until the server restarts. Checks run on every state(), every `check_period_s` during a wait() (the wait is served
in slices of that length, a check after each: on the twin sim time, on hardware real time), on `tick()` (the
server's idle loop, every `check_period_s`), and, for a backend that receives its states in a thread of its own and
offers `add_state_listener` (ROS 2: every joint-state and wrench message; franky: every state of the tracker's 1 kHz
loop, on franky's callback thread), on every state it receives, in that thread, the hold commanded from there. A
backend that offers `set_force_limit` (franky) gets the force limit to enforce inside its own control loop: franky
holds the pose in the control step whose force exceeds it (a franky reaction) and reports that state to the
listeners, which trip the guard (the hold command from there is refused by the backend, which already holds). The
robot's own reflexes (libfranka's collision thresholds, checked at 1 kHz in the controller) stay the fastest
layer.

Usage::

    guard = SafetyGuard(robot, ServerSafetyConfig(max_force_n=40.0), box=task_safety_box(get_task("pick_cube")))
    guard.command(pos, quat, 0.0)          # clipped into the box
    guard.estop()                          # from any thread
"""

from __future__ import annotations

import dataclasses
import logging
import math
import threading
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from controllers.arms import ARMS, arm_limits
from controllers.safety import SafetyBox, clip_pose
from envs.robot import Robot, RobotState, StateSample
from robot_rl.config import Config, require
from robot_rl.errors import RobotError, RobotRLError

log = logging.getLogger("robot_rl.robot_server.safety")

@dataclasses.dataclass(frozen=True)
class ServerSafetyConfig(Config):
    """Limits the robot server enforces for every backend."""

    enabled: bool = True
    """False serves the backend unguarded (tests of the raw backends only)."""
    max_force_n: float = 60.0
    """Trip when the external force at the TCP exceeds this (N). The compliance profile pushes with at most
    K * clip = 20 N per axis (35 N on all three)."""
    max_torque_nm: float = 20.0
    """Trip when the external torque exceeds this (Nm); the compliance profile's clip allows 7.5 Nm per axis."""
    joint_margin_rad: float = 0.05
    """Trip when a joint comes closer than this to its position limit."""
    max_joint_speed_fraction: float = 0.9
    """Trip when a joint moves faster than this fraction of its velocity limit."""
    arm: str = "auto"
    """Whose joint limits: 'panda', 'fr3', 'any' (the tighter of both) or 'auto' (the backend's `arm` attribute,
    'any' when it has none)."""
    box_margin_m: float = 0.02
    """The server's box is the task's box grown by this much (m) ..."""
    box_margin_rad: float = 0.1
    """... and this much in each euler angle (rad)."""
    check_period_s: float = 0.01
    """The guard reads the state and checks it at least this often: wait() runs in slices of this length with a
    check after each, and tick() (the server's idle loop) checks this often while no call comes in."""
    clear_settle_s: float = 1.0
    """clear_errors() after a trip waits up to this long (s), holding the measured pose, for the condition to go
    before it refuses (a peg pressed into its fixture relaxes within ~0.1-0.3 s once the target is the measured
    pose; without the wait a twin, whose time passes only in wait(), would never relax)."""

    def validate(self) -> None:
        require(self.arm == "auto" or self.arm in ARMS, "arm", self.arm, f"must be 'auto' or one of {sorted(ARMS)}")
        for f in ("max_force_n", "max_torque_nm", "max_joint_speed_fraction", "check_period_s"):
            v = getattr(self, f)
            require(isinstance(v, int | float) and math.isfinite(v) and v > 0, f, v, "must be finite and > 0")
        for f in ("joint_margin_rad", "box_margin_m", "box_margin_rad", "clear_settle_s"):
            v = getattr(self, f)
            require(isinstance(v, int | float) and math.isfinite(v) and v >= 0, f, v, "must be finite and >= 0")


def task_safety_box(task: Any, margin_m: float = 0.0, margin_rad: float = 0.0,
                    include_pos_m: Sequence[Sequence[float]] = ()) -> SafetyBox:
    """The task's safety box (envs.tasks.Task) grown by the margins and stretched to contain `include_pos_m` (e.g.
    the TCP at the home joint configuration: the env's reset move starts there, outside most task boxes);
    nominal orientation = the task's reset orientation, or gripper-down (the Panda's home orientation) when the
    task leaves it to the home pose."""
    quat = task.reset_quat_wxyz if task.reset_quat_wxyz is not None else (0.0, 1.0, 0.0, 0.0)
    lo = np.asarray(task.pos_min_m, np.float64) - margin_m
    hi = np.asarray(task.pos_max_m, np.float64) + margin_m
    for p in include_pos_m:
        lo, hi = np.minimum(lo, np.asarray(p) - margin_m), np.maximum(hi, np.asarray(p) + margin_m)
    return SafetyBox(pos_min_m=(float(lo[0]), float(lo[1]), float(lo[2])),
                     pos_max_m=(float(hi[0]), float(hi[1]), float(hi[2])),
                     nominal_quat_wxyz=(float(quat[0]), float(quat[1]), float(quat[2]), float(quat[3])),
                     rot_min_rad=tuple(float(v) - margin_rad for v in task.rot_min_rad),  # type: ignore[arg-type]
                     rot_max_rad=tuple(float(v) + margin_rad for v in task.rot_max_rad))  # type: ignore[arg-type]


class SafetyGuard:
    """A Robot around a Robot with the server-side limits (see the module docstring)."""

    def __init__(self, robot: Robot, config: ServerSafetyConfig | None = None, box: SafetyBox | None = None) -> None:
        self.robot = robot
        self.config = config or ServerSafetyConfig()
        self.box = box
        self._estop = threading.Event()
        self._estop_t = math.nan
        self._held_after_estop = False
        self._trip = ""
        self._trips = 0
        self._clips = 0
        self._last_gripper = 0.0
        self._last_check = -math.inf
        self.trip_time_s: float | None = None
        """The robot clock (RobotState.time_s) of the state that tripped the guard last: the hold's time."""
        arm = self.config.arm if self.config.arm != "auto" else str(getattr(robot, "arm", "any"))
        self.limits = arm_limits(arm)
        """The joint limits the guard enforces (controllers.arms.ArmLimits)."""
        self._q_lo = np.asarray(self.limits.q_min_rad) + self.config.joint_margin_rad
        self._q_hi = np.asarray(self.limits.q_max_rad) - self.config.joint_margin_rad
        self._dq_max = np.asarray(self.limits.dq_max_rad_per_s) * self.config.max_joint_speed_fraction
        self._trip_lock = threading.Lock()  # a backend's listener thread and the control thread may both trip
        self.checked_samples = 0
        """States checked as the backend received them (add_state_listener), beside the polled checks."""
        listen = getattr(robot, "add_state_listener", None)
        if self.config.enabled and callable(listen):
            listen(self._on_sample)
        force_limit = getattr(robot, "set_force_limit", None)
        if self.config.enabled and callable(force_limit):  # franky: held inside libfranka's 1 kHz loop
            force_limit(self.config.max_force_n)

    # ------------------------------------------------------------------------------------------------------
    # Robot protocol

    def state(self) -> RobotState:
        self._hold_if_estopped()
        s = self.robot.state()
        self._check(s)
        return self._with_error(s)

    def command(self, pos_base_target: np.ndarray, quat_base_target: np.ndarray, gripper_closed: float) -> None:
        self._refuse()
        pos, quat = np.asarray(pos_base_target, np.float64), np.asarray(quat_base_target, np.float64)
        if self.box is not None and pos.shape == (3,) and quat.shape == (4,) and np.all(np.isfinite(pos)) \
                and np.all(np.isfinite(quat)) and float(np.linalg.norm(quat)) > 1e-6:
            cpos, cquat = clip_pose(self.box, pos, quat)
            if float(np.max(np.abs(cpos - pos))) > 1e-9 or float(np.max(np.abs(cquat - quat))) > 1e-9:
                self._clips += 1
                log.info("safety: target %s clipped into the server's box to %s", np.round(pos, 4), np.round(cpos, 4))
                pos, quat = cpos, cquat  # (inside the box the target passes bit-identical)
        self.robot.command(pos, quat, gripper_closed)
        try:
            self._last_gripper = float(gripper_closed)
        except (TypeError, ValueError):
            pass

    def wait(self, duration_s: float) -> None:
        """Time passes under the held target after a trip too (the push relaxes); refused after an e-stop."""
        if self._estop.is_set():
            self._refuse()
        period = self.config.check_period_s
        n = int(duration_s / period + 1e-9) if isinstance(duration_s, int | float) and duration_s > 0 else 0
        rest = float(duration_s) - n * period if n else duration_s
        for _ in range(n):  # a slice, then a check: a trip holds within one period, not at the end of the wait
            self.robot.wait(period)
            self._hold_if_estopped()
            self._check(self.robot.state())
        if not n or rest > 1e-9:
            self.robot.wait(rest)
            self._hold_if_estopped()
            self._check(self.robot.state())

    def set_gains(self, profile: str) -> None:
        self._refuse()
        self.robot.set_gains(profile)

    def reset_joints(self, q_rad: np.ndarray) -> None:
        """Refused after an e-stop. After a trip it is the one motion allowed (the way out of a joint-limit trip,
        which holding the pose cannot clear): a joint move to `q_rad` when every joint of it lies inside the limits
        minus the margin (RobotError otherwise); the trip stays until clear_errors()."""
        if self._trip and not self._estop.is_set():
            q = np.asarray(q_rad, np.float64)
            if q.shape != self._q_lo.shape or not np.all(np.isfinite(q)) or np.any(q < self._q_lo) \
                    or np.any(q > self._q_hi):
                raise RobotError(f"safety stop: {self._trip}; a recovery joint reset must target joints inside "
                                 f"their limits minus {self.config.joint_margin_rad} rad")
            log.warning("safety: recovery joint reset while stopped (%s)", self._trip)
            self.robot.clear_errors()
        else:
            self._refuse()
        self.robot.reset_joints(q_rad)
        self._hold_if_estopped()

    def reset_scene(self, seed: int | None = None) -> None:
        self._refuse()
        self.robot.reset_scene(seed)

    def clear_errors(self) -> None:
        """Clear the backend's error and the guard's trip, once the condition is gone (RobotError otherwise)."""
        if self._estop.is_set():
            raise RobotError("the robot server was e-stopped: restart it to move again")
        self.robot.clear_errors()
        if self._trip:
            still = self._violation(self.robot.state())
            waited = 0.0
            while still and waited < self.config.clear_settle_s:
                # the pose held since the trip lets a push relax (the twin's time passes only in wait())
                self.robot.wait(0.1)
                waited += 0.1
                still = self._violation(self.robot.state())
            if still:
                raise RobotError(f"safety limit still exceeded ({still}); move the arm clear by hand (guiding mode) "
                                 "or raise the limit, then clear_errors again")
            log.warning("safety: trip cleared (%s)", self._trip)
            self._trip = ""

    def stop(self) -> None:
        self.robot.stop()

    # ------------------------------------------------------------------------------------------------------
    # the server's hooks

    def estop(self) -> float:
        """Latch the e-stop and stop the backend's motion now where it can (thread-safe). Returns the time (s)
        the backend's own estop took."""
        t0 = time.monotonic()
        if not self._estop.is_set():
            self._estop_t = t0
            self._estop.set()
            log.warning("safety: E-STOP")
        backend_estop = getattr(self.robot, "estop", None)
        if callable(backend_estop):
            backend_estop()
        return time.monotonic() - t0

    @property
    def estopped(self) -> bool:
        return self._estop.is_set()

    def tick(self) -> None:
        """From the server's idle loop (control thread): hold after an e-stop; check the limits now and then."""
        self._hold_if_estopped()
        now = time.monotonic()
        if now - self._last_check >= self.config.check_period_s:
            self._last_check = now
            try:
                self._check(self.robot.state())
            except RobotRLError as err:  # a backend that cannot read its state now: its own error path reports it
                log.info("safety: state unreadable in tick (%s)", err)

    def stats(self) -> dict[str, Any]:
        return {"estopped": self._estop.is_set(), "tripped": self._trip, "trips": self._trips, "clips": self._clips}

    def __getattr__(self, name: str) -> Any:
        """The backend's extras (the twin's controller, cameras(), ...) stay reachable through the guard."""
        if name.startswith("_") or name in ("robot", "config", "box"):
            raise AttributeError(name)
        return getattr(self.robot, name)

    # ------------------------------------------------------------------------------------------------------
    # internals

    def _refuse(self) -> None:
        if self._estop.is_set():
            self._hold_if_estopped()
            raise RobotError("the robot server was e-stopped: commands are refused until it restarts")
        if self._trip:
            raise RobotError(f"safety stop: {self._trip}; call clear_errors() once the condition is gone")

    def _with_error(self, s: RobotState) -> RobotState:
        mine = "e-stopped" if self._estop.is_set() else (f"safety stop: {self._trip}" if self._trip else "")
        if not mine:
            return s
        return dataclasses.replace(s, error=f"{mine}; {s.error}" if s.error else mine)

    def _violation(self, s: RobotState | StateSample) -> str:
        cfg = self.config
        f, t = float(np.linalg.norm(s.force_ee_n)), float(np.linalg.norm(s.torque_ee_nm))
        if f > cfg.max_force_n:
            return f"external force {f:.1f} N > {cfg.max_force_n:.1f} N"
        if t > cfg.max_torque_nm:
            return f"external torque {t:.1f} Nm > {cfg.max_torque_nm:.1f} Nm"
        q = np.asarray(s.q_rad)
        bad = np.flatnonzero((q < self._q_lo) | (q > self._q_hi))
        if bad.size:
            j = int(bad[0])
            return (f"joint {j + 1} at {q[j]:.3f} rad is within {cfg.joint_margin_rad} rad of its limits "
                    f"[{self.limits.q_min_rad[j]}, {self.limits.q_max_rad[j]}] ({self.limits.name})")
        dq = np.abs(np.asarray(s.dq_rad_per_s))
        fast = np.flatnonzero(dq > self._dq_max)
        if fast.size:
            j = int(fast[0])
            return f"joint {j + 1} moves at {dq[j]:.2f} rad/s > {self._dq_max[j]:.2f} rad/s"
        return ""

    def _check(self, s: RobotState) -> None:
        if self._trip or self._estop.is_set():
            return
        why = self._violation(s)
        if why:
            self._trip_and_hold(why, float(s.time_s), s)

    def _on_sample(self, sample: StateSample) -> None:
        """A state as the backend received it (its thread): the same limits, the hold commanded from here."""
        self.checked_samples += 1
        if self._trip or self._estop.is_set():
            return
        why = self._violation(sample)
        if why:
            self._trip_and_hold(why, float(sample.time_s), None)

    def _trip_and_hold(self, why: str, time_s: float, s: RobotState | None) -> None:
        """Latch the trip (once, whichever thread sees it first) and re-target the measured pose."""
        with self._trip_lock:
            if self._trip:
                return
            self._trip = why
            self._trips += 1
            self.trip_time_s = time_s
        log.warning("safety: STOP: %s; holding the pose", why)
        try:
            s = s if s is not None else self.robot.state()
            self.robot.command(s.pos_base_ee, s.quat_base_ee, self._last_gripper)
        except RobotRLError as err:  # the backend is in its own error state (franky: its force hold): it holds itself
            log.info("safety: the backend refused the hold command (%s); it holds by itself", err)

    def _hold_if_estopped(self) -> None:
        if not self._estop.is_set() or self._held_after_estop:
            return
        self._held_after_estop = True
        try:
            s = self.robot.state()
            self.robot.command(s.pos_base_ee, s.quat_base_ee, self._last_gripper)
        except RobotRLError as err:  # franky: robot.stop() ended the motion, the robot holds by itself
            log.info("safety: hold after the e-stop: %s", err)
