"""The transport adapter between actors and the learner: ZeroMQ across hosts, or in memory for tests.

Actor and learner logic use only the two endpoint classes below and never import zmq. Every message goes
through `robot_rl.wire` (msgpack header + raw array frames, never pickle), in both transports.

Learner side (one ROUTER socket, many actors)::

    learner = bind_learner(spec, "tcp://127.0.0.1:5555")          # loopback needs no keys
    for msg in learner.recv(timeout=0.1):                        # list[wire.Transitions]
        replay.insert(msg.actor_id, msg.chunk)                   # arrays are read-only views: copy them in
    learner.publish_weights(version, agent.trainable_state())    # copied; latest wins per actor
    learner.stats().actors["a0"].duplicates                      # per-actor counters
    learner.close()

Actor side (one DEALER socket; all I/O on a background thread, so no call stalls the control loop)::

    actor = connect_actor(spec, "a0", "tcp://127.0.0.1:5555")
    actor.wait_connected(timeout=10.0)                           # SpecMismatchError names differing fields
    ok = actor.send(TransitionChunk.from_steps(obs, act, rew, term, trunc), timeout=0.0)  # False: buffer full
    w = actor.latest_weights()                                   # None, or the newest unseen wire.Weights
    actor.flush(timeout=5.0); actor.close()

Same wiring in one process (the same cores and the same encode/decode over bytes frames)::

    hub = InMemoryHub()
    learner = hub.bind_learner(spec)
    actor = hub.connect_actor(spec, "a0")

Delivery: the actor numbers transitions (seq) and keeps every unacknowledged message in a bounded buffer
(`max_unacked_messages` / `max_unacked_bytes`; `send` returns False when full). The learner acknowledges a
message when `recv` hands it to the caller, drops duplicates by (actor_id, seq), and after a clean learner
restart (close + bind again) the actor re-handshakes and resends what is unacknowledged: every transition is
delivered exactly once. (If a learner process dies between `recv` and sending the ack, those transitions may
be delivered again to its successor: at-least-once across crashes.)

Durable learners acknowledge explicitly: `recv_deliveries` hands messages over without acknowledging them (each
`Delivery` names the actor's session, so a learner can key its own duplicate ledger by (actor_id, session,
seq)), and `ack(deliveries)` acknowledges them once the learner has made them durable::

    batch = learner.recv_deliveries(timeout=0.1)
    for d in batch:
        inbox.write(d.actor_id, d.session, d.msg)                # durable first ...
    learner.ack(batch)                                           # ... then acknowledged

A delivery that is never acknowledged is not handed over again by this endpoint (its seqs count as received);
the actor keeps it buffered and a restarted learner receives it again.

Liveness: heartbeats both ways every `heartbeat_s`; an actor that hears nothing for `heartbeat_timeout_s`
recreates its socket and handshakes again, by itself, while the caller keeps stepping with the last weights.
Malformed, oversized, wrong-version or wrong-spec messages are answered with an ERROR (code + message),
counted per actor and per code, and never raise in the endpoint.

Security: tcp binds/connects to non-loopback addresses need CURVE keys (`robot_rl.keys`) or an explicit
`insecure=True`; otherwise `ConfigError`. With keys the learner runs a ZAP handler that accepts only the
authorized client keys; refusals are logged and counted (`LearnerStats.unauthorized`), and the refused actor
fails with `ProtocolError(code="unauthorized")`.
"""

from __future__ import annotations

import collections
import dataclasses
import ipaddress
import logging
import math
import secrets
import socket
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, Self

import numpy as np

from robot_rl.config import Config, require
from robot_rl.errors import ConfigError, ProtocolError, RobotRLError, SpecMismatchError
from robot_rl.keys import ClientKeys, ServerKeys
from robot_rl.specs import EnvSpec
from robot_rl.wire import (
    DEFAULT_LIMITS,
    Ack,
    ErrorCode,
    ErrorReply,
    Frame,
    Heartbeat,
    Hello,
    HelloOk,
    Limits,
    TransitionChunk,
    Transitions,
    Weights,
    check_chunk,
    decode,
    encode,
    error_frames,
    frames_nbytes,
    to_plain,
)

log = logging.getLogger("robot_rl.transport")

Clock = Callable[[], float]
SendFn = Callable[[Sequence[Frame]], bool]
SendToFn = Callable[[bytes, Sequence[Frame]], bool]
_NEVER = -math.inf
_MAX_RANGES = 4096  # out-of-order seq ranges remembered per actor (beyond: bad_seq)


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


# --------------------------------------------------------------------------------------------------- stats

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


@dataclasses.dataclass(frozen=True, eq=False)
class Delivery:
    """A received TRANSITIONS message handed over by `LearnerEndpoint.recv_deliveries`, not yet acknowledged.

    `session` is the sending actor endpoint's random session id: seqs restart at 0 when an actor process
    restarts, so (actor_id, session, seq) names a transition uniquely.
    """

    msg: Transitions
    session: str
    _peer: Any = dataclasses.field(repr=False, default=None)

    @property
    def actor_id(self) -> str:
        return self.msg.actor_id

    @property
    def seq(self) -> int:
        return self.msg.seq

    @property
    def seq_end(self) -> int:
        return self.msg.seq_end


# --------------------------------------------------------------------------------------------------- sans-IO cores

class _SeqSet:
    """Seqs seen: everything <= `upto`, plus message ranges above it ({start: end}, end exclusive)."""

    def __init__(self, upto: int = -1) -> None:
        self.upto = upto
        self.ranges: dict[int, int] = {}

    def covers(self, start: int, end: int) -> bool:
        return end - 1 <= self.upto or self.ranges.get(start) == end

    def overlaps(self, start: int, end: int) -> bool:
        return start <= self.upto or any(s < end and start < e for s, e in self.ranges.items())

    def add(self, start: int, end: int) -> None:
        if end - 1 <= self.upto:
            return
        if start <= self.upto + 1:
            self.upto = end - 1
        else:
            self.ranges[start] = end
        while self.upto + 1 in self.ranges:
            self.upto = self.ranges.pop(self.upto + 1) - 1

    def advance_to(self, upto: int) -> None:
        """Everything up to `upto` counts as seen (absorbing the ranges it reaches)."""
        if upto <= self.upto:
            return
        self.upto = upto
        for s, e in sorted(self.ranges.items()):
            if s > self.upto + 1:
                break
            del self.ranges[s]
            self.upto = max(self.upto, e - 1)


@dataclasses.dataclass(eq=False)
class _Peer:
    actor_id: str
    session: str
    received: _SeqSet
    delivered: _SeqSet
    last_seen: float
    rid: bytes | None = None
    ack_due: bool = False
    last_hb_sent: float = _NEVER
    weights_reported: int = -1
    weights_sent: int = -1
    weights_sent_at: float = _NEVER
    received_messages: int = 0
    received_transitions: int = 0
    duplicates: int = 0
    errors: int = 0
    last_error: str = ""
    reported: dict[str, Any] = dataclasses.field(default_factory=dict)


class _LearnerCore:
    """The learner's protocol state, free of I/O: `handle` a message, `tick` timers, `take` deliveries.

    Every method runs with `cond` held; sends go through the `send(rid, frames)` function passed in.
    """

    def __init__(self, spec: EnvSpec, config: TransportConfig, clock: Clock) -> None:
        self.spec, self.config, self.clock = spec, config, clock
        self.cond = threading.Condition()
        self.session = secrets.token_hex(8)
        self.peers: collections.OrderedDict[str, _Peer] = collections.OrderedDict()  # least recent first
        self.by_rid: dict[bytes, str] = {}
        self.queue: collections.deque[tuple[_Peer, Transitions, int]] = collections.deque()
        self.queued_bytes = 0
        self.weights: tuple[int, list[Frame]] | None = None
        self.reported: dict[str, Any] = {}
        self.errors_by_code: collections.Counter[str] = collections.Counter()
        self.anonymous_errors = 0
        self.unauthorized = 0
        self.busy_drops = 0
        self.last_error = ""
        self.closed = False

    # -- errors
    def _error(self, rid: bytes | None, code: str, text: str, send: SendToFn | None,
               fields: Sequence[str] = ()) -> None:
        self.errors_by_code[code] += 1
        peer = self._peer(rid)
        if peer is not None:
            peer.errors += 1
            peer.last_error = text
        else:
            self.anonymous_errors += 1
        self.last_error = text
        n = self.errors_by_code[code]
        if n & (n - 1) == 0 or code == ErrorCode.SPEC_MISMATCH:  # log the 1st, 2nd, 4th, 8th, ... of a kind
            log.warning("learner endpoint: %s [%s, #%d]", text, code, n)
        if send is not None and rid is not None:
            send(rid, error_frames(code, text, fields))

    def _peer(self, rid: bytes | None) -> _Peer | None:
        aid = self.by_rid.get(rid) if rid is not None else None
        return self.peers.get(aid) if aid is not None else None

    # -- inbound
    def handle(self, rid: bytes, frames: Sequence[Any], now: float, send: SendToFn) -> None:
        try:
            msg = decode(frames, self.config.limits)
        except ProtocolError as err:
            self._error(rid, err.code, str(err), send)
            return
        if isinstance(msg, Hello):
            self._hello(rid, msg, now, send)
            return
        peer = self._peer(rid)
        if isinstance(msg, ErrorReply):  # never answer an error with an error
            who = f"actor '{peer.actor_id}'" if peer else "an unknown peer"
            self._error(rid, msg.code, f"{who} reported {msg.code}: {msg.message}", None)
            return
        if peer is None:
            self._error(rid, ErrorCode.NO_HANDSHAKE, f"{msg.KIND} before HELLO on this connection", send)
            return
        peer.last_seen = now
        self.peers.move_to_end(peer.actor_id)
        if isinstance(msg, Transitions):
            self._transitions(rid, peer, msg, send)
        elif isinstance(msg, Heartbeat):
            peer.reported = dict(msg.stats)
            peer.weights_reported = msg.weights_version
        else:
            self._error(rid, ErrorCode.UNEXPECTED_KIND, f"a learner does not accept {msg.KIND}", send)

    def _hello(self, rid: bytes, msg: Hello, now: float, send: SendToFn) -> None:
        if msg.role != "actor" or not 0 < len(msg.actor_id) <= 128:
            self._error(rid, ErrorCode.BAD_FIELD, f"HELLO needs role 'actor' and a 1-128 character actor_id, got "
                                                  f"role={msg.role[:32]!r} actor_id={msg.actor_id[:32]!r}", send)
            return
        fields = self.spec.diff(msg.spec)
        if fields:
            self._error(rid, ErrorCode.SPEC_MISMATCH, f"spec mismatch with actor '{msg.actor_id}': differing "
                                                      f"field(s) {fields}", send, fields)
            return
        peer = self.peers.get(msg.actor_id)
        if peer is None or peer.session != msg.session:
            if peer is not None:
                log.info("learner endpoint: actor '%s' restarted (new session); its seqs start from %d",
                         msg.actor_id, msg.acked + 1)
                if peer.rid is not None:
                    self.by_rid.pop(peer.rid, None)
            peer = _Peer(msg.actor_id, msg.session, _SeqSet(msg.acked), _SeqSet(msg.acked), now)
            self.peers[msg.actor_id] = peer
            self._evict()
        else:
            peer.received.advance_to(msg.acked)
            peer.delivered.advance_to(msg.acked)
        if peer.rid is not None and peer.rid != rid:
            self.by_rid.pop(peer.rid, None)
        peer.rid, peer.last_seen = rid, now
        peer.weights_reported = peer.weights_sent = -1  # send the latest weights on every new connection
        peer.weights_sent_at = _NEVER
        self.by_rid[rid] = msg.actor_id
        self.peers.move_to_end(msg.actor_id)
        version = self.weights[0] if self.weights else -1
        send(rid, encode(HelloOk("learner", self.spec, self.session, peer.delivered.upto, version,
                                 self.config.heartbeat_s, self.config.limits.max_message_bytes)))
        log.info("learner endpoint: actor '%s' connected (acked up to %d)", msg.actor_id, peer.delivered.upto)

    def _evict(self) -> None:
        while len(self.peers) > self.config.max_actors:
            _, old = self.peers.popitem(last=False)
            if old.rid is not None:
                self.by_rid.pop(old.rid, None)

    def _transitions(self, rid: bytes, peer: _Peer, msg: Transitions, send: SendToFn) -> None:
        if msg.actor_id != peer.actor_id:
            self._error(rid, ErrorCode.BAD_FIELD, f"TRANSITIONS for actor '{msg.actor_id[:64]}' on the connection "
                                                  f"of actor '{peer.actor_id}'", send)
            return
        try:
            check_chunk(self.spec, msg.chunk)
        except ProtocolError as err:
            self._error(rid, err.code, f"actor '{peer.actor_id}' seq {msg.seq}: {err}", send)
            return
        start, end = msg.seq, msg.seq_end
        if peer.received.covers(start, end):
            peer.duplicates += 1
            peer.ack_due = True
            return
        if peer.received.overlaps(start, end) or len(peer.received.ranges) >= _MAX_RANGES:
            self._error(rid, ErrorCode.BAD_SEQ, f"actor '{peer.actor_id}': seqs [{start}, {end}) overlap ones "
                                                f"already received (contiguous up to {peer.received.upto})", send)
            return
        nbytes = msg.chunk.nbytes
        if self.queue and (len(self.queue) >= self.config.max_queued_messages
                           or self.queued_bytes + nbytes > self.config.max_queued_bytes):
            self.busy_drops += 1  # not acked: the actor resends it when acks stall
            return
        peer.received.add(start, end)
        peer.received_messages += 1
        peer.received_transitions += msg.chunk.length
        self.queue.append((peer, msg, nbytes))
        self.queued_bytes += nbytes

    # -- outbound
    def take(self, max_messages: int, auto_ack: bool = True) -> list[Delivery]:
        out: list[Delivery] = []
        while self.queue and len(out) < max_messages:
            peer, msg, nbytes = self.queue.popleft()
            self.queued_bytes -= nbytes
            if auto_ack:
                self.ack(peer, msg)
            out.append(Delivery(msg, peer.session, peer))
        return out

    def ack(self, peer: _Peer, msg: Transitions) -> None:
        """Mark `msg` delivered: the next tick acknowledges everything contiguous to its actor."""
        peer.delivered.add(msg.seq, msg.seq_end)
        peer.ack_due = True

    def _alive(self, peer: _Peer, now: float) -> bool:
        return peer.rid is not None and now - peer.last_seen <= self.config.heartbeat_timeout_s

    def tick(self, now: float, send: SendToFn) -> None:
        cfg = self.config
        for peer in self.peers.values():
            rid = peer.rid
            if rid is None or not self._alive(peer, now):
                continue
            if peer.ack_due:
                send(rid, encode(Ack(peer.actor_id, peer.delivered.upto)))
                peer.ack_due = False
            if now - peer.last_hb_sent >= cfg.heartbeat_s:
                stats = {**self.reported, "queued_messages": len(self.queue)}
                send(rid, encode(Heartbeat("learner", peer.actor_id, time.time(),
                                                self.weights[0] if self.weights else -1, stats)))
                peer.last_hb_sent = now
            if self.weights is not None and self.weights[0] > peer.weights_reported:
                in_flight = (peer.weights_sent > peer.weights_reported
                             and now - peer.weights_sent_at < cfg.resend_after_s)
                if not in_flight:
                    send(rid, self.weights[1])
                    peer.weights_sent, peer.weights_sent_at = self.weights[0], now

    def stats(self, now: float) -> LearnerStats:
        actors = {
            p.actor_id: PeerStats(p.actor_id, p.session, self._alive(p, now), p.received_messages,
                                  p.received_transitions, p.duplicates, p.errors, p.last_error, now - p.last_seen,
                                  p.delivered.upto, p.weights_reported, dict(p.reported))
            for p in self.peers.values()
        }
        return LearnerStats(actors, sum(self.errors_by_code.values()), dict(self.errors_by_code),
                            self.anonymous_errors, self.unauthorized, self.busy_drops, len(self.queue),
                            self.queued_bytes, self.weights[0] if self.weights else -1, self.last_error)


@dataclasses.dataclass(eq=False)
class _Pending:
    seq: int
    end: int
    frames: list[Frame]
    nbytes: int
    sends: int = 0
    sent: bool = False


class _ActorCore:
    """The actor's protocol state, free of I/O (handshake, seq numbering, unacked buffer, resends, weights).

    Every method runs with `cond` held; sends go through the `send(frames) -> bool` function passed in (False:
    the link cannot take it now; the message stays pending).
    """

    def __init__(self, spec: EnvSpec, actor_id: str, config: TransportConfig, clock: Clock) -> None:
        if not 0 < len(actor_id) <= 128:
            raise ConfigError(f"actor_id={actor_id!r} must have 1-128 characters")
        self.spec, self.actor_id, self.config, self.clock = spec, actor_id, config, clock
        self.cond = threading.Condition()
        self.session = secrets.token_hex(8)
        self.state = "connecting"
        self.fatal: RobotRLError | None = None
        self.unacked: collections.OrderedDict[int, _Pending] = collections.OrderedDict()
        self.unacked_bytes = 0
        self.next_seq = 0
        self.acked = -1
        now = clock()
        self.last_rx = now
        self.last_progress = now
        self.last_hello = _NEVER
        self.last_hb = _NEVER
        self.hb_due = False
        self.link_ok = False  # a connection to a learner is up (told by the driver)
        self.reconnect_requested = False
        self.learner_session = ""
        self.max_message_bytes = config.limits.max_message_bytes
        self.weights: Weights | None = None
        self.weights_new = False
        self.weights_received = 0
        self.learner_stats: dict[str, Any] = {}
        self.reported: dict[str, Any] = {}
        self.sent_messages = self.sent_transitions = self.resent_messages = 0
        self.backpressure = self.reconnects = self.errors = 0
        self.last_error = ""

    @property
    def weights_version(self) -> int:
        return self.weights.version if self.weights is not None else -1

    def fail(self, err: RobotRLError) -> None:
        if self.fatal is None:
            log.error("actor endpoint '%s': %s", self.actor_id, err)
            self.fatal, self.state, self.last_error = err, "failed", str(err)
        self.cond.notify_all()

    def raise_if_failed(self) -> None:
        if self.fatal is not None:
            raise self.fatal
        if self.state == "closed":
            raise ProtocolError(f"actor endpoint '{self.actor_id}' is closed", ErrorCode.CLOSED)

    # -- buffer
    def has_room(self, nbytes: int) -> bool:
        return not self.unacked or (len(self.unacked) < self.config.max_unacked_messages
                                    and self.unacked_bytes + nbytes <= self.config.max_unacked_bytes)

    def submit(self, chunk: TransitionChunk) -> None:
        msg = Transitions(self.actor_id, self.next_seq, chunk)
        frames = encode(msg, self.config.limits)
        nbytes = frames_nbytes(frames)
        if nbytes > self.max_message_bytes:
            raise ProtocolError(f"a {nbytes} B message exceeds the learner's limit of {self.max_message_bytes} B; "
                                f"send shorter chunks", ErrorCode.TOO_LARGE)
        self.unacked[msg.seq] = _Pending(msg.seq, msg.seq_end, frames, nbytes)
        self.unacked_bytes += nbytes
        self.next_seq = msg.seq_end

    def _ack(self, upto: int, now: float) -> None:
        upto = min(upto, self.next_seq - 1)
        if upto <= self.acked:
            return
        self.acked, self.last_progress = upto, now
        while self.unacked:
            seq, p = next(iter(self.unacked.items()))
            if p.end - 1 > upto:
                break
            del self.unacked[seq]
            self.unacked_bytes -= p.nbytes
        self.cond.notify_all()

    # -- link events
    def link_up(self) -> None:
        """A (new) connection to a learner is up: handshake on it now."""
        self.link_ok = True
        if self.state in ("connected", "connecting"):
            self.state, self.last_hello = "connecting", _NEVER

    def link_down(self) -> None:
        """The connection is gone: send nothing until the next `link_up` (messages would queue for it)."""
        self.link_ok = False
        if self.state == "connected":
            self.state = "connecting"

    def request_reconnect(self, now: float) -> None:
        self.reconnect_requested, self.link_ok = True, False
        self.reconnects += 1
        self.state, self.last_rx, self.last_hello = "connecting", now, _NEVER

    # -- inbound
    def handle(self, frames: Sequence[Any], now: float, send: SendFn) -> None:
        if self.state in ("failed", "closed"):
            return
        try:
            msg = decode(frames, self.config.limits)
        except ProtocolError as err:
            self._count_error(f"undecodable message from the learner: {err}")
            return
        self.last_rx = now
        if isinstance(msg, HelloOk):
            self._hello_ok(msg, now, send)
        elif isinstance(msg, Ack):
            if msg.actor_id == self.actor_id:
                self._ack(msg.upto, now)
        elif isinstance(msg, Weights):
            if msg.version > self.weights_version:
                self.weights, self.weights_new = msg, True
                self.weights_received += 1
                self.hb_due = True  # report the version we hold (the learner sends one weights message at a time)
                self.cond.notify_all()
        elif isinstance(msg, Heartbeat):
            self.learner_stats = dict(msg.stats)
        elif isinstance(msg, ErrorReply):
            self._error_reply(msg)
        else:
            self._count_error(f"unexpected {msg.KIND} from the learner")

    def _count_error(self, text: str) -> None:
        self.errors += 1
        self.last_error = text
        if self.errors & (self.errors - 1) == 0:
            log.warning("actor endpoint '%s': %s [#%d]", self.actor_id, text, self.errors)

    def _hello_ok(self, msg: HelloOk, now: float, send: SendFn) -> None:
        if self.state != "connecting":
            return
        fields = self.spec.diff(msg.spec)
        if fields:
            text = f"spec mismatch with the learner: differing field(s) {fields}"
            send(error_frames(ErrorCode.SPEC_MISMATCH, f"actor '{self.actor_id}': {text}", fields))
            self.fail(SpecMismatchError(text, fields))
            return
        if msg.session != self.learner_session:
            if self.learner_session:
                log.info("actor endpoint '%s': connected to a new learner instance", self.actor_id)
            self.learner_session = msg.session
            self.weights, self.weights_new = None, False  # versions restart with a new learner
        self.max_message_bytes = min(self.config.limits.max_message_bytes, msg.max_message_bytes)
        self._ack(msg.acked, now)
        for p in self.unacked.values():  # whatever the old connection carried is resent, in order
            p.sent = False
        self.state, self.last_progress, self.hb_due = "connected", now, True
        self.cond.notify_all()

    def _error_reply(self, msg: ErrorReply) -> None:
        self._count_error(f"learner replied {msg.code}: {msg.message}")
        if msg.code == ErrorCode.NO_HANDSHAKE:
            self.state, self.last_hello = "connecting", _NEVER
        elif msg.code in (ErrorCode.SPEC_MISMATCH, ErrorCode.BAD_VERSION, ErrorCode.UNAUTHORIZED):
            self.fail(msg.to_exception("learner"))

    # -- outbound
    def tick(self, now: float, send: SendFn) -> None:
        if self.state in ("failed", "closed"):
            return
        cfg = self.config
        if now - self.last_rx > cfg.heartbeat_timeout_s:
            if self.state == "connected":
                log.warning("actor endpoint '%s': no message from the learner for %.1f s; reconnecting",
                            self.actor_id, now - self.last_rx)
            self.request_reconnect(now)
            return
        if not self.link_ok:
            return
        if self.state == "connecting":
            if now - self.last_hello >= cfg.hello_retry_s and send(
                    encode(Hello("actor", self.actor_id, self.spec, self.session, self.acked))):
                self.last_hello = now
            return
        if self.unacked and now - self.last_progress >= cfg.resend_after_s:
            # acks stalled (messages lost with a connection or dropped by a busy learner): resend them all
            for p in self.unacked.values():
                p.sent = False
            self.last_progress = now
        for p in self.unacked.values():
            if p.sent:
                continue
            if not send(p.frames):
                break
            p.sent = True
            if p.sends:
                self.resent_messages += 1
            else:
                self.sent_messages += 1
                self.sent_transitions += p.end - p.seq
            p.sends += 1
        if self.hb_due or now - self.last_hb >= cfg.heartbeat_s:
            stats = {**self.reported, "unacked": len(self.unacked), "acked_upto": self.acked}
            if send(encode(Heartbeat("actor", self.actor_id, time.time(), self.weights_version, stats))):
                self.last_hb, self.hb_due = now, False

    def stats(self, now: float) -> ActorStats:
        return ActorStats(self.actor_id, self.state, self.next_seq, self.acked, self.sent_messages,
                          self.sent_transitions, self.resent_messages, len(self.unacked), self.unacked_bytes,
                          self.backpressure, self.reconnects, self.errors, self.last_error, self.weights_version,
                          self.weights_received, dict(self.learner_stats), now - self.last_rx, self.session)


# --------------------------------------------------------------------------------------------------- endpoints

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


# --------------------------------------------------------------------------------------------------- security

def is_local_address(address: str) -> bool:
    """True for ipc://, inproc:// and tcp:// on a loopback host (127.0.0.0/8, ::1, localhost)."""
    scheme, sep, rest = address.partition("://")
    if not sep:
        raise ConfigError(f"address={address!r} must look like tcp://HOST:PORT")
    if scheme in ("ipc", "inproc"):
        return True
    if scheme != "tcp":
        raise ConfigError(f"address={address!r}: transport '{scheme}' is not supported (tcp, ipc, inproc)")
    host = rest.rsplit(":", 1)[0].strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # '*', interface names, host names: not provably loopback


def check_address(address: str, keys: object | None, insecure: bool) -> None:
    """Raise `ConfigError` for a non-loopback address without CURVE keys unless `insecure`."""
    if not is_local_address(address) and keys is None and not insecure:
        raise ConfigError(
            f"address={address!r} is not loopback: pass CURVE keys (robot_rl.keys.generate_keys, later "
            f"'robot-rl keys generate DIR') or insecure=True to send unencrypted, unauthenticated traffic")


# --------------------------------------------------------------------------------------------------- ZeroMQ

class _ZmqDriverBase:
    """Shared by both ZeroMQ drivers: a private context, a wake-up socket pair and the I/O thread."""

    def __init__(self, cond: threading.Condition, config: TransportConfig, name: str) -> None:
        import zmq

        self._zmq = zmq
        self._cond, self._config = cond, config
        self.ctx = zmq.Context()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        # registered and looked up by file descriptor: zmq.Poller reports a plain socket by its fd, so a lookup by
        # the socket object never matched, the wake-up byte was never read and the I/O thread spun at 100 % CPU
        # after the first kick (stealing the GIL from the learner's updates and the actor's control loop)
        self._wake_fd = self._wake_r.fileno()
        self._stop = False
        self._thread = threading.Thread(target=self._run_guarded, name=name, daemon=True)

    def _options(self, sock: Any) -> None:
        zmq, cfg = self._zmq, self._config
        sock.setsockopt(zmq.LINGER, cfg.linger_ms)
        sock.setsockopt(zmq.SNDHWM, cfg.hwm)
        sock.setsockopt(zmq.RCVHWM, cfg.hwm)
        sock.setsockopt(zmq.MAXMSGSIZE, cfg.limits.max_message_bytes)  # a bigger frame drops the connection
        sock.setsockopt(zmq.RECONNECT_IVL, cfg.reconnect_ivl_ms)
        sock.setsockopt(zmq.RECONNECT_IVL_MAX, cfg.reconnect_ivl_max_ms)
        sock.setsockopt(zmq.TCP_KEEPALIVE, 1)

    def kick(self) -> None:
        try:
            self._wake_w.send(b"\0")
        except (BlockingIOError, OSError):
            pass  # already awake (buffer full) or closed

    def refresh(self) -> None:
        pass  # the I/O thread handles arrivals and timers without being woken

    def wait(self, pred: Callable[[], bool], timeout: float) -> bool:
        with self._cond:
            return self._cond.wait_for(pred, timeout)

    def close(self) -> None:
        self._stop = True
        self.kick()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout=self._config.linger_ms / 1000 + 5.0)

    def _drain_wake(self) -> None:
        try:
            while self._wake_r.recv(4096):
                pass
        except (BlockingIOError, OSError):
            pass

    def _run_guarded(self) -> None:
        try:
            self._run()
        except Exception as err:  # a bug here must not pass silently: fail the endpoint loudly
            log.exception("transport I/O thread crashed")
            self._crashed(err)
        finally:
            self._wake_r.close()
            self._wake_w.close()
            self.ctx.term()

    def _run(self) -> None:
        raise NotImplementedError

    def _crashed(self, err: Exception) -> None:
        raise NotImplementedError


class _ZmqLearnerDriver(_ZmqDriverBase):
    def __init__(self, core: _LearnerCore, address: str, keys: ServerKeys | None) -> None:
        super().__init__(core.cond, core.config, "robot-rl-learner-io")
        zmq = self._zmq
        self.core = core
        self.auth: Any = None
        sock = self.ctx.socket(zmq.ROUTER)
        try:
            self._options(sock)
            sock.setsockopt(zmq.ROUTER_MANDATORY, 0)  # unroutable/overflowing replies are dropped, never block
            if keys is not None:
                self._start_auth(keys)
                sock.curve_server = True
                sock.curve_publickey = keys.public
                sock.curve_secretkey = keys.secret
            bind_to = address[:-2] + ":*" if address.startswith("tcp://") and address.endswith(":0") else address
            sock.bind(bind_to)
            self.address = sock.getsockopt_string(zmq.LAST_ENDPOINT)
        except zmq.ZMQError as err:
            sock.close(linger=0)
            if self.auth is not None:
                self.auth.stop()
            self._wake_r.close()
            self._wake_w.close()
            self.ctx.term()
            raise ProtocolError(f"cannot bind {address}: {err}", ErrorCode.BIND_FAILED) from err
        self.sock = sock
        self._thread.start()

    def _start_auth(self, keys: ServerKeys) -> None:
        from zmq.auth.thread import ThreadAuthenticator

        core, allowed = self.core, keys.authorized

        class _Keys:
            def callback(self, domain: str, key: bytes) -> bool:
                if key in allowed:
                    return True
                text = f"refused a client with unknown CURVE key {key.decode(errors='replace')}"
                with core.cond:
                    core.unauthorized += 1
                    core.last_error = text
                log.warning("learner endpoint: %s", text)
                return False

        self.auth = ThreadAuthenticator(self.ctx, log=logging.getLogger("robot_rl.transport.zap"))
        self.auth.start()
        self.auth.configure_curve_callback(domain="*", credentials_provider=_Keys())

    def _send(self, rid: bytes, frames: Sequence[Frame]) -> bool:
        try:
            self.sock.send_multipart([rid, *frames], flags=self._zmq.NOBLOCK, copy=False)
            return True
        except self._zmq.ZMQError:
            return False

    def _run(self) -> None:
        zmq, core, cfg = self._zmq, self.core, self._config
        poller = zmq.Poller()
        poller.register(self.sock, zmq.POLLIN)
        poller.register(self._wake_fd, zmq.POLLIN)
        try:
            while not self._stop:
                events = dict(poller.poll(cfg.poll_ms))
                if self._wake_fd in events:
                    self._drain_wake()
                for _ in range(256):
                    try:
                        frames = self.sock.recv_multipart(zmq.NOBLOCK, copy=False)
                    except zmq.Again:
                        break
                    with core.cond:
                        core.handle(frames[0].bytes, frames[1:], core.clock(), self._send)
                        core.cond.notify_all()
                with core.cond:
                    core.tick(core.clock(), self._send)
            with core.cond:  # flush acks for what recv() handed out
                core.tick(core.clock(), self._send)
        finally:
            self.sock.close(linger=cfg.linger_ms)
            if self.auth is not None:
                self.auth.stop()

    def _crashed(self, err: Exception) -> None:
        with self.core.cond:
            self.core.closed = True
            self.core.last_error = f"I/O thread crashed: {err!r}"
            self.core.cond.notify_all()


class _ZmqActorDriver(_ZmqDriverBase):
    def __init__(self, core: _ActorCore, address: str, keys: ClientKeys | None) -> None:
        super().__init__(core.cond, core.config, f"robot-rl-actor-io-{core.actor_id}")
        self.core, self.address, self.keys = core, address, keys
        self.sock: Any = None
        self.mon: Any = None
        self._open()
        self._thread.start()

    def _open(self) -> None:
        zmq = self._zmq
        sock = self.ctx.socket(zmq.DEALER)
        self._options(sock)
        # IMMEDIATE stays 0: with 1, libzmq drops received-but-unread messages (the learner's last acks) when
        # the connection breaks. Nothing queues for a missing connection anyway: the core sends only between
        # the monitor's HANDSHAKE_SUCCEEDED and DISCONNECTED events (link_up / link_down).
        sock.setsockopt(zmq.IMMEDIATE, 0)
        if self.keys is not None:
            sock.curve_serverkey = self.keys.server_public
            sock.curve_publickey = self.keys.public
            sock.curve_secretkey = self.keys.secret
        events = (zmq.EVENT_HANDSHAKE_SUCCEEDED | zmq.EVENT_HANDSHAKE_FAILED_AUTH | zmq.EVENT_DISCONNECTED
                  | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL)
        self.mon = sock.get_monitor_socket(events)
        sock.connect(self.address)
        self.sock = sock

    def _close_socket(self) -> None:
        if self.sock is not None:
            self.sock.disable_monitor()
            self.mon.close(linger=0)
            self.sock.close(linger=0)
            self.sock = self.mon = None

    def _send(self, frames: Sequence[Frame]) -> bool:
        try:
            self.sock.send_multipart(frames, flags=self._zmq.NOBLOCK, copy=False)
            return True
        except self._zmq.ZMQError:
            return False

    def _monitor_events(self) -> None:
        from zmq.utils.monitor import recv_monitor_message

        zmq, core = self._zmq, self.core
        while True:
            try:
                event = recv_monitor_message(self.mon, zmq.NOBLOCK)
            except zmq.Again:
                return
            kind = event["event"]
            with core.cond:
                if kind == zmq.EVENT_HANDSHAKE_SUCCEEDED:
                    core.link_up()
                elif kind == zmq.EVENT_DISCONNECTED:
                    core.link_down()
                elif kind == zmq.EVENT_HANDSHAKE_FAILED_AUTH:
                    core.fail(ProtocolError(f"the learner at {self.address} refused this actor's CURVE key "
                                            f"(status {event['value']}); add its public key to the learner's "
                                            f"authorized_clients", ErrorCode.UNAUTHORIZED))
                elif kind == zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL:
                    core._count_error(f"ZMTP/CURVE handshake with {self.address} failed (code {event['value']}); "
                                      f"check that both sides use CURVE with matching server keys")

    def _run(self) -> None:
        zmq, core, cfg = self._zmq, self.core, self._config
        try:
            while not self._stop:
                poller = zmq.Poller()
                poller.register(self.sock, zmq.POLLIN)
                poller.register(self.mon, zmq.POLLIN)
                poller.register(self._wake_fd, zmq.POLLIN)
                while not self._stop:
                    events = dict(poller.poll(cfg.poll_ms))
                    if self._wake_fd in events:
                        self._drain_wake()
                    if self.mon in events:
                        self._monitor_events()
                    for _ in range(256):
                        try:
                            frames = self.sock.recv_multipart(zmq.NOBLOCK, copy=False)
                        except zmq.Again:
                            break
                        with core.cond:
                            core.handle(frames, core.clock(), self._send)
                    with core.cond:
                        core.tick(core.clock(), self._send)
                        core.cond.notify_all()
                        reconnect, core.reconnect_requested = core.reconnect_requested, False
                    if reconnect:  # a fresh socket: drops whatever the old connection still queued
                        self._close_socket()
                        self._open()
                        break
        finally:
            self._close_socket()

    def _crashed(self, err: Exception) -> None:
        with self.core.cond:
            self.core.fail(ProtocolError(f"actor I/O thread crashed: {err!r}", ErrorCode.INTERNAL))


def bind_learner(spec: EnvSpec, address: str = "tcp://127.0.0.1:5555", config: TransportConfig | None = None,
                 keys: ServerKeys | None = None, insecure: bool = False) -> LearnerEndpoint:
    """Bind a learner endpoint (ROUTER) at `address` (`tcp://127.0.0.1:0` picks a free port: see `.address`).

    Non-loopback addresses need `keys` (CURVE + ZAP with the authorized client keys) or `insecure=True`.
    """
    check_address(address, keys, insecure)
    cfg = config or TransportConfig()
    core = _LearnerCore(spec, cfg, time.monotonic)
    driver = _ZmqLearnerDriver(core, address, keys)
    return LearnerEndpoint(core, driver, driver.address)


def connect_actor(spec: EnvSpec, actor_id: str, address: str = "tcp://127.0.0.1:5555",
                  config: TransportConfig | None = None, keys: ClientKeys | None = None,
                  insecure: bool = False) -> ActorEndpoint:
    """Connect an actor endpoint (DEALER) to the learner at `address`; returns at once (see `wait_connected`).

    Non-loopback addresses need `keys` (the learner's public key and an authorized client pair) or
    `insecure=True`.
    """
    check_address(address, keys, insecure)
    core = _ActorCore(spec, actor_id, config or TransportConfig(), time.monotonic)
    return ActorEndpoint(core, _ZmqActorDriver(core, address, keys))


# --------------------------------------------------------------------------------------------------- in memory

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


class _MemLearnerDriver:
    def __init__(self, hub: InMemoryHub, core: _LearnerCore) -> None:
        self.hub, self.core = hub, core
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

    def kick(self) -> None:
        self.hub.pump()

    def refresh(self) -> None:
        self.hub.pump()

    def wait(self, pred: Callable[[], bool], timeout: float) -> bool:
        return self.hub._wait(self.core.cond, pred, timeout)

    def close(self) -> None:
        with self.hub._lock:
            with self.core.cond:
                self.core.tick(self.hub.clock(), self._send)  # flush acks
            if self.hub._learner is self:
                self.hub._learner = None
                for a in self.hub._actors:
                    with a.core.cond:
                        a.core.link_down()


class _MemActorDriver:
    def __init__(self, hub: InMemoryHub, core: _ActorCore) -> None:
        self.hub, self.core = hub, core
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

    def kick(self) -> None:
        self.hub.pump()

    def refresh(self) -> None:
        self.hub.pump()

    def wait(self, pred: Callable[[], bool], timeout: float) -> bool:
        return self.hub._wait(self.core.cond, pred, timeout)

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
