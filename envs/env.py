"""`RobotEnv`: the gymnasium env over any `Robot` + `Task` (+ `Cameras`), SERL FrankaEnv style.

Observation (a Dict):
- "state": float32 (19,) proprio = TCP position relative to the task's reset pose (3, base-frame axes),
  euler xyz of R_reset^T R (3), TCP body twist (6), gripper width (1), wrist force (3) and torque (3).
  "Reset pose" is the task's nominal reset pose (without the per-episode noise), so the noise is visible.
- pixels mode: "images": Dict{camera: uint8 (H, W, 3)} for every name in `camera_names`.
- state mode: "object": float32 (k,) privileged task state (`Task.object_obs`, positions relative to the
  reset pose), unless `object_obs` is False. Nothing is rendered in state mode, except the `reward_cameras`.

Reward cameras (state mode, `reward_cameras`): a reward classifier reads camera frames while the policy observes
state only (a real arm's learned reward). Each reset and step reads those cameras (the same `Cameras` seam and, on
the twin, the same renderer as pixels mode, at `image_size`) and puts the frames into
`info["reward_images"]` = {camera: uint8 (image_size, image_size, 3)}; they are never in the observation, so they
never reach a replay buffer or the wire. `reward_image_shapes` says what is rendered.

Action: Box [-1, 1]^7 = delta xyz * `action_scale_m`, rotation vector * `action_scale_rad` (base frame,
applied on the left: q_new = exp(a) q), gripper (>= +threshold: close, <= -threshold: open, in between: keep;
a change needs `gripper_debounce_steps` steps since the last one; a task with `gripper_locked` keeps its reset
command and ignores this dim). The delta is applied to the current
*commanded* pose, then limited per step (controllers.safety.limit_step), then kept within a bounded lead of
the *measured* pose (`max_lead_m` per axis, `max_lead_rad` in angle; see "Bounded lead" below) and clipped to
the task's safety box (controllers.safety.clip_pose).

Bounded lead (the choice between SERL's delta-on-measured and delta-on-commanded): the policy cannot see the
commanded target, so with plain delta-on-commanded a policy pushing into the table winds the target up toward
the box edge (the arm stays pressed for several steps after the policy says 'up'), and with delta-on-measured
(SERL) a zero action re-targets the measured pose every step, so any steady tracking error (gravity,
friction: ~1-2 mm on franky-sim) accumulates into drift. Here the delta goes onto the commanded pose (no drift),
and on every axis where the arm is not following its target (the previous target already led it by half the
bound or more and it moves slower than `lead_stall_m_per_s` along the axis: in contact) the target may lead the measured
pose by at most `max_lead_m` (default: the compliance
profile's error clip, the controller's reference-limiting distance; `max_lead_rad` / `lead_stall_rad_per_s`
for the orientation). In contact the target therefore stays within the reference-limiting distance
(tested: pressing on the twin's table for 20 steps) and the arm lifts off as soon as the policy says so. In
free motion the bound does not act: the arm moving at full speed lags its target by ~5 cm (the target's
0.2 s low-pass filter plus v D / K), and a fixed 1 cm bound would cap its speed at ~4 cm/s (measured).

Reward 1.0 on success (sparse), `terminated` on success, `truncated` at `max_episode_steps` or on a robot
error (reported in the state, or a RobotError from `command` while the state reports an error: a reflex
that arose since the last step; the next reset clears it). `info` always has "success", "objects"
(privileged state, empty on hardware; there "success" is a placeholder False and `info["success_unknown"]` is True,
robot_rl.reward_source.SUCCESS_UNKNOWN_INFO_KEY), "jitter_ms" (lateness of this step's deadline, 0.0 unless
realtime), "gripper_changed", "clipped" (the safety box or step limit changed the target), with real
cameras "frame_age_ms" (per camera: how old the observed frame was), and at the end of an episode "timing"
(= `timing_stats()`). Tasks with named goals (`Task.goals`, e.g. cube-relocate's zones) add "goals" {name: bool}.

Reset: precision gains; a joint reset (home) on the first episode, every `joint_reset_every` episodes, and on
every reset with an explicit seed (`joint_reset_on_seed`, so a seeded episode is a pure function of its seed on
the twin); `robot.reset_scene(seed)`; move to the reset pose + uniform noise (`reset_noise_m`, `reset_noise_rad`)
and settle; compliance gains. A move that does not settle within `reset_timeout_s` is retried `reset_retries`
times (after a joint reset: `joint_reset_before_retry`), then `robot_rl.errors.ResetError` stops the run (no
episode starts from a wrong pose); `reset_retry_count` counts the retries.
With `scene_resets = "first"` the scene is teleported (`reset_scene`) only on the env's first reset; every later
reset runs the task's reset routine through the Robot seam instead (envs.resets: e.g. pick-cube puts a held cube
back at a random spot of its start region), then the joint reset when due, then the move to the reset pose.
`scene_teleports` counts the `reset_scene` calls; `info["scene_reset"]` says whether this reset made one.

Hardware-faithful mode (`FAITHFUL`, `make_twin_env(faithful=True)`): `object_obs=False` (proprio + cameras only),
`task_reward=False` (reward 0 and no termination from `Task.success`: a learned classifier or a human decides;
the true success stays in `info["success"]` and "goals" for evaluation and metrics, never in the reward or the
observation), `scene_resets="first"`; "objects" is left out of `info`. The learner then gets only what a real arm
gives.

Timing: the env owns the control loop. Not realtime (the twin): `robot.wait(period)` simulates one period.
Realtime (hardware): the env asks the robot to let the rest of the period pass and then sleeps to the
deadline, measuring how late each step's deadline was (jitter); `timing_stats()` reports step wall times and
jitter p50/p99.

Usage::

    env = RobotEnv(robot, get_task("pick_cube"), cameras, RobotEnvConfig(obs_mode="pixels"))
    obs, info = env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
    env.timing_stats()["step_ms_p50"]
"""

from __future__ import annotations

import collections
import dataclasses
import math
import time
from typing import Any

import numpy as np

from controllers.safety import SafetyBox, check_finite, clip_pose, limit_step
from controllers.transforms import (
    axis_angle_to_quat,
    orientation_error,
    quat_angle,
    quat_conj,
    quat_mul,
    quat_normalize,
    quat_to_euler_xyz,
    quat_to_mat,
)
from envs.resets import ResetStep, check_routine, routine_for
from envs.robot import Cameras, Robot, RobotState
from envs.tasks import Task, get_task
from robot_rl.config import Config, require
from robot_rl.errors import (
    ConfigError,
    MissingExtraError,
    ResetError,
    RobotError,
    RobotRLError,
    SafetyError,
    ShapeError,
)
from robot_rl.reward_source import REWARD_IMAGES_INFO_KEY, SUCCESS_UNKNOWN_INFO_KEY

try:
    import gymnasium
    from gymnasium import spaces
except ImportError as _err:  # pragma: no cover - exercised only without the sim extra
    raise MissingExtraError(
        f"the optional package 'gymnasium' (needed for the robot envs) is not installed ({_err}); "
        "install it with: pip install 'robot-rl[sim]'"
    ) from _err

PANDA_HOME_Q_RAD: tuple[float, ...] = (0.0, -math.pi / 4, 0.0, -3 * math.pi / 4, 0.0, math.pi / 2, math.pi / 4)
"""A common Franka Panda home configuration (gripper down, in front of the base)."""

STATE_DIM = 19
"""Length of the proprio vector (see the module docstring)."""

OBS_MODES = ("pixels", "state")
SCENE_RESETS = ("every", "first")

FAITHFUL: dict[str, Any] = {"object_obs": False, "task_reward": False, "scene_resets": "first"}
"""The RobotEnvConfig fields of the hardware-faithful mode (see the module docstring)."""


@dataclasses.dataclass(frozen=True)
class RobotEnvConfig(Config):
    """Options of `RobotEnv` (the task supplies the reset pose, safety box and default episode length)."""

    control_hz: float = 10.0
    """Env steps per second (the policy rate); the robot's own control loop runs much faster."""
    max_episode_steps: int = 0
    """Episode length in steps; 0 = the task's default."""
    action_scale_m: float = 0.02
    """Metres of TCP motion per unit of action, per step, per axis."""
    action_scale_rad: float = 0.1
    """Radians of TCP rotation per unit of action (rotation-vector components), per step."""
    max_step_translation_m: float = 0.04
    """Per-step limit on how far the commanded position may move (>= sqrt(3) * action_scale_m)."""
    max_step_rotation_rad: float = 0.2
    """Per-step limit on how far the commanded orientation may turn (>= sqrt(3) * action_scale_rad)."""
    obs_mode: str = "pixels"
    """'pixels': proprio + camera images; 'state': proprio + privileged object state, no rendering."""
    image_size: int = 128
    """Height and width of every camera image (pixels mode; state mode: of the `reward_cameras` frames)."""
    camera_names: tuple[str, ...] = ("front", "wrist")
    """Cameras in the observation (pixels mode)."""
    reward_cameras: tuple[str, ...] = ()
    """State mode only: cameras read every reset and step for a reward model, their frames put into
    `info["reward_images"]` {camera: uint8 (image_size, image_size, 3)}, never into the observation (see the module
    docstring). Empty: state mode renders nothing. `--reward classifier:DIR --obs-mode state` sets it (and
    image_size) from the classifier's card."""
    reset_noise_m: float = 0.02
    """Uniform noise (+-, per axis) added to the reset position."""
    reset_noise_rad: float = 0.05
    """Uniform noise (+-, per rotation-vector component) added to the reset orientation."""
    joint_reset_every: int = 0
    """Reset the joints to `home_q_rad` every N episodes (0 = only on the first episode and seeded resets)."""
    joint_reset_on_seed: bool = True
    """Also reset the joints whenever `reset(seed=...)` gets a seed, so seeded episodes are reproducible."""
    home_q_rad: tuple[float, ...] = PANDA_HOME_Q_RAD
    """Joint configuration of a joint reset."""
    reset_speed_m_per_s: float = 0.25
    """Speed of the reference while moving to the reset pose."""
    reset_speed_rad_per_s: float = 1.0
    """Angular speed of the reference while moving to the reset pose."""
    reset_tolerance_m: float = 0.003
    """The reset move is done when the TCP is this close to the reset target ..."""
    reset_tolerance_rad: float = 0.03
    """... and this close in orientation ..."""
    reset_settle_speed_m_per_s: float = 0.01
    """... and moves slower than this."""
    reset_timeout_s: float = 4.0
    """Give up waiting for a reset move after this long (then retry it, see reset_retries)."""
    reset_retries: int = 2
    """A reset move that has not settled within reset_timeout_s is tried again this many times; then ResetError."""
    joint_reset_before_retry: bool = True
    """Before retrying a reset move, reset the joints to `home_q_rad` (the arm may be stuck at a joint limit or in
    an odd configuration that the Cartesian impedance law cannot leave)."""
    object_obs: bool = True
    """State mode: include the privileged "object" observation. False: proprio only (hardware-faithful)."""
    task_reward: bool = True
    """Reward and termination from `Task.success`. False: reward 0 and no termination on success (a reward model
    outside the env decides); `info["success"]` still reports the true success (hardware-faithful)."""
    scene_resets: str = "every"
    """"every": teleport the objects (`robot.reset_scene`) at every reset; "first": only at the env's first reset,
    later resets run the task's reset routine with the robot (envs.resets; hardware-faithful)."""
    realtime: bool = False
    """True for hardware: sleep to each step's deadline and measure jitter. False: `robot.wait` simulates."""
    gripper_threshold: float = 0.5
    """Gripper action >= this closes, <= -this opens, anything between keeps the current command."""
    max_lead_m: float = 0.01
    """On an axis where the arm is not following (see lead_stall_m_per_s), how far the commanded target may lead
    the measured TCP position (m; 0 = unbounded). Default: the compliance profile's error clip."""
    max_lead_rad: float = 0.05
    """The same for the orientation (angle, rad; 0 = unbounded), when the arm turns slower than
    lead_stall_rad_per_s."""
    lead_stall_m_per_s: float = 0.02
    """An axis along which the TCP moves slower than this counts as not following (blocked, in contact)."""
    lead_stall_rad_per_s: float = 0.1
    """The TCP turning slower than this counts as not following."""
    gripper_debounce_steps: int = 2
    """After a gripper command change, further changes are refused for this many steps (SERL-style debounce)."""
    success_reward: float = 1.0
    """Reward on a success step (0 otherwise)."""
    terminate_on_success: bool = True
    """End the episode (`terminated`) on success. False keeps going (success-label recording, near misses)."""
    timing_window: int = 10_000
    """How many recent steps `timing_stats()` summarises."""

    def validate(self) -> None:
        require(self.control_hz > 0 and math.isfinite(self.control_hz), "control_hz", self.control_hz, "must be > 0")
        require(self.max_episode_steps >= 0, "max_episode_steps", self.max_episode_steps, "must be >= 0")
        for name in ("action_scale_m", "action_scale_rad", "max_step_translation_m", "max_step_rotation_rad",
                     "reset_speed_m_per_s", "reset_speed_rad_per_s", "reset_tolerance_m", "reset_tolerance_rad",
                     "reset_settle_speed_m_per_s", "reset_timeout_s"):
            v = getattr(self, name)
            require(v > 0 and math.isfinite(v), name, v, "must be finite and > 0")
        require(self.obs_mode in OBS_MODES, "obs_mode", self.obs_mode, f"must be one of {OBS_MODES}")
        require(8 <= self.image_size <= 1024, "image_size", self.image_size, "must be in [8, 1024]")
        require(len(self.camera_names) > 0 or self.obs_mode == "state", "camera_names", self.camera_names,
                "must name at least one camera in pixels mode")
        require(len(set(self.camera_names)) == len(self.camera_names), "camera_names", self.camera_names,
                "must be unique")
        require(len(set(self.reward_cameras)) == len(self.reward_cameras), "reward_cameras", self.reward_cameras,
                "must be unique")
        require(not self.reward_cameras or self.obs_mode == "state", "reward_cameras", self.reward_cameras,
                "is a state-mode option (in pixels mode a reward model reads the observation's cameras)")
        for name in ("reset_noise_m", "reset_noise_rad", "max_lead_m", "max_lead_rad", "lead_stall_m_per_s",
                     "lead_stall_rad_per_s"):
            v = getattr(self, name)
            require(v >= 0 and math.isfinite(v), name, v, "must be finite and >= 0")
        require(self.joint_reset_every >= 0, "joint_reset_every", self.joint_reset_every, "must be >= 0")
        require(len(self.home_q_rad) == 7, "home_q_rad", self.home_q_rad, "must have 7 joints")
        require(0 < self.gripper_threshold <= 1, "gripper_threshold", self.gripper_threshold, "must be in (0, 1]")
        require(self.gripper_debounce_steps >= 0, "gripper_debounce_steps", self.gripper_debounce_steps,
                "must be >= 0")
        require(self.timing_window > 0, "timing_window", self.timing_window, "must be > 0")
        require(self.reset_retries >= 0, "reset_retries", self.reset_retries, "must be >= 0")
        require(self.scene_resets in SCENE_RESETS, "scene_resets", self.scene_resets, f"must be one of {SCENE_RESETS}")

    @property
    def faithful(self) -> bool:
        """True when every hardware-faithful setting (`FAITHFUL`) is in force."""
        return all(getattr(self, k) == v for k, v in FAITHFUL.items())

    @property
    def period_s(self) -> float:
        return 1.0 / self.control_hz


class RobotEnv(gymnasium.Env[dict[str, Any], np.ndarray]):
    """A gymnasium env over a `Robot` (+ `Cameras` in pixels mode) for a `Task`; see the module docstring.

    Attributes for experts / teleop: `robot`, `task`, `config`, `last_state` (the latest `RobotState`),
    `commanded_pose` ((pos, quat) of the current target), `reset_pose` ((pos, quat) of the nominal reset pose,
    known after the first reset), `safety_box`.
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 10}  # noqa: RUF012 - gymnasium's convention

    def __init__(
        self,
        robot: Robot,
        task: Task | str,
        cameras: Cameras | None = None,
        config: RobotEnvConfig | None = None,
        render_mode: str | None = None,
        owns_robot: bool = True,
    ) -> None:
        super().__init__()
        self.config = cfg = config or RobotEnvConfig()
        self.robot = robot
        self.task = get_task(task)
        self.owns_robot = owns_robot
        self.metadata = {"render_modes": ["rgb_array"] if cfg.obs_mode == "pixels" else [],
                         "render_fps": cfg.control_hz}
        if render_mode not in (None, "rgb_array"):
            raise RobotRLError(f"render_mode={render_mode!r}: only None and 'rgb_array' are supported")
        if render_mode is not None and cfg.obs_mode == "state":
            raise RobotRLError("render_mode='rgb_array' needs obs_mode='pixels' (state mode never renders)")
        self.render_mode = render_mode
        self.cameras: Cameras | None = None
        self._read_names: tuple[str, ...] = cfg.camera_names if cfg.obs_mode == "pixels" else cfg.reward_cameras
        """The cameras read each step: the observation's (pixels mode) or the reward cameras (state mode)."""
        if self._read_names:
            what = "obs_mode='pixels'" if cfg.obs_mode == "pixels" else "reward_cameras"
            if cameras is None:
                raise RobotRLError(f"{what} needs a Cameras object")
            missing = [n for n in self._read_names if n not in cameras.names]
            if missing:
                raise RobotRLError(f"{'reward ' * (cfg.obs_mode == 'state')}cameras {missing} not available; the "
                                   f"robot has {list(cameras.names)}")
            self.cameras = cameras

        obs_spaces: dict[str, spaces.Space[Any]] = {
            "state": spaces.Box(-np.inf, np.inf, (STATE_DIM,), np.float32),
        }
        if cfg.obs_mode == "pixels":
            hw3 = (cfg.image_size, cfg.image_size, 3)
            obs_spaces["images"] = spaces.Dict(
                {n: spaces.Box(0, 255, hw3, np.uint8) for n in cfg.camera_names}
            )
        elif cfg.object_obs:
            obs_spaces["object"] = spaces.Box(-np.inf, np.inf, (self.task.object_dim,), np.float32)
        self.observation_space = spaces.Dict(obs_spaces)
        self.action_space = spaces.Box(-1.0, 1.0, (7,), np.float32)
        self.max_episode_steps = cfg.max_episode_steps or self.task.max_episode_steps

        # set on the first reset
        self.reset_pose: tuple[np.ndarray, np.ndarray] | None = None
        self.safety_box: SafetyBox | None = None
        self.last_state: RobotState | None = None
        self._last_images: dict[str, np.ndarray] = {}
        self._reward_images: dict[str, np.ndarray] = {}
        self._cmd_pos = np.zeros(3)
        self._cmd_quat = np.array([1.0, 0.0, 0.0, 0.0])
        self._gripper_cmd = float(self.task.reset_gripper_closed)
        self._steps_since_gripper_change = 0
        self._episode_steps = 0
        self._episodes = 0
        self.scene_teleports = 0
        """How many times this env teleported the scene (`robot.reset_scene`)."""
        self.reset_retry_count = 0
        """How many reset moves had to be tried again (see `RobotEnvConfig.reset_retries`)."""
        self.reset_routine: tuple[ResetStep, ...] = routine_for(self.task.name)
        """The steps a reset without a teleport runs (envs.resets); replace it to change the routine."""
        check_routine(self.reset_routine, where=f"reset routine of task {self.task.name!r}")
        self._needs_reset = True
        self._closed = False
        # timing
        self._deadline = 0.0
        self._step_s: collections.deque[float] = collections.deque(maxlen=cfg.timing_window)
        self._wait_s: collections.deque[float] = collections.deque(maxlen=cfg.timing_window)
        self._jitter_s: collections.deque[float] = collections.deque(maxlen=cfg.timing_window)
        self._overruns = 0
        self._reset_s: collections.deque[float] = collections.deque(maxlen=1000)

    # ------------------------------------------------------------------------------------------------------
    # gymnasium API

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        t0 = time.perf_counter()
        super().reset(seed=seed)
        cfg, task, robot = self.config, self.task, self.robot
        rng = self.np_random
        scene_seed = int(rng.integers(0, 2**31 - 1))
        noise_pos = rng.uniform(-cfg.reset_noise_m, cfg.reset_noise_m, 3)
        noise_rot = rng.uniform(-cfg.reset_noise_rad, cfg.reset_noise_rad, 3)

        recovered = False
        if self.last_state is not None and self.last_state.error:
            recovered = self._clear_or_recover()
        robot.set_gains("precision")
        joint_reset = (
            recovered
            or self._episodes == 0
            or (cfg.joint_reset_every > 0 and self._episodes % cfg.joint_reset_every == 0)
            or (seed is not None and cfg.joint_reset_on_seed)
        )
        teleport = cfg.scene_resets == "every" or self.scene_teleports == 0
        if not teleport:  # the robot tidies up itself; the joint reset comes after (a held cube is put down first)
            # first hold where the hand IS: the policy's last target may be pressed into the table or an object,
            # and the stiffer reset gains would drag the hand there (and the cube with it)
            now = robot.state()
            self._cmd_pos, self._cmd_quat = np.array(now.pos_base_ee, np.float64), quat_normalize(now.quat_base_ee)
            if not now.error:
                robot.command(self._cmd_pos, self._cmd_quat, self._gripper_cmd)
            self._run_routine(self.reset_routine, rng)
        if joint_reset:
            robot.reset_joints(np.asarray(cfg.home_q_rad, np.float64))
        if self.reset_pose is None:
            self._init_reset_pose(robot.state())
        assert self.reset_pose is not None and self.safety_box is not None
        if teleport:
            robot.reset_scene(scene_seed)
            self.scene_teleports += 1

        pos0, quat0 = self.reset_pose
        target = clip_pose(self.safety_box, pos0 + noise_pos, quat_mul(axis_angle_to_quat(noise_rot), quat0))
        state, settled = self._settled_move(target[0], target[1], float(task.reset_gripper_closed), "the reset pose")
        robot.set_gains("compliance")

        self._cmd_pos, self._cmd_quat = target[0].copy(), target[1].copy()
        self._gripper_cmd = float(task.reset_gripper_closed)
        self._steps_since_gripper_change = cfg.gripper_debounce_steps
        self._episode_steps = 0
        self._episodes += 1
        self._needs_reset = False
        self.last_state = state
        obs = self._observe(state)
        self._deadline = time.perf_counter() + cfg.period_s
        self._reset_s.append(time.perf_counter() - t0)
        info = {
            "success": self.task.success(state) if self._has_objects(state) else False,
            "objects": state.objects,
            "reset_settled": settled,
            "joint_reset": joint_reset,
            "scene_seed": scene_seed,
            "scene_reset": teleport,
        }
        self._add_privileged_info(info, state)
        if self.config.reward_cameras:
            info[REWARD_IMAGES_INFO_KEY] = self._reward_images
        return obs, info

    def step(self, action: np.ndarray) -> tuple[dict[str, Any], float, bool, bool, dict[str, Any]]:
        t0 = time.perf_counter()
        if self._needs_reset:
            raise gymnasium.error.ResetNeeded("call reset() before step() (and after an episode ends)")
        assert self.safety_box is not None
        cfg = self.config
        a = np.asarray(action, dtype=np.float64)
        if a.shape != (7,):
            raise ShapeError(f"action: expected shape (7,), got {a.shape}")
        if not np.all(np.isfinite(a)):
            self.robot.command(self._cmd_pos, self._cmd_quat, self._gripper_cmd)  # hold the last safe target
            check_finite("action", a)
            raise SafetyError(f"non-finite action {a!r}")  # pragma: no cover - check_finite raises first
        a = np.clip(a, -1.0, 1.0)

        delta_pos = a[:3] * cfg.action_scale_m
        rotvec = a[3:6] * cfg.action_scale_rad
        want_pos = self._cmd_pos + delta_pos
        want_quat = quat_mul(axis_angle_to_quat(rotvec), self._cmd_quat)
        pos, quat = want_pos, want_quat
        # the per-step limit binds only if the config makes it tighter than the action range (by default
        # sqrt(3) * scale < limit, so a clipped action never exceeds it); skip the call when it cannot bind
        if (float(np.linalg.norm(delta_pos)) > cfg.max_step_translation_m
                or float(np.linalg.norm(rotvec)) > cfg.max_step_rotation_rad):
            pos, quat = limit_step(self._cmd_pos, self._cmd_quat, want_pos, want_quat,
                                   cfg.max_step_translation_m, cfg.max_step_rotation_rad)
        measured = self.last_state
        if measured is not None and (cfg.max_lead_m > 0 or cfg.max_lead_rad > 0):
            # an axis is "not following" when the previous target already led the arm by half the bound or more
            # along it and the arm moves slower than the stall speed (a start from rest is never held back)
            R = quat_to_mat(measured.quat_base_ee)
            twist = np.asarray(measured.twist_ee_body, np.float64)
            led = np.abs(self._cmd_pos - measured.pos_base_ee) >= 0.5 * cfg.max_lead_m
            stalled = led & (np.abs(R @ twist[:3]) < cfg.lead_stall_m_per_s)
            prev_angle = quat_angle(quat_mul(self._cmd_quat, quat_conj(measured.quat_base_ee)))
            held = prev_angle >= 0.5 * cfg.max_lead_rad and float(np.linalg.norm(twist[3:])) < cfg.lead_stall_rad_per_s
            pos, quat = bound_lead(pos, quat, measured.pos_base_ee, measured.quat_base_ee,
                                   np.where(stalled, cfg.max_lead_m, 0.0), cfg.max_lead_rad if held else 0.0)
        pos, quat = clip_pose(self.safety_box, pos, quat)
        # limit_step and clip_pose keep the quaternion's sign, so a plain comparison detects a change
        clipped = bool(np.max(np.abs(pos - want_pos)) > 1e-9 or np.max(np.abs(quat - want_quat)) > 1e-9)

        gripper_changed = self._update_gripper(float(a[6]))
        try:
            self.robot.command(pos, quat, self._gripper_cmd)
            command_error = None
        except RobotError as err:  # an error that arose since the last step (a reflex on hardware)
            command_error = err
        if command_error is None:
            self._cmd_pos, self._cmd_quat = pos, quat
            tw = time.perf_counter()
            jitter_s = self._wait_period()
            wait_s = time.perf_counter() - tw
        else:
            jitter_s = wait_s = 0.0

        state = self.robot.state()
        if command_error is not None and not state.error:
            raise command_error  # refused for another reason (stopped, e-stopped): not an episode's end
        self.last_state = state
        obs = self._observe(state)
        success = self.task.success(state) if self._has_objects(state) else False
        self._episode_steps += 1
        terminated = bool(success) and cfg.terminate_on_success and cfg.task_reward
        truncated = self._episode_steps >= self.max_episode_steps or bool(state.error)
        info: dict[str, Any] = {
            "success": bool(success),
            "objects": state.objects,
            "jitter_ms": 1e3 * jitter_s,
            "gripper_changed": gripper_changed,
            "clipped": clipped,
        }
        if state.error:
            info["robot_error"] = state.error
        self._add_privileged_info(info, state)
        if cfg.reward_cameras:
            info[REWARD_IMAGES_INFO_KEY] = self._reward_images
        ages = getattr(self.cameras, "frame_ages_s", None)  # real cameras report how old each frame was
        if callable(ages):
            info["frame_age_ms"] = {k: 1e3 * v for k, v in ages().items()}
        self._step_s.append(time.perf_counter() - t0)
        self._wait_s.append(wait_s)
        if terminated or truncated:
            self._needs_reset = True
            info["timing"] = self.timing_stats()
        reward = cfg.success_reward if success and cfg.task_reward else 0.0
        return obs, float(reward), terminated, truncated, info

    def render(self) -> np.ndarray | None:
        """The latest frame of the first camera (render_mode 'rgb_array'), else None."""
        if self.render_mode != "rgb_array" or not self._last_images:
            return None
        return self._last_images[self.config.camera_names[0]].copy()

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            if self.owns_robot:
                self.robot.stop()
        super().close()

    # ------------------------------------------------------------------------------------------------------
    # public helpers

    @property
    def commanded_pose(self) -> tuple[np.ndarray, np.ndarray]:
        """(pos (3,), quat (4,)) of the current impedance target (after the safety box)."""
        return self._cmd_pos.copy(), self._cmd_quat.copy()

    @property
    def gripper_command(self) -> float:
        """The current gripper command (0 open, 1 closed)."""
        return self._gripper_cmd

    @property
    def episode_steps(self) -> int:
        return self._episode_steps

    @property
    def reward_image_shapes(self) -> dict[str, tuple[int, int, int]]:
        """{camera: (H, W, 3)} of the frames in `info["reward_images"]` (state mode's `reward_cameras`; else {})."""
        hw3 = (self.config.image_size, self.config.image_size, 3)
        return {name: hw3 for name in self.config.reward_cameras}

    @property
    def faithful(self) -> bool:
        """True in the hardware-faithful mode (`RobotEnvConfig.faithful`): no privileged value in observations,
        rewards or terminations, no teleports after the first reset."""
        return self.config.faithful

    def timing_stats(self) -> dict[str, Any]:
        """Wall time per step (ms; mean/p50/p99 over the last `timing_window` steps), the share spent
        waiting for the period (`robot.wait` + sleep), jitter p50/p99/max (realtime only), overruns, and
        reset time."""
        step_ms = 1e3 * np.asarray(self._step_s) if self._step_s else np.zeros(1)
        wait_ms = 1e3 * np.asarray(self._wait_s) if self._wait_s else np.zeros(1)
        out: dict[str, Any] = {
            "steps": len(self._step_s),
            "realtime": self.config.realtime,
            "period_ms": 1e3 * self.config.period_s,
            "step_ms_mean": float(step_ms.mean()),
            "step_ms_p50": float(np.percentile(step_ms, 50)),
            "step_ms_p99": float(np.percentile(step_ms, 99)),
            "wait_ms_mean": float(wait_ms.mean()),
            "steps_per_s": float(1e3 / step_ms.mean()) if step_ms.mean() > 0 else 0.0,
            "reset_ms_mean": float(1e3 * np.mean(self._reset_s)) if self._reset_s else 0.0,
        }
        if self.config.realtime:
            jit = 1e3 * np.asarray(self._jitter_s) if self._jitter_s else np.zeros(1)
            out.update(jitter_ms_p50=float(np.percentile(jit, 50)), jitter_ms_p99=float(np.percentile(jit, 99)),
                       jitter_ms_max=float(jit.max()), overruns=self._overruns)
        return out

    # ------------------------------------------------------------------------------------------------------
    # internals

    def _init_reset_pose(self, home: RobotState) -> None:
        task = self.task
        quat = np.asarray(task.reset_quat_wxyz if task.reset_quat_wxyz is not None else home.quat_base_ee, float)
        quat = quat_normalize(quat)
        self.reset_pose = (np.asarray(task.reset_pos_m, np.float64), quat)
        self.safety_box = SafetyBox(
            pos_min_m=task.pos_min_m,
            pos_max_m=task.pos_max_m,
            nominal_quat_wxyz=(float(quat[0]), float(quat[1]), float(quat[2]), float(quat[3])),
            rot_min_rad=task.rot_min_rad,
            rot_max_rad=task.rot_max_rad,
        )
        self._reset_quat_conj = quat_conj(quat)

    def _move_to(self, pos: np.ndarray, quat: np.ndarray, gripper: float) -> tuple[RobotState, bool]:
        """Walk the reference to (pos, quat) at the reset speeds and wait until the TCP settles there."""
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

    def _clear_or_recover(self) -> bool:
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

    def _settled_move(self, pos: np.ndarray, quat: np.ndarray, gripper: float, what: str,
                      must_settle: bool = True) -> tuple[RobotState, bool]:
        """`_move_to`, tried 1 + `reset_retries` times (clearing a robot error in between) until it settles; then
        ResetError naming the target, how far off the TCP is and any robot error. `must_settle=False`: one try,
        its outcome returned."""
        cfg = self.config
        tries = 1 + cfg.reset_retries if must_settle else 1
        state, settled = self.robot.state(), False
        for i in range(tries):
            joint_reset = False
            if state.error:
                joint_reset = self._clear_or_recover()
            if i > 0:
                self.reset_retry_count += 1
                if cfg.joint_reset_before_retry and not joint_reset:
                    self.robot.reset_joints(np.asarray(cfg.home_q_rad, np.float64))
            state, settled = self._move_to(pos, quat, gripper)
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

    def _run_routine(self, steps: tuple[ResetStep, ...], rng: np.random.Generator) -> None:
        """Execute reset-routine steps (envs.resets) through the Robot seam, starting from the current target (`reset`
        sets it to the measured TCP pose first)."""
        assert self.safety_box is not None and self.reset_pose is not None
        robot = self.robot
        for st in steps:
            if st.op == "gains":
                robot.set_gains(st.profile)
            elif st.op in ("gripper", "wait"):
                if st.op == "gripper":
                    self._gripper_cmd = float(st.closed)
                robot.command(self._cmd_pos, self._cmd_quat, self._gripper_cmd)
                if st.wait_s > 0:
                    robot.wait(st.wait_s)
            elif st.op == "move":
                cur = np.asarray(robot.state().pos_base_ee, np.float64)
                if st.frame == "tcp":
                    want = cur + np.asarray(st.pos_m, np.float64)
                else:
                    want = np.array([cur[i] if v is None else float(v) for i, v in enumerate(st.pos_m)])
                want = want + rng.uniform(-1.0, 1.0, 3) * np.asarray(st.noise_m, np.float64)
                pos, quat = clip_pose(self.safety_box, want,
                                      self.reset_pose[1] if st.orientation == "reset" else self._cmd_quat)
                self._settled_move(pos, quat, self._gripper_cmd, f"reset-routine target {np.round(pos, 3).tolist()}",
                                   must_settle=st.must_settle)
                self._cmd_pos, self._cmd_quat = pos, quat
            elif st.op == "if_held":
                width = float(robot.state().gripper_width_m)
                lo, hi = st.held_width_m
                if self._gripper_cmd >= 0.5 and lo <= width <= hi:
                    self._run_routine(st.then, rng)

    def _add_privileged_info(self, info: dict[str, Any], state: RobotState) -> None:
        """The task's named goals into `info`; in the faithful mode the objects leave it. Without the task's object
        state (hardware, or a hardware task without objects) "success" is only a placeholder False: flagged
        with `SUCCESS_UNKNOWN_INFO_KEY`."""
        if not (self.task.object_keys and self._has_objects(state)):
            info[SUCCESS_UNKNOWN_INFO_KEY] = True
        if self._has_objects(state):
            goals = self.task.goals(state)
            if goals:
                info["goals"] = goals
        if not self.config.object_obs and not self.config.task_reward:
            info.pop("objects", None)

    def _update_gripper(self, g: float) -> bool:
        cfg = self.config
        self._steps_since_gripper_change += 1
        if self.task.gripper_locked:
            return False
        want = self._gripper_cmd
        if g >= cfg.gripper_threshold:
            want = 1.0
        elif g <= -cfg.gripper_threshold:
            want = 0.0
        if want != self._gripper_cmd and self._steps_since_gripper_change > cfg.gripper_debounce_steps:
            self._gripper_cmd = want
            self._steps_since_gripper_change = 0
            return True
        return False

    def _wait_period(self) -> float:
        """Let one control period pass; returns how late the deadline was met (realtime), else 0."""
        cfg = self.config
        if not cfg.realtime:
            self.robot.wait(cfg.period_s)
            return 0.0
        remaining = self._deadline - time.perf_counter()
        if remaining > 0:
            self.robot.wait(remaining)
        _sleep_until(self._deadline)
        now = time.perf_counter()
        late = now - self._deadline
        self._jitter_s.append(late)
        if late > cfg.period_s:  # missed a whole period: resynchronise instead of bursting to catch up
            self._overruns += 1
            self._deadline = now + cfg.period_s
        else:
            self._deadline += cfg.period_s
        return late

    def _has_objects(self, state: RobotState) -> bool:
        return all(k in state.objects for k in self.task.object_keys)

    def _observe(self, state: RobotState) -> dict[str, Any]:
        assert self.reset_pose is not None
        rel_pos = np.asarray(state.pos_base_ee, np.float64) - self.reset_pose[0]
        rel_euler = quat_to_euler_xyz(quat_mul(self._reset_quat_conj, state.quat_base_ee))
        proprio = np.concatenate([
            rel_pos, rel_euler, np.asarray(state.twist_ee_body, np.float64), [state.gripper_width_m],
            np.asarray(state.force_ee_n, np.float64), np.asarray(state.torque_ee_nm, np.float64),
        ]).astype(np.float32)
        obs: dict[str, Any] = {"state": proprio}
        if self.config.obs_mode == "state":
            if self._read_names:  # reward cameras: into info (step / reset), never into the observation
                self._reward_images = self._read_frames()
            if not self.config.object_obs:
                return obs
            obs["object"] = (self.task.object_obs(state, self.reset_pose[0]) if self._has_objects(state)
                             else np.zeros(self.task.object_dim, np.float32))
            return obs
        images = self._read_frames()
        self._last_images = images
        obs["images"] = images
        return obs

    def _read_frames(self) -> dict[str, np.ndarray]:
        """One uint8 (image_size, image_size, 3) frame per camera of `_read_names` (ShapeError otherwise)."""
        assert self.cameras is not None
        frames = self.cameras.read()
        hw3 = (self.config.image_size, self.config.image_size, 3)
        images = {}
        for name in self._read_names:
            img = np.asarray(frames[name])
            if img.shape != hw3 or img.dtype != np.uint8:
                raise ShapeError(f"camera '{name}': expected uint8 {hw3}, got {img.dtype} {img.shape}")
            images[name] = img
        return images


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


def _sleep_until(deadline: float) -> None:
    """Sleep to `deadline` (perf_counter seconds): coarse sleep, then a short spin for the last ~1 ms."""
    while True:
        remaining = deadline - time.perf_counter()
        if remaining <= 0:
            return
        if remaining > 0.002:
            time.sleep(remaining - 0.001)
        else:
            time.sleep(0)


def make_twin_env(
    task: str,
    obs_mode: str = "pixels",
    image_size: int = 128,
    camera_names: tuple[str, ...] | list[str] = ("front", "wrist"),
    render_mode: str | None = None,
    physics_hz: float | None = None,
    faithful: bool = False,
    cube_start: str = "zone",
    **config: Any,
) -> RobotEnv:
    """Gymnasium entry point: a `RobotEnv` over an in-process MuJoCo `TwinRobot` for a built-in task.

    `config` takes any other `RobotEnvConfig` field (e.g. max_episode_steps=50, reset_noise_m=0.0).
    `faithful`: the hardware-faithful mode (`FAITHFUL` under any field given explicitly in `config`).
    `physics_hz` overrides the twin's physics/controller rate (None: TwinRobotConfig's default, 1 kHz).
    `cube_start` ("zone" | "tray", cube-relocate only): TwinRobotConfig.cube_start, where scene resets put the cube.
    In state mode the twin is built without a renderer, unless `reward_cameras` (a config field) names cameras: then
    it renders just those, at `image_size` (ConfigError for a camera the twin does not have).
    """
    from robot_rl.extras import optional_import

    optional_import("mujoco", extra="sim", purpose="the MuJoCo twin")
    from envs.twin import TwinRobot, TwinRobotConfig

    the_task = get_task(task)
    if faithful:
        config = {**FAITHFUL, **config}
    cfg = RobotEnvConfig(obs_mode=obs_mode, image_size=int(image_size), camera_names=tuple(camera_names), **config)
    pixels = cfg.obs_mode == "pixels"
    render = pixels or bool(cfg.reward_cameras)  # state mode: a renderer only for the reward cameras
    if cfg.reward_cameras:
        from envs.twin.model import CAMERA_NAMES

        missing = [n for n in cfg.reward_cameras if n not in CAMERA_NAMES]
        if missing:
            raise ConfigError(f"reward_cameras: the twin has no camera {missing[0]!r}; it has {list(CAMERA_NAMES)}")
    twin_options: dict[str, Any] = {} if physics_hz is None else {"physics_hz": float(physics_hz)}
    robot = TwinRobot(TwinRobotConfig(
        task=the_task.twin_task,
        image_height=cfg.image_size,
        image_width=cfg.image_size,
        camera_names=cfg.camera_names if pixels or not render else cfg.reward_cameras,
        render=render,
        cube_start=cube_start,
        **twin_options,
    ))
    return RobotEnv(robot, the_task, robot.cameras() if render else None, cfg, render_mode=render_mode)
