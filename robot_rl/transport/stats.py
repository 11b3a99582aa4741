"""Transport, the snapshots: `ActorStats`, `PeerStats` and `LearnerStats`, what `ActorEndpoint.stats()` and
`LearnerEndpoint.stats()` return (frozen; built by the cores in `robot_rl.transport.cores`).

Usage::

    s = learner.stats()
    s.actors["a0"].duplicates, s.errors_by_code, s.unauthorized, s.busy_drops
    a = actor.stats()
    a.connected, a.unacked_messages, a.weights_version, a.learner       # the learner's last heartbeat stats
"""

from __future__ import annotations

import dataclasses
from typing import Any


@dataclasses.dataclass(frozen=True)
class ActorStats:
    """A snapshot of an actor endpoint."""

    actor_id: str
    state: str  # connecting | connected | failed | closed
    next_seq: int
    acked_upto: int
    sent_messages: int
    sent_transitions: int
    resent_messages: int
    unacked_messages: int
    unacked_bytes: int
    backpressure: int  # send() calls refused because the buffer was full
    reconnects: int
    errors: int
    last_error: str
    weights_version: int
    weights_received: int
    learner: dict[str, Any]  # the learner's last heartbeat stats
    last_rx_age_s: float
    session: str = ""  # random per endpoint instance; with actor_id it names this actor's seq space

    @property
    def connected(self) -> bool:
        return self.state == "connected"


@dataclasses.dataclass(frozen=True)
class PeerStats:
    """What a learner knows about one actor."""

    actor_id: str
    session: str
    alive: bool
    received_messages: int
    received_transitions: int
    duplicates: int
    errors: int
    last_error: str
    last_seen_age_s: float
    acked_upto: int
    weights_version: int  # as reported by the actor
    reported: dict[str, Any]  # the actor's last heartbeat stats


@dataclasses.dataclass(frozen=True)
class LearnerStats:
    """A snapshot of a learner endpoint."""

    actors: dict[str, PeerStats]
    errors: int
    errors_by_code: dict[str, int]
    anonymous_errors: int  # errors from connections that never completed a handshake
    unauthorized: int  # CURVE clients refused by the ZAP handler
    busy_drops: int  # transitions dropped (unacked) because the receive queue was full
    queued_messages: int
    queued_bytes: int
    weights_version: int
    last_error: str

