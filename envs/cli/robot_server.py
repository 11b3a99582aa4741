"""`robot-rl robot-server`: serve a robot backend (the MuJoCo twin, a Franka through franky, or a ROS 2
controller) over ZeroMQ.

One client at a time (the newest `open` wins; see envs.robot_server). Prints the bound address on its first
line ("robot-server: serving ... on tcp://HOST:PORT"), then, every `--stats-every` seconds, the call and error
counters. Every backend is served behind the safety guard (envs.robot_server.safety: the task's box, the wrench
limit `--max-force`/`--max-torque`, joint margins, the e-stop). Ctrl-C or SIGTERM first e-stops the robot (at
once, even during a long call: franky's motion is preempted), then stops the server and the backend (it holds
its pose); `robot-rl estop ADDR` e-stops it from anywhere.

The options and the run live in envs.robot_server.run (RobotServerRunConfig, parse_robot_server_args,
run_robot_server).

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

from envs.robot_server.run import parse_robot_server_args, run_robot_server


def main(argv: list[str]) -> int:
    return run_robot_server(parse_robot_server_args(argv))
