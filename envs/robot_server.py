"""The robot server: any `envs.robot.Robot` (+ `Cameras`) served over ZeroMQ, so the env sees the twin and the
hardware through the same client (`envs.remote.RemoteRobot`).

Two layers:
- `RobotServerCore` (pure, no sockets, no clocks of its own): `handle(client_id, frames) -> reply frames`
  decodes and validates one call, runs it on the backend and encodes the answer; `tick()` runs the watchdog;
  `stats()` counts calls and errors. Nothing a client sends can make it raise.
- `RobotServer`: the thin ZeroMQ adapter (one ROUTER socket, calls served one at a time in arrival order).

Protocol (every message through `robot_rl.wire`: msgpack header + raw array frames, never pickle): the client
sends `wire.RobotCall(call_id, method, args, arrays)`, the server answers `wire.RobotReply` with the same
call_id (`ok`, `result`, `arrays`, or `error_code` + `error_message`). A frame that does not decode to a
RobotCall (garbage, another protocol version, another message kind) gets a `wire.ErrorReply` with the wire's
error code. Every refusal is counted per code (`RobotServerStats.errors_by_code`); the server keeps serving.

| method | args | arrays | result / reply arrays |
|---|---|---|---|
| open | client (str, optional) | - | protocol, session, backend, task, cameras, image_shape, hold_timeout_s |
| state | - | - | time_s, gripper_width_m, error; arrays: the RobotState arrays + objects/<key> (float64) |
| command | gripper_closed (number) | pos_base_target (3,), quat_base_target (4,) | - |
| wait | duration_s (number, 0 .. max_wait_s) | - | - |
| set_gains | profile (str) | - | - |
| reset_joints | - | q_rad (7,) | - |
| reset_scene | seed (int >= 0 or None) | - | - |
| clear_errors | - | - | - |
| stop | - | - | - (holds the current pose and releases the robot for the next client) |
| read_cameras | - | - | arrays images/<camera> uint8 (H, W, 3) (sent zero-copy from the rendered frames) |
| stats | - | - | `RobotServerStats.to_dict()` |

Error codes of a failed RobotReply (`RobotErrorCode`; `envs.remote` raises the matching typed error):
safety (SafetyError: NaN/inf, out-of-range values), robot (RobotError), timeout (RobotTimeoutError from a
hardware backend), config (ConfigError, e.g. an unknown gain profile), no_cameras, not_owner, unknown_method,
bad_field / bad_shape / bad_dtype (a call's args or arrays do not match the table), internal (a backend bug,
logged with its traceback).

One client at a time: a client must call `open` first; `open` makes it the robot's owner, and the newest
`open` wins (a restarted actor takes over at once, without waiting for the old connection to time out). Calls
from any other client get `not_owner` (only `open` and `stats` are open to everyone), so two clients never
interleave commands. The remote `stop` releases ownership; the backend itself is stopped only when the server
closes.

Watchdog: when the owner has sent no `command` (or `reset_joints`) for `hold_timeout_s`, the server marks the
robot as holding (`RobotServerStats.holding`, `holds` counts the episodes of silence) and logs it. The backend
keeps its last impedance target the whole time (every backend's high-rate loop holds the last target until a
new one arrives; the twin does not even advance without `wait`), so a client that dies mid-episode leaves the
arm holding its last safe target, and the next client that calls `open` is served normally.

Security: binding a non-loopback address needs CURVE keys (`robot_rl.keys.ServerKeys`, clients authorized by
public key through a ZAP handler) or `insecure=True` (`robot_rl.curve.check_address`).

Usage::

    robot = TwinRobot(TwinRobotConfig(task="pick_cube"))
    server = RobotServer(robot, robot.cameras(), RobotServerConfig(bind="tcp://127.0.0.1:5560"))
    server.serve(stop_event)          # until stop_event is set; server.close() also stops the backend

    handle = serve_in_thread(lambda: make_backend("twin", "pick_cube"))   # tests: a server on a thread
    RemoteRobot(RemoteRobotConfig(address=handle.address)).state(); handle.close()
"""

from __future__ import annotations

import dataclasses
import logging
import math
import secrets
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from enum import StrEnum
from typing import Any

import numpy as np
import zmq

from envs.robot import Cameras, Robot, RobotState
from robot_rl.config import Config, require
from robot_rl.curve import check_address
from robot_rl.errors import (
    ConfigError,
    ProtocolError,
    RobotRLError,
    RobotTimeoutError,
    SafetyError,
    ShapeError,
)
from robot_rl.keys import ServerKeys
from robot_rl.wire import (
    PROTOCOL_VERSION,
    ErrorCode,
    Frame,
    Limits,
    RobotCall,
    RobotReply,
    decode,
    encode,
    error_frames,
)

log = logging.getLogger("robot_rl.robot_server")

DEFAULT_ADDRESS = "tcp://127.0.0.1:5560"
"""Where `robot-rl robot-server` binds and `RemoteRobot` connects by default (loopback)."""

BACKENDS = ("twin", "franky", "ros2")
"""Backend names for `make_backend` / `robot-rl robot-server --backend`."""


class RobotErrorCode(StrEnum):
    """`RobotReply.error_code` values beyond the wire's own (`wire.ErrorCode`: bad_field, bad_shape, ...)."""

    SAFETY = "safety"
    ROBOT = "robot"
    TIMEOUT = "timeout"
    CONFIG = "config"
    NO_CAMERAS = "no_cameras"
    NOT_OWNER = "not_owner"
    UNKNOWN_METHOD = "unknown_method"
    INTERNAL = "internal"


METHODS = ("open", "state", "command", "wait", "set_gains", "reset_joints", "reset_scene", "clear_errors", "stop",
           "read_cameras", "stats")
"""Every method the server answers."""

_OPEN_TO_ALL = frozenset({"open", "stats"})
_TARGET_SETTERS = frozenset({"command", "reset_joints"})

STATE_ARRAYS: dict[str, tuple[int, ...]] = {
    "q_rad": (7,), "dq_rad_per_s": (7,), "pos_base_ee": (3,), "quat_base_ee": (4,), "twist_ee_body": (6,),
    "force_ee_n": (3,), "torque_ee_nm": (3,), "tau_j_nm": (7,),
}
"""The fixed RobotState arrays on the wire: name -> shape (float64)."""
OBJECTS_PREFIX = "objects/"
IMAGES_PREFIX = "images/"


def error_code_for(err: BaseException) -> str:
    """The reply error code for an exception raised while serving a call."""
    if isinstance(err, RobotTimeoutError):
        return RobotErrorCode.TIMEOUT.value
    if isinstance(err, SafetyError):
        return RobotErrorCode.SAFETY.value
    if isinstance(err, ShapeError):
        return ErrorCode.BAD_SHAPE.value
    if isinstance(err, ConfigError):
        return RobotErrorCode.CONFIG.value
    if isinstance(err, ProtocolError):
        return err.code
    if isinstance(err, RobotRLError):
        return RobotErrorCode.ROBOT.value
    return RobotErrorCode.INTERNAL.value


# --------------------------------------------------------------------------------------------------- state codec

def state_to_wire(state: RobotState) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """(result, arrays) of a `state` reply."""
    result = {"time_s": float(state.time_s), "gripper_width_m": float(state.gripper_width_m),
              "error": str(state.error)}
    arrays: dict[str, np.ndarray] = {}
    for name, shape in STATE_ARRAYS.items():
        arr = np.asarray(getattr(state, name), dtype=np.float64)
        if arr.shape != shape:
            raise ShapeError(f"backend state {name}: expected shape {shape}, got {arr.shape}")
        arrays[name] = arr
    for key, value in state.objects.items():
        arrays[OBJECTS_PREFIX + str(key)] = np.asarray(value, dtype=np.float64)
    return result, arrays


def state_from_wire(result: Mapping[str, Any], arrays: Mapping[str, np.ndarray]) -> RobotState:
    """The RobotState of a `state` reply; `ProtocolError` (bad_field / bad_shape) when anything is off.
    Arrays are copied (the caller may keep and modify them, as with an in-process backend)."""
    for key, types in (("time_s", (int, float)), ("gripper_width_m", (int, float)), ("error", (str,))):
        value = result.get(key)
        if not isinstance(value, types) or isinstance(value, bool):
            raise ProtocolError(f"state reply: field '{key}' is {type(value).__name__}", ErrorCode.BAD_FIELD)
    unknown = sorted(n for n in arrays if n not in STATE_ARRAYS and not n.startswith(OBJECTS_PREFIX))
    missing = sorted(n for n in STATE_ARRAYS if n not in arrays)
    if unknown or missing:
        raise ProtocolError(f"state reply: missing arrays {missing}, unknown arrays {unknown}", ErrorCode.BAD_FIELD)
    fields: dict[str, Any] = {}
    for name, shape in STATE_ARRAYS.items():
        arr = arrays[name]
        if arr.shape != shape or arr.dtype != np.float64:
            raise ProtocolError(f"state reply: {name} is {arr.dtype} {arr.shape}, expected float64 {shape}",
                                ErrorCode.BAD_SHAPE)
        fields[name] = np.array(arr)
    objects = {}
    for name, arr in arrays.items():
        if name.startswith(OBJECTS_PREFIX):
            if arr.dtype != np.float64:
                raise ProtocolError(f"state reply: {name} is {arr.dtype}, expected float64", ErrorCode.BAD_DTYPE)
            objects[name[len(OBJECTS_PREFIX):]] = np.array(arr)
    return RobotState(time_s=float(result["time_s"]), gripper_width_m=float(result["gripper_width_m"]),
                      objects=objects, error=str(result["error"]), **fields)


# --------------------------------------------------------------------------------------------------- config / stats

@dataclasses.dataclass(frozen=True)
class RobotServerConfig(Config):
    """Options of the robot server."""

    bind: str = DEFAULT_ADDRESS
    """ZeroMQ address to bind (tcp://HOST:PORT; port 0 picks a free one). Non-loopback needs keys or insecure."""
    insecure: bool = False
    """Allow a non-loopback bind without CURVE keys (unencrypted, unauthenticated: trusted networks only)."""
    hold_timeout_s: float = 1.0
    """Watchdog: with no command from the owner for this long, the robot is reported as holding its last target."""
    max_wait_s: float = 10.0
    """The longest `wait` one call may ask for (a longer one is refused: the server would be deaf meanwhile)."""
    max_call_bytes: int = 1 << 20
    """Largest incoming message (calls carry no images); bigger ones are refused (too_large)."""
    poll_ms: int = 50
    """Longest sleep of the serving loop (watchdog and stop-flag resolution)."""
    hwm: int = 100
    """ZeroMQ high-water marks (messages queued per client)."""
    linger_ms: int = 0
    """How long a closing socket keeps trying to deliver pending replies."""

    def validate(self) -> None:
        require(isinstance(self.bind, str) and "://" in self.bind, "bind", self.bind, "must look like tcp://HOST:PORT")
        for name in ("hold_timeout_s", "max_wait_s"):
            v = getattr(self, name)
            require(isinstance(v, int | float) and math.isfinite(v) and v > 0, name, v, "must be finite and > 0")
        for name in ("max_call_bytes", "poll_ms", "hwm"):
            require(getattr(self, name) > 0, name, getattr(self, name), "must be > 0")
        require(self.linger_ms >= 0, "linger_ms", self.linger_ms, "must be >= 0")

    @property
    def limits(self) -> Limits:
        """Wire limits for incoming calls."""
        return Limits(max_message_bytes=self.max_call_bytes, max_header_bytes=min(self.max_call_bytes, 1 << 16),
                      max_frames=64)


@dataclasses.dataclass(frozen=True)
class RobotServerStats:
    """A snapshot of a robot server."""

    calls: int
    """Calls answered (ok or not), garbage included."""
    calls_by_method: dict[str, int]
    """Per method; names outside `METHODS` count as '<unknown>'."""
    errors: int
    """Calls refused or failed."""
    errors_by_code: dict[str, int]
    """Refusals per error code (wire codes and `RobotErrorCode`)."""
    clients: int
    """`open` calls served (each makes its caller the owner)."""
    takeovers: int
    """`open` calls that replaced a previous owner that had not called stop."""
    owner: str
    """Short id of the current owner ('' when none)."""
    holding: bool
    """The owner has not commanded for `hold_timeout_s`: the robot holds its last target."""
    holds: int
    """How many times the watchdog started holding."""
    last_command_age_s: float
    """Seconds since the last command (inf before the first)."""
    dropped_replies: int
    """Replies that could not be sent (client gone, queue full)."""
    last_error: str
    uptime_s: float

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        if not math.isfinite(d["last_command_age_s"]):
            d["last_command_age_s"] = -1.0  # plain data on the wire: -1 = never
        return d


class _CallError(Exception):
    """A refusal with an explicit reply code."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def _short(client: bytes) -> str:
    return client.hex()[:12] if client else ""


# --------------------------------------------------------------------------------------------------- the core

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

    def tick(self) -> None:
        """The watchdog: start holding when the owner has not commanded for `hold_timeout_s`."""
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
            dropped_replies=self._dropped, last_error=self._last_error, uptime_s=now - self._t0)

    def close(self) -> None:
        """Stop the backend (holds its pose, releases its resources). Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._owner = None
        self.robot.stop()

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
        pos = _finite("pos_base_target", msg.arrays["pos_base_target"])
        quat = _finite("quat_base_target", msg.arrays["quat_base_target"])
        g = float(args["gripper_closed"])
        if not math.isfinite(g):
            raise SafetyError(f"gripper_closed: {g} is not finite")
        self.robot.command(pos, quat, g)
        self._last_gripper = g
        return {}, {}

    def _wait(self, msg: RobotCall) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        d = float(_check_args(msg, {"duration_s": ((int, float), True)})["duration_s"])
        if not (math.isfinite(d) and 0.0 <= d <= self.config.max_wait_s):
            raise SafetyError(f"duration_s={d!r} must be finite and in [0, max_wait_s={self.config.max_wait_s}]")
        self.robot.wait(d)
        return {}, {}

    def _set_gains(self, msg: RobotCall) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        profile = _check_args(msg, {"profile": ((str,), True)})["profile"]
        if not 0 < len(profile) <= 64:
            raise _CallError(ErrorCode.BAD_FIELD, f"profile {profile[:64]!r} must be 1..64 characters")
        self.robot.set_gains(profile)
        return {}, {}

    def _reset_joints(self, msg: RobotCall) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        _check_args(msg, {}, {"q_rad": (7,)})
        self.robot.reset_joints(_finite("q_rad", msg.arrays["q_rad"]))
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
        return {}, arrays


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


def _finite(name: str, arr: np.ndarray) -> np.ndarray:
    out = np.array(arr, dtype=np.float64)
    if not np.all(np.isfinite(out)):
        raise SafetyError(f"{name}: contains NaN/inf: {out}")
    return out


# --------------------------------------------------------------------------------------------------- ZeroMQ adapter

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
                self._start_auth(keys)
                sock.curve_server = True
                sock.curve_publickey = keys.public
                sock.curve_secretkey = keys.secret
            bind = cfg.bind[:-2] + ":*" if cfg.bind.startswith("tcp://") and cfg.bind.endswith(":0") else cfg.bind
            sock.bind(bind)
            self.address: str = sock.getsockopt_string(zmq.LAST_ENDPOINT)
        except zmq.ZMQError as err:
            sock.close(linger=0)
            self._stop_auth()
            self._ctx.term()
            raise ProtocolError(f"cannot bind {cfg.bind}: {err}", ErrorCode.BIND_FAILED) from err
        self._sock = sock
        self._closed = False

    def _start_auth(self, keys: ServerKeys) -> None:
        from zmq.auth.thread import ThreadAuthenticator

        allowed, core = keys.authorized, self.core

        class _Keys:
            def callback(self, domain: str, key: bytes) -> bool:
                if key in allowed:
                    return True
                with core._lock:
                    core._refused(ErrorCode.UNAUTHORIZED.value,
                                  f"refused a client with unknown CURVE key {key.decode(errors='replace')}")
                return False

        self._auth = ThreadAuthenticator(self._ctx, log=logging.getLogger("robot_rl.robot_server.zap"))
        self._auth.start()
        self._auth.configure_curve_callback(domain="*", credentials_provider=_Keys())

    def _stop_auth(self) -> None:
        if self._auth is not None:
            self._auth.stop()
            self._auth = None

    def serve(self, stop: threading.Event | None = None, max_seconds: float | None = None,
              on_idle: Callable[[], None] | None = None) -> None:
        """Serve calls until `stop` is set (or `max_seconds` passed). `on_idle` runs after every poll."""
        poller = zmq.Poller()
        poller.register(self._sock, zmq.POLLIN)
        t_end = math.inf if max_seconds is None else time.monotonic() + max_seconds
        core = self.core
        while not (stop is not None and stop.is_set()) and time.monotonic() < t_end:
            if poller.poll(self.config.poll_ms):
                for _ in range(64):
                    try:
                        parts = self._sock.recv_multipart(zmq.NOBLOCK, copy=False)
                    except zmq.Again:
                        break
                    client = parts[0].bytes
                    reply = core.handle(client, parts[1:])
                    try:
                        self._sock.send_multipart([client, *reply], zmq.NOBLOCK, copy=False)
                    except zmq.ZMQError:
                        core.count_dropped_reply()
                    if stop is not None and stop.is_set():
                        break
            core.tick()
            if on_idle is not None:
                on_idle()

    def stats(self) -> RobotServerStats:
        return self.core.stats()

    def close(self) -> None:
        """Close the socket and stop the backend. Call from the serving thread (or after it ended)."""
        if self._closed:
            return
        self._closed = True
        try:
            self._sock.close(linger=self.config.linger_ms)
            self._stop_auth()
            self._ctx.term()
        finally:
            self.core.close()


# --------------------------------------------------------------------------------------------------- backends

BackendFactory = Callable[[], tuple[Robot, Cameras | None, dict[str, Any]]]
"""Builds (robot, cameras or None, info for `open`) on the serving thread."""


def make_backend(name: str, task: str, image_size: int = 128, camera_names: Sequence[str] = ("front", "wrist"),
                 cameras: bool = True, physics_hz: float | None = None) -> tuple[Robot, Cameras | None, dict[str, Any]]:
    """(robot, cameras, info) for backend `name` ('twin', 'franky', 'ros2') and a task name or twin preset.

    Hardware backends are imported lazily: without their extra this raises `MissingExtraError` naming it
    (`real` for franky, `ros` for ros2). The twin is built exactly as `envs.env.make_twin_env` builds it, so
    an env over a RemoteRobot of this backend runs the same episodes as an in-process twin env.
    """
    from envs.tasks import get_task
    from robot_rl.extras import optional_import

    if name == "twin":
        optional_import("mujoco", extra="sim", purpose="the MuJoCo twin backend")
        from envs.twin import TwinRobot, TwinRobotConfig

        the_task = get_task(_task_name(task))
        if not the_task.twin_task:
            raise ConfigError(f"task={task!r} has no MuJoCo twin scene")
        options: dict[str, Any] = {} if physics_hz is None else {"physics_hz": float(physics_hz)}
        robot = TwinRobot(TwinRobotConfig(task=the_task.twin_task, image_height=int(image_size),
                                          image_width=int(image_size), camera_names=tuple(camera_names),
                                          render=bool(cameras), **options))
        return robot, (robot.cameras() if cameras else None), {"backend": "twin", "task": the_task.name}
    if name == "franky":
        optional_import("franky", extra="real", purpose="the libfranka backend (--backend franky)")
        raise ConfigError("backend 'franky' is not implemented in this version of robot-rl (only 'twin' is)")
    if name == "ros2":
        optional_import("rclpy", extra="ros", purpose="the ROS 2 backend (--backend ros2)")
        raise ConfigError("backend 'ros2' is not implemented in this version of robot-rl (only 'twin' is)")
    raise ConfigError(f"backend={name!r} is unknown; known: {list(BACKENDS)}")


def _task_name(task: str) -> str:
    """A task name ('pick_cube') from a task name or a twin preset name ('twin-pick-cube')."""
    from envs.tasks import TASKS

    if task in TASKS:
        return task
    from envs.presets import PRESETS, twin_task

    if task in PRESETS:
        return twin_task(task)
    from robot_rl.errors import UnknownTaskError

    raise UnknownTaskError(f"unknown task '{task}'; known: {', '.join(sorted([*TASKS, *PRESETS]))}")


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


__all__ = [
    "BACKENDS", "DEFAULT_ADDRESS", "METHODS", "RobotErrorCode", "RobotServer",
    "RobotServerConfig", "RobotServerCore", "RobotServerStats", "ServerThread", "make_backend", "serve_in_thread",
    "state_from_wire", "state_to_wire",
]
