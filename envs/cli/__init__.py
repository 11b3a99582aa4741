"""The env-side commands (`robot-rl tasks`, `demo`, `estop`, `robot-server`, `check-hardware`, `safety-box`,
`cameras`, `ros2-twin`). Command modules only parse arguments, build a config and call one function; nothing
imports them but `robot_rl.cli`.
"""
