"""record-demos and record-labels against a robot server (`--robot ADDR`), as on hardware: here a twin robot
server on a thread, driven by the scripted teleop."""

from __future__ import annotations

from pathlib import Path

from demos.recording.demos import parse_record_demos_args, record_demos
from demos.recording.labels import parse_record_labels_args, record_labels
from envs.robot_server import make_backend, serve_in_thread
from robot_rl.episodes import load_dir


def test_record_demos_and_labels_on_a_robot_server(tmp_path: Path) -> None:
    server = serve_in_thread(lambda: make_backend("twin", "twin-reach", cameras=False))
    try:
        rc = record_demos(parse_record_demos_args(["--task", "twin-reach", "--teleop", "scripted", "--episodes", "1",
                                                   "--obs-mode", "state", "--robot", server.address,
                                                   "--out", str(tmp_path / "demos")]))
        assert rc == 0
        [ep], errors = load_dir(tmp_path / "demos")
        assert not errors and ep.is_success and ep.intervention.all() and "object" in ep.observations
        assert server.stats().calls > ep.length  # the episode ran through the server
        rc = record_labels(parse_record_labels_args(["--task", "twin-reach", "--teleop", "scripted", "--frames", "20",
                                                     "--obs-mode", "state", "--robot", server.address,
                                                     "--out", str(tmp_path / "labels")]))
        assert rc == 0
        labels, errors = load_dir(tmp_path / "labels")
        assert not errors and sum(e.length for e in labels) >= 20
        assert any(e.success.any() for e in labels) and any((~e.success).any() for e in labels)
    finally:
        server.close()
