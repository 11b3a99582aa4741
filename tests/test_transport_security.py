"""Transport security: loopback by default, CURVE keys (or an explicit insecure flag) elsewhere, ZAP refusal of
unknown actors, and libzmq's own size cap. Only 127.0.0.1 is ever bound or connected to."""

from __future__ import annotations

import logging
import stat
from pathlib import Path

import numpy as np
import pytest
import zmq
from test_transport import FAST, SPEC, chunk, drain, until

from robot_rl.curve import check_address, is_local_address
from robot_rl.errors import ConfigError, ProtocolError
from robot_rl.keys import ClientKeys, ServerKeys, add_client, generate_keys
from robot_rl.transport import bind_learner, connect_actor
from robot_rl.wire import ErrorCode, ErrorReply, Limits, decode


@pytest.mark.parametrize("address,local", [
    ("tcp://127.0.0.1:5555", True), ("tcp://127.0.0.2:0", True), ("tcp://localhost:5555", True),
    ("tcp://[::1]:5555", True), ("ipc:///tmp/robot-rl.sock", True), ("inproc://x", True),
    ("tcp://0.0.0.0:5555", False), ("tcp://*:5555", False), ("tcp://192.168.1.10:5555", False),
    ("tcp://eth0:5555", False), ("tcp://learner.example.org:5555", False),
])
def test_loopback_detection(address: str, local: bool) -> None:
    assert is_local_address(address) is local


def test_non_loopback_bind_or_connect_without_keys_is_refused() -> None:
    for address in ("tcp://0.0.0.0:0", "tcp://*:0", "tcp://10.0.0.1:5555"):
        with pytest.raises(ConfigError, match="not loopback"):
            bind_learner(SPEC, address, FAST)  # refused before any socket exists
        with pytest.raises(ConfigError, match="CURVE keys"):
            connect_actor(SPEC, "a0", address, FAST)
        check_address(address, keys=None, insecure=True)  # the explicit opt-out passes the check
    with pytest.raises(ConfigError, match="transport"):
        is_local_address("udp://127.0.0.1:1")


def test_generated_keys_layout_permissions_and_no_overwrite(tmp_path: Path) -> None:
    d = generate_keys(tmp_path / "keys")
    for name in ("server.key", "server.key_secret", "client.key", "client.key_secret", "authorized_clients/client.key"):
        assert (d / name).is_file(), name
    for secret in ("server.key_secret", "client.key_secret"):
        assert stat.S_IMODE((d / secret).stat().st_mode) == 0o600
    server, client = ServerKeys.from_dir(d), ClientKeys.from_dir(d)
    assert client.server_public == server.public and client.public in server.authorized
    assert server.secret.decode() not in repr(server) and client.secret.decode() not in repr(client)
    with pytest.raises(ConfigError, match="exists"):
        generate_keys(d)
    add_client(d, "robot2")
    assert len(ServerKeys.from_dir(d).authorized) == 2
    with pytest.raises(ConfigError, match="cannot read"):
        ClientKeys.from_dir(d, "nobody")


def test_curve_known_client_works_and_unknown_client_is_refused(tmp_path: Path,
                                                                caplog: pytest.LogCaptureFixture) -> None:
    d = generate_keys(tmp_path / "keys")
    server = ServerKeys.from_dir(d)
    learner = bind_learner(SPEC, "tcp://127.0.0.1:0", FAST, keys=server)
    try:
        actor = connect_actor(SPEC, "a0", learner.address, FAST, keys=ClientKeys.from_dir(d))
        assert actor.wait_connected(3.0)
        assert actor.send(chunk())
        assert [m.seq for m in drain(learner, 1)] == [0]
        learner.publish_weights(1, {"w": np.ones(3, np.float32)})
        assert until(actor.latest_weights).version == 1
        with caplog.at_level(logging.WARNING, logger="robot_rl.transport"):
            stranger = connect_actor(SPEC, "a1", learner.address, FAST, keys=ClientKeys.generate(server.public))
            with pytest.raises(ProtocolError, match="refused this actor's CURVE key") as info:
                stranger.wait_connected(3.0)
        assert info.value.code == ErrorCode.UNAUTHORIZED
        stats = learner.stats()
        assert stats.unauthorized >= 1 and "a1" not in stats.actors
        assert any("unknown CURVE key" in r.getMessage() for r in caplog.records)
        plain = connect_actor(SPEC, "a2", learner.address, FAST)  # no CURVE at all: never gets through
        assert not plain.wait_connected(0.5)
        assert actor.send(chunk())  # the authorized actor is unaffected
        assert [m.seq for m in drain(learner, 1)] == [2]
        for a in (actor, stranger, plain):
            a.close()
    finally:
        learner.close()


def test_a_frame_over_the_socket_size_cap_drops_the_connection_not_the_endpoint() -> None:
    learner = bind_learner(SPEC, "tcp://127.0.0.1:0", FAST.replace(limits=Limits(max_message_bytes=100_000)))
    ctx = zmq.Context()
    raw = ctx.socket(zmq.DEALER)
    raw.linger = 0
    raw.connect(learner.address)
    try:
        raw.send(b"\x00" * 200_000)  # libzmq refuses it before allocating (ZMQ_MAXMSGSIZE) and hangs up
        assert not raw.poll(300)
        raw.send(b"garbage")  # the learner still answers (the DEALER reconnected by itself)
        assert raw.poll(3000)
        reply = decode(raw.recv_multipart())
        assert isinstance(reply, ErrorReply) and reply.code == ErrorCode.BAD_HEADER
        actor = connect_actor(SPEC, "a0", learner.address, FAST)
        assert actor.send(chunk())
        assert [m.seq for m in drain(learner, 1)] == [0]
        actor.close()
    finally:
        raw.close()
        ctx.term()
        learner.close()


def test_close_is_idempotent_and_bind_errors_are_typed() -> None:
    learner = bind_learner(SPEC, "tcp://127.0.0.1:0", FAST)
    actor = connect_actor(SPEC, "a0", learner.address, FAST)
    assert actor.wait_connected(3.0)
    actor.close()
    learner.close()
    learner.close()
    actor.close()
    assert learner.recv(timeout=0.1) == []
    with pytest.raises(ProtocolError) as info:
        bind_learner(SPEC, "tcp://127.0.0.1:notaport", FAST)
    assert info.value.code == ErrorCode.BIND_FAILED
