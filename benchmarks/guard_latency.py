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

ROS 2 rows (`--only ros2`, needs the `ros` extra; run with the venv's python): the message-to-hold time of the
guard over a `Ros2Robot`, against `robot-rl ros2-twin` (pick-cube, no cameras) in a process of its own, over DDS on
loopback (a ROS_DOMAIN_ID of its own, discovery on this machine only). Per trial the arm is brought 5 cm above one of
the three points and commanded 1 cm into the table (limit 10 N, compliance gains); a spy node records every wrench
message and every target_pose the server publishes. Latency from the header stamp of the first wrench message whose
|F| exceeds the limit (the twin stamps it just before publishing it) to (a) the guard's hold command (the guard's call
of Ros2Robot.command: detection) and (b) the header stamp of the first target_pose at the held pose (the hold
leaving the server: Ros2Robot.command publishes the target at once, then re-publishes it at 50 Hz). Two paths:
`listener`, the guard checking every joint-state / wrench message in the rclpy executor thread
(`add_state_listener`), and `polled`, the same guard over the robot with add_state_listener hidden (what it does for
a backend that reads its state only when asked: a check after every 10 ms slice of a wait(), here a control loop of
100 ms waits as a client's env steps). The modes alternate in blocks (`--blocks`); median and p95 over `--trials`
force trips per mode; a trial whose trip is not the force limit, or whose messages the spy missed, is counted and
left out. Wall clock on a shared machine: the load average is in the results.

Hardware: the same check runs on real time there; libfranka's own collision reflexes (robot-server
--collision-force / --collision-torque) act inside the robot's 1 kHz controller and stay the fastest layer.

Run: `python benchmarks/guard_latency.py` (`--only twin` / `--only franky-sim` / `--only ros2` re-measures one
section and keeps the others' rows from the existing file). Writes benchmarks/results/guard_latency.json.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
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


# ----------------------------------------------------------------------------------------------------------
# ROS 2: message -> hold over DDS, against `robot-rl ros2-twin` (module docstring)

ROS2_MODES = ("listener", "polled")
ROS2_ABOVE_M = 0.05
ROS2_STEP_M = 0.01
"""The approach moves its target this far per 100 ms."""
ROS2_QUAT = np.array([0.0, 1.0, 0.0, 0.0])
"""Gripper pointing down (w, x, y, z), the orientation of every approach and push."""


class _GuardedRobot:
    """The Ros2Robot the guard wraps: records the wall time (s, system clock, as ROS stamps) of every command() (the
    only commands after the push are the guard's hold), and hides add_state_listener in the polled mode."""

    def __init__(self, robot: Any, listen: bool) -> None:
        self._robot, self._listen = robot, listen
        self.command_times: list[float] = []

    @property
    def raw(self) -> Any:
        """The Ros2Robot itself (the approach moves bypass the guard)."""
        return self._robot

    def command(self, pos: Any, quat: Any, gripper: float) -> None:
        self.command_times.append(time.time())
        self._robot.command(pos, quat, gripper)

    def __getattr__(self, name: str) -> Any:
        if name == "add_state_listener" and not self._listen:
            raise AttributeError(name)
        return getattr(self._robot, name)


class _Spy:
    """A node of its own recording (stamp s, |F| N) of every wrench message and (stamp s, position) of every
    target_pose."""

    def __init__(self, iface: Any) -> None:
        from envs.ros2.logic import STATE_QOS
        from envs.ros2.runtime import RosRuntime, qos_profile, ros_messages

        geometry = ros_messages("geometry_msgs.msg")
        self.lock = threading.Lock()
        self.wrench: list[tuple[float, float]] = []
        self.targets: list[tuple[float, np.ndarray]] = []
        self.rt = RosRuntime("guard_latency_spy")
        q = qos_profile(STATE_QOS)
        self.rt.node.create_subscription(geometry.WrenchStamped, iface.topic(iface.wrench_topic), self._on_wrench, q)
        self.rt.node.create_subscription(geometry.PoseStamped, iface.topic(iface.target_pose_topic), self._on_target,
                                         q)

    @staticmethod
    def _stamp(msg: Any) -> float:
        return float(msg.header.stamp.sec) + 1e-9 * float(msg.header.stamp.nanosec)

    def _on_wrench(self, msg: Any) -> None:
        f = msg.wrench.force
        with self.lock:
            self.wrench.append((self._stamp(msg), float(np.linalg.norm([f.x, f.y, f.z]))))

    def _on_target(self, msg: Any) -> None:
        p = msg.pose.position
        with self.lock:
            self.targets.append((self._stamp(msg), np.array([p.x, p.y, p.z])))

    def clear(self) -> None:
        with self.lock:
            self.wrench.clear()
            self.targets.clear()


def _ros2_twin(tmp: Path) -> tuple[subprocess.Popen[bytes], Path]:
    """`robot-rl ros2-twin` (pick-cube, no cameras) in a process of its own; returns once it publishes."""
    log = tmp / "twin.log"
    with open(log, "w") as f:
        proc = subprocess.Popen([sys.executable, "-m", "robot_rl.cli", "ros2-twin", "--task", "twin-pick-cube",
                                 "--no-cameras", "--max-seconds", "3600"], stdout=f, stderr=subprocess.STDOUT)
    t_end = time.monotonic() + 300
    while "ros2-twin: task" not in log.read_text():
        if proc.poll() is not None or time.monotonic() > t_end:
            proc.kill()
            raise RuntimeError(f"ros2-twin did not start: {log.read_text()[-2000:]}")
        time.sleep(0.1)
    return proc, log


def _ros2_trial(guard: Any, robot: _GuardedRobot, spy: _Spy, xy: tuple[float, float]) -> dict[str, Any]:
    """One push into the table from 5 cm above `xy`: the force message, the hold call and the hold on the wire."""
    from robot_rl.errors import RobotError

    above = np.array([xy[0], xy[1], ROS2_ABOVE_M])
    cleared_trips = []
    for _ in range(5):
        # the approach goes to the backend directly (a ramp of targets): leaving the table after a trip jerks the
        # wrist above the 10 N limit; once the arm is still in free air the guard's trip is cleared
        start = robot.raw.state().pos_base_ee
        steps = max(1, int(np.ceil(np.linalg.norm(above - start) / ROS2_STEP_M)))
        for k in range(1, steps + 1):
            robot.raw.command(start + (above - start) * k / steps, ROS2_QUAT, 0.0)
            time.sleep(0.1)
        time.sleep(0.5)
        if guard.stats()["tripped"]:
            cleared_trips.append(str(guard.stats()["tripped"]))
            try:
                guard.clear_errors()
            except RobotError:
                continue
        if np.linalg.norm(robot.raw.state().pos_base_ee - above) < 0.01:
            break
    quat = ROS2_QUAT
    target = np.array([xy[0], xy[1], -DEPTH_M])
    spy.clear()
    robot.command_times.clear()
    t_push = time.time()
    try:
        guard.command(target, quat, 0.0)
    except RobotError as err:  # still stopped after the approach: no push this trial
        return {"point_xy_m": list(xy), "trip": f"before the push: {err}", "cleared_trips": cleared_trips,
                "ok": False, "detect_ms": None, "hold_out_ms": None}
    n_push = len(robot.command_times)
    t_end = time.monotonic() + 6.0
    while not guard.stats()["tripped"] and time.monotonic() < t_end:
        guard.wait(0.1)
    guard.wait(0.2)  # the hold goes out at the next stream tick; the spy receives it
    why = str(guard.stats()["tripped"])
    with spy.lock:
        wrench, targets = list(spy.wrench), list(spy.targets)
    exceed = next((t for t, f in wrench if t >= t_push and f > LIMIT_N), None)
    hold_call = robot.command_times[n_push] if len(robot.command_times) > n_push else None
    hold_pub = next((t for t, p in targets if t >= t_push and float(np.max(np.abs(p - target))) > 1e-6), None)
    row: dict[str, Any] = {"point_xy_m": list(xy), "trip": why, "cleared_trips": cleared_trips, "ok": False,
                           "detect_ms": None, "hold_out_ms": None}
    if why.startswith("external force") and exceed is not None and hold_call is not None and hold_pub is not None:
        row.update(ok=True, detect_ms=1e3 * (hold_call - exceed), hold_out_ms=1e3 * (hold_pub - exceed))
    return row


def _ros2_block(mode: str, trials: int, offset: int) -> list[dict[str, Any]]:
    """`trials` pushes through one Ros2Robot and guard in `mode` ('listener' or 'polled')."""
    from envs.robot_server.safety import SafetyGuard, ServerSafetyConfig
    from envs.ros2.config import Ros2RobotConfig
    from envs.ros2.robot import Ros2Robot

    iface = Ros2RobotConfig.for_twin(connect_timeout_s=60.0)
    spy = _Spy(iface)
    ros = Ros2Robot(iface, log=lambda line: None)
    robot = _GuardedRobot(ros, listen=mode == "listener")
    guard = SafetyGuard(robot, ServerSafetyConfig(max_force_n=LIMIT_N, clear_settle_s=3.0))
    try:
        guard.set_gains("compliance")
        return [{"mode": mode, **_ros2_trial(guard, robot, spy, POINTS_XY_M[(offset + i) % len(POINTS_XY_M)])}
                for i in range(trials)]
    finally:
        ros.stop()
        spy.rt.shutdown()


def _stats_ms(values: list[float]) -> dict[str, Any]:
    if not values:
        return {"n": 0, "median_ms": None, "p95_ms": None, "max_ms": None}
    v = np.asarray(values)
    return {"n": len(values), "median_ms": float(np.median(v)), "p95_ms": float(np.percentile(v, 95)),
            "max_ms": float(v.max())}


def ros2_part(trials: int, blocks: int) -> dict[str, Any]:
    """The ROS 2 rows: per mode, message -> hold call and message -> hold published, median / p95 (ms)."""
    from robot_rl.extras import require_extras

    require_extras(("sim", "ros"), "benchmarks/guard_latency.py --part ros2")
    with tempfile.TemporaryDirectory(prefix="guard_latency_ros2_") as tmp:
        os.environ.update({"ROS_DOMAIN_ID": str(100 + os.getpid() % 100), "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST",
                           "ROS_LOG_DIR": str(Path(tmp) / "roslog")})
        twin, _ = _ros2_twin(Path(tmp))
        trial_rows: list[dict[str, Any]] = []
        try:
            per_block = max(1, trials // blocks)
            for b in range(blocks):
                for mode in ROS2_MODES:
                    trial_rows += _ros2_block(mode, per_block, b * per_block)
        finally:
            twin.terminate()
            twin.wait(30)
    rows: list[dict[str, Any]] = []
    for mode in ROS2_MODES:
        mine = [r for r in trial_rows if r["mode"] == mode]
        good = [r for r in mine if r["ok"]]
        rows.append({"mode": mode, "trials": len(mine), "left_out": len(mine) - len(good),
                     "detect": _stats_ms([r["detect_ms"] for r in good]),
                     "hold_out": _stats_ms([r["hold_out_ms"] for r in good])})
    print_table(f"{'path':>9} {'trips':>5} {'left out':>8} {'-> hold call p50 / p95 ms':>26} "
                f"{'-> hold published p50 / p95 ms':>31}",
                [f"{r['mode']:>9} {r['trials'] - r['left_out']:5d} {r['left_out']:8d} "
                 f"{cell(r['detect']['median_ms'], '12.1f')} / {cell(r['detect']['p95_ms'], '11.1f')} "
                 f"{cell(r['hold_out']['median_ms'], '17.1f')} / {cell(r['hold_out']['p95_ms'], '11.1f')}"
                 for r in rows])
    from envs.ros2.config import Ros2RobotConfig

    return {"time": timestamp(), **host_info(torch=False), "load_average": load_average(), "limit_n": LIMIT_N,
            "stream_hz": Ros2RobotConfig.for_twin().stream_hz, "check_period_s": 0.01, "blocks": blocks,
            "rows": rows, "trials": trial_rows,
            "note": "wall clock (system time, ROS header stamps) over DDS on loopback against robot-rl ros2-twin; "
                    "from the stamp of the first wrench message above the limit"}



def main() -> None:
    p = bench_parser(__doc__)
    add_out_dir(p)
    p.add_argument("--waits", type=int, default=30, help="timed 100 ms waits per check period")
    p.add_argument("--only", choices=("twin", "franky-sim", "ros2"), default=None,
                   help="measure one section; the others' results are kept from the existing file")
    p.add_argument("--trials", type=int, default=30, help="ROS 2: force trips per path")
    p.add_argument("--blocks", type=int, default=3, help="ROS 2: the paths alternate in this many blocks")
    args = p.parse_args()
    out = args.out / "guard_latency.json"
    old = json.loads(out.read_text()) if args.only and out.exists() else {}
    twin = twin_section(args.waits) if args.only in (None, "twin") else \
        {k: old[k] for k in ("rows", "cost", "waits", "load_average", "time") if k in old}
    franky: dict[str, Any] = old.get("franky_sim", {})
    ros2 = ros2_part(args.trials, args.blocks) if args.only in (None, "ros2") else old.get("ros2", {})
    if args.only in (None, "franky-sim"):
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
                     "ros2": ros2,
                     "note": "twin: sim time (deterministic); latency = trip time - first physics step above the "
                             "limit. franky_sim: franky-sim's robot clock; latency = hold - first state above the "
                             "limit"})
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
