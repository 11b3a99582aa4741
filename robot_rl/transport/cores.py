"""Transport, the protocol cores: the I/O-free state machines of both sides, run by every driver (ZeroMQ and in
memory) alike.

- `_SeqSet`: the seqs seen from one actor (a contiguous prefix `upto` + out-of-order ranges above it): the
  learner's duplicate ledger and its record of what was delivered.
- `_LearnerCore`: handshakes (spec check, sessions), duplicate drops, the bounded receive queue, acks,
  heartbeats, the weights fan-out (latest wins per actor) and error counts.
- `_ActorCore`: the handshake, seq numbering, the bounded unacknowledged buffer and its resends, received
  weights, liveness (reconnect after `heartbeat_timeout_s` of silence).
- `Delivery`: a received TRANSITIONS message handed over by `LearnerEndpoint.recv_deliveries`.

A core owns no socket, thread or clock: a driver calls `handle(...)` for each arriving message and
`tick(now, send)` for timers, with the core's `cond` held, and every outgoing message leaves through the `send`
function it passes in. The endpoints (`robot_rl.transport.endpoints`) read and change a core under the same
lock.

Usage (what a driver does; a test can drive a core the same way)::

    core = _ActorCore(spec, "a0", TransportConfig(), time.monotonic)
    with core.cond:
        core.link_up()                                   # a connection is up: HELLO on the next tick
        core.tick(core.clock(), send)                    # send(frames) -> bool (False: keep it pending)
        core.handle(frames, core.clock(), send)          # one message from the learner (bytes frames)
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import math
import secrets
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from robot_rl.errors import ConfigError, ProtocolError, RobotRLError, SpecMismatchError
from robot_rl.specs import EnvSpec
from robot_rl.transport.config import TransportConfig
from robot_rl.transport.stats import ActorStats, LearnerStats, PeerStats
from robot_rl.wire import (
    Ack,
    ErrorCode,
    ErrorReply,
    Frame,
    Heartbeat,
    Hello,
    HelloOk,
    TransitionChunk,
    Transitions,
    Weights,
    check_chunk,
    decode,
    encode,
    error_frames,
    frames_nbytes,
)

log = logging.getLogger("robot_rl.transport")

Clock = Callable[[], float]
SendFn = Callable[[Sequence[Frame]], bool]
SendToFn = Callable[[bytes, Sequence[Frame]], bool]
_NEVER = -math.inf
_MAX_RANGES = 4096  # out-of-order seq ranges remembered per actor (beyond: bad_seq)


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
