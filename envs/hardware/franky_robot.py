"""`FrankyRobot`: a Franka arm (Panda / FR3) through libfranka, using franky-control >= 2.0 (implements
envs.robot.Robot). franky is imported lazily: without it the error names the `real` extra.

How each Robot method maps onto franky:
- state(): `robot.state` (O_T_EE as an Affine, q, dq, tau_J_d, the external wrench estimate O_F_ext_hat_K, the
  current errors) + `robot.current_cartesian_velocity` (the TCP twist) + `Gripper.width`. The wrench and the
  twist are rotated into the TCP frame (RobotState's convention); O_F_ext_hat_K is the wrench the environment
  applies on the stiffness frame K, which franky puts at the end effector (the TCP).
- command(): the target of a `CartesianImpedanceTracker` (franky 2.0): franky's 1 kHz loop in C++ tracks the
  last target set here (at the env's 10 Hz) with the gain profile's stiffness and damping and clips the pose
  error per axis (translational / rotational error clip = the profile's clips): the same reference limiting as
  our controller (controllers.impedance), so the contact force stays below stiffness * clip per axis. franky's
  tracker has no integral term: the precision profile's integrator is not used on hardware.
  Gripper: binary (>= 0.5 closed), through `franky.Gripper`, debounced (envs.hardware.franky_gripper); a pending
  change is sent on the next command / wait / state call.
- set_gains(): the profile's stiffness and damping go to the running tracker (franky smooths them over
  `gains_time_constant`); a profile with other error clips starts a new tracker, which franky hands over to
  without stopping (a queued motion takes over seamlessly), aimed at the current target.
- reset_joints(): stop the tracker, one `JointWaypointMotion([JointWaypoint(JointState(q))])` at
  `joint_dynamics_factor` of the robot's limits (waited for in `poll_s` slices, so that signal handlers run and
  an e-stop preempts it), then a new tracker holding the reached pose.
- clear_errors(): `recover_from_errors()`; RobotError when it fails (the error stays; nothing moves), otherwise a
  new tracker holding the current pose. Without an error (and with the tracker in control) a no-op.
- stop(): the tracker's graceful stop (franky ramps the torque into damping and brings the arm to rest; the
  robot then holds its joints), gripper commands are no longer sent; further commands raise RobotError.
- estop(): thread-safe (the robot server's I/O thread calls it): `robot.stop()` preempts the running motion at
  once; the arm holds its joints (the robot's own idle controller); the robot refuses commands from then on.
- wait(d): sleeps d seconds (in slices of at most `poll_s`, serving a pending gripper change).
- add_state_listener(cb) / set_force_limit(n) (the robot server's guard calls both): every state of the tracker's
  1 kHz loop to `cb` on franky's callback thread, and a franky reaction that holds the pose inside the loop in the
  step whose external force exceeds n (envs.hardware.franky_listen); after it fires, commands are refused until
  clear_errors() starts a new tracker at the held pose.

Errors: a reflex (or any control exception) ends franky's motion. The next state() reports it in
`RobotState.error` (from the motion's exception and `current_errors`), command() raises RobotError, and
clear_errors() recovers. The env (envs.env) ends the episode on a state error and calls clear_errors() in its
next reset; when recovery fails, that reset raises RobotError and the run stops.

Tested against franky-sim (its MuJoCo server, on loopback, `RealtimeConfig.Ignore`): franky-sim never raises
robot errors and reports a zero external wrench, so the error path and the wrench are tested through a
fault-injecting wrapper around the franky robot object (`robot_factory`, tests/franky_faults.py).

Usage::

    robot = FrankyRobot(FrankyRobotConfig(robot_ip="172.16.0.2"))     # connects robot + gripper, starts the tracker
    s = robot.state()
    robot.command(s.pos_base_ee + [0, 0, 0.01], s.quat_base_ee, gripper_closed=0.0)
    robot.wait(0.1)
    robot.stop()
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import os
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from controllers.gains import ImpedanceGains, gain_profile
from controllers.transforms import quat_normalize, quat_to_mat
from envs.hardware.franky_gripper import GRIPPER_MAX_WIDTH_M, GripperCommands
from envs.hardware.franky_listen import StateTap
from envs.robot import RobotState, StateSample, check_command, check_duration, check_joint_target
from robot_rl.config import Config, require
from robot_rl.errors import RobotError

log = logging.getLogger("robot_rl.franky")

@dataclasses.dataclass(frozen=True)
class FrankyRobotConfig(Config):
    """Settings of the libfranka backend."""

    robot_ip: str = ""
    """The robot's FCI address (the arm's network interface, e.g. 172.16.0.2; franky-sim: 127.0.0.1)."""
    realtime: bool = False
    """True: libfranka enforces a realtime (PREEMPT_RT) kernel (RealtimeConfig.Enforce); False: Ignore (a normal
    kernel works, with more communication-constraint reflexes under load)."""
    gripper: bool = True
    """Connect a Franka Hand through franky.Gripper (False: arm only, gripper commands are ignored)."""
    gripper_speed_m_per_s: float = 0.1
    """Finger speed for open / close."""
    gripper_force_n: float = 20.0
    """Grasp force when closing (N; the hand holds up to ~70 N continuously)."""
    gripper_epsilon_m: float = 0.08
    """Grasp tolerance (inner and outer): wide, so closing on any object (or on nothing) counts as done."""
    gripper_min_interval_s: float = 0.3
    """Debounce: at least this long between two gripper commands."""
    joint_dynamics_factor: float = 0.1
    """reset_joints moves at this fraction of the robot's velocity / acceleration / jerk limits."""
    initial_profile: str = "compliance"
    """Gain profile (controllers.gains) of the tracker started at connect."""
    gains_time_constant_s: float = 0.1
    """franky low-pass filters gain changes with this time constant."""
    max_delta_tau_nm: float = 1.0
    """franky's torque-rate limit per 1 ms tick (Nm)."""
    nullspace_posture: bool = True
    """Add a nullspace posture task toward the joint configuration at connect / after reset_joints, with the
    profile's nullspace stiffness (as our controller's nullspace term)."""
    poll_s: float = 0.01
    """wait() sleeps in slices of at most this long (serving pending gripper changes)."""
    control: bool = True
    """False: read-only (no tracker is started, nothing moves, commands are refused): for `check-hardware` and
    `safety-box record`, where the arm is left alone or guided by hand."""
    arm: str = "auto"
    """Which arm (controllers.arms: 'panda', 'fr3', 'any'), for the joint limits the server's guard enforces;
    'auto': from the libfranka franky runs on (< 0.10: a Panda, >= 0.10: an FR3; franky-control's PyPI wheels
    bundle 0.21.2, FR3 only), 'any' when it cannot be read."""
    collision_torque_nm: tuple[float, ...] | None = None
    """libfranka's collision (reflex) thresholds per joint, 7 values (Nm), set at connect with
    `set_collision_behavior`; None (with collision_force_n None) leaves the robot's settings as they are."""
    collision_force_n: tuple[float, ...] | None = None
    """libfranka's Cartesian collision thresholds (fx, fy, fz in N, then tx, ty, tz in Nm), 6 values."""

    def validate(self) -> None:
        require(isinstance(self.robot_ip, str) and len(self.robot_ip) > 0, "robot_ip", self.robot_ip,
                "must name the robot (its FCI address, e.g. 172.16.0.2)")
        for name in ("gripper_speed_m_per_s", "gripper_force_n", "gripper_epsilon_m", "joint_dynamics_factor",
                     "gains_time_constant_s", "max_delta_tau_nm", "poll_s"):
            v = getattr(self, name)
            require(isinstance(v, int | float) and math.isfinite(v) and v > 0, name, v, "must be finite and > 0")
        require(self.gripper_min_interval_s >= 0, "gripper_min_interval_s", self.gripper_min_interval_s,
                "must be >= 0")
        require(self.joint_dynamics_factor <= 1.0, "joint_dynamics_factor", self.joint_dynamics_factor,
                "must be in (0, 1]")
        gain_profile(self.initial_profile)  # ConfigError for an unknown name
        from controllers.arms import ARMS, COLLISION_THRESHOLD_COUNTS, collision_values_ok

        require(self.arm == "auto" or self.arm in ARMS, "arm", self.arm, f"must be 'auto' or one of {sorted(ARMS)}")
        for name, n in COLLISION_THRESHOLD_COUNTS.items():
            v = getattr(self, name)
            require(v is None or collision_values_ok(v, n), name, v, f"must be None or {n} finite values > 0")
        require((self.collision_torque_nm is None) == (self.collision_force_n is None), "collision_force_n",
                self.collision_force_n, "must be given together with collision_torque_nm (both or neither)")


def _franky() -> Any:
    from robot_rl.extras import optional_import

    return optional_import("franky", extra="real", purpose="the libfranka backend (FrankyRobot, --backend franky)")


def loaded_libfranka_version() -> str | None:
    """The version of the libfranka this process has loaded (from its file name in /proc/self/maps, e.g.
    libfranka-b351eea7.so.0.21.2 -> '0.21.2'), or None when none is loaded or it cannot be read."""
    import re

    try:
        with open("/proc/self/maps") as f:
            maps = f.read()
    except OSError:
        return None
    return next(iter(re.findall(r"libfranka[^/\s]*\.so\.(\d+\.\d+(?:\.\d+)?)", maps)), None)


def affine_to_pose(affine: Any) -> tuple[np.ndarray, np.ndarray]:
    """(pos (3,), quat wxyz (4,), w >= 0) of a franky Affine (or a column-major 16-vector / 4x4 matrix)."""
    if hasattr(affine, "translation") and hasattr(affine, "quaternion"):
        pos = np.asarray(affine.translation, np.float64).reshape(3)
        xyzw = np.asarray(affine.quaternion, np.float64).reshape(4)
        quat = np.array([xyzw[3], xyzw[0], xyzw[1], xyzw[2]])
    else:
        from controllers.transforms import mat_to_quat

        m = np.asarray(affine, np.float64)
        m = m.reshape(4, 4, order="F") if m.size == 16 and m.ndim == 1 else m.reshape(4, 4)
        pos, quat = m[:3, 3].copy(), mat_to_quat(m[:3, :3])
    quat = quat_normalize(quat)
    return pos, (-quat if quat[0] < 0 else quat)


def pose_to_affine(franky: Any, pos: np.ndarray, quat_wxyz: np.ndarray) -> Any:
    """A franky Affine from a position and a wxyz quaternion (franky takes xyzw)."""
    q = quat_normalize(quat_wxyz)
    return franky.Affine(np.asarray(pos, np.float64), np.array([q[1], q[2], q[3], q[0]]))


def errors_text(errors: Any) -> str:
    """The names of the active franka errors ('' when none). franky's Errors is truthy even when empty, so read
    its text: '[]' means none."""
    if errors is None:
        return ""
    text = str(errors).strip()
    return "" if text in ("", "[]", "{}", "None") else text


@contextlib.contextmanager
def keep_thread_scheduling() -> Iterator[None]:
    """Restore the calling thread's scheduling policy and priority on exit.

    libfranka raises the thread that constructs `franky.Robot` / `franky.Gripper` to SCHED_FIFO 99 whenever it
    may (as root, even with RealtimeConfig.Ignore). That thread is our Python thread, not libfranka's 1 kHz
    control thread (which sets its own priority), and every process or thread it starts afterwards inherits the
    policy: a busy Python child at FIFO 99 starves a machine (seen: two unpaced actors spawned by a test process
    after it connected to franky-sim took both cores from everything else)."""
    policy, param = os.sched_getscheduler(0), os.sched_getparam(0)
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            if (os.sched_getscheduler(0), os.sched_getparam(0)) != (policy, param):
                os.sched_setscheduler(0, policy, param)


class FrankyRobot:
    """A Franka arm through franky (implements envs.robot.Robot); see the module docstring.

    `robot_factory(ip, realtime_config)` and `gripper_factory(ip)` build the franky objects (default:
    franky.Robot / franky.Gripper); tests wrap them to inject faults.
    """

    def __init__(self, config: FrankyRobotConfig, robot_factory: Callable[[str, Any], Any] | None = None,
                 gripper_factory: Callable[[str], Any] | None = None) -> None:
        self.config = cfg = config
        self._fr = fr = _franky()
        realtime = fr.RealtimeConfig.Enforce if cfg.realtime else fr.RealtimeConfig.Ignore
        try:
            with keep_thread_scheduling():
                self._robot = (robot_factory or (lambda ip, rt: fr.Robot(ip, realtime_config=rt)))(cfg.robot_ip,
                                                                                                  realtime)
        except Exception as err:  # franky.NetworkException, IncompatibleVersionException, ...
            raise RobotError(f"cannot connect to the robot at {cfg.robot_ip}: {type(err).__name__}: {err}") from err
        self._gripper: GripperCommands | None = None
        if cfg.gripper:
            try:
                with keep_thread_scheduling():
                    hand = (gripper_factory or fr.Gripper)(cfg.robot_ip)
            except Exception as err:
                raise RobotError(f"cannot connect to the gripper at {cfg.robot_ip}: {type(err).__name__}: {err} "
                                 "(FrankyRobotConfig(gripper=False) runs the arm without it)") from err
            self._gripper = GripperCommands(hand, cfg.gripper_speed_m_per_s, cfg.gripper_force_n,
                                            cfg.gripper_epsilon_m, cfg.gripper_min_interval_s)
        self._lock = threading.RLock()  # one caller at a time; estop() does not take it
        self._tracker: Any = None
        self._alive: list[Any] = []  # trackers handed over from, kept until their motion has surely ended
        self._gains: ImpedanceGains = gain_profile(cfg.initial_profile)
        self._profile = cfg.initial_profile
        self._target: tuple[np.ndarray, np.ndarray] | None = None
        self._posture_q: np.ndarray | None = None
        self._error = ""
        self._held = ""  # why franky's force-limit reaction holds the pose ('' when it does not)
        self._tap = StateTap(fr, self._on_force_hold)
        self._hold_params: tuple[dict[str, Any], np.ndarray] = ({}, np.zeros(6))
        self._stopped = False
        self._estopped = threading.Event()
        if cfg.arm != "auto":
            self.arm = cfg.arm
        else:
            from controllers.arms import arm_for_libfranka

            self.arm = arm_for_libfranka(loaded_libfranka_version() or "")
        """The arm model (controllers.arms) whose joint limits the server's guard enforces."""
        if cfg.control and cfg.collision_torque_nm is not None and cfg.collision_force_n is not None:
            try:
                self._robot.set_collision_behavior(list(cfg.collision_torque_nm), list(cfg.collision_force_n))
            except Exception as err:
                raise RobotError(f"the robot refused the collision thresholds {cfg.collision_torque_nm} Nm / "
                                 f"{cfg.collision_force_n} N: {type(err).__name__}: {err}") from err
        pending = errors_text(getattr(self._robot.state, "current_errors", None))
        if not cfg.control:
            self._stopped = True  # read-only: state() works, everything that moves is refused
        elif pending:
            self._error = f"robot reports errors at connect: {pending} (clear_errors() recovers)"
        else:
            self._start_tracker()

    # ------------------------------------------------------------------------------------------------------
    # the Robot protocol

    def state(self) -> RobotState:
        with self._lock:
            if self._robot is None:
                raise RobotError("FrankyRobot is stopped: its connection is released")
            self._check_motion()
            self._service_gripper()
            s = self._robot.state
            pos, quat = affine_to_pose(s.O_T_EE)
            R = quat_to_mat(quat)
            try:
                tw = self._robot.current_cartesian_velocity.end_effector_twist
                v, w = np.asarray(tw.linear, np.float64), np.asarray(tw.angular, np.float64)
            except Exception:  # not available: report zero (never fails a state read)
                v, w = np.zeros(3), np.zeros(3)
            wrench = np.asarray(s.O_F_ext_hat_K, np.float64).reshape(6)
            width = GRIPPER_MAX_WIDTH_M if self._gripper is None else self._gripper.read_width()
            error = self._error or errors_text(getattr(s, "current_errors", None))
            return RobotState(
                time_s=_seconds(s.time),
                q_rad=np.asarray(s.q, np.float64).copy(),
                dq_rad_per_s=np.asarray(s.dq, np.float64).copy(),
                pos_base_ee=pos,
                quat_base_ee=quat,
                twist_ee_body=np.concatenate([R.T @ v, R.T @ w]),
                gripper_width_m=width,
                force_ee_n=R.T @ wrench[:3],
                torque_ee_nm=R.T @ wrench[3:],
                tau_j_nm=np.asarray(s.tau_J_d, np.float64).copy(),
                error=error,
            )

    def command(self, pos_base_target: np.ndarray, quat_base_target: np.ndarray, gripper_closed: float) -> None:
        """New tracker target + gripper command (see the module docstring). SafetyError on NaN/inf or bad
        shapes (target unchanged); RobotError after stop()/estop() or while an error is pending."""
        pos, quat, g = check_command(pos_base_target, quat_base_target, gripper_closed)
        with self._lock:
            self._refuse_if_stopped()
            self._check_motion()
            if self._error or self._held:
                raise RobotError(f"FrankyRobot is in an error state ({self._error or self._held}); call "
                                 "clear_errors()")
            self._tracker.set_target(pose_to_affine(self._fr, pos, quat))
            self._target = (pos.copy(), quat)
            if self._gripper is not None:
                self._gripper.want(g)
            self._service_gripper()

    def wait(self, duration_s: float) -> None:
        duration_s = check_duration(duration_s)
        t_end = time.monotonic() + duration_s
        while not self._estopped.is_set():
            left = t_end - time.monotonic()
            if left <= 0:
                break
            time.sleep(min(left, self.config.poll_s))
            with self._lock:
                self._service_gripper()

    def set_gains(self, profile: str) -> None:
        gains = gain_profile(profile)
        with self._lock:
            self._refuse_if_stopped()
            old, self._gains, self._profile = self._gains, gains, profile
            if self._tracker is None or self._error or self._held:
                return  # applied when the next tracker starts
            same_clip = (old.translational_clip_m == gains.translational_clip_m
                         and old.rotational_clip_rad == gains.rotational_clip_rad)
            if same_clip:
                self._tracker.set_gains(translational_stiffness=gains.translational_stiffness_n_per_m,
                                        rotational_stiffness=gains.rotational_stiffness_nm_per_rad,
                                        damping=_damping(gains))
            else:  # the clips are fixed per tracker: hand over to a new one (franky queues it seamlessly)
                self._start_tracker(keep_target=True)

    def reset_joints(self, q_rad: np.ndarray) -> None:
        q = check_joint_target(q_rad)
        with self._lock:
            self._refuse_if_stopped()
            self._check_motion()
            if self._error or self._held:
                raise RobotError(f"FrankyRobot is in an error state ({self._error or self._held}); call "
                                 "clear_errors()")
            self._stop_tracker()
            self._refuse_if_stopped()  # an e-stop during the tracker's stop: start nothing
            fr = self._fr
            motion = fr.JointWaypointMotion([fr.JointWaypoint(fr.JointState(q))])
            try:
                self._robot.relative_dynamics_factor = self.config.joint_dynamics_factor
                self._robot.move(motion, asynchronous=True)
                # wait in short slices, not in one blocking C++ call: a signal handler (SIGINT / SIGTERM on the
                # robot server) runs between them, and estop() from another thread preempts the motion (stopped
                # again here in case the e-stop raced with the motion's start)
                while not self._robot.join_motion(self.config.poll_s):
                    if self._estopped.is_set():
                        self._robot.stop()
            except Exception as err:  # franky.ControlException (reflex), preemption by estop
                self._error = f"reset_joints failed: {type(err).__name__}: {err}"
                raise RobotError(self._error) from err
            if self._estopped.is_set():
                raise RobotError("FrankyRobot was e-stopped")
            self._posture_q = q.copy()
            self._start_tracker()

    def reset_scene(self, seed: int | None = None) -> None:
        """Nothing to randomise on hardware."""

    def clear_errors(self) -> None:
        """`recover_from_errors()`, then a new tracker holding the current pose. RobotError when recovery fails
        (or after stop()/estop())."""
        with self._lock:
            self._refuse_if_stopped()
            self._check_motion()
            if not self._error and not errors_text(getattr(self._robot.state, "current_errors", None)):
                if self.tracking:
                    return  # nothing to recover (e.g. the server's safety guard tripped, not the robot)
                if self._held:  # franky's force-limit hold: a new tracker takes over from it at the held pose
                    log.warning("franky: resuming after the hold (%s)", self._held)
                    self._held, self._tracker, self._target = "", None, None
                    self._start_tracker()
                    return
            try:
                ok = bool(self._robot.recover_from_errors())
            except Exception as err:
                ok = False
                why = f"{type(err).__name__}: {err}"
            else:
                why = errors_text(getattr(self._robot.state, "current_errors", None)) or "recover_from_errors() " \
                    "returned False"
            if not ok or errors_text(getattr(self._robot.state, "current_errors", None)):
                raise RobotError(f"error recovery failed ({why}); the robot needs an operator (check the "
                                 "user stop and Desk)")
            self._error = self._held = ""
            self._tracker = None
            self._target = None
            self._start_tracker()

    def stop(self) -> None:
        """Bring the arm to rest and hold (franky's graceful tracker stop), then release the connection (franky-sim
        and the robot serve one client at a time: the next one can connect); idempotent."""
        with self._lock:
            if self._robot is None:
                return
            if not self._stopped:
                self._stopped = True
                self._stop_tracker()
            if self._gripper is not None:
                self._gripper.release()
            self._alive.clear()
            self._tracker = None
            self._gripper = None
            self._robot = None  # libfranka closes the connection when the last reference goes

    def estop(self) -> None:
        """Stop motion now (thread-safe, does not wait for a running call): `robot.stop()` preempts the running
        motion and the arm holds its joints. Latching: every later command raises RobotError."""
        self._estopped.set()
        robot = self._robot
        if robot is None:
            return
        try:
            robot.stop()
        except Exception as err:  # nothing was moving, or the connection is gone: the arm is not moving either
            log.info("franky: robot.stop() during estop: %s", err)

    def add_state_listener(self, callback: Callable[[StateSample], None]) -> None:
        """Call `callback(StateSample)` for every state of the impedance tracker's 1 kHz loop from now on, on
        franky's callback thread (envs.robot.StateSample; envs.hardware.franky_listen)."""
        with self._lock:
            self._tap.add_listener(callback)
            if self._tracker is not None:
                self._tap.attach(self._tracker, *self._hold_params)

    def set_force_limit(self, max_force_n: float) -> None:
        """Hold the pose inside franky's 1 kHz loop, in the control step whose external force exceeds
        `max_force_n` (N), through a franky reaction on every tracker from now on (envs.hardware.franky_listen); the
        listeners get that state; commands are refused until clear_errors()."""
        v = float(max_force_n)
        if not (math.isfinite(v) and v > 0):
            raise ValueError(f"max_force_n={max_force_n!r} must be finite and > 0")
        with self._lock:
            self._tap.max_force_n = v
            if self._tracker is not None:
                self._tap.attach(self._tracker, *self._hold_params)

    # ------------------------------------------------------------------------------------------------------
    # extras

    @property
    def franky_robot(self) -> Any:
        """The franky.Robot (or the object robot_factory built)."""
        return self._robot

    @property
    def gains_profile(self) -> str:
        return self._profile

    @property
    def tracking(self) -> bool:
        """Whether franky's tracker is in control."""
        return self._tracker is not None and not self._held and self._robot is not None \
            and bool(self._robot.is_in_control)

    @property
    def target(self) -> tuple[np.ndarray, np.ndarray] | None:
        """(pos, quat) of the tracker's current target."""
        return None if self._target is None else (self._target[0].copy(), self._target[1].copy())

    def __enter__(self) -> FrankyRobot:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------------------------------------------
    # internals

    def _refuse_if_stopped(self) -> None:
        if self._estopped.is_set():
            raise RobotError("FrankyRobot was e-stopped: commands are refused (restart the robot server)")
        if self._stopped:
            raise RobotError("FrankyRobot is stopped: commands are refused")

    def _start_tracker(self, keep_target: bool = False) -> None:
        fr, g = self._fr, self._gains
        kwargs: dict[str, Any] = dict(
            translational_stiffness=g.translational_stiffness_n_per_m,
            rotational_stiffness=g.rotational_stiffness_nm_per_rad,
            damping=_damping(g),
            translational_error_clip=np.full(3, g.translational_clip_m),
            rotational_error_clip=np.full(3, g.rotational_clip_rad),
            max_delta_tau=self.config.max_delta_tau_nm,
            gains_time_constant=self.config.gains_time_constant_s,
        )
        if self.config.nullspace_posture and g.nullspace_stiffness > 0:
            q0 = self._posture_q if self._posture_q is not None else np.asarray(self._robot.state.q, np.float64)
            self._posture_q = np.array(q0)
            kwargs["posture_task"] = fr.PostureTask(target=self._posture_q, stiffness=np.full(7, g.nullspace_stiffness))
        try:
            tracker = fr.CartesianImpedanceTracker(self._robot, **kwargs)
        except TypeError:  # a franky without PostureTask keywords: no nullspace task
            kwargs.pop("posture_task", None)
            tracker = fr.CartesianImpedanceTracker(self._robot, **kwargs)
        except Exception as err:
            self._error = f"cannot start the impedance tracker: {type(err).__name__}: {err}"
            raise RobotError(self._error) from err
        self._tracker = tracker
        self._hold_params = ({k: v for k, v in kwargs.items() if k != "damping"}, kwargs["damping"])
        self._tap.attach(tracker, *self._hold_params)
        self._alive.append(tracker)  # its motion runs until the next one takes over: keep it alive until then
        del self._alive[:-4]  # a take-over happens within a control tick; older trackers have long ended
        if keep_target and self._target is not None:
            tracker.set_target(pose_to_affine(fr, *self._target))
        else:  # the tracker seeds its target with the current pose
            self._target = affine_to_pose(self._robot.current_pose.end_effector_pose)

    def _on_force_hold(self, generation: int, why: str) -> None:
        """franky's callback thread: the force-limit reaction of the tracker attached as `generation` fired (a
        late report of a tracker already replaced is not the running motion's: ignored)."""
        if generation == self._tap.generation and self._tracker is not None:
            self._held = why

    def _stop_tracker(self) -> None:
        """franky's graceful stop (a TorqueStopMotion ramps into damping and brings the arm to rest)."""
        tracker, self._tracker = self._tracker, None
        if tracker is None:
            return
        try:
            tracker.stop()
        except Exception as err:  # it had already faulted (or was preempted): the motion is over either way
            log.info("franky: tracker stop: %s", err)
        self._alive.clear()  # nothing runs any more

    def _check_motion(self) -> None:
        """Notice a motion that ended by itself (a reflex): record the error."""
        if self._tracker is None or self._error or self._estopped.is_set():
            return
        current = ""
        if self._robot.is_in_control:
            # the state can report the reflex before franky's motion thread has ended (measured on a loaded machine:
            # current_errors set, is_in_control still True): the motion is ending, so wait for it briefly and treat
            # it as ended either way, so that state(), tracking and command() agree with the reported error
            current = errors_text(getattr(self._robot.state, "current_errors", None))
            if not current:
                return
        why = "the impedance tracker stopped"
        try:
            if current:
                self._robot.join_motion(1.0)  # bounded: the reflex ends the motion within milliseconds
            else:
                self._robot.join_motion()
        except Exception as err:
            why = f"{type(err).__name__}: {err}"
        current = errors_text(getattr(self._robot.state, "current_errors", None)) or current
        self._error = f"motion aborted: {why}" + (f" (errors: {current})" if current else "")
        self._tracker = None
        self._alive.clear()
        log.warning("franky: %s", self._error)

    def _service_gripper(self) -> None:
        """A pending gripper change goes out when allowed (envs.hardware.franky_gripper), never after a stop."""
        if self._gripper is not None and not self._stopped and not self._estopped.is_set() and self._robot is not None:
            self._gripper.service()


def _damping(g: ImpedanceGains) -> np.ndarray:
    return np.array([g.translational_damping_ns_per_m] * 3 + [g.rotational_damping_nms_per_rad] * 3)


def _seconds(t: Any) -> float:
    """franky's Duration (ms) or a number of seconds."""
    if hasattr(t, "to_sec"):
        return float(t.to_sec())
    if hasattr(t, "to_msec"):
        return float(t.to_msec()) / 1e3
    try:
        return float(t)
    except TypeError:
        return time.monotonic()
