"""The errors a teleop device raises (all `robot_rl.errors.RobotRLError`, so commands print one line).

Usage::

    raise DeviceNotFoundError("no SpaceMouse found (USB id 256f:c635); found: USB Keyboard (046d:c31c)")
"""

from __future__ import annotations

from robot_rl.errors import RobotRLError


class TeleopError(RobotRLError):
    """A teleop device failed (not found, disconnected, sent a malformed report)."""


class DeviceNotFoundError(TeleopError):
    """The requested device is not connected or not accessible; the message names it and what was found."""


class DeviceDisconnectedError(TeleopError):
    """The device went away while in use (unplugged, read error)."""


class DeviceReportError(TeleopError, ValueError):
    """A raw report from a device is malformed (too short, wrong size); adapters count and skip these."""
