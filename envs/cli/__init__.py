"""The env-side commands (`robot-rl tasks`, `demo`, `estop`, `robot-server`, `check-hardware`, `safety-box`,
`cameras`, `ros2-twin`). Command modules only parse arguments, build a config and call one function; nothing
imports them but `robot_rl.cli`. The command lines of robot-server and ros2-twin (which `robot-rl sim` and launch
files build) are parsed by their libraries (envs.robot_server.run.parse_robot_server_args,
envs.ros2.twin_run.parse_ros2_twin_args), so tests can check them without a command module.
"""
