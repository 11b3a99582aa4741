"""Robot server, the ZeroMQ adapter: `RobotServer`, one ROUTER socket in front of a `RobotServerCore`, calls
served one at a time in arrival order.

Two threads: an I/O thread owns the ROUTER socket; the thread that calls `serve()` (the control thread, which
built the backend: GL contexts live there) runs the calls, in order, and hands the replies back over an inproc
pair. The I/O thread answers `estop` calls itself, at once, even while a long call (a wait, a joint reset) runs
on the control thread: `RobotServerCore.estop` latches the safety guard and stops the backend's motion.

A non-loopback bind needs CURVE keys or `insecure=True` (`robot_rl.curve.check_address`); with keys the socket
is a CURVE server whose ZAP handler (`robot_rl.curve.serve_curve`) admits only the authorized client keys and
counts each refusal as an `unauthorized` error.

Usage::

    robot = TwinRobot(TwinRobotConfig(task="pick_cube"))
    server = RobotServer(robot, robot.cameras(), RobotServerConfig(bind="tcp://127.0.0.1:5560"))
    server.serve(stop_event)          # until stop_event is set; server.close() also stops the backend
"""

from __future__ import annotations

import math
import queue
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import zmq

from envs.robot import Cameras, Robot
from envs.robot_server.config import RobotServerConfig, RobotServerStats
from envs.robot_server.core import RobotServerCore
from robot_rl.curve import check_address, serve_curve
from robot_rl.errors import ProtocolError
from robot_rl.keys import ServerKeys
from robot_rl.wire import ErrorCode, RobotCall, decode


class RobotServer:
    """The ZeroMQ adapter: one ROUTER socket bound in `__init__` (`address` is the bound endpoint, with the
    real port when the config asked for port 0), calls served by `serve()` one at a time.

    The socket is used only by the thread that calls `serve()` (and `close()` after serve returned).
    """

    def __init__(self, robot: Robot, cameras: Cameras | None = None, config: RobotServerConfig | None = None,
                 keys: ServerKeys | None = None, info: Mapping[str, Any] | None = None) -> None:
        cfg = self.config = config or RobotServerConfig()
        check_address(cfg.bind, keys, cfg.insecure)
        self.core = RobotServerCore(robot, cameras, cfg, info)
        self._ctx = zmq.Context()
        self._auth: Any = None
        sock = self._ctx.socket(zmq.ROUTER)
        try:
            sock.setsockopt(zmq.LINGER, cfg.linger_ms)
            sock.setsockopt(zmq.SNDHWM, cfg.hwm)
            sock.setsockopt(zmq.RCVHWM, cfg.hwm)
            sock.setsockopt(zmq.MAXMSGSIZE, cfg.max_call_bytes)  # a bigger call drops that connection
            sock.setsockopt(zmq.ROUTER_MANDATORY, 0)  # replies to a vanished client are dropped, never block
            sock.setsockopt(zmq.TCP_KEEPALIVE, 1)
            if keys is not None:
                self._auth = serve_curve(self._ctx, sock, keys, self.core.count_unauthorized,
                                         "robot_rl.robot_server.zap")
            bind = cfg.bind[:-2] + ":*" if cfg.bind.startswith("tcp://") and cfg.bind.endswith(":0") else cfg.bind
            sock.bind(bind)
            self.address: str = sock.getsockopt_string(zmq.LAST_ENDPOINT)
        except zmq.ZMQError as err:
            sock.close(linger=0)
            self._stop_auth()
            self._ctx.term()
            raise ProtocolError(f"cannot bind {cfg.bind}: {err}", ErrorCode.BIND_FAILED) from err
        self._sock = sock
        self._limits = cfg.limits
        # replies travel from the control thread (serve) to the I/O thread over an inproc pair
        self._replies_addr = f"inproc://robot-server-replies-{id(self):x}"
        self._ctl = self._ctx.socket(zmq.PAIR)
        self._ctl.setsockopt(zmq.LINGER, 0)
        self._ctl.bind(self._replies_addr)
        self._closed = False

    def _stop_auth(self) -> None:
        if self._auth is not None:
            self._auth.stop()
            self._auth = None

    def serve(self, stop: threading.Event | None = None, max_seconds: float | None = None,
              on_idle: Callable[[], None] | None = None) -> None:
        """Serve calls until `stop` is set (or `max_seconds` passed). `on_idle` runs after every poll. The calls run
        on this thread; the socket is served by an I/O thread for the duration (see the module docstring)."""
        t_end = math.inf if max_seconds is None else time.monotonic() + max_seconds
        core, poll_s = self.core, self.config.poll_ms / 1000.0
        requests: queue.Queue[tuple[bytes, list[Any]]] = queue.Queue()
        io_stop = threading.Event()
        io = threading.Thread(target=self._io_loop, args=(requests, io_stop), name="robot-server-io", daemon=True)
        io.start()
        try:
            while not (stop is not None and stop.is_set()) and time.monotonic() < t_end:
                try:
                    client, frames = requests.get(timeout=poll_s)
                except queue.Empty:
                    pass
                else:
                    reply = core.handle(client, frames)
                    self._ctl.send_multipart([client, *reply], copy=False)
                core.tick()
                if on_idle is not None:
                    on_idle()
        finally:
            io_stop.set()
            io.join(5.0)

    def estop(self) -> None:
        """The e-stop from this process (a signal handler): thread-safe, does not wait for a running call."""
        self.core.estop(b"local")

    def _io_loop(self, requests: queue.Queue[tuple[bytes, list[Any]]], io_stop: threading.Event) -> None:
        """The I/O thread: calls from the socket to the queue (estop answered here), replies from the control
        thread to the socket."""
        core, sock = self.core, self._sock
        replies = self._ctx.socket(zmq.PAIR)
        replies.setsockopt(zmq.LINGER, 0)
        replies.connect(self._replies_addr)
        poller = zmq.Poller()
        poller.register(sock, zmq.POLLIN)
        poller.register(replies, zmq.POLLIN)
        try:
            while not io_stop.is_set():
                events = dict(poller.poll(self.config.poll_ms))
                if replies in events:
                    for _ in range(64):
                        try:
                            out = replies.recv_multipart(zmq.NOBLOCK, copy=False)
                        except zmq.Again:
                            break
                        self._send(out)
                if sock in events:
                    for _ in range(64):
                        try:
                            parts = sock.recv_multipart(zmq.NOBLOCK, copy=False)
                        except zmq.Again:
                            break
                        client, frames = parts[0].bytes, parts[1:]
                        if self._is_estop(frames):
                            self._send([client, *core.estop(client, frames)])
                        else:
                            requests.put((client, frames))
        finally:
            replies.close(linger=0)

    def _send(self, parts: list[Any]) -> None:
        try:
            self._sock.send_multipart(parts, zmq.NOBLOCK, copy=False)
        except zmq.ZMQError:
            self.core.count_dropped_reply()

    def _is_estop(self, frames: list[Any]) -> bool:
        try:
            msg = decode(frames, self._limits)
        except ProtocolError:
            return False
        return isinstance(msg, RobotCall) and msg.method == "estop"

    def stats(self) -> RobotServerStats:
        return self.core.stats()

    def close(self) -> None:
        """Close the socket and stop the backend. Call from the serving thread (or after it ended)."""
        if self._closed:
            return
        self._closed = True
        try:
            self._ctl.close(linger=0)
            self._sock.close(linger=self.config.linger_ms)
            self._stop_auth()
            self._ctx.term()
        finally:
            self.core.close()
