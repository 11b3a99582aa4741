"""Atomic checkpoints (npz + JSON, no pickle) and the metrics log / learning-curve plot."""

from __future__ import annotations

import numpy as np
import pytest

from robot_rl.checkpoint import CheckpointError, latest_checkpoint, load_checkpoint, save_checkpoint
from robot_rl.metrics import MetricsLog, plot_learning_curve, read_metrics


def test_checkpoint_round_trip_and_latest(tmp_path) -> None:
    root = tmp_path / "ck"
    assert latest_checkpoint(root) is None
    a = {"w": np.arange(6, dtype=np.float32).reshape(2, 3), "rng": np.array([1, 2, 3], np.uint8)}
    save_checkpoint(root, 100, {"agent": a}, {"env_step": 100, "rng": {"state": 2**100}})
    p = save_checkpoint(root, 200, {"agent": {k: v + 1 for k, v in a.items()}}, {"env_step": 200})
    assert latest_checkpoint(root) == p
    groups, meta = load_checkpoint(p)
    np.testing.assert_array_equal(groups["agent"]["w"], a["w"] + 1)
    assert meta["env_step"] == 200 and meta["step"] == 200
    save_checkpoint(root, 300, {"agent": a}, {})
    assert sorted(x.name for x in root.glob("ckpt_*")) == ["ckpt_00000200", "ckpt_00000300"]  # keep=2


def test_half_written_checkpoint_is_ignored(tmp_path) -> None:
    root = tmp_path / "ck"
    good = save_checkpoint(root, 1, {"agent": {"w": np.ones(3)}}, {})
    # a crash mid-write leaves a temp dir and no LATEST update: the good one is still the latest
    (root / ".tmp_ckpt_00000002_1").mkdir()
    (root / ".tmp_ckpt_00000002_1" / "agent.npz").write_bytes(b"partial")
    assert latest_checkpoint(root) == good
    (good / "agent.npz").write_bytes(b"corrupt")
    with pytest.raises(CheckpointError, match=r"agent\.npz"):
        load_checkpoint(good)


def test_metrics_log_skips_torn_lines_and_plots(tmp_path) -> None:
    log = MetricsLog(tmp_path / "m.jsonl")
    for i in range(5):
        log.write({"env_step": i * 100, "success_rate": i / 4, "return": float("nan") if i == 2 else i})
    with open(tmp_path / "m.jsonl", "a") as f:
        f.write('{"env_step": 500, "succ')  # torn by a crash
    rows = read_metrics(tmp_path / "m.jsonl")
    assert [r["env_step"] for r in rows] == [0, 100, 200, 300, 400] and rows[2]["return"] is None
    png = plot_learning_curve(rows, tmp_path / "curve.png", title="t")
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000
