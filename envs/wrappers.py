"""Env wrappers for human-in-the-loop RL (SERL / HIL-SERL): relative frame, interventions, gripper penalty.

All three are `gymnasium.Wrapper`s over a `RobotEnv` (possibly already wrapped, e.g. by `gymnasium.make`); none
changes the observation or action spaces, and nothing here is registered with gymnasium.

- `RelativeFrameWrapper`: the policy's translation / rotation deltas are in the current TCP frame; the wrapper
  rotates them into the base frame the env expects. `info["base_frame_action"]` is what the env executed.
- `InterventionWrapper`: polls a human (or scripted) device every step; while it is active (plus a sticky
  window after its last input) its action replaces the policy's. `info["intervention"]`,
  `info["intervene_action"]` (in the policy's frame, ready for the replay buffer), `info["events"]`, and at
  the end of an episode `info["intervention_rate"]`.
- `GripperPenaltyWrapper`: `info["grasp_penalty"]` = penalty on every step that flips the gripper command.

Recommended stack (outermost first)::

    env = make_env("twin-pick-cube", obs_mode="state")
    env = RelativeFrameWrapper(env)                     # policy actions in the TCP frame
    env = GripperPenaltyWrapper(env)                    # HIL-SERL's -0.02 per flip
    env = InterventionWrapper(env, device, InterventionConfig(sticky_s=0.5))   # outermost

The InterventionWrapper must be outside the RelativeFrameWrapper (the human commands in the base frame and the
intervention wrapper converts that into the policy's frame through the wrappers below it); the other order is
refused with a `ConfigError`. Keep the InterventionWrapper outside any TimeLimit so it sees episode ends.

Devices implement the one device interface, `envs.devices.HumanDevice` (poll -> `HumanCommand`): demos' teleop
devices (`demos.devices.teleop.make_device(...)`) and `envs.twin.scripted_human.ScriptedHuman` both fit, without
envs importing demos.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from controllers.transforms import quat_to_mat
from envs.devices import HumanDevice
from envs.robot import RobotState
from robot_rl.config import Config, require
from robot_rl.errors import ConfigError, MissingExtraError, RobotRLError, SafetyError, ShapeError
from robot_rl.extras import install_hint

try:
    import gymnasium
except ImportError as _err:  # pragma: no cover - exercised only without the sim extra
    raise MissingExtraError(
        f"the optional package 'gymnasium' (needed for the env wrappers) is not installed ({_err}); "
        f"install it with: {install_hint('sim')}"
    ) from _err

ACTION_DIM = 7
"""RobotEnv actions: delta xyz (3), rotation vector (3), gripper (1), each in [-1, 1]."""


# ---------------------------------------------------------------------------------------------------------
# pure cores: action frame conversions


def _fit_box(v: np.ndarray) -> np.ndarray:
    """`v` scaled down uniformly (direction kept) so every component is in [-1, 1]; unchanged if it fits."""
    m = float(np.max(np.abs(v)))
    return v / m if m > 1.0 else v


def tcp_to_base_action(action: np.ndarray, quat_base_ee: np.ndarray) -> np.ndarray:
    """A TCP-frame action (7,) -> the base-frame action (7,) float64 for a TCP at orientation `quat_base_ee`.

    The action is clipped to [-1, 1] (as the env would), its translation and rotation-vector parts are rotated
    by R_base_ee, and each part is scaled down uniformly if a component left [-1, 1] (a rotated box corner can
    reach sqrt(3)): the direction of the commanded motion is kept, the env never clips it. The gripper passes.
    Non-finite actions pass through unchanged (the env refuses them with a SafetyError, holding the pose).
    """
    a = np.asarray(action, np.float64)
    if a.shape != (ACTION_DIM,):
        raise ShapeError(f"action: expected shape ({ACTION_DIM},), got {a.shape}")
    if not np.all(np.isfinite(a)):
        return a.copy()
    a = np.clip(a, -1.0, 1.0)
    R = quat_to_mat(quat_base_ee)
    out = a.copy()
    out[:3] = _fit_box(R @ a[:3])
    out[3:6] = _fit_box(R @ a[3:6])
    return out


def base_to_tcp_action(action: np.ndarray, quat_base_ee: np.ndarray) -> np.ndarray:
    """A base-frame action (7,) -> the TCP-frame action (7,) float64 (rotated by R_base_ee^T, each part scaled
    down uniformly to fit [-1, 1]). `tcp_to_base_action` of the result is `s * action` per part with
    s in [1/sqrt(3), 1] (exactly `action` when the rotated part fits), and feeding that back is a fixed point."""
    a = np.asarray(action, np.float64)
    if a.shape != (ACTION_DIM,):
        raise ShapeError(f"action: expected shape ({ACTION_DIM},), got {a.shape}")
    if not np.all(np.isfinite(a)):
        return a.copy()
    a = np.clip(a, -1.0, 1.0)
    Rt = quat_to_mat(quat_base_ee).T
    out = a.copy()
    out[:3] = _fit_box(Rt @ a[:3])
    out[3:6] = _fit_box(Rt @ a[3:6])
    return out


def _robot_state(env: gymnasium.Env[Any, Any]) -> RobotState:
    """The latest RobotState of the RobotEnv under `env` (a clear error if there is none yet / no RobotEnv)."""
    base = env.unwrapped
    if not hasattr(base, "last_state"):
        raise RobotRLError(f"{type(base).__name__} has no `last_state`: these wrappers need a RobotEnv underneath")
    state: RobotState | None = base.last_state
    if state is None:
        raise RobotRLError("no robot state yet: call reset() first")
    return state


def _inner_wrappers(env: gymnasium.Env[Any, Any]) -> list[gymnasium.Wrapper[Any, Any, Any, Any]]:
    """`env` and every wrapper below it, outermost first (the unwrapped env excluded)."""
    chain: list[gymnasium.Wrapper[Any, Any, Any, Any]] = []
    while isinstance(env, gymnasium.Wrapper):
        chain.append(env)
        env = env.env
    return chain


def _check_action_space(env: gymnasium.Env[Any, Any], who: str) -> None:
    space = env.action_space
    if not isinstance(space, gymnasium.spaces.Box) or space.shape != (ACTION_DIM,):
        raise ConfigError(f"{who} needs a Box({ACTION_DIM},) action space (a RobotEnv), got {space}")


# ---------------------------------------------------------------------------------------------------------
# relative frame


@dataclasses.dataclass(frozen=True)
class RelativeFrameConfig(Config):
    """Options of `RelativeFrameWrapper`."""

    obs_in_reset_frame: bool = False
    """Also express the observation's relative position (obs["state"][:3], base axes in RobotEnv) in the frame
    of the task's nominal reset pose: R_reset^T (p - p_reset). The orientation part (obs["state"][3:6]) is
    already relative to the reset pose, twist and wrench are already in the TCP frame; obs["object"] is left
    alone (base axes)."""


class RelativeFrameWrapper(gymnasium.Wrapper[dict[str, Any], np.ndarray, dict[str, Any], np.ndarray]):
    """SERL's relative frame: the policy acts in the current TCP frame.

    Each step, the action's translation and rotation-vector parts are rotated from the TCP frame into the base
    frame with the measured TCP orientation (`env.unwrapped.last_state.quat_base_ee`, the state the policy
    saw); see `tcp_to_base_action` for clipping/scaling. So a +x action moves along the gripper's own x axis
    and a rotation about +z turns about the gripper's approach axis, wherever the hand points.
    `info["base_frame_action"]` (7,) float32 is the action the env executed.

    Usage::

        env = RelativeFrameWrapper(make_env("twin-reach", obs_mode="state"))
        obs, info = env.reset(seed=0)
        obs, r, term, trunc, info = env.step(np.array([1, 0, 0, 0, 0, 0, -1], np.float32))  # along TCP x
        info["base_frame_action"]

    For other wrappers: `policy_to_base(action)` / `base_to_policy(action)` convert at the current state
    (`InterventionWrapper` uses them to put a human's base-frame command into the policy's frame).
    """

    def __init__(self, env: gymnasium.Env[dict[str, Any], np.ndarray], config: RelativeFrameConfig | None = None):
        super().__init__(env)
        self.config = config or RelativeFrameConfig()
        _check_action_space(env, "RelativeFrameWrapper")
        for inner in _inner_wrappers(env):
            if isinstance(inner, InterventionWrapper):
                raise ConfigError("RelativeFrameWrapper must be inside the InterventionWrapper "
                                  "(InterventionWrapper(RelativeFrameWrapper(env), device)), not around it")

    def policy_to_base(self, action: np.ndarray) -> np.ndarray:
        """The base-frame action (7,) float64 the env will execute for the policy's `action` now."""
        return tcp_to_base_action(action, _robot_state(self.env).quat_base_ee)

    def base_to_policy(self, action: np.ndarray) -> np.ndarray:
        """The policy-frame (TCP) action (7,) float64 whose execution now is the base-frame `action`
        (scaled down per part if its TCP-frame version would leave [-1, 1])."""
        return base_to_tcp_action(action, _robot_state(self.env).quat_base_ee)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        obs, info = self.env.reset(seed=seed, options=options)
        return self._observation(obs), info

    def step(self, action: np.ndarray) -> tuple[dict[str, Any], float, bool, bool, dict[str, Any]]:
        base_action = self.policy_to_base(action)
        obs, reward, terminated, truncated, info = self.env.step(base_action.astype(np.float32))
        info["base_frame_action"] = base_action.astype(np.float32)
        return self._observation(obs), float(reward), terminated, truncated, info

    def _observation(self, obs: dict[str, Any]) -> dict[str, Any]:
        if not self.config.obs_in_reset_frame:
            return obs
        reset_pose = getattr(self.env.unwrapped, "reset_pose", None)
        if reset_pose is None:
            raise RobotRLError("obs_in_reset_frame needs a RobotEnv with a reset pose (after reset())")
        out = dict(obs)
        state = np.array(obs["state"], copy=True)
        state[:3] = quat_to_mat(reset_pose[1]).T @ state[:3].astype(np.float64)
        out["state"] = state
        return out


# ---------------------------------------------------------------------------------------------------------
# interventions


@dataclasses.dataclass(frozen=True)
class InterventionConfig(Config):
    """Options of `InterventionWrapper`."""

    sticky_s: float = 0.5
    """Keep intervening this long after the operator's last input (SERL: 0.5 s); the device's command then
    (usually a zero delta = hold still, latched gripper) replaces the policy's. In steps:
    round(sticky_s * control_hz). 0 = only while the device is active."""
    control_hz: float = 0.0
    """Env steps per second for the sticky window; 0 = the RobotEnv's `config.control_hz`."""

    def validate(self) -> None:
        require(self.sticky_s >= 0 and math.isfinite(self.sticky_s), "sticky_s", self.sticky_s,
                "must be finite and >= 0")
        require(self.control_hz >= 0 and math.isfinite(self.control_hz), "control_hz", self.control_hz,
                "must be finite and >= 0 (0 = the env's)")


class InterventionWrapper(gymnasium.Wrapper[dict[str, Any], np.ndarray, dict[str, Any], np.ndarray]):
    """Human interventions (HIL-SERL): the operator's action replaces the policy's while they are active.

    Each step: (1) if the device has `observe_policy_action`, show it the policy's action in the base frame;
    (2) poll the device with `env.unwrapped.last_state` (the state the policy saw); (3) if the device is
    active, or was within the last `sticky_steps` steps, its base-frame action is converted into the policy's
    frame through the wrappers below (each wrapper's `base_to_policy`, e.g. `RelativeFrameWrapper`) and
    executed instead of the policy's.

    info keys every step: "intervention" (bool), "intervene_action" (7,) float32 on intervention steps: the
    executed action in the policy's frame (exactly what was passed down, so storing it and replaying it through
    the same stack reproduces the motion; learners.training.online stores it instead of the policy's), "policy_action"
    (7,) float32 (what the policy proposed), "events" (sorted tuple of the device's events: "success",
    "failure", "quit", ...; they do not end the episode here). At the end of an episode: "intervention_rate"
    (intervention steps / episode length), "intervention_steps", "interventions" (number of takeovers).

    Usage::

        env = InterventionWrapper(RelativeFrameWrapper(base_env), make_device("spacemouse"))
        env = InterventionWrapper(base_env, ScriptedHuman(ScriptedHumanConfig(task="reach")))
        obs, info = env.reset(seed=0)
        obs, r, term, trunc, info = env.step(policy_action)
        if info["intervention"]: store(info["intervene_action"])
        env.episode_stats()   # {"steps", "intervention_steps", "intervention_rate", "interventions"}
    """

    def __init__(self, env: gymnasium.Env[dict[str, Any], np.ndarray], device: HumanDevice,
                 config: InterventionConfig | None = None) -> None:
        super().__init__(env)
        self.config = cfg = config or InterventionConfig()
        self.device = device
        _check_action_space(env, "InterventionWrapper")
        if not callable(getattr(device, "poll", None)):
            raise ConfigError(f"device {device!r} has no poll(state) method")
        hz = cfg.control_hz
        if hz == 0.0:
            hz = float(getattr(getattr(env.unwrapped, "config", None), "control_hz", 0.0) or 0.0)
            if hz <= 0.0:
                raise ConfigError("InterventionConfig.control_hz=0 needs a RobotEnv underneath "
                                  "(its config.control_hz); set control_hz explicitly")
        self.control_hz = hz
        self.sticky_steps: int = round(cfg.sticky_s * hz)
        """Steps the intervention lasts after the device's last active poll."""
        # wrappers below that change the action's frame (a nested InterventionWrapper only replaces actions)
        self._converters: list[Any] = [w for w in _inner_wrappers(env)
                                       if hasattr(w, "base_to_policy") and not isinstance(w, InterventionWrapper)]
        self._steps = 0
        self._intervention_steps = 0
        self._takeovers = 0
        self._since_input = math.inf
        self._prev_intervened = False

    # ------------------------------------------------------------------------------------------------------

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        obs, info = self.env.reset(seed=seed, options=options)
        reset_fn = getattr(self.device, "reset", None)
        if callable(reset_fn):
            reset_fn()
        self._reset_counters()
        return obs, info

    def step(self, action: np.ndarray) -> tuple[dict[str, Any], float, bool, bool, dict[str, Any]]:
        policy_action = np.asarray(action, np.float32)
        state = _robot_state(self.env)
        observe = getattr(self.device, "observe_policy_action", None)
        if callable(observe):
            observe(self.policy_to_base(policy_action))
        cmd = self.device.poll(state)
        human = np.asarray(cmd.action(), np.float64)
        if human.shape != (ACTION_DIM,):
            raise ShapeError(f"device {type(self.device).__name__}: action() has shape {human.shape}, "
                             f"expected ({ACTION_DIM},)")
        if not np.all(np.isfinite(human)):
            raise SafetyError(f"device {type(self.device).__name__}: non-finite action {human!r}")
        events = tuple(sorted(str(e) for e in cmd.events))

        if bool(cmd.active):
            self._since_input = 0.0
        else:
            self._since_input += 1
        intervene = self._since_input <= self.sticky_steps
        if intervene:
            executed = self.base_to_policy(human).astype(np.float32)
            if not self._prev_intervened:
                self._takeovers += 1
        else:
            executed = policy_action
        self._prev_intervened = intervene

        obs, reward, terminated, truncated, info = self.env.step(executed)
        self._steps += 1
        self._intervention_steps += int(intervene)
        info["intervention"] = intervene
        if intervene:
            info["intervene_action"] = executed.copy()
        info["policy_action"] = policy_action.copy()
        info["events"] = events
        if terminated or truncated:
            info.update(self.episode_stats())
        return obs, float(reward), terminated, truncated, info

    def close(self) -> None:
        """Close the env, then the device (a hardware device holds a USB handle or a listener thread; devices'
        close is idempotent)."""
        try:
            super().close()
        finally:
            close_device = getattr(self.device, "close", None)
            if callable(close_device):
                close_device()

    # ------------------------------------------------------------------------------------------------------

    def episode_stats(self) -> dict[str, Any]:
        """The running episode's counts: steps, intervention_steps, intervention_rate (0.0 before the first
        step), interventions (separate takeovers)."""
        rate = self._intervention_steps / self._steps if self._steps else 0.0
        return {"steps": self._steps, "intervention_steps": self._intervention_steps,
                "intervention_rate": rate, "interventions": self._takeovers}

    def base_to_policy(self, action_base: np.ndarray) -> np.ndarray:
        """A base-frame action (7,) -> the policy's frame, through every wrapper below that converts actions
        (those with `base_to_policy` / `policy_to_base`: "base" = what the wrapper passes down, "policy" = what
        it takes). On the way down the outermost converter acts first, so this undoes the innermost first."""
        a = np.asarray(action_base, np.float64)
        for w in reversed(self._converters):
            a = w.base_to_policy(a)
        return a

    def policy_to_base(self, action: np.ndarray) -> np.ndarray:
        """The policy's action (7,) -> the base frame, through every converting wrapper below (outermost first)."""
        a = np.asarray(action, np.float64)
        for w in self._converters:
            a = w.policy_to_base(a)
        return a

    def _reset_counters(self) -> None:
        self._steps = 0
        self._intervention_steps = 0
        self._takeovers = 0
        self._since_input = math.inf
        self._prev_intervened = False


# ---------------------------------------------------------------------------------------------------------
# gripper penalty


@dataclasses.dataclass(frozen=True)
class GripperPenaltyConfig(Config):
    """Options of `GripperPenaltyWrapper`."""

    penalty: float = -0.02
    """Added to the gripper critic's reward on a step whose gripper command flips (HIL-SERL: -0.02)."""

    def validate(self) -> None:
        require(math.isfinite(self.penalty) and self.penalty <= 0, "penalty", self.penalty, "must be finite, <= 0")


class GripperPenaltyWrapper(gymnasium.Wrapper[dict[str, Any], np.ndarray, dict[str, Any], np.ndarray]):
    """HIL-SERL's gripper flip penalty: `info["grasp_penalty"]` = `penalty` on steps where the env's gripper
    command actually changed (RobotEnv's `info["gripper_changed"]`, so a flip refused by the env's debounce is
    not penalised), 0.0 on every other step. The reward itself is unchanged; learners.training.online stores the penalty
    with the transition for the gripper critic.

    Usage::

        env = GripperPenaltyWrapper(make_env("twin-pick-cube", obs_mode="state"), penalty=-0.02)
        obs, r, term, trunc, info = env.step(action)
        info["grasp_penalty"]    # -0.02 or 0.0
    """

    def __init__(self, env: gymnasium.Env[dict[str, Any], np.ndarray], penalty: float | None = None,
                 config: GripperPenaltyConfig | None = None) -> None:
        super().__init__(env)
        if penalty is not None and config is not None:
            raise ConfigError("give either penalty= or config=, not both")
        self.config = config or GripperPenaltyConfig(**({} if penalty is None else {"penalty": float(penalty)}))

    def step(self, action: np.ndarray) -> tuple[dict[str, Any], float, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        if "gripper_changed" not in info:
            raise RobotRLError("GripperPenaltyWrapper needs info['gripper_changed'] from the env (a RobotEnv)")
        info["grasp_penalty"] = self.config.penalty if bool(info["gripper_changed"]) else 0.0
        return obs, float(reward), terminated, truncated, info
