"""robot_rl.wire: every message kind round-trips; every malformed input is refused with a typed error code."""

from __future__ import annotations

import dataclasses
import os
import pickle
import shlex
from pathlib import Path
from typing import Any

import msgpack
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from robot_rl.episodes import Episode
from robot_rl.errors import ProtocolError, ShapeError, SpecMismatchError
from robot_rl.specs import ArraySpec, EnvSpec
from robot_rl.wire import (
    DTYPES,
    PROTOCOL_VERSION,
    Ack,
    ErrorCode,
    ErrorReply,
    Heartbeat,
    Hello,
    HelloOk,
    Limits,
    RobotCall,
    RobotReply,
    TransitionChunk,
    Transitions,
    Weights,
    check_chunk,
    decode,
    encode,
)

SPEC = EnvSpec("twin-test", (ArraySpec("images/front", (16, 12, 3), "uint8"), ArraySpec("state", (5,), "float32")),
               ArraySpec("action", (4,), "float32", -1.0, 1.0), 10.0)


def make_chunk(t: int = 3, seed: int = 0, spec: EnvSpec = SPEC) -> TransitionChunk:
    rng = np.random.default_rng(seed)
    obs = [{"images": {"front": rng.integers(0, 256, spec.observation[0].shape, dtype=np.uint8)},
            "state": rng.normal(size=spec.observation[1].shape).astype(np.float32)} for _ in range(t + 1)]
    return TransitionChunk.from_steps(obs, rng.uniform(-1, 1, (t, *spec.action.shape)).astype(np.float32),
                                      rng.normal(size=t), [False] * (t - 1) + [True], [False] * t,
                                      intervention=[True] + [False] * (t - 1), episode=2, step=10,
                                      stats={"return": 1.5, "length": 13, "success": True})


def wire(frames: list[Any]) -> list[bytes]:
    """What a socket delivers: bytes per frame."""
    return [bytes(memoryview(f)) for f in frames]


def roundtrip(msg: Any, limits: Limits | None = None) -> Any:
    frames = encode(msg) if limits is None else encode(msg, limits)
    return decode(wire(frames)) if limits is None else decode(wire(frames), limits)


def header(kind: str = "HEARTBEAT", meta: Any = None, arrays: Any = None, version: Any = PROTOCOL_VERSION,
           **extra: Any) -> bytes:
    h = {"p": "robot-rl", "v": version, "k": kind, "m": {"role": "actor"} if meta is None else meta,
         "a": [] if arrays is None else arrays, **extra}
    return msgpack.packb(h, use_bin_type=True)


def assert_code(frames: list[Any], code: ErrorCode, limits: Limits | None = None) -> ProtocolError:
    with pytest.raises(ProtocolError) as info:
        decode(frames) if limits is None else decode(frames, limits)
    assert info.value.code == code, f"{info.value.code} != {code}: {info.value}"
    return info.value


# ------------------------------------------------------------------------------------------------ round trips

def test_every_kind_round_trips() -> None:
    chunk = make_chunk()
    msgs: list[Any] = [
        Hello("actor", "a0", SPEC, "s1", 7),
        HelloOk("learner", SPEC, "s2", 7, 3, 0.5, 1 << 20),
        ErrorReply("spec_mismatch", "differs", ("task", "observation/state")),
        Ack("a0", 41),
        Heartbeat("actor", "a0", 12.5, 3, {"episodes": 4, "success_rate": 0.5, "name": "x", "nested": {"a": [1]}}),
        Weights(9, {"actor/w": np.ones((3, 4), np.float32), "actor/b": np.zeros(4, np.float64),
                    "steps": np.array(5, np.int64)}),
        RobotCall(3, "command", {"gripper": 0.5, "blocking": True}, {"target_pose": np.eye(4)}),
        RobotReply(3, False, {}, {}, "robot_error", "reflex"),
        RobotReply(4, True, {"t": 1.0}, {"q": np.arange(7, dtype=np.float64)}),
    ]
    for msg in msgs:
        out = roundtrip(msg)
        assert type(out) is type(msg)
        for f in dataclasses.fields(msg):
            a, b = getattr(msg, f.name), getattr(out, f.name)
            if isinstance(a, dict) and a and isinstance(next(iter(a.values())), np.ndarray):
                assert a.keys() == b.keys()
                for k in a:
                    np.testing.assert_array_equal(a[k], b[k])
                    assert a[k].dtype == b[k].dtype and a[k].shape == b[k].shape
            else:
                assert a == b or (isinstance(a, dict) and dict(a) == dict(b)), f.name
    t = roundtrip(Transitions("a0", 100, chunk))
    assert (t.actor_id, t.seq, t.seq_end) == ("a0", 100, 103)
    c = t.chunk
    assert (c.episode, c.step, c.stats) == (2, 10, {"return": 1.5, "length": 13, "success": True})
    for name, arr in chunk.arrays().items():
        np.testing.assert_array_equal(c.arrays()[name], arr)
        assert c.arrays()[name].dtype == arr.dtype
    assert c.observations["images/front"].dtype == np.uint8 and c.observations["images/front"].shape == (4, 16, 12, 3)
    np.testing.assert_array_equal(c.next_obs()["state"], chunk.observations["state"][1:])


def test_decoded_arrays_are_read_only_views_of_the_frames() -> None:
    frames = wire(encode(Weights(1, {"w": np.arange(1000, dtype=np.float32)})))
    w = decode(frames)
    assert isinstance(w, Weights)
    arr = w.arrays["w"]
    assert not arr.flags.writeable
    assert np.shares_memory(arr, np.frombuffer(frames[1], np.uint8))  # zero-copy


def test_encode_is_zero_copy_and_normalises_layout() -> None:
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    frames = encode(Weights(1, {"a": a, "t": a.T, "be": a.astype(">f4")}))
    assert np.shares_memory(np.frombuffer(frames[1], np.uint8), a)  # contiguous: sent in place
    out = decode(wire(frames))
    assert isinstance(out, Weights)
    np.testing.assert_array_equal(out.arrays["t"], a.T)  # non-contiguous: copied once
    np.testing.assert_array_equal(out.arrays["be"], a)  # big-endian: converted, decoded as little-endian
    assert out.arrays["be"].dtype == np.dtype("<f4")


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(st.text("abcxyz/_", min_size=1, max_size=12),
                       hnp.arrays(st.sampled_from(sorted(DTYPES)).map(np.dtype),
                                  hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=5)),
                       max_size=5))
def test_arrays_of_any_whitelisted_dtype_and_shape_round_trip(arrays: dict[str, np.ndarray]) -> None:
    for msg in (Weights(3, arrays), RobotCall(1, "m", {}, arrays)):
        out = roundtrip(msg)
        assert out.arrays.keys() == arrays.keys()
        for k, a in arrays.items():
            assert out.arrays[k].dtype == a.dtype and out.arrays[k].shape == a.shape
            np.testing.assert_array_equal(out.arrays[k], a)


@settings(max_examples=30, deadline=None)
@given(t=st.integers(1, 5), h=st.integers(1, 24), w=st.integers(1, 24), cams=st.integers(1, 3),
       state_dtype=st.sampled_from(["float32", "float64"]), seed=st.integers(0, 2**16))
def test_transition_chunks_with_images_round_trip(t: int, h: int, w: int, cams: int, state_dtype: str,
                                                  seed: int) -> None:
    rng = np.random.default_rng(seed)
    obs_specs = tuple(ArraySpec(f"images/cam{i}", (h, w, 3), "uint8") for i in range(cams))
    spec = EnvSpec("x", (*obs_specs, ArraySpec("state", (7,), state_dtype)), ArraySpec("action", (7,), "float32"), 10)
    obs = [{"images": {f"cam{i}": rng.integers(0, 256, (h, w, 3), dtype=np.uint8) for i in range(cams)},
            "state": rng.normal(size=7).astype(state_dtype)} for _ in range(t + 1)]
    chunk = TransitionChunk.from_steps(obs, rng.uniform(-1, 1, (t, 7)).astype(np.float32), rng.normal(size=t),
                                       rng.random(t) < 0.5, rng.random(t) < 0.5)
    check_chunk(spec, chunk)
    out = roundtrip(Transitions("actor-7", seed, chunk))
    check_chunk(spec, out.chunk)
    for name, arr in chunk.arrays().items():
        np.testing.assert_array_equal(out.chunk.arrays()[name], arr)


def test_chunk_from_episode_and_validation() -> None:
    chunk = make_chunk(t=5)
    ep = Episode(observations=dict(chunk.observations), actions=chunk.actions, rewards=chunk.rewards,
                 terminated=chunk.terminated, truncated=chunk.truncated, intervention=chunk.intervention,
                 success=chunk.success)
    part = TransitionChunk.from_episode(ep, 1, 3, episode=4)
    assert (part.length, part.step, part.episode) == (2, 1, 4)
    np.testing.assert_array_equal(part.observations["state"], ep.observations["state"][1:4])
    assert not np.shares_memory(part.observations["state"], ep.observations["state"])
    with pytest.raises(ShapeError):
        TransitionChunk.from_episode(ep, 3, 3)
    with pytest.raises(ShapeError, match="rewards"):
        dataclasses.replace(chunk, rewards=chunk.rewards.astype(np.float64))
    with pytest.raises(ShapeError, match="T\\+1"):
        dataclasses.replace(chunk, observations={"state": chunk.observations["state"][:-1]})


def test_check_chunk_names_the_mismatching_array() -> None:
    chunk = make_chunk()
    other = EnvSpec("twin-test", (ArraySpec("images/front", (16, 16, 3), "uint8"), ArraySpec("state", (5,), "float32")),
                    SPEC.action, 10.0)
    with pytest.raises(ProtocolError, match="images/front") as info:
        check_chunk(other, chunk)
    assert info.value.code == ErrorCode.SPEC_MISMATCH
    wrong_action = EnvSpec(SPEC.task, SPEC.observation, ArraySpec("action", (7,), "float32"), 10.0)
    with pytest.raises(ProtocolError, match="actions"):
        check_chunk(wrong_action, chunk)


def test_error_reply_turns_into_typed_exceptions() -> None:
    err = ErrorReply("spec_mismatch", "differing field(s) ['task']", ("task",)).to_exception("learner")
    assert isinstance(err, SpecMismatchError) and err.fields == ["task"]
    err2 = ErrorReply("bad_version", "v2").to_exception()
    assert isinstance(err2, ProtocolError) and err2.code == "bad_version"


def test_error_from_another_protocol_version_still_decodes() -> None:
    frames = [header("ERROR", {"code": "bad_version", "message": "I speak 2", "new_field": 1}, version=2)]
    out = decode(frames)
    assert isinstance(out, ErrorReply) and out.code == "bad_version" and "I speak 2" in out.message


# ------------------------------------------------------------------------------------------------ refusals

def test_encode_refuses_what_cannot_travel() -> None:
    with pytest.raises(ProtocolError) as info:
        encode(Weights(1, {"o": np.array([object()], dtype=object)}))
    assert info.value.code == ErrorCode.BAD_DTYPE
    with pytest.raises(ProtocolError) as info:
        encode(Weights(1, {"s": np.array(["text"])}))
    assert info.value.code == ErrorCode.BAD_DTYPE
    with pytest.raises(ProtocolError) as info:
        encode(Heartbeat("actor", stats={"x": object()}))  # nothing is ever pickled
    assert info.value.code == ErrorCode.BAD_FIELD
    with pytest.raises(ProtocolError) as info:
        encode(Weights(1, {"w": np.zeros(1000, np.uint8)}), Limits(max_message_bytes=500, max_header_bytes=400))
    assert info.value.code == ErrorCode.TOO_LARGE


def _valid_transitions() -> list[bytes]:
    return wire(encode(Transitions("a0", 0, make_chunk())))


def _with_header(frames: list[bytes], edit: Any) -> list[bytes]:
    h = msgpack.unpackb(frames[0])
    edit(h)
    return [msgpack.packb(h, use_bin_type=True), *frames[1:]]


def _edit_array(frames: list[bytes], name: str, drop: bool = False, dtype: str = "") -> list[bytes]:
    """Drop array `name` (header entry and frame), or relabel it as `dtype` with a frame of matching size."""
    h = msgpack.unpackb(frames[0])
    i = [d[0] for d in h["a"]].index(name)
    body = frames[1:]
    if drop:
        del h["a"][i], body[i]
    else:
        h["a"][i][1] = dtype
        body[i] = body[i] * (np.dtype(dtype).itemsize // np.dtype(np.float32).itemsize)
    return [msgpack.packb(h, use_bin_type=True), *body]


def _nested(depth: int) -> Any:
    v: Any = 1
    for _ in range(depth):
        v = [v]
    return v


BAD_MESSAGES: dict[str, tuple[Any, ErrorCode]] = {
    "garbage": (lambda: [b"\xc1\xff\x00 not msgpack"], ErrorCode.BAD_HEADER),
    "empty message": (lambda: [], ErrorCode.BAD_FRAMES),
    "empty header": (lambda: [b""], ErrorCode.BAD_HEADER),
    "header is a list": (lambda: [msgpack.packb([1, 2])], ErrorCode.BAD_HEADER),
    "trailing bytes": (lambda: [header() + b"\x00"], ErrorCode.BAD_HEADER),
    "wrong magic": (lambda: [msgpack.packb({"p": "pickle", "v": 1, "k": "ACK", "m": {}, "a": []})],
                    ErrorCode.BAD_HEADER),
    "wrong version": (lambda: [header(version=99)], ErrorCode.BAD_VERSION),
    "version not an int": (lambda: [header(version="1")], ErrorCode.BAD_VERSION),
    "unknown kind": (lambda: [header("EXEC")], ErrorCode.UNKNOWN_KIND),
    "extra header key": (lambda: [header(x=1)], ErrorCode.BAD_HEADER),
    "ext type in header": (lambda: [msgpack.packb({"p": "robot-rl", "v": 1, "k": "ACK", "m": {},
                                                   "a": [msgpack.ExtType(1, b"x")]})], ErrorCode.BAD_HEADER),
    "bytes in header": (lambda: [header(meta={"role": b"actor"})], ErrorCode.BAD_HEADER),
    "deep nesting": (lambda: [header(meta={"role": "actor", "stats": {"x": _nested(40)}})], ErrorCode.BAD_HEADER),
    "unknown field": (lambda: [header(meta={"role": "actor", "evil": 1})], ErrorCode.BAD_FIELD),
    "missing field": (lambda: [header("ACK", meta={"actor_id": "a0"})], ErrorCode.BAD_FIELD),
    "bool for int": (lambda: [header("ACK", meta={"actor_id": "a0", "upto": True})], ErrorCode.BAD_FIELD),
    "str for int": (lambda: [header("ACK", meta={"actor_id": "a0", "upto": "3"})], ErrorCode.BAD_FIELD),
    "negative seq": (lambda: _with_header(_valid_transitions(), lambda h: h["m"].update(seq=-5)),
                     ErrorCode.BAD_FIELD),
    "missing frame": (lambda: _valid_transitions()[:-1], ErrorCode.BAD_FRAMES),
    "extra frame": (lambda: [*_valid_transitions(), b"\x00"], ErrorCode.BAD_FRAMES),
    "arrays on HELLO-less kind": (lambda: [header(arrays=[["x", "uint8", [1]]]), b"\x01"], ErrorCode.BAD_FRAMES),
    "truncated frame": (lambda: [*_valid_transitions()[:-1], _valid_transitions()[-1][:-1]], ErrorCode.BAD_SHAPE),
    "wrong shape": (lambda: _with_header(_valid_transitions(), lambda h: h["a"][0][2].__setitem__(1, 15)),
                    ErrorCode.BAD_SHAPE),
    "negative dim": (lambda: _with_header(_valid_transitions(), lambda h: h["a"][0][2].__setitem__(0, -4)),
                     ErrorCode.BAD_SHAPE),
    "huge dims": (lambda: _with_header(_valid_transitions(), lambda h: h["a"][0].__setitem__(2, [2**62, 2**62])),
                  ErrorCode.BAD_SHAPE),
    "too many dims": (lambda: _with_header(_valid_transitions(), lambda h: h["a"][0].__setitem__(2, [1] * 20)),
                      ErrorCode.BAD_SHAPE),
    "object dtype": (lambda: _with_header(_valid_transitions(), lambda h: h["a"][0].__setitem__(1, "object")),
                     ErrorCode.BAD_DTYPE),
    "numpy object code": (lambda: _with_header(_valid_transitions(), lambda h: h["a"][0].__setitem__(1, "|O")),
                          ErrorCode.BAD_DTYPE),
    "big-endian dtype": (lambda: _with_header(_valid_transitions(), lambda h: h["a"][0].__setitem__(1, ">u1")),
                         ErrorCode.BAD_DTYPE),
    "duplicate array name": (lambda: _with_header(_valid_transitions(),
                                                  lambda h: h["a"][1].__setitem__(0, h["a"][0][0])),
                             ErrorCode.BAD_HEADER),
    "array entry not a triple": (lambda: _with_header(_valid_transitions(), lambda h: h["a"].__setitem__(0, "x")),
                                 ErrorCode.BAD_HEADER),
    "missing rewards": (lambda: _edit_array(_valid_transitions(), "rewards", drop=True), ErrorCode.BAD_FIELD),
    "rewards as float64": (lambda: _edit_array(_valid_transitions(), "rewards", dtype="float64"),
                           ErrorCode.BAD_SHAPE),
    "malformed spec in HELLO": (lambda: [header("HELLO", {"role": "actor", "actor_id": "a", "spec": {"task": 1}})],
                                ErrorCode.BAD_FIELD),
    "not bytes": (lambda: [12345], ErrorCode.BAD_FRAMES),
}


@pytest.mark.parametrize("case", sorted(BAD_MESSAGES))
def test_malformed_messages_are_refused_with_a_code(case: str) -> None:
    make, code = BAD_MESSAGES[case]
    assert_code(make(), code)


def test_size_limits() -> None:
    limits = Limits(max_message_bytes=4096, max_header_bytes=256, max_frames=4)
    assert_code([b"\x80" * 300], ErrorCode.TOO_LARGE, limits)  # header over 256 B
    assert_code([header(), b"\x00" * 5000], ErrorCode.TOO_LARGE, limits)  # whole message over 4 KiB
    assert_code([header(), b"", b"", b"", b""], ErrorCode.TOO_LARGE, limits)  # 5 frames > 4
    ok = wire(encode(Weights(1, {"w": np.zeros(8, np.uint8)}), limits))
    assert isinstance(decode(ok, limits), Weights)


# ------------------------------------------------------------------------------------------------ pickle

class _Exploit:
    """A pickle payload that runs a shell command when unpickled."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return os.system, (f"touch {shlex.quote(str(self.marker))}",)


def exploit_payload(marker: Path) -> bytes:
    return pickle.dumps(_Exploit(marker))


def test_the_exploit_payload_is_live(tmp_path: Path) -> None:
    """Guard: unpickling the payload really runs code, so the refusals below prove something."""
    marker = tmp_path / "ran"
    pickle.loads(exploit_payload(marker))
    assert marker.exists()


def test_pickle_payloads_never_run(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    payload = exploit_payload(marker)
    assert_code([payload], ErrorCode.BAD_HEADER)  # as the header
    valid = _valid_transitions()
    assert_code([valid[0], payload, *valid[2:]], ErrorCode.BAD_SHAPE)  # as an array frame of the wrong size
    obj = _with_header([header("WEIGHTS", {"version": 1}, [["w", "object", [1]]]), payload], lambda h: None)
    assert_code(obj, ErrorCode.BAD_DTYPE)  # declared as an object array
    inert = decode([header("WEIGHTS", {"version": 1}, [["w", "uint8", [len(payload)]]]), payload])
    assert isinstance(inert, Weights) and inert.arrays["w"].dtype == np.uint8  # just bytes
    assert not marker.exists()
