"""Transport, in memory: `InMemoryHub`, one learner and any number of actors in one process, with the same
endpoints, cores and encode/decode over bytes frames as ZeroMQ; and `RawPeer`, a frame-level connection for
protocol tests.

Nothing runs in the background: every endpoint call pumps the hub (delivers messages, runs timers), so
single-threaded tests are deterministic, and a fake `clock` steps heartbeats and timeouts. Closing the learner
and binding again simulates a learner restart.

Usage::

    hub = InMemoryHub(TransportConfig(), clock=time.monotonic)
    learner = hub.bind_learner(spec)
    actor = hub.connect_actor(spec, "a0")
    actor.send(chunk); [msg] = learner.recv(timeout=1.0)
    raw = hub.connect_raw(); raw.send(encode(Hello(...))); raw.recv(timeout=1.0)   # -> reply frames or None
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from robot_rl.errors import ProtocolError
from robot_rl.specs import EnvSpec
from robot_rl.transport.config import TransportConfig
from robot_rl.transport.cores import Clock, _ActorCore, _LearnerCore
from robot_rl.transport.endpoints import ActorEndpoint, LearnerEndpoint
from robot_rl.wire import ErrorCode, Frame


def _copy_frames(frames: Sequence[Any]) -> list[bytes]:
    """What a socket does: the receiver gets its own bytes."""
    return [bytes(memoryview(f)) for f in frames]


class _MemLink:
    """One connection to the hub's learner: an inbox and a routing id (new on every reconnect)."""

    def __init__(self, hub: InMemoryHub) -> None:
        self.hub = hub
        self.inbox: collections.deque[list[bytes]] = collections.deque()
        self.rid = hub._new_rid(self)

    def send(self, frames: Sequence[Frame]) -> bool:
        learner = self.hub._learner
        if learner is None:
            return False  # nothing bound: like ZMQ_IMMEDIATE, the message stays with the sender
        learner.inbox.append((self.rid, _copy_frames(frames)))
        return True

    def renew(self) -> None:
        self.hub._links.pop(self.rid, None)
        self.inbox.clear()
        self.rid = self.hub._new_rid(self)


class _MemDriver:
    """What both in-memory drivers share: every endpoint call pumps the hub, and waits poll it."""

    core: _LearnerCore | _ActorCore

    def __init__(self, hub: InMemoryHub, core: _LearnerCore | _ActorCore) -> None:
        self.hub, self.core = hub, core

    def step(self, now: float) -> None:
        """Handle what arrived and run the core's timers (the hub calls this with its lock held)."""
        raise NotImplementedError

    def kick(self) -> None:
        self.hub.pump()

    def refresh(self) -> None:
        self.hub.pump()

    def wait(self, pred: Callable[[], bool], timeout: float) -> bool:
        return self.hub._wait(self.core.cond, pred, timeout)

    def close(self) -> None:
        raise NotImplementedError


class _MemLearnerDriver(_MemDriver):
    core: _LearnerCore

    def __init__(self, hub: InMemoryHub, core: _LearnerCore) -> None:
        super().__init__(hub, core)
        self.inbox: collections.deque[tuple[bytes, list[bytes]]] = collections.deque()

    def _send(self, rid: bytes, frames: Sequence[Frame]) -> bool:
        link = self.hub._links.get(rid)
        if link is not None:
            link.inbox.append(_copy_frames(frames))
        return True  # like a ROUTER: unroutable replies vanish

    def step(self, now: float) -> None:
        with self.core.cond:
            while self.inbox:
                rid, frames = self.inbox.popleft()
                self.core.handle(rid, frames, now, self._send)
            self.core.tick(now, self._send)

    def close(self) -> None:
        with self.hub._lock:
            with self.core.cond:
                self.core.tick(self.hub.clock(), self._send)  # flush acks
            if self.hub._learner is self:
                self.hub._learner = None
                for a in self.hub._actors:
                    with a.core.cond:
                        a.core.link_down()


class _MemActorDriver(_MemDriver):
    core: _ActorCore

    def __init__(self, hub: InMemoryHub, core: _ActorCore) -> None:
        super().__init__(hub, core)
        self.link = _MemLink(hub)

    def step(self, now: float) -> None:
        core, link = self.core, self.link
        with core.cond:
            if core.reconnect_requested:
                core.reconnect_requested = False
                link.renew()
                if self.hub._learner is not None:
                    core.link_up()
            while link.inbox:
                core.handle(link.inbox.popleft(), now, link.send)
            core.tick(now, link.send)
            core.cond.notify_all()

    def close(self) -> None:
        with self.hub._lock:
            if self in self.hub._actors:
                self.hub._actors.remove(self)
            self.hub._links.pop(self.link.rid, None)


class RawPeer:
    """A bare connection to the hub's learner that sends and receives raw frames (for protocol tests)."""

    def __init__(self, hub: InMemoryHub) -> None:
        self.hub = hub
        self.link = _MemLink(hub)

    def send(self, frames: Sequence[Any]) -> None:
        with self.hub._lock:
            self.link.send(frames)
        self.hub.pump()

    def recv(self, timeout: float = 1.0) -> list[bytes] | None:
        deadline = time.monotonic() + timeout
        while True:
            self.hub.pump()
            with self.hub._lock:
                if self.link.inbox:
                    return self.link.inbox.popleft()
            if time.monotonic() >= deadline:
                return None
            time.sleep(0.0005)

    def close(self) -> None:
        with self.hub._lock:
            self.hub._links.pop(self.link.rid, None)


class InMemoryHub:
    """One learner and any number of actors in one process, with the ZeroMQ endpoints' interface and cores.

    Frames are copied to bytes and decoded exactly as on a socket. Nothing runs in the background: every
    endpoint call pumps the hub (delivers messages, runs timers), so single-threaded tests are deterministic.
    `clock` (default `time.monotonic`) drives heartbeats and timeouts; pass a fake one to step time.

    Usage::

        hub = InMemoryHub()
        learner = hub.bind_learner(spec)
        actor = hub.connect_actor(spec, "a0")
        actor.send(chunk); [msg] = learner.recv(timeout=1.0)
    """

    address = "inmemory://hub"

    def __init__(self, config: TransportConfig | None = None, clock: Clock = time.monotonic) -> None:
        self.config = config or TransportConfig()
        self.clock = clock
        self._lock = threading.RLock()
        self._learner: _MemLearnerDriver | None = None
        self._actors: list[_MemActorDriver] = []
        self._links: dict[bytes, _MemLink] = {}
        self._next = 0

    def _new_rid(self, link: _MemLink) -> bytes:
        with self._lock:
            self._next += 1
            rid = f"mem-{self._next}".encode()
            self._links[rid] = link
            return rid

    def bind_learner(self, spec: EnvSpec, config: TransportConfig | None = None) -> LearnerEndpoint:
        """The hub's learner endpoint (one at a time; bind again after `close` to simulate a restart)."""
        with self._lock:
            if self._learner is not None:
                raise ProtocolError(f"{self.address}: a learner is already bound", ErrorCode.BIND_FAILED)
            core = _LearnerCore(spec, config or self.config, self.clock)
            self._learner = _MemLearnerDriver(self, core)
            for a in self._actors:
                with a.core.cond:
                    a.core.link_up()
        self.pump()
        return LearnerEndpoint(core, self._learner, self.address)

    def connect_actor(self, spec: EnvSpec, actor_id: str, config: TransportConfig | None = None) -> ActorEndpoint:
        core = _ActorCore(spec, actor_id, config or self.config, self.clock)
        driver = _MemActorDriver(self, core)
        with self._lock:
            self._actors.append(driver)
            if self._learner is not None:
                core.link_up()
        self.pump()
        return ActorEndpoint(core, driver)

    def connect_raw(self) -> RawPeer:
        """A raw frame-level connection to the learner (for protocol tests)."""
        return RawPeer(self)

    def pump(self, max_rounds: int = 100) -> None:
        """Deliver messages and run timers until nothing is in flight (at most `max_rounds` rounds)."""
        with self._lock:
            for _ in range(max_rounds):
                now = self.clock()
                if self._learner is not None:
                    self._learner.step(now)
                for a in list(self._actors):
                    a.step(now)
                in_flight = sum(len(a.link.inbox) for a in self._actors)
                if self._learner is not None:
                    in_flight += len(self._learner.inbox)
                if not in_flight:
                    break

    def _wait(self, cond: threading.Condition, pred: Callable[[], bool], timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while True:
            self.pump()
            with cond:
                if pred():
                    return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.0005)
