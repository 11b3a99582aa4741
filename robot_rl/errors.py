"""The error hierarchy. Every error robot-rl raises on purpose derives from `RobotRLError`.

Usage::

    from robot_rl.errors import ConfigError
    try:
        gains = ImpedanceGains(translational_stiffness_n_per_m=-1.0)
    except ConfigError as err:
        print(err)          # names the field and the value
"""

from __future__ import annotations


class RobotRLError(Exception):
    """Base of all robot-rl errors."""


class ConfigError(RobotRLError, ValueError):
    """A configuration value is invalid (names the field and why)."""


class InvalidGainsError(ConfigError):
    """Controller gains are out of their valid range (negative, non-finite, unstable)."""


class SpecMismatchError(RobotRLError):
    """Two sides disagree on an observation/action/task spec; `fields` names what differs."""

    def __init__(self, message: str, fields: list[str] | None = None) -> None:
        super().__init__(message)
        self.fields = list(fields or [])


class ShapeError(RobotRLError, ValueError):
    """An array has the wrong shape or dtype for where it is used."""


class SafetyError(RobotRLError):
    """A command was refused by a safety check (NaN/inf, outside hard limits)."""


class MissingExtraError(RobotRLError, ImportError):
    """An optional dependency is missing; the message names the pip extra that provides it."""


class UnknownTaskError(RobotRLError, KeyError):
    """A task preset name is not registered."""

    def __str__(self) -> str:  # KeyError quotes its message; keep it readable
        return str(self.args[0]) if self.args else "unknown task"


class RobotError(RobotRLError):
    """The robot backend reported an error (reflex, lost connection, timeout)."""


class ResetError(RobotError):
    """A reset routine could not bring the robot where the next episode starts (a move did not settle after its
    retries); the run stops rather than start an episode from a wrong pose."""


class RobotTimeoutError(RobotError, TimeoutError):
    """The robot (or robot server) did not answer within its deadline."""


class EpisodeFileError(RobotRLError):
    """An episode file is corrupt, truncated or of an unknown version; names the file."""


class ProtocolError(RobotRLError):
    """A wire message is malformed, oversized, of another protocol version, or refused by the peer.

    `code` is a short machine-readable reason (see `robot_rl.wire.ErrorCode`), also sent in ERROR replies.
    """

    def __init__(self, message: str, code: str = "protocol") -> None:
        super().__init__(message)
        self.code = str(code)
