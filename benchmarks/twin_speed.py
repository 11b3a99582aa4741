"""Twin speed: env steps/s of the MuJoCo twin envs next to gym-hil's PandaPickCubeBase-v0, in the same run.

For each twin task: state-only (obs_mode="state", no renderer) and pixels (two 128x128 cameras); for gym-hil:
state (image_obs=False) and images (image_obs=True, its two 128x128 cameras, rendering settings as shipped).
Both are 10 Hz envs (gym-hil: 50 physics substeps of 2 ms; the twin: 50 of 2 ms at its default 500 Hz
physics, with the impedance controller at every substep). All envs are built first and warmed up; then, in
interleaved rounds, each runs a chunk of timed `env.step` calls with seeded uniform random actions (episode
resets untimed), so all of them see the same background load of a shared machine. Also reported: the
physics rate (physics steps per wall second inside the env), and the share of step time spent in the
controller (the twin's Cartesian impedance tick; gym-hil's op-space controller), measured by timing the
controller calls in a separate pass (the wrapper's own overhead, ~0.2 us a call, is included).

Goals: twin state-only >= 5x gym-hil state-only; twin with images >= 20x gym-hil with images (worst twin
task). Headline rates and ratios use the median step time (1 / p50), which other processes on a shared CPU
disturb least; mean-based rates and ratios are printed and saved next to them.

Run: `python benchmarks/twin_speed.py [--quick]` (gym-hil comes with the `bench` extra:
`pip install -e '.[bench]'`; without it its rows say so). Writes benchmarks/results/twin_speed.json.
One BLAS/OpenMP thread, fixed seeds.
"""

from __future__ import annotations

import os
import platform
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _prelude import RESULTS, bench_parser, cell, load_average, print_table, set_env_defaults, write_json

set_env_defaults(one_thread=True)  # before numpy: its BLAS reads the thread count when it loads

import numpy as np  # noqa: E402

GYM_HIL_ID = "gym_hil/PandaPickCubeBase-v0"
TWIN_TASKS = ("reach", "pick_cube", "peg_insert")
IMAGE_SIZE = 128


class _CallTimer:
    """Wraps a function and accumulates the wall time spent in it."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn, self.seconds, self.calls = fn, 0.0, 0

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return self.fn(*args, **kwargs)
        finally:
            self.seconds += time.perf_counter() - t0
            self.calls += 1


class Subject:
    """One benchmarked env: steps it in timed chunks (episode resets untimed) and summarises."""

    def __init__(self, name: str, obs: str, env: Any, chunk: int, physics_per_step: int, seed: int = 0) -> None:
        self.name, self.obs, self.env, self.chunk = name, obs, env, chunk
        self.physics_per_step = physics_per_step
        self.actions = np.random.default_rng(seed).uniform(-1, 1, (997, 7)).astype(np.float32)
        self.times: list[float] = []
        self.resets = 0
        self._i = 0
        t0 = time.perf_counter()
        env.reset(seed=seed)
        self.first_reset_ms = 1e3 * (time.perf_counter() - t0)

    def run(self, n: int) -> list[float]:
        """n timed steps (seeded random actions, cycled); returns their durations (s)."""
        out = []
        for _ in range(n):
            a = self.actions[self._i % len(self.actions)]
            self._i += 1
            t0 = time.perf_counter()
            _, _, terminated, truncated, _ = self.env.step(a)
            out.append(time.perf_counter() - t0)
            if terminated or truncated:
                self.env.reset()
                self.resets += 1
        return out

    def summary(self) -> dict[str, Any]:
        arr = np.asarray(self.times)
        p50 = float(np.median(arr))
        return {"env": self.name, "obs": self.obs, "steps": len(arr), "steps_per_s": float(len(arr) / arr.sum()),
                "steps_per_s_p50": 1.0 / p50, "step_ms_p50": 1e3 * p50,
                "step_ms_p99": float(1e3 * np.percentile(arr, 99)),
                "physics_steps_per_env_step": self.physics_per_step,
                "physics_steps_per_s": self.physics_per_step / p50, "resets": self.resets,
                "first_reset_ms": self.first_reset_ms}


def twin_subject(task: str, obs_mode: str, chunk: int) -> tuple[Subject, Callable[[int], dict[str, float]]]:
    """A twin env subject and its controller-share probe (a pass with the impedance tick timed)."""
    from envs.env import make_twin_env

    env = make_twin_env(task, obs_mode=obs_mode, image_size=IMAGE_SIZE, max_episode_steps=100)
    robot: Any = env.robot  # a TwinRobot (physics_hz, controller)
    subject = Subject(f"twin {task}", "state" if obs_mode == "state" else "2x128px", env, chunk,
                      round(robot.physics_hz / env.config.control_hz))

    def probe(n: int) -> dict[str, float]:
        controller = robot.controller
        timer = _CallTimer(controller.torque)
        controller.torque = timer  # TwinRobot looks it up on every wait()
        try:
            total = float(np.sum(subject.run(n)))
        finally:
            del controller.torque
        return {"controller_share": timer.seconds / total,
                "controller_us_per_tick": 1e6 * timer.seconds / max(timer.calls, 1),
                "reset_ms_mean": env.timing_stats()["reset_ms_mean"]}

    return subject, probe


def gym_hil_subject(image_obs: bool, chunk: int) -> tuple[Subject, Callable[[int], dict[str, float]]] | str:
    """gym-hil's PandaPickCubeBase-v0 subject and its op-space-controller probe, or why it is unavailable."""
    try:
        import gym_hil  # noqa: F401 - registers the ids
        import gym_hil.mujoco_gym_env as hil_env
        import gymnasium
    except ImportError as err:
        return f"gym-hil not importable ({err}); install the bench extra: pip install -e '.[bench]'"
    env = gymnasium.make(GYM_HIL_ID, image_obs=image_obs)
    base: Any = env.unwrapped
    subject = Subject("gym-hil PandaPickCube", "2x128px" if image_obs else "state", env, chunk,
                      int(base._n_substeps))

    def probe(n: int) -> dict[str, float]:
        original = hil_env.opspace
        timer = _CallTimer(original)
        hil_env.opspace = timer  # apply_action looks it up in the module on every substep
        try:
            total = float(np.sum(subject.run(n)))
        finally:
            hil_env.opspace = original
        return {"controller_share": timer.seconds / total,
                "controller_us_per_tick": 1e6 * timer.seconds / max(timer.calls, 1)}

    return subject, probe


def _add_ratios(row: dict[str, Any], ref: dict[str, Any]) -> None:
    """vs_gym_hil from median step times (robust to other processes on a shared CPU); mean-based too."""
    ok = "steps_per_s" in ref
    row["vs_gym_hil"] = row["steps_per_s_p50"] / ref["steps_per_s_p50"] if ok else None
    row["vs_gym_hil_mean"] = row["steps_per_s"] / ref["steps_per_s"] if ok else None


def main(argv: list[str] | None = None) -> int:
    parser = bench_parser(__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer rounds (a smoke run, noisier numbers)")
    parser.add_argument("--out", type=Path, default=RESULTS / "twin_speed.json", help="the result file")
    args = parser.parse_args(argv)
    rounds = 3 if args.quick else 12
    # steps per env per round, chosen so each env gets ~0.1-1 s of every round
    twin_chunk = {"state": 100, "pixels": 40}
    hil_chunk = {False: 12, True: 1}

    import mujoco

    print(f"twin speed benchmark (MuJoCo {mujoco.__version__}, MUJOCO_GL={os.environ.get('MUJOCO_GL')}, "
          f"{os.cpu_count()} CPUs, 1 BLAS thread, {rounds} interleaved rounds){' [quick]' if args.quick else ''}",
          flush=True)
    subjects: list[tuple[Subject, Callable[[int], dict[str, float]]]] = []
    missing: dict[str, str] = {}
    for image_obs in (False, True):
        made = gym_hil_subject(image_obs, hil_chunk[image_obs])
        if isinstance(made, str):
            missing["2x128px" if image_obs else "state"] = made
        else:
            subjects.append(made)
    for task in TWIN_TASKS:
        for mode in ("state", "pixels"):
            subjects.append(twin_subject(task, mode, twin_chunk[mode]))
    for subject, _ in subjects:  # warm-up (numba, caches, GL contexts)
        subject.run(max(2, subject.chunk // 2))
    # interleaved rounds: every env sees the same background load of a shared machine
    for i in range(rounds):
        for subject, _ in subjects:
            subject.times += subject.run(subject.chunk)
        print(f"  round {i + 1}/{rounds}", flush=True)

    rows: list[dict[str, Any]] = []
    for subject, probe in subjects:
        row = subject.summary()
        row.update(probe(max(2, subject.chunk * (1 if args.quick else 3))))
        rows.append(row)
        subject.env.close()
    hil = {r["obs"]: r for r in rows if r["env"].startswith("gym-hil")}
    for obs, why in missing.items():
        hil[obs] = {"env": "gym-hil PandaPickCube", "obs": obs, "error": why}
    for row in rows:
        if row["env"].startswith("twin"):
            _add_ratios(row, hil["state" if row["obs"] == "state" else "2x128px"])
    rows = [r for r in rows if r["env"].startswith("twin")] + [hil["state"], hil["2x128px"]]

    header = (f"{'env':<24}{'obs':<9}{'steps/s':>9}{'(mean)':>8}{'ms p50':>8}{'ms p99':>8}{'physics/s':>11}"
              f"{'ctrl share':>11}{'vs gym-hil':>11}{'(mean)':>8}")
    print()
    print_table(header, [f"{r['env']:<24}{r['obs']:<9}  {r['error']}" if "error" in r else
                         f"{r['env']:<24}{r['obs']:<9}{r['steps_per_s_p50']:>9.1f}{r['steps_per_s']:>8.1f}"
                         f"{r['step_ms_p50']:>8.2f}{r['step_ms_p99']:>8.2f}{r['physics_steps_per_s']:>11.0f}"
                         f"{r['controller_share']:>10.0%} {cell(r.get('vs_gym_hil'), '>9.1f'):>10}"
                         f"{cell(r.get('vs_gym_hil_mean'), '>8.1f')}" for r in rows])
    print("steps/s = 1 / median step time; (mean) = steps / total step time; ratios likewise; "
          "physics/s = physics steps per wall second (from the median)")

    twin_state = [r for r in rows if r["env"].startswith("twin") and r["obs"] == "state"]
    twin_pix = [r for r in rows if r["env"].startswith("twin") and r["obs"] != "state"]
    goals: dict[str, Any] = {"state_min_ratio_goal": 5.0, "images_min_ratio_goal": 20.0}
    if not missing:
        goals["state_min_ratio"] = min(r["vs_gym_hil"] for r in twin_state)
        goals["images_min_ratio"] = min(r["vs_gym_hil"] for r in twin_pix)
        goals["state_min_ratio_mean"] = min(r["vs_gym_hil_mean"] for r in twin_state)
        goals["images_min_ratio_mean"] = min(r["vs_gym_hil_mean"] for r in twin_pix)
        goals["state_goal_met"] = goals["state_min_ratio"] >= 5.0
        goals["images_goal_met"] = goals["images_min_ratio"] >= 20.0
        print(f"\nratios vs gym-hil: state-only {goals['state_min_ratio']:.1f}x (goal >= 5x: "
              f"{'met' if goals['state_goal_met'] else 'NOT met'}), with images {goals['images_min_ratio']:.1f}x "
              f"(goal >= 20x: {'met' if goals['images_goal_met'] else 'NOT met'}) [worst twin task]")
    else:
        print("\nratios vs gym-hil: not measured (gym-hil not importable)")

    result = {
        "benchmark": "twin_speed",
        "quick": args.quick,
        "rounds": rounds,
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": {"platform": platform.platform(), "python": platform.python_version(), "cpus": os.cpu_count(),
                    "loadavg_at_end": load_average(), "mujoco": mujoco.__version__,
                    "mujoco_gl": os.environ.get("MUJOCO_GL"), "blas_threads": os.environ.get("OMP_NUM_THREADS")},
        "method": "seeded uniform random actions; warm-up, then rounds in which every env runs a chunk of timed "
                  "env.step calls (resets excluded), so all see the same background load; "
                  "steps_per_s_p50 = 1/median step time (headline and ratios: robust to other processes on a "
                  "shared CPU), steps_per_s = steps/total time; physics_steps_per_s from the median; controller "
                  "share from a second pass with the controller calls wrapped in a timer",
        "goals": goals,
        "rows": rows,
    }
    print(f"wrote {write_json(args.out, result, indent=2)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
