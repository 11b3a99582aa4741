"""State replay on the JAX device: the JAX agent samples its batches inside its jitted update (no host copy).

`agent.update(sampler.sample(rows))` gathers 2,048-5,120 rows in numpy, checks them, computes their reward terms
and copies them host-to-device on every update; on a GPU that host work, not the update, bounded our JAX backend
(0.42x the bare JAX reference on an H100). `DeviceReplay` keeps the transitions of a MixedSampler's buffers on the
agent's JAX device as tables of finished rows (state, next state after the row's n steps, action, n-step return,
bootstrap weight gamma^k (1 - terminated), grasp-penalty return, intervention, Monte-Carlo floor: exactly the
columns JaxSACAgent._batch makes of a sampled batch) and `update()` runs ONE jitted function that draws the row
indices with jax.random (uniform over each buffer's valid transitions, with replacement, as
ReplayBuffer.sample_indices; online rows then demo rows in MixedSampler's proportions), gathers them on the device
and runs the agent's update (learners.agents.jax.update.update_core) on them. Per update only the metrics come back.

Tables: one per buffer, padded to the buffer's capacity (shapes never change, so the function compiles once; the
row count is a traced scalar). `refresh()` rebuilds a buffer's table from the host buffer when it has taken
transitions since the last refresh (ReplayBuffer.total_added), re-gathering every valid row: n-step windows and
Monte-Carlo returns of unfinished episodes change as the episode goes on, so rows are not final when added. A
learner calls it every so many updates (each refresh is one gather + one host-to-device copy of the buffer's valid
rows, not of one batch); between refreshes new transitions are not drawn (the same delay a learner that receives
transitions in chunks has). State observations only (images stay on the host: ConfigError).

Random draws come from the agent's key (checkpointed with the agent), split for the indices, so a run is
reproducible, but its batches differ from a host sampler's. `update_rows(idx, draws)` takes the rows and the
random numbers given (tests: the same update as `JaxSACAgent.update_with_draws` on the host batch of those rows).

Usage::

    replay = DeviceReplay(agent, sampler)      # agent: JaxSACAgent; sampler: learners.replay.buffer.MixedSampler
    for _ in range(updates):
        metrics = replay.update()              # indices drawn and rows gathered on the device
        if new_transitions_arrived:
            replay.refresh()
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from learners.agents.jax.agent import JaxSACAgent
from learners.agents.jax.update import draws_from_key, update_core
from learners.replay.buffer import MixedSampler, ReplayBuffer
from robot_rl.errors import ConfigError, ShapeError

TABLE_COLUMNS = ("state", "next_state", "actions", "returns", "bootstrap", "gp_returns", "intervention",
                 "target_floor")
"""Columns of a device table (JaxSACAgent._batch's names): state, next_state (N, D), actions (N, A), the rest (N,)."""


class DeviceReplay:
    """A MixedSampler's buffers as device tables, sampled inside the JAX agent's jitted update (see the module)."""

    def __init__(self, agent: JaxSACAgent, sampler: MixedSampler) -> None:
        if agent.spec.cameras:
            raise ConfigError("device replay holds state observations only; this agent's observation has cameras "
                              "(sample on the host: agent.update(sampler.sample(rows)))")
        self.agent, self.sampler = agent, sampler
        self._jax = agent._jax
        self._tables: dict[str, dict[str, Any]] = {}
        self._counts: dict[str, Any] = {}
        self._sizes: dict[str, int] = {}
        self._slots: dict[str, np.ndarray] = {}
        self._added: dict[str, int] = {}
        self._fns: dict[tuple[int, int], Callable[..., Any]] = {}
        self._given: dict[tuple[int, int], Callable[..., Any]] = {}
        self.refresh()

    def _buffers(self) -> dict[str, ReplayBuffer]:
        bufs = {"online": self.sampler.online}
        if self.sampler.demo is not None:
            bufs["demo"] = self.sampler.demo
        return bufs

    def refresh(self) -> bool:
        """Rebuild the table of every buffer that took transitions since the last refresh; True when any did."""
        changed = False
        for name, buf in self._buffers().items():
            if name in self._tables and self._added.get(name) == buf.total_added:
                continue
            with buf.lock:
                slots = np.flatnonzero(buf.valid)
                added = buf.total_added
                rows = buf.gather(slots, self.sampler.n_step) if slots.size else None
            table = self._table(rows, buf.capacity)
            self._tables[name] = self._jax.device_put(table, self.agent.device)
            self._counts[name] = self._jax.device_put(np.asarray(max(slots.size, 1), np.int32), self.agent.device)
            self._sizes[name], self._slots[name], self._added[name] = int(slots.size), slots, added
            changed = True
        return changed

    def _table(self, rows: Mapping[str, Any] | None, capacity: int) -> dict[str, np.ndarray]:
        """The finished rows of a gathered batch, padded with zero rows to `capacity` (None: all zeros)."""
        dim, act = self.agent.layout.state_dim, self.agent.policy.action_dim
        shapes = {"state": (dim,), "next_state": (dim,), "actions": (act,)}
        out = {c: np.zeros((capacity, *shapes.get(c, ())), np.float32) for c in TABLE_COLUMNS}
        if rows is None:
            return out
        cols = self.agent._batch(rows, any_rows=True)
        n = cols["actions"].shape[0]
        if cols["state"] is None or cols["next_state"] is None:
            raise ShapeError("device replay needs a state vector in the observation")
        for c in TABLE_COLUMNS:
            out[c][:n] = cols[c]
        return out

    def counts(self) -> tuple[int, int]:
        """(online rows, demo rows) of one update's batch (MixedSampler.counts at the agent's batch)."""
        return self.sampler.counts(self.agent.cfg.samples_per_update)

    def sizes(self) -> dict[str, int]:
        """Valid transitions per table at the last refresh."""
        return dict(self._sizes)

    def _gather(self, tables: Mapping[str, Any], idx: Mapping[str, Any]) -> dict[str, Any]:
        """The batch of rows idx[name] of each table, online rows first (MixedSampler's order)."""
        jnp = self._jax.numpy
        parts = [{c: tables[name][c][idx[name]] for c in TABLE_COLUMNS} for name in ("online", "demo") if name in idx]
        batch: dict[str, Any] = {c: jnp.concatenate([p[c] for p in parts]) for c in TABLE_COLUMNS}
        return dict(batch, images={}, next_images={})

    def _split(self) -> tuple[int, int]:
        n_online, n_demo = self.counts()
        if n_online + n_demo == 0 or all(self._sizes.get(k, 0) == 0 for k in ("online", "demo")):
            raise ShapeError("device replay: both buffers are empty (refresh after adding transitions)")
        return n_online, n_demo

    def _function(self, split: tuple[int, int]) -> Callable[..., Any]:
        """The jitted draw + gather + update for one (online, demo) row split (compiled once per split)."""
        if split in self._fns:
            return self._fns[split]
        jax, st, n_rows = self._jax, self.agent._st, self.agent.cfg.samples_per_update
        names = [(name, n) for name, n in zip(("online", "demo"), split, strict=True) if n > 0]

        def sampled(state: dict[str, Any], frozen: Any, tables: Any, counts: Any) -> tuple[Any, Any]:
            key, sub = jax.random.split(state["key"])
            keys = jax.random.split(sub, len(names))
            idx = {name: jax.random.randint(k, (n,), 0, counts[name]) for k, (name, n) in zip(keys, names,
                                                                                              strict=True)}
            key, draws = draws_from_key(key, st, n_rows)
            return update_core(dict(state, key=key), frozen, self._gather(tables, idx), draws, st)

        self._fns[split] = fn = jax.jit(sampled, donate_argnums=(0,))
        return fn

    def update(self) -> dict[str, float]:
        """One agent update on a batch drawn and gathered on the device; float metrics."""
        split = self._split()
        tables = {name: self._tables[name] for name, n in zip(("online", "demo"), split, strict=True) if n > 0}
        counts = {name: self._counts[name] for name in tables}
        return self.agent.run_update(self._function(split), tables, counts)

    def update_rows(self, idx: Mapping[str, Any], draws: Mapping[str, Any]) -> dict[str, float]:
        """One update on the given table rows ({'online': (n,) int, 'demo': (m,) int}, online rows first) with the
        given random numbers (JaxSACAgent.update_with_draws's); the agent's key is not advanced."""
        jax, st = self._jax, self.agent._st
        split = (len(idx.get("online", ())), len(idx.get("demo", ())))
        if split not in self._given:
            def given(state: dict[str, Any], frozen: Any, tables: Any, rows: Any, dr: Any) -> tuple[Any, Any]:
                return update_core(state, frozen, self._gather(tables, rows), dr, st)

            self._given[split] = jax.jit(given)
        rows = {k: np.asarray(v, np.int32) for k, v in idx.items() if len(v)}
        tables = {name: self._tables[name] for name in rows}
        dr = {"noise": np.asarray(draws["noise"], np.float32), "members": np.asarray(draws["members"], np.int32),
              "actor_noise": np.asarray(draws["actor_noise"], np.float32), "shifts": None, "dropout": None}
        return self.agent.run_update(self._given[split], tables, rows, dr)

    def host_rows(self, idx: Mapping[str, Any]) -> dict[str, Any]:
        """The host batch of the same table rows (ReplayBuffer.gather of their slots, online rows first)."""
        from learners.replay.buffer import concat_batches

        bufs = self._buffers()
        parts = [bufs[name].gather(self._slots[name][np.asarray(idx[name])], self.sampler.n_step)
                 for name in ("online", "demo") if name in idx and len(idx[name])]
        return concat_batches(parts)


__all__ = ["TABLE_COLUMNS", "DeviceReplay"]
