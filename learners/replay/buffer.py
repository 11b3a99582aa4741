"""Replay buffers: uint8 images stored once per frame, vectorised numpy sampling, demo + online mixing (RLPD).

Layout: a ring of `capacity` slots. Slot i holds one observation frame (every leaf of the observation, images
as uint8) and, when `valid[i]`, the transition that starts there (action, reward, flags); that transition's
next observation is the frame in slot i + 1 (mod capacity). Consecutive steps of an episode therefore share
frames: next_obs is never a second copy. When an episode ends, its final next_obs keeps its own slot (not a valid
transition start) and the next episode starts in the slot after it. Writing a slot invalidates the transition
that started there; wraparound needs nothing else because slots are written strictly in ring order.

`add()` recognises a continuing stream by content: if the previous transition did not end its episode and the
new obs equals the stored next_obs, the frame is shared; otherwise a new segment starts (so an interrupted
stream, e.g. intervention segments routed to the demo buffer, stays correct).

Memory: about one observation's raw bytes per transition (plus one frame per episode and ~40 bytes of
action/reward/flags), versus 2 float32 copies (8x) in the anchor port.

Usage::

    online = ReplayBuffer(spec, capacity=200_000, seed=0)
    demo = ReplayBuffer(spec, capacity=50_000, seed=1)
    route_transition(online, demo, obs, action, reward, next_obs, terminated, truncated, intervention=True)
    sampler = MixedSampler(online, demo, demo_ratio=0.5)      # RLPD symmetric sampling
    sampler = sampler_for(online, demo, 0.5, agent.cfg)       # the same, with the agent's n_step and MC returns
    batch = sampler.sample(256)     # {"obs": {path: (256, ...)}, "next_obs": ..., "actions", "rewards", ...}
    online.save("replay_online.npz"); online.load("replay_online.npz")    # np.savez, allow_pickle=False
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import os
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from robot_rl.config import Config, require
from robot_rl.errors import RobotRLError, ShapeError
from robot_rl.specs import EnvSpec, flatten_value

Batch = dict[str, Any]


class ReplayEmptyError(RobotRLError, LookupError):
    """Sampling from a buffer that holds no valid transition."""


_SCALARS: dict[str, Any] = {
    "rewards": np.float32,
    "terminated": np.bool_,
    "truncated": np.bool_,
    "intervention": np.bool_,
    "grasp_penalty": np.float32,
}


@dataclasses.dataclass(frozen=True)
class ReplayConfig(Config):
    """Sizes of the online and demo buffers and the RLPD mix."""

    capacity: int = 200_000
    """Slots of the online buffer (one frame each: ~one transition per slot)."""
    demo_capacity: int = 100_000
    """Slots of the demo buffer (demos + interventions)."""
    demo_ratio: float = 0.5
    """Fraction of each batch drawn from the demo buffer when it has data (RLPD symmetric sampling: 0.5)."""

    def validate(self) -> None:
        require(self.capacity >= 2, "capacity", self.capacity, "must be >= 2")
        require(self.demo_capacity >= 2, "demo_capacity", self.demo_capacity, "must be >= 2")
        require(0.0 <= self.demo_ratio <= 1.0, "demo_ratio", self.demo_ratio, "must be in [0, 1]")


_F = TypeVar("_F", bound=Callable[..., Any])


def _locked(method: _F) -> _F:
    """Run a ReplayBuffer method under the buffer's lock (writers and a prefetch thread's sampling never
    interleave: learners.replay.prefetch)."""

    @functools.wraps(method)
    def wrapper(self: ReplayBuffer, *args: Any, **kwargs: Any) -> Any:
        with self.lock:
            return method(self, *args, **kwargs)

    return wrapper  # type: ignore[return-value]


class ReplayBuffer:
    """Frame-sharing ring buffer of transitions for one EnvSpec (see the module docstring). Thread-safe: writes,
    sampling and state snapshots hold `lock` (a re-entrant lock)."""

    def __init__(self, spec: EnvSpec, capacity: int, seed: int = 0) -> None:
        if capacity < 2:
            raise ShapeError(f"replay capacity must be >= 2, got {capacity}")
        if len(spec.action.shape) != 1:
            raise ShapeError(f"replay needs a 1-D action, got shape {spec.action.shape}")
        self.spec = spec
        self.lock = threading.RLock()
        self.capacity = int(capacity)
        self.obs_specs = {s.name: s for s in spec.observation}
        self.frames: dict[str, np.ndarray] = {
            name: np.zeros((self.capacity, *s.shape), dtype=np.dtype(s.dtype)) for name, s in self.obs_specs.items()
        }
        self.actions = np.zeros((self.capacity, spec.action.shape[0]), dtype=np.float32)
        self.fields: dict[str, np.ndarray] = {k: np.zeros(self.capacity, dtype=t) for k, t in _SCALARS.items()}
        self.valid = np.zeros(self.capacity, dtype=np.bool_)
        self.rng = np.random.default_rng(seed)
        self._last = -1          # slot of the most recently written frame
        self._open = False       # the frame at _last is the next_obs of a transition whose episode goes on
        self._filled = 0         # slots ever written (capped at capacity)
        self._count = 0          # valid transitions
        self._added = 0          # transitions ever added
        self._last_added = -1    # slot of the most recently added transition
        self.mc_discount: float | None = None  # set by track_returns(): Monte-Carlo returns are kept per slot
        self.mc_returns = np.zeros(self.capacity, dtype=np.float32)
        self.mc_valid = np.zeros(self.capacity, dtype=np.bool_)
        self.frame_gen = np.zeros(self.capacity, dtype=np.int64)
        """Per slot: how many times its frame was written (a derived-data cache compares it with its own copy)."""
        self.feature_cache: Any = None
        """learners.replay.feature_cache.FeatureCache (attach_feature_caches): gather() adds its cached backbone
        outputs of the rows' frames as `obs_features` / `next_obs_features`."""

    # ------------------------------------------------------------------ writing
    def __len__(self) -> int:
        return self._count

    @property
    def total_added(self) -> int:
        return self._added

    def _flat_checked(self, obs: Any, what: str) -> dict[str, np.ndarray]:
        flat = flatten_value(obs)
        if set(flat) != set(self.obs_specs):
            raise ShapeError(f"{what} keys {sorted(flat)} != expected {sorted(self.obs_specs)}")
        out = {}
        for name, s in self.obs_specs.items():
            arr = np.asarray(flat[name])
            if arr.shape != s.shape:
                raise ShapeError(f"{what} '{name}': expected shape {s.shape}, got {arr.shape}")
            if s.is_image and arr.dtype != np.uint8:
                raise ShapeError(f"{what} '{name}': camera frames must be uint8, got {arr.dtype}")
            out[name] = arr
        return out

    def _write_frame(self, slot: int, flat: Mapping[str, np.ndarray]) -> None:
        if self.valid[slot]:
            self.valid[slot] = False
            self._count -= 1
        for name, arr in flat.items():
            self.frames[name][slot] = arr
        self.frame_gen[slot] += 1
        self._filled = min(self._filled + 1, self.capacity) if slot >= self._filled else self._filled

    def _frame_equals(self, slot: int, flat: Mapping[str, np.ndarray]) -> bool:
        return all(np.array_equal(self.frames[name][slot], arr) for name, arr in flat.items())

    @_locked
    def add(self, obs: Any, action: Any, reward: float, next_obs: Any, terminated: bool, truncated: bool,
            intervention: bool = False, grasp_penalty: float = 0.0) -> int:
        """Store one transition (obs nested dict / array as the env returned it); returns its slot."""
        flat_obs = self._flat_checked(obs, "obs")
        flat_next = self._flat_checked(next_obs, "next_obs")
        act = np.asarray(action, dtype=np.float32).reshape(-1)
        if act.shape != self.actions.shape[1:]:
            raise ShapeError(f"action: expected shape {self.actions.shape[1:]}, got {np.shape(action)}")
        if self._last >= 0 and self._open and self._frame_equals(self._last, flat_obs):
            slot = self._last                      # obs is the previous transition's next_obs: share the frame
        else:
            slot = (self._last + 1) % self.capacity  # new segment (keeps a previous final frame in place)
            self._write_frame(slot, flat_obs)
        nxt = (slot + 1) % self.capacity
        self._write_frame(nxt, flat_next)
        self.actions[slot] = act
        f = self.fields
        f["rewards"][slot] = reward
        f["terminated"][slot] = terminated
        f["truncated"][slot] = truncated
        f["intervention"][slot] = intervention
        f["grasp_penalty"][slot] = grasp_penalty
        self.mc_valid[slot] = False
        if not self.valid[slot]:
            self.valid[slot] = True
            self._count += 1
        self._last = nxt
        self._open = not (terminated or truncated)
        self._added += 1
        self._last_added = slot
        if terminated and self.mc_discount is not None:
            self._fill_returns(slot)
        return slot

    @_locked
    def terminate_last(self) -> bool:
        """Relabel the most recently added transition as `terminated` (no bootstrap past it) and end its segment;
        e.g. the policy step after which a human took over (learners.training.online, `takeover_terminal`). False when
        there is nothing to relabel (no transition yet, or it already ended its episode)."""
        s = self._last_added
        if s < 0 or not self.valid[s] or self.fields["terminated"][s] or self.fields["truncated"][s]:
            return False
        self.fields["terminated"][s] = True
        self._open = False
        if self.mc_discount is not None:
            self._fill_returns(s)
        return True

    # ------------------------------------------------------------------ Monte-Carlo returns
    @_locked
    def track_returns(self, discount: float) -> None:
        """Keep each transition's Monte-Carlo return: the discounted sum of the rewards from it to the end of its
        stored episode, known (and `gather` reports it: `mc_returns`, `mc_valid`) once that episode has
        *terminated*; a truncated or still running episode, or a broken stream, leaves its rows without one (the
        tail after a time limit is unknown). Computes it for what the buffer already holds, then keeps it up to
        date as episodes end (one backward pass per terminated episode). AgentConfig.mc_lower_bound uses it."""
        if not (0.0 < discount <= 1.0):
            raise ShapeError(f"track_returns: discount must be in (0, 1], got {discount}")
        self.mc_discount = float(discount)
        self.mc_valid[:] = False
        for s in np.flatnonzero(self.valid & self.fields["terminated"]):
            self._fill_returns(int(s))

    def _fill_returns(self, end: int) -> None:
        """Walk back from the terminated transition at slot `end` through the transitions that lead into it (a
        valid slot right before one that did not end its episode: gather's continuation rule, backwards)."""
        gamma = float(self.mc_discount or 1.0)
        rewards, ended = self.fields["rewards"], self.fields["terminated"] | self.fields["truncated"]
        g, s = 0.0, end
        for _ in range(self.capacity):
            g = float(rewards[s]) + gamma * g
            self.mc_returns[s], self.mc_valid[s] = g, True
            prev = (s - 1) % self.capacity
            if prev == end or not self.valid[prev] or ended[prev]:
                break
            s = prev

    @_locked
    def end_segment(self) -> None:
        """Force the next `add` to start a new segment (e.g. after an actor reconnects)."""
        self._open = False

    @_locked
    def add_episode(self, episode: Any, only_interventions: bool = False) -> int:
        """Add every step of a robot_rl.episodes.Episode (or anything with .observations {path: (T+1, ...)},
        .actions, .rewards, .terminated, .truncated, .intervention); returns the number of transitions added."""
        t = int(np.shape(episode.actions)[0])
        obs = episode.observations
        added = 0
        self.end_segment()
        for i in range(t):
            if only_interventions and not bool(episode.intervention[i]):
                self.end_segment()
                continue
            penalty = float(getattr(episode, "grasp_penalty", np.zeros(t))[i])
            self.add({k: v[i] for k, v in obs.items()}, episode.actions[i], float(episode.rewards[i]),
                     {k: v[i + 1] for k, v in obs.items()}, bool(episode.terminated[i]), bool(episode.truncated[i]),
                     bool(episode.intervention[i]), penalty)
            added += 1
        self.end_segment()
        return added

    # ------------------------------------------------------------------ sampling
    @_locked
    def sample_indices(self, n: int) -> np.ndarray:
        """`n` uniformly random valid transition slots (with replacement); with a feature cache, only transitions
        whose frames it has encoded (it encodes new frames in batches: learners.replay.feature_cache)."""
        if self._count == 0:
            raise ReplayEmptyError("cannot sample: the replay buffer holds no transition")
        if self.feature_cache is not None:
            self.feature_cache.prepare()
        idx = self.rng.integers(0, self._filled, size=n)
        for _ in range(20):  # rejection of the few invalid slots (one per episode), vectorised
            bad = ~self._usable(idx)
            nbad = int(bad.sum())
            if nbad == 0:
                return idx
            idx[bad] = self.rng.integers(0, self._filled, size=nbad)
        usable = np.flatnonzero(self._usable(np.arange(self._filled)))
        if usable.size == 0:  # (a cache with nothing encoded yet) encode everything now
            self.feature_cache.refresh()
            usable = np.flatnonzero(self._usable(np.arange(self._filled)))
        bad = ~self._usable(idx)
        idx[bad] = usable[self.rng.integers(0, usable.size, size=int(bad.sum()))]
        return idx

    def _usable(self, idx: np.ndarray) -> np.ndarray:
        ok = self.valid[idx]
        return ok if self.feature_cache is None else ok & self.feature_cache.ready(idx)

    @_locked
    def gather(self, idx: np.ndarray, n_step: int = 1, images: bool = True) -> Batch:
        """The transitions at slots `idx` as a batch dict of numpy arrays.

        n_step > 1 adds multi-step returns: each row follows its episode for up to `n_step` transitions (fewer where
        the episode ends or the stored stream breaks), `next_obs` is the frame after the last of them, `terminated`
        says whether the last one terminated, and the extra keys hold the pieces of the return: `n_rewards` and
        `n_grasp_penalty` (B, n_step) float32 (0 past the chain's end) and `n_steps` (B,) int64 (1..n_step). The
        first-step `rewards`, `grasp_penalty`, `truncated` and `intervention` are kept as they are.
        After `track_returns(discount)`: `mc_returns` (B,) float32, each row's Monte-Carlo return, and `mc_valid`
        (B,) bool, whether its episode has terminated (else mc_returns is meaningless).
        images=False leaves the feature cache's cameras out of obs / next_obs (it adds their cached features)."""
        if n_step < 1:
            raise ShapeError(f"n_step must be >= 1, got {n_step}")
        idx = np.asarray(idx)
        f = self.fields
        frames = self.frames
        if not images and self.feature_cache is not None:  # the cached update never reads the cameras' images
            frames = {k: v for k, v in frames.items() if k not in self.feature_cache.plan.shapes}
        batch: Batch = {"obs": {name: arr[idx] for name, arr in frames.items()}, "actions": self.actions[idx]}
        for name, arr in f.items():
            batch[name] = arr[idx]
        last = idx.copy()
        if n_step > 1:
            ended = f["terminated"] | f["truncated"]
            n_rewards = np.zeros((idx.size, n_step), np.float32)
            n_penalty = np.zeros((idx.size, n_step), np.float32)
            n_rewards[:, 0], n_penalty[:, 0] = f["rewards"][idx], f["grasp_penalty"][idx]
            steps = np.ones(idx.size, np.int64)
            going = ~ended[idx]
            for j in range(1, n_step):
                cand = (idx + j) % self.capacity
                # the next transition continues this one iff it starts at this one's next frame: a valid slot right
                # after a transition that did not end (a new segment always leaves the old final frame invalid)
                going &= self.valid[cand]
                last = np.where(going, cand, last)
                steps += going
                n_rewards[:, j] = np.where(going, f["rewards"][cand], 0.0)
                n_penalty[:, j] = np.where(going, f["grasp_penalty"][cand], 0.0)
                going &= ~ended[cand]
            batch["terminated"] = f["terminated"][last]
            batch.update(n_rewards=n_rewards, n_grasp_penalty=n_penalty, n_steps=steps)
        if self.mc_discount is not None:  # track_returns(): each row's Monte-Carlo return, where known
            batch["mc_returns"], batch["mc_valid"] = self.mc_returns[idx], self.mc_valid[idx]
        nxt = (last + 1) % self.capacity
        batch["next_obs"] = {name: arr[nxt] for name, arr in frames.items()}
        if self.feature_cache is not None:
            batch.update(self.feature_cache.lookup(idx, nxt))
        return batch

    @_locked
    def sample(self, n: int, n_step: int = 1, images: bool | None = None) -> Batch:
        """`n` random transitions (sample_indices + gather); images=None: without the feature cache's cameras when
        a cache is attached (a training batch: learners.replay.feature_cache), unless the cache keeps them."""
        if images is None:
            images = self.feature_cache is None or bool(self.feature_cache.keep_images)
        return self.gather(self.sample_indices(n), n_step, images)

    # ------------------------------------------------------------------ memory / state
    def nbytes(self) -> int:
        """Bytes held by the buffer's arrays (allocated capacity, not just the filled part)."""
        total = sum(a.nbytes for a in self.frames.values()) + self.actions.nbytes + self.valid.nbytes
        return int(total + sum(a.nbytes for a in self.fields.values()))

    @_locked
    def state_arrays(self) -> dict[str, np.ndarray]:
        """The buffer's filled part and counters as plain arrays (no objects; np.savez-able)."""
        n = self._filled
        out: dict[str, np.ndarray] = {f"frames/{k}": v[:n] for k, v in self.frames.items()}
        out["actions"] = self.actions[:n]
        out.update({f"fields/{k}": v[:n] for k, v in self.fields.items()})
        out["valid"] = self.valid[:n]
        meta = {"capacity": self.capacity, "last": self._last, "open": self._open, "filled": self._filled,
                "count": self._count, "added": self._added, "last_added": self._last_added,
                "spec": self.spec.to_dict(),
                "rng": self.rng.bit_generator.state}
        out["meta_json"] = np.array(json.dumps(meta))
        return out

    @_locked
    def load_state_arrays(self, arrays: Mapping[str, Any]) -> None:
        """Restore `state_arrays()`; ShapeError (nothing changed) if the spec, capacity or shapes differ."""
        try:
            meta = json.loads(str(np.asarray(arrays["meta_json"])))
        except (KeyError, ValueError) as err:
            raise ShapeError(f"replay state: missing or malformed meta_json ({err})") from err
        if meta.get("capacity") != self.capacity:
            raise ShapeError(f"replay state capacity {meta.get('capacity')} != this buffer's {self.capacity}")
        other = EnvSpec.from_dict(meta["spec"])
        diff = self.spec.diff(other)
        if diff:
            raise ShapeError(f"replay state was saved for a different spec (differs in {diff})")
        n = int(meta["filled"])
        want: dict[str, tuple[tuple[int, ...], Any]] = {
            f"frames/{k}": ((n, *v.shape[1:]), v.dtype) for k, v in self.frames.items()}
        want["actions"] = ((n, self.actions.shape[1]), self.actions.dtype)
        want.update({f"fields/{k}": ((n,), v.dtype) for k, v in self.fields.items()})
        want["valid"] = ((n,), self.valid.dtype)
        for key, (shape, dtype) in want.items():
            if key not in arrays:
                raise ShapeError(f"replay state is missing '{key}'")
            arr = np.asarray(arrays[key])
            if arr.shape != shape or arr.dtype != dtype:
                raise ShapeError(f"replay state '{key}': expected {shape} {dtype}, got {arr.shape} {arr.dtype}")
        for k, v in self.frames.items():
            v[:n] = arrays[f"frames/{k}"]
        self.actions[:n] = arrays["actions"]
        for k, v in self.fields.items():
            v[:n] = arrays[f"fields/{k}"]
        self.valid[:] = False
        self.valid[:n] = arrays["valid"]
        self.frame_gen += 1  # every frame may have changed: derived caches recompute
        self._last, self._open, self._filled = int(meta["last"]), bool(meta["open"]), n
        self._count, self._added = int(self.valid.sum()), int(meta["added"])
        self._last_added = int(meta.get("last_added", -1))
        self.rng.bit_generator.state = meta["rng"]
        if self.mc_discount is not None:  # derived data: recomputed, not stored
            self.track_returns(self.mc_discount)

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write `state_arrays()` with np.savez atomically (temporary file + rename)."""
        p = Path(path)
        tmp = p.with_name(f".{p.name}.tmp")
        with open(tmp, "wb") as f:
            arrays: dict[str, Any] = self.state_arrays()
            np.savez(f, **arrays)
            f.flush()
            os.fsync(f.fileno())
        tmp.replace(p)
        return p

    def load(self, path: str | os.PathLike[str]) -> None:
        with np.load(path, allow_pickle=False) as z:
            self.load_state_arrays({k: z[k] for k in z.files})


def concat_batches(parts: list[Batch]) -> Batch:
    """Row-wise concatenation of batches with the same keys (nested obs dicts included; torch tensors stay tensors)."""
    if len(parts) == 1:
        return parts[0]
    out: Batch = {}
    for key, val in parts[0].items():
        if isinstance(val, Mapping):
            out[key] = {k: _concat([p[key][k] for p in parts]) for k in val}
        else:
            out[key] = _concat([p[key] for p in parts])
    return out


def _concat(arrays: list[Any]) -> Any:
    """np.concatenate, or torch.cat for tensors (a feature cache on the device: they stay there)."""
    if hasattr(arrays[0], "device") and hasattr(arrays[0], "dim"):
        import torch

        return torch.cat(arrays)
    return np.concatenate(arrays)


class MixedSampler:
    """RLPD symmetric sampling: round(demo_ratio x n) rows from the demo buffer, the rest from the online buffer
    (all from whichever buffer has data while the other is empty); `n_step` > 1 gathers multi-step returns
    (ReplayBuffer.gather); `mc_discount` makes both buffers track Monte-Carlo returns (ReplayBuffer.track_returns)
    so that every row carries `mc_returns` / `mc_valid`."""

    def __init__(self, online: ReplayBuffer, demo: ReplayBuffer | None = None, demo_ratio: float = 0.5,
                 n_step: int = 1, mc_discount: float | None = None) -> None:
        if not 0.0 <= demo_ratio <= 1.0:
            raise ShapeError(f"demo_ratio must be in [0, 1], got {demo_ratio}")
        if n_step < 1:
            raise ShapeError(f"n_step must be >= 1, got {n_step}")
        if demo is not None and online.spec.diff(demo.spec):
            raise ShapeError(f"demo and online buffers have different specs: {online.spec.diff(demo.spec)}")
        self.online, self.demo, self.demo_ratio, self.n_step = online, demo, demo_ratio, n_step
        if mc_discount is not None:  # rows carry their Monte-Carlo returns (ReplayBuffer.track_returns)
            for buf in (online, demo):
                if buf is not None:
                    buf.track_returns(mc_discount)

    def counts(self, n: int) -> tuple[int, int]:
        """(online rows, demo rows) for a batch of n."""
        have_demo = self.demo is not None and len(self.demo) > 0
        have_online = len(self.online) > 0
        n_demo = math.floor(n * self.demo_ratio + 0.5) if have_demo else 0
        if not have_online:
            n_demo = n if have_demo else 0
        return n - n_demo, n_demo

    def sample(self, n: int) -> Batch:
        n_online, n_demo = self.counts(n)
        parts = []
        if n_online:
            parts.append(self.online.sample(n_online, self.n_step))
        if n_demo and self.demo is not None:
            parts.append(self.demo.sample(n_demo, self.n_step))
        if not parts:
            raise ReplayEmptyError("cannot sample: both the online and the demo buffer are empty")
        return concat_batches(parts)


def mc_floor(batch: Mapping[str, Any], n: int, enabled: bool) -> np.ndarray:
    """(n,) float32 lower bounds of a batch's critic targets (AgentConfig.mc_lower_bound): the rows' Monte-Carlo
    returns where `mc_valid`, -inf elsewhere and everywhere when not `enabled`. ShapeError when enabled and the
    batch carries no returns (its sampler must track them: `sampler_for` / `MixedSampler(mc_discount=...)`) or
    their shapes are not (n,)."""
    floor = np.full(n, -np.inf, np.float32)
    if not enabled:
        return floor
    if "mc_returns" not in batch or "mc_valid" not in batch:
        raise ShapeError("mc_lower_bound is on but the batch has no 'mc_returns' / 'mc_valid': sample it with "
                         "learners.replay.buffer.sampler_for(...) or MixedSampler(..., mc_discount=gamma)")
    g = np.asarray(batch["mc_returns"], np.float32).reshape(-1)
    ok = np.asarray(batch["mc_valid"], bool).reshape(-1)
    if g.shape != (n,) or ok.shape != (n,):
        raise ShapeError(f"batch 'mc_returns' / 'mc_valid': expected ({n},), got {g.shape} / {ok.shape}")
    return np.where(ok & np.isfinite(g), g, floor).astype(np.float32)


def sampler_for(online: ReplayBuffer, demo: ReplayBuffer | None, demo_ratio: float, agent_cfg: Any) -> MixedSampler:
    """The MixedSampler an agent config asks for: its `n_step` rows and, with `mc_lower_bound`, Monte-Carlo returns
    at its `discount` (any object with those attributes; missing ones mean 1-step rows without returns)."""
    mc = float(agent_cfg.discount) if getattr(agent_cfg, "mc_lower_bound", False) else None
    return MixedSampler(online, demo, demo_ratio, int(getattr(agent_cfg, "n_step", 1)), mc_discount=mc)


def takeover_terminated(terminated: Any, truncated: Any, intervention: Any) -> np.ndarray:
    """`terminated` (T,) bool with each policy step that a human takeover follows marked terminal: step t-1 when
    intervention[t] starts a takeover (intervention[t-1] false) and step t-1 did not already end the episode.
    The rule behind learners.training.online's and the learner's `takeover_terminal` for a stored run of consecutive
    steps
    (a takeover at step 0 refers to a step outside the run and is left alone)."""
    term = np.array(terminated, dtype=bool, copy=True).reshape(-1)
    trunc = np.asarray(truncated, dtype=bool).reshape(-1)
    human = np.asarray(intervention, dtype=bool).reshape(-1)
    if not term.shape == trunc.shape == human.shape:
        raise ShapeError(f"terminated/truncated/intervention lengths differ: {term.shape} {trunc.shape} {human.shape}")
    starts = np.flatnonzero(human[1:] & ~human[:-1])  # t - 1 for each takeover start t >= 1
    keep = ~(term[starts] | trunc[starts])
    term[starts[keep]] = True
    return term


def route_transition(online: ReplayBuffer, demo: ReplayBuffer | None, obs: Any, action: Any, reward: float,
                     next_obs: Any, terminated: bool, truncated: bool, intervention: bool = False,
                     grasp_penalty: float = 0.0) -> tuple[str, ...]:
    """HIL-SERL routing: every transition goes to the online buffer; interventions (the human's action) go to
    the demo buffer too. Returns the names of the buffers written ('online', 'demo')."""
    online.add(obs, action, reward, next_obs, terminated, truncated, intervention, grasp_penalty)
    if intervention and demo is not None:
        demo.add(obs, action, reward, next_obs, terminated, truncated, intervention, grasp_penalty)
        return ("online", "demo")
    return ("online",)
