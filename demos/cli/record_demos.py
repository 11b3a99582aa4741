"""`robot-rl record-demos`: record teleoperated (or scripted) demonstration episodes to a directory.

Each finished episode is written at once (atomically) in the episode format of robot_rl.episodes, so Ctrl-C
never loses a finished episode; recording appends to an existing directory. Failed episodes are dropped
unless --keep-failures.

Usage::

    robot-rl record-demos --task twin-reach --teleop scripted --episodes 20 --out demos/reach
    robot-rl record-demos --task twin-cube-relocate --obs-mode state --cube-start tray --out demos/fwd_tray

The options and the recording live in demos.recording.demos (RecordDemosConfig, parse_record_demos_args,
record_demos).

`--cube-start tray` (twin cube-relocate tasks): each episode's cube starts anywhere on the tray floor outside the
target zone instead of in the start zone, i.e. demos from the scenes a reset-free forward/backward run leaves
behind (a failed episode drops the cube wherever it is).
"""

from __future__ import annotations

from demos.recording.demos import parse_record_demos_args, record_demos


def main(argv: list[str]) -> int:
    return record_demos(parse_record_demos_args(argv))
