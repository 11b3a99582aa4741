"""`robot-rl train`: run directory handling, metrics, checkpoints, and resume as one run."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from learners import train_cli
from robot_rl.checkpoint import latest_checkpoint, load_checkpoint
from robot_rl.errors import ConfigError
from robot_rl.metrics import read_metrics

TINY = ["--env-id", "Pendulum-v1", "--algo", "sac", "--hidden", "32", "--batch-size", "32", "--utd", "1",
        "--learning-starts", "100", "--start-steps", "100", "--eval-every", "200", "--eval-episodes", "2",
        "--checkpoint-every", "200", "--replay-capacity", "1000"]


def _agent_state(run_dir: Path) -> dict[str, np.ndarray]:
    ckpt = latest_checkpoint(run_dir / "checkpoints")
    assert ckpt is not None
    groups, meta = load_checkpoint(ckpt)
    return {**{f"agent/{k}": v for k, v in groups["agent"].items()},
            **{f"online/{k}": v for k, v in groups["replay_online"].items() if k != "meta_json"},
            "counters": np.array([meta["counters"][k] for k in ("env_step", "episode", "updates")])}


def test_train_stop_resume_is_the_same_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    assert train_cli.main([*TINY, "--max-env-steps", "400", "--out", str(one)]) == 0
    assert train_cli.main([*TINY, "--max-env-steps", "200", "--out", str(two)]) == 0
    mid = _agent_state(two)
    assert list(mid["counters"]) == [200, 1, 101]
    assert train_cli.main([*TINY, "--max-env-steps", "400", "--out", str(two), "--resume"]) == 0
    assert "resumed from ckpt_00000200" in capsys.readouterr().out
    a, b = _agent_state(one), _agent_state(two)
    assert list(a["counters"]) == [400, 2, 301] and list(b["counters"]) == list(a["counters"])
    assert set(a) == set(b)
    for key in a:  # weights, Adam moments, RNG states and the replay contents all continue as one run
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)
    rows_a, rows_b = read_metrics(one / "metrics.jsonl"), read_metrics(two / "metrics.jsonl")
    assert [r["env_step"] for r in rows_a] == [r["env_step"] for r in rows_b] == [200, 400]
    assert rows_a[-1]["return"] == rows_b[-1]["return"]
    assert (two / "learning_curve.png").read_bytes()[:4] == b"\x89PNG"
    assert json.loads((two / "config.json").read_text())["env_id"] == "Pendulum-v1"


def test_existing_run_directory_is_refused_without_resume(tmp_path: Path) -> None:
    out = tmp_path / "run"
    assert train_cli.main([*TINY, "--max-env-steps", "200", "--out", str(out)]) == 0
    with pytest.raises(ConfigError, match="--resume"):
        train_cli.main([*TINY, "--max-env-steps", "200", "--out", str(out)])
    with pytest.raises(ConfigError, match="no checkpoint"):
        train_cli.main([*TINY, "--max-env-steps", "200", "--out", str(tmp_path / "fresh"), "--resume"])
