"""Observation / action spec types: what an env produces and accepts, as plain comparable data.

A spec is derived from gymnasium spaces (duck-typed, so this module does not import gymnasium), sent in
handshakes, and checked against live arrays.

Usage::

    spec = EnvSpec.from_spaces("twin-reach", env.observation_space, env.action_space, control_hz=10.0)
    spec.check_observation(obs)            # ShapeError naming the key on a wrong shape/dtype
    spec.diff(EnvSpec.from_dict(peer))     # [] when equal, else the differing field names
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any

import numpy as np

from robot_rl.errors import ConfigError, ShapeError, SpecMismatchError


@dataclasses.dataclass(frozen=True)
class ArraySpec:
    """One array: `name` (slash path in a nested dict observation), shape, dtype and optional bounds."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    low: float | None = None
    high: float | None = None

    @property
    def is_image(self) -> bool:
        """uint8 arrays of shape (H, W, C) are camera images."""
        return self.dtype == "uint8" and len(self.shape) == 3

    def check(self, value: Any) -> None:
        """Raise `ShapeError` unless `value` is an ndarray of this shape and dtype."""
        arr = np.asarray(value)
        if arr.shape != self.shape or arr.dtype != np.dtype(self.dtype):
            raise ShapeError(
                f"'{self.name}': expected shape {self.shape} dtype {self.dtype}, got {arr.shape} {arr.dtype}"
            )

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "shape": list(self.shape), "dtype": self.dtype, "low": self.low,
                "high": self.high}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ArraySpec:
        return cls(str(d["name"]), tuple(int(x) for x in d["shape"]), str(d["dtype"]),
                   None if d.get("low") is None else float(d["low"]),
                   None if d.get("high") is None else float(d["high"]))

    @classmethod
    def from_box(cls, name: str, box: Any) -> ArraySpec:
        """From a gymnasium Box (uses `.shape`, `.dtype`, `.low`, `.high`); bounds kept if uniform."""
        low = np.asarray(box.low)
        high = np.asarray(box.high)
        lo = float(low.flat[0]) if low.size and np.all(low == low.flat[0]) and np.isfinite(low.flat[0]) else None
        hi = float(high.flat[0]) if high.size and np.all(high == high.flat[0]) and np.isfinite(high.flat[0]) else None
        return cls(name, tuple(int(s) for s in box.shape), str(np.dtype(box.dtype)), lo, hi)


def flatten_space(space: Any, prefix: str = "") -> list[ArraySpec]:
    """Flatten a (nested) Dict space of Boxes into ArraySpecs named by slash paths, in sorted key order."""
    sub = getattr(space, "spaces", None)
    if isinstance(sub, Mapping):
        out: list[ArraySpec] = []
        for key in sorted(sub):
            out.extend(flatten_space(sub[key], f"{prefix}{key}/"))
        return out
    if not hasattr(space, "shape") or not hasattr(space, "low"):
        raise ShapeError(f"unsupported space at '{prefix.rstrip('/') or '<root>'}': {space!r} (Box or Dict only)")
    return [ArraySpec.from_box(prefix.rstrip("/") or "obs", space)]


def flatten_value(value: Any, prefix: str = "") -> dict[str, Any]:
    """Flatten a (nested) dict observation into {slash_path: array}."""
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key in sorted(value):
            out.update(flatten_value(value[key], f"{prefix}{key}/"))
        return out
    return {prefix.rstrip("/") or "obs": value}


@dataclasses.dataclass(frozen=True)
class EnvSpec:
    """Everything two processes must agree on to exchange observations and actions for a task."""

    task: str
    observation: tuple[ArraySpec, ...]
    action: ArraySpec
    control_hz: float

    @classmethod
    def from_spaces(cls, task: str, observation_space: Any, action_space: Any, control_hz: float) -> EnvSpec:
        return cls(task, tuple(flatten_space(observation_space)), ArraySpec.from_box("action", action_space),
                   float(control_hz))

    @property
    def cameras(self) -> tuple[ArraySpec, ...]:
        return tuple(s for s in self.observation if s.is_image)

    def check_observation(self, obs: Any) -> None:
        """Raise `ShapeError` naming the key if `obs` does not match this spec (missing/extra keys too)."""
        flat = flatten_value(obs)
        want = {s.name for s in self.observation}
        if set(flat) != want:
            raise ShapeError(f"observation keys {sorted(flat)} != expected {sorted(want)}")
        for s in self.observation:
            s.check(flat[s.name])

    def check_action(self, action: Any) -> None:
        self.action.check(action)

    def to_dict(self) -> dict[str, Any]:
        return {"task": self.task, "observation": [s.to_dict() for s in self.observation],
                "action": self.action.to_dict(), "control_hz": self.control_hz}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> EnvSpec:
        try:
            return cls(str(d["task"]), tuple(ArraySpec.from_dict(s) for s in d["observation"]),
                       ArraySpec.from_dict(d["action"]), float(d["control_hz"]))
        except (KeyError, TypeError, ValueError) as err:
            raise SpecMismatchError(f"malformed spec: {err!r}", ["<malformed>"]) from err

    def diff(self, other: EnvSpec) -> list[str]:
        """Names of the fields that differ (e.g. ['task', 'observation/images/front'])."""
        out = []
        if self.task != other.task:
            out.append("task")
        if self.control_hz != other.control_hz:
            out.append("control_hz")
        mine = {s.name: s for s in self.observation}
        theirs = {s.name: s for s in other.observation}
        for name in sorted(set(mine) | set(theirs)):
            if mine.get(name) != theirs.get(name):
                out.append(f"observation/{name}")
        if self.action != other.action:
            out.append("action")
        return out

    def require_equal(self, other: EnvSpec, what: str = "peer") -> None:
        """Raise `SpecMismatchError` naming every differing field."""
        fields = self.diff(other)
        if fields:
            raise SpecMismatchError(f"spec mismatch with {what}: differing field(s) {fields}", fields)


_SELECT_RE = re.compile(r"^(?P<leaf>[^\[\]]+?)(\[(?P<a>-?\d*)(?P<colon>:)?(?P<b>-?\d*)\])?$")


def parse_select(entry: str) -> tuple[str, int | None, int | None, bool]:
    """A state selection entry (AgentConfig.state_select, a task file's observation.state): 'leaf' / 'leaf[i]' /
    'leaf[a:b]' -> (leaf, a, b, is_slice); ConfigError on anything else."""
    m = _SELECT_RE.match(entry.strip())
    if m is None or (m.group(2) is not None and not m.group("colon") and not m.group("a")):
        raise ConfigError(f"state selection entry {entry!r}: expected 'leaf', 'leaf[i]' or 'leaf[a:b]'")
    a = int(m.group("a")) if m.group("a") else None
    b = int(m.group("b")) if m.group("b") else None
    return m.group("leaf").strip(), a, b, bool(m.group("colon"))
