"""The one device interface: what a human (or scripted) operator's device is and the command it returns.

Every device implements `HumanDevice`: demos' teleop devices (scripted expert, SpaceMouse, gamepad, keyboard,
built by `demos.devices.teleop.make_device`), the twin's scripted operators (`envs.twin.scripted_human.
ScriptedHuman`, `envs.twin.near_miss.NearMissOperator`); `envs.wrappers.InterventionWrapper` and the recorders
(`demos.recording`) consume it. It lives in envs so that envs and demos both see it without envs importing demos.

A device is polled once per control step with the robot's latest state and returns a `HumanCommand`: a 6-D
end-effector delta in [-1, 1] (base frame), a gripper command, whether the operator is active, and the operator's
events (`EVENTS`). Nothing here needs gymnasium or any device library.

Usage::

    device: HumanDevice = make_device("scripted", task="twin-pick-cube")     # demos.devices.teleop
    device.reset()                                   # start of an episode
    cmd = device.poll(env.unwrapped.last_state)      # HumanCommand, never blocks more than a few ms
    if cmd.active:
        obs, r, term, trunc, info = env.step(cmd.action())   # (7,) float32: delta_ee then gripper
    if "quit" in cmd.events: ...
    device.close()
"""

from __future__ import annotations

import dataclasses
from typing import Any, Protocol, runtime_checkable

import numpy as np

EVENTS = ("intervene", "success", "failure", "rerecord", "quit")
"""Events a device may report: take over, mark success / failure, discard and redo the episode, stop.

Hardware devices report "intervene" on every poll while the operator's intervention toggle is on (a level, so a
missed poll loses nothing); "success", "failure", "rerecord" and "quit" once, on the poll after the press.
"""


@dataclasses.dataclass(frozen=True)
class HumanCommand:
    """One poll of an operator's device.

    delta_ee (6,): [dx, dy, dz, drx, dry, drz] in [-1, 1], base frame (scaled by the env's action scale).
    gripper: +1 close, -1 open, 0 keep.
    active: the operator is giving input now (any non-zero axis or button): an intervention when a policy runs.
    events: subset of `EVENTS` reported this poll.
    """

    delta_ee: np.ndarray
    gripper: float = 0.0
    active: bool = False
    events: frozenset[str] = frozenset()

    def action(self) -> np.ndarray:
        """The env action (7,) float32: delta_ee then gripper, clipped to [-1, 1]."""
        return np.clip(np.concatenate([self.delta_ee, [self.gripper]]), -1.0, 1.0).astype(np.float32)


@runtime_checkable
class HumanDevice(Protocol):
    """An operator's input device (hardware teleop or a scripted operator). `poll` must not block longer than a
    few milliseconds.

    Optional hook: `observe_policy_action(action_base: np.ndarray) -> None`. When a device has it, the
    `InterventionWrapper` calls it every step BEFORE `poll` with the policy's proposed action converted to the
    base frame (7,), so a scripted operator can judge the policy (poll itself only sees the robot state).
    Optional flag: `done` (bool); a recorder ends the segment once a scripted routine sets it.
    """

    name: str
    """Short name recorded with episodes ("scripted", "spacemouse", "scripted_human", ...)."""

    def reset(self) -> None:
        """Start of an episode."""
        ...

    def poll(self, state: Any) -> HumanCommand:
        """The operator's command now; `state` is the robot's latest RobotState (scripted devices use it)."""
        ...

    def close(self) -> None:
        """Release the device (idempotent)."""
        ...
