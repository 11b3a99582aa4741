"""The robot server: any `envs.robot.Robot` (+ `Cameras`) served over ZeroMQ, so the env sees the twin and the
hardware through the same client (`envs.remote.RemoteRobot`).

Two layers (and around them the protocol, the backends and a thread harness; see Layout below):
- `RobotServerCore` (pure, no sockets, no clocks of its own): `handle(client_id, frames) -> reply frames`
  decodes and validates one call, runs it on the backend and encodes the answer; `tick()` runs the watchdog;
  `stats()` counts calls and errors. Nothing a client sends can make it raise.
- `RobotServer`: the thin ZeroMQ adapter (one ROUTER socket, calls served one at a time in arrival order).

Protocol (every message through `robot_rl.wire`: msgpack header + raw array frames, never pickle): the client
sends `wire.RobotCall(call_id, method, args, arrays)`, the server answers `wire.RobotReply` with the same
call_id (`ok`, `result`, `arrays`, or `error_code` + `error_message`). A frame that does not decode to a
RobotCall (garbage, another protocol version, another message kind) gets a `wire.ErrorReply` with the wire's
error code. Every refusal is counted per code (`RobotServerStats.errors_by_code`); the server keeps serving.

| method | args | arrays | result / reply arrays |
|---|---|---|---|
| open | client (str, optional) | - | protocol, session, backend, task, cameras, image_shape, hold_timeout_s |
| state | - | - | time_s, gripper_width_m, error; arrays: the RobotState arrays + objects/<key> (float64) |
| command | gripper_closed (number) | pos_base_target (3,), quat_base_target (4,) | - |
| wait | duration_s (number, 0 .. max_wait_s) | - | - |
| set_gains | profile (str) | - | - |
| reset_joints | - | q_rad (7,) | - |
| reset_scene | seed (int >= 0 or None) | - | - |
| clear_errors | - | - | - |
| stop | - | - | - (holds the current pose and releases the robot for the next client) |
| read_cameras | - | - | arrays images/<camera> uint8 (H, W, 3) (sent zero-copy from the rendered frames) |
| stats | - | - | `RobotServerStats.to_dict()` |

Error codes of a failed RobotReply (`RobotErrorCode`; `envs.remote` raises the matching typed error):
safety (SafetyError: NaN/inf, out-of-range values), robot (RobotError), timeout (RobotTimeoutError from a
hardware backend), config (ConfigError, e.g. an unknown gain profile), no_cameras, not_owner, unknown_method,
bad_field / bad_shape / bad_dtype (a call's args or arrays do not match the table), internal (a backend bug,
logged with its traceback).

One client at a time: a client must call `open` first; `open` makes it the robot's owner, and the newest
`open` wins (a restarted actor takes over at once, without waiting for the old connection to time out). Calls
from any other client get `not_owner` (only `open` and `stats` are open to everyone), so two clients never
interleave commands. The remote `stop` releases ownership; the backend itself is stopped only when the server
closes.

Watchdog: when the owner has sent no `command` (or `reset_joints`) for `hold_timeout_s`, the server marks the
robot as holding (`RobotServerStats.holding`, `holds` counts the episodes of silence) and logs it. The backend
keeps its last impedance target the whole time (every backend's high-rate loop holds the last target until a
new one arrives; the twin does not even advance without `wait`), so a client that dies mid-episode leaves the
arm holding its last safe target, and the next client that calls `open` is served normally.

Security: binding a non-loopback address needs CURVE keys (`robot_rl.keys.ServerKeys`, clients authorized by
public key through a ZAP handler, `robot_rl.curve.serve_curve`; each refused key counts as an `unauthorized`
error) or `insecure=True` (`robot_rl.curve.check_address`).

Usage::

    robot = TwinRobot(TwinRobotConfig(task="pick_cube"))
    server = RobotServer(robot, robot.cameras(), RobotServerConfig(bind="tcp://127.0.0.1:5560"))
    server.serve(stop_event)          # until stop_event is set; server.close() also stops the backend

    handle = serve_in_thread(lambda: make_backend("twin", "pick_cube"))   # tests: a server on a thread
    RemoteRobot(RemoteRobotConfig(address=handle.address)).state(); handle.close()

Layout (each module says what it holds; the public names are re-exported here)::

    protocol.py     DEFAULT_ADDRESS, METHODS, RobotErrorCode, error_code_for, the state codec (used by the
                    client, envs.remote, too)
    config.py       RobotServerConfig, RobotServerStats
    core.py         RobotServerCore: the server's logic, no sockets
    zmq_server.py   RobotServer: the ZeroMQ adapter (CURVE set-up through robot_rl.curve)
    backends.py     BACKENDS, make_backend (twin; franky and ros2 imported lazily)
    thread.py       ServerThread, serve_in_thread
    run.py          the `robot-rl robot-server` process: RobotServerRunConfig, parse_robot_server_args (the command
                    line, also for checking the command lines `robot-rl sim` and launch files build),
                    run_robot_server (not re-exported here)
The command module is `envs.cli.robot_server` (`robot-rl robot-server`); nothing imports it.
"""

from envs.robot_server.backends import BACKENDS, BackendFactory, make_backend
from envs.robot_server.config import RobotServerConfig, RobotServerStats
from envs.robot_server.core import RobotServerCore
from envs.robot_server.protocol import (
    DEFAULT_ADDRESS,
    IMAGES_PREFIX,
    METHODS,
    OBJECTS_PREFIX,
    STATE_ARRAYS,
    RobotErrorCode,
    error_code_for,
    state_from_wire,
    state_to_wire,
)
from envs.robot_server.thread import ServerThread, serve_in_thread
from envs.robot_server.zmq_server import RobotServer

__all__ = [
    "BACKENDS", "DEFAULT_ADDRESS", "IMAGES_PREFIX", "METHODS", "OBJECTS_PREFIX", "STATE_ARRAYS", "BackendFactory",
    "RobotErrorCode", "RobotServer", "RobotServerConfig", "RobotServerCore", "RobotServerStats", "ServerThread",
    "error_code_for", "make_backend", "serve_in_thread", "state_from_wire", "state_to_wire",
]
