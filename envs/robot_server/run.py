"""The `robot-rl robot-server` process: its options (`RobotServerRunConfig`, one field per command-line flag, parsed
by `parse_robot_server_args`: `robot-rl sim` and the launch files build these command lines, and tests parse them
the same way) and `run_robot_server`: build the backend (envs.robot_server.backends.make_backend, behind the safety
guard), serve it until Ctrl-C / SIGTERM / `max_seconds`, print the counters every `stats_every` seconds.

Ctrl-C or SIGTERM first e-stops the robot (at once, even during a long call: franky's motion is preempted), then
stops the server and the backend (it holds its pose).

Usage::

    cfg = parse_robot_server_args(["--backend", "twin", "--task", "twin-reach", "--bind", "tcp://127.0.0.1:0"])
    run_robot_server(cfg.replace(max_seconds=5.0))     # 0; prints "robot-server: serving ... on tcp://HOST:PORT"
"""

from __future__ import annotations

import argparse
import dataclasses
import signal
import sys
import threading
import time
from collections.abc import Sequence
from types import FrameType
from typing import Any

from envs.robot_server.backends import BACKENDS, make_backend
from envs.robot_server.config import RobotServerConfig
from envs.robot_server.protocol import DEFAULT_ADDRESS
from envs.robot_server.zmq_server import RobotServer
from robot_rl.config import Config, require


@dataclasses.dataclass(frozen=True)
class RobotServerRunConfig(Config):
    """The options of `robot-rl robot-server` (the field names are the flags' dests; see the parser for help)."""

    backend: str = "twin"
    task: str = "twin-pick-cube"
    bind: str = DEFAULT_ADDRESS
    image_size: int | None = None
    cameras: str | None = None
    no_cameras: bool = False
    task_config: str | None = None
    robot_ip: str | None = None
    camera: tuple[str, ...] = ()
    camera_exposure: float | None = None
    realtime: bool = False
    max_force: float | None = None
    max_torque: float | None = None
    arm: str = "auto"
    collision_torque: tuple[float, ...] | None = None
    collision_force: tuple[float, ...] | None = None
    physics_hz: float | None = None
    hold_timeout: float = 1.0
    max_wait: float = 10.0
    keys: str | None = None
    insecure: bool = False
    stats_every: float = 10.0
    max_seconds: float | None = None
    ros_profile: str = "crisp"
    ros_namespace: str = ""
    ros_twin: bool = False
    ros_camera: tuple[str, ...] = ()
    ros_set: tuple[str, ...] = ()
    allow_twin_box: bool = False

    def validate(self) -> None:
        require(self.backend in BACKENDS, "backend", self.backend, f"must be one of {list(BACKENDS)}")

    @property
    def camera_names(self) -> tuple[str, ...]:
        """`cameras` split at commas (not given: front,wrist; the ros2 backend takes a task file's cameras then)."""
        return tuple(n.strip() for n in (self.cameras or "front,wrist").split(",") if n.strip())

    def server_config(self) -> RobotServerConfig:
        return RobotServerConfig(bind=self.bind, insecure=self.insecure, hold_timeout_s=self.hold_timeout,
                                 max_wait_s=self.max_wait)


def robot_server_arg_parser() -> argparse.ArgumentParser:
    """The `robot-rl robot-server` command line (one flag per `RobotServerRunConfig` field)."""
    parser = argparse.ArgumentParser(prog="robot-rl robot-server", description="`robot-rl robot-server`: serve a "
                                     "robot backend (the MuJoCo twin, a Franka through franky, or a ROS 2\ncontroller) "
                                     "over ZeroMQ.")
    parser.add_argument("--backend", default="twin", choices=BACKENDS, help="robot backend to serve")
    parser.add_argument("--task", default="twin-pick-cube",
                        help="a preset (twin-reach, ...), a twin task (pick_cube) or a task file (.toml: the lab's "
                             "box, cameras, ...; robot-rl task init); a hardware backend needs a box from the lab")
    parser.add_argument("--bind", default=DEFAULT_ADDRESS, help="ZeroMQ address (port 0: a free port)")
    parser.add_argument("--image-size", type=int, default=None,
                        help="camera image height and width (default: the task file's observation.image_size, "
                             "else 128)")
    parser.add_argument("--cameras", default=None,
                        help="comma-separated camera names (default front,wrist; ros2: the task file's cameras)")
    parser.add_argument("--no-cameras", action="store_true", help="serve no images (state-only; no renderer)")
    parser.add_argument("--task-config", default=None,
                        help="deprecated: a task file or safety-box record's JSON, the same as --task FILE (wins over "
                             "--task)")
    parser.add_argument("--allow-twin-box", action="store_true",
                        help="hardware: serve without a box recorded in the lab, inside the task's twin box (at your "
                             "own risk; record one: robot-rl safety-box record)")
    parser.add_argument("--robot-ip", default=None, help="franky: the robot's FCI address (e.g. 172.16.0.2)")
    parser.add_argument("--camera", action="append", default=[], metavar="SPEC",
                        help="franky: a real camera, KIND:ID=NAME (realsense:SERIAL=front, opencv:/dev/video0=wrist); "
                             "repeat for several")
    parser.add_argument("--camera-exposure", type=float, default=None,
                        help="franky: fixed exposure of the real cameras in us (auto-exposure off; 0 or unset: auto)")
    parser.add_argument("--realtime", action="store_true",
                        help="franky: require a realtime kernel (libfranka RealtimeConfig.Enforce)")
    parser.add_argument("--max-force", type=float, default=None,
                        help="safety: stop and hold above this external force (N; default 60)")
    parser.add_argument("--max-torque", type=float, default=None,
                        help="safety: stop and hold above this external torque (Nm; default 20)")
    parser.add_argument("--arm", default="auto", choices=("auto", "panda", "fr3", "any"),
                        help="safety: whose joint limits the guard enforces (auto: the backend's arm: the twin is a "
                             "Panda, franky's follows its libfranka (>= 0.10: FR3), ROS 2's its joint names; any: the "
                             "tighter limits of both)")
    parser.add_argument("--collision-torque", type=float, nargs=7, default=None, metavar="NM",
                        help="franky: libfranka's joint collision thresholds (7 values, Nm), set at connect")
    parser.add_argument("--collision-force", type=float, nargs=6, default=None, metavar="N",
                        help="franky: libfranka's Cartesian collision thresholds (fx fy fz N, tx ty tz Nm), set at "
                             "connect; give both or neither")
    parser.add_argument("--physics-hz", type=float, default=None, help="twin physics rate (default: the twin's)")
    parser.add_argument("--hold-timeout", type=float, default=1.0,
                        help="seconds without a command before the watchdog reports holding the last target")
    parser.add_argument("--max-wait", type=float, default=10.0, help="longest wait() one call may ask for (s)")
    parser.add_argument("--keys", default=None, help="CURVE key directory (robot_rl.keys) for non-loopback binds")
    parser.add_argument("--insecure", action="store_true", help="allow a non-loopback bind without keys")
    parser.add_argument("--stats-every", type=float, default=10.0, help="print counters every N s (0: never)")
    parser.add_argument("--max-seconds", type=float, default=None, help="exit after this long (default: never)")
    ros = parser.add_argument_group("ros2 backend")
    ros.add_argument("--ros-profile", default="crisp", choices=("crisp", "fzi"),
                     help="controller interface: CRISP's cartesian_impedance_controller or FZI's compliance controller")
    ros.add_argument("--ros-namespace", default="", help="ROS namespace of the controller's topics")
    ros.add_argument("--ros-twin", action="store_true",
                     help="the controller is `robot-rl ros2-twin` (privileged objects, scene resets, topic gripper)")
    ros.add_argument("--ros-camera", action="append", default=[], metavar="NAME=TOPIC",
                     help="image topic of a camera (default camera/NAME/image_raw); repeatable")
    ros.add_argument("--ros-set", action="append", default=[], metavar="FIELD=VALUE",
                     help="any envs.ros2.config.Ros2RobotConfig field (e.g. gripper=topic, stream_hz=100); repeatable")
    return parser


def parse_robot_server_args(argv: Sequence[str]) -> RobotServerRunConfig:
    """`robot-rl robot-server`'s arguments as a config (argparse's usage error and exit on bad flags, also for
    franky's options given to another backend)."""
    parser = robot_server_arg_parser()
    args = vars(parser.parse_args(list(argv)))
    if args["backend"] != "franky" and (args["robot_ip"] or args["camera"] or args["realtime"]
                                        or args["camera_exposure"] or args["collision_torque"]
                                        or args["collision_force"]):
        parser.error("--robot-ip, --camera, --camera-exposure, --realtime and --collision-torque / --collision-force "
                     "are options of --backend franky")
    if (args["collision_torque"] is None) != (args["collision_force"] is None):
        parser.error("--collision-torque and --collision-force go together (libfranka sets both at once)")
    for name in ("collision_torque", "collision_force"):
        if args[name] is not None:
            args[name] = tuple(args[name])
    for name in ("camera", "ros_camera", "ros_set"):
        args[name] = tuple(args[name])
    return RobotServerRunConfig(**args)


def run_robot_server(cfg: RobotServerRunConfig) -> int:
    """Serve until Ctrl-C / SIGTERM (which e-stop first) or `max_seconds`; returns the exit code."""
    config = cfg.server_config()
    keys = None
    if cfg.keys is not None:
        from robot_rl.keys import ServerKeys

        keys = ServerKeys.from_dir(cfg.keys)
    from robot_rl.curve import check_address

    check_address(config.bind, keys, config.insecure)  # before building the backend: fail fast
    robot, cameras, info = _backend(cfg)
    try:
        server = RobotServer(robot, cameras, config, keys, info)
    except BaseException:
        robot.stop()
        raise
    _serve(cfg, server, info, cameras)
    return 0


def _backend(cfg: RobotServerRunConfig) -> tuple[Any, Any, dict[str, Any]]:
    """(robot, cameras, info) of `cfg.backend` behind the safety guard, with the task config's box if given."""
    from envs.robot_server.safety import ServerSafetyConfig

    limits: dict[str, Any] = {k: v for k, v in (("max_force_n", cfg.max_force), ("max_torque_nm", cfg.max_torque))
                              if v is not None}
    limits["arm"] = cfg.arm
    franky: dict[str, Any] = {"realtime": True} if cfg.realtime else {}
    from envs.task_file import camera_configs, require_lab_box, resolve_task, task_file_of

    task_arg = task_argument(cfg)
    if cfg.backend == "franky" or (cfg.backend == "ros2" and not cfg.ros_twin):  # a real arm: the lab's box only
        require_lab_box(cfg.backend, task_arg, cfg.allow_twin_box)
    task = resolve_task(task_arg)
    tf = task_file_of(task_arg)
    names, ros2 = ros2_options(cfg, tf) if cfg.backend == "ros2" else (cfg.camera_names, None)
    specs: tuple[Any, ...] = cfg.camera
    if cfg.backend == "franky" and not specs and tf is not None and tf.own.get("cameras"):  # the lab's cameras
        from envs.hardware.camera_source import CameraConfig

        specs = tuple(CameraConfig(**c) for c in camera_configs(tf, image_size(cfg)))
    if task.collision_torque_nm is not None or task.collision_force_n is not None:  # the cell's thresholds
        franky.update(collision_torque_nm=task.collision_torque_nm, collision_force_n=task.collision_force_n)
    if cfg.collision_torque is not None:  # the flags win
        franky.update(collision_torque_nm=cfg.collision_torque, collision_force_n=cfg.collision_force)
    return make_backend(cfg.backend, task, image_size=image_size(cfg), camera_names=names,
                        cameras=not cfg.no_cameras, physics_hz=cfg.physics_hz, ros2=ros2, robot_ip=cfg.robot_ip,
                        camera_specs=specs, franky_options=franky or None,
                        safety=ServerSafetyConfig(**limits),
                        camera_options={"exposure_us": cfg.camera_exposure or None})


def ros2_options(cfg: RobotServerRunConfig, tf: Any) -> tuple[tuple[str, ...], Any]:
    """(camera names, envs.ros2.backend.Ros2BackendOptions) of the ros2 backend: the --ros-* flags, with the task
    file's (`tf`, None: none) cameras as image topics below the --cameras / --ros-camera flags."""
    from envs.ros2.backend import Ros2BackendOptions, file_cameras

    in_file = file_cameras(tf) if tf is not None else ()
    names = tuple(c.name for c in in_file) if cfg.cameras is None and in_file else cfg.camera_names
    return names, Ros2BackendOptions(profile=cfg.ros_profile, namespace=cfg.ros_namespace, twin=cfg.ros_twin,
                                     camera_topics=cfg.ros_camera, settings=cfg.ros_set, file_cameras=in_file)


def task_argument(cfg: RobotServerRunConfig) -> str:
    """The task the server serves: `--task-config FILE` (deprecated, with a note on stderr) or `--task`."""
    if cfg.task_config is None:
        return cfg.task
    print(f"robot-server: --task-config is deprecated: pass --task {cfg.task_config} (it wins over --task "
          f"{cfg.task})", file=sys.stderr, flush=True)
    return cfg.task_config


def image_size(cfg: RobotServerRunConfig) -> int:
    """`--image-size`, else the task file's observation.image_size, else 128."""
    if cfg.image_size is not None:
        return cfg.image_size
    from envs.task_file import task_file_of

    tf = task_file_of(cfg.task_config or cfg.task)
    return int(tf.value("observation", "image_size", 128)) if tf is not None else 128


def _serve(cfg: RobotServerRunConfig, server: RobotServer, info: dict[str, Any], cameras: Any) -> None:
    """The serving loop with the signal handlers (e-stop, then stop) and the periodic counters line."""
    stop = threading.Event()

    def _on_signal(signum: int, frame: FrameType | None) -> None:
        if not stop.is_set():
            server.estop()  # motion stops now (thread-safe, does not wait for a running call)
            print(f"robot-server: {signal.Signals(signum).name}: e-stopped, shutting down", file=sys.stderr,
                  flush=True)
        stop.set()

    previous = signal.signal(signal.SIGTERM, _on_signal)
    previous_int = signal.signal(signal.SIGINT, _on_signal)
    size = image_size(cfg)
    cams = (f"cameras {','.join(cameras.names)} {size}x{size}" if cameras is not None
            else "no cameras")
    print(f"robot-server: serving {info['backend']} (task {info['task']}, {cams}) on {server.address} "
          f"(one client at a time; Ctrl-C to stop)", flush=True)
    last_print = time.monotonic()

    def _report() -> None:
        nonlocal last_print
        if cfg.stats_every > 0 and time.monotonic() - last_print >= cfg.stats_every:
            last_print = time.monotonic()
            s = server.stats()
            print(f"robot-server: {s.calls} calls, {s.errors} errors {s.errors_by_code}, owner {s.owner or '-'}, "
                  f"holding {s.holding} (holds {s.holds}), clients {s.clients}", flush=True)

    try:
        server.serve(stop, max_seconds=cfg.max_seconds, on_idle=_report)
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        signal.signal(signal.SIGINT, previous_int)
        s = server.stats()
        server.close()
        print(f"robot-server: stopped after {s.uptime_s:.1f} s; {s.calls} calls, {s.errors} errors", file=sys.stderr,
              flush=True)
