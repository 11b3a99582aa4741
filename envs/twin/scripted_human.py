"""`ScriptedHuman`: a scripted operator for the twin that takes over when the policy drifts off the expert's path.

It plays the human of HIL-SERL in simulation: it watches the policy and, when the policy keeps doing something
the task's `ScriptedExpert` would not, it intervenes for a while with the expert's actions, then hands back.

Drift, judged every poll (translation only; rotation is not judged, the expert fixes it while in control):
- with the policy's proposed action (the `InterventionWrapper` shows it through `observe_policy_action`, in
  the base frame): the cosine between the policy's and the expert's translation deltas is below
  `cos_threshold`, or (`check_gripper`) the policy commands the gripper against the expert (close vs open);
- without it (a plain `poll` loop): the TCP's last displacement vs the expert's previous translation command
  (cosine below `cos_threshold` = no progress toward the expert's sub-goal).
Steps where the expert barely moves (translation below `min_expert_speed` action units: at the goal, grasping)
are not judged. After `patience_steps` consecutive drifting steps it takes over for `takeover_steps` steps,
within a budget of `max_intervention_fraction` of the episode's steps; then drift is judged afresh.

Under `InterventionWrapper`'s sticky window (default 0.5 s) each takeover is followed by a few hold-still steps
(the human's inactive command); during them the human keeps judging the policy's proposals and may take over
again, so back-to-back takeovers merge. Use `InterventionConfig(sticky_s=0.0)` for crisp hand-backs.

It implements the one device interface, `envs.devices.HumanDevice`: `reset()`, `poll(state) -> HumanCommand`
(`.action()`, `.active`, `.events`: {"intervene"} while in control), `close()`, and the optional hook
`observe_policy_action(action_base)`.

Usage::

    human = ScriptedHuman(ScriptedHumanConfig(task="reach", seed=0))
    env = InterventionWrapper(make_env("twin-reach", obs_mode="state"), human)
    obs, info = env.reset(seed=0)
    obs, r, term, trunc, info = env.step(policy_action)     # info["intervention"], info["intervene_action"]
    human.intervention_steps, human.takeovers
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from envs.devices import HumanCommand
from envs.robot import RobotState
from envs.tasks import get_task
from envs.twin.experts import ScriptedExpert
from envs.wrappers import ACTION_DIM
from robot_rl.config import Config, require
from robot_rl.errors import ShapeError


@dataclasses.dataclass(frozen=True)
class ScriptedHumanConfig(Config):
    """Options of `ScriptedHuman`."""

    task: str = "reach"
    """Twin task whose ScriptedExpert plays the human ("reach", "pick_cube", "peg_insert" or a preset name)."""
    cos_threshold: float = 0.5
    """A step drifts when cos(policy translation, expert translation) is below this (in [-1, 1])."""
    patience_steps: int = 3
    """Consecutive drifting steps before the human takes over."""
    takeover_steps: int = 10
    """Steps the human stays in control once it takes over (then hands back)."""
    max_intervention_fraction: float = 0.5
    """Budget: at most this fraction of the episode's steps (`episode_steps`) are interventions."""
    episode_steps: int = 0
    """Episode length the budget refers to; 0 = the task's default `max_episode_steps`."""
    min_expert_speed: float = 0.1
    """Expert translation norm (action units) below which the direction is not judged."""
    check_gripper: bool = True
    """Also count a gripper command against the expert's (|policy| >= 0.5, opposite sign) as drift."""
    expert_noise_std: float = 0.0
    """Gaussian noise on the expert's arm actions (see ScriptedExpert), also while it is in control."""
    seed: int | None = 0
    """Seeds the expert noise."""
    press_success: bool = False
    """Report the success key ("success" event) on every poll whose state meets the task's success condition,
    as a person watching the scene would (one step after it happened): the `--reward human` source on the twin."""
    action_scale_m: float = 0.02
    """Must match the env's RobotEnvConfig.action_scale_m."""
    action_scale_rad: float = 0.1
    """Must match the env's RobotEnvConfig.action_scale_rad."""

    def validate(self) -> None:
        require(-1.0 <= self.cos_threshold <= 1.0, "cos_threshold", self.cos_threshold, "must be in [-1, 1]")
        require(self.patience_steps >= 1, "patience_steps", self.patience_steps, "must be >= 1")
        require(self.takeover_steps >= 1, "takeover_steps", self.takeover_steps, "must be >= 1")
        require(0.0 <= self.max_intervention_fraction <= 1.0, "max_intervention_fraction",
                self.max_intervention_fraction, "must be in [0, 1]")
        require(self.episode_steps >= 0, "episode_steps", self.episode_steps, "must be >= 0 (0 = task default)")
        require(self.min_expert_speed >= 0 and math.isfinite(self.min_expert_speed), "min_expert_speed",
                self.min_expert_speed, "must be finite and >= 0")
        require(self.expert_noise_std >= 0 and math.isfinite(self.expert_noise_std), "expert_noise_std",
                self.expert_noise_std, "must be finite and >= 0")
        for name in ("action_scale_m", "action_scale_rad"):
            v = getattr(self, name)
            require(v > 0 and math.isfinite(v), name, v, "must be finite and > 0")


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    """Cosine similarity of two vectors; 0.0 when either is (numerically) zero."""
    na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    if na < 1e-12 or nb < 1e-12:
        return 0.0
    return float(np.dot(a, b) / (na * nb))


class ScriptedHuman:
    """A scripted operator over `ScriptedExpert` (see the module docstring); an `envs.devices.HumanDevice`."""

    name = "scripted_human"

    def __init__(self, config: ScriptedHumanConfig | None = None) -> None:
        self.config = cfg = config or ScriptedHumanConfig()
        self.expert = ScriptedExpert(cfg.task, noise_std=cfg.expert_noise_std, seed=cfg.seed,
                                     action_scale_m=cfg.action_scale_m, action_scale_rad=cfg.action_scale_rad)
        steps = cfg.episode_steps or get_task(self.expert.task).max_episode_steps
        self.budget_steps: int = math.floor(cfg.max_intervention_fraction * steps)
        """Most intervention steps per episode."""
        self.reset()

    def reset(self) -> None:
        """Start of an episode: expert back to its first phase, counters and drift cleared."""
        self.expert.reset()
        self.steps = 0
        """Polls this episode."""
        self.intervention_steps = 0
        """Polls this episode that returned an active command."""
        self.takeovers = 0
        """Separate takeovers this episode."""
        self._remaining = 0
        self._drift = 0
        self._policy_action: np.ndarray | None = None
        self._prev_pos: np.ndarray | None = None
        self._prev_expert: np.ndarray | None = None
        self._last_active = False

    @property
    def in_control(self) -> bool:
        """Whether the last poll returned an active (takeover) command."""
        return self._last_active

    def observe_policy_action(self, action_base: np.ndarray) -> None:
        """The policy's proposed action (7,) in the base frame for the coming step (called before `poll`)."""
        a = np.asarray(action_base, np.float64)
        if a.shape != (ACTION_DIM,):
            raise ShapeError(f"policy action: expected shape ({ACTION_DIM},), got {a.shape}")
        self._policy_action = a

    def poll(self, state: RobotState) -> HumanCommand:
        """The command for this step: the expert's action and active=True while in control, else inactive."""
        cfg = self.config
        expert = self.expert.act(state).astype(np.float64)  # every poll, so the expert's phase follows the state
        policy, self._policy_action = self._policy_action, None
        pos = np.asarray(state.pos_base_ee, np.float64)
        drifting = self._drifting(expert, policy, pos)
        self._prev_pos, self._prev_expert = pos.copy(), expert.copy()
        self.steps += 1

        if self._remaining == 0:
            self._drift = self._drift + 1 if drifting else 0
            left = self.budget_steps - self.intervention_steps
            if self._drift >= cfg.patience_steps and left > 0:
                self._remaining = min(cfg.takeover_steps, left)
                self.takeovers += 1
                self._drift = 0
                # the expert's phase followed states the policy produced (e.g. a hover that timed its descent
                # out into "grasp"): take over from a fresh plan, as a person would, not from a stale phase
                self.expert.reset()
                expert = self.expert.act(state).astype(np.float64)
        active = self._remaining > 0
        self._last_active = active
        success = frozenset({"success"}) if cfg.press_success and self.expert.task.success(state) else frozenset()
        if active:
            self._remaining -= 1
            self.intervention_steps += 1
            return HumanCommand(delta_ee=expert[:6].copy(), gripper=float(expert[6]), active=True,
                                events=frozenset({"intervene"}) | success)
        return HumanCommand(delta_ee=np.zeros(6), gripper=0.0, active=False, events=success)

    def close(self) -> None:
        """Nothing to release (`envs.devices.HumanDevice`)."""

    # ------------------------------------------------------------------------------------------------------

    def _drifting(self, expert: np.ndarray, policy: np.ndarray | None, pos: np.ndarray) -> bool:
        cfg = self.config
        if policy is not None:
            if cfg.check_gripper and abs(policy[6]) >= 0.5 and policy[6] * expert[6] < 0:
                return True
            if float(np.linalg.norm(expert[:3])) < cfg.min_expert_speed:
                return False
            return cosine(policy[:3], expert[:3]) < cfg.cos_threshold
        # no proposed action: judge the TCP's progress along the expert's previous command
        if self._prev_pos is None or self._prev_expert is None:
            return False
        if float(np.linalg.norm(self._prev_expert[:3])) < cfg.min_expert_speed:
            return False
        moved = (pos - self._prev_pos) / cfg.action_scale_m
        return cosine(moved, self._prev_expert[:3]) < cfg.cos_threshold
