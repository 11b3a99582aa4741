"""The actor's transition chunks: steps collected into preallocated arrays in the wire layout
(`robot_rl.wire.TransitionChunk`: observations T+1 rows, per-step arrays T rows), handed over without a copy and
recycled once nothing (the chunk, encoded frames, the endpoint's resend buffer) holds them any more.

Usage::

    b = ChunkBuilder(spec, max_steps=100)         # pool_size=3 recycled array sets
    b.start(obs, episode=0, step=0)
    b.add(action, reward, terminated, truncated, intervention, success, next_obs)
    chunk = b.take(stats={"return": 1.0})         # hands the arrays over; b.start(...) again for the next
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Mapping
from typing import Any

import numpy as np

from robot_rl.errors import ConfigError, ShapeError
from robot_rl.specs import EnvSpec, flatten_value
from robot_rl.wire import TransitionChunk


@dataclasses.dataclass(eq=False)
class _ArraySet:
    """One chunk's worth of arrays (the wire layout of TransitionChunk)."""

    obs: dict[str, np.ndarray]
    actions: np.ndarray
    rewards: np.ndarray
    flags: dict[str, np.ndarray]

    def all(self) -> list[np.ndarray]:
        return [*self.obs.values(), self.actions, self.rewards, *self.flags.values()]

    def _refcounts(self) -> list[int]:
        return [sys.getrefcount(a) for a in self.all()]

    def touch(self) -> None:
        """Write every page (np.zeros maps them lazily: the control loop should never fault them in), then
        record the reference counts the arrays have while nothing outside this set holds them."""
        for a in self.all():
            a.fill(1)
        del a  # the loop variable would count as a holder
        self._free_refs = self._refcounts()

    def unreferenced(self) -> bool:
        """True when no view, chunk or exported buffer (memoryview, zmq frame) refers to any of the arrays."""
        return self._refcounts() == self._free_refs


class ChunkBuilder:
    """Collects steps into preallocated arrays in the wire layout (obs T+1 rows, per-step T rows).

    Usage::

        b = ChunkBuilder(spec, max_steps=100)         # pool_size=3 recycled array sets
        b.start(obs, episode=0, step=0)
        b.add(action, reward, terminated, truncated, intervention, success, next_obs)
        chunk = b.take(stats={"return": 1.0})      # hands the arrays over; b.start(...) again for the next
    """

    def __init__(self, spec: EnvSpec, max_steps: int, pool_size: int = 3) -> None:
        if not isinstance(pool_size, int) or pool_size < 1:
            raise ConfigError(f"ChunkBuilder: pool_size must be an int >= 1, got {pool_size!r}")
        self.spec, self.max_steps, self.pool_size = spec, int(max_steps), pool_size
        self._obs_specs = {s.name: s for s in spec.observation}
        self.length = 0
        self.episode = 0
        self.first_step = 0
        self.started = False
        self.sets_allocated = 0
        """Array sets allocated so far (each first touched, page by page, at allocation)."""
        # Recycled array sets. Writing into freshly allocated memory costs a page fault per page the first time
        # (on virtual machines a few ms per fresh 2 MB region: measured 4 ms p99 for 98 KB image writes into
        # fresh memory vs 0.08 ms into reused memory), so the builder writes into sets it allocated and touched
        # up front, and takes a lent set back only once nothing (chunk, encoded frames, resend buffer) holds it.
        self._pool: list[_ArraySet] = [self._new_set() for _ in range(min(2, pool_size))]
        self._use(self._pool[0])

    def _new_set(self) -> _ArraySet:
        n = self.max_steps
        obs = {name: np.zeros((n + 1, *s.shape), np.dtype(s.dtype)) for name, s in self._obs_specs.items()}
        arrays = _ArraySet(obs=obs, actions=np.zeros((n, *self.spec.action.shape), np.dtype(self.spec.action.dtype)),
                           rewards=np.zeros(n, np.float32),
                           flags={k: np.zeros(n, bool) for k in ("terminated", "truncated", "intervention", "success")})
        arrays.touch()
        self.sets_allocated += 1
        return arrays

    def _use(self, arrays: _ArraySet) -> None:
        self._set = arrays
        self.obs, self.actions, self.rewards, self.flags = arrays.obs, arrays.actions, arrays.rewards, arrays.flags

    def _next_set(self) -> _ArraySet:
        """A pooled set nothing else references, else a fresh one (pooled while the pool has room)."""
        for arrays in self._pool:
            if arrays is not self._set and arrays.unreferenced():
                return arrays
        fresh = self._new_set()
        if len(self._pool) < self.pool_size:
            self._pool.append(fresh)
        return fresh

    def _write_obs(self, row: int, obs: Any) -> None:
        flat = flatten_value(obs)
        if len(flat) != len(self._obs_specs):
            raise ShapeError(f"observation keys {sorted(flat)} != spec keys {sorted(self._obs_specs)}")
        for name, arr in self.obs.items():
            src = flat.get(name)
            if isinstance(src, np.ndarray) and src.dtype == arr.dtype and src.shape == arr.shape[1:] \
                    and src.ndim >= 1 and src.flags.c_contiguous and src.nbytes:
                # a memcpy that keeps the GIL: numpy's copy of an image row releases it, and getting it back
                # waits for whichever thread took it (measured: 2-8 ms on 5% of 10 Hz steps; this: < 0.5 ms)
                arr[row].data.cast("B")[:] = src.data.cast("B")
                continue
            try:
                arr[row] = flat[name]
            except (KeyError, ValueError) as err:
                raise ShapeError(f"observation '{name}' does not fit the spec {self._obs_specs[name]}: {err}") \
                    from err

    @property
    def full(self) -> bool:
        return self.length >= self.max_steps

    def start(self, obs: Any, episode: int, step: int) -> None:
        """Begin a chunk whose first observation is `obs` (step index `step` of episode `episode`)."""
        self._write_obs(0, obs)
        self.length, self.episode, self.first_step, self.started = 0, episode, step, True

    def add(self, action: np.ndarray, reward: float, terminated: bool, truncated: bool, intervention: bool,
            success: bool, next_obs: Any) -> None:
        if not self.started or self.full:
            raise ShapeError("ChunkBuilder.add: start() first and take() when full")
        t = self.length
        self.actions[t] = action
        self.rewards[t] = reward
        f = self.flags
        f["terminated"][t], f["truncated"][t] = terminated, truncated
        f["intervention"][t], f["success"][t] = intervention, success
        self._write_obs(t + 1, next_obs)
        self.length = t + 1

    def take(self, stats: Mapping[str, Any] | None = None) -> TransitionChunk:
        """The collected steps as a chunk: views of this builder's arrays, which it then swaps for a set nothing
        references any more (the chunk's arrays are never written again while anything holds them)."""
        t = self.length
        if t < 1:
            raise ShapeError("ChunkBuilder.take: no steps collected")
        f = self.flags
        chunk = TransitionChunk(observations={k: v[: t + 1] for k, v in self.obs.items()},
                                actions=self.actions[:t], rewards=self.rewards[:t], terminated=f["terminated"][:t],
                                truncated=f["truncated"][:t], intervention=f["intervention"][:t],
                                success=f["success"][:t], episode=self.episode, step=self.first_step,
                                stats=dict(stats) if stats is not None else None)
        self._use(self._next_set())
        self.started = False
        self.length = 0
        return chunk
