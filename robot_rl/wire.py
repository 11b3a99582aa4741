"""The wire protocol: every message that crosses a socket, its encoding, and its validation.

A message is a list of frames (ZeroMQ multipart parts): frame 0 is a small msgpack header, then one raw frame
per array, in the order the header lists them. Nothing is ever pickled; arrays travel as their bytes with
dtype and shape in the header, and decode with `np.frombuffer` (zero-copy: the arrays are read-only views of
the received frames).

Header (a msgpack map, protocol version 1)::

    {"p": "robot-rl", "v": 1, "k": "TRANSITIONS", "m": {...kind fields...},
     "a": [["obs/images/front", "uint8", [9, 128, 128, 3]], ["actions", "float32", [8, 7]], ...]}

| kind | fields (`m`) | arrays | direction |
|---|---|---|---|
| HELLO | role, actor_id, session, spec (EnvSpec dict), acked | - | actor -> learner |
| HELLO_OK | role, session, spec, acked, weights_version, heartbeat_s, max_message_bytes | - | learner -> actor |
| ERROR | code, message, fields | - | both |
| TRANSITIONS | actor_id, seq, episode, step, stats | `obs/<path>` (T+1, ...), per-step (T, ...) | actor -> learner |
| ACK | actor_id, upto (highest contiguous seq delivered, -1 for none) | - | learner -> actor |
| WEIGHTS | version | named numeric arrays | learner -> actor |
| HEARTBEAT | role, actor_id, time, weights_version, stats | - | both |
| ROBOT_CALL | call_id, method, args | named arrays | client -> robot server |
| ROBOT_REPLY | call_id, ok, result, error_code, error_message | named arrays | robot server -> client |

TRANSITIONS per-step arrays: actions (T, ...), rewards float32, terminated / truncated / intervention /
success bool, each (T,). Sequence numbers count transitions: a TRANSITIONS message covers seqs
[seq, seq + T). Observations use the episode-file layout (`robot_rl.episodes`): T+1 rows, row t+1 is the
observation after step t, so each frame travels once per chunk (a chunk never spans an episode boundary).

`decode` validates everything before building a message: frame count and total size limits, header size,
msgpack type (plain data only: no ext types), magic and version, known kind, the exact field set and types of
the kind, dtype whitelist (no object, string or big-endian dtypes), shape against frame byte length, and the
per-kind array rules. Every failure raises `ProtocolError` with a code from `ErrorCode`. An ERROR message of
another protocol version still decodes (so a version mismatch is reported readably to both sides).

Usage::

    frames = encode(Weights(version=3, arrays={"actor/w": w}))      # list of bytes / memoryviews
    msg = decode(frames)                                          # Weights(version=3, arrays={...})
    chunk = TransitionChunk.from_steps(observations, actions, rewards, terminated, truncated)
    frames = encode(Transitions(actor_id="a0", seq=0, chunk=chunk))

Layout: `robot_rl.wire_schema` (kinds, error codes, size limits, plain data, per-kind field checks),
`robot_rl.wire_messages` (the message classes and `TransitionChunk`), and this module (the codec: encode, decode,
the dtype whitelist). Import every public name from here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import msgpack
import numpy as np

from robot_rl.wire_messages import (
    MESSAGE_TYPES,
    Ack,
    ErrorReply,
    Heartbeat,
    Hello,
    HelloOk,
    Message,
    RobotCall,
    RobotReply,
    TransitionChunk,
    Transitions,
    Weights,
    check_chunk,
)
from robot_rl.wire_schema import DEFAULT_LIMITS, ErrorCode, Kind, Limits, check_plain, fail, to_plain

__all__ = [
    "DEFAULT_LIMITS", "DTYPES", "MESSAGE_TYPES", "PROTOCOL_NAME", "PROTOCOL_VERSION", "Ack", "ErrorCode", "ErrorReply",
    "Frame", "Heartbeat", "Hello", "HelloOk", "Kind", "Limits", "Message", "RobotCall", "RobotReply",
    "TransitionChunk", "Transitions", "Weights", "check_chunk", "decode", "encode", "error_frames", "frames_nbytes",
    "to_plain",
]

PROTOCOL_NAME = "robot-rl"
PROTOCOL_VERSION = 1

# The dtype whitelist: name -> explicit little-endian dtype. Nothing else decodes (no object / str / void).
DTYPES: dict[str, np.dtype[Any]] = {
    name: np.dtype(code)
    for name, code in {
        "bool": "|b1", "uint8": "|u1", "int8": "|i1", "uint16": "<u2", "int16": "<i2", "uint32": "<u4",
        "int32": "<i4", "uint64": "<u8", "int64": "<i8", "float16": "<f2", "float32": "<f4", "float64": "<f8",
    }.items()
}
_HEADER_KEYS = frozenset({"p", "v", "k", "m", "a"})


# --------------------------------------------------------------------------------------------------- encode

Frame = bytes | memoryview


def _array_frame(name: str, arr: Any) -> tuple[list[Any], memoryview]:
    a = np.asarray(arr)
    dname = a.dtype.name
    if dname not in DTYPES:
        raise fail(ErrorCode.BAD_DTYPE, f"array '{name}': dtype {a.dtype} is not allowed on the wire "
                                         f"(allowed: {sorted(DTYPES)})")
    a = np.asarray(a, dtype=DTYPES[dname])  # no copy when already little-endian
    if not a.flags.c_contiguous:
        a = a.copy(order="C")  # (np.ascontiguousarray would turn a 0-d array into 1-d)
    return [name, dname, list(a.shape)], a.reshape(-1).view(np.uint8).data


def encode(msg: Message, limits: Limits = DEFAULT_LIMITS) -> list[Frame]:
    """Frames for `msg`: the msgpack header, then one frame per array, zero-copy over contiguous arrays.

    Raises `ProtocolError` (bad_field / bad_dtype / too_large) for values that cannot travel.
    """
    arrays: Mapping[str, Any] = msg._arrays() if hasattr(msg, "_arrays") else {}
    descs: list[list[Any]] = []
    frames: list[Frame] = [b""]
    for name, arr in arrays.items():
        if not isinstance(name, str) or not 0 < len(name) <= limits.max_name_len:
            raise fail(ErrorCode.BAD_FIELD, f"array name {name!r} must be a non-empty string of <= "
                                             f"{limits.max_name_len} characters")
        desc, frame = _array_frame(name, arr)
        descs.append(desc)
        frames.append(frame)
    header = {"p": PROTOCOL_NAME, "v": PROTOCOL_VERSION, "k": msg.KIND.value,
              "m": to_plain(msg._meta(), max_depth=limits.max_depth, where=msg.KIND.value), "a": descs}
    frames[0] = msgpack.packb(header, use_bin_type=True)
    if len(frames) > limits.max_frames:
        raise fail(ErrorCode.TOO_LARGE, f"{msg.KIND}: {len(frames)} frames > max_frames {limits.max_frames}")
    if len(frames[0]) > limits.max_header_bytes:
        raise fail(ErrorCode.TOO_LARGE, f"{msg.KIND}: header {len(frames[0])} B > {limits.max_header_bytes} B")
    total = sum(len(f) if isinstance(f, bytes) else f.nbytes for f in frames)
    if total > limits.max_message_bytes:
        raise fail(ErrorCode.TOO_LARGE, f"{msg.KIND}: {total} B > max_message_bytes {limits.max_message_bytes}")
    return frames


def frames_nbytes(frames: Sequence[Any]) -> int:
    """Total size of a message's frames in bytes."""
    return sum(_view(f).nbytes for f in frames)


# --------------------------------------------------------------------------------------------------- decode

def _view(frame: Any) -> memoryview:
    buf = getattr(frame, "buffer", None)  # zmq.Frame
    return buf if isinstance(buf, memoryview) else memoryview(frame)


def _header(frames: Sequence[Any], limits: Limits) -> tuple[dict[str, Any], list[memoryview]]:
    if not isinstance(frames, Sequence) or len(frames) == 0:
        raise fail(ErrorCode.BAD_FRAMES, "empty message")
    if len(frames) > limits.max_frames:
        raise fail(ErrorCode.TOO_LARGE, f"{len(frames)} frames > max_frames {limits.max_frames}")
    try:
        views = [_view(f) for f in frames]
    except TypeError as err:
        raise fail(ErrorCode.BAD_FRAMES, f"a frame is not a bytes-like object ({err})") from err
    total = sum(v.nbytes for v in views)
    if total > limits.max_message_bytes:
        raise fail(ErrorCode.TOO_LARGE, f"message of {total} B > max_message_bytes {limits.max_message_bytes}")
    if views[0].nbytes > limits.max_header_bytes:
        raise fail(ErrorCode.TOO_LARGE, f"header of {views[0].nbytes} B > max_header_bytes {limits.max_header_bytes}")
    try:
        header = msgpack.unpackb(views[0], raw=False, strict_map_key=True, use_list=True)
    except Exception as err:  # msgpack raises several types (ExtraData, ValueError, StackError, ...)
        raise fail(ErrorCode.BAD_HEADER, f"header is not valid msgpack ({type(err).__name__})") from err
    if not isinstance(header, dict):
        raise fail(ErrorCode.BAD_HEADER, f"header is a {type(header).__name__}, not a map")
    check_plain(header, 0, limits.max_depth)
    if header.get("p") != PROTOCOL_NAME:
        raise fail(ErrorCode.BAD_HEADER, f"not a {PROTOCOL_NAME} message (magic {header.get('p')!r})")
    return header, views


def _arrays(header: dict[str, Any], views: list[memoryview], limits: Limits) -> dict[str, np.ndarray]:
    descs = header["a"]
    if not isinstance(descs, list):
        raise fail(ErrorCode.BAD_HEADER, "array list 'a' must be a list")
    if len(views) != 1 + len(descs):
        raise fail(ErrorCode.BAD_FRAMES, f"header lists {len(descs)} arrays but the message has "
                                          f"{len(views) - 1} array frames")
    out: dict[str, np.ndarray] = {}
    for desc, view in zip(descs, views[1:], strict=True):
        if not (isinstance(desc, list) and len(desc) == 3 and isinstance(desc[0], str) and isinstance(desc[1], str)
                and isinstance(desc[2], list)):
            raise fail(ErrorCode.BAD_HEADER, f"array entry {desc!r} must be [name, dtype, shape]")
        name, dname, shape = desc
        if not 0 < len(name) <= limits.max_name_len or name in out:
            raise fail(ErrorCode.BAD_HEADER, f"array name {name[:64]!r} empty, too long or repeated")
        dtype = DTYPES.get(dname)
        if dtype is None:
            raise fail(ErrorCode.BAD_DTYPE, f"array '{name}': dtype {dname[:32]!r} is not allowed "
                                             f"(allowed: {sorted(DTYPES)})")
        if len(shape) > limits.max_ndim or not all(
                isinstance(d, int) and not isinstance(d, bool) and 0 <= d <= limits.max_message_bytes for d in shape):
            raise fail(ErrorCode.BAD_SHAPE, f"array '{name}': bad shape {shape[:16]!r}")
        want = math.prod(shape) * dtype.itemsize
        if want != view.nbytes:
            raise fail(ErrorCode.BAD_SHAPE, f"array '{name}': shape {shape} {dname} needs {want} B, frame has "
                                             f"{view.nbytes} B")
        arr = np.frombuffer(view, dtype=dtype).reshape(shape)
        if not arr.flags.aligned:  # small frames can sit at odd offsets inside a receive buffer
            arr = arr.copy()
            arr.flags.writeable = False
        out[name] = arr
    return out


def decode(frames: Sequence[Any], limits: Limits = DEFAULT_LIMITS) -> Message:
    """Validate and decode one message (frames: bytes, memoryviews or zmq.Frame objects).

    Raises `ProtocolError` with an `ErrorCode` value as `.code` on anything malformed; never unpickles and
    never allocates more than the frames' own size (arrays are read-only views of the frames).
    """
    header, views = _header(frames, limits)
    kind, version, meta = header.get("k"), header.get("v"), header.get("m")
    if version != PROTOCOL_VERSION:
        if kind == Kind.ERROR and isinstance(meta, dict) and isinstance(meta.get("code"), str):
            # An error from a peer speaking another version is still worth reading.
            return ErrorReply(meta["code"], str(meta.get("message", ""))[:4096])
        raise fail(ErrorCode.BAD_VERSION, f"protocol version {version!r} is not supported (this side speaks "
                                           f"{PROTOCOL_VERSION})")
    if set(header) != _HEADER_KEYS:
        raise fail(ErrorCode.BAD_HEADER, f"header keys {sorted(header)} != {sorted(_HEADER_KEYS)}")
    cls = MESSAGE_TYPES.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise fail(ErrorCode.UNKNOWN_KIND, f"unknown message kind {str(kind)[:64]!r}")
    arrays = _arrays(header, views, limits)
    return cls._build(meta, arrays)


def error_frames(code: ErrorCode | str, message: str, fields: Sequence[str] = ()) -> list[Frame]:
    """Frames of an ERROR reply (message cut to 4 KiB)."""
    return encode(ErrorReply(str(code), message[:4096], tuple(fields)))
