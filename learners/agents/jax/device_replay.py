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

Tables: one per buffer, one row per buffer slot, padded to the buffer's capacity (shapes never change, so the function
compiles once; the row count is a traced scalar), with the list of valid slots the draws index. `refresh()` brings a
buffer's table up to date when it has taken transitions since the last refresh (ReplayBuffer.total_added): the first
time it copies every valid row; later it compares per-slot copies of what a row reads (valid flags, frame write
counters, actions, rewards and flags, Monte-Carlo returns) with the buffer's, and re-gathers and copies only the rows
that can have changed, scattered into the device table in place: a new transition, the n_step rows before it
(their n-step windows reach it), a relabelled one (terminate_last) and an episode's rows whose Monte-Carlo return
became known. The training loops (learners.replay.prefetch.BatchSource with AgentConfig.device_replay) refresh
before every update; between refreshes new transitions are not drawn. State observations only (images stay on
the host: ConfigError).

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
        self._snaps: dict[str, dict[str, np.ndarray]] = {}
        self._scatter_fn: Callable[..., Any] | None = None
        self.rows_copied = 0
        """Rows gathered on the host and copied to the device so far (all valid rows at the first refresh, then
        only those that can have changed)."""
        self.refresh()

    def _buffers(self) -> dict[str, ReplayBuffer]:
        bufs = {"online": self.sampler.online}
        if self.sampler.demo is not None:
            bufs["demo"] = self.sampler.demo
        return bufs

    def refresh(self) -> bool:
        """Bring every buffer's table up to date with its host buffer; True when any changed. The first call copies
        the whole table; later ones re-gather and copy only the rows that can have changed (`_dirty`), scattered into
        the device table in place, plus the list of valid slots the draws index."""
        changed = False
        for name, buf in self._buffers().items():
            if name in self._tables and self._added.get(name) == buf.total_added:
                continue
            with buf.lock:
                slots = np.flatnonzero(buf.valid)
                added = buf.total_added
                snap = _snapshot(buf)
                fresh = name not in self._tables
                dirty = slots if fresh else np.intersect1d(self._dirty(self._snaps[name], snap, buf.capacity), slots)
                rows = buf.gather(dirty, self.sampler.n_step) if dirty.size else None
            if fresh:
                table = self._table(rows, dirty, buf.capacity)
                self._tables[name] = self._jax.device_put(table, self.agent.device)
            elif rows is not None:
                self._tables[name] = self._scatter(self._tables[name], dirty, self._rows(rows))
            padded = np.zeros(buf.capacity, np.int32)
            padded[: slots.size] = slots
            self._tables[name]["slots"] = self._jax.device_put(padded, self.agent.device)
            self._counts[name] = self._jax.device_put(np.asarray(max(slots.size, 1), np.int32), self.agent.device)
            self._sizes[name], self._slots[name], self._added[name] = int(slots.size), slots, added
            self._snaps[name] = snap
            self.rows_copied += int(dirty.size)
            changed = True
        return changed

    def _dirty(self, old: Mapping[str, np.ndarray], new: Mapping[str, np.ndarray], capacity: int) -> np.ndarray:
        """Slots whose row can differ from the table's: a row reads its own slot and the next n_step slots
        (n-step chain, next frame), so every slot whose stored data changed and the n_step slots before it."""
        touched = np.zeros(capacity, bool)
        for key, arr in new.items():
            diff = old[key] != arr
            touched |= diff.reshape(capacity, -1).any(1) if diff.ndim > 1 else diff
        changed = np.flatnonzero(touched)
        back = np.arange(self.sampler.n_step + 1)
        return np.unique((changed[:, None] - back[None, :]) % capacity)

    def _rows(self, rows: Mapping[str, Any]) -> dict[str, np.ndarray]:
        cols = self.agent._batch(rows, any_rows=True)
        return {c: np.asarray(cols[c], np.float32) for c in TABLE_COLUMNS}

    def _scatter(self, table: dict[str, Any], slots: np.ndarray, rows: Mapping[str, np.ndarray]) -> dict[str, Any]:
        """table[c][slots] = rows[c] on the device, the slots padded to a power of two (one compilation per size
        bucket; the padding repeats the first row, an idempotent write)."""
        n = 1 << max(6, int(slots.size - 1).bit_length())
        pad = np.full(n, slots[0], np.int32)
        pad[: slots.size] = slots
        vals = {c: np.concatenate([v, np.repeat(v[:1], n - slots.size, 0)]) for c, v in rows.items()}
        if self._scatter_fn is None:
            def scatter(cols: dict[str, Any], at: Any, new: dict[str, Any]) -> dict[str, Any]:
                return {c: cols[c].at[at].set(new[c]) for c in cols}

            self._scatter_fn = self._jax.jit(scatter, donate_argnums=(0,))
        cols = {c: table[c] for c in TABLE_COLUMNS}
        return dict(self._scatter_fn(cols, pad, vals))

    def _table(self, rows: Mapping[str, Any] | None, slots: np.ndarray, capacity: int) -> dict[str, np.ndarray]:
        """The finished rows of a gathered batch at their slots, zero rows elsewhere (None: all zeros)."""
        dim, act = self.agent.layout.state_dim, self.agent.policy.action_dim
        shapes = {"state": (dim,), "next_state": (dim,), "actions": (act,)}
        out = {c: np.zeros((capacity, *shapes.get(c, ())), np.float32) for c in TABLE_COLUMNS}
        if rows is None:
            return out
        cols = self.agent._batch(rows, any_rows=True)
        if cols["state"] is None or cols["next_state"] is None:
            raise ShapeError("device replay needs a state vector in the observation")
        for c in TABLE_COLUMNS:
            out[c][slots] = cols[c]
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
        parts = [{c: tables[name][c][tables[name]["slots"][idx[name]]] for c in TABLE_COLUMNS}
                 for name in ("online", "demo") if name in idx]
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


def _snapshot(buf: ReplayBuffer) -> dict[str, np.ndarray]:
    """Copies of everything a gathered state row reads per slot, except the frames (their write counter instead)."""
    out = {"valid": buf.valid.copy(), "frame_gen": buf.frame_gen.copy(), "actions": buf.actions.copy(),
           "mc_returns": buf.mc_returns.copy(), "mc_valid": buf.mc_valid.copy()}
    out.update({f"fields/{k}": v.copy() for k, v in buf.fields.items()})
    return out


__all__ = ["TABLE_COLUMNS", "DeviceReplay"]
