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
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Any, ClassVar

import msgpack
import numpy as np

from robot_rl.config import Config, require
from robot_rl.episodes import Episode
from robot_rl.errors import ProtocolError, ShapeError, SpecMismatchError
from robot_rl.specs import EnvSpec

PROTOCOL_NAME = "robot-rl"
PROTOCOL_VERSION = 1


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


# The dtype whitelist: name -> explicit little-endian dtype. Nothing else decodes (no object / str / void).
DTYPES: dict[str, np.dtype[Any]] = {
    name: np.dtype(code)
    for name, code in {
        "bool": "|b1", "uint8": "|u1", "int8": "|i1", "uint16": "<u2", "int16": "<i2", "uint32": "<u4",
        "int32": "<i4", "uint64": "<u8", "int64": "<i8", "float16": "<f2", "float32": "<f4", "float64": "<f8",
    }.items()
}
_HEADER_KEYS = frozenset({"p", "v", "k", "m", "a"})


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

def _fail(code: ErrorCode, message: str) -> ProtocolError:
    return ProtocolError(message, code.value)


def to_plain(value: Any, depth: int = 0, max_depth: int = DEFAULT_LIMITS.max_depth, where: str = "value") -> Any:
    """`value` as msgpack-safe plain data (None/bool/int/float/str, lists, str-keyed maps); numpy scalars
    become Python scalars. Anything else raises `ProtocolError` (bad_field)."""
    if depth > max_depth:
        raise _fail(ErrorCode.BAD_FIELD, f"{where}: nested deeper than {max_depth}")
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        if not -(1 << 63) <= value < (1 << 64):
            raise _fail(ErrorCode.BAD_FIELD, f"{where}: integer {value} out of 64-bit range")
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
                raise _fail(ErrorCode.BAD_FIELD, f"{where}: map key {k!r} is not a string")
            out[k] = to_plain(v, depth + 1, max_depth, f"{where}/{k}")
        return out
    raise _fail(ErrorCode.BAD_FIELD, f"{where}: {type(value).__name__} is not plain data (no pickling on the wire)")


def _check_plain(value: Any, depth: int, max_depth: int) -> None:
    """Raise bad_header unless a decoded header is plain data within `max_depth` (no ext types, no bytes)."""
    if depth > max_depth:
        raise _fail(ErrorCode.BAD_HEADER, f"header nested deeper than {max_depth}")
    if value is None or isinstance(value, bool | int | float | str):
        return
    if isinstance(value, list):
        for v in value:
            _check_plain(v, depth + 1, max_depth)
        return
    if isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str):
                raise _fail(ErrorCode.BAD_HEADER, f"header map key {k!r} is not a string")
            _check_plain(v, depth + 1, max_depth)
        return
    raise _fail(ErrorCode.BAD_HEADER, f"header holds a {type(value).__name__}; only plain data is allowed")


_REQUIRED = object()


def _fields(kind: str, meta: Any, schema: Mapping[str, tuple[Any, Any]]) -> dict[str, Any]:
    """Check a kind's field map against `schema` ({name: (type or tuple, default or _REQUIRED)})."""
    if not isinstance(meta, dict):
        raise _fail(ErrorCode.BAD_FIELD, f"{kind}: fields must be a map, got {type(meta).__name__}")
    unknown = sorted(set(meta) - set(schema))
    if unknown:
        raise _fail(ErrorCode.BAD_FIELD, f"{kind}: unknown field(s) {unknown}")
    out: dict[str, Any] = {}
    for name, (typ, default) in schema.items():
        if name not in meta:
            if default is _REQUIRED:
                raise _fail(ErrorCode.BAD_FIELD, f"{kind}: missing field '{name}'")
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
            raise _fail(ErrorCode.BAD_FIELD, f"{kind}: field '{name}' has type {type(value).__name__}")
        out[name] = value
    return out


def _nonneg(kind: str, name: str, value: int, minimum: int = 0) -> int:
    if value < minimum:
        raise _fail(ErrorCode.BAD_FIELD, f"{kind}: field '{name}'={value} must be >= {minimum}")
    return value


def _spec_from(kind: str, d: Any) -> EnvSpec:
    try:
        return EnvSpec.from_dict(d)
    except (SpecMismatchError, AttributeError) as err:
        raise _fail(ErrorCode.BAD_FIELD, f"{kind}: malformed spec ({err})") from err


def _no_arrays(kind: str, arrays: Mapping[str, np.ndarray]) -> None:
    if arrays:
        raise _fail(ErrorCode.BAD_FRAMES, f"{kind} carries no arrays, got {len(arrays)}")


# --------------------------------------------------------------------------------------------------- messages

_Steps = Sequence[Any] | np.ndarray  # per-step values: a list or an array with T rows

@dataclasses.dataclass(frozen=True, eq=False)  # holds arrays: no elementwise ==
class TransitionChunk:
    """T consecutive transitions of one episode, in the episode-file layout.

    `observations` maps slash paths (`robot_rl.specs.flatten_value`) to (T+1, ...) arrays: row t is the
    observation before step t, row t+1 the one after it. Per-step arrays have T rows. `episode` is the
    actor's episode counter, `step` the index of the chunk's first step in that episode; `stats` (plain
    scalars, e.g. return / length / success) is set on the chunk that ends an episode.

    Arrays handed to `ActorEndpoint.send` are sent without a copy: do not modify them afterwards
    (`from_steps` and `from_episode` build fresh arrays). Decoded chunks hold read-only views.
    """

    observations: Mapping[str, np.ndarray]
    actions: np.ndarray
    rewards: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    intervention: np.ndarray
    success: np.ndarray
    episode: int = 0
    step: int = 0
    stats: Mapping[str, Any] | None = None

    PER_STEP: ClassVar[tuple[str, ...]] = ("actions", "rewards", "terminated", "truncated", "intervention",
                                           "success")
    DTYPES: ClassVar[dict[str, str]] = {"rewards": "float32", "terminated": "bool", "truncated": "bool",
                                        "intervention": "bool", "success": "bool"}

    def __post_init__(self) -> None:
        self.validate()

    @property
    def length(self) -> int:
        """Number of transitions T."""
        return int(self.actions.shape[0]) if self.actions.ndim else 0

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in self.arrays().values())

    def obs(self) -> dict[str, np.ndarray]:
        """Observations before each step: (T, ...) views."""
        return {k: v[:-1] for k, v in self.observations.items()}

    def next_obs(self) -> dict[str, np.ndarray]:
        """Observations after each step: (T, ...) views (the same frames, shifted by one)."""
        return {k: v[1:] for k, v in self.observations.items()}

    def validate(self) -> None:
        """Raise `ShapeError` unless per-step arrays have T >= 1 rows (with the fixed dtypes) and observations
        T+1."""
        if self.actions.ndim < 1 or self.actions.shape[0] < 1:
            raise ShapeError(f"actions must be (T, ...) with T >= 1, got shape {self.actions.shape}")
        t = self.actions.shape[0]
        for name in self.PER_STEP[1:]:
            arr = getattr(self, name)
            if arr.shape != (t,) or arr.dtype != np.dtype(self.DTYPES[name]):
                raise ShapeError(f"{name} must be ({t},) {self.DTYPES[name]}, got {arr.shape} {arr.dtype}")
        if not self.observations:
            raise ShapeError("a transition chunk needs at least one observation key")
        for key, arr in self.observations.items():
            if arr.ndim < 1 or arr.shape[0] != t + 1:
                raise ShapeError(f"obs '{key}' must have T+1={t + 1} rows, got shape {arr.shape}")
        if self.episode < 0 or self.step < 0:
            raise ShapeError(f"episode ({self.episode}) and step ({self.step}) must be >= 0")

    def arrays(self) -> dict[str, np.ndarray]:
        """The arrays as sent: `obs/<path>` plus the per-step arrays."""
        out = {f"obs/{k}": v for k, v in self.observations.items()}
        out.update({name: getattr(self, name) for name in self.PER_STEP})
        return out

    @classmethod
    def from_episode(cls, ep: Episode, start: int = 0, stop: int | None = None, *, episode: int = 0,
                     stats: Mapping[str, Any] | None = None) -> TransitionChunk:
        """Steps [start, stop) of an episode (copies, so the chunk owns its arrays)."""
        stop = ep.length if stop is None else stop
        if not 0 <= start < stop <= ep.length:
            raise ShapeError(f"chunk [{start}, {stop}) outside episode of length {ep.length}")
        return cls(
            observations={k: np.array(v[start:stop + 1]) for k, v in ep.observations.items()},
            actions=np.array(ep.actions[start:stop]), rewards=np.array(ep.rewards[start:stop], np.float32),
            terminated=np.array(ep.terminated[start:stop], bool), truncated=np.array(ep.truncated[start:stop], bool),
            intervention=np.array(ep.intervention[start:stop], bool), success=np.array(ep.success[start:stop], bool),
            episode=episode, step=start, stats=stats,
        )

    @classmethod
    def from_steps(cls, observations: Sequence[Any], actions: _Steps, rewards: _Steps, terminated: _Steps,
                   truncated: _Steps, *, intervention: _Steps | None = None, success: _Steps | None = None,
                   episode: int = 0, step: int = 0, stats: Mapping[str, Any] | None = None) -> TransitionChunk:
        """From T+1 (nested dict) observations and T per-step values, like `Episode.from_steps`."""
        steps: dict[str, Any] = {"actions": actions, "rewards": rewards, "terminated": terminated,
                                 "truncated": truncated, "intervention": intervention, "success": success}
        ep = Episode.from_steps(observations, **steps)  # (its annotations say Sequence; arrays work too)
        return cls(observations=ep.observations, actions=ep.actions, rewards=ep.rewards,
                   terminated=ep.terminated, truncated=ep.truncated, intervention=ep.intervention,
                   success=ep.success, episode=episode, step=step, stats=stats)


def check_chunk(spec: EnvSpec, chunk: TransitionChunk) -> None:
    """Raise `ProtocolError` (spec_mismatch) naming the array unless `chunk` matches `spec`."""
    want = {s.name for s in spec.observation}
    if set(chunk.observations) != want:
        fields = sorted(set(chunk.observations) ^ want)
        raise _fail(ErrorCode.SPEC_MISMATCH, f"observation keys {sorted(chunk.observations)} != spec keys "
                                             f"{sorted(want)} (differing: {fields})")
    for s in spec.observation:
        arr = chunk.observations[s.name]
        if arr.shape[1:] != s.shape or arr.dtype != np.dtype(s.dtype):
            raise _fail(ErrorCode.SPEC_MISMATCH, f"obs '{s.name}': expected (T+1, *{s.shape}) {s.dtype}, "
                                                 f"got {arr.shape} {arr.dtype}")
    a = spec.action
    if chunk.actions.shape[1:] != a.shape or chunk.actions.dtype != np.dtype(a.dtype):
        raise _fail(ErrorCode.SPEC_MISMATCH, f"actions: expected (T, *{a.shape}) {a.dtype}, got "
                                             f"{chunk.actions.shape} {chunk.actions.dtype}")


@dataclasses.dataclass(frozen=True)
class Hello:
    """Handshake from a connecting peer. `acked` is the highest seq the actor knows was acknowledged (a
    restarted learner resumes counting from it); `session` is random per actor process."""

    KIND: ClassVar[Kind] = Kind.HELLO
    role: str
    actor_id: str
    spec: EnvSpec
    session: str = ""
    acked: int = -1

    def _meta(self) -> dict[str, Any]:
        return {"role": self.role, "actor_id": self.actor_id, "spec": self.spec.to_dict(),
                "session": self.session, "acked": self.acked}

    @classmethod
    def _build(cls, m: Any, arrays: dict[str, np.ndarray]) -> Hello:
        _no_arrays(cls.KIND, arrays)
        f = _fields(cls.KIND, m, {"role": (str, _REQUIRED), "actor_id": (str, _REQUIRED),
                                  "spec": (dict, _REQUIRED), "session": (str, ""), "acked": (int, -1)})
        return cls(f["role"], f["actor_id"], _spec_from(cls.KIND, f["spec"]), f["session"],
                   _nonneg(cls.KIND, "acked", f["acked"], -1))


@dataclasses.dataclass(frozen=True)
class HelloOk:
    """Handshake accepted. `acked`: highest contiguous seq of this actor session the learner delivered;
    `session`: random per learner instance (a new one means the learner restarted)."""

    KIND: ClassVar[Kind] = Kind.HELLO_OK
    role: str
    spec: EnvSpec
    session: str = ""
    acked: int = -1
    weights_version: int = -1
    heartbeat_s: float = 1.0
    max_message_bytes: int = DEFAULT_LIMITS.max_message_bytes

    def _meta(self) -> dict[str, Any]:
        return {"role": self.role, "spec": self.spec.to_dict(), "session": self.session, "acked": self.acked,
                "weights_version": self.weights_version, "heartbeat_s": self.heartbeat_s,
                "max_message_bytes": self.max_message_bytes}

    @classmethod
    def _build(cls, m: Any, arrays: dict[str, np.ndarray]) -> HelloOk:
        _no_arrays(cls.KIND, arrays)
        f = _fields(cls.KIND, m, {"role": (str, _REQUIRED), "spec": (dict, _REQUIRED), "session": (str, ""),
                                  "acked": (int, -1), "weights_version": (int, -1), "heartbeat_s": (float, 1.0),
                                  "max_message_bytes": (int, DEFAULT_LIMITS.max_message_bytes)})
        return cls(f["role"], _spec_from(cls.KIND, f["spec"]), f["session"],
                   _nonneg(cls.KIND, "acked", f["acked"], -1),
                   _nonneg(cls.KIND, "weights_version", f["weights_version"], -1), f["heartbeat_s"],
                   _nonneg(cls.KIND, "max_message_bytes", f["max_message_bytes"], 1))


@dataclasses.dataclass(frozen=True)
class ErrorReply:
    """An error answer: `code` (an `ErrorCode` value), a readable `message`, and `fields` naming what differs
    (for spec mismatches)."""

    KIND: ClassVar[Kind] = Kind.ERROR
    code: str
    message: str
    fields: tuple[str, ...] = ()

    def _meta(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "fields": list(self.fields)}

    @classmethod
    def _build(cls, m: Any, arrays: dict[str, np.ndarray]) -> ErrorReply:
        _no_arrays(cls.KIND, arrays)
        f = _fields(cls.KIND, m, {"code": (str, _REQUIRED), "message": (str, ""), "fields": (list, [])})
        if not all(isinstance(x, str) for x in f["fields"]):
            raise _fail(ErrorCode.BAD_FIELD, "ERROR: 'fields' must be a list of strings")
        return cls(f["code"], f["message"], tuple(f["fields"]))

    def to_exception(self, prefix: str = "peer") -> ProtocolError | SpecMismatchError:
        """The local exception for this reply: `SpecMismatchError` (with `.fields`) or `ProtocolError`."""
        text = f"{prefix} replied {self.code}: {self.message}"
        if self.code == ErrorCode.SPEC_MISMATCH:
            return SpecMismatchError(text, list(self.fields))
        return ProtocolError(text, self.code)


@dataclasses.dataclass(frozen=True, eq=False)  # holds arrays: no elementwise ==
class Transitions:
    """A chunk of transitions from `actor_id`, covering seqs [seq, seq + T)."""

    KIND: ClassVar[Kind] = Kind.TRANSITIONS
    actor_id: str
    seq: int
    chunk: TransitionChunk

    @property
    def seq_end(self) -> int:
        """One past the last seq of this message."""
        return self.seq + self.chunk.length

    def _meta(self) -> dict[str, Any]:
        c = self.chunk
        return {"actor_id": self.actor_id, "seq": self.seq, "episode": c.episode, "step": c.step,
                "stats": None if c.stats is None else to_plain(c.stats, where="stats")}

    def _arrays(self) -> dict[str, np.ndarray]:
        return self.chunk.arrays()

    @classmethod
    def _build(cls, m: Any, arrays: dict[str, np.ndarray]) -> Transitions:
        k = cls.KIND
        f = _fields(k, m, {"actor_id": (str, _REQUIRED), "seq": (int, _REQUIRED), "episode": (int, 0),
                           "step": (int, 0), "stats": ((dict, type(None)), None)})
        obs = {name[4:]: a for name, a in arrays.items() if name.startswith("obs/") and len(name) > 4}
        missing = [n for n in TransitionChunk.PER_STEP if n not in arrays]
        unknown = sorted(set(arrays) - set(TransitionChunk.PER_STEP) - {f"obs/{n}" for n in obs})
        if missing or unknown:
            raise _fail(ErrorCode.BAD_FIELD, f"{k}: missing arrays {missing}, unknown arrays {unknown}")
        try:
            chunk = TransitionChunk(observations=obs, **{n: arrays[n] for n in TransitionChunk.PER_STEP},
                                    episode=_nonneg(k, "episode", f["episode"]), step=_nonneg(k, "step", f["step"]),
                                    stats=f["stats"])
        except ShapeError as err:
            raise _fail(ErrorCode.BAD_SHAPE, f"{k}: {err}") from err
        return cls(f["actor_id"], _nonneg(k, "seq", f["seq"]), chunk)


@dataclasses.dataclass(frozen=True)
class Ack:
    """Every seq of `actor_id` up to and including `upto` was delivered to the learner (-1: none yet)."""

    KIND: ClassVar[Kind] = Kind.ACK
    actor_id: str
    upto: int

    def _meta(self) -> dict[str, Any]:
        return {"actor_id": self.actor_id, "upto": self.upto}

    @classmethod
    def _build(cls, m: Any, arrays: dict[str, np.ndarray]) -> Ack:
        _no_arrays(cls.KIND, arrays)
        f = _fields(cls.KIND, m, {"actor_id": (str, _REQUIRED), "upto": (int, _REQUIRED)})
        return cls(f["actor_id"], _nonneg(cls.KIND, "upto", f["upto"], -1))


@dataclasses.dataclass(frozen=True, eq=False)  # holds arrays: no elementwise ==
class Weights:
    """Policy weights as named numeric arrays, `version` increasing per learner instance."""

    KIND: ClassVar[Kind] = Kind.WEIGHTS
    version: int
    arrays: Mapping[str, np.ndarray]

    def _meta(self) -> dict[str, Any]:
        return {"version": self.version}

    def _arrays(self) -> Mapping[str, np.ndarray]:
        return self.arrays

    @classmethod
    def _build(cls, m: Any, arrays: dict[str, np.ndarray]) -> Weights:
        f = _fields(cls.KIND, m, {"version": (int, _REQUIRED)})
        return cls(_nonneg(cls.KIND, "version", f["version"]), arrays)


@dataclasses.dataclass(frozen=True)
class Heartbeat:
    """Liveness (both directions) with small plain `stats`; an actor reports the weights version it holds."""

    KIND: ClassVar[Kind] = Kind.HEARTBEAT
    role: str
    actor_id: str = ""
    time: float = 0.0
    weights_version: int = -1
    stats: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def _meta(self) -> dict[str, Any]:
        return {"role": self.role, "actor_id": self.actor_id, "time": self.time,
                "weights_version": self.weights_version, "stats": to_plain(self.stats, where="stats")}

    @classmethod
    def _build(cls, m: Any, arrays: dict[str, np.ndarray]) -> Heartbeat:
        _no_arrays(cls.KIND, arrays)
        f = _fields(cls.KIND, m, {"role": (str, _REQUIRED), "actor_id": (str, ""), "time": (float, 0.0),
                                  "weights_version": (int, -1), "stats": (dict, {})})
        return cls(f["role"], f["actor_id"], f["time"], _nonneg(cls.KIND, "weights_version", f["weights_version"], -1),
                   f["stats"])


@dataclasses.dataclass(frozen=True, eq=False)  # holds arrays: no elementwise ==
class RobotCall:
    """A robot-server request: `method` with plain `args` and named `arrays` (e.g. a target pose)."""

    KIND: ClassVar[Kind] = Kind.ROBOT_CALL
    call_id: int
    method: str
    args: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    arrays: Mapping[str, np.ndarray] = dataclasses.field(default_factory=dict)

    def _meta(self) -> dict[str, Any]:
        return {"call_id": self.call_id, "method": self.method, "args": to_plain(self.args, where="args")}

    def _arrays(self) -> Mapping[str, np.ndarray]:
        return self.arrays

    @classmethod
    def _build(cls, m: Any, arrays: dict[str, np.ndarray]) -> RobotCall:
        f = _fields(cls.KIND, m, {"call_id": (int, _REQUIRED), "method": (str, _REQUIRED), "args": (dict, {})})
        return cls(f["call_id"], f["method"], f["args"], arrays)


@dataclasses.dataclass(frozen=True, eq=False)  # holds arrays: no elementwise ==
class RobotReply:
    """The answer to `RobotCall` `call_id`: `ok` with plain `result` and `arrays`, or an error code/message."""

    KIND: ClassVar[Kind] = Kind.ROBOT_REPLY
    call_id: int
    ok: bool
    result: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    arrays: Mapping[str, np.ndarray] = dataclasses.field(default_factory=dict)
    error_code: str = ""
    error_message: str = ""

    def _meta(self) -> dict[str, Any]:
        return {"call_id": self.call_id, "ok": self.ok, "result": to_plain(self.result, where="result"),
                "error_code": self.error_code, "error_message": self.error_message}

    def _arrays(self) -> Mapping[str, np.ndarray]:
        return self.arrays

    @classmethod
    def _build(cls, m: Any, arrays: dict[str, np.ndarray]) -> RobotReply:
        f = _fields(cls.KIND, m, {"call_id": (int, _REQUIRED), "ok": (bool, _REQUIRED), "result": (dict, {}),
                                  "error_code": (str, ""), "error_message": (str, "")})
        return cls(f["call_id"], f["ok"], f["result"], arrays, f["error_code"], f["error_message"])


Message = Hello | HelloOk | ErrorReply | Transitions | Ack | Weights | Heartbeat | RobotCall | RobotReply
MESSAGE_TYPES: dict[str, type[Message]] = {
    cls.KIND.value: cls
    for cls in (Hello, HelloOk, ErrorReply, Transitions, Ack, Weights, Heartbeat, RobotCall, RobotReply)
}


# --------------------------------------------------------------------------------------------------- encode

Frame = bytes | memoryview


def _array_frame(name: str, arr: Any) -> tuple[list[Any], memoryview]:
    a = np.asarray(arr)
    dname = a.dtype.name
    if dname not in DTYPES:
        raise _fail(ErrorCode.BAD_DTYPE, f"array '{name}': dtype {a.dtype} is not allowed on the wire "
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
            raise _fail(ErrorCode.BAD_FIELD, f"array name {name!r} must be a non-empty string of <= "
                                             f"{limits.max_name_len} characters")
        desc, frame = _array_frame(name, arr)
        descs.append(desc)
        frames.append(frame)
    header = {"p": PROTOCOL_NAME, "v": PROTOCOL_VERSION, "k": msg.KIND.value,
              "m": to_plain(msg._meta(), max_depth=limits.max_depth, where=msg.KIND.value), "a": descs}
    frames[0] = msgpack.packb(header, use_bin_type=True)
    if len(frames) > limits.max_frames:
        raise _fail(ErrorCode.TOO_LARGE, f"{msg.KIND}: {len(frames)} frames > max_frames {limits.max_frames}")
    if len(frames[0]) > limits.max_header_bytes:
        raise _fail(ErrorCode.TOO_LARGE, f"{msg.KIND}: header {len(frames[0])} B > {limits.max_header_bytes} B")
    total = sum(len(f) if isinstance(f, bytes) else f.nbytes for f in frames)
    if total > limits.max_message_bytes:
        raise _fail(ErrorCode.TOO_LARGE, f"{msg.KIND}: {total} B > max_message_bytes {limits.max_message_bytes}")
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
        raise _fail(ErrorCode.BAD_FRAMES, "empty message")
    if len(frames) > limits.max_frames:
        raise _fail(ErrorCode.TOO_LARGE, f"{len(frames)} frames > max_frames {limits.max_frames}")
    try:
        views = [_view(f) for f in frames]
    except TypeError as err:
        raise _fail(ErrorCode.BAD_FRAMES, f"a frame is not a bytes-like object ({err})") from err
    total = sum(v.nbytes for v in views)
    if total > limits.max_message_bytes:
        raise _fail(ErrorCode.TOO_LARGE, f"message of {total} B > max_message_bytes {limits.max_message_bytes}")
    if views[0].nbytes > limits.max_header_bytes:
        raise _fail(ErrorCode.TOO_LARGE, f"header of {views[0].nbytes} B > max_header_bytes {limits.max_header_bytes}")
    try:
        header = msgpack.unpackb(views[0], raw=False, strict_map_key=True, use_list=True)
    except Exception as err:  # msgpack raises several types (ExtraData, ValueError, StackError, ...)
        raise _fail(ErrorCode.BAD_HEADER, f"header is not valid msgpack ({type(err).__name__})") from err
    if not isinstance(header, dict):
        raise _fail(ErrorCode.BAD_HEADER, f"header is a {type(header).__name__}, not a map")
    _check_plain(header, 0, limits.max_depth)
    if header.get("p") != PROTOCOL_NAME:
        raise _fail(ErrorCode.BAD_HEADER, f"not a {PROTOCOL_NAME} message (magic {header.get('p')!r})")
    return header, views


def _arrays(header: dict[str, Any], views: list[memoryview], limits: Limits) -> dict[str, np.ndarray]:
    descs = header["a"]
    if not isinstance(descs, list):
        raise _fail(ErrorCode.BAD_HEADER, "array list 'a' must be a list")
    if len(views) != 1 + len(descs):
        raise _fail(ErrorCode.BAD_FRAMES, f"header lists {len(descs)} arrays but the message has "
                                          f"{len(views) - 1} array frames")
    out: dict[str, np.ndarray] = {}
    for desc, view in zip(descs, views[1:], strict=True):
        if not (isinstance(desc, list) and len(desc) == 3 and isinstance(desc[0], str) and isinstance(desc[1], str)
                and isinstance(desc[2], list)):
            raise _fail(ErrorCode.BAD_HEADER, f"array entry {desc!r} must be [name, dtype, shape]")
        name, dname, shape = desc
        if not 0 < len(name) <= limits.max_name_len or name in out:
            raise _fail(ErrorCode.BAD_HEADER, f"array name {name[:64]!r} empty, too long or repeated")
        dtype = DTYPES.get(dname)
        if dtype is None:
            raise _fail(ErrorCode.BAD_DTYPE, f"array '{name}': dtype {dname[:32]!r} is not allowed "
                                             f"(allowed: {sorted(DTYPES)})")
        if len(shape) > limits.max_ndim or not all(
                isinstance(d, int) and not isinstance(d, bool) and 0 <= d <= limits.max_message_bytes for d in shape):
            raise _fail(ErrorCode.BAD_SHAPE, f"array '{name}': bad shape {shape[:16]!r}")
        want = math.prod(shape) * dtype.itemsize
        if want != view.nbytes:
            raise _fail(ErrorCode.BAD_SHAPE, f"array '{name}': shape {shape} {dname} needs {want} B, frame has "
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
        raise _fail(ErrorCode.BAD_VERSION, f"protocol version {version!r} is not supported (this side speaks "
                                           f"{PROTOCOL_VERSION})")
    if set(header) != _HEADER_KEYS:
        raise _fail(ErrorCode.BAD_HEADER, f"header keys {sorted(header)} != {sorted(_HEADER_KEYS)}")
    cls = MESSAGE_TYPES.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise _fail(ErrorCode.UNKNOWN_KIND, f"unknown message kind {str(kind)[:64]!r}")
    arrays = _arrays(header, views, limits)
    return cls._build(meta, arrays)


def error_frames(code: ErrorCode | str, message: str, fields: Sequence[str] = ()) -> list[Frame]:
    """Frames of an ERROR reply (message cut to 4 KiB)."""
    return encode(ErrorReply(str(code), message[:4096], tuple(fields)))
