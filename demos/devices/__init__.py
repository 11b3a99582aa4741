"""Teleop devices: the scripted expert (no hardware), SpaceMouse (hidapi), gamepad (pygame), keyboard (pynput).

Each hardware device is a pure mapping core (raw input -> `DeviceInput`, `demos.devices.core`) plus a thin adapter
that opens the hardware lazily; the libraries come with the `teleop` extra and are imported only when a device is
opened. All of them implement the one device interface, `envs.devices.HumanDevice` (poll -> `HumanCommand`);
build them by name with `demos.devices.teleop.make_device` (`build_hardware_device`: unopened, from a config).
Errors: `demos.devices.errors` (TeleopError, DeviceNotFoundError, DeviceDisconnectedError, DeviceReportError).

Modules: `core` (axis shaping, bindings, CommandLatch), `spacemouse`, `gamepad`, `keyboard` (the hardware
devices), `teleop` (ScriptedTeleop, DEVICES, make_device, build_hardware_device), `errors`.

Usage::

    from demos.devices import SpaceMouseConfig, SpaceMouseTeleop
    with SpaceMouseTeleop(SpaceMouseConfig(deadzone=0.1)) as dev:
        cmd = dev.poll(state)          # HumanCommand: delta_ee (6,) in [-1, 1], gripper, active, events
"""

from __future__ import annotations

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
from demos.devices.errors import DeviceDisconnectedError, DeviceNotFoundError, DeviceReportError, TeleopError
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
from demos.devices.teleop import DEVICES, ScriptedTeleop, build_hardware_device, make_device

__all__ = [
    "ACTIONS",
    "AXES",
    "AXIS_TARGETS",
    "DEVICES",
    "EDGE_EVENTS",
    "GAMEPAD_LAYOUTS",
    "CommandLatch",
    "DeviceDisconnectedError",
    "DeviceInput",
    "DeviceNotFoundError",
    "DeviceReportError",
    "GamepadConfig",
    "GamepadTeleop",
    "KeyState",
    "KeyboardConfig",
    "KeyboardTeleop",
    "ScriptedTeleop",
    "SpaceMouseConfig",
    "SpaceMouseReport",
    "SpaceMouseState",
    "SpaceMouseTeleop",
    "TeleopError",
    "apply_deadzone_and_scale",
    "build_hardware_device",
    "decode_spacemouse_report",
    "find_spacemouse",
    "gamepad_to_command",
    "keys_to_command",
    "make_device",
    "map_axes",
    "pynput_key_name",
    "spacemouse_to_input",
]
