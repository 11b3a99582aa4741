"""Robot server, the protocol: what crosses the socket between `RemoteRobot` and the server besides the wire's own
messages: the method names, the reply error codes (and which exception maps to which), the fixed state
arrays and the state codec. Shared by the server (`envs.robot_server.core`) and the client (`envs.remote`).

Usage::

    result, arrays = state_to_wire(robot.state())      # server: a `state` reply
    state = state_from_wire(result, arrays)            # client: ProtocolError (bad_field / bad_shape) if off
    code = error_code_for(err)                         # server: the RobotReply.error_code of an exception
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any

import numpy as np

from envs.robot import RobotState
from robot_rl.errors import ConfigError, ProtocolError, RobotRLError, RobotTimeoutError, SafetyError, ShapeError
from robot_rl.wire import ErrorCode

DEFAULT_ADDRESS = "tcp://127.0.0.1:5560"
"""Where `robot-rl robot-server` binds and `RemoteRobot` connects by default (loopback)."""


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
           "read_cameras", "stats", "estop")
"""Every method the server answers."""

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
