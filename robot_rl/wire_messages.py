"""Every message that crosses a socket (the table in robot_rl.wire): the dataclasses, their header fields and
arrays (`_meta` / `_arrays` for the encoder) and their validated construction from a decoded header (`_build`).
`TransitionChunk` is the transitions' payload in the episode-file layout; `check_chunk` checks one against a spec.

Usage::

    chunk = TransitionChunk.from_steps(observations, actions, rewards, terminated, truncated)
    msg = Transitions(actor_id="a0", seq=0, chunk=chunk)           # robot_rl.wire.encode(msg) -> frames
    MESSAGE_TYPES["ACK"]                                          # the class robot_rl.wire.decode builds
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from robot_rl.episodes import Episode
from robot_rl.errors import ProtocolError, ShapeError, SpecMismatchError
from robot_rl.specs import EnvSpec
from robot_rl.wire_schema import (
    DEFAULT_LIMITS,
    REQUIRED,
    ErrorCode,
    Kind,
    fail,
    fields,
    no_arrays,
    nonneg,
    spec_from,
    to_plain,
)

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
        raise fail(ErrorCode.SPEC_MISMATCH, f"observation keys {sorted(chunk.observations)} != spec keys "
                                             f"{sorted(want)} (differing: {fields})")
    for s in spec.observation:
        arr = chunk.observations[s.name]
        if arr.shape[1:] != s.shape or arr.dtype != np.dtype(s.dtype):
            raise fail(ErrorCode.SPEC_MISMATCH, f"obs '{s.name}': expected (T+1, *{s.shape}) {s.dtype}, "
                                                 f"got {arr.shape} {arr.dtype}")
    a = spec.action
    if chunk.actions.shape[1:] != a.shape or chunk.actions.dtype != np.dtype(a.dtype):
        raise fail(ErrorCode.SPEC_MISMATCH, f"actions: expected (T, *{a.shape}) {a.dtype}, got "
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
        no_arrays(cls.KIND, arrays)
        f = fields(cls.KIND, m, {"role": (str, REQUIRED), "actor_id": (str, REQUIRED),
                                  "spec": (dict, REQUIRED), "session": (str, ""), "acked": (int, -1)})
        return cls(f["role"], f["actor_id"], spec_from(cls.KIND, f["spec"]), f["session"],
                   nonneg(cls.KIND, "acked", f["acked"], -1))


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
        no_arrays(cls.KIND, arrays)
        f = fields(cls.KIND, m, {"role": (str, REQUIRED), "spec": (dict, REQUIRED), "session": (str, ""),
                                  "acked": (int, -1), "weights_version": (int, -1), "heartbeat_s": (float, 1.0),
                                  "max_message_bytes": (int, DEFAULT_LIMITS.max_message_bytes)})
        return cls(f["role"], spec_from(cls.KIND, f["spec"]), f["session"],
                   nonneg(cls.KIND, "acked", f["acked"], -1),
                   nonneg(cls.KIND, "weights_version", f["weights_version"], -1), f["heartbeat_s"],
                   nonneg(cls.KIND, "max_message_bytes", f["max_message_bytes"], 1))


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
        no_arrays(cls.KIND, arrays)
        f = fields(cls.KIND, m, {"code": (str, REQUIRED), "message": (str, ""), "fields": (list, [])})
        if not all(isinstance(x, str) for x in f["fields"]):
            raise fail(ErrorCode.BAD_FIELD, "ERROR: 'fields' must be a list of strings")
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
        f = fields(k, m, {"actor_id": (str, REQUIRED), "seq": (int, REQUIRED), "episode": (int, 0),
                           "step": (int, 0), "stats": ((dict, type(None)), None)})
        obs = {name[4:]: a for name, a in arrays.items() if name.startswith("obs/") and len(name) > 4}
        missing = [n for n in TransitionChunk.PER_STEP if n not in arrays]
        unknown = sorted(set(arrays) - set(TransitionChunk.PER_STEP) - {f"obs/{n}" for n in obs})
        if missing or unknown:
            raise fail(ErrorCode.BAD_FIELD, f"{k}: missing arrays {missing}, unknown arrays {unknown}")
        try:
            chunk = TransitionChunk(observations=obs, **{n: arrays[n] for n in TransitionChunk.PER_STEP},
                                    episode=nonneg(k, "episode", f["episode"]), step=nonneg(k, "step", f["step"]),
                                    stats=f["stats"])
        except ShapeError as err:
            raise fail(ErrorCode.BAD_SHAPE, f"{k}: {err}") from err
        return cls(f["actor_id"], nonneg(k, "seq", f["seq"]), chunk)


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
        no_arrays(cls.KIND, arrays)
        f = fields(cls.KIND, m, {"actor_id": (str, REQUIRED), "upto": (int, REQUIRED)})
        return cls(f["actor_id"], nonneg(cls.KIND, "upto", f["upto"], -1))


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
        f = fields(cls.KIND, m, {"version": (int, REQUIRED)})
        return cls(nonneg(cls.KIND, "version", f["version"]), arrays)


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
        no_arrays(cls.KIND, arrays)
        f = fields(cls.KIND, m, {"role": (str, REQUIRED), "actor_id": (str, ""), "time": (float, 0.0),
                                  "weights_version": (int, -1), "stats": (dict, {})})
        return cls(f["role"], f["actor_id"], f["time"], nonneg(cls.KIND, "weights_version", f["weights_version"], -1),
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
        f = fields(cls.KIND, m, {"call_id": (int, REQUIRED), "method": (str, REQUIRED), "args": (dict, {})})
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
        f = fields(cls.KIND, m, {"call_id": (int, REQUIRED), "ok": (bool, REQUIRED), "result": (dict, {}),
                                  "error_code": (str, ""), "error_message": (str, "")})
        return cls(f["call_id"], f["ok"], f["result"], arrays, f["error_code"], f["error_message"])


Message = Hello | HelloOk | ErrorReply | Transitions | Ack | Weights | Heartbeat | RobotCall | RobotReply
MESSAGE_TYPES: dict[str, type[Message]] = {
    cls.KIND.value: cls
    for cls in (Hello, HelloOk, ErrorReply, Transitions, Ack, Weights, Heartbeat, RobotCall, RobotReply)
}
