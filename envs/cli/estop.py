"""`robot-rl estop ADDR`: stop a robot server's robot now.

Sends the server's `estop` call (any client may; no ownership, no handshake). The server answers it on its I/O
thread at once, even in the middle of a long call: the safety guard latches (every later command is refused until
the server restarts) and the backend's motion stops (franky: robot.stop() preempts the running motion and the arm
holds its joints; the twin holds its pose). Ctrl-C or SIGTERM on the robot server itself does the same and then
stops the server. The hardware e-stop button stays the primary stop on a real arm.

Usage::

    robot-rl estop tcp://127.0.0.1:5560
    robot-rl estop tcp://10.0.0.5:5560 --keys keys/      # a CURVE-protected server
"""

from __future__ import annotations

import argparse

from envs.remote import send_estop


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="robot-rl estop", description=__doc__.split("\n\n")[0])
    parser.add_argument("address", help="the robot server's address (tcp://HOST:PORT)")
    parser.add_argument("--keys", default=None, help="CURVE client key directory for a non-loopback server")
    parser.add_argument("--insecure", action="store_true", help="a non-loopback server without keys")
    parser.add_argument("--timeout", type=float, default=1.0, help="seconds to wait for the acknowledgement")
    args = parser.parse_args(argv)
    return send_estop(args.address, args.keys, insecure=args.insecure, timeout_s=args.timeout)
