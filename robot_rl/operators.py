"""The `--intervene` vocabulary shared by every command that acts (`actor`, `sim`, `train`): who may take over from
the policy (HIL-SERL interventions) and press the success key of `--reward human`.

- "scripted": the twin's scripted operator (envs.twin.scripted_human.ScriptedHuman; twin only: it judges the
  policy against the task's expert, from the twin's state);
- "spacemouse", "gamepad", "keyboard": a person at a teleop device (demos.devices, the `teleop` extra), the same
  devices `robot-rl record-demos --teleop` takes, with the same bindings (toggle the intervention, gripper, success).

`--device-config FILE` (hardware devices only) is a JSON object of the device's config fields
(demos.devices SpaceMouseConfig / GamepadConfig / KeyboardConfig; the gamepad also takes "layout"), e.g.
`{"deadzone": 0.15, "scale": [0.6, 0.6, 0.6, 0.4, 0.4, 0.4]}`. This module only checks the flags (so `robot-rl sim`'s
supervisor, which imports no device code, refuses the same things); the devices are built by
demos.devices.operators, reached through robot_rl.gym_env.with_operator.

A hardware device is read by one process: `robot-rl sim` refuses one with more than one actor.

Usage::

    check_intervene("spacemouse", None, reward="human")      # fine
    check_intervene(None, None, reward="human")              # ConfigError: the success key needs --intervene DEVICE
    check_intervene("scripted", "pad.json")                  # ConfigError: --device-config is for hardware devices
    is_hardware_device("gamepad")                            # True
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from robot_rl.errors import ConfigError
from robot_rl.reward_source import parse_reward_source

HARDWARE_DEVICES = ("spacemouse", "gamepad", "keyboard")
"""Teleop devices a person holds (demos.devices; the `teleop` extra)."""

INTERVENE_CHOICES = ("scripted", *HARDWARE_DEVICES)
"""What `--intervene` takes."""


def is_hardware_device(intervene: str | None) -> bool:
    """Whether `--intervene` names a device a person holds (read by one process only)."""
    return intervene in HARDWARE_DEVICES


def check_intervene(intervene: str | None, device_config: str | Path | None = None, reward: str = "env") -> None:
    """ConfigError (one line, naming the flag) for an unknown `--intervene`, a `--device-config` without a hardware
    device or one that is not a readable JSON object, and `--reward human` without `--intervene`."""
    if intervene is not None and intervene not in INTERVENE_CHOICES:
        raise ConfigError(f"--intervene {intervene!r}: expected one of {', '.join(INTERVENE_CHOICES)}")
    if device_config is not None:
        if not is_hardware_device(intervene):
            raise ConfigError(f"--device-config {device_config}: only with a hardware device "
                              f"(--intervene {' | '.join(HARDWARE_DEVICES)})")
        load_device_config(device_config)
    kind, _ = parse_reward_source(reward)
    if kind == "human" and intervene is None:
        raise ConfigError("--reward human: the success key comes from a teleop device; add --intervene DEVICE "
                          f"({' | '.join(INTERVENE_CHOICES)})")


def load_device_config(path: str | Path) -> dict[str, Any]:
    """The JSON object of `--device-config` (the device config's fields); ConfigError naming the file otherwise.
    Unknown or bad fields are refused when the device is built (Config.from_dict names the field)."""
    p = Path(path)
    try:
        data = json.loads(p.read_text())
    except FileNotFoundError:
        raise ConfigError(f"--device-config {p}: no such file") from None
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(f"--device-config {p}: cannot read it ({err})") from None
    except json.JSONDecodeError as err:
        raise ConfigError(f"--device-config {p}: not JSON ({err.msg} at line {err.lineno})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"--device-config {p}: expected a JSON object of the device's config fields, "
                          f"got {type(data).__name__}")
    return data
