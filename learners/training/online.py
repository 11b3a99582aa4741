"""A small, env-agnostic online training loop (one process: env step, store, update) and evaluation.

The env is any gymnasium-like object passed in (`reset(seed=) -> (obs, info)`, `step(a) -> (obs, reward,
terminated, truncated, info)`, `action_space` with `low`/`high`); nothing here imports an env package. The agent
acts in [-1, 1]; actions are rescaled to the env's Box bounds on the way out and stored in [-1, 1].

`train_online` is a generator: it yields one metrics dict per finished episode, so callers (the `robot-rl train`
CLI, tests) log, checkpoint, evaluate or stop between yields:

    for m in train_online(env, agent, online, LoopConfig(total_steps=15_000), demo=demo_buffer):
        print(m["env_step"], m["episode_return"], m.get("critic_loss"))
    returns = evaluate(env, agent, episodes=10, seed=1000)

`train_offline` is the offline phase: agent updates on the demo buffer alone, no env (`robot-rl train
--offline-updates N`); it yields the mean update metrics every `report_every` updates.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

# the Agent seam, defined once in learners.agents.agent; the loops take a LearnerAgent, evaluation its acting half
from learners.agents.agent import LearnerAgent as Agent
from learners.agents.agent import SupportsAct as Actor
from learners.replay.buffer import ReplayBuffer, ReplayEmptyError, route_transition, sampler_for
from learners.replay.frame_align import FrameAligner, Transition
from learners.replay.gate_credit import GateCredit
from learners.replay.prefetch import BatchSource
from robot_rl.config import Config, require
from robot_rl.evaluation import run_episodes


@dataclasses.dataclass(frozen=True)
class LoopConfig(Config):
    """Online training loop settings."""

    total_steps: int = 100_000
    """Env steps to run."""
    start_steps: int = 1000
    """Uniform random actions for this many steps before the policy acts (SERL sim scripts: 1000, real: 300)."""
    learning_starts: int = 1000
    """No updates until the online buffer holds this many transitions (HIL-SERL: 100)."""
    updates_per_step: int = 1
    """`agent.update()` calls per env step (each does critic_updates_per_actor_update critic updates)."""
    demo_ratio: float = 0.5
    """Fraction of each batch from the demo buffer when one is given and non-empty (RLPD: 0.5)."""
    seed: int = 0
    """Seed of the env resets and of the random warm-up actions."""
    frame_lag_steps: int = 0
    """Camera frames arrive this many steps late: hold each transition that long and store it with the frames of
    its own step (learners.replay.frame_align.FrameAligner; 0: as the env returned them)."""
    credit_hold_steps: int = 0
    """> 0: a classifier's gated success is credited to the step whose frame first showed it
    (learners.replay.gate_credit.GateCredit holds this many steps: the gate's k plus the camera lag); 0: off."""
    credit_lag_steps: int = 0
    """With credit_hold_steps: the camera lag (steps) between a frame and the scene it shows."""
    takeover_terminal: bool = True
    """When a human takes over (info["intervention"] starts), relabel the policy's previous transition as
    terminal: to the critic, drifting until someone steps in ends the episode with nothing, instead of earning
    the value of the human's rescue (benchmarks/interventions.py: without it, interventions slowed learning)."""

    def validate(self) -> None:
        require(self.total_steps >= 1, "total_steps", self.total_steps, "must be >= 1")
        require(self.start_steps >= 0, "start_steps", self.start_steps, "must be >= 0")
        require(self.learning_starts >= 1, "learning_starts", self.learning_starts, "must be >= 1")
        for name in ("frame_lag_steps", "credit_hold_steps", "credit_lag_steps"):
            require(getattr(self, name) >= 0, name, getattr(self, name), "must be >= 0")
        require(self.updates_per_step >= 0, "updates_per_step", self.updates_per_step, "must be >= 0")
        require(0.0 <= self.demo_ratio <= 1.0, "demo_ratio", self.demo_ratio, "must be in [0, 1]")


def action_bounds(env: Any) -> tuple[np.ndarray, np.ndarray] | None:
    """The env's finite Box bounds, or None when they are already [-1, 1] (or not available)."""
    space = getattr(env, "action_space", None)
    low, high = getattr(space, "low", None), getattr(space, "high", None)
    if low is None or high is None:
        return None
    low, high = np.asarray(low, np.float64), np.asarray(high, np.float64)
    if not (np.all(np.isfinite(low)) and np.all(np.isfinite(high))):
        return None
    if np.allclose(low, -1.0) and np.allclose(high, 1.0):
        return None
    return low, high


def to_env_action(action: np.ndarray, bounds: tuple[np.ndarray, np.ndarray] | None, dtype: Any = np.float32,
                  ) -> np.ndarray:
    """[-1, 1] agent action -> env Box bounds (clipped)."""
    a = np.clip(np.asarray(action, np.float64), -1.0, 1.0)
    if bounds is not None:
        low, high = bounds
        a = low + (a + 1.0) * 0.5 * (high - low)
    return a.astype(dtype)


def from_env_action(action: np.ndarray, bounds: tuple[np.ndarray, np.ndarray] | None) -> np.ndarray:
    """Env-unit action -> the agent's [-1, 1] (inverse of `to_env_action`), float32, clipped."""
    a = np.asarray(action, np.float64)
    if bounds is not None:
        low, high = bounds
        a = 2.0 * (a - low) / (high - low) - 1.0
    return np.clip(a, -1.0, 1.0).astype(np.float32)


def env_rng_state(env: Any) -> dict[str, Any]:
    """The env's RNG state (gymnasium `np_random`), JSON-able, for checkpoints."""
    return dict(env.unwrapped.np_random.bit_generator.state)


def set_env_rng_state(env: Any, state: dict[str, Any]) -> None:
    """Restore `env_rng_state` output (a resumed run's next unseeded reset continues the same sequence)."""
    gen = env.unwrapped.np_random
    gen.bit_generator.state = state
    env.unwrapped.np_random = gen


@dataclasses.dataclass
class LoopCounters:
    """Where a run stands; the loop advances it in place (checkpoint it at an episode boundary to resume)."""

    env_step: int = 0
    episode: int = 0
    updates: int = 0
    offline_updates: int = 0
    """Agent updates of the offline phase (`train_offline`); they are counted in `updates` too."""


def train_online(env: Any, agent: Agent, online: ReplayBuffer, cfg: LoopConfig,
                 demo: ReplayBuffer | None = None, counters: LoopCounters | None = None,
                 rng: np.random.Generator | None = None,
                 on_learning_start: Callable[[], None] | None = None) -> Iterator[dict[str, Any]]:
    """Run `cfg.total_steps` env steps with updates; yield a metrics dict after every finished episode.

    Each yielded dict has env_step, episode, episode_return, episode_length, updates, plus the mean of the
    agent's update metrics over that episode (when it updated) and `success` when the env's info reports it.
    Transitions with info["intervention"] true also go to the demo buffer (HIL-SERL routing).

    Resumable: the first episode of a run is reset with `cfg.seed`, later ones draw from the env's own RNG
    (gymnasium's `env.unwrapped.np_random`). `counters` (advanced in place, up to date at every yield), `rng`
    (the warm-up action sampler) and the env's RNG state (`env_rng_state` / `set_env_rng_state`) are what a
    checkpoint taken at a yield must hold, with the agent and the buffers, for a resumed run to continue as the
    same run. `on_learning_start` is called once, right before the run's first update (not on a resumed run that
    has updated already): e.g. to set observation statistics from the data gathered so far.
    """
    c = counters if counters is not None else LoopCounters()
    rng = rng if rng is not None else np.random.default_rng(cfg.seed)
    bounds = action_bounds(env)
    act_dim = int(np.prod(online.actions.shape[1:]))
    dtype = getattr(getattr(env, "action_space", None), "dtype", np.float32)
    sampler = sampler_for(online, demo, cfg.demo_ratio, agent.cfg)
    rows = int(getattr(agent.cfg, "samples_per_update", 256))
    obs, _ = env.reset(seed=cfg.seed) if c.env_step == 0 else env.reset()
    ep_return, ep_len = 0.0, 0
    prev_intervention = False
    sums: dict[str, float] = {}
    n_metrics = 0
    source = BatchSource(lambda: sampler.sample(rows), agent, sampler)  # GPU: prefetch / JAX device replay
    aligner = FrameAligner(cfg.frame_lag_steps, [c.name for c in online.spec.cameras])
    credit = GateCredit(cfg.credit_hold_steps)
    try:
        for step in range(c.env_step + 1, cfg.total_steps + 1):
            c.env_step = step
            if step <= cfg.start_steps:
                action = rng.uniform(-1.0, 1.0, act_dim).astype(np.float32)
            else:
                action = agent.act(obs, deterministic=False)
            next_obs, reward, terminated, truncated, info = env.step(to_env_action(action, bounds, dtype))
            intervention = bool(info.get("intervention", False)) if isinstance(info, dict) else False
            if intervention and "intervene_action" in info:  # the human's action, in env units -> [-1, 1]
                action = from_env_action(np.asarray(info["intervene_action"]), bounds)
            penalty = float(info.get("grasp_penalty", 0.0)) if isinstance(info, dict) else 0.0
            if intervention and not prev_intervention and cfg.takeover_terminal and ep_len > 0:
                if not (aligner.terminate_last() or credit.terminate_last()):
                    online.terminate_last()
            prev_intervention = intervention
            done = bool(terminated or truncated)
            now = Transition(obs, action, float(reward), next_obs, bool(terminated), bool(truncated), intervention,
                             penalty)
            on_time = aligner.push(now) + (aligner.flush() if done else [])  # held for the frames' lag (option)
            ready = [r for t in on_time for r in credit.push(t)]  # held for the classifier's gate (option)
            if done:
                gated = isinstance(info, dict) and bool(info.get("reward_success")) and "reward_run" in info
                ready += credit.end(int(info["reward_run"]) - 1 + cfg.credit_lag_steps if gated else None)
            for t in ready:
                route_transition(online, demo, *t.as_args())
            ep_return += float(reward)
            ep_len += 1
            obs = next_obs
            if len(online) >= cfg.learning_starts:
                if c.updates == 0 and on_learning_start is not None and cfg.updates_per_step > 0:
                    on_learning_start()
                for _ in range(cfg.updates_per_step):
                    metrics = source.update()
                    c.updates += 1
                    n_metrics += 1
                    for k, v in metrics.items():
                        sums[k] = sums.get(k, 0.0) + v
            if terminated or truncated:
                out: dict[str, Any] = {"env_step": step, "episode": c.episode, "episode_return": ep_return,
                                       "episode_length": ep_len, "updates": c.updates}
                if isinstance(info, dict) and "success" in info:
                    out["success"] = bool(info["success"])
                if isinstance(info, dict) and "intervention_rate" in info:  # envs.wrappers.InterventionWrapper
                    out["intervention_rate"] = float(info["intervention_rate"])
                if cfg.credit_hold_steps > 0:  # since this loop started: gated successes moved back, steps dropped
                    out["credited_successes"], out["credit_dropped_steps"] = credit.credited, credit.dropped
                if n_metrics:
                    out.update({k: v / n_metrics for k, v in sums.items()})
                c.episode += 1
                yield out
                ep_return, ep_len, sums, n_metrics, prev_intervention = 0.0, 0, {}, 0, False
                if step < cfg.total_steps:
                    obs, _ = env.reset(seed=cfg.seed) if c.env_step == 0 else env.reset()
    finally:
        source.close()


def train_offline(agent: Agent, demo: ReplayBuffer, updates: int, counters: LoopCounters | None = None,
                  report_every: int = 1000, on_learning_start: Callable[[], None] | None = None,
                  ) -> Iterator[dict[str, Any]]:
    """Offline phase: `updates` agent updates on batches drawn from `demo` alone (no env, no online data); yield
    the mean of the agent's update metrics (plus `updates`, `offline_updates`) every `report_every` updates and
    after the last one.

    `counters.updates` and `counters.offline_updates` advance in place; a counters object that already holds
    offline updates (a resumed run) continues up to `updates` in all. The batches come from the demo buffer the
    online phase would use (`sampler_for` with no online data: n-step rows and Monte-Carlo returns as the agent's
    config asks); every row keeps its episode's `intervention` flag, so a behaviour-cloning term (bc_weight) sees
    only the human rows. `on_learning_start` is called once before the run's first update (as in `train_online`)."""
    if report_every < 1:
        raise ValueError(f"report_every must be >= 1, got {report_every}")
    c = counters if counters is not None else LoopCounters()
    if c.offline_updates >= updates:
        return
    if len(demo) == 0:
        raise ReplayEmptyError("the offline phase needs transitions in the demo buffer; it holds none")
    empty = ReplayBuffer(demo.spec, 2, seed=0)  # no online data: every row comes from the demo buffer
    sampler = sampler_for(empty, demo, 1.0, agent.cfg)
    rows = int(getattr(agent.cfg, "samples_per_update", 256))
    if c.updates == 0 and on_learning_start is not None:
        on_learning_start()
    sums: dict[str, float] = {}
    n = 0
    source = BatchSource(lambda: sampler.sample(rows), agent, sampler)  # GPU: prefetch / JAX device replay
    try:
        while c.offline_updates < updates:
            metrics = source.update()
            c.updates += 1
            c.offline_updates += 1
            n += 1
            for k, v in metrics.items():
                sums[k] = sums.get(k, 0.0) + v
            if c.offline_updates % report_every == 0 or c.offline_updates == updates:
                yield {"updates": c.updates, "offline_updates": c.offline_updates,
                       **{k: v / n for k, v in sums.items()}}
                sums, n = {}, 0
    finally:
        source.close()


def evaluate_episodes(env: Any, agent: Actor, episodes: int = 10, seed: int = 10_000, deterministic: bool = True,
                      max_steps: int = 100_000) -> list[dict[str, Any]]:
    """Run `episodes` episodes with the agent's deterministic (default) policy, env seeded with seed+i; one
    dict per episode: return, length, success (robot_rl.evaluation.run_episodes, the one evaluation loop; the
    agent's [-1, 1] action is mapped to the env's action box here)."""
    bounds = action_bounds(env)
    dtype = getattr(getattr(env, "action_space", None), "dtype", np.float32)
    return run_episodes(env, lambda obs: to_env_action(agent.act(obs, deterministic=deterministic), bounds, dtype),
                        episodes, seed, max_steps)


def evaluate(env: Any, agent: Actor, episodes: int = 10, seed: int = 10_000, deterministic: bool = True,
             max_steps: int = 100_000) -> list[float]:
    """Returns of `episodes` episodes with the agent's deterministic (default) policy; env seeded with seed+i."""
    return [r["return"] for r in evaluate_episodes(env, agent, episodes, seed, deterministic, max_steps)]
