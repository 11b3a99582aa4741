"""robot_rl.transport: explicit acknowledgement (`recv_deliveries` + `ack`) for durable learners, in memory and
over loopback ZeroMQ."""

from __future__ import annotations

import numpy as np
import pytest

from robot_rl.errors import ConfigError
from robot_rl.specs import ArraySpec, EnvSpec
from robot_rl.transport import Delivery, InMemoryHub, TransportConfig, bind_learner, connect_actor
from robot_rl.wire import TransitionChunk

SPEC = EnvSpec("twin-test", (ArraySpec("state", (3,), "float32"),), ArraySpec("action", (2,), "float32", -1.0, 1.0),
               10.0)
FAST = TransportConfig(heartbeat_s=0.05, heartbeat_timeout_s=2.0, hello_retry_s=0.05, resend_after_s=0.3,
                       linger_ms=200, poll_ms=10)


def chunk(t: int = 2, fill: float = 0.0) -> TransitionChunk:
    obs = [{"state": np.full(3, fill + i, np.float32)} for i in range(t + 1)]
    return TransitionChunk.from_steps(obs, np.zeros((t, 2), np.float32), np.zeros(t), [False] * t, [False] * t)


def test_recv_deliveries_acknowledges_only_on_ack() -> None:
    hub = InMemoryHub(FAST)
    learner = hub.bind_learner(SPEC)
    actor = hub.connect_actor(SPEC, "a0")
    assert actor.wait_connected(2.0)
    assert actor.send(chunk(3))
    [d] = learner.recv_deliveries(timeout=2.0)
    assert isinstance(d, Delivery)
    assert (d.actor_id, d.seq, d.seq_end) == ("a0", 0, 3)
    assert d.session == actor.stats().session != ""
    hub.pump()
    assert actor.stats().acked_upto == -1  # handed over, not acknowledged
    assert not actor.flush(0.05)
    learner.ack([d])
    assert actor.flush(2.0)
    assert actor.stats().acked_upto == 2
    learner.ack([d])  # twice: harmless
    assert actor.stats().acked_upto == 2


def test_unacked_delivery_comes_back_to_a_restarted_learner() -> None:
    hub = InMemoryHub(FAST)
    learner = hub.bind_learner(SPEC)
    actor = hub.connect_actor(SPEC, "a0")
    assert actor.wait_connected(2.0)
    actor.send(chunk(2, fill=1.0))
    actor.send(chunk(2, fill=5.0))
    first, _second = learner.recv_deliveries(timeout=2.0)
    learner.ack([first])  # "durable"; the second was lost in a crash before its ack
    hub.pump()
    assert learner.recv_deliveries(timeout=0.4) == []  # this endpoint never hands it over twice
    learner.close()
    learner2 = hub.bind_learner(SPEC)
    assert actor.wait_connected(2.0)
    got = learner2.recv_deliveries(timeout=2.0)
    assert [(d.seq, d.seq_end) for d in got] == [(2, 4)]
    np.testing.assert_array_equal(got[0].msg.chunk.observations["state"][0], np.full(3, 5.0, np.float32))
    learner2.ack(got)
    assert actor.flush(2.0)
    assert actor.stats().acked_upto == 3


def test_recv_still_acknowledges_automatically() -> None:
    hub = InMemoryHub(FAST)
    learner = hub.bind_learner(SPEC)
    actor = hub.connect_actor(SPEC, "a0")
    actor.send(chunk(2))
    [msg] = learner.recv(timeout=2.0)
    assert msg.seq == 0
    assert actor.flush(2.0)


def test_ack_refuses_other_objects() -> None:
    hub = InMemoryHub(FAST)
    learner = hub.bind_learner(SPEC)
    with pytest.raises(ConfigError, match="Delivery"):
        learner.ack(["not a delivery"])  # type: ignore[list-item]


def test_explicit_ack_over_zeromq() -> None:
    learner = bind_learner(SPEC, "tcp://127.0.0.1:0", FAST)
    actor = connect_actor(SPEC, "a0", learner.address, FAST)
    try:
        assert actor.wait_connected(5.0)
        assert actor.send(chunk(4))
        got: list[Delivery] = []
        for _ in range(50):
            got += learner.recv_deliveries(timeout=0.1)
            if got:
                break
        assert [(d.seq, d.seq_end) for d in got] == [(0, 4)]
        assert not actor.flush(0.3)
        learner.ack(got)
        assert actor.flush(5.0)
        assert actor.stats().acked_upto == 3
    finally:
        actor.close()
        learner.close()
