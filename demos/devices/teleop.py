"""Teleop devices by name: `make_device` builds any device the recorders and the actor take.

Every device implements the one device interface, `envs.devices.HumanDevice`: polled once per control step with
the robot's latest state, it returns an `envs.devices.HumanCommand` (a 6-D end-effector delta in [-1, 1], base
frame, a gripper command, whether the operator is active, and the operator's events, `envs.devices.EVENTS`).

Devices (`DEVICES`): "scripted" (the twin's scripted expert, no hardware), "spacemouse" (3Dconnexion over
hidapi), "gamepad" (pygame / SDL joystick), "keyboard" (pynput). The hardware devices live in `demos.devices`
(pure mapping cores plus thin adapters; their libraries come with the `teleop` extra); `build_hardware_device`
builds one unopened from its config or the config's fields.

Usage::

    device = make_device("scripted", task="twin-pick-cube", seed=0)
    device = make_device("spacemouse", config=SpaceMouseConfig(deadzone=0.1))   # hardware: opened here
    device = make_device("gamepad", layout="sdl", deadzone=0.2)                  # config fields as options
    device.reset()
    cmd = device.poll(env.unwrapped.last_state)
    if cmd.active:
        obs, r, term, trunc, info = env.step(cmd.action())
    if "quit" in cmd.events: ...
"""

from __future__ import annotations

from typing import Any

import numpy as np

from demos.devices.gamepad import GamepadConfig, GamepadTeleop
from demos.devices.keyboard import KeyboardConfig, KeyboardTeleop
from demos.devices.spacemouse import SpaceMouseConfig, SpaceMouseTeleop
from envs.devices import HumanCommand, HumanDevice
from robot_rl.config import Config
from robot_rl.errors import ConfigError


class ScriptedTeleop:
    """The twin's scripted expert as a teleop device (optionally noisy), so everything runs without hardware.

    It is always `active`. It reports `success` once the expert's task is done according to the state.
    """

    name = "scripted"

    def __init__(self, task: str, noise_std: float = 0.0, seed: int | None = None,
                 action_scale_m: float = 0.02, action_scale_rad: float = 0.1,
                 lift_m: float | tuple[float, float] = 0.12) -> None:
        from envs.twin.experts import ScriptedExpert

        self._expert = ScriptedExpert(task, noise_std=noise_std, seed=seed, action_scale_m=action_scale_m,
                                      action_scale_rad=action_scale_rad, lift_m=lift_m)

    def reset(self) -> None:
        self._expert.reset()

    def poll(self, state: Any) -> HumanCommand:
        a = self._expert.act(state)
        return HumanCommand(delta_ee=a[:6].astype(np.float64), gripper=float(a[6]), active=True)

    def close(self) -> None:
        pass


DEVICES = ("scripted", "spacemouse", "gamepad", "keyboard")


def make_device(name: str, task: str | None = None, seed: int | None = None, noise_std: float = 0.0,
                **options: Any) -> HumanDevice:
    """Build a teleop device by name; unknown names raise ConfigError listing the known ones.

    "scripted" needs `task` (options go to `ScriptedTeleop`). The hardware devices ignore `task` and `seed`
    and take either `config=` (their Config dataclass) or that config's fields as options (the gamepad also
    `layout=`, see `GAMEPAD_LAYOUTS`); they are opened here, so a missing device or library fails at once
    (`DeviceNotFoundError`, `MissingExtraError` naming the `teleop` extra).
    """
    if name == "scripted":
        if task is None:
            raise ConfigError("the scripted teleop device needs a task (e.g. task='twin-pick-cube')")
        return ScriptedTeleop(task, noise_std=noise_std, seed=seed, **options)
    if name not in DEVICES:
        raise ConfigError(f"unknown teleop device '{name}'; known: {', '.join(DEVICES)}")
    if noise_std != 0.0:
        raise ConfigError(f"noise_std={noise_std!r} only applies to the scripted device, not '{name}'")
    device = build_hardware_device(name, **options)
    device.open()
    return device


HardwareDevice = SpaceMouseTeleop | GamepadTeleop | KeyboardTeleop


def build_hardware_device(name: str, config: Any = None, **fields: Any) -> HardwareDevice:
    """An unopened hardware device by name ("spacemouse", "gamepad", "keyboard") from `config` or from that
    config's fields (the gamepad also takes `layout=`, see `GAMEPAD_LAYOUTS`). Bad names/fields: ConfigError."""
    classes: dict[str, tuple[type[Config], type]] = {
        "spacemouse": (SpaceMouseConfig, SpaceMouseTeleop),
        "gamepad": (GamepadConfig, GamepadTeleop),
        "keyboard": (KeyboardConfig, KeyboardTeleop),
    }
    if name not in classes:
        raise ConfigError(f"unknown hardware teleop device {name!r}; known: {', '.join(classes)}")
    cfg_cls, dev_cls = classes[name]
    layout = fields.pop("layout", None) if name == "gamepad" else None
    if config is not None:
        if fields or layout is not None:
            raise ConfigError(f"give either config= or config fields for '{name}', not both ({sorted(fields)})")
        if not isinstance(config, cfg_cls):
            raise ConfigError(f"config for '{name}' must be a {cfg_cls.__name__}, got {type(config).__name__}")
    elif layout is not None:  # from_dict: lists become tuples, unknown fields raise ConfigError
        config = GamepadConfig.from_dict({**GamepadConfig.for_layout(layout).to_dict(), **fields})
    else:
        config = cfg_cls.from_dict(fields)
    device: HardwareDevice = dev_cls(config)
    return device
