"""The actor loop: step an env with the latest policy, stream transitions to the learner, swap in new weights.

The endpoint (`robot_rl.transport.ActorEndpoint`, ZeroMQ or in memory) and the env are passed in; nothing here
opens a socket or picks a backend. Per control step::

    policy = swap.current()             # new weights? one pointer exchange, loaded beforehand by a thread
    action = policy.act(obs) | warm-up  # until the first weights: hold (zero action) or, opted in, uniform random
    obs', r, term, trunc, info = env.step(action)
    chunk.add(...)                      # copied into preallocated (T+1, ...) arrays: no per-chunk stacking
    send(chunk) at the episode end or every `chunk_steps` steps (the endpoint queues; I/O on its thread)

Weights (actors.weights.PolicySwap): a background thread polls `endpoint.latest_weights()`, builds the policy from
the AgentConfig the learner sends along (`meta/agent_config`), and loads the arrays into a spare copy; the control
loop picks it up between steps, so loading never stalls a step. Chunks: actors.chunks.ChunkBuilder. While the
learner is away the loop keeps running with the last weights; the endpoint buffers unacknowledged transitions (when
its buffer is full, chunks wait in a bounded local queue) and reconnects by itself.

Pacing (`pace=True`, for simulation): the learner reports how many transitions it can take while holding its
update-to-data ratio (`env_step_budget`); the actor pauses between steps when it (its share, with several
actors) has used that up, sending its partial chunk first so the learner always gets what it waits for. It also
waits for the learner's first report before its first step. Once the learner has gone away it does not wait
(it keeps going with the last weights); with `pace=False` it never waits. `pace_mid_episode=False` (hardware: a
robot does not wait in the middle of a motion) pauses only before an episode's first step, after the reset.

Learner loss (`on_learner_loss`): 'continue' keeps acting with the last weights (the simulation default);
'hold' (hardware) stops stepping once the learner has been silent for `learner_loss_hold_s`: the partial chunk is
queued, the env is not stepped (over a robot server, its watchdog holds the last target after its hold timeout;
nothing random or stale moves the arm), and the loop resumes where it stopped when the learner is back.

Hardware-faithful envs (`env.unwrapped.faithful`, envs.env.FAITHFUL): the twin's true success (`info["success"]`)
never leaves the actor. The per-step success flag of a transition and the episode stats sent to the learner carry
the reward model's success (`info["reward_success"]`, False without one); the true success rate stays in this
process's own stats (`true_success_rate`, not reported to the learner), for evaluation only. On hardware the env
says its `info["success"]` is no measurement (robot_rl.reward_source.SUCCESS_UNKNOWN_INFO_KEY): transitions and
episode stats then carry the reward model's success as well, and no true success is recorded.

Usage::

    actor = Actor(env, endpoint, ActorConfig(chunk_steps=100, seed=0))
    actor.run(should_stop=lambda: False, max_steps=1000)
    actor.stats()            # episodes, success_rate, weights_version, intervention_rate, timings
    actor.close()            # sends the partial chunk, flushes (bounded), stops the weight loader
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import math
import sys
import time
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

from actors.chunks import ChunkBuilder
from actors.weights import PolicySwap
from robot_rl.config import Config, require
from robot_rl.errors import ProtocolError
from robot_rl.forwarding import wrapper_of
from robot_rl.reward_source import SUCCESS_UNKNOWN_INFO_KEY
from robot_rl.scene_resets import OperatorSceneResets
from robot_rl.specs import EnvSpec
from robot_rl.transport import ActorStats
from robot_rl.wire import TransitionChunk, Weights

log = logging.getLogger("robot_rl.actor")

WARMUPS = ("hold", "random")
"""ActorConfig.warmup choices."""
LEARNER_LOSS = ("continue", "hold")
"""ActorConfig.on_learner_loss choices."""


@dataclasses.dataclass(frozen=True)
class ActorConfig(Config):
    """The actor loop's options."""

    chunk_steps: int = 100
    """Send a chunk at every episode end and at the latest every this many steps."""
    seed: int = 0
    """Seed of the first env reset and of the random warm-up actions."""
    warmup: str = "hold"
    """What the actor does before the learner's first weights arrive: 'hold' sends zero actions (the env keeps
    its commanded pose and gripper: nothing random ever reaches hardware), 'random' uniform actions in the
    action box (SERL's warm-up; opt in, e.g. on the twin)."""
    pace: bool = True
    """Wait for the learner's env-step budget (simulation); False: never wait (hardware)."""
    pace_poll_s: float = 0.005
    """Sleep between budget checks while paused."""
    pace_mid_episode: bool = True
    """With `pace`: True waits between any two steps (simulation); False only before an episode's first step
    (hardware: the arm is never left waiting mid-motion for the learner)."""
    on_learner_loss: str = "continue"
    """What the actor does when the learner it heard from goes silent: 'continue' (keep acting with the last
    weights) or 'hold' (stop stepping after `learner_loss_hold_s`, resume when it is back)."""
    learner_loss_hold_s: float = 10.0
    """With on_learner_loss='hold': seconds without the learner before the actor holds."""
    max_pending_chunks: int = 256
    """Chunks kept locally while the endpoint's resend buffer is full (beyond: oldest dropped, counted)."""
    weights_poll_s: float = 0.005
    """How often the weight loader thread checks for new weights."""
    report_every_s: float = 1.0
    """Seconds between stats reports to the learner (heartbeats carry them)."""
    success_window: int = 20
    """Episodes in the rolling success / intervention rates."""
    deterministic: bool = False
    """Act with the policy's mode instead of sampling."""
    timing_window: int = 1000
    """Steps kept for the timing percentiles."""
    timing_report_every_s: float = 10.0
    """Seconds between timing percentiles in the reports (computing them costs the control loop ~0.5 ms)."""
    switch_interval_s: float | None = 0.001
    """Python's thread switch interval set by `start()` (default 5 ms): the weight loader and the endpoint's
    I/O thread hand the interpreter back to the control loop within this time. None: leave it as it is."""

    def validate(self) -> None:
        require(self.warmup in WARMUPS, "warmup", self.warmup, f"must be one of {list(WARMUPS)}")
        require(self.on_learner_loss in LEARNER_LOSS, "on_learner_loss", self.on_learner_loss,
                f"must be one of {list(LEARNER_LOSS)}")
        require(self.learner_loss_hold_s >= 0, "learner_loss_hold_s", self.learner_loss_hold_s, "must be >= 0")
        for name in ("chunk_steps", "max_pending_chunks", "success_window", "timing_window"):
            require(getattr(self, name) >= 1, name, getattr(self, name), "must be >= 1")
        for name in ("pace_poll_s", "weights_poll_s", "report_every_s", "timing_report_every_s"):
            require(getattr(self, name) > 0, name, getattr(self, name), "must be > 0")
        if self.switch_interval_s is not None:
            require(0 < self.switch_interval_s <= 0.1, "switch_interval_s", self.switch_interval_s,
                    "must be in (0, 0.1] or None")


class ActorEndpointLike(Protocol):
    """What the actor needs from `robot_rl.transport.ActorEndpoint`."""

    def send(self, chunk: TransitionChunk, timeout: float = 0.0) -> bool: ...

    def latest_weights(self) -> Weights | None: ...

    def flush(self, timeout: float) -> bool: ...

    def stats(self) -> ActorStats: ...

    def report(self, *, block: bool = True, **stats: Any) -> bool: ...


def raise_if_endpoint_failed(endpoint: Any, st: ActorStats | None = None) -> None:
    """Raise the endpoint's fatal error once it has failed (the learner refused this actor: spec_mismatch,
    bad_version, unauthorized): `wait_connected(0)` raises it (e.g. SpecMismatchError naming the differing fields);
    an endpoint without it gets a ProtocolError with its last error. Nothing is retried: a refused actor would
    otherwise wait for a learner budget that never comes."""
    st = st if st is not None else endpoint.stats()
    if st.state != "failed":
        return
    check = getattr(endpoint, "wait_connected", None)
    if callable(check):
        check(0.0)
    raise ProtocolError(f"the learner connection failed: {st.last_error or 'no reason given'}")


def _percentile_ms(values: collections.deque[float], q: float) -> float | None:
    """np.percentile's linear interpolation, in plain Python: numpy's partition releases the GIL, and taking it
    back in the control loop can wait for another thread's long C call (measured: up to 20 ms)."""
    if not values:
        return None
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return (ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)) * 1000.0


def action_bounds(spec: EnvSpec) -> tuple[float, float]:
    """The action Box's uniform bounds (defaults to [-1, 1])."""
    lo = -1.0 if spec.action.low is None else float(spec.action.low)
    hi = 1.0 if spec.action.high is None else float(spec.action.high)
    return lo, hi


class Actor:
    """The actor loop over one env and one endpoint (see the module docstring)."""

    def __init__(self, env: Any, endpoint: ActorEndpointLike, config: ActorConfig | None = None, *,
                 spec: EnvSpec | None = None, swap: PolicySwap | None = None,
                 clock: Callable[[], float] = time.monotonic, perf: Callable[[], float] = time.perf_counter,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.env, self.endpoint = env, endpoint
        self.cfg = cfg = config or ActorConfig()
        self.spec = spec if spec is not None else getattr(endpoint, "spec")  # noqa: B009
        self.clock, self.perf, self.sleep = clock, perf, sleep
        self.swap = swap if swap is not None else PolicySwap(self.spec, endpoint.latest_weights, cfg.weights_poll_s)
        self.rng = np.random.default_rng(cfg.seed)
        self.low, self.high = action_bounds(self.spec)
        self.builder = ChunkBuilder(self.spec, cfg.chunk_steps)
        self.pending: collections.deque[TransitionChunk] = collections.deque()
        self.obs: Any = None
        self.episode = 0
        self.ep_step = 0
        self.ep_return = 0.0
        self.ep_interventions = 0
        self.steps = 0
        self.episodes = 0
        self.chunks_sent = 0
        self.dropped_chunks = 0
        self.intervention_steps = 0
        self.paused_s = 0.0
        self.paused = False
        self.held_for_learner_s = 0.0
        """Seconds the actor held (did not step) because the learner was lost (on_learner_loss='hold')."""
        self._lost_since: float | None = None
        self.successes: collections.deque[float] = collections.deque(maxlen=cfg.success_window)
        self.faithful = bool(getattr(getattr(env, "unwrapped", env), "faithful", False))
        self.true_successes: collections.deque[float] = collections.deque(maxlen=cfg.success_window)
        self.returns: collections.deque[float] = collections.deque(maxlen=cfg.success_window)
        self.intervention_rates: collections.deque[float] = collections.deque(maxlen=cfg.success_window)
        self.policy_s: collections.deque[float] = collections.deque(maxlen=cfg.timing_window)
        self.rest_s: collections.deque[float] = collections.deque(maxlen=cfg.timing_window)
        self.env_s: collections.deque[float] = collections.deque(maxlen=cfg.timing_window)
        self.weights_version = -1
        self._heard_learner = False
        self._t_report = -math.inf
        self._t_timings = -math.inf
        self._t_rate, self._steps_at_rate, self._rate = clock(), 0, 0.0
        self._started = False

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        if self._started:
            return
        self._started = True
        if self.cfg.switch_interval_s is not None:
            sys.setswitchinterval(self.cfg.switch_interval_s)
        self.swap.start()
        self.obs, _ = self.env.reset(seed=self.cfg.seed)
        self.builder.start(self.obs, self.episode, 0)

    def close(self, flush_s: float = 5.0) -> bool:
        """Send the partial chunk and whatever waits locally, wait up to `flush_s` for acks, stop the loader.
        Returns True when everything was acknowledged."""
        ok = False
        try:
            if self.builder.started and self.builder.length:
                self._queue(self.builder.take(stats=None))
            self._drain()
            ok = not self.pending and self.endpoint.flush(flush_s)
        finally:
            self.swap.stop()
        return ok

    # ------------------------------------------------------------------ loop
    def run(self, should_stop: Callable[[], bool] = lambda: False, max_steps: int = 0, max_episodes: int = 0
            ) -> None:
        """Step until `should_stop()`, or `max_steps` steps / `max_episodes` episodes (0: no limit) in this call."""
        self.start()
        steps0, eps0 = self.steps, self.episodes
        while not should_stop():
            if max_steps and self.steps - steps0 >= max_steps:
                break
            if max_episodes and self.episodes - eps0 >= max_episodes:
                break
            if not self.wait_for_budget(should_stop) or not self.hold_while_learner_lost(should_stop):
                break
            self.step()

    def hold_while_learner_lost(self, should_stop: Callable[[], bool] = lambda: False) -> bool:
        """With on_learner_loss='hold': once the learner this actor heard from has been silent for
        `learner_loss_hold_s`, wait (no env step) until it is back; False if `should_stop()` during the wait."""
        if self.cfg.on_learner_loss != "hold":
            return True
        st = self.endpoint.stats()
        raise_if_endpoint_failed(self.endpoint, st)
        if st.state == "connected":
            self._heard_learner, self._lost_since = True, None
            return True
        if not self._heard_learner:  # never connected yet: nothing was lost (pacing waits for a first learner)
            return True
        now = self.clock()
        if self._lost_since is None:
            self._lost_since = now
        if now - self._lost_since < self.cfg.learner_loss_hold_s:
            return True
        log.warning("actor: no learner for %.1f s: holding (no steps) until it is back", now - self._lost_since)
        self._send_partial_chunk()
        t0 = now
        try:
            while (st := self.endpoint.stats()).state != "connected":
                raise_if_endpoint_failed(self.endpoint, st)
                if should_stop():
                    return False
                self.sleep(self.cfg.pace_poll_s)
                self._drain()
            log.warning("actor: the learner is back after %.1f s; resuming", self.clock() - self._lost_since)
            self._lost_since = None
            return True
        finally:
            self.held_for_learner_s += self.clock() - t0

    def _send_partial_chunk(self) -> None:
        """Queue the steps of the episode so far as a chunk (when there are any) and go on building from here."""
        if self.builder.length:
            self._queue(self.builder.take(stats=None))
            self.builder.start(self.obs, self.episode, self.ep_step)

    def wait_for_budget(self, should_stop: Callable[[], bool] = lambda: False) -> bool:
        """Pause while the learner's budget is used up (pacing); False if `should_stop()` during the wait. With
        `pace_mid_episode=False` only before an episode's first step."""
        if not self.cfg.pace or (not self.cfg.pace_mid_episode and self.ep_step > 0):
            return True
        t0 = None
        try:
            while not self._budget_ok():
                if t0 is None:
                    t0 = self.clock()
                    self.paused = True
                    self._send_partial_chunk()  # the learner may be waiting for exactly these transitions
                    self._drain()
                    self._report(force=True)
                if should_stop():
                    return False
                self.sleep(self.cfg.pace_poll_s)
                self._drain()
            return True
        finally:
            if t0 is not None:
                self.paused_s += self.clock() - t0
                self.paused = False

    def _budget_ok(self) -> bool:
        """Whether this actor may take another step: its transitions the learner has not acknowledged yet stay
        below its share of the learner's headroom (budget - received, split over the live actors)."""
        st = self.endpoint.stats()
        raise_if_endpoint_failed(self.endpoint, st)  # refused by the learner: its budget never comes
        learner = st.learner
        if st.state != "connected" or "env_step_budget" not in learner:
            # never heard from a learner: wait for it; it went away: keep going (the endpoint buffers)
            return self._heard_learner
        budget = learner.get("env_step_budget")
        received = learner.get("env_step")
        self._heard_learner = True
        if not isinstance(budget, int) or not isinstance(received, int) or budget < 0:
            return True
        n_actors = learner.get("actors")
        share = (budget - received) / max(1, n_actors if isinstance(n_actors, int) else 1)
        unreceived = self.steps - (st.acked_upto + 1)  # in the builder, queued, in flight or not yet acked
        return unreceived < share

    def step(self) -> dict[str, Any]:
        """One control step (acts, steps the env, stores, sends at chunk ends); returns the step's info."""
        if not self._started:
            self.start()
        t0 = self.perf()
        policy, version = self.swap.current()
        if version != self.weights_version:
            self.weights_version = version
        t1 = self.perf()
        if policy is None and self.cfg.warmup == "random":
            action = self.rng.uniform(self.low, self.high, self.spec.action.shape).astype(np.float32)
        elif policy is None:  # hold: the env's zero action keeps the commanded pose and the gripper
            action = np.clip(np.zeros(self.spec.action.shape, np.float32), self.low, self.high)
        else:
            action = policy.act(self.obs, deterministic=self.cfg.deterministic)
            if self.low != -1.0 or self.high != 1.0:
                action = (self.low + (action + 1.0) * 0.5 * (self.high - self.low)).astype(np.float32)
        t2 = self.perf()
        next_obs, reward, terminated, truncated, info = self.env.step(action)
        t3 = self.perf()
        info = info if isinstance(info, dict) else {}
        intervention = bool(info.get("intervention", False))
        stored = np.asarray(info["intervene_action"], np.float32) if intervention and "intervene_action" in info \
            else action
        # hardware: info["success"] is a placeholder (no object state: SUCCESS_UNKNOWN_INFO_KEY), not a measurement
        success_known = not info.get(SUCCESS_UNKNOWN_INFO_KEY, False)
        true_success = bool(info.get("success", False)) if success_known else None
        # faithful, or no true success at all: what goes to the learner is the reward model's success, never the
        # twin's privileged one nor hardware's placeholder
        success = (bool(info.get("reward_success", False)) if self.faithful or true_success is None
                   else true_success)
        self.builder.add(stored, float(reward), bool(terminated), bool(truncated), intervention, success, next_obs)
        self.steps += 1
        self.ep_step += 1
        self.ep_return += float(reward)
        self.ep_interventions += int(intervention)
        self.intervention_steps += int(intervention)
        done = bool(terminated or truncated)
        if done:
            stats = {"return": self.ep_return, "length": self.ep_step, "success": success,
                     "intervention_rate": self.ep_interventions / max(1, self.ep_step),
                     "weights_version": self.weights_version}
            self._queue(self.builder.take(stats=stats))
            self.episodes += 1
            self.successes.append(float(success))
            if true_success is not None:
                self.true_successes.append(float(true_success))
            self.returns.append(self.ep_return)
            self.intervention_rates.append(self.ep_interventions / max(1, self.ep_step))
        elif self.builder.full:
            self._queue(self.builder.take(stats=None))
            self.builder.start(next_obs, self.episode, self.ep_step)
        self._drain()
        self._report()
        t4 = self.perf()
        self.policy_s.append(t2 - t1)
        self.env_s.append(t3 - t2)
        self.rest_s.append((t1 - t0) + (t4 - t3))
        if done:
            self.episode += 1
            self.ep_step, self.ep_return, self.ep_interventions = 0, 0.0, 0
            self.obs, _ = self.env.reset()
            self.builder.start(self.obs, self.episode, 0)
        else:
            self.obs = next_obs
        return info

    # ------------------------------------------------------------------ sending
    def _queue(self, chunk: TransitionChunk) -> None:
        self.pending.append(chunk)
        while len(self.pending) > self.cfg.max_pending_chunks:
            self.pending.popleft()
            self.dropped_chunks += 1
            if self.dropped_chunks & (self.dropped_chunks - 1) == 0:
                log.warning("actor: learner unreachable and buffers full; dropped %d chunk(s) so far",
                            self.dropped_chunks)

    def _drain(self) -> None:
        while self.pending:
            if not self.endpoint.send(self.pending[0], timeout=0.0):
                return  # backpressure: keep it for the next step
            self.pending.popleft()
            self.chunks_sent += 1

    # ------------------------------------------------------------------ stats
    def stats(self, timings: bool = True) -> dict[str, Any]:
        """Plain-data stats (also reported to the learner in heartbeats); `timings`: with the step-time and
        weight-latency percentiles."""
        now = self.clock()
        if now - self._t_rate >= 1.0:
            self._rate = (self.steps - self._steps_at_rate) / (now - self._t_rate)
            self._t_rate, self._steps_at_rate = now, self.steps
        sw = self.swap
        out = {
            "env_steps": self.steps, "episodes": self.episodes,
            "success_rate": float(np.mean(self.successes)) if self.successes else None,
            "return": float(np.mean(self.returns)) if self.returns else None,
            "intervention_rate": float(np.mean(self.intervention_rates)) if self.intervention_rates else None,
            "weights_version": self.weights_version, "weights_swaps": sw.swaps, "weights_errors": sw.errors,
            "chunks_sent": self.chunks_sent, "pending_chunks": len(self.pending),
            "dropped_chunks": self.dropped_chunks, "paused": self.paused, "paused_s": round(self.paused_s, 3),
            "held_for_learner_s": round(self.held_for_learner_s, 3),
            "env_steps_per_s": round(self._rate, 2),
        }
        operator = wrapper_of(self.env, OperatorSceneResets)  # a person's scene resets (robot-rl actor)
        if operator is not None:
            out["operator_scene_resets"] = operator.requests
        if self.faithful:  # this process's own record; _report leaves it out
            out["true_success_rate"] = float(np.mean(self.true_successes)) if self.true_successes else None
        if timings:
            out.update({
                "policy_ms_p50": _percentile_ms(self.policy_s, 50),
                "policy_ms_p99": _percentile_ms(self.policy_s, 99),
                "rest_ms_p50": _percentile_ms(self.rest_s, 50), "rest_ms_p99": _percentile_ms(self.rest_s, 99),
                "env_ms_p50": _percentile_ms(self.env_s, 50),
                "weights_latency_ms_p50": _percentile_ms(sw.latencies_s, 50),
                "weights_latency_ms_p99": _percentile_ms(sw.latencies_s, 99),
            })
        return out

    def _report(self, force: bool = False) -> None:
        now = self.clock()
        if not force and now - self._t_report < self.cfg.report_every_s:
            return
        timings = now - self._t_timings >= self.cfg.timing_report_every_s
        # never wait on the I/O thread in the control loop: a busy endpoint gets the report on a later step
        stats = self.stats(timings=timings)
        stats.pop("true_success_rate", None)  # faithful mode: the true success stays here
        if self.endpoint.report(block=force, **stats) is False:
            return
        self._t_report = now
        if timings:
            self._t_timings = now
