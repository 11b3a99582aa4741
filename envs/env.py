"""`RobotEnv`: the gymnasium env over any `Robot` + `Task` (+ `Cameras`), SERL FrankaEnv style.

Observation (a Dict):
- "state": float32 (19,) proprio = TCP position relative to the task's reset pose (3, base-frame axes),
  euler xyz of R_reset^T R (3), TCP body twist (6), gripper width (1), wrist force (3) and torque (3).
  "Reset pose" is the task's nominal reset pose (without the per-episode noise), so the noise is visible.
- pixels mode: "images": Dict{camera: uint8 (H, W, 3)} for every name in `camera_names`.
- "last_action": float32 (7,), the previous step's executed action (zeros after a reset), with `last_action_obs`.
- state mode: "object": float32 (k,) privileged task state (`Task.object_obs`, positions relative to the
  reset pose), unless `object_obs` is False. Nothing is rendered in state mode, except the `reward_cameras`.

Reward cameras (`reward_cameras`): a reward classifier reads camera frames the policy does not observe: a state
policy's (a real arm's learned reward), or in pixels mode a camera beside the observation's (a separate view for the
classifier). Each reset and step reads those cameras (the same `Cameras` seam and, on the twin, the same renderer as
the observation's, at `image_size`) and puts the frames into
`info["reward_images"]` = {camera: uint8 (image_size, image_size, 3)}; they are never in the observation, so they
never reach a replay buffer or the wire. `reward_image_shapes` says what is rendered.

Action: Box [-1, 1]^7 = delta xyz * `action_scale_m`, rotation vector * `action_scale_rad` (base frame,
applied on the left: q_new = exp(a) q), gripper (>= +threshold: close, <= -threshold: open, in between: keep;
a change needs `gripper_debounce_steps` steps since the last one; a task with `gripper_locked` keeps its reset
command and ignores this dim). The delta is applied to the current
*commanded* pose, then limited per step (controllers.safety.limit_step), then kept within a bounded lead of
the *measured* pose (`max_lead_m` per axis, `max_lead_rad` in angle; why: envs.motion's "Bounded lead") and
clipped to the task's safety box (controllers.safety.clip_pose): `envs.motion.step_target`.

Reward 1.0 on success (sparse), `terminated` on success, `truncated` at `max_episode_steps` or on a robot
error (reported in the state, or a RobotError from `command` while the state reports an error: a guard's trip, a
reflex that arose since the last step; the next reset clears it; `robot_error_ends="failure"` reports it as
`terminated` with reward 0 instead). `info` always has "success", "objects"
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
episode starts from a wrong pose); `reset_retry_count` counts the retries (the moves: envs.motion.ResetMover).
With `scene_resets = "first"` the scene is teleported (`reset_scene`) only on the env's first reset; every later
reset runs the task's reset routine through the Robot seam instead (envs.resets: e.g. pick-cube puts a held cube
back at a random spot of its start region), then the joint reset when due, then the move to the reset pose.
`scene_teleports` counts the `reset_scene` calls; `info["scene_reset"]` says whether this reset made one. A robot
error that stops the routine (a trip: a cube pressed onto the table) is recovered and counted (`routine_errors`).
`reset(options={"scene_reset": True})` asks for one on this reset whatever `scene_resets` says: the scene a person
restores (robot_rl.scene_resets.OperatorSceneResets asks after failed episodes in a row). On the twin it is
the teleport that stands in for the person; on hardware `reset_scene` is a no-op: the person must have restored the
scene before this reset (`robot-rl actor --operator-reset-after K` waits for them).

Hardware-faithful mode (`FAITHFUL`, `make_twin_env(faithful=True)`): `object_obs=False` (proprio + cameras only),
`task_reward=False` (reward 0 and no termination from `Task.success`: a learned classifier or a human decides;
the true success stays in `info["success"]` and "goals" for evaluation and metrics, never in the reward or the
observation), `scene_resets="first"`; "objects" is left out of `info`. The learner then gets only what a real arm
gives.

Timing (envs.env_timing): the env owns the control loop. Not realtime (the twin): `robot.wait(period)` simulates
one period. Realtime (hardware): the env asks the robot to let the rest of the period pass and then sleeps to the
deadline, measuring how late each step's deadline was (jitter); `timing_stats()` reports step wall times and
jitter p50/p99. Simulated hardware timing (the twin; `camera_latency_ms`, `action_delay_ms`, on by default in the
faithful mode: envs.env_config.FAITHFUL_TIMING): the frames a step returns were rendered that long before its end, and
the robot's target changes that long after the action (envs.env_timing.SimulatedTiming; `info["frame_age_ms"]` then
reports the simulated age). Proprio stays current (a real arm's state arrives within a millisecond).

Options: `envs.env_config.RobotEnvConfig` (also exported here, with FAITHFUL and STATE_DIM).

Usage::

    env = RobotEnv(robot, get_task("pick_cube"), cameras, RobotEnvConfig(obs_mode="pixels"))
    obs, info = env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
    env.timing_stats()["step_ms_p50"]
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from controllers.safety import SafetyBox, check_finite, clip_pose
from controllers.transforms import (
    axis_angle_to_quat,
    quat_conj,
    quat_mul,
    quat_normalize,
    quat_to_euler_xyz,
)
from envs.env_config import (
    FAITHFUL,
    FAITHFUL_TIMING,
    OBS_MODES,
    PANDA_HOME_Q_RAD,
    SCENE_RESETS,
    STATE_DIM,
    RobotEnvConfig,
)
from envs.env_timing import ControlClock, SimulatedTiming
from envs.motion import ResetMover, step_target
from envs.resets import ResetStep, check_routine, routine_for
from envs.robot import Cameras, Robot, RobotState
from envs.tasks import Task, get_task
from robot_rl.errors import ConfigError, MissingExtraError, RobotError, RobotRLError, SafetyError, ShapeError
from robot_rl.extras import install_hint
from robot_rl.reward_source import POLICY_CAMERAS, REWARD_IMAGES_INFO_KEY, SUCCESS_UNKNOWN_INFO_KEY

__all__ = ["FAITHFUL", "OBS_MODES", "PANDA_HOME_Q_RAD", "SCENE_RESETS", "STATE_DIM", "RobotEnv", "RobotEnvConfig",
           "make_twin_env"]

try:
    import gymnasium
    from gymnasium import spaces
except ImportError as _err:  # pragma: no cover - exercised only without the sim extra
    raise MissingExtraError(
        f"the optional package 'gymnasium' (needed for the robot envs) is not installed ({_err}); "
        f"install it with: {install_hint('sim')}"
    ) from _err


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
        self._read_names: tuple[str, ...] = (cfg.camera_names if cfg.obs_mode == "pixels" else ()) + cfg.reward_cameras
        """The cameras read each step: the observation's (pixels mode), then the reward cameras."""
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
        if cfg.last_action_obs:
            obs_spaces["last_action"] = spaces.Box(-1.0, 1.0, (7,), np.float32)
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
        self._last_action = np.zeros(7, np.float32)
        self._steps_since_gripper_change = 0
        self._episode_steps = 0
        self._episodes = 0
        self.scene_teleports = 0
        """How many times this env teleported the scene (`robot.reset_scene`)."""
        self.routine_errors = 0
        """Reset routines a robot error stopped (recovered: clear_errors or a joint reset, then the joint reset)."""
        self._mover = ResetMover(robot, cfg)
        self.reset_routine: tuple[ResetStep, ...] = routine_for(self.task.reset_routine)
        """The steps a reset without a teleport runs (envs.resets); replace it to change the routine."""
        check_routine(self.reset_routine, where=f"reset routine of task {self.task.name!r}")
        self._needs_reset = True
        self._closed = False
        self._clock = ControlClock(robot, cfg)
        self._timing = SimulatedTiming(cfg) if cfg.simulated_timing else None

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
        # the last step's error or one since (also a robot still stopped when this env connects: a restarted actor)
        if (self.last_state is not None and self.last_state.error) or robot.state().error:
            recovered = self._mover.clear_or_recover()
        robot.set_gains("precision")
        joint_reset = (
            recovered
            or self._episodes == 0
            or (cfg.joint_reset_every > 0 and self._episodes % cfg.joint_reset_every == 0)
            or (seed is not None and cfg.joint_reset_on_seed)
        )
        requested = bool((options or {}).get("scene_reset", False))  # a person restored the scene (module doc)
        teleport = cfg.scene_resets == "every" or self.scene_teleports == 0 or requested
        if not teleport:  # the robot tidies up itself; the joint reset comes after (a held cube is put down first)
            # first hold where the hand IS: the policy's last target may be pressed into the table or an object,
            # and the stiffer reset gains would drag the hand there (and the cube with it)
            now = robot.state()
            self._cmd_pos, self._cmd_quat = np.array(now.pos_base_ee, np.float64), quat_normalize(now.quat_base_ee)
            if not now.error:
                robot.command(self._cmd_pos, self._cmd_quat, self._gripper_cmd)
            try:
                self._run_routine(self.reset_routine, rng)
            except RobotError:  # a trip in the tidy-up (a cube pressed onto the table): recover, then home
                self.routine_errors += 1
                self._mover.clear_or_recover()
                joint_reset = True
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
        state, settled = self._mover.settled_move(target[0], target[1], float(task.reset_gripper_closed),
                                                  "the reset pose")
        robot.set_gains(self.config.gains_profile)

        self._cmd_pos, self._cmd_quat = target[0].copy(), target[1].copy()
        self._gripper_cmd = float(task.reset_gripper_closed)
        self._steps_since_gripper_change = cfg.gripper_debounce_steps
        self._episode_steps = 0
        self._episodes += 1
        self._needs_reset = False
        self._last_action = np.zeros(7, np.float32)
        self.last_state = state
        if self._timing is not None:
            self._timing.reset(self._read_frames if self._read_names else None)
        obs = self._observe(state)
        self._clock.start()
        self._clock.record_reset(time.perf_counter() - t0)
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
        self._last_action = a.astype(np.float32)
        pos, quat, clipped = step_target(cfg, a, self._cmd_pos, self._cmd_quat, self.last_state, self.safety_box)

        gripper_changed = self._update_gripper(float(a[6]))
        if self._timing is not None:  # the twin's simulated action delay and camera latency
            command_error, jitter_s, wait_s = self._simulated_period(pos, quat)
        else:
            command_error, jitter_s, wait_s = self._command_and_wait(pos, quat)

        state = self.robot.state()
        if command_error is not None and not state.error:
            raise command_error  # refused for another reason (stopped, e-stopped): not an episode's end
        self.last_state = state
        obs = self._observe(state)
        success = self.task.success(state) if self._has_objects(state) else False
        self._episode_steps += 1
        terminated = bool(success) and cfg.terminate_on_success and cfg.task_reward
        failed = bool(state.error) and cfg.robot_error_ends == "failure"  # a trip or reflex: no bootstrap past it
        terminated = terminated or failed
        truncated = not failed and (self._episode_steps >= self.max_episode_steps or bool(state.error))
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
        elif self._timing is not None and self._read_names:
            info["frame_age_ms"] = dict.fromkeys(self._read_names, cfg.camera_latency_ms)
        self._clock.record_step(time.perf_counter() - t0, wait_s)
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
    def reset_retry_count(self) -> int:
        """How many reset moves had to be tried again (see `RobotEnvConfig.reset_retries`)."""
        return self._mover.retries

    @property
    def reward_image_shapes(self) -> dict[str, tuple[int, int, int]]:
        """{camera: (H, W, 3)} of the frames in `info["reward_images"]` (the `reward_cameras`; else {})."""
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
        reset time (envs.env_timing.ControlClock.stats)."""
        return self._clock.stats()

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
                what = f"reset-routine target {np.round(pos, 3).tolist()}"
                self._mover.settled_move(pos, quat, self._gripper_cmd, what, must_settle=st.must_settle)
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

    def _command_and_wait(self, pos: np.ndarray, quat: np.ndarray) -> tuple[RobotError | None, float, float]:
        """Send the new target, then let one period pass: (the RobotError `command` raised (a reflex that arose since
        the last step; then no wait), jitter (s), wait time (s))."""
        try:
            self.robot.command(pos, quat, self._gripper_cmd)
        except RobotError as err:
            return err, 0.0, 0.0
        self._cmd_pos, self._cmd_quat = pos, quat
        tw = time.perf_counter()
        jitter_s = self._clock.wait_period()
        return None, jitter_s, time.perf_counter() - tw

    def _simulated_period(self, pos: np.ndarray, quat: np.ndarray) -> tuple[RobotError | None, float, float]:
        """`_command_and_wait` with the simulated action delay and camera latency (envs.env_timing.SimulatedTiming):
        the target joins the queue (the policy's chain continues from it), the due one goes to the robot."""
        assert self._timing is not None
        tw = time.perf_counter()
        err = self._timing.period(self.robot, (pos, quat, self._gripper_cmd),
                                  self._read_frames if self._read_names else None)
        if err is None:
            self._cmd_pos, self._cmd_quat = pos, quat
        return err, 0.0, time.perf_counter() - tw

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
        if self.config.last_action_obs:
            obs["last_action"] = self._last_action.copy()
        frames = self._frames() if self._read_names else {}
        self._reward_images = {n: frames[n] for n in self.config.reward_cameras}  # into info, never into obs
        if self.config.obs_mode == "state":
            if not self.config.object_obs:
                return obs
            obs["object"] = (self.task.object_obs(state, self.reset_pose[0]) if self._has_objects(state)
                             else np.zeros(self.task.object_dim, np.float32))
            return obs
        self._last_images = obs["images"] = {n: frames[n] for n in self.config.camera_names}
        return obs

    def _frames(self) -> dict[str, np.ndarray]:
        """The frames a step returns: rendered now, or `camera_latency_ms` ago (SimulatedTiming's history)."""
        return self._timing.frames() if self._timing is not None else self._read_frames()

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


def make_twin_env(
    task: str,
    obs_mode: str = "pixels",
    image_size: int = 128,
    camera_names: tuple[str, ...] | list[str] = POLICY_CAMERAS,
    render_mode: str | None = None,
    physics_hz: float | None = None,
    faithful: bool = False,
    cube_start: str = "zone",
    task_fields: tuple[tuple[str, Any], ...] = (),
    **config: Any,
) -> RobotEnv:
    """Gymnasium entry point: a `RobotEnv` over an in-process MuJoCo `TwinRobot` for a built-in task.

    `config` takes any other `RobotEnvConfig` field (e.g. max_episode_steps=50, reset_noise_m=0.0).
    `faithful`: the hardware-faithful mode (`FAITHFUL` and the simulated timing `FAITHFUL_TIMING` under any field
    given explicitly in `config`).
    `physics_hz` overrides the twin's physics/controller rate (None: TwinRobotConfig's default, 1 kHz).
    `cube_start` ("zone" | "tray", cube-relocate only): TwinRobotConfig.cube_start, where scene resets put the cube.
    In state mode the twin is built without a renderer, unless `reward_cameras` (a config field) names cameras: then
    it renders just those, at `image_size` (ConfigError for a camera the twin does not have, envs.twin.CAMERA_NAMES);
    in pixels mode it renders `camera_names`, then the reward cameras.
    `task_fields`: Task field values of a lab's task file that extends the twin preset (robot_rl.presets.preset_of).
    """
    from robot_rl.extras import optional_import

    optional_import("mujoco", extra="sim", purpose="the MuJoCo twin")
    from envs.task_file import with_task_fields
    from envs.twin import TwinRobot, TwinRobotConfig

    the_task = with_task_fields(get_task(task), dict(task_fields), where="task_fields")
    if faithful:
        config = {**FAITHFUL, **FAITHFUL_TIMING, **config}
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
        camera_names=(cfg.camera_names if pixels or not render else ()) + cfg.reward_cameras,
        render=render,
        cube_start=cube_start,
        **twin_options,
    ))
    return RobotEnv(robot, the_task, robot.cameras() if render else None, cfg, render_mode=render_mode)
