"""How an agent reads observations: which leaves are cameras, which form the state vector.

Any Box or (nested) Dict observation works: uint8 (H, W, C) leaves are cameras; every other leaf is flattened and
concatenated, in the spec's sorted slash-path order, into one float32 state vector.

Usage::

    layout = ObsLayout.from_spec(spec)
    images, state = layout.to_torch(obs, device, batched=False)   # {name: uint8 (1, H, W, C)}, float (1, D)
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from robot_rl.errors import ShapeError
from robot_rl.specs import ArraySpec, EnvSpec, flatten_value


@dataclasses.dataclass(frozen=True)
class ObsLayout:
    """Cameras (uint8 HxWxC leaves) and state leaves (everything else) of an observation spec."""

    cameras: tuple[ArraySpec, ...]
    state: tuple[ArraySpec, ...]

    @classmethod
    def from_spec(cls, spec: EnvSpec) -> ObsLayout:
        if not spec.observation:
            raise ShapeError("the observation spec has no entries")
        return cls(tuple(s for s in spec.observation if s.is_image),
                   tuple(s for s in spec.observation if not s.is_image))

    @property
    def state_dim(self) -> int:
        return sum(math.prod(s.shape) for s in self.state)

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
            for s in self.state:
                t = torch.as_tensor(flat[s.name])
                t = t.reshape(t.shape[0] if batched else 1, -1)
                parts.append(t.to(device=device, dtype=torch.float32, non_blocking=True))
            state = parts[0] if len(parts) == 1 else torch.cat(parts, dim=-1)
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
