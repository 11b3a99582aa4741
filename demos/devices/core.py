"""The device-independent core of the teleop devices: axis shaping, bindings, and press edges -> a command.

Every hardware device turns its raw input into a `DeviceInput` with a pure function (the 6-D delta already
mapped, dead-zoned and scaled, plus the *actions* whose buttons/keys are held now), and a `CommandLatch`
turns successive `DeviceInput`s into `HumanCommand`s: press edges become events, the gripper and the
intervention toggle are latched.

Bindings are `(input, target)` pairs shared by all devices: `input` is a button index, an axis index or a
key name; `target` is a signed axis ("+x", "-rz", see `AXIS_TARGETS`) or an action (`ACTIONS`).

Usage::

    raw = np.array([0.05, -0.5, 1.0, 0.0, 0.0, 0.0])          # normalised device axes in [-1, 1]
    delta = apply_deadzone_and_scale(raw, cfg)                 # cfg has .deadzone and .scale (6,)
    latch = CommandLatch()
    cmd = latch.step(DeviceInput(delta, held=frozenset({"gripper_toggle"}), buttons_held=True), state)
    cmd.gripper   # +1.0: closed (the gripper was open), kept until the next toggle
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

import numpy as np

from envs.devices import HumanCommand
from robot_rl.config import require
from robot_rl.errors import ShapeError

AXES = ("x", "y", "z", "rx", "ry", "rz")
"""Output axes of the end-effector delta, base frame: translation xyz then rotation about x, y, z."""

AXIS_TARGETS = tuple(f"{sign}{axis}" for axis in AXES for sign in "+-")
"""Binding targets that drive an axis: "+x" adds the input to dx, "-x" subtracts it."""

EDGE_EVENTS = ("success", "failure", "rerecord", "quit")
"""Actions reported as a `HumanCommand` event once per press."""

ACTIONS = ("gripper_toggle", "gripper_close", "gripper_open", "intervene_toggle", *EDGE_EVENTS)
"""Binding targets that are buttons: gripper toggle / close / open, intervention toggle, the edge events."""


class AxisShaping(Protocol):
    """What `apply_deadzone_and_scale` reads from a device config."""

    @property
    def deadzone(self) -> float: ...

    @property
    def scale(self) -> tuple[float, ...]: ...


def axis_target(target: str) -> tuple[int, float] | None:
    """(axis index 0..5, sign +-1.0) for an axis target like "-ry"; None for an action."""
    if target in ACTIONS:
        return None
    if target not in AXIS_TARGETS:
        raise ValueError(f"unknown binding target {target!r}")
    return AXES.index(target[1:]), (1.0 if target[0] == "+" else -1.0)


def deadzone(values: np.ndarray, width: float) -> np.ndarray:
    """Per-element dead zone on values in [-1, 1]: |v| <= width -> 0, else rescaled so that the output rises
    continuously from 0 at the dead-zone edge to +-1 at full deflection. Non-finite values count as 0."""
    v = np.clip(np.nan_to_num(np.asarray(values, dtype=np.float64), nan=0.0, posinf=0.0, neginf=0.0), -1.0, 1.0)
    if width <= 0.0:
        return v
    mag = np.maximum(np.abs(v) - width, 0.0) / (1.0 - width)
    return np.sign(v) * mag


def shape_axes(raw: Any, deadzone_width: float, scale: Sequence[float]) -> np.ndarray:
    """(6,) raw axes in [-1, 1] -> dead zone (see `deadzone`) -> times `scale` (6,) -> clipped to [-1, 1]."""
    arr = np.asarray(raw, dtype=np.float64)
    if arr.shape != (6,):
        raise ShapeError(f"raw axes must have shape (6,), got {arr.shape}")
    return np.clip(deadzone(arr, deadzone_width) * np.asarray(scale, dtype=np.float64), -1.0, 1.0)


def apply_deadzone_and_scale(raw: Any, cfg: AxisShaping) -> np.ndarray:
    """(6,) raw axes in [-1, 1] -> (6,) delta in [-1, 1] with `cfg.deadzone` and per-axis `cfg.scale`."""
    return shape_axes(raw, cfg.deadzone, cfg.scale)


def map_axes(raw: Any, axis_map: Sequence[int], axis_sign: Sequence[float]) -> np.ndarray:
    """Reorder device axes into the base frame: out[i] = axis_sign[i] * raw[axis_map[i]], shape (6,)."""
    arr = np.asarray(raw, dtype=np.float64)
    if arr.shape != (6,):
        raise ShapeError(f"raw axes must have shape (6,), got {arr.shape}")
    return arr[np.asarray(axis_map, dtype=np.intp)] * np.asarray(axis_sign, dtype=np.float64)


# ----------------------------------------------------------------------------------------------- validation
def require_axis_shaping(cfg: Any) -> None:
    """Validate `deadzone` in [0, 1) and `scale`: 6 finite values >= 0."""
    require(isinstance(cfg.deadzone, int | float) and 0.0 <= cfg.deadzone < 1.0, "deadzone", cfg.deadzone,
            "must be a number in [0, 1)")
    require(_is_vector(cfg.scale, 6) and all(math.isfinite(s) and s >= 0 for s in cfg.scale), "scale",
            cfg.scale, "must be 6 finite numbers >= 0 (x, y, z, rx, ry, rz)")


def require_axis_map(cfg: Any) -> None:
    """Validate `axis_map` (6 device-axis indices 0..5) and `axis_sign` (6 values, each +1 or -1)."""
    require(isinstance(cfg.axis_map, tuple) and len(cfg.axis_map) == 6
            and all(isinstance(i, int) and not isinstance(i, bool) and 0 <= i < 6 for i in cfg.axis_map),
            "axis_map", cfg.axis_map, "must be 6 device-axis indices in 0..5 (one per output x, y, z, rx, ry, rz)")
    require(_is_vector(cfg.axis_sign, 6) and all(s in (-1, 1) for s in cfg.axis_sign), "axis_sign",
            cfg.axis_sign, "must be 6 values, each +1 or -1")


def require_bindings(field: str, bindings: Any, input_kind: str, targets: Iterable[str]) -> None:
    """Validate a tuple of (input, target) pairs: `input_kind` "index" (int >= 0) or "key" (lower-case name);
    every target in `targets`."""
    allowed = tuple(targets)
    require(isinstance(bindings, tuple), field, bindings, "must be a tuple of (input, target) pairs")
    for pair in bindings:
        require(isinstance(pair, tuple) and len(pair) == 2, field, pair, "each binding must be an (input, target) pair")
        src, target = pair
        if input_kind == "index":
            require(isinstance(src, int) and not isinstance(src, bool) and src >= 0, field, pair,
                    "the input must be an index >= 0")
        else:
            require(isinstance(src, str) and src != "" and src == src.lower(), field, pair,
                    "the key must be a non-empty lower-case key name (e.g. 'w', 'space', 'up')")
        require(target in allowed, field, pair, f"the target must be one of {', '.join(allowed)}")


def _is_vector(value: Any, n: int) -> bool:
    return (isinstance(value, tuple) and len(value) == n
            and all(isinstance(v, int | float) and not isinstance(v, bool) for v in value))


# ------------------------------------------------------------------------------------------- input/latch
@dataclasses.dataclass(frozen=True)
class DeviceInput:
    """A device's input now, before edge detection.

    delta_ee (6,): base-frame delta in [-1, 1], already mapped, dead-zoned and scaled.
    held: actions (`ACTIONS`) whose buttons/keys are down now or were pressed since the last poll.
    buttons_held: any button (or bound key) is down, mapped to an action or not.
    """

    delta_ee: np.ndarray
    held: frozenset[str] = frozenset()
    buttons_held: bool = False


class CommandLatch:
    """Turns successive `DeviceInput`s into `HumanCommand`s.

    - An action fires on its press edge (held now, not held on the previous step).
    - Gripper: "gripper_close" / "gripper_open" set the command to +1 / -1; "gripper_toggle" flips it. The
      command then stays until the next gripper press (the env keeps the gripper on 0, so it also survives the
      env's debounce). After `reset()` it is 0 (keep whatever the gripper does); the first toggle of an episode
      closes the gripper unless the robot state says it is closed (`gripper_width_m` below
      `open_width_m`), then it opens it.
    - "intervene_toggle" flips the intervention; while on, every command carries the "intervene" event and is
      `active` (a zero delta then means: hold still).
    - `active`: any axis is non-zero (outside the dead zone), a button is held, or the intervention is on.
    """

    def __init__(self, open_width_m: float = 0.07) -> None:
        self.open_width_m = float(open_width_m)
        self.reset()

    def reset(self) -> None:
        """Start of an episode: gripper back to 0 (keep), intervention off, no button counted as held."""
        self._prev: frozenset[str] = frozenset()
        self._gripper = 0.0
        self._intervening = False

    @property
    def gripper(self) -> float:
        """The latched gripper command: +1 close, -1 open, 0 keep."""
        return self._gripper

    @property
    def intervening(self) -> bool:
        """Whether the intervention toggle is on."""
        return self._intervening

    def step(self, inp: DeviceInput, state: Any = None) -> HumanCommand:
        """The command for this poll; `state` (a RobotState or None) only seeds the first gripper toggle."""
        pressed = inp.held - self._prev
        self._prev = inp.held
        if "gripper_toggle" in pressed:
            if self._gripper == 0.0:
                width = getattr(state, "gripper_width_m", None)
                closed_now = width is not None and math.isfinite(float(width)) and float(width) < self.open_width_m
                self._gripper = -1.0 if closed_now else 1.0
            else:
                self._gripper = -self._gripper
        if "gripper_close" in pressed:
            self._gripper = 1.0
        if "gripper_open" in pressed:
            self._gripper = -1.0
        if "intervene_toggle" in pressed:
            self._intervening = not self._intervening
        events = {e for e in EDGE_EVENTS if e in pressed}
        if self._intervening:
            events.add("intervene")
        delta = np.asarray(inp.delta_ee, dtype=np.float64)
        active = bool(np.any(delta != 0.0)) or inp.buttons_held or self._intervening
        return HumanCommand(delta_ee=delta.copy(), gripper=self._gripper, active=active, events=frozenset(events))
