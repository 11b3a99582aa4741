"""Transport, the endpoints: `LearnerEndpoint` and `ActorEndpoint`, the only transport objects that learner and
actor code hold, and `_Driver`, the small interface through which an endpoint gets its frames moved.

An endpoint wraps a core (`robot_rl.transport.cores`) and a driver: the ZeroMQ I/O thread
(`robot_rl.transport.zmq_drivers`) or the in-memory hub (`robot_rl.transport.memory`). The endpoint classes
are the same for both transports; build them with `bind_learner` / `connect_actor` or with an `InMemoryHub`,
never directly.

Usage::

    msgs = learner.recv(timeout=0.1)                  # acknowledged on return; or recv_deliveries + ack
    learner.publish_weights(version, arrays)          # copied now; latest wins per actor
    ok = actor.send(chunk, timeout=0.0)               # False: the unacked buffer is full (backpressure)
    w = actor.latest_weights()                        # None or the newest unseen wire.Weights
    with connect_actor(spec, "a0", address) as actor:  # close() on exit
        actor.wait_connected(10.0); actor.report(episodes=3); actor.flush(5.0)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, Self

import numpy as np

from robot_rl.errors import ConfigError
from robot_rl.transport.cores import Delivery, _ActorCore, _LearnerCore
from robot_rl.transport.stats import ActorStats, LearnerStats
from robot_rl.wire import TransitionChunk, Transitions, Weights, check_chunk, encode, to_plain


class _Driver(Protocol):
    """Moves frames for one endpoint: a ZeroMQ I/O thread, or the in-memory hub."""

    def kick(self) -> None:
        """Get pending work moving (wake the I/O thread / pump the hub)."""

    def refresh(self) -> None:
        """Before a read (stats, the latest weights, the queue): the in-memory hub pumps; the ZeroMQ I/O thread
        needs nothing, it takes arrivals and timers by itself (waking it for every read of a control loop that
        polls every few ms cost an actor ~70 % of a core)."""

    def wait(self, pred: Callable[[], bool], timeout: float) -> bool:
        """Wait up to `timeout` s until `pred()` (evaluated under the core's lock) holds."""

    def close(self) -> None:
        """Stop moving frames; release sockets."""


class _Endpoint:
    """What both endpoints share: heartbeat reports and the context-manager protocol."""

    _core: _LearnerCore | _ActorCore
    _driver: _Driver

    def report(self, *, block: bool = True, **stats: Any) -> bool:
        """Plain scalars sent to the other side in heartbeats (a learner: update step, buffer size; an actor:
        episodes, success rate); they show up in the peer's `stats()`. With `block=False` (a control loop) the
        call returns False instead of waiting while the I/O thread holds the endpoint's lock: report again."""
        plain = to_plain(stats, where="report")
        if not self._core.cond.acquire(blocking=block):
            return False
        try:
            self._core.reported.update(plain)
        finally:
            self._core.cond.release()
        return True

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class LearnerEndpoint(_Endpoint):
    """The learner's side of the link. Build with `bind_learner(...)` or `InMemoryHub().bind_learner(...)`."""

    _core: _LearnerCore

    def __init__(self, core: _LearnerCore, driver: _Driver, address: str) -> None:
        self._core, self._driver, self.address = core, driver, address

    def recv(self, timeout: float = 0.0, max_messages: int = 64) -> list[Transitions]:
        """Received transitions (up to `max_messages`), waiting up to `timeout` s for the first. Returning a
        message acknowledges it to its actor. Arrays are read-only views: copy what you keep."""
        return [d.msg for d in self._take(timeout, max_messages, auto_ack=True)]

    def recv_deliveries(self, timeout: float = 0.0, max_messages: int = 64) -> list[Delivery]:
        """Like `recv`, but nothing is acknowledged until `ack(deliveries)`: a durable learner stores the
        transitions first. Each `Delivery` carries the message and its actor's session."""
        return self._take(timeout, max_messages, auto_ack=False)

    def ack(self, deliveries: Sequence[Delivery]) -> None:
        """Acknowledge deliveries from `recv_deliveries` (their actors drop them from their resend buffers).
        Acknowledging one twice, or one whose actor has since restarted, does nothing harmful."""
        if not deliveries:
            return
        with self._core.cond:
            for d in deliveries:
                if not isinstance(d, Delivery) or d._peer is None:
                    raise ConfigError(f"ack() takes Delivery objects from recv_deliveries(), got {type(d).__name__}")
                self._core.ack(d._peer, d.msg)
        self._driver.kick()

    def _take(self, timeout: float, max_messages: int, auto_ack: bool) -> list[Delivery]:
        core = self._core
        if timeout > 0:
            self._driver.wait(lambda: bool(core.queue) or core.closed, timeout)
        else:
            self._driver.refresh()
        with core.cond:
            out = core.take(max_messages, auto_ack)
        if out and auto_ack:
            self._driver.kick()  # acks
        return out

    def publish_weights(self, version: int, arrays: Mapping[str, Any]) -> None:
        """Offer weights `version` (must increase) to every actor; the arrays are copied now. Each actor gets
        the newest version once its previous one arrived (latest wins; slow actors skip versions)."""
        copied = {k: np.array(v, copy=True) for k, v in arrays.items()}
        frames = encode(Weights(int(version), copied), self._core.config.limits)
        with self._core.cond:
            current = self._core.weights[0] if self._core.weights else -1
            if version <= current:
                raise ConfigError(f"weights version={version} must be > the last published ({current})")
            self._core.weights = (int(version), frames)
        self._driver.kick()

    def stats(self) -> LearnerStats:
        self._driver.refresh()
        with self._core.cond:
            return self._core.stats(self._core.clock())

    def close(self) -> None:
        """Stop; pending acks are flushed (up to `linger_ms`)."""
        with self._core.cond:
            if self._core.closed:
                return
            self._core.closed = True
            self._core.cond.notify_all()
        self._driver.close()


class ActorEndpoint(_Endpoint):
    """The actor's side of the link. Build with `connect_actor(...)` or `InMemoryHub().connect_actor(...)`.

    No method blocks longer than the timeout it is given; I/O, heartbeats, resends and reconnects happen on
    the endpoint's own thread (ZeroMQ) or inside the hub (in memory).
    """

    _core: _ActorCore

    def __init__(self, core: _ActorCore, driver: _Driver) -> None:
        self._core, self._driver = core, driver
        self.actor_id = core.actor_id
        self.spec = core.spec

    def send(self, chunk: TransitionChunk, timeout: float = 0.0) -> bool:
        """Queue `chunk` for the learner (numbered seq by seq). Waits up to `timeout` s for buffer room and
        returns False when the unacked buffer stays full (backpressure; nothing was queued).

        Raises `ProtocolError` (spec_mismatch, too_large) for a chunk that can never be accepted, and the
        endpoint's fatal error (e.g. `SpecMismatchError` from the handshake) once it has failed.
        """
        core = self._core
        check_chunk(self.spec, chunk)
        nbytes = chunk.nbytes
        with core.cond:
            core.raise_if_failed()
            room = core.has_room(nbytes)
        if not room and timeout > 0:
            self._driver.wait(lambda: core.has_room(nbytes) or core.state in ("failed", "closed"), timeout)
        with core.cond:
            core.raise_if_failed()
            if not core.has_room(nbytes):
                core.backpressure += 1
                return False
            core.submit(chunk)
        self._driver.kick()
        return True

    def latest_weights(self) -> Weights | None:
        """The newest weights not yet returned, or None (never blocks). Arrays are read-only."""
        self._driver.refresh()
        with self._core.cond:
            if not self._core.weights_new:
                return None
            self._core.weights_new = False
            return self._core.weights

    def wait_connected(self, timeout: float) -> bool:
        """True once the handshake succeeded (within `timeout` s); raises the fatal error if it was refused."""
        core = self._core
        self._driver.wait(lambda: core.state != "connecting", timeout)
        with core.cond:
            core.raise_if_failed()
            return core.state == "connected"

    def flush(self, timeout: float) -> bool:
        """True once every sent transition was acknowledged (within `timeout` s)."""
        core = self._core
        self._driver.wait(lambda: not core.unacked or core.state in ("failed", "closed"), timeout)
        with core.cond:
            core.raise_if_failed()
            return not core.unacked

    def stats(self) -> ActorStats:
        self._driver.refresh()
        with self._core.cond:
            return self._core.stats(self._core.clock())

    def close(self) -> None:
        """Stop (unacked transitions are discarded; call `flush` first to wait for them)."""
        with self._core.cond:
            if self._core.state == "closed":
                return
            self._core.state = "closed"
            self._core.cond.notify_all()
        self._driver.close()
