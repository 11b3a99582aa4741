"""Transport, the configuration: `TransportConfig`, the timing, buffer bounds and socket options that both
endpoints (and both drivers: ZeroMQ and in memory) read.

Usage::

    cfg = TransportConfig(heartbeat_s=0.5, heartbeat_timeout_s=3.0, max_unacked_messages=256)
    learner = bind_learner(spec, "tcp://127.0.0.1:5555", cfg)        # or InMemoryHub(cfg)
    cfg = TransportConfig.from_dict({"limits": {"max_message_bytes": 1 << 20}})   # nested wire.Limits
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Self

from robot_rl.config import Config, require
from robot_rl.wire import DEFAULT_LIMITS, Limits


@dataclasses.dataclass(frozen=True)
class TransportConfig(Config):
    """Timing, buffer bounds and socket options shared by both endpoints."""

    heartbeat_s: float = 1.0
    """Seconds between heartbeats (both directions)."""
    heartbeat_timeout_s: float = 5.0
    """Silence after which an actor reconnects and a learner considers an actor gone."""
    hello_retry_s: float = 0.5
    """Seconds between HELLO attempts while connecting."""
    resend_after_s: float = 2.0
    """Actor: resend the unacked messages when acks have not advanced for this long; learner: resend weights."""
    max_unacked_messages: int = 1024
    """Actor: most messages kept for resending (then `send` returns False)."""
    max_unacked_bytes: int = 512 << 20
    """Actor: most bytes kept for resending (one oversized message is admitted into an empty buffer)."""
    max_queued_messages: int = 256
    """Learner: most received messages waiting for `recv` (beyond: dropped unacked, resent later)."""
    max_queued_bytes: int = 1 << 30
    """Learner: most received bytes waiting for `recv`."""
    max_actors: int = 1024
    """Learner: most actor records kept (least recently seen are forgotten first)."""
    limits: Limits = DEFAULT_LIMITS
    """Message size limits (also ZMQ_MAXMSGSIZE)."""
    hwm: int = 1000
    """ZeroMQ send/receive high-water marks (messages per peer)."""
    linger_ms: int = 500
    """How long a closing socket keeps trying to deliver (acks on learner close)."""
    reconnect_ivl_ms: int = 100
    """ZeroMQ reconnect interval (first retry)."""
    reconnect_ivl_max_ms: int = 2000
    """ZeroMQ reconnect interval cap (exponential back-off)."""
    poll_ms: int = 50
    """Longest sleep of an endpoint's I/O thread."""

    def validate(self) -> None:
        for name in ("heartbeat_s", "hello_retry_s", "resend_after_s"):
            require(getattr(self, name) > 0, name, getattr(self, name), "must be > 0")
        require(self.heartbeat_timeout_s > self.heartbeat_s, "heartbeat_timeout_s", self.heartbeat_timeout_s,
                f"must be > heartbeat_s ({self.heartbeat_s})")
        for name in ("max_unacked_messages", "max_unacked_bytes", "max_queued_messages", "max_queued_bytes",
                     "max_actors", "hwm", "reconnect_ivl_ms", "reconnect_ivl_max_ms", "poll_ms"):
            require(getattr(self, name) > 0, name, getattr(self, name), "must be > 0")
        require(self.linger_ms >= 0, "linger_ms", self.linger_ms, "must be >= 0")
        require(isinstance(self.limits, Limits), "limits", self.limits, "must be a wire.Limits")

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Self:
        data = dict(data)
        if isinstance(data.get("limits"), Mapping):
            data["limits"] = Limits.from_dict(dict(data["limits"]))
        return super().from_dict(data)
