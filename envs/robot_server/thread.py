"""Robot server, the thread harness: `serve_in_thread` runs a `RobotServer` on a background thread whose backend is
built on that thread (GL contexts and the socket then live on one thread): for tests and in-process runs.

Usage::

    with serve_in_thread(lambda: make_backend("twin", "pick_cube")) as handle:   # a free loopback port
        RemoteRobot(RemoteRobotConfig(address=handle.address)).state()
        handle.stats().calls
"""

from __future__ import annotations

import logging
import threading

from envs.robot import Robot
from envs.robot_server.backends import BackendFactory
from envs.robot_server.config import RobotServerConfig, RobotServerStats
from envs.robot_server.zmq_server import RobotServer
from robot_rl.errors import RobotTimeoutError
from robot_rl.keys import ServerKeys

log = logging.getLogger("robot_rl.robot_server")


class ServerThread:
    """A `RobotServer` on a background thread whose backend is built on that thread (GL contexts and the
    socket then live on one thread). Use `serve_in_thread` to start one."""

    def __init__(self, factory: BackendFactory, config: RobotServerConfig, keys: ServerKeys | None) -> None:
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self.server: RobotServer | None = None
        self.robot: Robot | None = None
        self._thread = threading.Thread(target=self._run, args=(factory, config, keys), name="robot-server",
                                        daemon=True)
        self._thread.start()

    def _run(self, factory: BackendFactory, config: RobotServerConfig, keys: ServerKeys | None) -> None:
        try:
            robot, cameras, info = factory()
            self.robot = robot
            try:
                self.server = RobotServer(robot, cameras, config, keys, info)
            except BaseException:
                robot.stop()
                raise
        except BaseException as err:
            self._error = err
            self._ready.set()
            return
        self._ready.set()
        try:
            self.server.serve(self._stop)
        except Exception:
            log.exception("robot server thread crashed")
        finally:
            self.server.close()

    def wait_ready(self, timeout: float) -> None:
        if not self._ready.wait(timeout):
            self.close()
            raise RobotTimeoutError(f"robot server thread did not start within {timeout} s")
        if self._error is not None:
            raise self._error

    @property
    def address(self) -> str:
        assert self.server is not None
        return self.server.address

    def stats(self) -> RobotServerStats:
        assert self.server is not None
        return self.server.stats()

    def close(self, timeout: float = 10.0) -> None:
        """Stop serving, close the socket, stop the backend."""
        self._stop.set()
        self._thread.join(timeout)

    def __enter__(self) -> ServerThread:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def serve_in_thread(factory: BackendFactory, config: RobotServerConfig | None = None, keys: ServerKeys | None = None,
                    start_timeout_s: float = 60.0) -> ServerThread:
    """Start a robot server on a thread (default bind: a free loopback port) and wait until it is bound."""
    handle = ServerThread(factory, config or RobotServerConfig(bind="tcp://127.0.0.1:0"), keys)
    handle.wait_ready(start_timeout_s)
    return handle
