"""The Franka Hand of `FrankyRobot` (envs.hardware.franky_robot): a binary command (>= 0.5 closed) sent through a
`franky.Gripper` as asynchronous commands (`grasp` with a wide epsilon, so that closing on an object or on nothing
both count; `move` to the full width to open), debounced: a change is sent only once the previous gripper command has
finished and `min_interval_s` has passed; a change requested meanwhile is sent as soon as both hold (on the next
`service()`).

Usage (FrankyRobot holds one, under its lock)::

    hand = GripperCommands(franky.Gripper(ip), speed_m_per_s=0.1, force_n=20.0, epsilon_m=0.08, min_interval_s=0.3)
    hand.want(1.0)          # close, now or at a later service()
    hand.service()          # send a pending change when allowed
    width_m = hand.read_width()
    hand.release()          # before the Gripper may be freed
"""

from __future__ import annotations

import logging
import math
import time
from typing import Any

log = logging.getLogger("robot_rl.franky")

GRIPPER_MAX_WIDTH_M = 0.08
"""Franka Hand stroke (both fingers)."""

_NEVER_FREED: list[Any] = []
"""franky objects whose background work did not end in time: never freed (freeing them would crash)."""


class GripperCommands:
    """The debounced binary command of one franky.Gripper (see the module docstring); not thread-safe (the caller
    serialises)."""

    def __init__(self, gripper: Any, speed_m_per_s: float, force_n: float, epsilon_m: float,
                 min_interval_s: float) -> None:
        self.gripper = gripper
        self.speed_m_per_s, self.force_n, self.epsilon_m = speed_m_per_s, force_n, epsilon_m
        self.min_interval_s = min_interval_s
        self._want: float | None = None  # the state we want (0/1; None before the first command)
        self._sent: float | None = None  # the one last sent
        self._future: Any = None  # the command in flight
        self._sent_t = -math.inf
        self.width_m = GRIPPER_MAX_WIDTH_M
        """The last width read (m)."""

    def want(self, closed: float) -> None:
        """Ask for closed (>= 0.5) or open; sent by service()."""
        self._want = 1.0 if closed >= 0.5 else 0.0

    def read_width(self) -> float:
        """The fingers' width (m); the last one read when the gripper cannot be read now."""
        try:
            self.width_m = float(self.gripper.width)
        except Exception as err:
            log.warning("franky: gripper width unreadable (%s)", err)
        return self.width_m

    def service(self) -> None:
        """Send the wanted state when it differs from the last one sent, no command is in flight and the debounce
        interval has passed."""
        fut = self._future
        if fut is not None:
            if not fut.wait(0.0):
                return
            try:
                fut.get()
            except Exception as err:  # a failed grasp / move: report, the next change retries
                log.warning("franky: gripper command failed: %s", err)
            self._future = None
        if self._want is None or self._want == self._sent:
            return
        now = time.monotonic()
        if now - self._sent_t < self.min_interval_s:
            return
        if self._want >= 0.5:
            self._future = self.gripper.grasp_async(0.0, self.speed_m_per_s, self.force_n, self.epsilon_m,
                                                    self.epsilon_m)
        else:
            self._future = self.gripper.move_async(GRIPPER_MAX_WIDTH_M, self.speed_m_per_s)
        self._sent = self._want
        self._sent_t = now

    def release(self, timeout_s: float = 5.0) -> None:
        """Let a command in flight finish before the Gripper may be freed: franky's future runs on a thread that
        reads the Gripper's connection, and freeing the Gripper under it crashes the process (measured: a segfault
        in franka::Gripper::move when the FrankyRobot was dropped mid-move)."""
        fut = self._future
        if fut is None:
            return
        if not fut.wait(timeout_s):
            _NEVER_FREED.append((self.gripper, fut))  # still running: keep both alive for the process's life
            log.warning("franky: a gripper command did not finish within %.1f s of stop()", timeout_s)
        self._future = None
