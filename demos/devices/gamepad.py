"""A gamepad (any SDL joystick, through pygame) as a teleop device.

Pure core: `gamepad_to_command(axes, buttons, cfg) -> DeviceInput` maps joystick axes and buttons through the
config's bindings. The adapter `GamepadTeleop` reads the joystick with pygame (no window needed; without a
display it uses SDL's dummy video driver, and it reads input in the background, without focus).

Joystick layouts differ between controllers and platforms; `GAMEPAD_LAYOUTS` has two defaults:

- "xbox" (the default; an Xbox 360/One pad on Linux, as pygame 2 reports it): axes 0/1 left stick x/y, 2 left
  trigger, 3/4 right stick x/y, 5 right trigger; buttons A 0, B 1, X 2, Y 3, LB 4, RB 5, Back 6, Start 7,
  Guide 10.
- "sdl" (SDL's game-controller order: PS4/PS5 pads in pygame 2, SDL virtual controllers): axes 0/1 left stick,
  2/3 right stick, 4/5 left/right trigger; buttons A/cross 0, B/circle 1, X/square 2, Y/triangle 3, Back 4,
  Guide 5, Start 6, LB 9, RB 10.

Both map: left stick -> x (up = +x, away from you) and y (left = +y); right trigger up (+z), left trigger down
(-z); right stick -> ry (up) and rz (left = +rz); bumpers -> +rx / -rx. A = gripper close, B = gripper open,
X = intervention toggle, Y = rerecord, Start = success, Back = failure, Guide = quit.

Usage::

    dev = GamepadTeleop(GamepadConfig.for_layout("sdl", deadzone=0.2))
    dev.open()              # DeviceNotFoundError if pygame sees no joystick; MissingExtraError without pygame
    cmd = dev.poll(state)
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from demos.devices.core import (
    ACTIONS,
    AXIS_TARGETS,
    CommandLatch,
    DeviceInput,
    axis_target,
    deadzone,
    require_axis_shaping,
    require_bindings,
    shape_axes,
)
from demos.devices.errors import DeviceDisconnectedError, DeviceNotFoundError
from envs.devices import HumanCommand
from robot_rl.config import Config, require
from robot_rl.errors import ConfigError
from robot_rl.extras import install_hint, optional_import


@dataclasses.dataclass(frozen=True)
class GamepadConfig(Config):
    """A gamepad: which joystick, which axes/buttons drive what, dead zone and gains. Default: "xbox" layout."""

    index: int = 0
    """pygame joystick index (0 = the first one SDL found)."""
    deadzone: float = 0.15
    """Dead zone on each joystick axis (in [0, 1)), applied before the axes are combined; beyond it the value is
    rescaled to rise continuously from 0."""
    scale: tuple[float, ...] = (1.0, 1.0, 1.0, 1.0, 1.0, 1.0)
    """Per-output-axis gain (x, y, z, rx, ry, rz); the result is clipped to [-1, 1]."""
    axes: tuple[tuple[int, str], ...] = ((1, "-x"), (0, "-y"), (5, "+z"), (2, "-z"), (4, "-ry"), (3, "-rz"))
    """(joystick axis, signed output axis) pairs; contributions to one output axis add up."""
    trigger_axes: tuple[int, ...] = (2, 5)
    """Axes that rest at -1 (analogue triggers): mapped to [0, 1] before binding; treated as released until
    they first move (some drivers report 0 before that)."""
    buttons: tuple[tuple[int, str], ...] = (
        (0, "gripper_close"), (1, "gripper_open"), (2, "intervene_toggle"), (3, "rerecord"),
        (7, "success"), (6, "failure"), (10, "quit"), (4, "+rx"), (5, "-rx"),
    )
    """(button, target) pairs: an action (demos.devices.ACTIONS) or a signed axis driven at full speed while held."""
    gripper_open_width_m: float = 0.07
    """Only used by gripper toggles (see CommandLatch)."""

    def validate(self) -> None:
        require(isinstance(self.index, int) and self.index >= 0, "index", self.index, "must be an int >= 0")
        require_axis_shaping(self)
        require_bindings("axes", self.axes, "index", AXIS_TARGETS)
        require_bindings("buttons", self.buttons, "index", ACTIONS + AXIS_TARGETS)
        require(isinstance(self.trigger_axes, tuple)
                and all(isinstance(a, int) and not isinstance(a, bool) and a >= 0 for a in self.trigger_axes),
                "trigger_axes", self.trigger_axes, "must be a tuple of axis indices >= 0")

    @classmethod
    def for_layout(cls, layout: str, **overrides: Any) -> GamepadConfig:
        """The config of a named layout (`GAMEPAD_LAYOUTS`) with `overrides` applied."""
        if layout not in GAMEPAD_LAYOUTS:
            raise ConfigError(f"unknown gamepad layout {layout!r}; known: {', '.join(GAMEPAD_LAYOUTS)}")
        return GAMEPAD_LAYOUTS[layout].replace(**overrides)


GAMEPAD_LAYOUTS: dict[str, GamepadConfig] = {
    "xbox": GamepadConfig(),
    "sdl": GamepadConfig(
        axes=((1, "-x"), (0, "-y"), (5, "+z"), (4, "-z"), (3, "-ry"), (2, "-rz")),
        trigger_axes=(4, 5),
        buttons=((0, "gripper_close"), (1, "gripper_open"), (2, "intervene_toggle"), (3, "rerecord"),
                 (6, "success"), (4, "failure"), (5, "quit"), (9, "+rx"), (10, "-rx")),
    ),
}
"""Named default layouts for `GamepadConfig.for_layout` (see the module docstring)."""


def gamepad_to_command(axes: Sequence[float], buttons: Sequence[bool | int], cfg: GamepadConfig) -> DeviceInput:
    """The device input for joystick `axes` (floats in [-1, 1], as pygame reports them) and `buttons` (held now
    or pressed since the last poll).

    Trigger axes are mapped from [-1, 1] to [0, 1]; every bound axis gets the dead zone; contributions are
    summed per output axis, scaled and clipped. Raises `ConfigError` when a binding names an axis or button the
    device does not have.
    """
    raw = np.asarray(axes, dtype=np.float64).reshape(-1)
    pressed = [bool(b) for b in buttons]
    out = np.zeros(6, dtype=np.float64)
    for idx, target in cfg.axes:
        if idx >= raw.size:
            raise ConfigError(f"GamepadConfig.axes binds axis {idx} but the gamepad has {raw.size} axes")
        value = raw[idx]
        if idx in cfg.trigger_axes:
            value = (value + 1.0) / 2.0
        i_sign = axis_target(target)
        assert i_sign is not None  # validated: axis bindings only name axes
        out[i_sign[0]] += i_sign[1] * float(deadzone(np.array([value]), cfg.deadzone)[0])
    held: set[str] = set()
    for idx, target in cfg.buttons:
        if idx >= len(pressed):
            raise ConfigError(f"GamepadConfig.buttons binds button {idx} but the gamepad has {len(pressed)} buttons")
        if not pressed[idx]:
            continue
        i_sign = axis_target(target)
        if i_sign is None:
            held.add(target)
        else:
            out[i_sign[0]] += i_sign[1]
    delta = shape_axes(np.clip(out, -1.0, 1.0), 0.0, cfg.scale)
    return DeviceInput(delta_ee=delta, held=frozenset(held), buttons_held=any(pressed))


class GamepadTeleop:
    """The gamepad teleop device (an `envs.devices.HumanDevice`), reading one pygame joystick.

    It owns pygame's event queue while in use: each poll drains it (button presses shorter than a poll still
    count; removal of the joystick raises `DeviceDisconnectedError`).
    """

    name = "gamepad"

    def __init__(self, config: GamepadConfig | None = None) -> None:
        self.config = config or GamepadConfig()
        self.latch = CommandLatch(open_width_m=self.config.gripper_open_width_m)
        self._pg: Any = None
        self._js: Any = None
        self._instance_id: int | None = None
        self._triggers_seen: set[int] = set()

    def open(self) -> None:
        """Initialise pygame's joystick support and open joystick `config.index`. Idempotent."""
        if self._js is not None:
            return
        os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")
        os.environ.setdefault("SDL_JOYSTICK_ALLOW_BACKGROUND_EVENTS", "1")
        if not os.environ.get("DISPLAY") and not os.environ.get("WAYLAND_DISPLAY"):
            os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
        pg = optional_import("pygame", extra="teleop", purpose="the gamepad teleop device")
        try:
            if not pg.display.get_init():
                pg.display.init()  # the event queue needs the video subsystem; no window is opened
            pg.joystick.init()
            pg.event.pump()
            count = pg.joystick.get_count()
        except pg.error as err:
            raise DeviceNotFoundError(f"pygame could not initialise joystick support: {err}") from err
        if self.config.index >= count:
            raise DeviceNotFoundError(
                f"no gamepad at joystick index {self.config.index}: pygame (SDL) sees {count} joystick(s). Plug it "
                f"in (and check it shows up in the OS); pygame comes with the 'teleop' extra: {install_hint('teleop')}"
            )
        js = pg.joystick.Joystick(self.config.index)
        js.init()
        try:  # the bindings must fit this joystick (ConfigError naming the index otherwise)
            gamepad_to_command([0.0] * js.get_numaxes(), [False] * js.get_numbuttons(), self.config)
        except ConfigError:
            js.quit()
            raise
        self._pg, self._js = pg, js
        self._instance_id = int(js.get_instance_id())
        self._triggers_seen = set()

    @property
    def joystick_name(self) -> str:
        return str(self._js.get_name()) if self._js is not None else ""

    def reset(self) -> None:
        self.open()
        self.latch.reset()
        self._read()  # forget presses made before the episode started

    def _read(self) -> tuple[list[float], list[bool]]:
        pg, js = self._pg, self._js
        tapped: set[int] = set()
        for ev in pg.event.get():
            if getattr(ev, "instance_id", getattr(ev, "joy", None)) != self._instance_id:
                continue
            if ev.type == pg.JOYDEVICEREMOVED:
                self.close()
                raise DeviceDisconnectedError(f"the gamepad (joystick {self.config.index}) was disconnected")
            if ev.type == pg.JOYBUTTONDOWN:
                tapped.add(int(ev.button))
            elif ev.type == pg.JOYAXISMOTION:
                self._triggers_seen.add(int(ev.axis))
        try:
            axes = [float(js.get_axis(i)) for i in range(js.get_numaxes())]
            buttons = [bool(js.get_button(i)) or i in tapped for i in range(js.get_numbuttons())]
        except pg.error as err:
            raise DeviceDisconnectedError(f"the gamepad (joystick {self.config.index}) stopped answering: {err}") \
                from err
        for t in self.config.trigger_axes:
            if t < len(axes) and t not in self._triggers_seen:
                axes[t] = -1.0
        return axes, buttons

    def poll(self, state: Any = None) -> HumanCommand:
        self.open()
        axes, buttons = self._read()
        return self.latch.step(gamepad_to_command(axes, buttons, self.config), state)

    def close(self) -> None:
        if self._js is not None:
            try:
                self._js.quit()
            except Exception:  # the joystick may already be gone
                pass
            self._js = None

    def __enter__(self) -> GamepadTeleop:
        self.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
