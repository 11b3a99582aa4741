"""The wire's vocabulary (see robot_rl.wire for the protocol): message kinds, error codes, size limits, plain-data
conversion for header fields, and the per-kind field checks the messages (robot_rl.wire_messages) decode with.

Usage::

    to_plain({"return": np.float32(1.5)}, where="stats")    # {"return": 1.5}; ProtocolError for non-plain data
    f = fields("ACK", meta, {"actor_id": (str, REQUIRED), "upto": (int, REQUIRED)})   # checked field map
    raise fail(ErrorCode.BAD_FIELD, "ACK: field 'upto' must be >= -1")
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from enum import StrEnum
from typing import Any

import numpy as np

from robot_rl.config import Config, require
from robot_rl.errors import ProtocolError, SpecMismatchError
from robot_rl.specs import EnvSpec


class Kind(StrEnum):
    HELLO = "HELLO"
    HELLO_OK = "HELLO_OK"
    ERROR = "ERROR"
    TRANSITIONS = "TRANSITIONS"
    ACK = "ACK"
    WEIGHTS = "WEIGHTS"
    HEARTBEAT = "HEARTBEAT"
    ROBOT_CALL = "ROBOT_CALL"
    ROBOT_REPLY = "ROBOT_REPLY"


class ErrorCode(StrEnum):
    """Reasons carried by `ProtocolError.code` and by ERROR replies."""

    BAD_HEADER = "bad_header"  # not msgpack, not a map, not plain data, wrong magic or keys
    TOO_LARGE = "too_large"  # header, a frame, the frame count or the whole message over a limit
    BAD_VERSION = "bad_version"  # another protocol version
    UNKNOWN_KIND = "unknown_kind"
    UNEXPECTED_KIND = "unexpected_kind"  # a valid kind this endpoint does not accept
    BAD_FRAMES = "bad_frames"  # frame count does not match the header's array list
    BAD_DTYPE = "bad_dtype"  # dtype not in the whitelist
    BAD_SHAPE = "bad_shape"  # shape vs frame length, or inconsistent array shapes
    BAD_FIELD = "bad_field"  # a missing, unknown or mistyped header field
    SPEC_MISMATCH = "spec_mismatch"  # handshake or transitions disagree with the endpoint's EnvSpec
    NO_HANDSHAKE = "no_handshake"  # a message before HELLO on this connection
    BAD_SEQ = "bad_seq"  # a transitions range overlapping another partially
    UNAUTHORIZED = "unauthorized"  # CURVE key refused
    BIND_FAILED = "bind_failed"
    CLOSED = "closed"  # the endpoint was closed
    INTERNAL = "internal"  # a bug in an endpoint's I/O thread


@dataclasses.dataclass(frozen=True)
class Limits(Config):
    """Size limits enforced by `encode` and `decode` (and by the transport's socket options)."""

    max_message_bytes: int = 256 << 20
    """Largest whole message (all frames) in bytes."""
    max_header_bytes: int = 1 << 20
    """Largest msgpack header in bytes."""
    max_frames: int = 4096
    """Most frames (1 header + one per array) in one message."""
    max_ndim: int = 8
    """Most dimensions of one array."""
    max_name_len: int = 256
    """Longest array name."""
    max_depth: int = 16
    """Deepest nesting of maps/lists in a header."""

    def validate(self) -> None:
        for f in dataclasses.fields(self):
            require(getattr(self, f.name) > 0, f.name, getattr(self, f.name), "must be > 0")


DEFAULT_LIMITS = Limits()


# --------------------------------------------------------------------------------------------------- plain data

def fail(code: ErrorCode, message: str) -> ProtocolError:
    return ProtocolError(message, code.value)


def to_plain(value: Any, depth: int = 0, max_depth: int = DEFAULT_LIMITS.max_depth, where: str = "value") -> Any:
    """`value` as msgpack-safe plain data (None/bool/int/float/str, lists, str-keyed maps); numpy scalars
    become Python scalars. Anything else raises `ProtocolError` (bad_field)."""
    if depth > max_depth:
        raise fail(ErrorCode.BAD_FIELD, f"{where}: nested deeper than {max_depth}")
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        if not -(1 << 63) <= value < (1 << 64):
            raise fail(ErrorCode.BAD_FIELD, f"{where}: integer {value} out of 64-bit range")
        return value
    if isinstance(value, float):
        return value
    if isinstance(value, np.generic) and value.dtype.kind in "biuf":
        return to_plain(value.item(), depth, max_depth, where)
    if isinstance(value, list | tuple):
        return [to_plain(v, depth + 1, max_depth, where) for v in value]
    if isinstance(value, Mapping):
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise fail(ErrorCode.BAD_FIELD, f"{where}: map key {k!r} is not a string")
            out[k] = to_plain(v, depth + 1, max_depth, f"{where}/{k}")
        return out
    raise fail(ErrorCode.BAD_FIELD, f"{where}: {type(value).__name__} is not plain data (no pickling on the wire)")


def check_plain(value: Any, depth: int, max_depth: int) -> None:
    """Raise bad_header unless a decoded header is plain data within `max_depth` (no ext types, no bytes)."""
    if depth > max_depth:
        raise fail(ErrorCode.BAD_HEADER, f"header nested deeper than {max_depth}")
    if value is None or isinstance(value, bool | int | float | str):
        return
    if isinstance(value, list):
        for v in value:
            check_plain(v, depth + 1, max_depth)
        return
    if isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str):
                raise fail(ErrorCode.BAD_HEADER, f"header map key {k!r} is not a string")
            check_plain(v, depth + 1, max_depth)
        return
    raise fail(ErrorCode.BAD_HEADER, f"header holds a {type(value).__name__}; only plain data is allowed")


REQUIRED = object()


def fields(kind: str, meta: Any, schema: Mapping[str, tuple[Any, Any]]) -> dict[str, Any]:
    """Check a kind's field map against `schema` ({name: (type or tuple, default or REQUIRED)})."""
    if not isinstance(meta, dict):
        raise fail(ErrorCode.BAD_FIELD, f"{kind}: fields must be a map, got {type(meta).__name__}")
    unknown = sorted(set(meta) - set(schema))
    if unknown:
        raise fail(ErrorCode.BAD_FIELD, f"{kind}: unknown field(s) {unknown}")
    out: dict[str, Any] = {}
    for name, (typ, default) in schema.items():
        if name not in meta:
            if default is REQUIRED:
                raise fail(ErrorCode.BAD_FIELD, f"{kind}: missing field '{name}'")
            out[name] = default.copy() if isinstance(default, dict | list) else default
            continue
        value = meta[name]
        if typ is float:  # ints are fine for float fields; bools are never numbers here
            ok = isinstance(value, int | float) and not isinstance(value, bool)
            value = float(value) if ok else value
        elif typ is int:
            ok = isinstance(value, int) and not isinstance(value, bool)
        else:
            ok = isinstance(value, typ)
        if not ok:
            raise fail(ErrorCode.BAD_FIELD, f"{kind}: field '{name}' has type {type(value).__name__}")
        out[name] = value
    return out


def nonneg(kind: str, name: str, value: int, minimum: int = 0) -> int:
    if value < minimum:
        raise fail(ErrorCode.BAD_FIELD, f"{kind}: field '{name}'={value} must be >= {minimum}")
    return value


def spec_from(kind: str, d: Any) -> EnvSpec:
    try:
        return EnvSpec.from_dict(d)
    except (SpecMismatchError, AttributeError) as err:
        raise fail(ErrorCode.BAD_FIELD, f"{kind}: malformed spec ({err})") from err


def no_arrays(kind: str, arrays: Mapping[str, np.ndarray]) -> None:
    if arrays:
        raise fail(ErrorCode.BAD_FRAMES, f"{kind} carries no arrays, got {len(arrays)}")
