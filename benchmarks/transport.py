"""Actor -> learner transition throughput over loopback TCP: robot_rl.transport against the anchor's design.

Rows, each for 2 cameras at 128x128 and at 640x480 (uint8 HxWx3), 19-D float32 state, 7-D action, chunks of
`--chunk` transitions, an actor process sending for `--seconds` and then waiting for every ack:
- robot-rl:           `connect_actor` / `bind_learner` (msgpack header + raw frames, zero-copy, pipelined,
                      bounded unacked window, acks on delivery)
- robot-rl + CURVE:   the same with CURVE encryption and ZAP authentication
- pickle REQ/REP:     the anchor's design, measured in the same run: the actor pickles a dict of the batch
                      (observations AND next_observations, as the anchor stores transitions) and waits for a
                      pickled reply before sending the next (lockstep). The pickle is only this benchmark's own
                      local loopback traffic between its two processes.
The learner process only receives (and, for robot-rl, acknowledges); a replay buffer's copy is not counted.
transitions/s counts acknowledged transitions from the first send until the last ack; MB/s is the bytes each
design puts on the wire per second (1 MB = 1e6 B).

Usage: python benchmarks/transport.py [--seconds 3] [--chunk 8]
       (prints a table; writes benchmarks/results/transport.json)
"""

from __future__ import annotations

import multiprocessing as mp
import platform
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from _prelude import RESULTS, bench_parser, print_table, timestamp, write_json

from robot_rl.specs import ArraySpec, EnvSpec
from robot_rl.wire import TransitionChunk, frames_nbytes

OUT = RESULTS / "transport.json"

SIZES = {"2x128x128": (128, 128), "2x640x480": (480, 640)}


def make_spec(h: int, w: int) -> EnvSpec:
    cams = tuple(ArraySpec(f"images/{c}", (h, w, 3), "uint8") for c in ("front", "wrist"))
    return EnvSpec("bench", (*cams, ArraySpec("state", (19,), "float32")), ArraySpec("action", (7,), "float32"), 10)


def make_chunk(h: int, w: int, t: int) -> TransitionChunk:
    rng = np.random.default_rng(0)
    obs = [{"images": {c: rng.integers(0, 256, (h, w, 3), dtype=np.uint8) for c in ("front", "wrist")},
            "state": rng.normal(size=19).astype(np.float32)} for _ in range(t + 1)]
    return TransitionChunk.from_steps(obs, rng.uniform(-1, 1, (t, 7)).astype(np.float32), rng.normal(size=t),
                                      [False] * t, [False] * t)


def anchor_batch(chunk: TransitionChunk) -> dict[str, Any]:
    """The anchor's layout: per-transition observations and next_observations as separate arrays."""
    def split(obs: dict[str, np.ndarray], sl: slice) -> dict[str, Any]:
        return {"images": {k.split("/")[1]: np.ascontiguousarray(v[sl]) for k, v in obs.items() if "/" in k},
                "state": np.ascontiguousarray(obs["state"][sl])}
    return {"observations": split(dict(chunk.observations), slice(0, -1)),
            "next_observations": split(dict(chunk.observations), slice(1, None)),
            "actions": chunk.actions, "rewards": chunk.rewards, "masks": 1.0 - chunk.terminated,
            "dones": chunk.terminated | chunk.truncated}


# ------------------------------------------------------------------------------------------------ learner processes

def _robot_rl_learner(address: str, h: int, w: int, keys_dir: str | None, ready: Any, stop: Any, out: Any) -> None:
    from robot_rl.keys import ServerKeys
    from robot_rl.transport import bind_learner

    learner = bind_learner(make_spec(h, w), address, keys=ServerKeys.from_dir(keys_dir) if keys_dir else None)
    ready.set()
    n = 0
    while not stop.is_set():
        for msg in learner.recv(timeout=0.05, max_messages=256):
            n += msg.chunk.length
    stats = learner.stats()
    learner.close()
    out.put({"received": n, "duplicates": sum(a.duplicates for a in stats.actors.values()),
             "errors": stats.errors})


def _pickle_learner(address: str, ready: Any, stop: Any, out: Any) -> None:
    import zmq

    ctx = zmq.Context()
    sock = ctx.socket(zmq.REP)
    sock.bind(address)
    ready.set()
    n = 0
    while not stop.is_set():
        if sock.poll(50):
            batch = sock.recv_pyobj()  # the anchor's design; only this benchmark's own loopback traffic
            n += len(batch["rewards"])
            sock.send_pyobj({"ok": True, "received": n})
    sock.close(linger=0)
    ctx.term()
    out.put({"received": n, "duplicates": 0, "errors": 0})


# ------------------------------------------------------------------------------------------------ actor side

def _run(design: str, size: str, seconds: float, t: int, keys_dir: str | None, port: int) -> dict[str, Any]:
    h, w = SIZES[size]
    chunk = make_chunk(h, w, t)
    address = f"tcp://127.0.0.1:{port}"
    ctx = mp.get_context("spawn")
    ready, stop, out = ctx.Event(), ctx.Event(), ctx.Queue()
    if design == "pickle REQ/REP":
        proc = ctx.Process(target=_pickle_learner, args=(address, ready, stop, out))
    else:
        proc = ctx.Process(target=_robot_rl_learner, args=(address, h, w, keys_dir, ready, stop, out))
    proc.start()
    ready.wait(30)
    sent = 0
    wire_bytes = 0
    if design == "pickle REQ/REP":
        import pickle

        import zmq

        zctx = zmq.Context()
        sock = zctx.socket(zmq.REQ)
        sock.connect(address)
        batch = anchor_batch(chunk)
        per_msg = len(pickle.dumps(batch, protocol=pickle.DEFAULT_PROTOCOL))
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            sock.send_pyobj(batch)  # pickles the batch every time, as the anchor does
            sock.recv_pyobj()
            sent += t
            wire_bytes += per_msg
        elapsed = time.perf_counter() - t0
        sock.close(linger=0)
        zctx.term()
    else:
        from robot_rl.keys import ClientKeys
        from robot_rl.transport import connect_actor
        from robot_rl.wire import Transitions, encode

        per_msg = frames_nbytes(encode(Transitions("bench", 0, chunk)))
        client_keys = ClientKeys.from_dir(keys_dir) if keys_dir else None
        actor = connect_actor(make_spec(h, w), "bench", address, keys=client_keys)
        if not actor.wait_connected(30):
            raise RuntimeError(f"{design}: no handshake with the learner")
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            if actor.send(chunk, timeout=1.0):
                sent += t
                wire_bytes += per_msg
        if not actor.flush(120):
            raise RuntimeError(f"{design}: transitions still unacked after 120 s")
        elapsed = time.perf_counter() - t0
        resent = actor.stats().resent_messages
        actor.close()
    stop.set()
    learner = out.get(timeout=60)
    proc.join(30)
    row = {"design": design, "images": size, "chunk": t, "seconds": round(elapsed, 3), "transitions": sent,
           "transitions_per_s": round(sent / elapsed, 1), "MB_per_s": round(wire_bytes / elapsed / 1e6, 1),
           "bytes_per_transition": round(per_msg / t), "learner_received": learner["received"],
           "duplicates": learner["duplicates"], "learner_errors": learner["errors"]}
    if design != "pickle REQ/REP":
        row["resent_messages"] = resent
    if learner["received"] != sent:
        raise RuntimeError(f"{design} {size}: sent {sent} transitions, learner received {learner['received']}")
    return row


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main(argv: list[str] | None = None) -> int:
    parser = bench_parser(__doc__)
    parser.add_argument("--seconds", type=float, default=3.0, help="sending time per row")
    parser.add_argument("--chunk", type=int, default=8, help="transitions per message")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)

    import zmq

    from robot_rl.keys import generate_keys

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        keys_dir = str(generate_keys(Path(tmp) / "keys"))
        for size in SIZES:
            for design, keys in (("pickle REQ/REP", None), ("robot-rl", None), ("robot-rl + CURVE", keys_dir)):
                row = _run(design, size, args.seconds, args.chunk, keys, _free_port())
                rows.append(row)
                print(f"  {size:10s} {design:18s} {row['transitions_per_s']:10.1f} transitions/s "
                      f"{row['MB_per_s']:8.1f} MB/s", flush=True)

    def rate(design: str, size: str) -> float:
        return next(float(r["transitions_per_s"]) for r in rows if r["design"] == design and r["images"] == size)

    speedup = {f"{d} vs pickle REQ/REP, {s}": round(rate(d, s) / rate("pickle REQ/REP", s), 2)
               for s in SIZES for d in ("robot-rl", "robot-rl + CURVE")}
    print()
    print_table(f"{'images':10s} {'design':18s} {'transitions/s':>14s} {'MB/s':>8s} {'B/transition':>13s}",
                [f"{r['images']:10s} {r['design']:18s} {r['transitions_per_s']:14.1f} {r['MB_per_s']:8.1f} "
                 f"{r['bytes_per_transition']:13d}" for r in rows])
    print()
    for k, v in speedup.items():
        print(f"{k}: {v}x")
    result = {
        "benchmark": "transport",
        "unit": "acknowledged transitions per second; MB/s = wire bytes per second (1e6 B)",
        "params": {"seconds": args.seconds, "chunk": args.chunk, "state_dim": 19, "action_dim": 7},
        "rows": rows,
        "speedup_transitions_per_s": speedup,
        "machine": {"python": platform.python_version(), "numpy": np.__version__, "pyzmq": zmq.__version__,
                    "libzmq": zmq.zmq_version(), "cpu": platform.machine(), "cores": mp.cpu_count()},
        "when": timestamp(),
    }
    print(f"\nwrote {write_json(args.out, result, indent=2)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
