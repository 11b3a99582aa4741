"""robot_rl.curve.serve_curve on its own (its two users, the learner transport and the robot server, have their own
CURVE tests): an authorized client gets through, an unknown key is refused and reported with its key, and a
failed set-up leaves no ZAP thread behind. Only 127.0.0.1 is bound."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
import zmq

from robot_rl.curve import serve_curve
from robot_rl.keys import ClientKeys, ServerKeys, generate_keys


def _dealer(ctx: zmq.Context[Any], keys: ClientKeys, port: int) -> zmq.Socket[Any]:
    sock = ctx.socket(zmq.DEALER)
    sock.linger = 0
    sock.curve_serverkey = keys.server_public
    sock.curve_publickey = keys.public
    sock.curve_secretkey = keys.secret
    sock.connect(f"tcp://127.0.0.1:{port}")
    return sock


def test_authorized_key_gets_through_and_unknown_key_is_refused_and_reported(tmp_path: Path) -> None:
    d = generate_keys(tmp_path / "keys")
    server, client = ServerKeys.from_dir(d), ClientKeys.from_dir(d)
    stranger = ClientKeys.generate(server.public)
    refused: list[str] = []
    ctx: zmq.Context[Any] = zmq.Context()
    router = ctx.socket(zmq.ROUTER)
    router.linger = 0
    auth = serve_curve(ctx, router, server, refused.append, "test.curve.zap")
    socks = [router]
    try:
        port = router.bind_to_random_port("tcp://127.0.0.1")
        good = _dealer(ctx, client, port)
        socks.append(good)
        good.send(b"hello")
        assert router.poll(3000), "the authorized client's message never arrived"
        assert router.recv_multipart()[1:] == [b"hello"]
        assert refused == []

        bad = _dealer(ctx, stranger, port)
        socks.append(bad)
        bad.send(b"let me in")
        deadline = time.monotonic() + 3.0
        while not refused and time.monotonic() < deadline:
            time.sleep(0.01)
        assert refused, "the unknown key was not reported"
        assert stranger.public.decode() in refused[0] and "unknown CURVE key" in refused[0]
        assert not router.poll(300), "a message from the refused client reached the server socket"

        good.send(b"still here")  # the authorized client is unaffected
        assert router.poll(3000) and router.recv_multipart()[1:] == [b"still here"]
    finally:
        for s in socks:
            s.close(linger=0)
        auth.stop()
        ctx.term()


def test_a_failed_setup_stops_its_zap_thread(tmp_path: Path) -> None:
    server = ServerKeys.from_dir(generate_keys(tmp_path / "keys"))
    ctx: zmq.Context[Any] = zmq.Context()
    sock = ctx.socket(zmq.ROUTER)
    sock.close()  # configuring a closed socket fails after the ZAP thread has started
    with pytest.raises(zmq.ZMQError):
        serve_curve(ctx, sock, server, lambda text: None, "test.curve.zap")
    # ctx.term() blocks while any socket (the ZAP handler's included) is open: it returns only if the handler stopped
    term = threading.Thread(target=ctx.term, daemon=True)
    term.start()
    term.join(5.0)
    assert not term.is_alive(), "the ZAP handler thread was left running"
