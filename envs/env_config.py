"""`RobotEnvConfig`: the options of `envs.env.RobotEnv` (one frozen dataclass, validated), the hardware-faithful
settings (`FAITHFUL`) and the env's fixed sizes. The env's behaviour (observation, action, bounded lead, reset,
timing) is described in envs.env; the moves it makes in envs.motion.

Usage::

    cfg = RobotEnvConfig(obs_mode="state", max_episode_steps=50, reset_noise_m=0.0)
    cfg = RobotEnvConfig(**FAITHFUL)          # hardware-faithful: proprio + cameras only, no task reward
    cfg.faithful, cfg.period_s
    cfg = RobotEnvConfig(**FAITHFUL, **FAITHFUL_TIMING)   # ... with simulated camera latency and action delay
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from controllers.gains import GAIN_PROFILES
from robot_rl.config import Config, require
from robot_rl.reward_source import POLICY_CAMERAS
from robot_rl.timing import FAITHFUL_TIMING, MAX_SIMULATED_DELAY_MS, timing_overrides

__all__ = ["FAITHFUL", "FAITHFUL_TIMING", "MAX_SIMULATED_DELAY_MS", "OBS_MODES", "PANDA_HOME_Q_RAD", "SCENE_RESETS",
           "STATE_DIM", "RobotEnvConfig", "timing_overrides"]

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
    camera_names: tuple[str, ...] = POLICY_CAMERAS
    """Cameras in the observation (pixels mode)."""
    reward_cameras: tuple[str, ...] = ()
    """Cameras read every reset and step for a reward model only, their frames put into `info["reward_images"]`
    {camera: uint8 (image_size, image_size, 3)}, never into the observation (see envs.env's docstring). State mode:
    empty renders nothing; pixels mode: cameras beside `camera_names` (none of them), e.g. a separate camera for the
    classifier as HIL-SERL uses. `--reward classifier:DIR` sets it from the card's cameras the policy lacks."""
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
    gains_profile: str = "compliance"
    """The impedance gains profile an episode runs with (controllers.gains.GAIN_PROFILES; resets run "precision")."""
    success_reward: float = 1.0
    """Reward on a success step (0 otherwise)."""
    terminate_on_success: bool = True
    """End the episode (`terminated`) on success. False keeps going (success-label recording, near misses)."""
    robot_error_ends: str = "truncation"
    """How an episode that a robot error ends (a safety guard's trip, a reflex) is reported: "truncation" =
    `truncated` (the value is bootstrapped as if the episode could go on), "failure" = `terminated` with reward 0
    (learning takes the state for a dead end). Either way info["robot_error"] says why. One `robot-rl sim --task
    twin-pick-cube` run with "failure" (about half its training episodes end on the guard's 60 N force limit as the
    fingers strike the table) ended 9 / 20 in its final evaluation where two runs with "truncation" ended 20 / 20:
    a terminal zero at every strike taught caution, not a gentler descent, within 10k env steps."""
    timing_window: int = 10_000
    """How many recent steps `timing_stats()` summarises."""
    camera_latency_ms: float = 0.0
    """Simulated camera latency (twin only; ms): the frames a step returns were rendered this long before the step
    ends (a frame history; envs.env_timing.SimulatedTiming). 0: the frame rendered at the step's end. Hardware
    (`realtime`) refuses it: real cameras have their own latency (`info["frame_age_ms"]` reports it)."""
    action_delay_ms: float = 0.0
    """Simulated action delay (twin only; ms): the robot's target changes this long after the step's action (the
    commands wait in a queue); 0: at once. Hardware refuses it, as camera_latency_ms."""

    last_action_obs: bool = False
    """Add "last_action": float32 (7,), the action the previous step executed (clipped to [-1, 1]; zeros after a
    reset; under an intervention the operator's), to the observation. With a late camera or a late arm the frames
    show where the arm was, not where the last command sends it; the last action restores what the frames lag
    (a delayed decision problem is Markov again in the observation plus the actions since: Katsikopoulos and
    Engelbrecht 2003). A real arm has it too (task file: observation.last_action); the policy reads it when the
    state selection names it ("last_action")."""

    def validate(self) -> None:
        require(self.control_hz > 0 and math.isfinite(self.control_hz), "control_hz", self.control_hz, "must be > 0")
        require(self.max_episode_steps >= 0, "max_episode_steps", self.max_episode_steps, "must be >= 0")
        for name in ("action_scale_m", "action_scale_rad", "max_step_translation_m", "max_step_rotation_rad",
                     "reset_speed_m_per_s", "reset_speed_rad_per_s", "reset_tolerance_m", "reset_tolerance_rad",
                     "reset_settle_speed_m_per_s", "reset_timeout_s"):
            v = getattr(self, name)
            require(v > 0 and math.isfinite(v), name, v, "must be finite and > 0")
        require(self.robot_error_ends in ("failure", "truncation"), "robot_error_ends", self.robot_error_ends,
                "must be 'failure' or 'truncation'")
        require(self.obs_mode in OBS_MODES, "obs_mode", self.obs_mode, f"must be one of {OBS_MODES}")
        require(8 <= self.image_size <= 1024, "image_size", self.image_size, "must be in [8, 1024]")
        require(len(self.camera_names) > 0 or self.obs_mode == "state", "camera_names", self.camera_names,
                "must name at least one camera in pixels mode")
        require(len(set(self.camera_names)) == len(self.camera_names), "camera_names", self.camera_names,
                "must be unique")
        require(len(set(self.reward_cameras)) == len(self.reward_cameras), "reward_cameras", self.reward_cameras,
                "must be unique")
        require(self.obs_mode == "state" or not set(self.reward_cameras) & set(self.camera_names), "reward_cameras",
                self.reward_cameras, "must not repeat camera_names (a reward model reads the observation's cameras)")
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
        for name in ("camera_latency_ms", "action_delay_ms"):
            v = getattr(self, name)
            require(math.isfinite(v) and 0 <= v <= MAX_SIMULATED_DELAY_MS, name, v,
                    f"must be finite and in [0, {MAX_SIMULATED_DELAY_MS:g}] ms")
            require(v == 0 or not self.realtime, name, v, "simulates hardware timing on the twin; a realtime "
                    "(hardware) env has its own latency: leave it 0 there")
        require(self.gains_profile in GAIN_PROFILES, "gains_profile", self.gains_profile,
                f"must be one of {sorted(GAIN_PROFILES)}")
        require(self.scene_resets in SCENE_RESETS, "scene_resets", self.scene_resets, f"must be one of {SCENE_RESETS}")

    @property
    def faithful(self) -> bool:
        """True when every hardware-faithful setting (`FAITHFUL`) is in force."""
        return all(getattr(self, k) == v for k, v in FAITHFUL.items())

    @property
    def simulated_timing(self) -> bool:
        """True when a camera latency or action delay is simulated (envs.env_timing.SimulatedTiming)."""
        return self.camera_latency_ms > 0 or self.action_delay_ms > 0

    @property
    def period_s(self) -> float:
        return 1.0 / self.control_hz
