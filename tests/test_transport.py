"""robot_rl.transport: the same protocol behaviour over real ZeroMQ (loopback tcp, ephemeral ports) and in memory.

Every test here runs for both transports (the `net` fixture), except where ZeroMQ itself is the subject.
No test talks to a non-loopback address.
"""

from __future__ import annotations

import itertools
import logging
import socket
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import msgpack
import numpy as np
import pytest
import zmq
from hypothesis import given, settings
from hypothesis import strategies as st
from test_wire import exploit_payload

from robot_rl.errors import ConfigError, ProtocolError, SpecMismatchError
from robot_rl.specs import ArraySpec, EnvSpec
from robot_rl.transport import (
    ActorEndpoint,
    InMemoryHub,
    LearnerEndpoint,
    TransportConfig,
    bind_learner,
    connect_actor,
)
from robot_rl.transport.cores import _ActorCore, _SeqSet
from robot_rl.wire import (
    Ack,
    ErrorCode,
    ErrorReply,
    Heartbeat,
    Hello,
    HelloOk,
    Limits,
    TransitionChunk,
    Transitions,
    Weights,
    decode,
    encode,
)

SPEC = EnvSpec("twin-test", (ArraySpec("images/front", (8, 8, 3), "uint8"), ArraySpec("state", (3,), "float32")),
               ArraySpec("action", (2,), "float32", -1.0, 1.0), 10.0)
FAST = TransportConfig(heartbeat_s=0.05, heartbeat_timeout_s=2.0, hello_retry_s=0.05, resend_after_s=1.0,
                       linger_ms=200, poll_ms=10)
QUICK = FAST.replace(heartbeat_timeout_s=0.5, resend_after_s=0.2)  # for the tests about timeouts themselves


def chunk(t: int = 2, fill: int = 0, spec: EnvSpec = SPEC) -> TransitionChunk:
    img = spec.observation[0].shape
    obs = [{"images": {"front": np.full(img, (fill + i) % 256, np.uint8)}, "state": np.full(3, i, np.float32)}
           for i in range(t + 1)]
    return TransitionChunk.from_steps(obs, np.zeros((t, 2), np.float32), [1.0] * t, [False] * t, [False] * t)


def until(pred: Callable[[], Any], timeout: float = 3.0, step: Callable[[], Any] | None = None) -> Any:
    """Poll `pred` (calling `step` in between) until truthy or `timeout`; returns the last value."""
    deadline = time.monotonic() + timeout
    while True:
        if step is not None:
            step()
        value = pred()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.005)


def drain(learner: LearnerEndpoint, n_messages: int, timeout: float = 3.0) -> list[Transitions]:
    out: list[Transitions] = []
    deadline = time.monotonic() + timeout
    while len(out) < n_messages and time.monotonic() < deadline:
        out += learner.recv(timeout=0.05, max_messages=n_messages - len(out))  # never take more than asked
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class _ZmqRaw:
    """A bare DEALER that sends and receives raw frames."""

    def __init__(self, ctx: zmq.Context[Any], address: str) -> None:
        self.sock = ctx.socket(zmq.DEALER)
        self.sock.linger = 0
        self.sock.connect(address)

    def send(self, frames: Sequence[Any]) -> None:
        self.sock.send_multipart(list(frames))

    def recv(self, timeout: float = 2.0) -> list[bytes] | None:
        if self.sock.poll(int(timeout * 1000)):
            return self.sock.recv_multipart()
        return None

    def close(self) -> None:
        self.sock.close()


class Net:
    """One transport under test: bind a learner (again, at the same address, to restart it), connect actors,
    open raw frame-level peers."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.hub = InMemoryHub(FAST)
        self.address = f"tcp://127.0.0.1:{free_port()}"  # fixed up front: actors may connect before a bind
        self.ctx: zmq.Context[Any] = zmq.Context()
        self.closers: list[Callable[[], None]] = []

    def bind(self, spec: EnvSpec = SPEC, config: TransportConfig = FAST) -> LearnerEndpoint:
        if self.kind == "memory":
            learner = self.hub.bind_learner(spec, config)
        else:
            learner = bind_learner(spec, self.address, config)
        self.closers.append(learner.close)
        return learner

    def connect(self, actor_id: str = "a0", spec: EnvSpec = SPEC, config: TransportConfig = FAST) -> ActorEndpoint:
        if self.kind == "memory":
            actor = self.hub.connect_actor(spec, actor_id, config)
        else:
            actor = connect_actor(spec, actor_id, self.address, config)
        self.closers.append(actor.close)
        return actor

    def raw(self) -> Any:
        peer = self.hub.connect_raw() if self.kind == "memory" else _ZmqRaw(self.ctx, self.address)
        self.closers.append(peer.close)
        return peer

    def close(self) -> None:
        for close in reversed(self.closers):
            close()
        self.ctx.term()


@pytest.fixture(params=["zmq", "memory"])
def net(request: pytest.FixtureRequest) -> Iterator[Net]:
    n = Net(request.param)
    yield n
    n.close()


def handshake(raw: Any, actor_id: str = "raw") -> HelloOk:
    raw.send(encode(Hello("actor", actor_id, SPEC, "sess")))
    reply = decode(raw.recv())
    assert isinstance(reply, HelloOk), reply
    return reply


def recv_kind(raw: Any, kind: type, where: Callable[[Any], bool] = lambda m: True, timeout: float = 2.0) -> Any:
    """The next message of `kind` (for which `where` holds) from the learner, skipping all others."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        frames = raw.recv(timeout=max(0.01, deadline - time.monotonic()))
        if frames is None:
            break
        msg = decode(frames)
        if isinstance(msg, kind) and where(msg):
            return msg
    raise AssertionError(f"no {kind.__name__} within {timeout} s")


# ------------------------------------------------------------------------------------------------ delivery

def test_transitions_are_delivered_acked_and_counted(net: Net) -> None:
    learner = net.bind()
    actor = net.connect("a0")
    assert actor.wait_connected(3.0)
    for i in range(10):
        assert actor.send(chunk(t=3, fill=i))
    got = drain(learner, 10)
    assert [m.seq for m in got] == list(range(0, 30, 3))
    assert got[4].chunk.observations["images/front"][0, 0, 0, 0] == 4
    assert all(m.actor_id == "a0" for m in got)
    assert actor.flush(3.0)
    s = actor.stats()
    assert (s.sent_messages, s.sent_transitions, s.acked_upto, s.unacked_messages) == (10, 30, 29, 0)
    peer = learner.stats().actors["a0"]
    assert (peer.received_messages, peer.received_transitions, peer.duplicates, peer.errors) == (10, 30, 0, 0)
    assert peer.alive and peer.acked_upto == 29


def test_many_actors_fan_in(net: Net) -> None:
    learner = net.bind()
    actors = [net.connect(f"a{i}") for i in range(3)]
    for a in actors:
        for i in range(4):
            assert a.send(chunk(fill=i))
    got = drain(learner, 12)
    assert sorted((m.actor_id, m.seq) for m in got) == [(f"a{i}", s) for i in range(3) for s in range(0, 8, 2)]
    assert all(a.flush(3.0) for a in actors)
    assert set(learner.stats().actors) == {"a0", "a1", "a2"}


def test_duplicates_are_dropped_and_acked(net: Net) -> None:
    learner = net.bind()
    raw = net.raw()
    handshake(raw)
    frames = encode(Transitions("raw", 0, chunk(t=2)))
    raw.send(frames)
    raw.send(frames)
    got = drain(learner, 2, timeout=0.5)
    assert [m.seq for m in got] == [0]
    recv_kind(raw, Ack, lambda m: m.upto == 1)
    assert learner.stats().actors["raw"].duplicates == 1
    raw.send(frames)  # a resend of an acked message: dropped, acked again
    recv_kind(raw, Ack, lambda m: m.upto == 1)
    assert learner.stats().actors["raw"].duplicates == 2
    assert learner.recv(timeout=0.1) == []


def test_out_of_order_ranges_are_delivered_once_and_acked_contiguously(net: Net) -> None:
    learner = net.bind()
    raw = net.raw()
    handshake(raw)
    raw.send(encode(Transitions("raw", 2, chunk(t=2))))  # seqs 2-3 before 0-1
    assert [m.seq for m in drain(learner, 1)] == [2]
    assert recv_kind(raw, Ack).upto == -1  # nothing contiguous yet
    raw.send(encode(Transitions("raw", 0, chunk(t=2))))
    assert [m.seq for m in drain(learner, 1)] == [0]
    recv_kind(raw, Ack, lambda m: m.upto == 3)
    raw.send(encode(Transitions("raw", 3, chunk(t=2))))  # [3, 5) overlaps [2, 4) partially: refused
    assert recv_kind(raw, ErrorReply).code == ErrorCode.BAD_SEQ


def test_learner_restart_resends_and_delivers_everything_exactly_once(net: Net) -> None:
    learner = net.bind()
    actor = net.connect("a0")
    assert actor.wait_connected(3.0)
    for i in range(6):
        assert actor.send(chunk(fill=i))
    delivered = [(m.actor_id, m.seq) for m in drain(learner, 3)]  # some handed out (acked) ...
    assert len(delivered) == 3
    learner.close()  # ... the rest received but never handed out: lost with the learner, not acked
    for i in range(6, 10):  # the actor keeps collecting while the learner is down
        assert actor.send(chunk(fill=i))
    learner2 = net.bind()  # same address
    delivered += [(m.actor_id, m.seq) for m in drain(learner2, 7, timeout=5.0)]
    assert actor.flush(5.0)
    assert sorted(delivered) == [("a0", s) for s in range(0, 20, 2)]  # every seq exactly once
    assert actor.stats().acked_upto == 19


def test_backpressure_bounds_the_unacked_buffer(net: Net) -> None:
    cfg = FAST.replace(max_unacked_messages=4, max_unacked_bytes=10_000)
    actor = net.connect("a0", config=cfg)  # no learner yet: nothing can be acked
    one = chunk(t=2)
    accepted = [actor.send(one) for _ in range(10)]
    assert accepted == [True] * 4 + [False] * 6
    s = actor.stats()
    assert s.unacked_messages == 4 and s.unacked_bytes <= 10_000 and s.backpressure == 6
    assert not actor.send(one, timeout=0.2)  # waiting for room that never comes ends in False, not a hang
    assert actor.stats().backpressure == 7
    small = FAST.replace(max_unacked_messages=100, max_unacked_bytes=1_000)
    actor2 = net.connect("a1", config=small)
    assert actor2.send(one)  # one oversized message is admitted into an empty buffer ...
    assert not actor2.send(one)  # ... but nothing more
    learner = net.bind()
    got = drain(learner, 5, timeout=5.0)  # once drained, the buffers empty and sends succeed again
    assert sorted((m.actor_id, m.seq) for m in got) == [("a0", 0), ("a0", 2), ("a0", 4), ("a0", 6), ("a1", 0)]
    assert actor.flush(3.0)
    assert actor.send(one, timeout=1.0)


def test_busy_learner_drops_unacked_and_the_actor_resends(net: Net) -> None:
    learner = net.bind(config=QUICK.replace(max_queued_messages=2))
    actor = net.connect("a0", config=QUICK)
    for i in range(6):
        assert actor.send(chunk(fill=i))
    assert until(lambda: learner.stats().busy_drops >= 1, step=lambda: learner.recv(timeout=0, max_messages=0))
    got = drain(learner, 6, timeout=5.0)
    assert sorted(m.seq for m in got) == list(range(0, 12, 2))
    assert actor.flush(3.0)
    assert actor.stats().resent_messages >= 1


def test_weights_are_versioned_and_latest_wins(net: Net) -> None:
    learner = net.bind()
    actor = net.connect("a0")
    assert actor.wait_connected(3.0)
    assert actor.latest_weights() is None
    w = np.arange(6, dtype=np.float32)
    learner.publish_weights(1, {"pi/w": w})
    w[:] = -1  # published weights were copied: later in-place updates do not leak into them
    first = until(actor.latest_weights)
    assert first.version == 1 and first.arrays["pi/w"].tolist() == [0, 1, 2, 3, 4, 5]
    for v in range(2, 6):
        learner.publish_weights(v, {"pi/w": np.full(6, v, np.float32)})
    seen = [1]
    until(lambda: seen[-1] == 5, step=lambda: (lambda w: w and seen.append(w.version))(actor.latest_weights()))
    assert seen[-1] == 5 and seen == sorted(seen)  # versions only increase; intermediate ones may be skipped
    assert actor.latest_weights() is None  # nothing new
    with pytest.raises(ConfigError, match="version"):
        learner.publish_weights(5, {"pi/w": w})
    assert until(lambda: learner.stats().actors["a0"].weights_version == 5)


def test_heartbeats_flow_both_ways_with_reported_stats(net: Net) -> None:
    learner = net.bind()
    actor = net.connect("a0")
    actor.report(episodes=3, success_rate=0.5)
    learner.report(update_step=np.int64(12))
    assert until(lambda: learner.stats().actors.get("a0") and learner.stats().actors["a0"].reported.get("episodes"),
                 step=lambda: learner.recv(timeout=0))
    assert learner.stats().actors["a0"].reported["success_rate"] == 0.5
    assert until(lambda: actor.stats().learner.get("update_step") == 12, step=lambda: learner.recv(timeout=0))
    # a control loop's report never waits for the I/O thread: while another thread holds the endpoint's lock
    # it returns False (and reports nothing); once the lock is free the same report goes through
    import threading

    held, release = threading.Event(), threading.Event()

    def hold_lock() -> None:
        with actor._core.cond:
            held.set()
            release.wait(5.0)

    holder = threading.Thread(target=hold_lock)
    holder.start()
    assert held.wait(5.0)
    assert actor.report(block=False, episodes=7) is False
    release.set()
    holder.join()
    assert actor._core.reported["episodes"] == 3
    assert until(lambda: actor.report(block=False, episodes=7))  # (the I/O thread takes the lock briefly too)
    assert actor._core.reported["episodes"] == 7


def test_dead_learner_is_detected_and_the_actor_reconnects_by_itself(net: Net) -> None:
    learner = net.bind(config=QUICK)
    actor = net.connect("a0", config=QUICK)
    assert actor.wait_connected(3.0)
    learner.close()
    assert until(lambda: actor.stats().state == "connecting", timeout=3.0)
    assert until(lambda: actor.stats().reconnects >= 1, timeout=3.0)  # heartbeat timeout: new socket
    assert actor.send(chunk())  # still collecting, with the last weights, while the learner is down
    learner2 = net.bind(config=QUICK)
    assert actor.wait_connected(3.0)
    assert [m.seq for m in drain(learner2, 1)] == [0]


def test_learner_forgets_silent_actors_and_they_come_back(net: Net) -> None:
    learner = net.bind(config=QUICK)
    actor = net.connect("a0")
    assert actor.wait_connected(3.0)
    assert until(lambda: learner.stats().actors["a0"].alive, step=lambda: learner.recv(timeout=0))
    actor.close()
    assert until(lambda: not learner.stats().actors["a0"].alive, step=lambda: learner.recv(timeout=0))
    again = net.connect("a0")  # a restarted actor: new session, seqs start over, nothing dropped as a duplicate
    assert again.send(chunk())
    assert [(m.actor_id, m.seq) for m in drain(learner, 1)] == [("a0", 0)]
    assert learner.stats().actors["a0"].duplicates == 0


# ------------------------------------------------------------------------------------------------ handshake

def test_spec_mismatch_names_the_field_on_both_sides(net: Net, caplog: pytest.LogCaptureFixture) -> None:
    learner = net.bind()
    other = EnvSpec(SPEC.task, (ArraySpec("images/front", (16, 16, 3), "uint8"), SPEC.observation[1]),
                    SPEC.action, SPEC.control_hz)
    actor = net.connect("a0", spec=other)
    with caplog.at_level(logging.WARNING, logger="robot_rl.transport"):
        with pytest.raises(SpecMismatchError, match="observation/images/front") as info:
            actor.wait_connected(3.0)
    assert "observation/images/front" in info.value.fields
    stats = learner.stats()
    assert "observation/images/front" in stats.last_error and "a0" in stats.last_error
    assert stats.errors_by_code[ErrorCode.SPEC_MISMATCH] == 1
    assert any("observation/images/front" in r.getMessage() for r in caplog.records)
    with pytest.raises(SpecMismatchError):  # the actor stays failed: no silent retries with a wrong spec
        actor.send(chunk(spec=other))
    good = net.connect("a1")  # and the learner keeps serving
    assert good.wait_connected(3.0)


def test_actor_checks_the_learner_spec_too() -> None:
    """The actor side of the two-way check: a HELLO_OK with another spec fails the actor and tells the learner."""
    core = _ActorCore(SPEC, "a0", FAST, time.monotonic)
    other = EnvSpec("another-task", SPEC.observation, SPEC.action, SPEC.control_hz)
    sent: list[Any] = []
    with core.cond:
        core.handle([bytes(f) for f in encode(HelloOk("learner", other, "s"))], time.monotonic(),
                    lambda frames: sent.append(decode([bytes(memoryview(f)) for f in frames])) or True)
    assert isinstance(core.fatal, SpecMismatchError) and core.fatal.fields == ["task"]
    assert isinstance(sent[0], ErrorReply) and sent[0].fields == ("task",)


def test_send_refuses_a_chunk_that_does_not_match_the_spec(net: Net) -> None:
    actor = net.connect("a0")
    bad = chunk(spec=EnvSpec(SPEC.task, (ArraySpec("images/front", (4, 4, 3), "uint8"), SPEC.observation[1]),
                             SPEC.action, 10.0))
    with pytest.raises(ProtocolError, match="images/front"):
        actor.send(bad)
    actor.close()
    with pytest.raises(ProtocolError, match="closed"):
        actor.send(chunk())


# ------------------------------------------------------------------------------------------------ malformed input

def _bad_messages(marker: Path) -> dict[str, tuple[list[bytes], str]]:
    valid = [bytes(memoryview(f)) for f in encode(Transitions("raw", 0, chunk()))]
    h = msgpack.unpackb(valid[0])
    wrong_shape = {**h, "a": [[n, d, [s[0] + 1, *s[1:]]] for n, d, s in h["a"]]}
    wrong_version = {**h, "v": 2}
    payload = exploit_payload(marker)
    return {
        "garbage": ([b"\x00garbage\xff" * 3], ErrorCode.BAD_HEADER),
        "pickle as header": ([payload], ErrorCode.BAD_HEADER),
        "pickle as array frame": ([valid[0], payload, *valid[2:]], ErrorCode.BAD_SHAPE),
        "truncated": ([*valid[:-1], valid[-1][:-1]], ErrorCode.BAD_SHAPE),
        "wrong frame count": (valid[:-2], ErrorCode.BAD_FRAMES),
        "wrong shape": ([msgpack.packb(wrong_shape), *valid[1:]], ErrorCode.BAD_SHAPE),
        "wrong version": ([msgpack.packb(wrong_version), *valid[1:]], ErrorCode.BAD_VERSION),
        "oversized": ([*valid, b"\x00" * 1_500_000, b"\x00" * 1_500_000], ErrorCode.TOO_LARGE),
        "unknown kind": ([msgpack.packb({**h, "k": "SHELL"}), *valid[1:]], ErrorCode.UNKNOWN_KIND),
    }


def test_malformed_messages_get_an_error_reply_and_the_endpoint_keeps_serving(net: Net, tmp_path: Path) -> None:
    learner = net.bind(config=FAST.replace(limits=Limits(max_message_bytes=2_000_000)))
    raw = net.raw()
    marker = tmp_path / "ran"
    cases = _bad_messages(marker)
    for name, (frames, code) in cases.items():
        raw.send(frames)
        reply = decode(raw.recv())
        assert isinstance(reply, ErrorReply), name
        assert reply.code == code, f"{name}: {reply.code} != {code} ({reply.message})"
    raw.send(encode(Transitions("raw", 0, chunk())))  # well formed, but before the handshake
    assert decode(raw.recv()).code == ErrorCode.NO_HANDSHAKE
    handshake(raw)
    raw.send(encode(Weights(1, {})))  # a kind the learner does not accept
    assert recv_kind(raw, ErrorReply).code == ErrorCode.UNEXPECTED_KIND
    for name, (frames, code) in cases.items():  # the same garbage from a known actor is counted against it
        raw.send(frames)
        assert recv_kind(raw, ErrorReply).code == code, name
    raw.send(encode(Transitions("raw", 0, chunk())))  # a valid message still works
    assert [m.seq for m in drain(learner, 1)] == [0]
    stats = learner.stats()
    assert stats.anonymous_errors == len(cases) + 1
    assert stats.actors["raw"].errors == len(cases) + 1
    assert stats.errors == 2 * len(cases) + 2
    assert stats.errors_by_code[ErrorCode.BAD_SHAPE] == 6
    assert not marker.exists()  # nothing was unpickled
    actor = net.connect("a0")  # and a real actor is served as usual
    assert actor.send(chunk())
    assert [m.actor_id for m in drain(learner, 1)] == ["a0"]


def test_garbage_from_the_learner_is_counted_by_the_actor() -> None:
    core = _ActorCore(SPEC, "a0", FAST, time.monotonic)
    with core.cond:
        core.handle([b"\x93\x01\x02"], time.monotonic(), lambda f: True)
        core.handle([bytes(f) for f in encode(Heartbeat("learner", stats={"x": 1}))], time.monotonic(), lambda f: True)
        core.handle([bytes(f) for f in encode(Transitions("a0", 0, chunk()))], time.monotonic(), lambda f: True)
    assert core.errors == 2 and "unexpected TRANSITIONS" in core.last_error
    assert core.fatal is None and core.learner_stats == {"x": 1}


# ------------------------------------------------------------------------------------------------ in-memory specifics

def test_in_memory_hub_runs_timers_on_a_fake_clock() -> None:
    now = [0.0]
    hub = InMemoryHub(QUICK, clock=lambda: now[0])
    learner = hub.bind_learner(SPEC)
    actor = hub.connect_actor(SPEC, "a0")
    assert actor.wait_connected(1.0)
    now[0] += 0.3  # under the timeout: still alive
    hub.pump()
    assert learner.stats().actors["a0"].alive and actor.stats().reconnects == 0
    learner.close()
    now[0] += 1.0  # silence past heartbeat_timeout_s: the actor reconnects by itself
    hub.pump()
    assert actor.stats().reconnects == 1 and actor.stats().state == "connecting"
    learner2 = hub.bind_learner(SPEC)
    assert actor.wait_connected(1.0)
    assert learner2.stats().actors["a0"].alive


def test_a_second_learner_on_the_hub_is_refused() -> None:
    hub = InMemoryHub(FAST)
    hub.bind_learner(SPEC)
    with pytest.raises(ProtocolError, match="already bound"):
        hub.bind_learner(SPEC)


# ------------------------------------------------------------------------------------------------ pieces

def test_transport_config_round_trips_and_validates() -> None:
    cfg = FAST.replace(limits=Limits(max_message_bytes=1 << 20))
    assert TransportConfig.from_dict(cfg.to_dict()) == cfg
    with pytest.raises(ConfigError, match="heartbeat_timeout_s"):
        TransportConfig(heartbeat_s=2.0, heartbeat_timeout_s=1.0)
    with pytest.raises(ConfigError, match="max_unacked_bytes"):
        TransportConfig(max_unacked_bytes=0)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(1, 4), min_size=1, max_size=30), st.randoms(use_true_random=False))
def test_seq_set_counts_each_range_once_in_any_order(sizes: list[int], rnd: Any) -> None:
    bounds = np.cumsum([0, *sizes]).tolist()
    ranges = list(itertools.pairwise(bounds))
    arrivals = ranges + rnd.sample(ranges, len(ranges) // 2)  # with duplicates
    rnd.shuffle(arrivals)
    seen = _SeqSet()
    fresh = 0
    for start, end in arrivals:
        if seen.covers(start, end):
            continue
        assert not seen.overlaps(start, end)
        seen.add(start, end)
        fresh += 1
    assert fresh == len(ranges) and seen.upto == bounds[-1] - 1 and not seen.ranges
    part = _SeqSet()
    part.add(5, 7)
    part.add(9, 10)
    part.advance_to(5)  # a HELLO saying "acked up to 5" absorbs the ranges it reaches
    assert part.upto == 6 and part.ranges == {9: 10}


def test_zmq_io_threads_go_idle_after_a_wake_up(monkeypatch: pytest.MonkeyPatch) -> None:
    """A kick (send, ack, publish) wakes the I/O thread once: the wake-up byte is read and the thread goes back to
    blocking in poll. (zmq.Poller reports a plain socket by its fd; looking it up by the socket object never matched,
    the byte stayed unread and both I/O threads spun at 100 % CPU for the rest of the run.)"""
    cfg = TransportConfig(heartbeat_s=1.0, heartbeat_timeout_s=5.0, poll_ms=50)
    polls = {"n": 0}
    real_poll = zmq.Poller.poll

    def counting_poll(self: zmq.Poller, timeout: int | None = None) -> Any:
        polls["n"] += 1
        return real_poll(self, timeout)

    monkeypatch.setattr(zmq.Poller, "poll", counting_poll)
    learner = bind_learner(SPEC, "tcp://127.0.0.1:0", cfg)
    actor = connect_actor(SPEC, "a0", learner.address, cfg)
    try:
        assert actor.wait_connected(5.0)
        assert actor.send(chunk(2))                      # kicks the actor's I/O thread
        assert until(lambda: learner.recv(timeout=0.05))    # acks: kicks the learner's I/O thread
        learner.publish_weights(1, {"w": np.zeros(3, np.float32)})  # kicks the learner's
        assert until(lambda: actor.latest_weights() is not None)
        time.sleep(0.2)
        before = polls["n"]
        time.sleep(1.0)
        # two I/O threads blocking up to 50 ms per poll, plus 1 s heartbeats: ~40 polls; spinning: tens of thousands
        assert polls["n"] - before < 200, polls["n"] - before
        for end in (actor, learner):
            with pytest.raises(BlockingIOError):
                end._driver._wake_r.recv(1)              # type: ignore[attr-defined]  # the wake-up byte was read
    finally:
        actor.close()
        learner.close()
