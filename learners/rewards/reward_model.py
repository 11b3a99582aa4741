"""The run-time reward model: the newest frame (+ proprio) -> (reward, success), with gates against false positives.

Sources (`--reward` on `robot-rl train` and `robot-rl actor`):
- "env": the env's own reward and termination (the twin's `Task.success`; nothing is wrapped);
- "classifier:DIR": a trained classifier (`robot-rl train-classifier`), `ClassifierReward`;
- "human": the teleop device's success key (`info["events"]` contains "success", as the InterventionWrapper
  reports it) ends the episode with reward 1 (HIL-SERL's fallback), `HumanReward`.
Forward/backward training gives each direction one, "env" meaning `GoalReward(goal)` (the twin's truth of that goal).
`PredicateReward(fn)` wraps any check `fn(obs, info) -> bool`. Every model has the `RewardModel` protocol.

Gates of `ClassifierReward` against false positives (which end an episode with a wrong reward and teach the policy
to stop early; none of SERL, HIL-SERL or LeRobot have them): `k` frames in a row with probability >= the card's
threshold (`DEFAULT_GATE_K` = 3, measured in benchmarks/classifier.py: on 90 live twin pick-cube episodes per image
size, k = 1 ended 11 (64x64) / 14 (128x128) one step before the true success, k = 2 1 / 3, k = 3 1 / 0, no k a
failed one; each extra frame delays the reward by about a step), and a proprio predicate per task
(`TASK_PREDICATES`, or the card's) that must hold on the frame, e.g. pick-cube's gripper closed on something.

Every positive frame, and the few negative frames before each, is logged for audit (learners.rewards.audit_log
`RewardAudit`: a JSON line, a PNG of the cameras); `robot-rl audit-labels` (learners.rewards.audit) turns them and the
user's verdicts into label episodes.

A classifier reading cameras the policy does not observe (a state policy's; a pixel policy's separate camera): the
env renders them (envs.env `RobotEnvConfig.reward_cameras`; `reward_camera_overrides(sources, obs_mode)` gives the
env kwargs from the cards, `camera_shapes_of_env(env)` what the env offers for the card check) and puts them into
`info["reward_images"]` (robot_rl.reward_source.REWARD_IMAGES_INFO_KEY); `ClassifierReward` reads a camera of its
card there whenever the observation lacks it, and the audit log writes those frames too.

`RewardModelWrapper` applies a model to any gymnasium-style env (duck-typed: learners imports gymnasium only
lazily): reward and `terminated` come from the model (the env's own `terminated` still ends the episode, so
make the twin with `terminate_on_success=False`: `env_overrides(source)`); `info["success"]` stays the env's
(the TRUE success on the twin: metrics only), `info["reward_success"]`, `info["reward_prob"]` and
`info["env_reward"]` are added, and `stats()` counts episodes the model ended without true success. On the twin
(an env reporting its true success) `stats()` also has the classifier's frame decisions (prob >= threshold, before
the gate) against the truth of the scene each frame shows (`info["frame_true_success"]`: the step it was rendered at,
with a camera latency): `frame_tp/fp/fn/tn`, `frame_precision`, `frame_recall` (learners.rewards.metrics.
FrameConfusion; `frame_window()`: since its last call), and per episode whether its first positive came early, on
time or late against the first true frame (`onset_*`, `frame_fn_late`: metrics.SuccessOnsets). A twin-only
diagnostic: the truth is never a reward.

Usage::

    model = make_reward_model("classifier:runs/cls", obs_shapes, audit_dir="runs/x/reward_audit")
    env = RewardModelWrapper(make_env(task, terminate_on_success=False), model)
    obs, info = env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step(action)    # reward from the classifier, gated
    env.stats()   # {"episodes", "ended_by_model", "ended_without_true_success", "positive_frames", ...}
"""

from __future__ import annotations

import collections
import dataclasses
import math
import os
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from learners.rewards.audit_log import (
    FRAME_TRUE_SUCCESS_KEY,
    RewardAudit,
    RewardDecision,
    camera_frames,
    true_success,
)
from learners.rewards.metrics import FrameConfusion, SuccessOnsets
from robot_rl.errors import ConfigError, ShapeError
from robot_rl.reward_source import (
    IMAGES_LEAF,
    POLICY_CAMERAS,
    parse_reward_source,
    reward_image_path,
)
from robot_rl.specs import flatten_value
from robot_rl.timing import latency_steps

DEFAULT_GATE_K = 3
"""Consecutive positive frames before a classifier success counts (measured: see the module docstring)."""

TASK_PREDICATES: dict[str, tuple[str, ...]] = {
    # proprio state (envs.env): [0:3] TCP position relative to the reset pose (m), [3:6] euler, [6:12] twist,
    # [12] gripper width (m), [13:19] wrench. Pick-cube resets at z = 0.25 m: the fingers closed on something
    # (open 0.08, on the 4 cm cube 0.039, on nothing ~0) and the TCP at least 5 cm above the table.
    "twin-pick-cube": ("state[12]>=0.01", "state[12]<=0.07", "state[2]>=-0.2"),
    # Cube-relocate (both directions): the goal is the cube resting in its zone AND released, so the fingers must
    # be open (0.08; the scripted expert's first released frame reads 0.068). Without it, front-camera
    # classifiers trained on expert labels fired while the hand, closed on the cube, hovered over the zone.
    "twin-cube-relocate": ("state[12]>=0.065",),
    "twin-cube-relocate-back": ("state[12]>=0.065",),
}
"""Default run-time proprio predicates per task preset (HIL-SERL combines its classifiers with a pose check)."""


_COND_RE = re.compile(r"^\s*state\[(\d+)\]\s*(<=|>=|<|>)\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*$")
_OPS = {"<=": np.less_equal, ">=": np.greater_equal, "<": np.less, ">": np.greater}


@dataclasses.dataclass(frozen=True)
class ProprioPredicate:
    """All of some conditions on the proprio `state` vector, each "state[i] OP value" with OP in <, <=, >, >=.

    Usage::

        pred = ProprioPredicate.parse("state[12]>=0.01,state[2]>=-0.2")
        pred(obs)                  # True / False for one observation (its "state" leaf)
        pred.evaluate(states)      # (N,) bool for rows of states (N, D)
    """

    conditions: tuple[str, ...]

    def __post_init__(self) -> None:
        for c in self.conditions:
            if _COND_RE.match(c) is None:
                raise ConfigError(f"predicate condition {c!r}: expected 'state[i] OP value' with OP one of "
                                  f"<, <=, >, >= (e.g. 'state[12]>=0.01')")

    @classmethod
    def parse(cls, text: str) -> ProprioPredicate:
        """Comma-separated conditions ('' = none)."""
        return cls(tuple(c.strip() for c in text.split(",") if c.strip()))

    def _parts(self) -> list[tuple[int, Any, float]]:
        out = []
        for c in self.conditions:
            m = _COND_RE.match(c)
            assert m is not None
            out.append((int(m.group(1)), _OPS[m.group(2)], float(m.group(3))))
        return out

    def check_dim(self, dim: int, where: str) -> None:
        """ConfigError naming `where` if a condition indexes past a state vector of `dim` values."""
        for c, (i, _, _) in zip(self.conditions, self._parts(), strict=True):
            if i >= dim:
                raise ConfigError(f"{where}: condition {c!r} indexes state[{i}] but the state has {dim} values")

    def evaluate(self, states: np.ndarray) -> np.ndarray:
        """(N,) bool: every condition holds on each row of `states` (N, D)."""
        s = np.asarray(states, np.float64)
        ok = np.ones(s.shape[0], bool)
        for i, op, v in self._parts():
            ok &= op(s[:, i], v)
        return ok

    def __call__(self, obs: Any) -> bool:
        if not self.conditions:
            return True
        flat = flatten_value(obs)
        if "state" not in flat:
            raise ShapeError(f"the proprio predicate {list(self.conditions)} needs a 'state' observation leaf; the "
                             f"observation has {sorted(flat)}")
        return bool(self.evaluate(np.asarray(flat["state"], np.float64).reshape(1, -1))[0])


def default_predicate(task: str) -> ProprioPredicate:
    """The task preset's default predicate (`TASK_PREDICATES`), or none."""
    return ProprioPredicate(TASK_PREDICATES.get(task, ()))


def card_predicate(card: Any) -> ProprioPredicate:
    """The run-time proprio predicate a classifier card's gate names (none when it names none)."""
    return ProprioPredicate(tuple(card.gate.get("predicate", ())))


class RewardModel(Protocol):
    """Maps the newest observation (and the env's info) to a RewardDecision; reset at every episode start."""

    def reset(self) -> None: ...

    def step(self, obs: Any, info: Mapping[str, Any], episode: int, t: int) -> RewardDecision: ...


class ClassifierReward:
    """Reward from a trained classifier with the k-consecutive-frames gate and the proprio predicate.

    classifier: a `learners.rewards.classifier.LoadedClassifier`. k / predicate / threshold: None = the card's.
    audit: where positive frames (and the lead frames before them: RewardAudit) are logged (None: not logged).
    """

    def __init__(self, classifier: Any, k: int | None = None, predicate: ProprioPredicate | None = None,
                 threshold: float | None = None, audit: RewardAudit | None = None) -> None:
        import torch

        self._torch = torch
        self.classifier = classifier
        card = classifier.card
        self.cameras: list[str] = list(card.cameras)
        self.k = int(k if k is not None else card.gate.get("k", DEFAULT_GATE_K))
        if self.k < 1:
            raise ConfigError(f"gate k={self.k} must be >= 1")
        self.predicate = predicate if predicate is not None else card_predicate(card)
        self.threshold = float(threshold if threshold is not None else card.threshold)
        self.audit = audit
        self.run = 0
        h, w = card.image_size
        self._shape = (h, w, 3)
        self.positive_frames = 0
        self.model_successes = 0

    def check_observation_shapes(self, shapes: Mapping[str, Sequence[int]], where: str = "the env's observation",
                                 ) -> None:
        """ConfigError unless the observation has the card's cameras at the card's size."""
        self.classifier.check_cameras(shapes, where)

    def reset(self) -> None:
        self.run = 0

    def prob(self, obs: Any, info: Mapping[str, Any] | None = None) -> float:
        """The classifier's success probability for one step's frames: the observation's cameras, or (state mode)
        the env's reward cameras in `info["reward_images"]` (`camera_frames`)."""
        flat = camera_frames(obs, info)
        batch = {}
        for cam in self.cameras:
            img = flat.get(cam)
            if img is None or np.shape(img) != self._shape:
                self.check_observation_shapes({k: np.shape(v) for k, v in flat.items()},
                                              where="the env's observation and info['reward_images']")
            batch[cam] = self._torch.from_numpy(np.ascontiguousarray(img, dtype=np.uint8)[None])
        with self._torch.no_grad():
            logit = float(self.classifier.model(batch)[0])
        return 1.0 / (1.0 + math.exp(-logit)) if logit > -700 else 0.0

    def step(self, obs: Any, info: Mapping[str, Any], episode: int, t: int) -> RewardDecision:
        p = self.prob(obs, info)
        positive = p >= self.threshold
        self.run = self.run + 1 if positive else 0
        pred_ok = self.predicate(obs) if positive else True
        success = self.run >= self.k and pred_ok
        d = RewardDecision(1.0 if success else 0.0, success, p, positive, self.run, pred_ok)
        if positive:
            self.positive_frames += 1
            if self.audit is not None:
                self.audit.log(episode, t, d, obs, info)
        elif self.audit is not None:
            self.audit.remember(episode, t, d, obs, info)
        self.model_successes += int(success)
        return d


class PredicateReward:
    """Reward 1 and success on every frame where `fn(obs, info)` is true (no gating): a scripted check of proprio, a
    key reported in info, a model. `positive` = `success` (what the forward/backward hand-over guard asks)."""

    def __init__(self, fn: Callable[[Any, Mapping[str, Any]], bool], name: str = "predicate") -> None:
        self.fn, self.name = fn, name
        self.positive_frames = 0

    def reset(self) -> None:
        pass

    def step(self, obs: Any, info: Mapping[str, Any], episode: int, t: int) -> RewardDecision:
        hit = bool(self.fn(obs, info))
        self.positive_frames += int(hit)
        return RewardDecision(1.0 if hit else 0.0, hit, None, hit, int(hit), True)


class GoalReward(PredicateReward):
    """The twin's TRUE success of one named task goal (`info["goals"][goal]`, envs.tasks.Task.goals): privileged
    state, the stand-in for a classifier of one forward/backward direction ('env' there). ConfigError when the env
    reports no such goal (a hardware env, or a faithful run, must use a classifier or a human instead)."""

    def __init__(self, goal: str) -> None:
        super().__init__(self._check, name=f"env:{goal}")
        self.goal = goal

    def _check(self, obs: Any, info: Mapping[str, Any]) -> bool:
        goals = info.get("goals")
        if not isinstance(goals, Mapping) or self.goal not in goals:
            have = sorted(goals) if isinstance(goals, Mapping) else []
            raise ConfigError(f"reward 'env' needs the env's true goal {self.goal!r} in info['goals'] (twin only; "
                              f"this env reports {have or 'none'}); on hardware use classifier:DIR or human")
        return bool(goals[self.goal])


class HumanReward:
    """Reward 1 and the episode's end when the teleop device reports its success key (`info["events"]`)."""

    def __init__(self, audit: RewardAudit | None = None) -> None:
        self.audit = audit
        self.positive_frames = 0
        self._checked = False

    def reset(self) -> None:
        pass

    def step(self, obs: Any, info: Mapping[str, Any], episode: int, t: int) -> RewardDecision:
        if not self._checked:
            if "events" not in info:
                raise ConfigError("--reward human: the env reports no teleop events (info['events']); the success "
                                  "key needs a teleop device: run robot-rl actor with --intervene DEVICE, or wrap "
                                  "the env in envs.wrappers.InterventionWrapper")
            self._checked = True
        positive = "success" in tuple(info.get("events", ()))
        d = RewardDecision(1.0 if positive else 0.0, positive, None, positive, int(positive), True)
        if positive:
            self.positive_frames += 1
            if self.audit is not None:
                self.audit.log(episode, t, d, obs, info)
        elif self.audit is not None:
            self.audit.remember(episode, t, d, obs, info)
        return d


# --------------------------------------------------------------------------------------------------- wiring


def env_overrides(source: str) -> dict[str, Any]:
    """Twin env kwargs a reward source needs: a learned or human reward decides when an episode ends, so the
    env must not end it on its own (privileged) success."""
    kind, _ = parse_reward_source(source)
    return {} if kind == "env" else {"terminate_on_success": False}


def image_shapes_of_space(space: Any) -> dict[str, tuple[int, ...]]:
    """{observation path: shape} of the uint8 (H, W, C) leaves of a gymnasium observation space."""
    from robot_rl.specs import flatten_space

    return {s.name: tuple(s.shape) for s in flatten_space(space) if s.is_image}


def camera_shapes_of_env(env: Any) -> dict[str, tuple[int, ...]]:
    """{observation path: shape} of every camera a reward model can read from `env`: its observation's images plus
    the reward cameras it puts into info (`env.unwrapped.reward_image_shapes`, envs.env.RobotEnv, as
    "images/NAME"); what `make_reward_model` checks a classifier's card against."""
    shapes = image_shapes_of_space(env.observation_space)
    extra = getattr(getattr(env, "unwrapped", env), "reward_image_shapes", None)
    if isinstance(extra, Mapping):
        for name, shape in extra.items():
            shapes.setdefault(reward_image_path(str(name)), tuple(int(v) for v in shape))
    return shapes


def reward_camera_overrides(sources: Sequence[str], obs_mode: str | None,
                            camera_names: Sequence[str] | None = None) -> dict[str, Any]:
    """Env kwargs (envs.env.RobotEnvConfig fields) to feed the classifiers among `sources` (`--reward` values) the
    cameras the observation lacks: `reward_cameras`, the "images/NAME" cameras their cards name (first card first)
    outside `camera_names` (pixels mode's observation; None: POLICY_CAMERAS), and in state mode
    `image_size`, the cards' (square) size (pixels: the observation's, which the card check compares). {} when none.
    ConfigError, naming the card, for a state-mode camera that is not an "images/NAME" path, a non-square size or
    cards of different sizes; the env refuses a camera it lacks, the card check (`make_reward_model`) a size."""
    if obs_mode not in ("state", "pixels"):
        return {}
    observed = () if obs_mode == "state" else tuple(camera_names or POLICY_CAMERAS)
    cameras: list[str] = []
    size: int | None = None
    first = ""
    for source in sources:
        kind, directory = parse_reward_source(source)
        if kind != "classifier":
            continue
        from learners.rewards.classifier import CARD_FILE, read_card

        assert directory is not None
        card = read_card(directory)
        h, w = (int(v) for v in card.image_size)
        where = Path(directory) / CARD_FILE
        if h != w:
            raise ConfigError(f"{where}: image_size {h}x{w} is not square; an env renders square frames")
        if size is not None and h != size:
            raise ConfigError(f"{where}: image_size {h}x{w}, but {first} is {size}x{size}; an env renders every "
                              f"reward camera at one size")
        if size is None:
            size, first = h, str(where)
        for cam in card.cameras:
            leaf, _, name = cam.partition("/")
            if leaf != IMAGES_LEAF or not name or "/" in name:
                if obs_mode == "pixels":
                    continue  # not a camera of the env's: the card check names what the observation lacks
                raise ConfigError(f"{where}: camera {cam!r} is not an '{IMAGES_LEAF}/NAME' "
                                  f"observation path; a state-mode env renders only its own cameras for a classifier")
            if name not in cameras and name not in observed:
                cameras.append(name)
    if not cameras:
        return {}
    return {"reward_cameras": tuple(cameras)} | ({"image_size": size} if obs_mode == "state" else {})


def add_reward_cameras(env_kwargs: dict[str, Any], sources: Sequence[str], obs_mode: str | None, *,
                       served_size: bool = False, camera_names: Sequence[str] | None = None) -> dict[str, Any]:
    """Puts into `env_kwargs` (in place; returned) what an env needs to feed the classifiers among `sources` the
    cameras its observation lacks (reward_camera_overrides; the observation's: `env_kwargs`' camera_names, else
    `camera_names`): `reward_cameras`, and in state mode `image_size` the cards' size unless `env_kwargs` names one
    or `served_size` (a robot server renders the size it serves). The rule for every env a reward model reads.

        kwargs = add_reward_cameras(preset.make_kwargs(obs_mode="state"), ["classifier:runs/cls"], "state")
        kwargs = add_reward_cameras({}, ["classifier:runs/cls_side"], "pixels")   # {"reward_cameras": ("side",)}
    """
    cams = reward_camera_overrides(sources, obs_mode, env_kwargs.get("camera_names") or camera_names)
    if cams:
        env_kwargs["reward_cameras"] = cams["reward_cameras"]
        if "image_size" in cams and env_kwargs.get("image_size") is None and not served_size:
            env_kwargs["image_size"] = cams["image_size"]
    return env_kwargs


def make_reward_model(source: str, obs_shapes: Mapping[str, Sequence[int]] | None = None,
                      audit_dir: str | os.PathLike[str] | None = None, k: int | None = None,
                      where: str = "the env's observation") -> RewardModel | None:
    """The reward model for `source` (None for 'env'). A classifier is loaded and checked against `obs_shapes`
    ({observation path: (H, W, C)} of the env's cameras): a camera or size the card does not match is a
    ConfigError naming the card and the camera."""
    kind, directory = parse_reward_source(source)
    if kind == "env":
        return None
    audit = RewardAudit(audit_dir) if audit_dir is not None else None
    if kind == "human":
        return HumanReward(audit)
    from learners.rewards.classifier import load_classifier

    assert directory is not None
    model = ClassifierReward(load_classifier(directory), k=k, audit=audit)
    if obs_shapes is not None:
        model.check_observation_shapes(obs_shapes, where)
    return model


def frame_lag_steps(env: Any) -> int:
    """How many steps old `env`'s frames are: its simulated camera latency (RobotEnvConfig.camera_latency_ms) in
    control periods, rounded (0 without one). A frame of step t shows step t - lag's scene, so its truth is that's."""
    cfg = getattr(getattr(env, "unwrapped", env), "config", None)
    return latency_steps(float(getattr(cfg, "camera_latency_ms", 0.0) or 0.0), getattr(cfg, "control_hz", 10.0))


class RewardModelWrapper:
    """Applies a `RewardModel` to a gymnasium-style env (see the module docstring). Forwards every other
    attribute (action_space, observation_space, unwrapped, np_random, ...) to the env."""

    def __init__(self, env: Any, model: RewardModel) -> None:
        self.env = env
        self.model = model
        self.episode = -1
        self.t = 0
        self.episodes = 0
        self.ended_by_model = 0
        self.ended_without_true_success = 0
        self.true_success_episodes = 0
        self.frames = FrameConfusion()
        self.onsets = SuccessOnsets()
        self._truth_lag = frame_lag_steps(env)
        self._truths: collections.deque[bool | None] = collections.deque(maxlen=self._truth_lag + 1)

    def __getattr__(self, name: str) -> Any:
        if name == "env":  # not set yet (during unpickling / construction): no recursion
            raise AttributeError(name)
        return getattr(self.env, name)

    @property
    def unwrapped(self) -> Any:
        return self.env.unwrapped

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(seed=seed, options=options)
        self.model.reset()
        self.onsets.end()  # an episode cut short without terminated / truncated (no-op after one that ended)
        self.episode += 1
        self.t = 0
        self._truths.clear()
        self._truths.extend([true_success(info)] * (self._truth_lag + 1))
        return obs, info

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        obs, env_reward, terminated, truncated, info = self.env.step(action)
        info = dict(info) if isinstance(info, Mapping) else {}
        self.t += 1
        self._truths.append(true_success(info))
        info[FRAME_TRUE_SUCCESS_KEY] = self._truths[0]  # for the audit log: the truth of what the frame shows
        d = self.model.step(obs, info, self.episode, self.t)
        info["env_reward"] = float(env_reward)
        info["reward_success"] = d.success
        if d.prob is not None:
            info["reward_prob"], info["reward_run"] = d.prob, d.run  # run: positives in a row (replay.gate_credit)
        if d.prob is not None and self._truths[0] is not None:  # the classifier's frame decision vs the truth
            self.frames.add(d.positive, bool(self._truths[0]))
            self.onsets.add(d.positive, bool(self._truths[0]))
        terminated = bool(terminated) or d.success
        if terminated or truncated:
            self.onsets.end()
            self.episodes += 1
            true = true_success(info)
            self.true_success_episodes += int(bool(true))
            if d.success:
                self.ended_by_model += 1
                if true is not None and not bool(true):
                    self.ended_without_true_success += 1
                    info["reward_false_positive"] = True
        return obs, float(d.reward), terminated, bool(truncated), info

    def stats(self) -> dict[str, Any]:
        """Episodes so far, how many the model ended, how many of those without the env's true success (+ frames)."""
        out: dict[str, Any] = {"episodes": self.episodes, "ended_by_model": self.ended_by_model,
                               "ended_without_true_success": self.ended_without_true_success,
                               "true_success_episodes": self.true_success_episodes,
                               "positive_frames": int(getattr(self.model, "positive_frames", 0))}
        out["false_end_share"] = self.ended_without_true_success / self.episodes if self.episodes else 0.0
        if sum(self.frames.total.values()):
            out.update(self.frames.summary())
            out.update(self.onsets.counts)
        return out

    def frame_window(self) -> dict[str, Any]:
        """Frame precision / recall since the previous call ({} when no frame was compared: no classifier or truth)."""
        return self.frames.window() if sum(self.frames.total.values()) else {}

    def close(self) -> None:
        audit = getattr(self.model, "audit", None)
        if audit is not None:
            audit.close()
        self.env.close()
