"""Robot server, the configuration and the counters: `RobotServerConfig` (bind address, watchdog, limits, socket
options) and `RobotServerStats`, the snapshot `RobotServerCore.stats()` returns (and the `stats` call sends).

Usage::

    cfg = RobotServerConfig(bind="tcp://127.0.0.1:0", hold_timeout_s=0.5)
    cfg.limits                                          # wire.Limits for incoming calls
    server.stats().errors_by_code, server.stats().to_dict()    # plain data (-1.0 for "never")
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from envs.robot_server.protocol import DEFAULT_ADDRESS
from robot_rl.config import Config, require
from robot_rl.wire import Limits


@dataclasses.dataclass(frozen=True)
class RobotServerConfig(Config):
    """Options of the robot server."""

    bind: str = DEFAULT_ADDRESS
    """ZeroMQ address to bind (tcp://HOST:PORT; port 0 picks a free one). Non-loopback needs keys or insecure."""
    insecure: bool = False
    """Allow a non-loopback bind without CURVE keys (unencrypted, unauthenticated: trusted networks only)."""
    hold_timeout_s: float = 1.0
    """Watchdog: with no command from the owner for this long, the robot is reported as holding its last target."""
    max_wait_s: float = 10.0
    """The longest `wait` one call may ask for (a longer one is refused: the server would be deaf meanwhile)."""
    max_call_bytes: int = 1 << 20
    """Largest incoming message (calls carry no images); bigger ones are refused (too_large)."""
    poll_ms: int = 50
    """Longest sleep of the serving loop (watchdog and stop-flag resolution)."""
    hwm: int = 100
    """ZeroMQ high-water marks (messages queued per client)."""
    linger_ms: int = 0
    """How long a closing socket keeps trying to deliver pending replies."""

    def validate(self) -> None:
        require(isinstance(self.bind, str) and "://" in self.bind, "bind", self.bind, "must look like tcp://HOST:PORT")
        for name in ("hold_timeout_s", "max_wait_s"):
            v = getattr(self, name)
            require(isinstance(v, int | float) and math.isfinite(v) and v > 0, name, v, "must be finite and > 0")
        for name in ("max_call_bytes", "poll_ms", "hwm"):
            require(getattr(self, name) > 0, name, getattr(self, name), "must be > 0")
        require(self.linger_ms >= 0, "linger_ms", self.linger_ms, "must be >= 0")

    @property
    def limits(self) -> Limits:
        """Wire limits for incoming calls."""
        return Limits(max_message_bytes=self.max_call_bytes, max_header_bytes=min(self.max_call_bytes, 1 << 16),
                      max_frames=64)


@dataclasses.dataclass(frozen=True)
class RobotServerStats:
    """A snapshot of a robot server."""

    calls: int
    """Calls answered (ok or not), garbage included."""
    calls_by_method: dict[str, int]
    """Per method; names outside `METHODS` count as '<unknown>'."""
    errors: int
    """Calls refused or failed."""
    errors_by_code: dict[str, int]
    """Refusals per error code (wire codes and `RobotErrorCode`)."""
    clients: int
    """`open` calls served (each makes its caller the owner)."""
    takeovers: int
    """`open` calls that replaced a previous owner that had not called stop."""
    owner: str
    """Short id of the current owner ('' when none)."""
    holding: bool
    """The owner has not commanded for `hold_timeout_s`: the robot holds its last target."""
    holds: int
    """How many times the watchdog started holding."""
    last_command_age_s: float
    """Seconds since the last command (inf before the first)."""
    dropped_replies: int
    """Replies that could not be sent (client gone, queue full)."""
    last_error: str
    uptime_s: float
    estops: int = 0
    """E-stop calls served (any client; the first latches the robot until the server restarts)."""
    safety: dict[str, Any] = dataclasses.field(default_factory=dict)
    """The safety guard's state (envs.robot_server.safety: estopped, tripped, trips, clips); empty unguarded."""

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        if not math.isfinite(d["last_command_age_s"]):
            d["last_command_age_s"] = -1.0  # plain data on the wire: -1 = never
        return d
