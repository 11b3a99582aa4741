"""How an agent reads observations: which leaves are cameras, which form the state vector.

Any Box or (nested) Dict observation works: uint8 (H, W, C) leaves are cameras; every other leaf is flattened and
concatenated, in the spec's sorted slash-path order, into one float32 state vector.

An optional selection keeps only some state leaves, or some (flat) elements of them: entries "leaf" (all of it),
"leaf[i]" or "leaf[a:b]" (numpy-style, on the flattened leaf). Within a leaf the kept elements stay in their
order; leaves stay in spec order; leaves not named are dropped (cameras are unaffected). Replay buffers and
episode files keep the whole observation; only what the networks see changes.

Usage::

    layout = ObsLayout.from_spec(spec)
    images, state = layout.to_torch(obs, device, batched=False)   # {name: uint8 (1, H, W, C)}, float (1, D)
    images, state = layout.to_numpy(obs, batched=True)           # the same as numpy arrays (JAX backend)
    ObsLayout.from_spec(spec, select=("object", "state[0:3]")).state_dim   # twin reach: goal + TCP position = 6
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from robot_rl.errors import ConfigError, ShapeError
from robot_rl.specs import ArraySpec, EnvSpec, flatten_value, parse_select


@dataclasses.dataclass(frozen=True)
class ObsLayout:
    """Cameras (uint8 HxWxC leaves) and state leaves (everything else) of an observation spec."""

    cameras: tuple[ArraySpec, ...]
    state: tuple[ArraySpec, ...]
    state_index: tuple[tuple[int, ...] | None, ...] = ()
    """Per entry of `state`: the flat element indices kept (None = the whole leaf); empty = keep everything."""
    state_scale: float = 1.0
    """The state vector is multiplied by this (after the selection) before it reaches the networks."""

    @classmethod
    def from_spec(cls, spec: EnvSpec, select: Sequence[str] = (), state_scale: float = 1.0) -> ObsLayout:
        """The layout of `spec`; `select` (see the module docstring) keeps only some state leaves/elements;
        `state_scale` multiplies the state vector."""
        if not spec.observation:
            raise ShapeError("the observation spec has no entries")
        cameras = tuple(s for s in spec.observation if s.is_image)
        state = tuple(s for s in spec.observation if not s.is_image)
        if not select:
            return cls(cameras, state, (), float(state_scale))
        by_name = {s.name: s for s in state}
        kept: dict[str, set[int] | None] = {}
        for entry in select:
            leaf, a, b, is_slice = parse_select(entry)
            if leaf not in by_name:
                what = "a camera" if any(c.name == leaf for c in cameras) else "not a state leaf"
                hint = ("; the env adds it with the task file's observation.last_action = true"
                        if leaf == "last_action" else "")
                raise ConfigError(f"state selection {entry!r}: '{leaf}' is {what}; state leaves: "
                                  f"{sorted(by_name)}{hint}")
            n = math.prod(by_name[leaf].shape)
            if a is None and b is None and not is_slice:
                kept[leaf] = None
                continue
            if is_slice:
                idx = set(range(n)[slice(a, b)])
            else:
                assert a is not None
                if not -n <= a < n:
                    raise ConfigError(f"state selection {entry!r}: index {a} out of range for '{leaf}' ({n} values)")
                idx = {a % n}
            if not idx:
                raise ConfigError(f"state selection {entry!r} selects nothing from '{leaf}' ({n} values)")
            if leaf not in kept or kept[leaf] is not None:
                prev = kept.get(leaf)
                kept[leaf] = idx if prev is None else prev | idx
        leaves = tuple(s for s in state if s.name in kept)
        index = tuple(None if kept[s.name] is None else tuple(sorted(kept[s.name] or ())) for s in leaves)
        return cls(cameras, leaves, index, float(state_scale))

    def _index(self, i: int) -> tuple[int, ...] | None:
        return self.state_index[i] if self.state_index else None

    @property
    def state_dim(self) -> int:
        total = 0
        for i, s in enumerate(self.state):
            idx = self._index(i)
            total += math.prod(s.shape) if idx is None else len(idx)
        return total

    def flat(self, obs: Any, batched: bool) -> dict[str, Any]:
        """Flatten and check every leaf: shape (spec) or (B, spec) when batched; raises ShapeError naming it."""
        flat = flatten_value(obs)
        want = {s.name for s in self.cameras + self.state}
        missing = sorted(want - set(flat))
        if missing:
            raise ShapeError(f"observation is missing {missing}; got keys {sorted(flat)}")
        lead: int | None = None
        for s in self.cameras + self.state:
            shape = tuple(np.shape(flat[s.name]))
            body = shape[1:] if batched else shape
            if body != s.shape or (batched and len(shape) < 1):
                want_shape = ("B", *s.shape) if batched else s.shape
                raise ShapeError(f"observation '{s.name}': expected shape {want_shape}, got {shape}")
            if batched:
                if lead is None:
                    lead = shape[0]
                elif shape[0] != lead:
                    raise ShapeError(f"observation '{s.name}': batch size {shape[0]} != {lead}")
            if s.is_image and _dtype_of(flat[s.name]) not in (np.uint8, torch.uint8):
                raise ShapeError(f"camera '{s.name}' must be uint8, got {_dtype_of(flat[s.name])}")
        return flat

    def to_numpy(self, obs: Any, batched: bool) -> tuple[dict[str, np.ndarray], np.ndarray | None]:
        """The numpy twin of `to_torch` (for the JAX backend): ({camera: uint8 (B, H, W, C)}, float32 state
        (B, D) or None, selected and scaled); adds B=1 when not batched."""
        flat = self.flat(obs, batched)
        images = {s.name: np.asarray(flat[s.name]) if batched else np.asarray(flat[s.name])[None]
                  for s in self.cameras}
        state: np.ndarray | None = None
        if self.state:
            parts = []
            for i, s in enumerate(self.state):
                a = np.asarray(flat[s.name])
                a = a.reshape(a.shape[0] if batched else 1, -1)
                idx = self._index(i)
                parts.append((a if idx is None else a[:, list(idx)]).astype(np.float32, copy=False))
            state = parts[0] if len(parts) == 1 else np.concatenate(parts, axis=-1)
            if self.state_scale != 1.0:
                state = state * np.float32(self.state_scale)
        return images, state

    def to_torch(self, obs: Any, device: torch.device | str, batched: bool,
                 ) -> tuple[dict[str, torch.Tensor], torch.Tensor | None]:
        """({camera: uint8 (B, H, W, C)}, float32 state (B, D) or None); adds B=1 when not batched."""
        flat = self.flat(obs, batched)
        images: dict[str, torch.Tensor] = {}
        for s in self.cameras:
            t = torch.as_tensor(flat[s.name]).to(device, non_blocking=True)
            images[s.name] = t if batched else t.unsqueeze(0)
        state: torch.Tensor | None = None
        if self.state:
            parts = []
            for i, s in enumerate(self.state):
                t = torch.as_tensor(flat[s.name])
                t = t.reshape(t.shape[0] if batched else 1, -1)
                idx = self._index(i)
                if idx is not None:
                    t = t[:, list(idx)]
                parts.append(t.to(device=device, dtype=torch.float32, non_blocking=True))
            state = parts[0] if len(parts) == 1 else torch.cat(parts, dim=-1)
            if self.state_scale != 1.0:
                state = state * self.state_scale
        return images, state


def _dtype_of(x: Any) -> Any:
    if isinstance(x, torch.Tensor):
        return x.dtype
    return np.asarray(x).dtype.type


def nested(flat: Mapping[str, Any]) -> dict[str, Any]:
    """{slash/path: v} -> nested dicts (the inverse of robot_rl.specs.flatten_value for dict observations)."""
    out: dict[str, Any] = {}
    for key, v in flat.items():
        node = out
        parts = key.split("/")
        for p in parts[:-1]:
            node = node.setdefault(p, {})
        node[parts[-1]] = v
    return out
