"""Reset-free forward/backward training (SERL's bin relocation): two agents take turns on one env, each undoing
what the other did, with no teleport in between.

The forward agent moves the scene from its start to the goal (twin-cube-relocate: the cube from zone A to zone
B), the backward agent moves it back. Each direction has its own agent, online buffer, demo buffer and reward
model. The env is stepped by the active direction's policy; the active direction's reward model decides the
reward and the episode's end (the env's own reward is ignored: make it with `task_reward=False`); the episode also
ends at the env's time limit. Every episode end is followed by `env.reset()`, which on a reset-free env is the
robot's own reset routine (envs.resets: let go, lift, back to the reset pose), never a teleport after the first.

Hand-over guard: after each reset the active direction's reward model is asked about the new episode's first
frame. Only if it still fires does the other direction take over; otherwise the same direction runs again. So a
false positive that ended an episode (the classifier fired, the cube is not where it should be) does not hand the
other policy an impossible start: it is counted (`false_positive_handovers`) and the same direction goes on. A
timeout after which the model does fire (the goal was reached but not rewarded in time) hands over too.

Unconfirmed rewards are withdrawn (`withdraw_unconfirmed`, on by default with the guard): the transition that
ended an episode by reward waits outside the buffer until the guard has looked at the post-reset frame; a positive
the guard does not confirm is stored with reward 0 as a terminal transition: the episode did end there (the reward
model ended it) and nothing came of it, so the critic learns that the shortcut's states are worth 0. Without this a
policy learns to make a classifier fire (a probe on twin-cube-relocate, front-camera classifiers, bc_q_filter: 339
refused hand-overs by 8k env steps, the forward policy ending episodes every ~14 steps on the classifier's arm-pose
shortcut, 10 % true success), and every refusal was one more reward for the shortcut. Stored as a truncated
(bootstrapped) transition instead, the reward was gone but not the shortcut's value: the critic bootstrapped it from
its own estimate of the firing frame, which generalises from the true successes that look like it, and a probe with
50 demos per direction climbed to 39 refused hand-overs by 8k env steps all the same. The guard's frame comes after
the robot's reset routine (let go, lift, back to the reset pose), so a scene that is really at the goal still
fires there while a pose-only shortcut does not; nothing privileged is used, so this holds on hardware too.

Stuck scene: a direction whose episodes keep timing out may have left the scene where its policy cannot act (the
cube against a wall, on its edge). After `handover_after_timeouts` timeouts in a row the other direction takes over
anyway (`timeout_handovers`, counted apart from the guarded ones): both policies learn to act from such scenes,
and a scene that already is the other direction's goal ends that direction's episode at its first step.

Reward models: each direction has a learners.rewards.reward_model.RewardModel (the one reward seam of the project, the
same the actor and `robot-rl train --reward` use): `direction_reward(source, goal)` with source
- "env": `GoalReward(goal)`, the twin's TRUE success for the direction's named goal (`info["goals"][goal]`,
  privileged twin state): the stand-in for a classifier on the twin, never available on hardware;
- "classifier:DIR": a trained classifier, gated (k consecutive frames, proprio predicate), positives audited;
- "human": the teleop device's success key (needs a teleop device in the env: `info["events"]`);
or any other RewardModel, e.g. `PredicateReward(fn)` for a callable `fn(obs, info) -> bool`. The hand-over guard
asks the model about one frame (`fires`: positive and predicate, no k-frame gate); a human's key is taken as it is.

Usage::

    fwd = Direction("forward", agent_f, online_f, demo_f, direction_reward("env", "in_zone_b"), goal="in_zone_b")
    bwd = Direction("backward", agent_b, online_b, demo_b, direction_reward("classifier:runs/cls_b", "in_zone_a",
                    obs_shapes), goal="in_zone_a")
    for m in forward_backward(env, (fwd, bwd), ForwardBackwardConfig(total_steps=20_000)):
        print(m["env_step"], m["direction"], m["true_success"], m["switched"])
    counters = ...  # FBCounters: handovers, false_positive_handovers, per-direction episodes and successes
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from learners.replay.buffer import ReplayBuffer, route_transition, sampler_for
from learners.rewards.reward_model import GoalReward, HumanReward, RewardModel, make_reward_model, parse_reward_source
from learners.training.online import Agent, action_bounds, to_env_action
from robot_rl.config import Config, require

DIRECTIONS = ("forward", "backward")


# --------------------------------------------------------------------------------------------------- rewards


def direction_reward(source: str, goal: str, obs_shapes: Mapping[str, Sequence[int]] | None = None,
                     audit_dir: str | os.PathLike[str] | None = None, flag: str = "--reward",
                     k: int | None = None) -> RewardModel:
    """The reward model of one direction: `source` is what `--reward` takes (learners.rewards.reward_model), with 'env'
    =
    `GoalReward(goal)` (the twin's true success of the direction's goal; the env itself gives no reward in a
    forward/backward run). A classifier is checked against `obs_shapes` (gate: `k` frames, None: the card's);
    ConfigError naming `flag` otherwise."""
    kind, _ = parse_reward_source(source)
    if kind == "env":
        return GoalReward(goal)
    model = make_reward_model(source, obs_shapes, audit_dir, k=k, where=f"the observation ({flag} {source})")
    assert model is not None
    return model


def fires(model: RewardModel, obs: Any, info: Mapping[str, Any], episode: int) -> bool:
    """Whether `model` calls this single frame a success (the hand-over guard: the frame is positive and the
    model's proprio predicate holds; no k-frame gate); leaves the model reset. A classifier's audit log records the
    query as step 0 of `episode`."""
    model.reset()
    d = model.step(obs, info, episode, 0)
    model.reset()
    return bool(d.positive) and bool(d.predicate_ok)


def direction_info(info: Mapping[str, Any], goal: str | None) -> Mapping[str, Any]:
    """`info` as the direction with goal `goal` sees it: "success" is that goal's true success
    (`info["goals"][goal]`) instead of the env task's (the forward task's, whichever direction acts), so what the
    reward model records as the true success (its audit's `true_success`) is the direction's own. Unchanged when
    the direction names no goal or the env reports no such goal."""
    goals = info.get("goals") if isinstance(info, Mapping) else None
    if goal is None or not isinstance(goals, Mapping) or goal not in goals:
        return info
    return {**info, "success": bool(goals[goal])}


# --------------------------------------------------------------------------------------------------- the loop


@dataclasses.dataclass
class Direction:
    """One direction's learner side: its agent, buffers, reward model and counters. `goal` names the env's true
    goal for this direction (`info["goals"]`; metrics only, never a reward unless the model is GoalReward)."""

    name: str
    agent: Agent
    online: ReplayBuffer
    demo: ReplayBuffer | None
    reward: RewardModel
    goal: str | None = None
    steps: int = 0
    episodes: int = 0
    updates: int = 0
    reward_successes: int = 0
    true_successes: int = 0

    def counters(self) -> dict[str, int]:
        return {k: getattr(self, k) for k in ("steps", "episodes", "updates", "reward_successes", "true_successes")}


@dataclasses.dataclass(frozen=True)
class ForwardBackwardConfig(Config):
    """The forward/backward loop's settings (per direction where it says so)."""

    total_steps: int = 20_000
    """Env steps of the run, both directions together."""
    start_steps: int = 0
    """Uniform random actions for each direction's first this many steps (0 with demos: RLPD)."""
    learning_starts: int = 100
    """No updates of a direction's agent before its online buffer holds this many transitions."""
    updates_per_step: int = 1
    """Updates of the active direction's agent per env step (each agent learns at this rate from its own steps)."""
    demo_ratio: float = 0.5
    """Share of each batch from the direction's demo buffer (RLPD: 0.5)."""
    guard: bool = True
    """Hand over only if the active direction's reward model still fires on the first frame after the reset
    (False: hand over whenever the model ended the episode, as SERL does)."""
    withdraw_unconfirmed: bool = True
    """With the guard: an episode-ending reward the guard does not confirm on the post-reset frame is stored with
    reward 0, still terminal (module docstring); False stores it as the reward model gave it."""
    handover_after_timeouts: int = 3
    """After this many consecutive timed-out episodes of one direction, the other direction takes over (a stuck
    scene; 0: never)."""
    seed: int = 0
    """Seed of the first env reset."""

    def validate(self) -> None:
        require(self.total_steps >= 1, "total_steps", self.total_steps, "must be >= 1")
        require(self.start_steps >= 0, "start_steps", self.start_steps, "must be >= 0")
        require(self.learning_starts >= 1, "learning_starts", self.learning_starts, "must be >= 1")
        require(self.updates_per_step >= 0, "updates_per_step", self.updates_per_step, "must be >= 0")
        require(0.0 <= self.demo_ratio <= 1.0, "demo_ratio", self.demo_ratio, "must be in [0, 1]")
        require(self.handover_after_timeouts >= 0, "handover_after_timeouts", self.handover_after_timeouts,
                "must be >= 0")


@dataclasses.dataclass
class FBCounters:
    """Where a forward/backward run stands (advanced in place by `forward_backward`)."""

    env_step: int = 0
    episode: int = 0
    active: int = 0
    """Index into DIRECTIONS of the direction that acts next."""
    handovers: int = 0
    """Switches of direction."""
    false_positive_handovers: int = 0
    """Episodes the reward model ended whose hand-over the guard refused (the model no longer fired)."""
    handovers_without_true_success: int = 0
    """Hand-overs made while the env's true goal of the finishing direction did not hold (metrics only)."""
    timeout_handovers: int = 0
    """Hand-overs after `handover_after_timeouts` timed-out episodes in a row (a stuck scene)."""
    timeouts_in_a_row: int = 0
    """Consecutive timed-out episodes of the active direction."""
    withdrawn_rewards: int = 0
    """Episode-ending rewards stored as 0 because the guard did not confirm them (`withdraw_unconfirmed`)."""


def forward_backward(env: Any, directions: tuple[Direction, Direction], cfg: ForwardBackwardConfig,
                     counters: FBCounters | None = None, rng: np.random.Generator | None = None,
                     ) -> Iterator[dict[str, Any]]:
    """Run `cfg.total_steps` env steps alternating the two directions (module docstring); yield one metrics dict
    per finished episode: env_step, episode, direction, episode_return, episode_length, ended_by_reward,
    true_success (the direction's true goal at the episode's last step, None when the env reports none), switched,
    false_positive_handover, scene_teleports (the env's count, when it keeps one), the direction's counters and
    the mean of its agent's update metrics over the episode."""
    c = counters if counters is not None else FBCounters()
    rng = rng if rng is not None else np.random.default_rng(cfg.seed)
    bounds = action_bounds(env)
    dtype = getattr(getattr(env, "action_space", None), "dtype", np.float32)
    samplers = [sampler_for(d.online, d.demo, cfg.demo_ratio, d.agent.cfg) for d in directions]
    act_dim = int(np.prod(directions[0].online.actions.shape[1:]))
    obs, info = env.reset(seed=cfg.seed) if c.env_step == 0 else env.reset()
    directions[c.active].reward.reset()
    ep_return, ep_len, n_metrics = 0.0, 0, 0
    sums: dict[str, float] = {}
    for step in range(c.env_step + 1, cfg.total_steps + 1):
        c.env_step = step
        d, sampler = directions[c.active], samplers[c.active]
        if d.steps < cfg.start_steps:
            action = rng.uniform(-1.0, 1.0, act_dim).astype(np.float32)
        else:
            action = d.agent.act(obs, deterministic=False)
        next_obs, _env_reward, env_terminated, truncated, info = env.step(to_env_action(action, bounds, dtype))
        decision = d.reward.step(next_obs, direction_info(info, d.goal), c.episode, ep_len + 1)
        reward, success = float(decision.reward), bool(decision.success)
        terminated = success or bool(env_terminated)
        # a guarded positive waits for the guard's post-reset verdict before it enters the buffer
        guarded = cfg.guard and not isinstance(d.reward, HumanReward)
        last = (obs, action, reward, next_obs, terminated, bool(truncated))
        deferred = success and guarded and cfg.withdraw_unconfirmed
        if not deferred:
            route_transition(d.online, d.demo, *last)
        d.steps += 1
        ep_return += reward
        ep_len += 1
        obs = next_obs
        if len(d.online) >= cfg.learning_starts:
            rows = int(getattr(d.agent.cfg, "samples_per_update", 256))
            for _ in range(cfg.updates_per_step):
                for k, v in d.agent.update(sampler.sample(rows)).items():
                    sums[k] = sums.get(k, 0.0) + v
                d.updates += 1
                n_metrics += 1
        if not (terminated or truncated):
            continue
        goals = info.get("goals") if isinstance(info, Mapping) else None
        true = bool(goals[d.goal]) if isinstance(goals, Mapping) and d.goal in goals else None
        d.episodes += 1
        d.reward_successes += int(success)
        d.true_successes += int(bool(true))
        obs, info = env.reset()
        # a human's key is the verdict itself (nobody presses it on the reset frame): no guard for HumanReward
        handover = fires(d.reward, obs, direction_info(info, d.goal), c.episode + 1) if guarded else success
        if deferred:
            o, a, r, no, term, trunc = last
            if handover:
                route_transition(d.online, d.demo, o, a, r, no, term, trunc)
            else:  # not confirmed: withdrawn (the episode ended there, with nothing: terminal, reward 0)
                route_transition(d.online, d.demo, o, a, 0.0, no, True, False)
                ep_return -= r
                c.withdrawn_rewards += 1
        c.timeouts_in_a_row = 0 if (success or handover) else c.timeouts_in_a_row + 1
        stuck = (not handover and cfg.handover_after_timeouts > 0
                 and c.timeouts_in_a_row >= cfg.handover_after_timeouts)
        out: dict[str, Any] = {
            "env_step": step, "episode": c.episode, "direction": d.name, "episode_return": ep_return,
            "episode_length": ep_len, "ended_by_reward": success, "true_success": true, "switched": handover or stuck,
            "false_positive_handover": success and not handover, "timeout_handover": stuck,
            **{f"{d.name}_{k}": v for k, v in d.counters().items()},
        }
        if n_metrics:
            out.update({k: v / n_metrics for k, v in sums.items()})
        c.false_positive_handovers += int(success and not handover)
        if handover:
            next_goals = info.get("goals") if isinstance(info, Mapping) else None
            if isinstance(next_goals, Mapping) and d.goal in next_goals and not next_goals[d.goal]:
                c.handovers_without_true_success += 1
        if stuck:
            c.timeout_handovers += 1
        if handover or stuck:
            c.handovers += 1
            c.active = 1 - c.active
            c.timeouts_in_a_row = 0
        teleports = getattr(getattr(env, "unwrapped", env), "scene_teleports", None)
        if teleports is not None:
            out["scene_teleports"] = int(teleports)
        out.update(handovers=c.handovers, false_positive_handovers=c.false_positive_handovers,
                   handovers_without_true_success=c.handovers_without_true_success,
                   timeout_handovers=c.timeout_handovers, withdrawn_rewards=c.withdrawn_rewards)
        c.episode += 1
        directions[c.active].reward.reset()
        ep_return, ep_len, sums, n_metrics = 0.0, 0, {}, 0
        yield out
        if step >= cfg.total_steps:
            return
