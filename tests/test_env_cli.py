"""`robot-rl tasks` and `robot-rl demo` (the demo writes a real PNG strip and a summary)."""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

import pytest

from robot_rl.cli import main

os.environ.setdefault("MUJOCO_GL", "egl")


def test_tasks_lists_the_presets(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tasks"]) == 0
    out = capsys.readouterr().out
    for name in ("twin-reach", "twin-pick-cube", "twin-peg-insert", "robot_rl/TwinPickCube-v0"):
        assert name in out
    assert main(["tasks", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {r["name"] for r in rows} == {"twin-reach", "twin-pick-cube", "twin-peg-insert", "twin-cube-relocate",
                                         "twin-cube-relocate-back"}


def test_demo_unknown_task_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--task", "twin-nope"]) == 1  # --task also takes a task file: no fixed choices
    err = capsys.readouterr().err
    assert "unknown task 'twin-nope'" in err and "twin-pick-cube" in err and "Traceback" not in err


def test_demo_writes_strip_and_summary(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("mujoco")
    out = tmp_path / "demo"
    assert main(["demo", "--task", "twin-pick-cube", "--episodes", "2", "--out", str(out), "--image-size", "48",
                 "--frames", "4"]) == 0
    printed = capsys.readouterr().out
    assert "episode 2/2" in printed and "success rate 2/2" in printed
    png = (out / "strip.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", png[16:24])
    pad = 2
    assert width == 4 * 2 * (48 + pad) + pad  # 4 moments x 2 cameras
    assert height == 2 * (48 + pad) + pad  # 2 episodes
    summary = json.loads((out / "summary.json").read_text())
    assert summary["successes"] == 2 and summary["success_rate"] == 1.0
    assert summary["cameras"] == ["front", "wrist"] and len(summary["per_episode"]) == 2
