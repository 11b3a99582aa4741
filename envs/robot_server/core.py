"""Robot server, the core: `RobotServerCore`, the server's logic over one backend with no sockets and no clock of
its own: decode and validate a call, check ownership, run it on the backend, encode the reply; the watchdog;
the counters. Nothing a client sends can make it raise. `envs.robot_server.zmq_server` feeds it from a socket.

Usage::

    core = RobotServerCore(robot, cameras, RobotServerConfig(), info={"backend": "twin", "task": "reach"})
    reply_frames = core.handle(b"client-1", frames)     # never raises
    core.tick(); core.stats().errors_by_code
"""

from __future__ import annotations

import logging
import math
import secrets
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from envs.robot import Cameras, Robot, check_command, check_duration, check_joint_target
from envs.robot_server.config import RobotServerConfig, RobotServerStats
from envs.robot_server.protocol import IMAGES_PREFIX, METHODS, RobotErrorCode, error_code_for, state_to_wire
from robot_rl.errors import ProtocolError, RobotRLError, ShapeError
from robot_rl.wire import PROTOCOL_VERSION, ErrorCode, Frame, RobotCall, RobotReply, decode, encode, error_frames

log = logging.getLogger("robot_rl.robot_server")

_OPEN_TO_ALL = frozenset({"open", "stats", "estop"})
_TARGET_SETTERS = frozenset({"command", "reset_joints"})


class _CallError(Exception):
    """A refusal with an explicit reply code."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def _short(client: bytes) -> str:
    return client.hex()[:12] if client else ""


class RobotServerCore:
    """The server's logic over one backend: decode, validate, dispatch, encode; watchdog; counters.

    Thread-safe (one lock): `handle`/`tick` from the serving thread, `stats` from anywhere.

    Usage::

        core = RobotServerCore(robot, cameras, RobotServerConfig(), info={"backend": "twin", "task": "reach"})
        reply_frames = core.handle(b"client-1", frames)     # never raises
        core.tick(); core.stats().errors_by_code
    """

    def __init__(self, robot: Robot, cameras: Cameras | None = None, config: RobotServerConfig | None = None,
                 info: Mapping[str, Any] | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.robot, self.cameras = robot, cameras
        self.config = config or RobotServerConfig()
        self._limits = self.config.limits
        self._clock = clock
        self._lock = threading.Lock()
        self.session = secrets.token_hex(8)
        info = dict(info or {})
        image_shape = getattr(cameras, "image_shape", None) if cameras is not None else None
        self._open_result: dict[str, Any] = {
            "protocol": PROTOCOL_VERSION,
            "session": self.session,
            "backend": str(info.get("backend", type(robot).__name__)),
            "task": str(info.get("task", "")),
            "cameras": list(cameras.names) if cameras is not None else [],
            "image_shape": [int(x) for x in image_shape] if image_shape is not None else None,
            "hold_timeout_s": float(self.config.hold_timeout_s),
            "max_wait_s": float(self.config.max_wait_s),
        }
        self._handlers: dict[str, Callable[[RobotCall], tuple[dict[str, Any], dict[str, np.ndarray]]]] = {
            "state": self._state, "command": self._command, "wait": self._wait, "set_gains": self._set_gains,
            "reset_joints": self._reset_joints, "reset_scene": self._reset_scene,
            "clear_errors": self._clear_errors, "read_cameras": self._read_cameras,
        }
        # counters and ownership
        self._t0 = clock()
        self._calls = 0
        self._calls_by_method: dict[str, int] = {}
        self._errors = 0
        self._errors_by_code: dict[str, int] = {}
        self._clients = 0
        self._takeovers = 0
        self._owner: bytes | None = None
        self._last_command_t: float | None = None
        self._holding = False
        self._holds = 0
        self._dropped = 0
        self._last_error = ""
        self._last_gripper: float | None = None
        self._closed = False
        self._estops = 0
        self._estop_lock = threading.Lock()

    # ------------------------------------------------------------------------------------------------------ API

    def handle(self, client: bytes, frames: Sequence[Any]) -> list[Frame]:
        """Serve one message from `client` (its transport identity); returns the reply frames. Never raises."""
        with self._lock:
            self._calls += 1
            try:
                msg = decode(frames, self._limits)
            except ProtocolError as err:
                self._refused(str(err.code), f"undecodable call from {_short(client)}: {err}")
                return error_frames(err.code, str(err))
            if not isinstance(msg, RobotCall):
                text = f"a robot server answers {RobotCall.KIND.value} messages only, got {msg.KIND.value}"
                self._refused(ErrorCode.UNEXPECTED_KIND.value, text)
                return error_frames(ErrorCode.UNEXPECTED_KIND, text)
            method = msg.method if msg.method in METHODS else "<unknown>"
            self._calls_by_method[method] = self._calls_by_method.get(method, 0) + 1
            try:
                result, arrays = self._dispatch(client, msg)
                return encode(RobotReply(msg.call_id, True, result, arrays))
            except Exception as err:  # every failure becomes a reply; a bug in a backend is logged loudly
                code = str(err.code) if isinstance(err, _CallError) else error_code_for(err)
                if code == RobotErrorCode.INTERNAL:
                    log.exception("robot server: %s() raised an unexpected error", msg.method[:64])
                text = f"{type(err).__name__}: {err}" if not isinstance(err, _CallError) else str(err)
                self._refused(code, f"{msg.method[:64]}(): {text}")
                return encode(RobotReply(msg.call_id, False, error_code=code, error_message=text[:4096]))

    def estop(self, client: bytes = b"", frames: Sequence[Any] | None = None) -> list[Frame]:
        """The e-stop, served at once from any thread (the ZeroMQ adapter's I/O thread calls it even while a long
        call holds the main lock): the backend's `estop()` (the safety guard latches it and stops the motion);
        returns the reply frames (to the RobotCall in `frames`, when given). Never raises."""
        call_id = 0
        if frames is not None:
            try:
                msg = decode(frames, self._limits)
                call_id = msg.call_id if isinstance(msg, RobotCall) else 0
            except ProtocolError:
                pass
        estop = getattr(self.robot, "estop", None)
        took = 0.0
        try:
            t0 = self._clock()
            if callable(estop):
                estop()
            took = self._clock() - t0
            ok, code, text = True, "", ""
        except Exception as err:  # the latch is set before the backend call: report, never raise
            log.exception("robot server: estop() raised")
            ok, code, text = False, RobotErrorCode.INTERNAL.value, f"{type(err).__name__}: {err}"
        with self._estop_lock:
            self._estops += 1
        log.warning("robot server: E-STOP from client %s (backend stop took %.1f ms)", _short(client), 1e3 * took)
        if ok:
            return encode(RobotReply(call_id, True, {"estop_s": took, "guarded": callable(estop)}, {}))
        return encode(RobotReply(call_id, False, error_code=code, error_message=text))

    def tick(self) -> None:
        """The watchdog: start holding when the owner has not commanded for `hold_timeout_s`; the safety guard's
        periodic check (and its hold after an e-stop)."""
        guard_tick = getattr(self.robot, "tick", None)
        if callable(guard_tick):
            with self._lock:
                try:
                    guard_tick()
                except Exception:
                    log.exception("robot server: the safety guard's tick raised")
        with self._lock:
            if self._owner is None or self._last_command_t is None or self._holding:
                return
            silent = self._clock() - self._last_command_t
            if silent > self.config.hold_timeout_s:
                self._holding = True
                self._holds += 1
                log.warning("robot server: no command from client %s for %.2f s: holding the last target",
                            _short(self._owner), silent)

    def count_dropped_reply(self) -> None:
        with self._lock:
            self._dropped += 1

    def count_unauthorized(self, text: str) -> None:
        """Count a client refused for its CURVE key (called by the ZAP handler's thread)."""
        with self._lock:
            self._refused(ErrorCode.UNAUTHORIZED.value, text)

    def stats(self) -> RobotServerStats:
        with self._lock:
            return self._stats()

    def _stats(self) -> RobotServerStats:
        now = self._clock()
        return RobotServerStats(
            calls=self._calls, calls_by_method=dict(self._calls_by_method), errors=self._errors,
            errors_by_code=dict(self._errors_by_code), clients=self._clients, takeovers=self._takeovers,
            owner=_short(self._owner) if self._owner is not None else "", holding=self._holding,
            holds=self._holds,
            last_command_age_s=now - self._last_command_t if self._last_command_t is not None else math.inf,
            dropped_replies=self._dropped, last_error=self._last_error, uptime_s=now - self._t0,
            estops=self._estops, safety=_safety_stats(self.robot))

    def close(self) -> None:
        """Stop the backend (holds its pose, releases its resources) and close the cameras. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._owner = None
        try:
            self.robot.stop()
        finally:
            close_cameras = getattr(self.cameras, "close", None)  # real cameras: stop their reader threads
            if callable(close_cameras):
                close_cameras()

    # ------------------------------------------------------------------------------------------------------ calls

    def _refused(self, code: str, text: str) -> None:
        code = str(code)
        self._errors += 1
        self._errors_by_code[code] = self._errors_by_code.get(code, 0) + 1
        self._last_error = text[:512]
        log.info("robot server: refused (%s) %s", code, text[:512])

    def _dispatch(self, client: bytes, msg: RobotCall) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        method = msg.method
        if method not in METHODS:
            raise _CallError(RobotErrorCode.UNKNOWN_METHOD, f"unknown method {method[:64]!r}; known: {list(METHODS)}")
        if self._closed:
            raise _CallError(RobotErrorCode.ROBOT, "the robot server is shutting down")
        if method not in _OPEN_TO_ALL and client != self._owner:
            raise _CallError(RobotErrorCode.NOT_OWNER,
                             "this client does not own the robot: call open first (another client may have taken "
                             "over, or the server restarted)")
        if method == "open":
            return self._open(client, msg)
        if method == "stats":
            _check_args(msg, {})
            return self._stats().to_dict(), {}
        if method == "stop":
            return self._stop(msg)
        if method == "estop":
            _check_args(msg, {})
            reply = decode(self.estop(client), self._limits)
            assert isinstance(reply, RobotReply)
            return dict(reply.result), {}
        result, arrays = self._handlers[method](msg)
        if method in _TARGET_SETTERS:
            self._last_command_t = self._clock()
            self._holding = False
        return result, arrays

    def _open(self, client: bytes, msg: RobotCall) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        args = _check_args(msg, {"client": ((str,), False)})
        if self._owner is not None and self._owner != client:
            self._takeovers += 1
            log.warning("robot server: client %s (%s) takes over from %s", _short(client),
                        str(args.get("client", ""))[:64], _short(self._owner))
        self._owner = client
        self._clients += 1
        self._last_command_t = None
        self._holding = False
        return dict(self._open_result), {}

    def _state(self, msg: RobotCall) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        _check_args(msg, {})
        return state_to_wire(self.robot.state())

    def _command(self, msg: RobotCall) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        args = _check_args(msg, {"gripper_closed": ((int, float), True)},
                           {"pos_base_target": (3,), "quat_base_target": (4,)})
        pos, quat, g = check_command(msg.arrays["pos_base_target"], msg.arrays["quat_base_target"],
                                     args["gripper_closed"])
        self.robot.command(pos, quat, g)
        self._last_gripper = g
        return {}, {}

    def _wait(self, msg: RobotCall) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        d = float(_check_args(msg, {"duration_s": ((int, float), True)})["duration_s"])
        self.robot.wait(check_duration(d, self.config.max_wait_s, "max_wait_s"))
        return {}, {}

    def _set_gains(self, msg: RobotCall) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        profile = _check_args(msg, {"profile": ((str,), True)})["profile"]
        if not 0 < len(profile) <= 64:
            raise _CallError(ErrorCode.BAD_FIELD, f"profile {profile[:64]!r} must be 1..64 characters")
        self.robot.set_gains(profile)
        return {}, {}

    def _reset_joints(self, msg: RobotCall) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        _check_args(msg, {}, {"q_rad": (7,)})
        self.robot.reset_joints(check_joint_target(msg.arrays["q_rad"], limits=False))
        return {}, {}

    def _reset_scene(self, msg: RobotCall) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        seed = _check_args(msg, {"seed": ((int, type(None)), False)}).get("seed")
        if seed is not None and not 0 <= seed < 2**63:
            raise _CallError(ErrorCode.BAD_FIELD, f"seed={seed} must be None or in [0, 2**63)")
        self.robot.reset_scene(seed)
        return {}, {}

    def _clear_errors(self, msg: RobotCall) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        _check_args(msg, {})
        self.robot.clear_errors()
        return {}, {}

    def _stop(self, msg: RobotCall) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """The client is done: hold the current pose and release the robot (the backend keeps running)."""
        _check_args(msg, {})
        if self._last_gripper is not None:
            s = self.robot.state()
            try:
                self.robot.command(s.pos_base_ee, s.quat_base_ee, self._last_gripper)
            except RobotRLError as err:  # e.g. an error state: the backend holds its own target anyway
                log.info("robot server: stop could not re-target the current pose (%s)", err)
        self._owner = None
        self._last_command_t = None
        self._holding = False
        return {}, {}

    def _read_cameras(self, msg: RobotCall) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        _check_args(msg, {})
        if self.cameras is None:
            raise _CallError(RobotErrorCode.NO_CAMERAS, "this robot server serves no cameras (state-only backend)")
        frames = self.cameras.read()
        arrays: dict[str, np.ndarray] = {}
        for name in self.cameras.names:
            img = frames.get(name)
            if not isinstance(img, np.ndarray) or img.dtype != np.uint8 or img.ndim != 3 or img.shape[2] != 3:
                raise ShapeError(f"camera {name!r} returned {getattr(img, 'dtype', type(img))} "
                                 f"{getattr(img, 'shape', '')}, expected uint8 (H, W, 3)")
            arrays[IMAGES_PREFIX + name] = img  # contiguous rendered frame: sent without a copy
        ages = getattr(self.cameras, "frame_ages_s", None)  # real cameras: how old each frame was
        return ({"frame_ages_s": {str(k): float(v) for k, v in ages().items()}} if callable(ages) else {}), arrays


def _safety_stats(robot: Robot) -> dict[str, Any]:
    stats = getattr(robot, "stats", None)
    if not callable(stats):
        return {}
    try:
        out = stats()
        return dict(out) if isinstance(out, Mapping) else {}
    except Exception:
        return {}


def _check_args(msg: RobotCall, schema: Mapping[str, tuple[tuple[type, ...], bool]],
                arrays: Mapping[str, tuple[int, ...]] | None = None) -> dict[str, Any]:
    """Check a call's args ({name: (types, required)}) and arrays ({name: shape}, numeric); bad_field /
    bad_shape / bad_dtype refusals name what is wrong."""
    args = dict(msg.args)
    unknown = sorted(set(args) - set(schema))
    missing = sorted(n for n, (_, req) in schema.items() if req and n not in args)
    if unknown or missing:
        raise _CallError(ErrorCode.BAD_FIELD, f"{msg.method}: unknown args {unknown[:8]}, missing args {missing}")
    for name, (types, _) in schema.items():
        if name in args and (not isinstance(args[name], types) or isinstance(args[name], bool)):
            raise _CallError(ErrorCode.BAD_FIELD, f"{msg.method}: arg '{name}' has type {type(args[name]).__name__}")
    want = arrays or {}
    if set(msg.arrays) != set(want):
        raise _CallError(ErrorCode.BAD_FIELD, f"{msg.method}: expected arrays {sorted(want)}, got "
                                              f"{sorted(msg.arrays)[:8]}")
    for name, shape in want.items():
        arr = msg.arrays[name]
        if arr.dtype.kind not in "iuf":
            raise _CallError(ErrorCode.BAD_DTYPE, f"{msg.method}: array '{name}' has dtype {arr.dtype}, not a number")
        if arr.shape != shape:
            raise _CallError(ErrorCode.BAD_SHAPE, f"{msg.method}: array '{name}' has shape {arr.shape}, "
                                                  f"expected {shape}")
    return args

