"""Safety guard latency: the time from an external force above the limit to the guard's hold, on the twin.

Scenario (the robot server's `SafetyGuard` around a `TwinRobot`, pick-cube scene, compliance profile): the arm is
commanded 1 cm below the table top at one of three points beside the cube and pushes; the guard's force limit is 10
N. The reference run steps the same scene one physics step at a time and reads the wrist sensor after each step: the
sim time at which |F| first exceeds the limit (the twin is deterministic, so both runs follow the same trajectory
until the hold). The guarded run waits in env periods of 100 ms, as the env does; its trip time is the robot clock
of the state that tripped it (`SafetyGuard.trip_time_s`, the instant it re-targets the measured pose). Latency =
trip time - first exceed, in sim time, per guard check period: 100 ms (a check after each env period only, as the
guard did before it served wait() in slices), 10 ms (the default) and 2 ms (every physics step at 500 Hz). The first
contact with the table is a short force transient: a check every 100 ms can miss it and trip only later, on the
steady push. Cost: the median wall time of a 100 ms wait under the guard per period (the arm holding its pose,
--waits waits per period, the periods interleaved so they share the machine's load), as a ratio to the 100 ms
period.

Hardware: the same check runs on real time there; libfranka's own collision reflexes (robot-server
--collision-force / --collision-torque) act inside the robot's 1 kHz controller and stay the fastest layer.

Run: `python benchmarks/guard_latency.py`. Writes benchmarks/results/guard_latency.json.
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

LIMIT_N = 10.0
PERIODS_S = (0.1, 0.01, 0.002)
POINTS_XY_M = ((0.5, 0.15), (0.45, -0.12), (0.58, 0.05))
DEPTH_M = 0.01


def _robot() -> Any:
    from envs.twin import TwinRobot, TwinRobotConfig

    return TwinRobot(TwinRobotConfig(task="pick_cube", render=False))


def _target(robot: Any, xy: tuple[float, float]) -> tuple[np.ndarray, np.ndarray]:
    s = robot.state()
    return np.array([xy[0], xy[1], -DEPTH_M]), s.quat_base_ee


def first_exceed_s(xy: tuple[float, float], horizon_s: float = 6.0) -> float | None:
    """Sim time at which the wrist force first exceeds LIMIT_N, one physics step at a time (no guard)."""
    robot = _robot()
    try:
        robot.reset_scene(seed=0)
        pos, quat = _target(robot, xy)
        robot.command(pos, quat, 0.0)
        dt = 1.0 / robot.physics_hz
        for _ in range(int(horizon_s / dt)):
            robot.wait(dt)
            s = robot.state()
            if float(np.linalg.norm(s.force_ee_n)) > LIMIT_N:
                return float(s.time_s)
        return None
    finally:
        robot.stop()


def guarded(xy: tuple[float, float], period_s: float, horizon_s: float = 6.0) -> dict[str, Any]:
    """The guarded run: waits of 100 ms until the trip; its trip time and the wall time per wait."""
    from envs.robot_server.safety import SafetyGuard, ServerSafetyConfig

    robot = _robot()
    guard = SafetyGuard(robot, ServerSafetyConfig(max_force_n=LIMIT_N, check_period_s=period_s))
    try:
        robot.reset_scene(seed=0)
        pos, quat = _target(robot, xy)
        guard.command(pos, quat, 0.0)
        for _ in range(int(horizon_s / 0.1)):
            guard.wait(0.1)
            if guard.trip_time_s is not None:
                break
        return {"trip_time_s": guard.trip_time_s}
    finally:
        guard.stop()


def wait_cost_ms(waits: int) -> dict[float, float]:
    """Median wall ms of guard.wait(0.1) per check period, the arm holding its pose, periods interleaved."""
    from envs.robot_server.safety import SafetyGuard, ServerSafetyConfig

    guards = {p: SafetyGuard(_robot(), ServerSafetyConfig(check_period_s=p)) for p in PERIODS_S}
    walls: dict[float, list[float]] = {p: [] for p in PERIODS_S}
    try:
        for _ in range(waits):
            for p, g in guards.items():
                t0 = time.perf_counter()
                g.wait(0.1)
                walls[p].append(time.perf_counter() - t0)
        return {p: 1e3 * float(np.median(w)) for p, w in walls.items()}
    finally:
        for g in guards.values():
            g.stop()


def main() -> None:
    p = bench_parser(__doc__)
    add_out_dir(p)
    p.add_argument("--waits", type=int, default=30, help="timed 100 ms waits per check period")
    args = p.parse_args()
    rows = []
    for xy in POINTS_XY_M:
        t_x = first_exceed_s(xy)
        for period in PERIODS_S:
            g = guarded(xy, period)
            latency = None if t_x is None or g["trip_time_s"] is None else g["trip_time_s"] - t_x
            rows.append({"point_xy_m": list(xy), "check_period_s": period, "first_exceed_s": t_x, **g,
                         "latency_ms": None if latency is None else 1e3 * latency})
    print_table(f"{'point (m)':>12} {'period ms':>9} {'exceed s':>9} {'trip s':>7} {'latency ms':>10}",
                [f"{r['point_xy_m'][0]:5.2f},{r['point_xy_m'][1]:6.2f} {1e3 * r['check_period_s']:9.0f} "
                 f"{cell(r['first_exceed_s'], '9.3f')} "
                 f"{cell(r['trip_time_s'], '7.3f')} {cell(r['latency_ms'], '10.1f')}" for r in rows])
    cost_ms = wait_cost_ms(args.waits)
    cost = [{"check_period_s": p, "wait_wall_ms": ms, "ratio": ms / cost_ms[PERIODS_S[0]]} for p, ms in cost_ms.items()]
    print_table(f"{'period ms':>9} {'100 ms wait, wall ms':>20} {'x 100 ms':>8}",
                [f"{1e3 * c['check_period_s']:9.0f} {c['wait_wall_ms']:20.2f} {c['ratio']:8.2f}" for c in cost])
    out = args.out / "guard_latency.json"
    write_json(out, {"benchmark": "guard_latency", "time": timestamp(), **host_info(torch=False),
                     "load_average": load_average(), "limit_n": LIMIT_N, "rows": rows, "cost": cost,
                     "waits": args.waits,
                     "note": "sim time on the twin (deterministic); latency = trip time - first physics step above "
                             "the limit"})
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
