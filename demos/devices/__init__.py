"""Hardware teleop devices: SpaceMouse (hidapi), gamepad (pygame), keyboard (pynput).

Each device is a pure mapping core (raw input -> `DeviceInput`) plus a thin adapter that opens the hardware
lazily; the libraries come with the `teleop` extra and are imported only when a device is opened. All of them
implement `demos.devices.teleop.TeleopDevice`; build them by name with `demos.devices.teleop.make_device`.

Usage::

    from demos.devices import SpaceMouseConfig, SpaceMouseTeleop
    with SpaceMouseTeleop(SpaceMouseConfig(deadzone=0.1)) as dev:
        cmd = dev.poll(state)          # HumanCommand: delta_ee (6,) in [-1, 1], gripper, active, events
"""

from __future__ import annotations

from typing import Any

from demos.devices.core import (
    ACTIONS,
    AXES,
    AXIS_TARGETS,
    EDGE_EVENTS,
    CommandLatch,
    DeviceInput,
    apply_deadzone_and_scale,
    map_axes,
)
from demos.devices.gamepad import GAMEPAD_LAYOUTS, GamepadConfig, GamepadTeleop, gamepad_to_command
from demos.devices.keyboard import KeyboardConfig, KeyboardTeleop, KeyState, keys_to_command, pynput_key_name
from demos.devices.spacemouse import (
    SpaceMouseConfig,
    SpaceMouseReport,
    SpaceMouseState,
    SpaceMouseTeleop,
    decode_spacemouse_report,
    find_spacemouse,
    spacemouse_to_input,
)
from robot_rl.config import Config
from robot_rl.errors import ConfigError

__all__ = [
    "ACTIONS",
    "AXES",
    "AXIS_TARGETS",
    "EDGE_EVENTS",
    "GAMEPAD_LAYOUTS",
    "CommandLatch",
    "DeviceInput",
    "GamepadConfig",
    "GamepadTeleop",
    "KeyState",
    "KeyboardConfig",
    "KeyboardTeleop",
    "SpaceMouseConfig",
    "SpaceMouseReport",
    "SpaceMouseState",
    "SpaceMouseTeleop",
    "apply_deadzone_and_scale",
    "build_hardware_device",
    "decode_spacemouse_report",
    "find_spacemouse",
    "gamepad_to_command",
    "keys_to_command",
    "map_axes",
    "pynput_key_name",
    "spacemouse_to_input",
]

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
