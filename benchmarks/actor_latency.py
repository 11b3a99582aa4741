"""The actor's per-step cost at 10 Hz and the weight broadcast latency, over loopback ZeroMQ.

An actor (actors.actor.Actor, this process) steps a static env at 10 Hz, real time, for `--seconds` per row and
streams transitions (one chunk per 100-step episode) to a learner endpoint in a second process, which
acknowledges them and publishes fresh policy weights every `--publish-every` seconds (the trainable state of a
real learners.agents.sac agent, plus the config / publish-time entries the learner adds). Per control step the actor
times:
- policy: `policy.act(obs)` (torch, 1 thread, CPU);
- rest:   everything else the actor does around the env step: the weight swap (a pointer exchange; weights are
          loaded into a spare policy by a background thread), copying the step into the chunk arrays, building
          and queueing the chunk at episode ends (encode + hand-off to the I/O thread), stats reports.
The env step itself is excluded (it is the robot's time). Rows: state observations (19 + 7 floats) and
2 cameras 128x128 (uint8) + 19-D state with the pixel agent of `robot-rl learner` (a small conv encoder).
Goal: rest p99 < 2 ms.

Broadcast latency, per published version: publish (learner process, wall clock) -> weights loaded and ready in
the actor ("ready") -> the control loop acting with them ("used": includes waiting for the next 10 Hz step, up
to 100 ms).

Usage: python benchmarks/actor_latency.py [--seconds 30] [--publish-every 0.5] [--nice -10]
       (prints a table; writes benchmarks/results/actor_latency.json, or actor_latency_nice<N>.json with --nice)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from _prelude import RESULTS, bench_parser, cell, load_average, print_table, timestamp, write_json

from robot_rl.specs import ArraySpec, EnvSpec

OUT = RESULTS / "actor_latency.json"


def make_spec(pixels: bool) -> EnvSpec:
    obs = [ArraySpec("state", (19,), "float32")]
    if pixels:
        obs = [ArraySpec(f"images/{c}", (128, 128, 3), "uint8") for c in ("front", "wrist")] + obs
    else:
        obs = [ArraySpec("object", (7,), "float32"), *obs]
    return EnvSpec("bench", tuple(obs), ArraySpec("action", (7,), "float32", -1.0, 1.0), 10.0)


def agent_config(pixels: bool) -> Any:
    from learners.agents.config import rlpd_state_config
    # the learner's pixel / state machine defaults when these results were measured (before learners.agents.options
    # made train's device defaults the learner's too); kept so the figures stay reproducible
    PIXEL_DEFAULTS = {"encoder": "conv", "batch_size": 64, "critic_updates_per_actor_update": 1}
    STATE_DEFAULTS = {"critic_updates_per_actor_update": 1, "hidden_dims": (128, 128), "batch_size": 128}

    return rlpd_state_config(device="cpu", **(PIXEL_DEFAULTS if pixels else STATE_DEFAULTS))


class StaticEnv:
    """Returns fresh random observations of the spec; 100-step episodes; no physics (its time is not counted)."""

    def __init__(self, spec: EnvSpec, length: int = 100) -> None:
        rng = np.random.default_rng(0)
        self.frames = [self._obs(spec, rng) for _ in range(4)]
        self.length, self.t = length, 0

    @staticmethod
    def _obs(spec: EnvSpec, rng: np.random.Generator) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for s in spec.observation:
            v = rng.integers(0, 256, s.shape, dtype=np.uint8) if s.is_image else rng.normal(size=s.shape).astype(
                np.float32)
            node = out
            parts = s.name.split("/")
            for p in parts[:-1]:
                node = node.setdefault(p, {})
            node[parts[-1]] = v
        return out

    def reset(self, seed: int | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
        self.t = 0
        return self.frames[0], {}

    def step(self, action: np.ndarray) -> tuple[dict[str, Any], float, bool, bool, dict[str, Any]]:
        self.t += 1
        return self.frames[self.t % 4], 0.0, False, self.t >= self.length, {"success": False}

    def close(self) -> None:
        pass


def learner_role(config_path: str, address_file: str) -> None:
    """The learner process: bind, acknowledge transitions, publish weights periodically until stdin closes."""
    import threading

    import torch

    torch.set_num_threads(1)
    from learners.agents.config import AgentConfig
    from learners.agents.sac import SACAgent
    from learners.distributed.learner import CONFIG_ARRAY, PUBLISHED_AT_ARRAY, config_bytes
    from robot_rl.transport import bind_learner

    cfg = json.loads(Path(config_path).read_text())
    spec = EnvSpec.from_dict(cfg["spec"])
    agent_cfg = AgentConfig.from_dict(cfg["agent"])
    agent = SACAgent(spec, agent_cfg)
    base = agent.trainable_state()
    endpoint = bind_learner(spec, "tcp://127.0.0.1:0")
    Path(address_file).write_text(endpoint.address)
    stop = threading.Event()
    def wait_for_stdin_close() -> None:
        sys.stdin.read()
        stop.set()

    threading.Thread(target=wait_for_stdin_close, daemon=True).start()
    version, next_pub, received = 0, time.monotonic() + cfg["publish_every"], 0
    while not stop.is_set():
        for msg in endpoint.recv(timeout=0.01):
            received += msg.chunk.length
        if time.monotonic() >= next_pub:
            next_pub += cfg["publish_every"]
            version += 1
            arrays = {k: v + np.float32(1e-6 * version) for k, v in base.items()}  # fresh values each time
            arrays[CONFIG_ARRAY] = config_bytes(agent_cfg)
            arrays[PUBLISHED_AT_ARRAY] = np.array([time.time()], np.float64)
            endpoint.publish_weights(version, arrays)
    endpoint.close()
    print(json.dumps({"received": received, "published": version}), flush=True)


def pct(values: Any, q: float) -> float | None:
    arr = np.asarray(list(values), np.float64)
    return float(np.percentile(arr, q) * 1000.0) if arr.size else None


def run_row(pixels: bool, seconds: float, publish_every: float, hz: float) -> dict[str, Any]:
    import torch

    torch.set_num_threads(1)
    from actors.actor import Actor, ActorConfig
    from robot_rl.transport import connect_actor

    spec = make_spec(pixels)
    cfg = {"spec": spec.to_dict(), "agent": agent_config(pixels).to_dict(), "publish_every": publish_every}
    with tempfile.TemporaryDirectory() as tmp:
        cfg_path, addr_path = Path(tmp) / "cfg.json", Path(tmp) / "addr"
        cfg_path.write_text(json.dumps(cfg))
        env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
        learner_nice = os.getpriority(os.PRIO_PROCESS, 0)
        proc = subprocess.Popen([sys.executable, __file__, "--role", "learner", "--config", str(cfg_path),
                                 "--address-file", str(addr_path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                env=env, preexec_fn=(lambda: os.nice(-learner_nice)) if learner_nice < 0 else None)
        try:
            deadline = time.monotonic() + 120
            while not addr_path.exists() or not addr_path.read_text():
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("the learner process did not start")
                time.sleep(0.05)
            endpoint = connect_actor(spec, "bench", addr_path.read_text())
            endpoint.wait_connected(30.0)
            actor = Actor(StaticEnv(spec), endpoint, ActorConfig(chunk_steps=100, pace=False))
            actor.start()
            # warm-up: until the first weights are in use (policy builds, torch warms up), then reset the timings
            t_end = time.monotonic() + 300
            while actor.weights_version < 0 and time.monotonic() < t_end:
                actor.step()
                time.sleep(1.0 / hz)
            if actor.weights_version < 0:
                raise RuntimeError("no weights from the learner process within 300 s: nothing to measure")
            for _ in range(20):
                actor.step()
            for d in (actor.policy_s, actor.rest_s, actor.env_s, actor.swap.latencies_s,
                      actor.swap.ready_latencies_s):
                d.clear()
            actor.policy_s = type(actor.policy_s)(maxlen=1_000_000)
            actor.rest_s = type(actor.rest_s)(maxlen=1_000_000)
            period = 1.0 / hz
            n = int(seconds * hz)
            t_next = time.monotonic()
            v0 = actor.weights_version
            for _ in range(n):
                actor.step()
                t_next += period
                time.sleep(max(0.0, t_next - time.monotonic()))
            versions_used = actor.weights_version - v0
            flushed = actor.close(flush_s=10.0)
            endpoint.close()
        finally:
            out, _ = proc.communicate(timeout=30)  # closing its stdin stops the learner process
    learner = json.loads(out.decode().strip().splitlines()[-1]) if out.strip() else {}
    rest, policy = actor.rest_s, actor.policy_s
    return {
        "obs": "2x128x128 + state" if pixels else "state (26 floats)",
        "steps": n, "hz": hz, "encoder": agent_config(pixels).encoder if pixels else None,
        "policy_ms_p50": pct(policy, 50), "policy_ms_p99": pct(policy, 99),
        "rest_ms_p50": pct(rest, 50), "rest_ms_p99": pct(rest, 99), "rest_ms_max": pct(rest, 100),
        "weights_versions_used": versions_used, "weights_ready_ms_p50": pct(actor.swap.ready_latencies_s, 50),
        "weights_ready_ms_p99": pct(actor.swap.ready_latencies_s, 99),
        "weights_used_ms_p50": pct(actor.swap.latencies_s, 50),
        "weights_used_ms_p99": pct(actor.swap.latencies_s, 99),
        "weights_samples": len(actor.swap.latencies_s), "weights_bytes": None,
        "all_acked": flushed, "learner": learner, "rest_goal_met": (pct(rest, 99) or 1e9) < 2.0,
    }


def main() -> None:
    p = bench_parser(__doc__)
    p.add_argument("--seconds", type=float, default=30.0, help="measured seconds per row")
    p.add_argument("--publish-every", type=float, default=0.5, help="learner publish period (s)")
    p.add_argument("--hz", type=float, default=10.0, help="control rate")
    p.add_argument("--rows", default="state,pixels", help="comma-separated: state, pixels")
    p.add_argument("--nice", type=int, default=0,
                   help="change the actor process's nice value first (e.g. -10, as a robot host would run its "
                        "control loop; negative values need privileges); the learner process keeps the default")
    p.add_argument("--role", default="actor", help=argparse.SUPPRESS)
    p.add_argument("--config", default="", help=argparse.SUPPRESS)
    p.add_argument("--address-file", default="", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.role == "learner":
        learner_role(args.config, args.address_file)
        return
    if args.nice:
        os.nice(args.nice)
    rows = [run_row(r.strip() == "pixels", args.seconds, args.publish_every, args.hz)
            for r in args.rows.split(",") if r.strip()]
    for r in rows:
        r["actor_nice"] = os.getpriority(os.PRIO_PROCESS, 0)

    def ms(x: float | None) -> str:
        return cell(x, ".2f")

    print_table(f"{'obs':<20} {'policy p50/p99 ms':>18} {'rest p50/p99 ms':>16} {'weights ready p50/p99':>22} "
                f"{'used p50/p99 ms':>16}",
                [f"{r['obs']:<20} {ms(r['policy_ms_p50']):>8}/{ms(r['policy_ms_p99']):<9} "
                 f"{ms(r['rest_ms_p50']):>7}/{ms(r['rest_ms_p99']):<8} "
                 f"{ms(r['weights_ready_ms_p50']):>10}/{ms(r['weights_ready_ms_p99']):<11} "
                 f"{ms(r['weights_used_ms_p50']):>7}/{ms(r['weights_used_ms_p99']):<8}" for r in rows])
    result = {"benchmark": "actor_latency", "time": timestamp(),
              "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "loadavg": load_average()},
              "method": __doc__.split("\n\n")[1] if __doc__ else "", "seconds": args.seconds,
              "publish_every_s": args.publish_every, "goal": "rest p99 < 2 ms", "rows": rows}
    out = OUT if not args.nice else OUT.with_name(f"actor_latency_nice{args.nice}.json")
    print(f"wrote {write_json(out, result)}")


if __name__ == "__main__":
    main()
