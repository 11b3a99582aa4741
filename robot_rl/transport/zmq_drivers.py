"""Transport, the ZeroMQ drivers: one I/O thread per endpoint, and the factories `bind_learner` / `connect_actor`.

The learner binds one ROUTER socket (many actors), an actor connects one DEALER socket. Each endpoint's thread
polls its socket, runs its core's `handle` / `tick` and is woken through a socket pair when the caller queues
work; nothing else touches the socket. The actor's thread also watches the socket monitor (handshake
succeeded / refused by CURVE / disconnected) and recreates its socket when the core asks for a reconnect.

Security: a non-loopback address needs CURVE keys (`robot_rl.keys`) or `insecure=True`
(`robot_rl.curve.check_address`); with keys the learner's socket is a CURVE server whose ZAP handler
(`robot_rl.curve.serve_curve`) admits only the authorized client keys and counts each refusal in
`LearnerStats.unauthorized`.

Usage::

    learner = bind_learner(spec, "tcp://127.0.0.1:0")             # loopback; .address has the real port
    actor = connect_actor(spec, "a0", learner.address)
    learner = bind_learner(spec, "tcp://0.0.0.0:5555", keys=ServerKeys.from_dir("keys"))
    actor = connect_actor(spec, "a0", "tcp://learner-host:5555", keys=ClientKeys.from_dir("keys"))
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from robot_rl.curve import check_address, serve_curve
from robot_rl.errors import ProtocolError
from robot_rl.keys import ClientKeys, ServerKeys
from robot_rl.specs import EnvSpec
from robot_rl.transport.config import TransportConfig
from robot_rl.transport.cores import _ActorCore, _LearnerCore
from robot_rl.transport.endpoints import ActorEndpoint, LearnerEndpoint
from robot_rl.wire import ErrorCode, Frame

log = logging.getLogger("robot_rl.transport")


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
                self.auth = serve_curve(self.ctx, sock, keys, self._refused, "robot_rl.transport.zap")
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

    def _refused(self, text: str) -> None:
        """A client with an unknown CURVE key was refused (runs on the ZAP thread)."""
        with self.core.cond:
            self.core.unauthorized += 1
            self.core.last_error = text
        log.warning("learner endpoint: %s", text)

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
