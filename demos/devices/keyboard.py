"""The keyboard as a teleop device (pynput listener; keys are read globally, whichever window has focus).

Pure core: `keys_to_command(held, cfg) -> DeviceInput` maps the set of held key names through the config's
bindings; `KeyState` tracks held keys and presses shorter than a poll (thread-safe, fed by the listener or by
anything else, e.g. a GUI); `pynput_key_name(key)` names a pynput key. The adapter `KeyboardTeleop` starts a
`pynput.keyboard.Listener` (needs a display: X11 on Linux) unless `listen=False`.

Default keys: w/s or up/down arrows = +x/-x (away from you / towards you), a/d or left/right arrows = +y/-y,
e/q or page up/down = +z/-z, i/k = +rx/-rx, j/l = +ry/-ry, u/o = +rz/-rz; space = gripper toggle,
tab = intervention toggle, enter = success, backspace = failure, r = rerecord, esc = quit.

Usage::

    dev = KeyboardTeleop(KeyboardConfig(scale=(0.5,) * 6))
    dev.open()               # MissingExtraError (naming the 'teleop' extra) without pynput or a display
    cmd = dev.poll(state)
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterable
from typing import Any

import numpy as np

from demos.devices.core import (
    ACTIONS,
    AXIS_TARGETS,
    CommandLatch,
    DeviceInput,
    axis_target,
    require_axis_shaping,
    require_bindings,
    shape_axes,
)
from envs.devices import HumanCommand
from robot_rl.config import Config
from robot_rl.extras import optional_import

_DEFAULT_KEYS: tuple[tuple[str, str], ...] = (
    ("w", "+x"), ("s", "-x"), ("up", "+x"), ("down", "-x"),
    ("a", "+y"), ("d", "-y"), ("left", "+y"), ("right", "-y"),
    ("e", "+z"), ("q", "-z"), ("page_up", "+z"), ("page_down", "-z"),
    ("i", "+rx"), ("k", "-rx"), ("j", "+ry"), ("l", "-ry"), ("u", "+rz"), ("o", "-rz"),
    ("space", "gripper_toggle"), ("tab", "intervene_toggle"), ("enter", "success"), ("backspace", "failure"),
    ("r", "rerecord"), ("esc", "quit"),
)


@dataclasses.dataclass(frozen=True)
class KeyboardConfig(Config):
    """Keyboard bindings and per-axis speed. Keys are lower-case characters or pynput key names ('space',
    'enter', 'up', 'page_up', 'f1', ...)."""

    keys: tuple[tuple[str, str], ...] = _DEFAULT_KEYS
    """(key, target) pairs: a signed axis ("+x") driven at full speed while held, or an action."""
    scale: tuple[float, ...] = (0.5, 0.5, 0.5, 0.5, 0.5, 0.5)
    """Per-output-axis speed of a held key (x, y, z, rx, ry, rz), in [0, 1] of the env's action scale."""
    deadzone: float = 0.0
    """Keys are on/off; kept for the shared axis shaping (must stay in [0, 1))."""
    gripper_open_width_m: float = 0.07
    """Only used by gripper toggles (see CommandLatch)."""

    def validate(self) -> None:
        require_axis_shaping(self)
        require_bindings("keys", self.keys, "key", ACTIONS + AXIS_TARGETS)


def keys_to_command(held: Iterable[str], cfg: KeyboardConfig) -> DeviceInput:
    """The device input for the set of `held` key names: each bound axis key adds +-1 to its axis (opposite
    keys cancel), then per-axis `scale`, clipped to [-1, 1]; bound action keys become held actions. Unbound
    keys are ignored (they do not make the command active)."""
    keys = set(held)
    raw = np.zeros(6, dtype=np.float64)
    actions: set[str] = set()
    any_bound = False
    for key, target in cfg.keys:
        if key not in keys:
            continue
        any_bound = True
        i_sign = axis_target(target)
        if i_sign is None:
            actions.add(target)
        else:
            raw[i_sign[0]] += i_sign[1]
    delta = shape_axes(np.clip(raw, -1.0, 1.0), cfg.deadzone, cfg.scale)
    return DeviceInput(delta_ee=delta, held=frozenset(actions), buttons_held=any_bound)


def pynput_key_name(key: Any) -> str | None:
    """The name of a pynput key: its printable character lower-cased ('W' -> 'w', ' ' -> 'space'), else the
    special key's name ('enter', 'up'), else '<vk>' for a bare virtual-key code; None if it has none."""
    char = getattr(key, "char", None)
    if isinstance(char, str) and len(char) == 1 and char.isprintable():
        return "space" if char == " " else char.lower()
    name = getattr(key, "name", None)
    if isinstance(name, str) and name:
        return name.lower()
    vk = getattr(key, "vk", None)
    if isinstance(vk, int):
        return f"<{vk}>"
    return None


class KeyState:
    """Held keys plus keys pressed since the last `take()` (a tap between two polls still counts). Thread-safe:
    `press` / `release` may be called from a listener thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: set[str] = set()
        self._tapped: set[str] = set()

    def press(self, name: str | None) -> None:
        if name:
            with self._lock:
                self._held.add(name)
                self._tapped.add(name)

    def release(self, name: str | None) -> None:
        if name:
            with self._lock:
                self._held.discard(name)

    def release_all(self) -> None:
        with self._lock:
            self._held.clear()
            self._tapped.clear()

    def take(self) -> frozenset[str]:
        """Keys held now or pressed since the last call; clears the 'pressed since' memory."""
        with self._lock:
            out = frozenset(self._held | self._tapped)
            self._tapped.clear()
            return out


class KeyboardTeleop:
    """The keyboard teleop device (an `envs.devices.HumanDevice`). With `listen=False` no pynput listener is started and
    keys come only through `self.keys` (a `KeyState`), e.g. from a GUI window."""

    name = "keyboard"

    def __init__(self, config: KeyboardConfig | None = None, listen: bool = True) -> None:
        self.config = config or KeyboardConfig()
        self.listen = bool(listen)
        self.keys = KeyState()
        self.latch = CommandLatch(open_width_m=self.config.gripper_open_width_m)
        self._listener: Any = None

    def open(self) -> None:
        """Start the pynput listener thread (if `listen`). Idempotent."""
        if not self.listen or self._listener is not None:
            return
        kb = optional_import("pynput.keyboard", extra="teleop",
                             purpose="the keyboard teleop device (needs a display: X11 on Linux)")
        listener = kb.Listener(on_press=lambda k: self.keys.press(pynput_key_name(k)),
                               on_release=lambda k: self.keys.release(pynput_key_name(k)))
        listener.daemon = True
        listener.start()
        self._listener = listener

    def reset(self) -> None:
        self.open()
        self.latch.reset()
        self.keys.take()  # forget taps made before the episode started

    def poll(self, state: Any = None) -> HumanCommand:
        self.open()
        return self.latch.step(keys_to_command(self.keys.take(), self.config), state)

    def close(self) -> None:
        if self._listener is not None:
            self._listener.stop()
            self._listener = None
        self.keys.release_all()

    def __enter__(self) -> KeyboardTeleop:
        self.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
