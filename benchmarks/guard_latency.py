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

franky-sim (the libfranka backend, `FrankyRobot`, through franky-control against franky-sim's MuJoCo server on
loopback; tests/franky_sim_table.py adds a table and reports its push as the external wrench estimate O_F_ext_hat_K,
which plain franky-sim leaves at zero): the arm is commanded 1 cm into the table top (0.40 m) at three points, limit
10 N, by three paths: franky's force-limit reaction (the guard hands its limit to FrankyRobot.set_force_limit: held in
the control step the condition holds, inside libfranka's loop), the guard's per-state listener alone
(add_state_listener: every state of the 1 kHz loop on franky's callback thread, the hold a re-target from there), and
the 10 ms polled check alone (the env's 100 ms waits served in 10 ms slices). A recorder listener logs every state of
the tracker's loop (robot clock, |F|). Latency = the hold's robot time - the first state above the limit: the hold is
the reaction's state (franky switches to the hold motion in that step) or the robot clock when the guard's hold
command is issued. franky-sim's clock is its own 1 ms steps, which fall behind the wall clock on a loaded machine:
the real-time factor (robot time / wall time over the push) is recorded beside each row.

Hardware: the same check runs on real time there; libfranka's own collision reflexes (robot-server
--collision-force / --collision-torque) act inside the robot's 1 kHz controller and stay the fastest layer.

Run: `python benchmarks/guard_latency.py` (`--only twin` / `--only franky-sim` re-measures one section and keeps the
other's rows from the existing file). Writes benchmarks/results/guard_latency.json.
"""

from __future__ import annotations

import json
import time
from typing import Any

from _prelude import (
    ROOT,
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


FRANKY_TABLE_TOP_Z_M = 0.40
FRANKY_POINTS_XY_M = ((0.55, 0.0), (0.50, 0.10), (0.60, -0.10))
FRANKY_PATHS = ("reaction", "listener", "polled 10 ms")


class _Seen:
    """The backend as the guard sees it per path (hiding the hooks it must not use), recording the robot clock of
    every command (the last one is the guard's hold)."""

    def __init__(self, robot: Any, hide: tuple[str, ...]) -> None:
        self._robot, self._hide = robot, hide
        self.command_times_s: list[float] = []

    def __getattr__(self, name: str) -> Any:
        if name in self._hide:
            raise AttributeError(name)
        return getattr(self._robot, name)

    def command(self, pos: np.ndarray, quat: np.ndarray, gripper: float) -> None:
        self.command_times_s.append(float(self._robot.franky_robot.state.time.to_sec()))
        self._robot.command(pos, quat, gripper)


def franky_push(ip: str, path: str, xy: tuple[float, float], q_home: np.ndarray,
                horizon_s: float = 6.0) -> dict[str, Any]:
    """One push into franky-sim's table under the guard by `path`, from the joints `q_home` (franky-sim keeps the
    arm where the last client left it); the robot-clock latency from the first state above LIMIT_N to the hold."""
    from envs.hardware.franky_robot import FrankyRobot, FrankyRobotConfig
    from envs.robot_server.safety import SafetyGuard, ServerSafetyConfig

    robot = FrankyRobot(FrankyRobotConfig(robot_ip=ip, gripper=False, joint_dynamics_factor=0.5))
    robot.reset_joints(q_home)
    seen: list[tuple[float, float]] = []
    robot.add_state_listener(lambda s: seen.append((s.time_s, float(np.linalg.norm(s.force_ee_n)))))
    hide = {"reaction": (), "listener": ("set_force_limit",),
            "polled 10 ms": ("set_force_limit", "add_state_listener")}[path]
    backend = _Seen(robot, hide)
    guard = SafetyGuard(backend, ServerSafetyConfig(max_force_n=LIMIT_N, check_period_s=0.01))
    clock = robot.franky_robot.state.time
    try:
        s = guard.state()
        t0_robot, t0_wall = float(clock.to_sec()), time.monotonic()
        guard.command(np.array([xy[0], xy[1], FRANKY_TABLE_TOP_Z_M - DEPTH_M]), s.quat_base_ee, 0.0)
        while guard.trip_time_s is None and robot.franky_robot.state.time.to_sec() - t0_robot < horizon_s \
                and time.monotonic() - t0_wall < 120.0:
            if path == "polled 10 ms":
                guard.wait(0.1)  # the env's period, checked in 10 ms slices
            else:
                time.sleep(0.01)  # nothing polls the guard
        t_end = float(robot.franky_robot.state.time.to_sec())
        while robot.franky_robot.state.time.to_sec() < t_end + 0.05 and time.monotonic() - t0_wall < 130.0:
            time.sleep(0.01)  # the recorder has every state up to the trip
        wall = time.monotonic() - t0_wall
        trip = guard.trip_time_s
        above = [t for t, f in seen if f > LIMIT_N]
        first = min([*above[:1], *([trip] if trip is not None and path == "reaction" else [])], default=None)
        hold = trip if path == "reaction" else (backend.command_times_s[-1] if len(backend.command_times_s) > 1
                                                else None)
        return {"backend": "franky-sim", "path": path, "point_xy_m": list(xy), "first_exceed_s": first,
                "trip_time_s": trip, "hold_s": hold, "tripped": guard.stats()["tripped"],
                "held_by_reaction": bool(robot._held),
                "latency_ms": None if first is None or hold is None else 1e3 * (hold - first),
                "realtime_factor": (t_end - t0_robot) / wall if wall > 0 else None}
    finally:
        guard.stop()


def franky_section() -> list[dict[str, Any]] | str:
    """Rows per path and point, or why franky-sim could not run."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("franky_faults", ROOT / "tests" / "franky_faults.py")
    try:  # the tests' franky-sim launcher (tests/franky_sim_table.py through FrankySim.start)
        assert spec is not None and spec.loader is not None
        faults = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(faults)
    except (ImportError, OSError, AssertionError) as err:
        return f"tests/franky_faults.py unavailable ({err})"
    FrankySim = faults.FrankySim
    try:
        sim = FrankySim.start(table_top_z=FRANKY_TABLE_TOP_Z_M)
    except BaseException as err:  # pytest's Skipped when franky-sim or franky is missing
        if isinstance(err, KeyboardInterrupt):
            raise
        return f"franky-sim unavailable: {err}"
    try:
        from envs.hardware.franky_robot import FrankyRobot, FrankyRobotConfig

        with FrankyRobot(FrankyRobotConfig(robot_ip=sim.ip, gripper=False, control=False)) as reader:
            q_home = reader.state().q_rad  # where franky-sim starts the arm
        return [franky_push(sim.ip, path, xy, q_home) for xy in FRANKY_POINTS_XY_M for path in FRANKY_PATHS]
    finally:
        sim.close()


def twin_section(waits: int) -> dict[str, Any]:
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
    cost_ms = wait_cost_ms(waits)
    cost = [{"check_period_s": p, "wait_wall_ms": ms, "ratio": ms / cost_ms[PERIODS_S[0]]} for p, ms in cost_ms.items()]
    print_table(f"{'period ms':>9} {'100 ms wait, wall ms':>20} {'x 100 ms':>8}",
                [f"{1e3 * c['check_period_s']:9.0f} {c['wait_wall_ms']:20.2f} {c['ratio']:8.2f}" for c in cost])
    return {"rows": rows, "cost": cost, "waits": waits}


def main() -> None:
    p = bench_parser(__doc__)
    add_out_dir(p)
    p.add_argument("--waits", type=int, default=30, help="timed 100 ms waits per check period")
    p.add_argument("--only", choices=("twin", "franky-sim"), default=None,
                   help="measure one section; the other's results are kept from the existing file")
    args = p.parse_args()
    out = args.out / "guard_latency.json"
    old = json.loads(out.read_text()) if args.only and out.exists() else {}
    twin = twin_section(args.waits) if args.only != "franky-sim" else \
        {k: old[k] for k in ("rows", "cost", "waits", "load_average", "time") if k in old}
    franky: dict[str, Any] = old.get("franky_sim", {})
    if args.only != "twin":
        got = franky_section()
        if isinstance(got, str):
            print(got)
            franky = {"skipped": got}
        else:
            print_table(f"{'path':>13} {'point (m)':>12} {'exceed s':>9} {'hold s':>7} {'latency ms':>10} {'rt x':>5}",
                        [f"{r['path']:>13} {r['point_xy_m'][0]:5.2f},{r['point_xy_m'][1]:6.2f} "
                         f"{cell(r['first_exceed_s'], '9.3f')} {cell(r['hold_s'], '7.3f')} "
                         f"{cell(r['latency_ms'], '10.1f')} {cell(r['realtime_factor'], '5.2f')}" for r in got])
            franky = {"time": timestamp(), "load_average": load_average(), "table_top_z_m": FRANKY_TABLE_TOP_Z_M,
                      "rows": got}
    write_json(out, {"benchmark": "guard_latency", "time": timestamp(), **host_info(torch=False),
                     "load_average": load_average(), "limit_n": LIMIT_N, **twin, "franky_sim": franky,
                     "note": "twin: sim time (deterministic); latency = trip time - first physics step above the "
                             "limit. franky_sim: franky-sim's robot clock; latency = hold - first state above the "
                             "limit"})
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
