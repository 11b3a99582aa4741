"""`robot-rl record-labels`: record success / failure labelled frames for a reward classifier (HIL-SERL style).

A teleop device drives the env; every frame is labelled success or failure (`--labels`: the operator's success key,
or the task's own success condition for the scripted device), with near-miss negatives after each success and, for
the scripted device on pick-cube and cube-relocate, scripted near-miss segments (`--near-misses`). The rules, the
episode layout on disk and the near-miss routines are described in demos.recording.labels, which also holds the
options and the recording (RecordLabelsConfig, parse_record_labels_args, record_labels).

Usage::

    robot-rl record-labels --task twin-pick-cube --teleop scripted --out labels/pick --frames 600
    robot-rl record-labels --task twin-cube-relocate --teleop scripted --out labels/fwd --near-misses 2
    robot-rl record-labels --task twin-pick-cube --teleop spacemouse --device-config spacemouse.json --out labels/pick
    robot-rl record-labels --task twin-pick-cube --teleop keyboard --out labels/pick --positives 200

A two-button SpaceMouse binds no success button; `--device-config` binds one (docs/hardware.md).
"""

from __future__ import annotations

from demos.recording.labels import parse_record_labels_args, record_labels


def main(argv: list[str]) -> int:
    return record_labels(parse_record_labels_args(argv))
