"""Faithful timing: what the twin's simulated camera latency and action delay cost per env step, and what they do
to the scripted expert.

Cost: median and mean wall time of one `env.step` on twin pick-cube, pixels (two cameras at --image-size) and state
(no renderer), with the timing off and on (camera latency / action delay: the faithful defaults, 100 / 20 ms, and
140 / 20 ms, a latency that is not a whole number of 100 ms periods, so frames are rendered inside the period). All
envs are built first, then step in interleaved timed chunks of seeded random actions (resets untimed), so they share
the machine's background load.

Expert: the scripted expert (envs.twin.experts; it acts on the measured arm and object state, never on the camera
frames, so the camera latency cannot touch it: this row measures the action delay) on pick-cube and peg-insert,
state mode, --episodes seeded episodes per delay: success rate and mean episode length with the action delay at 0,
20 (the faithful default), 50 and 100 ms.

Run: `python benchmarks/faithful_timing.py [--quick]`. Writes benchmarks/results/faithful_timing.json. One BLAS
thread, fixed seeds.
"""

from __future__ import annotations

import time
from typing import Any

from _prelude import (
    add_out_dir,
    bench_parser,
    cell,
    host_info,
    load_average,
    print_table,
    set_env_defaults,
    timestamp,
    write_json,
)

set_env_defaults(one_thread=True)

import numpy as np  # noqa: E402

TIMINGS: dict[str, dict[str, Any]] = {
    "off": {}, "100/20 ms (faithful)": {"camera_latency_ms": 100.0, "action_delay_ms": 20.0},
    "140/20 ms": {"camera_latency_ms": 140.0, "action_delay_ms": 20.0}}
DELAYS_MS = (0.0, 20.0, 50.0, 100.0)


def step_cost(obs_mode: str, image_size: int, steps: int, chunk: int) -> list[dict[str, Any]]:
    from envs.env import make_twin_env

    envs = {name: make_twin_env("pick_cube", obs_mode=obs_mode, image_size=image_size, **kw)
            for name, kw in TIMINGS.items()}
    rng = np.random.default_rng(0)
    times: dict[str, list[float]] = {name: [] for name in envs}
    for env in envs.values():
        env.reset(seed=0)
        for _ in range(5):  # warm-up (renderer, caches)
            env.step(rng.uniform(-1, 1, 7).astype(np.float32))
    while min(len(t) for t in times.values()) < steps:
        for name, env in envs.items():
            for _ in range(chunk):
                a = rng.uniform(-1, 1, 7).astype(np.float32)
                t0 = time.perf_counter()
                _, _, term, trunc, _ = env.step(a)
                times[name].append(time.perf_counter() - t0)
                if term or trunc:
                    env.reset()
    rows = []
    base = float(np.median(times["off"]))
    for name, env in envs.items():
        t = 1e3 * np.asarray(times[name])
        rows.append({"obs_mode": obs_mode, "image_size": image_size if obs_mode == "pixels" else None,
                     "timing": name, **TIMINGS[name], "steps": len(t), "step_ms_p50": float(np.median(t)),
                     "step_ms_mean": float(t.mean()), "ratio_p50": float(np.median(t)) / (1e3 * base)})
        env.close()
    return rows


def expert_rows(task: str, episodes: int) -> list[dict[str, Any]]:
    from envs.env import make_twin_env
    from envs.twin.experts import ScriptedExpert, run_episode

    rows = []
    for delay in DELAYS_MS:
        env = make_twin_env(task, obs_mode="state", action_delay_ms=delay)
        expert = ScriptedExpert(task)
        eps = [run_episode(env, expert, seed=1000 + i) for i in range(episodes)]
        env.close()
        rows.append({"task": task, "action_delay_ms": delay, "episodes": episodes,
                     "success_rate": float(np.mean([e["success"] for e in eps])),
                     "steps_mean": float(np.mean([e["steps"] for e in eps])),
                     "steps_success_mean": float(np.mean([e["steps"] for e in eps if e["success"]] or [np.nan]))})
    return rows


def main() -> None:
    p = bench_parser(__doc__)
    add_out_dir(p)
    p.add_argument("--quick", action="store_true", help="fewer steps and episodes (a smoke run)")
    p.add_argument("--image-size", type=int, default=64, help="camera image size of the pixels rows")
    p.add_argument("--episodes", type=int, default=20, help="expert episodes per task and delay")
    args = p.parse_args()
    steps, episodes = (60, 3) if args.quick else (600, args.episodes)
    cost = step_cost("pixels", args.image_size, steps, 20) + step_cost("state", args.image_size, steps, 20)
    print_table(f"{'obs':7} {'timing':22} {'p50 ms':>8} {'mean ms':>8} {'x off':>6}",
                [f"{r['obs_mode']:7} {r['timing']:22} {cell(r['step_ms_p50'], '8.2f')} "
                 f"{cell(r['step_ms_mean'], '8.2f')} {cell(r['ratio_p50'], '6.2f')}" for r in cost])
    expert = expert_rows("pick_cube", episodes) + expert_rows("peg_insert", episodes)
    print_table(f"{'task':11} {'delay ms':>8} {'success':>8} {'steps':>6} {'steps|ok':>8}",
                [f"{r['task']:11} {r['action_delay_ms']:8.0f} {cell(r['success_rate'], '8.2f')} "
                 f"{cell(r['steps_mean'], '6.1f')} {cell(r['steps_success_mean'], '8.1f')}" for r in expert])
    out = args.out / ("faithful_timing_quick.json" if args.quick else "faithful_timing.json")
    write_json(out, {"benchmark": "faithful_timing", "time": timestamp(), **host_info(torch=False),
                     "load_average": load_average(), "quick": args.quick, "step_cost": cost, "expert": expert,
                     "note": "the scripted expert acts on the measured state: camera latency cannot affect it"})
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
