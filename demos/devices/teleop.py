"""Teleop devices: one interface for a human (or scripted) operator driving the arm.

A device is polled once per control step with the robot's latest state and returns an `envs.wrappers.HumanCommand`
(the command type the InterventionWrapper consumes): a 6-D end-effector delta in [-1, 1] (base frame), a gripper
command, whether the operator is active, and the operator's events.

Devices (`DEVICES`): "scripted" (the twin's scripted expert, no hardware), "spacemouse" (3Dconnexion over
hidapi), "gamepad" (pygame / SDL joystick), "keyboard" (pynput). The hardware devices live in `demos.devices`
(pure mapping cores plus thin adapters; their libraries come with the `teleop` extra).

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

from typing import Any, Protocol, runtime_checkable

import numpy as np

from envs.wrappers import HumanCommand
from robot_rl.errors import ConfigError, RobotRLError

EVENTS = ("intervene", "success", "failure", "rerecord", "quit")
"""Events a device may report: take over, mark success / failure, discard and redo the episode, stop.

Hardware devices report "intervene" on every poll while the operator's intervention toggle is on (a level, so a
missed poll loses nothing); "success", "failure", "rerecord" and "quit" once, on the poll after the press.
"""


class TeleopError(RobotRLError):
    """A teleop device failed (not found, disconnected, sent a malformed report)."""


class DeviceNotFoundError(TeleopError):
    """The requested device is not connected or not accessible; the message names it and what was found."""


class DeviceDisconnectedError(TeleopError):
    """The device went away while in use (unplugged, read error)."""


class DeviceReportError(TeleopError, ValueError):
    """A raw report from a device is malformed (too short, wrong size); adapters count and skip these."""


@runtime_checkable
class TeleopDevice(Protocol):
    """A teleop input device. `poll` must not block longer than a few milliseconds."""

    name: str

    def reset(self) -> None:
        """Start of an episode."""
        ...

    def poll(self, state: Any) -> HumanCommand:
        """The operator's command now; `state` is the robot's latest RobotState (scripted devices use it)."""
        ...

    def close(self) -> None: ...


class ScriptedTeleop:
    """The twin's scripted expert as a teleop device (optionally noisy), so everything runs without hardware.

    It is always `active`. It reports `success` once the expert's task is done according to the state.
    """

    name = "scripted"

    def __init__(self, task: str, noise_std: float = 0.0, seed: int | None = None,
                 action_scale_m: float = 0.02, action_scale_rad: float = 0.1) -> None:
        from envs.twin.experts import ScriptedExpert

        self._expert = ScriptedExpert(task, noise_std=noise_std, seed=seed, action_scale_m=action_scale_m,
                                      action_scale_rad=action_scale_rad)

    def reset(self) -> None:
        self._expert.reset()

    def poll(self, state: Any) -> HumanCommand:
        a = self._expert.act(state)
        return HumanCommand(delta_ee=a[:6].astype(np.float64), gripper=float(a[6]), active=True)

    def close(self) -> None:
        pass


DEVICES = ("scripted", "spacemouse", "gamepad", "keyboard")


def make_device(name: str, task: str | None = None, seed: int | None = None, noise_std: float = 0.0,
                **options: Any) -> TeleopDevice:
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
    from demos.devices import build_hardware_device

    device = build_hardware_device(name, **options)
    device.open()
    return device
