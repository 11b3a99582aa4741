"""`RemoteRobot`: the client of `robot-rl robot-server` (envs.robot_server), implementing `envs.robot.Robot`, and
`RemoteCameras` (envs.robot.Cameras) for the images it serves. The env cannot tell it from an in-process
backend: same methods, same typed errors, same numbers (state arrays travel as raw float64, bit-exact).

Every call is synchronous with a deadline: `deadline_s` (plus the duration for `wait`, `reset_deadline_s` for
reset_joints / reset_scene, `connect_deadline_s` for the handshake). A dead, unreachable or stuck server raises
`robot_rl.errors.RobotTimeoutError` at the deadline, never hangs: the socket only queues a call while a
connection is up (ZMQ_IMMEDIATE), and a reply that arrives after its call timed out is recognised by its call id
and dropped. Refusals come back typed: SafetyError (NaN/inf targets, bad durations), ConfigError (unknown gain
profile, no cameras), RobotError (backend errors; `not_owner` when another client took the robot over or the
server restarted), RobotTimeoutError (the hardware timed out), ProtocolError (anything malformed).

Images (`RemoteCameras.read()`) are uint8 (H, W, 3) views of the received message buffers: no copy on either
side (each read gets fresh buffers).

Usage::

    robot = RemoteRobot(RemoteRobotConfig(address="tcp://127.0.0.1:5560"))    # handshake: open
    robot.info["task"], robot.info["cameras"]                                 # what the server serves
    robot.command(pos, quat, gripper_closed=0.0); robot.wait(0.1); s = robot.state()
    images = robot.cameras().read()                                           # {"front": uint8 (H, W, 3)}
    robot.stop()      # the server holds the pose and is free for the next client

    env = make_remote_env("tcp://127.0.0.1:5560", obs_mode="pixels")          # a RobotEnv over it
    send_estop("tcp://127.0.0.1:5560")        # `robot-rl estop`: any client, no handshake; prints the answer
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import secrets
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import zmq

from envs.robot import RobotState, check_command, check_joint_target
from envs.robot_server import DEFAULT_ADDRESS, IMAGES_PREFIX, RobotErrorCode, state_from_wire
from robot_rl.config import Config, require
from robot_rl.curve import check_address
from robot_rl.errors import (
    ConfigError,
    ProtocolError,
    RobotError,
    RobotRLError,
    RobotTimeoutError,
    SafetyError,
    ShapeError,
    SpecMismatchError,
)
from robot_rl.keys import ClientKeys
from robot_rl.reward_source import POLICY_CAMERAS
from robot_rl.wire import ErrorCode, ErrorReply, Limits, RobotCall, RobotReply, decode, encode

if TYPE_CHECKING:
    from envs.env import RobotEnv
    from envs.tasks import Task

_EXCEPTIONS: dict[str, type[RobotRLError]] = {
    RobotErrorCode.SAFETY.value: SafetyError,
    RobotErrorCode.TIMEOUT.value: RobotTimeoutError,
    RobotErrorCode.CONFIG.value: ConfigError,
    RobotErrorCode.NO_CAMERAS.value: ConfigError,
    RobotErrorCode.ROBOT.value: RobotError,
    RobotErrorCode.NOT_OWNER.value: RobotError,
    RobotErrorCode.INTERNAL.value: RobotError,
    ErrorCode.BAD_SHAPE.value: ShapeError,
}


HARDWARE_BACKENDS = ("franky", "ros2")
"""Served backends a `make_remote_env` env runs in real time over (RobotEnvConfig.realtime) unless told otherwise."""


def exception_for(code: str, message: str) -> RobotRLError:
    """The typed local exception for a failed reply's error code (ProtocolError(code) for wire codes)."""
    cls = _EXCEPTIONS.get(code)
    if cls is None:
        return ProtocolError(message, code)
    return cls(message)


@dataclasses.dataclass(frozen=True)
class RemoteRobotConfig(Config):
    """Options of `RemoteRobot`."""

    address: str = DEFAULT_ADDRESS
    """The robot server's address (tcp://HOST:PORT). Non-loopback needs CURVE keys or insecure."""
    insecure: bool = False
    """Allow a non-loopback address without CURVE keys (unencrypted: trusted networks only)."""
    deadline_s: float = 2.0
    """The longest a call may take (beyond its own duration for wait) before RobotTimeoutError."""
    reset_deadline_s: float = 30.0
    """Deadline of reset_joints / reset_scene (blocking moves on hardware)."""
    connect_deadline_s: float = 10.0
    """Deadline of the handshake (`open`) in the constructor: how long to wait for the server to come up."""
    client_name: str = ""
    """A name for the server's log (e.g. the actor id)."""
    handshake: bool = True
    """Call `open` on connect (become the robot's owner). False: a bystander that may only call `estop` and
    `stats` (`robot-rl estop`)."""
    max_reply_bytes: int = 256 << 20
    """Largest reply accepted (camera frames)."""

    def validate(self) -> None:
        require(isinstance(self.address, str) and "://" in self.address, "address", self.address,
                "must look like tcp://HOST:PORT")
        for name in ("deadline_s", "reset_deadline_s", "connect_deadline_s"):
            v = getattr(self, name)
            require(isinstance(v, int | float) and math.isfinite(v) and v > 0, name, v, "must be finite and > 0")
        require(self.max_reply_bytes > 0, "max_reply_bytes", self.max_reply_bytes, "must be > 0")
        require(len(self.client_name) <= 64, "client_name", self.client_name, "must be <= 64 characters")


class RemoteRobot:
    """A robot served by `robot-rl robot-server` (implements envs.robot.Robot). One call in flight at a time;
    not thread-safe (one control loop owns it). See the module docstring."""

    def __init__(self, config: RemoteRobotConfig | None = None, keys: ClientKeys | None = None) -> None:
        cfg = self.config = config or RemoteRobotConfig()
        check_address(cfg.address, keys, cfg.insecure)
        self._limits = Limits(max_message_bytes=cfg.max_reply_bytes)
        self._ids = itertools.count(1)
        self._ctx = zmq.Context()
        sock = self._ctx.socket(zmq.DEALER)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.IMMEDIATE, 1)  # queue a call only on a live connection: a dead server times out
        sock.setsockopt(zmq.MAXMSGSIZE, cfg.max_reply_bytes)
        sock.setsockopt(zmq.RECONNECT_IVL, 100)
        sock.setsockopt(zmq.RECONNECT_IVL_MAX, 1000)
        sock.setsockopt(zmq.TCP_KEEPALIVE, 1)
        sock.setsockopt(zmq.ROUTING_ID, b"rr-" + secrets.token_hex(8).encode())
        if keys is not None:
            sock.curve_serverkey = keys.server_public
            sock.curve_publickey = keys.public
            sock.curve_secretkey = keys.secret
        sock.connect(cfg.address)
        self._sock = sock
        self._keyed = keys is not None
        self._closed = False
        self.stale_replies = 0
        """Replies dropped because their call had already timed out."""
        self._cameras: RemoteCameras | None = None
        self.info: dict[str, Any] = {}
        if not cfg.handshake:
            return
        try:
            reply = self._call("open", {"client": cfg.client_name}, deadline_s=cfg.connect_deadline_s)
        except BaseException:
            self.close()
            raise
        self.info = dict(reply.result)
        """The server's `open` answer: protocol, session, backend, task, cameras, image_shape, hold_timeout_s."""

    # ------------------------------------------------------------------------------------------------------ Robot

    def state(self) -> RobotState:
        reply = self._call("state")
        return state_from_wire(reply.result, reply.arrays)

    def command(self, pos_base_target: np.ndarray, quat_base_target: np.ndarray, gripper_closed: float) -> None:
        """Send a new impedance target. Shapes and types are checked here (SafetyError, like the twin: the shared
        envs.robot.check_command); the server runs the full check (NaN/inf, zero quaternion: SafetyError,
        transported back)."""
        pos, quat, g = check_command(pos_base_target, quat_base_target, gripper_closed, finite=False)
        self._call("command", {"gripper_closed": g}, {"pos_base_target": pos, "quat_base_target": quat})

    def wait(self, duration_s: float) -> None:
        d = float(duration_s)
        extra = d if math.isfinite(d) and d > 0 else 0.0
        self._call("wait", {"duration_s": d}, deadline_s=self.config.deadline_s + extra)

    def set_gains(self, profile: str) -> None:
        if not isinstance(profile, str):
            raise ConfigError(f"profile={profile!r} must be a string")
        self._call("set_gains", {"profile": profile})

    def reset_joints(self, q_rad: np.ndarray) -> None:
        self._call("reset_joints", arrays={"q_rad": check_joint_target(q_rad, finite=False)},
                   deadline_s=self.config.reset_deadline_s)

    def reset_scene(self, seed: int | None = None) -> None:
        self._call("reset_scene", {"seed": None if seed is None else int(seed)},
                   deadline_s=self.config.reset_deadline_s)

    def clear_errors(self) -> None:
        self._call("clear_errors")

    def stop(self) -> None:
        """The server holds the current pose and releases the robot for the next client; this client closes.
        Idempotent; errors on the way out (a dead server) are not raised."""
        if self._closed:
            return
        try:
            self._call("stop")
        except RobotRLError:
            pass
        finally:
            self.close()

    # ------------------------------------------------------------------------------------------------------ extras

    def cameras(self) -> RemoteCameras:
        """The server's cameras; ConfigError when it serves none."""
        if not self.info.get("cameras"):
            raise ConfigError(f"the robot server at {self.config.address} serves no cameras")
        if self._cameras is None:
            self._cameras = RemoteCameras(self)
        return self._cameras

    def estop(self, deadline_s: float | None = None) -> dict[str, Any]:
        """The server's e-stop (any client, no ownership needed; answered at once even during a long call):
        motion stops, the robot server refuses every command until it restarts. Returns the server's answer
        (`estop_s`: how long the backend's stop took)."""
        return dict(self._call("estop", deadline_s=deadline_s).result)

    def server_stats(self) -> dict[str, Any]:
        """The server's counters (`envs.robot_server.RobotServerStats.to_dict()`): calls, errors by code,
        holding / holds (watchdog), owner, takeovers."""
        return dict(self._call("stats").result)

    def close(self) -> None:
        """Drop the connection without telling the server (it keeps holding the last target). Idempotent."""
        if not self._closed:
            self._closed = True
            self._sock.close(linger=0)
            self._ctx.term()

    @property
    def closed(self) -> bool:
        return self._closed

    def __enter__(self) -> RemoteRobot:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------------------------------------------ wire

    def call(self, method: str, args: Mapping[str, Any] | None = None,
             arrays: Mapping[str, np.ndarray] | None = None, deadline_s: float | None = None) -> RobotReply:
        """One raw call (for methods beyond the Robot protocol); raises the typed error of a refusal."""
        return self._call(method, args, arrays, deadline_s)

    def _call(self, method: str, args: Mapping[str, Any] | None = None,
              arrays: Mapping[str, np.ndarray] | None = None, deadline_s: float | None = None) -> RobotReply:
        if self._closed:
            raise RobotError(f"RemoteRobot({self.config.address}) is stopped/closed: {method}() refused")
        deadline = self.config.deadline_s if deadline_s is None else deadline_s
        call_id = next(self._ids)
        frames = encode(RobotCall(call_id, method, dict(args or {}), dict(arrays or {})))
        t_end = time.monotonic() + deadline
        sock = self._sock
        while True:  # send as soon as a connection is up (IMMEDIATE: nothing queues without one)
            try:
                sock.send_multipart(frames, zmq.NOBLOCK, copy=False)
                break
            except zmq.Again:
                pass
            ms = _ms_left(t_end)
            if ms <= 0 or not sock.poll(ms, zmq.POLLOUT):
                hint = " or does it refuse this client's CURVE key?" if self._keyed else "?"
                raise RobotTimeoutError(
                    f"robot server at {self.config.address} unreachable: could not send {method}() within "
                    f"{deadline:g} s (no connection; is the server running{hint})")
        while True:
            ms = _ms_left(t_end)
            if ms <= 0 or not sock.poll(ms, zmq.POLLIN):
                raise RobotTimeoutError(
                    f"robot server at {self.config.address} did not answer {method}() within {deadline:g} s "
                    f"(deadline; the server is dead, stuck or overloaded)")
            parts = sock.recv_multipart(zmq.NOBLOCK, copy=False)
            try:
                msg = decode(parts, self._limits)
            except ProtocolError as err:
                raise ProtocolError(f"robot server sent a malformed reply to {method}(): {err}", err.code) from err
            if isinstance(msg, ErrorReply):
                raise msg.to_exception("robot server")
            if not isinstance(msg, RobotReply):
                raise ProtocolError(f"robot server answered {method}() with a {msg.KIND.value} message",
                                    ErrorCode.UNEXPECTED_KIND)
            if msg.call_id != call_id:  # the late answer to a call that timed out
                self.stale_replies += 1
                continue
            if not msg.ok:
                raise exception_for(msg.error_code, f"robot server: {method}() refused ({msg.error_code}): "
                                                    f"{msg.error_message}")
            return msg


class RemoteCameras:
    """The cameras a robot server serves (implements envs.robot.Cameras); frames are views of the reply."""

    def __init__(self, robot: RemoteRobot) -> None:
        self._robot = robot
        self._names = tuple(str(n) for n in robot.info.get("cameras") or ())
        shape = robot.info.get("image_shape")
        self.image_shape: tuple[int, int, int] | None = (
            (int(shape[0]), int(shape[1]), int(shape[2])) if isinstance(shape, list) and len(shape) == 3 else None)
        self._ages: dict[str, float] = {}

    @property
    def names(self) -> tuple[str, ...]:
        return self._names

    def frame_ages_s(self) -> dict[str, float]:
        """How old each frame of the last read() was on the server (real cameras; empty for the twin's renders)."""
        return dict(self._ages)

    def read(self) -> dict[str, np.ndarray]:
        reply = self._robot.call("read_cameras")
        out: dict[str, np.ndarray] = {}
        for key, img in reply.arrays.items():
            name = key[len(IMAGES_PREFIX):] if key.startswith(IMAGES_PREFIX) else ""
            if name not in self._names or img.dtype != np.uint8 or img.ndim != 3 or img.shape[2] != 3:
                raise ProtocolError(f"read_cameras reply: unexpected array {key!r} {img.dtype} {img.shape}",
                                    ErrorCode.BAD_SHAPE)
            out[name] = img
        missing = [n for n in self._names if n not in out]
        if missing:
            raise ProtocolError(f"read_cameras reply: cameras {missing} missing", ErrorCode.BAD_FIELD)
        ages = reply.result.get("frame_ages_s") if isinstance(reply.result, dict) else None
        self._ages = ({str(k): float(v) for k, v in ages.items() if isinstance(v, int | float)}
                      if isinstance(ages, dict) else {})
        return out


def _ms_left(t_end: float) -> int:
    left = t_end - time.monotonic()
    return 0 if left <= 0 else min(max(1, math.ceil(left * 1000)), 3_600_000)  # loops poll again past an hour


def make_remote_env(
    address: str | RemoteRobot = DEFAULT_ADDRESS,
    task: str | Task | None = None,
    obs_mode: str = "pixels",
    image_size: int | None = None,
    camera_names: tuple[str, ...] | list[str] | None = None,
    render_mode: str | None = None,
    remote: RemoteRobotConfig | None = None,
    keys: ClientKeys | None = None,
    **config: Any,
) -> RobotEnv:
    """A `RobotEnv` over a robot server: the RemoteRobot (connected here unless one is passed), its cameras in
    pixels mode, and any other `RobotEnvConfig` field as a kwarg (`realtime` defaults to True over a hardware
    backend, HARDWARE_BACKENDS, and False over the twin). `task` defaults to the server's task;
    `image_size` and `camera_names` default to what the server serves (less the reward cameras). A `reward_cameras`
    config (envs.env.RobotEnvConfig) reads those of the server's cameras for a reward model (info["reward_images"]).
    SpecMismatchError when the server runs another task or serves other image sizes or cameras than asked for; the
    env's close() stops the client.
    """
    from envs.env import RobotEnv, RobotEnvConfig
    from envs.tasks import get_task

    if isinstance(address, RemoteRobot):
        robot = address
    else:
        base = remote or RemoteRobotConfig()
        robot = RemoteRobot(base.replace(address=address), keys)
    try:
        served = str(robot.info.get("task", ""))
        the_task = get_task(task if task is not None else served)
        if served and the_task.name != served:
            raise SpecMismatchError(f"the robot server runs task '{served}', the env asks for '{the_task.name}'",
                                    ["task"])
        cameras: RemoteCameras | None = None
        if obs_mode == "pixels" or config.get("reward_cameras"):  # state mode: the reward cameras only
            cameras = robot.cameras()
            shape = cameras.image_shape
            if image_size is None:
                if shape is None or shape[0] != shape[1]:
                    raise ConfigError(f"pass image_size: the server serves images of shape {shape}")
                image_size = shape[0]
            elif shape is not None and shape[:2] != (image_size, image_size):
                raise SpecMismatchError(f"the robot server renders {shape[0]}x{shape[1]} images, the env asks for "
                                        f"{image_size}x{image_size} (start the server with --image-size "
                                        f"{image_size})", ["image_size"])
            if obs_mode == "pixels" and camera_names is None:
                camera_names = tuple(n for n in cameras.names if n not in config.get("reward_cameras", ()))
        backend = str(robot.info.get("backend", ""))
        if backend in HARDWARE_BACKENDS and (config.get("camera_latency_ms") or config.get("action_delay_ms")):
            raise ConfigError(f"the robot server serves {backend} hardware, which has its own camera latency and "
                              f"action delay: the twin's simulated timing (--camera-latency-ms / --action-delay-ms, on "
                              f"by default with --faithful, a twin mode) does not apply; pass 0 or drop --faithful")
        if "realtime" not in config:  # hardware: the env keeps the 10 Hz deadlines (the twin simulates its wait)
            config["realtime"] = str(robot.info.get("backend", "")) in HARDWARE_BACKENDS
        cfg = RobotEnvConfig(obs_mode=obs_mode, image_size=int(image_size or 128),
                             camera_names=tuple(camera_names or POLICY_CAMERAS), **config)
        return RobotEnv(robot, the_task, cameras, cfg, render_mode=render_mode)
    except BaseException:
        if not isinstance(address, RemoteRobot):
            robot.close()
        raise


def send_estop(address: str, keys_dir: str | None = None, insecure: bool = False, timeout_s: float = 1.0) -> int:
    """`robot-rl estop ADDR`: send the robot server's `estop` call (any client may; no ownership, no handshake) and
    print what the server did and the round trip; returns the exit code (0; errors raise, e.g. RobotTimeoutError
    when nothing answers within `timeout_s`)."""
    keys = ClientKeys.from_dir(keys_dir) if keys_dir is not None else None
    robot = RemoteRobot(RemoteRobotConfig(address=address, insecure=insecure, handshake=False, deadline_s=timeout_s,
                                          client_name="estop"), keys)
    try:
        t0 = time.monotonic()
        answer = robot.estop(deadline_s=timeout_s)
        rtt = time.monotonic() - t0
    finally:
        robot.close()
    how = "motion stopped" if answer.get("guarded") else "sent (this server has no safety guard)"
    print(f"robot-rl estop: {address}: {how} (backend stop {1e3 * float(answer.get('estop_s', 0.0)):.1f} ms, "
          f"round trip {1e3 * rtt:.1f} ms); the server refuses commands until it restarts", flush=True)
    return 0
