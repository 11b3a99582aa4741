"""`robot-rl robot-server`: serve a robot backend (the MuJoCo twin, a Franka through franky, or a ROS 2
controller) over ZeroMQ.

One client at a time (the newest `open` wins; see envs.robot_server). Prints the bound address on its first
line ("robot-server: serving ... on tcp://HOST:PORT"), then, every `--stats-every` seconds, the call and error
counters. Every backend is served behind the safety guard (envs.robot_server.safety: the task's box, the wrench
limit `--max-force`/`--max-torque`, joint margins, the e-stop). Ctrl-C or SIGTERM first e-stops the robot (at
once, even during a long call: franky's motion is preempted), then stops the server and the backend (it holds
its pose); `robot-rl estop ADDR` e-stops it from anywhere.

Usage::

    robot-rl robot-server --backend twin --task twin-pick-cube                 # tcp://127.0.0.1:5560
    robot-rl robot-server --task reach --bind tcp://127.0.0.1:0 --no-cameras   # a free port, state only
    robot-rl robot-server --task twin-peg-insert --bind tcp://0.0.0.0:5560 --keys keys/   # CURVE
    robot-rl robot-server --backend ros2 --task twin-pick-cube --ros-twin     # over DDS to `robot-rl ros2-twin`
    robot-rl robot-server --backend ros2 --task T --ros-camera front=/cam_front/color/image_raw   # a CRISP arm
    robot-rl robot-server --backend franky --robot-ip 172.16.0.2 --task pick_cube \
        --camera realsense:123456789012=front --camera opencv:/dev/video0=wrist    # a real Franka + cameras
    # the client side: envs.remote.make_remote_env("tcp://127.0.0.1:5560", obs_mode="pixels")
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time
from types import FrameType
from typing import Any

from envs.robot_server import BACKENDS, DEFAULT_ADDRESS, RobotServer, RobotServerConfig, make_backend


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="robot-rl robot-server", description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", default="twin", choices=BACKENDS, help="robot backend to serve")
    parser.add_argument("--task", default="twin-pick-cube", help="task or twin preset (e.g. twin-reach, pick_cube)")
    parser.add_argument("--bind", default=DEFAULT_ADDRESS, help="ZeroMQ address (port 0: a free port)")
    parser.add_argument("--image-size", type=int, default=128, help="camera image height and width")
    parser.add_argument("--cameras", default="front,wrist", help="comma-separated camera names")
    parser.add_argument("--no-cameras", action="store_true", help="serve no images (state-only; no renderer)")
    parser.add_argument("--task-config", default=None,
                        help="a task config file (robot-rl safety-box record): its box is enforced server-side")
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


def main(argv: list[str]) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)

    config = RobotServerConfig(bind=args.bind, insecure=args.insecure, hold_timeout_s=args.hold_timeout,
                               max_wait_s=args.max_wait)
    keys = None
    if args.keys is not None:
        from robot_rl.keys import ServerKeys

        keys = ServerKeys.from_dir(args.keys)
    from robot_rl.curve import check_address

    check_address(config.bind, keys, config.insecure)  # before building the backend: fail fast
    names = tuple(n.strip() for n in args.cameras.split(",") if n.strip())
    if args.backend != "franky" and (args.robot_ip or args.camera or args.realtime or args.camera_exposure):
        parser.error("--robot-ip, --camera, --camera-exposure and --realtime are options of --backend franky")
    from envs.robot_server.safety import ServerSafetyConfig

    ros2 = None
    if args.backend == "ros2":
        from envs.ros2.backend import Ros2BackendOptions

        ros2 = Ros2BackendOptions(profile=args.ros_profile, namespace=args.ros_namespace, twin=args.ros_twin,
                                  camera_topics=tuple(args.ros_camera), settings=tuple(args.ros_set))
    limits = {k: v for k, v in (("max_force_n", args.max_force), ("max_torque_nm", args.max_torque)) if v is not None}
    task: Any = args.task
    if args.task_config is not None:
        from envs.hardware.safety_box import load_task_config

        task = load_task_config(args.task_config)
    robot, cameras, info = make_backend(args.backend, task, image_size=args.image_size, camera_names=names,
                                        cameras=not args.no_cameras, physics_hz=args.physics_hz, ros2=ros2,
                                        robot_ip=args.robot_ip, camera_specs=args.camera,
                                        franky_options={"realtime": True} if args.realtime else None,
                                        safety=ServerSafetyConfig(**limits),
                                        camera_options={"exposure_us": args.camera_exposure or None})
    try:
        server = RobotServer(robot, cameras, config, keys, info)
    except BaseException:
        robot.stop()
        raise
    stop = threading.Event()

    def _on_signal(signum: int, frame: FrameType | None) -> None:
        if not stop.is_set():
            server.estop()  # motion stops now (thread-safe, does not wait for a running call)
            print(f"robot-server: {signal.Signals(signum).name}: e-stopped, shutting down", file=sys.stderr,
                  flush=True)
        stop.set()

    previous = signal.signal(signal.SIGTERM, _on_signal)
    previous_int = signal.signal(signal.SIGINT, _on_signal)
    cams = (f"cameras {','.join(cameras.names)} {args.image_size}x{args.image_size}" if cameras is not None
            else "no cameras")
    print(f"robot-server: serving {info['backend']} (task {info['task']}, {cams}) on {server.address} "
          f"(one client at a time; Ctrl-C to stop)", flush=True)
    last_print = time.monotonic()

    def _report() -> None:
        nonlocal last_print
        if args.stats_every > 0 and time.monotonic() - last_print >= args.stats_every:
            last_print = time.monotonic()
            s = server.stats()
            print(f"robot-server: {s.calls} calls, {s.errors} errors {s.errors_by_code}, owner {s.owner or '-'}, "
                  f"holding {s.holding} (holds {s.holds}), clients {s.clients}", flush=True)

    try:
        server.serve(stop, max_seconds=args.max_seconds, on_idle=_report)
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        signal.signal(signal.SIGINT, previous_int)
        s = server.stats()
        server.close()
        print(f"robot-server: stopped after {s.uptime_s:.1f} s; {s.calls} calls, {s.errors} errors", file=sys.stderr,
              flush=True)
    return 0
