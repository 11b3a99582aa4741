"""The distributed learner: transitions in from actors, RLPD/SAC updates at a fixed update-to-data ratio,
versioned weights out, durable data, checkpoints, metrics. The endpoint and the clock are injected, so the
same logic runs over ZeroMQ (`robot-rl learner`) and in one process over `robot_rl.transport.InMemoryHub`.

Data path (nothing acknowledged is ever lost, nothing is stored twice)::

    recv_deliveries -> duplicate? (ledger of (actor_id, session, seq) ranges) -> inbox file (atomic) -> replay
                    -> ack

Every new chunk is written to ``OUT/inbox/`` (learners.distributed.inbox.Inbox, a write-ahead log) before its actor gets
the ack; a checkpoint records the ledger (learners.distributed.inbox.SeqLedger) and the last inbox file it covers, then
deletes the covered files. A restarted
learner (`resume=True`) loads the last checkpoint and replays the newer inbox files, so it holds exactly what
was acknowledged; transitions its predecessor wrote but never acknowledged come again from their actors and the
ledger drops them.

Update-to-data ratio: after `learning_starts` online transitions, the learner keeps
``updates == floor(updates_per_transition * (received - learning_starts))``: it waits for data when ahead, and
tells the actors (heartbeat reports: ``env_step``, ``env_step_budget``) how far they may run ahead of it, so the
learning curve per env step does not depend on the machine's speed. Each update is one agent `update` call
(`critic_updates_per_actor_update` critic updates; learners.agents.agent.make_agent: the torch or the JAX backend).

Weights: every `publish_every` updates, ``agent.trainable_state()`` plus two extra arrays, ``meta/agent_config``
(the AgentConfig as JSON bytes, so actors build the matching policy without flags) and ``meta/published_at``
(wall-clock seconds, for the broadcast latency), with an increasing version.

Outputs in ``OUT``: ``metrics.jsonl`` (robot_rl.metrics), ``status.json`` (rewritten atomically every
`status_every_s`, read by `robot-rl sim`), ``learning_curve.png``, ``tensorboard/`` (when tensorboard is
installed) -- all written through learners.distributed.status, which also holds the per-actor records --,
``checkpoints/`` (robot_rl.checkpoint via learners.training.run_state.TrainingRun), ``inbox/``.

Usage::

    hub = InMemoryHub(); endpoint = hub.bind_learner(spec)
    learner = Learner(spec, rlpd_state_config(), LearnerConfig(), endpoint, out_dir, demos=episodes)
    while not learner.done:
        learner.step(max_wait_s=0.05)     # recv + ingest + at most one update + publish/report/log/checkpoint
    learner.close()                       # final checkpoint, flush logs
"""

from __future__ import annotations

import collections
import dataclasses
import json
import logging
import math
import os
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch

from learners.agents.agent import make_agent
from learners.agents.config import AgentConfig
from learners.distributed.inbox import Inbox, SeqLedger
from learners.distributed.status import ActorRecord, LearnerOutputs, UpdateMeans, actor_status, mean_or_none
from learners.replay.buffer import ReplayBuffer, sampler_for, takeover_terminated
from learners.replay.feature_cache import attach_feature_caches, run_frames
from learners.replay.prefetch import BatchSource
from learners.training.run_state import TrainingRun
from robot_rl.config import Config, require
from robot_rl.episodes import Episode
from robot_rl.errors import ConfigError, ShapeError
from robot_rl.run_dir import CHECKPOINTS_DIR, check_run_dir
from robot_rl.specs import EnvSpec
from robot_rl.transport import Delivery, LearnerStats
from robot_rl.wire import TransitionChunk

log = logging.getLogger("robot_rl.learner")

CONFIG_ARRAY = "meta/agent_config"
"""Name of the extra weights array holding the AgentConfig as JSON (uint8 bytes)."""
INBOX_DIR = "inbox"
"""The durable inbox (learners.distributed.inbox), in the run directory."""
PUBLISHED_AT_ARRAY = "meta/published_at"
"""Name of the extra weights array holding the publish time (float64 (1,), wall-clock seconds)."""


@dataclasses.dataclass(frozen=True)
class LearnerConfig(Config):
    """The distributed learner's schedule, buffers and outputs (the agent has its own AgentConfig)."""

    updates_per_transition: float = 1.0
    """Agent updates (`agent.update` calls) per online transition received, once learning started; each
    update does `critic_updates_per_actor_update` critic updates. 0 = collect only."""
    learning_starts: int = 500
    """Online transitions received before the first update (the ratio counts transitions after it)."""
    max_ahead: int = 300
    """Transitions the actors may run ahead of the ratio (the budget reported to them); bounds the lag."""
    publish_every: int = 10
    """Publish the policy weights every this many updates."""
    checkpoint_every: int = 5000
    """Checkpoint every this many received transitions (and at close)."""
    keep_checkpoints: int = 2
    """Checkpoints kept on disk (oldest deleted first)."""
    max_env_steps: int = 0
    """Stop (`done`) once this many transitions are received and their updates done; 0 = run until closed."""
    capacity: int = 200_000
    """Online replay buffer slots."""
    demo_capacity: int = 100_000
    """Demo buffer slots (demos + interventions)."""
    demo_ratio: float = 0.5
    """Fraction of each batch from the demo buffer (RLPD symmetric sampling: 0.5)."""
    success_window: int = 20
    """Episodes in the rolling success rate / return."""
    log_every_s: float = 5.0
    """Seconds between metrics rows (metrics.jsonl, TensorBoard)."""
    status_every_s: float = 1.0
    """Seconds between status.json rewrites."""
    plot_every_s: float = 30.0
    """Seconds between learning-curve PNG redraws (also drawn at close)."""
    tensorboard: bool = True
    """Write TensorBoard scalars to OUT/tensorboard (skipped with a note when tensorboard is missing)."""
    inbox_fsync: bool = False
    """fsync every inbox file (survives power loss, not only a crashed process); slower on some disks."""
    recv_batch: int = 64
    """Most messages taken from the endpoint per step."""
    seed: int = 0
    """Seed of the replay samplers."""
    offline_updates: int = 0
    """Before serving (a fresh run with demos; a resumed run skips it): this many updates on the demo buffer alone
    (learners.training.online.train_offline), published as the first weights, so the first policy an arm runs is
    trained on the demos rather than a few updates old. The online schedule (`updates`, the ratio) starts after it."""
    takeover_terminal: bool = True
    """Store the policy step right before each human takeover as terminal (learners.replay.buffer.takeover_terminated):
    to the critic, drifting until someone steps in ends the episode with nothing rather than earning the value
    of the rescue. Within a chunk; a takeover on a chunk's first step leaves the previous chunk as it was."""

    def validate(self) -> None:
        require(self.offline_updates >= 0, "offline_updates", self.offline_updates, "must be >= 0")
        require(math.isfinite(self.updates_per_transition) and self.updates_per_transition >= 0,
                "updates_per_transition", self.updates_per_transition, "must be a finite number >= 0")
        for name in ("learning_starts", "max_ahead", "publish_every", "checkpoint_every", "keep_checkpoints",
                     "capacity", "demo_capacity", "success_window", "recv_batch"):
            require(getattr(self, name) >= 1, name, getattr(self, name), "must be >= 1")
        require(self.capacity >= 2 and self.demo_capacity >= 2, "capacity", self.capacity, "must be >= 2")
        require(self.max_env_steps >= 0, "max_env_steps", self.max_env_steps, "must be >= 0 (0: no limit)")
        require(0.0 <= self.demo_ratio <= 1.0, "demo_ratio", self.demo_ratio, "must be in [0, 1]")
        for name in ("log_every_s", "status_every_s", "plot_every_s"):
            require(getattr(self, name) > 0, name, getattr(self, name), "must be > 0")


class LearnerEndpointLike(Protocol):
    """What the learner needs from `robot_rl.transport.LearnerEndpoint` (ZeroMQ or in memory)."""

    address: str

    def recv_deliveries(self, timeout: float = 0.0, max_messages: int = 64) -> list[Delivery]: ...

    def ack(self, deliveries: Sequence[Delivery]) -> None: ...

    def publish_weights(self, version: int, arrays: Mapping[str, Any]) -> None: ...

    def report(self, *, block: bool = True, **stats: Any) -> bool: ...

    def stats(self) -> LearnerStats: ...

    def close(self) -> None: ...


def chunk_problem(chunk: TransitionChunk) -> str | None:
    """Why a received chunk must not be trained on (non-finite rewards, actions or float observations), or
    None."""
    if not np.all(np.isfinite(chunk.rewards)):
        return "non-finite rewards"
    if chunk.actions.dtype.kind == "f" and not np.all(np.isfinite(chunk.actions)):
        return "non-finite actions"
    for key, arr in chunk.observations.items():
        if arr.dtype.kind == "f" and not np.all(np.isfinite(arr)):
            return f"non-finite observation '{key}'"
    return None


def config_bytes(cfg: AgentConfig) -> np.ndarray:
    """The AgentConfig as a uint8 array of JSON (the CONFIG_ARRAY weights entry)."""
    return np.frombuffer(json.dumps(cfg.to_dict(), sort_keys=True).encode(), dtype=np.uint8).copy()


def config_from_bytes(arr: Any) -> AgentConfig:
    """Inverse of `config_bytes` (ConfigError on anything malformed)."""
    try:
        data = json.loads(np.asarray(arr, dtype=np.uint8).tobytes().decode())
    except (ValueError, UnicodeDecodeError) as err:
        raise ConfigError(f"weights carry a malformed {CONFIG_ARRAY}: {err}") from err
    if not isinstance(data, dict):
        raise ConfigError(f"weights carry a malformed {CONFIG_ARRAY}: not a JSON object")
    return AgentConfig.from_dict(data)


def check_learner_run_dir(out_dir: str | os.PathLike[str], resume: bool) -> Path | None:
    """The learner's run-directory check (robot_rl.run_dir.check_run_dir): a checkpoint or inbox chunks not yet
    covered by one make `out_dir` a run (RunExistsError without `resume`); a resume continues from the newest
    checkpoint (returned), or without one from the demos and the inbox (None)."""
    inbox = Path(out_dir) / INBOX_DIR
    pending = Inbox(inbox).indices() if not resume and inbox.is_dir() else []
    return check_run_dir(out_dir, resume, needs_checkpoint=False, metrics=False,
                         pending=[f"{len(pending)} inbox chunk(s)"] if pending else [])


# --------------------------------------------------------------------------------------------------- learner

class Learner:
    """One learner process's logic (see the module docstring). Single-threaded: call `step` in a loop."""

    def __init__(self, spec: EnvSpec, agent_cfg: AgentConfig, cfg: LearnerConfig, endpoint: LearnerEndpointLike,
                 out_dir: str | os.PathLike[str], *, demos: Sequence[Episode] = (), resume: bool = False,
                 clock: Callable[[], float] = time.monotonic, wall_clock: Callable[[], float] = time.time) -> None:
        self.spec, self.agent_cfg, self.cfg = spec, agent_cfg, cfg
        self.endpoint = endpoint
        self.out = Path(out_dir)
        self.clock, self.wall_clock = clock, wall_clock
        existing = check_learner_run_dir(self.out, resume)  # RunExistsError unless resuming
        self.out.mkdir(parents=True, exist_ok=True)
        self.agent = make_agent(spec, agent_cfg)
        self.online = ReplayBuffer(spec, cfg.capacity, seed=cfg.seed)
        self.demo = ReplayBuffer(spec, cfg.demo_capacity, seed=cfg.seed + 1)
        self.sampler = sampler_for(self.online, self.demo, cfg.demo_ratio, self.agent.cfg)
        rows = self.agent.cfg.samples_per_update
        self.batches = BatchSource(lambda: self.sampler.sample(rows), self.agent, self.sampler)  # GPU: prefetch
        self.inbox = Inbox(self.out / INBOX_DIR, fsync=cfg.inbox_fsync)
        self.outputs = LearnerOutputs(self.out, title=f"{spec.task} (learner)", tensorboard=cfg.tensorboard)
        self.ledger = SeqLedger()
        self.actors: dict[str, ActorRecord] = {}
        self.successes: collections.deque[float] = collections.deque(maxlen=cfg.success_window)
        self.returns: collections.deque[float] = collections.deque(maxlen=cfg.success_window)
        self.lengths: collections.deque[float] = collections.deque(maxlen=cfg.success_window)
        self.received = 0          # online transitions stored (deduplicated): the run's env_step
        self.episodes = 0
        self.duplicates = 0        # chunks dropped by the ledger (endpoint-level duplicates are in its stats)
        self.rejected = 0          # chunks refused for non-finite values
        self.interventions = 0
        self.updates = 0
        self.first_update_s: float | None = None  # seconds of the first update (JAX: tracing + XLA compilation)
        self.compiling = False  # the first update is compiling (torch.compile / JAX): status.json says so
        self.weights_version = 0
        self.inbox_index = 0       # last inbox file written
        self.demo_transitions = 0
        self._published_at_update = 0
        self._ckpt_received = 0
        self._ckpt_updates = -1
        self._update_means = UpdateMeans()
        self._last_metrics: dict[str, Any] = {}
        now = clock()
        self._t_start = now
        self._t_log = now
        self._t_status = -math.inf
        self._t_plot = now
        self._updates_at_log = 0
        self._updates_per_s = 0.0
        self._t_alive = -math.inf
        self._alive_actors = 1
        self.resumed_from: Path | None = None
        self.replayed_chunks = 0
        self.closed = False
        if resume and existing is not None:
            self._restore(existing)
        else:
            for ep in demos:
                try:
                    self.demo_transitions += self.demo.add_episode(ep)
                except ShapeError as err:
                    raise ShapeError(f"a demo episode does not match the task's spec ({spec.task}): {err}") from err
            if resume:  # crashed before its first checkpoint: everything acknowledged is in the inbox
                self._replay_inbox(after=0)
                log.info("learner: no checkpoint in %s; started over from the demos + %d inbox chunk(s)",
                         self.out, self.replayed_chunks)
        steps = cfg.max_env_steps - self.received if cfg.max_env_steps else cfg.capacity + cfg.demo_capacity
        log.info("learner: %s", attach_feature_caches(self.agent, [self.online, self.demo],
                                                      run_frames([self.online, self.demo], steps), seed=cfg.seed))
        self.offline_updates = 0
        """Updates of the offline phase (LearnerConfig.offline_updates) this run did before serving."""
        if not (resume and existing is not None) and cfg.offline_updates > 0:
            self._offline_phase()
        if self.updates > 0 or self.offline_updates > 0:
            self._publish()

    def _offline_phase(self) -> None:
        """LearnerConfig.offline_updates updates on the demo buffer alone (ReplayEmptyError without demos)."""
        from learners.training.online import LoopCounters, train_offline

        counters, n = LoopCounters(), self.cfg.offline_updates
        for row in train_offline(self.agent, self.demo, n, counters, report_every=max(1, n // 5)):
            log.info("learner: offline phase: %d / %d updates on %d demo transitions (critic loss %s)",
                     counters.offline_updates, n, len(self.demo), row.get("critic_loss"))
        self.offline_updates = counters.offline_updates

    # ------------------------------------------------------------------ schedule
    @property
    def target_updates(self) -> int:
        """Updates the ratio asks for given the transitions received so far."""
        n = self.received - self.cfg.learning_starts
        if n < 0 or self.cfg.updates_per_transition <= 0:
            return 0
        return math.floor(self.cfg.updates_per_transition * n + 1e-9)

    @property
    def env_step_budget(self) -> int:
        """Transitions the actors may have delivered before the learner must catch up (-1: no limit)."""
        cfg = self.cfg
        if cfg.updates_per_transition <= 0:
            budget = -1
        else:
            budget = cfg.learning_starts + math.ceil(self.updates / cfg.updates_per_transition) + cfg.max_ahead
        if cfg.max_env_steps:
            budget = cfg.max_env_steps if budget < 0 else min(budget, cfg.max_env_steps)
        return budget

    @property
    def done(self) -> bool:
        """max_env_steps reached and its updates done (never, without max_env_steps)."""
        return bool(self.cfg.max_env_steps) and self.received >= self.cfg.max_env_steps \
            and self.updates >= self.target_updates

    # ------------------------------------------------------------------ one iteration
    def step(self, max_wait_s: float = 0.05) -> dict[str, int]:
        """Receive what arrived (waiting up to `max_wait_s` when there is nothing to update), store it
        durably and acknowledge it, run at most one update if the ratio asks for one, then publish / report /
        log / checkpoint as due. Returns what happened ({"received": chunks, "updates": 0 or 1})."""
        behind = self.updates < self.target_updates
        batch = self.endpoint.recv_deliveries(timeout=0.0 if behind else max_wait_s,
                                              max_messages=self.cfg.recv_batch)
        stored = self.ingest(batch)
        did = 0
        if self.updates < self.target_updates and len(self.online) > 0:
            self._update()
            did = 1
        if self.updates - self._published_at_update >= self.cfg.publish_every:
            self._publish()
        self._report()
        now = self.clock()
        if now - self._t_status >= self.cfg.status_every_s:
            self._t_status = now
            self.write_status()
        if now - self._t_log >= self.cfg.log_every_s:
            self.log_metrics()
        if now - self._t_plot >= self.cfg.plot_every_s:
            self._t_plot = now
            self.plot()
        if self.received - self._ckpt_received >= self.cfg.checkpoint_every:
            self.checkpoint()
        return {"received": stored, "updates": did}

    def run(self, should_stop: Callable[[], bool] = lambda: False, max_wait_s: float = 0.05) -> None:
        """`step` until `done` or `should_stop()`."""
        while not self.done and not should_stop():
            self.step(max_wait_s)

    # ------------------------------------------------------------------ data
    def ingest(self, batch: Sequence[Delivery]) -> int:
        """Store new chunks (inbox file, ledger, replay), drop duplicates, acknowledge all; returns how many
        chunks were new."""
        new = 0
        handled: list[Delivery] = []
        try:
            for d in batch:
                if self._accept(d.actor_id, d.session, d.seq, d.msg.chunk, write=True):
                    new += 1
                handled.append(d)
        finally:
            self.endpoint.ack(handled)  # only what is durable (or known): a failed write leaves the rest unacked
        return new

    def _accept(self, actor_id: str, session: str, seq: int, chunk: TransitionChunk, write: bool) -> bool:
        end = seq + chunk.length
        rec = self.actors.setdefault(actor_id, ActorRecord.new(self.cfg.success_window))
        rec.last_seen = self.clock()
        problem = chunk_problem(chunk)
        if problem is not None:  # never train on it; acknowledged (resending would not fix it) and counted
            self.rejected += 1
            rec.rejected += 1
            if self.rejected & (self.rejected - 1) == 0:
                log.warning("learner: rejected seqs [%d, %d) of actor '%s': %s [#%d]", seq, end, actor_id, problem,
                            self.rejected)
            return False
        if self.ledger.overlaps(actor_id, session, seq, end):
            if not self.ledger.covers(actor_id, session, seq, end):
                log.warning("learner: actor '%s' sent seqs [%d, %d) partially overlapping stored ones; dropped",
                            actor_id, seq, end)
            self.duplicates += 1
            rec.duplicates += 1
            return False
        if write:
            self.inbox_index += 1
            self.inbox.write(self.inbox_index, actor_id, session, seq, chunk, task=self.spec.task)
        self.ledger.add(actor_id, session, seq, end)
        self._store(rec, chunk)
        return True

    def _store(self, rec: ActorRecord, chunk: TransitionChunk) -> None:
        if self.cfg.takeover_terminal and chunk.length > 1 and bool(np.any(chunk.intervention)):
            chunk = dataclasses.replace(chunk, terminated=takeover_terminated(chunk.terminated, chunk.truncated,
                                                                              chunk.intervention))
        self.online.add_episode(chunk)
        n_int = int(np.count_nonzero(chunk.intervention))
        if n_int:
            self.demo.add_episode(chunk, only_interventions=True)
            self.interventions += n_int
            rec.interventions += n_int
        self.received += chunk.length
        rec.transitions += chunk.length
        stats = chunk.stats
        if stats is not None and chunk.length and (bool(chunk.terminated[-1]) or bool(chunk.truncated[-1])):
            success = float(bool(stats.get("success", bool(chunk.success.any()))))
            ret = stats.get("return")
            ret = float(ret) if isinstance(ret, int | float) and math.isfinite(ret) else None
            length = stats.get("length")
            self.episodes += 1
            rec.episodes += 1
            self.successes.append(success)
            rec.successes.append(success)
            if ret is not None:
                self.returns.append(ret)
                rec.returns.append(ret)
            if isinstance(length, int | float):
                self.lengths.append(float(length))

    # ------------------------------------------------------------------ learning
    def _update(self) -> None:
        cfg = self.agent.cfg
        if self.updates == 0 and (cfg.compile or cfg.backend == "jax"):
            # the first update compiles (seconds to a minute) and blocks this loop: say so in status.json first
            self.compiling = True
            self.write_status()
        metrics = self.batches.update()  # a host batch, or one drawn on the JAX device (device_replay)
        self.compiling = False
        self.updates += 1
        if self.first_update_s is None:  # the JAX agent's first update traces and compiles
            compile_s = getattr(self.agent, "compile_s", None)
            self.first_update_s = None if compile_s is None else float(compile_s)
        self._update_means.add(metrics)

    def weights_arrays(self) -> dict[str, np.ndarray]:
        """What actors receive: the policy's trainable state plus the config and publish-time entries."""
        arrays = dict(self.agent.trainable_state())
        arrays[CONFIG_ARRAY] = config_bytes(self.agent_cfg)
        arrays[PUBLISHED_AT_ARRAY] = np.array([self.wall_clock()], dtype=np.float64)
        return arrays

    def _publish(self) -> None:
        self.weights_version += 1
        self.endpoint.publish_weights(self.weights_version, self.weights_arrays())
        self._published_at_update = self.updates

    def _report(self) -> None:
        now = self.clock()
        if now - self._t_alive >= 0.5:
            self._t_alive = now
            self._alive_actors = sum(1 for p in self.endpoint.stats().actors.values() if p.alive)
        self.endpoint.report(env_step=self.received, env_step_budget=self.env_step_budget, updates=self.updates,
                             weights_version=self.weights_version, episodes=self.episodes,
                             success_rate=mean_or_none(self.successes), actors=max(1, self._alive_actors),
                             t=self.wall_clock())

    # ------------------------------------------------------------------ outputs
    def status(self) -> dict[str, Any]:
        """The live summary (status.json): counters, rates, buffer sizes, per-actor stats."""
        try:
            ep_stats = self.endpoint.stats()
        except Exception:  # a closed endpoint still lets us write a final status
            ep_stats = None
        actors: dict[str, Any] = {}
        peers = ep_stats.actors if ep_stats is not None else {}
        for aid in sorted(set(self.actors) | set(peers)):
            actors[aid] = actor_status(self.actors.get(aid) or ActorRecord.new(self.cfg.success_window),
                                       peers.get(aid))
        elapsed = self.clock() - self._t_start
        return {
            "task": self.spec.task, "address": self.endpoint.address, "pid": os.getpid(),
            "env_step": self.received, "max_env_steps": self.cfg.max_env_steps, "episodes": self.episodes,
            "success_rate": mean_or_none(self.successes), "return": mean_or_none(self.returns),
            "updates": self.updates, "target_updates": self.target_updates, "updates_per_s": self._updates_per_s,
            "weights_version": self.weights_version, "online_size": len(self.online), "demo_size": len(self.demo),
            "demo_transitions": self.demo_transitions, "interventions": self.interventions,
            "duplicates": self.duplicates, "rejected": self.rejected,
            "errors": ep_stats.errors if ep_stats is not None else 0,
            "env_step_budget": self.env_step_budget, "elapsed_s": round(elapsed, 2), "done": self.done,
            "closed": self.closed, "resumed_from": str(self.resumed_from) if self.resumed_from else None,
            "replayed_chunks": self.replayed_chunks, "ledger": self.ledger.sessions(), "actors": actors,
            "first_update_s": self.first_update_s, "compiling": self.compiling,
            "time": self.wall_clock(),
        }

    def write_status(self) -> None:
        self.outputs.write_status(self.status())

    def log_metrics(self) -> dict[str, Any]:
        """Append one metrics row (metrics.jsonl + TensorBoard) and return it."""
        now = self.clock()
        dt = now - self._t_log
        if dt > 0:
            self._updates_per_s = (self.updates - self._updates_at_log) / dt
        self._t_log, self._updates_at_log = now, self.updates
        row: dict[str, Any] = {
            "env_step": self.received, "episodes": self.episodes, "success_rate": mean_or_none(self.successes),
            "return": mean_or_none(self.returns), "episode_length": mean_or_none(self.lengths), "updates": self.updates,
            "updates_per_s": self._updates_per_s, "weights_version": self.weights_version,
            "online_size": len(self.online), "demo_size": len(self.demo), "duplicates": self.duplicates,
            "interventions": self.interventions, "wall_s": now - self._t_start,
        }
        row.update(self._update_means.pop())
        self.outputs.write_metrics(row)
        self._last_metrics = row
        return row

    def plot(self) -> Path | None:
        """Redraw OUT/learning_curve.png from metrics.jsonl (None when matplotlib is missing)."""
        return self.outputs.plot()

    # ------------------------------------------------------------------ checkpoints
    def checkpoint(self) -> Path | None:
        """Save the run (agent, buffers, counters, ledger) atomically, then drop the inbox files it covers.
        Skipped when nothing changed since the last one."""
        if self.received == self._ckpt_received and self._ckpt_updates >= 0:
            return None  # nothing new (and its name would replace the only copy of what it covers)
        run = TrainingRun(self.agent, self.online, self.demo, counters=self._counters())
        extra = {"agent_config": self.agent_cfg.to_dict(), "learner_config": self.cfg.to_dict(),
                 "spec": self.spec.to_dict(), "ledger": self.ledger.to_json(),
                 "actors": {a: r.to_json() for a, r in self.actors.items()},
                 "successes": list(self.successes), "returns": list(self.returns), "lengths": list(self.lengths)}
        path = run.save(self.out / CHECKPOINTS_DIR, extra_meta=extra, keep=self.cfg.keep_checkpoints)
        self.inbox.delete_upto(self.inbox_index)
        self._ckpt_received, self._ckpt_updates = self.received, self.updates
        log.info("learner: checkpoint %s (env_step %d, updates %d)", path.name, self.received, self.updates)
        return path

    def _counters(self) -> dict[str, int]:
        return {"env_step": self.received, "episodes": self.episodes, "updates": self.updates,
                "weights_version": self.weights_version, "inbox_index": self.inbox_index,
                "duplicates": self.duplicates, "interventions": self.interventions,
                "demo_transitions": self.demo_transitions, "published_at_update": self._published_at_update}

    def _restore(self, path: Path) -> None:
        try:
            meta = json.loads((path / "meta.json").read_text())
        except (OSError, ValueError) as err:
            raise ConfigError(f"{path}: unreadable checkpoint meta.json ({err})") from err
        saved_cfg = meta.get("agent_config")
        if isinstance(saved_cfg, dict):
            fields = sorted(k for k, v in AgentConfig.from_dict(saved_cfg).to_dict().items()
                            if self.agent_cfg.to_dict().get(k) != v)
            if fields:
                raise ConfigError(f"{path}: the checkpoint was trained with a different agent config (differs in "
                                  f"{fields}); resume with the same options")
        saved_spec = meta.get("spec")
        if isinstance(saved_spec, dict):
            self.spec.require_equal(EnvSpec.from_dict(saved_spec), f"checkpoint {path}")
        run = TrainingRun(self.agent, self.online, self.demo)
        meta = run.restore(path)
        c = run.counters
        self.received, self.episodes, self.updates = c.get("env_step", 0), c.get("episodes", 0), c.get("updates", 0)
        self.weights_version, self.inbox_index = c.get("weights_version", 0), c.get("inbox_index", 0)
        self.duplicates, self.interventions = c.get("duplicates", 0), c.get("interventions", 0)
        self.demo_transitions = c.get("demo_transitions", 0)
        self._published_at_update = c.get("published_at_update", self.updates)
        self.ledger = SeqLedger.from_json(meta.get("ledger", {}))
        w = self.cfg.success_window
        self.actors = {a: ActorRecord.from_json(d, w) for a, d in dict(meta.get("actors", {})).items()}
        self.successes.extend(float(x) for x in meta.get("successes", []))
        self.returns.extend(float(x) for x in meta.get("returns", []))
        self.lengths.extend(float(x) for x in meta.get("lengths", []))
        self._ckpt_received, self._ckpt_updates = self.received, self.updates
        self._replay_inbox(after=self.inbox_index)
        self.resumed_from = path
        log.info("learner: resumed from %s (env_step %d, updates %d) + %d inbox chunk(s)", path.name,
                 self.received, self.updates, self.replayed_chunks)

    def _replay_inbox(self, after: int) -> None:
        """Re-ingest the durable chunks newer than the checkpoint (index > `after`); delete older leftovers
        (a crash between a checkpoint and its cleanup)."""
        self.inbox.delete_upto(after)
        for rec in self.inbox.records(after=after):
            self.inbox_index = max(self.inbox_index, rec.index)
            if self._accept(rec.actor_id, rec.session, rec.seq, rec.chunk, write=False):
                self.replayed_chunks += 1

    # ------------------------------------------------------------------ shutdown
    def close(self) -> None:
        """Final checkpoint, metrics row, plot and status; closes the TensorBoard writer (not the endpoint)."""
        if self.closed:
            return
        self.batches.close()
        self.log_metrics()
        self.checkpoint()
        self.closed = True
        self.write_status()
        self.plot()
        self.outputs.close()


def set_torch_threads(n: int) -> None:
    """Limit torch's intra-op threads (learner, actors and robot servers share a few cores)."""
    if n > 0:
        torch.set_num_threads(n)
