"""robot_rl.run_dir: the one "already holds a run" check (refuse / resume) and the TensorBoard directory, on real
temporary directories."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from robot_rl.checkpoint import save_checkpoint
from robot_rl.errors import ConfigError
from robot_rl.run_dir import (
    METRICS_FILE,
    TENSORBOARD_DIR,
    RunExistsError,
    check_run_dir,
    latest_run_checkpoint,
    run_evidence,
    tensorboard_dir,
)


def _checkpoint(out: Path, step: int, directory: str = "checkpoints") -> Path:
    return save_checkpoint(out / directory, step, {"agent": {"w": np.zeros(2)}}, {})


def test_an_empty_missing_or_half_started_directory_is_a_fresh_run(tmp_path: Path) -> None:
    assert check_run_dir(tmp_path / "missing", resume=False) is None
    assert check_run_dir(tmp_path, resume=False) is None
    (tmp_path / "config.json").write_text("{}")  # what a start that failed before training leaves
    (tmp_path / "checkpoints").mkdir()  # an empty checkpoints directory holds no checkpoint
    assert run_evidence(tmp_path) == [] and check_run_dir(tmp_path, resume=False) is None


def test_a_checkpoint_is_refused_without_resume_and_returned_with_it(tmp_path: Path) -> None:
    _checkpoint(tmp_path, 100)
    newest = _checkpoint(tmp_path, 200)
    assert latest_run_checkpoint(tmp_path) == newest
    with pytest.raises(RunExistsError) as err:
        check_run_dir(tmp_path, resume=False)
    msg = str(err.value)
    assert "already holds a run (checkpoint ckpt_00000200)" in msg
    assert "pass --resume to continue it, or choose another --out" in msg and "\n" not in msg
    assert isinstance(err.value, ConfigError)  # one line on stderr through robot_rl.cli
    assert check_run_dir(tmp_path, resume=True) == newest


def test_resume_without_a_checkpoint(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"--resume: .* has no checkpoint to resume from"):
        check_run_dir(tmp_path, resume=True)
    # a command that starts over from its pending data (the learner's inbox) resumes without one
    assert check_run_dir(tmp_path, resume=True, needs_checkpoint=False) is None


def test_metrics_without_a_checkpoint_is_a_run_with_nothing_to_resume(tmp_path: Path) -> None:
    (tmp_path / METRICS_FILE).write_text('{"env_step": 100}\n')
    with pytest.raises(RunExistsError, match=r"stopped before its first checkpoint .*delete it"):
        check_run_dir(tmp_path, resume=False)
    # where metrics do not mark a run (the learner and sim: their rows come with a checkpoint or inbox data)
    assert check_run_dir(tmp_path, resume=False, metrics=False) is None


def test_pending_data_and_further_checkpoint_directories_are_evidence(tmp_path: Path) -> None:
    with pytest.raises(RunExistsError, match=r"already holds a run \(3 inbox chunk\(s\)\); pass --resume"):
        check_run_dir(tmp_path, resume=False, metrics=False, pending=["3 inbox chunk(s)"])
    _checkpoint(tmp_path, 50, "checkpoints_backward")
    dirs = ("checkpoints", "checkpoints_backward")
    assert run_evidence(tmp_path, checkpoint_dirs=dirs) == ["checkpoint checkpoints_backward/ckpt_00000050"]
    with pytest.raises(RunExistsError, match="checkpoints_backward/ckpt_00000050"):
        check_run_dir(tmp_path, resume=False, checkpoint_dirs=dirs, resumable=False)


def test_a_command_that_cannot_resume(tmp_path: Path) -> None:
    (tmp_path / METRICS_FILE).write_text("{}\n")
    with pytest.raises(RunExistsError) as err:
        check_run_dir(tmp_path, resume=False, resumable=False, what="a train-bc run")
    assert str(err.value) == f"--out {tmp_path} already holds a train-bc run (metrics.jsonl); choose another --out"
    with pytest.raises(ConfigError, match="cannot be resumed"):
        check_run_dir(tmp_path / "new", resume=True, resumable=False)


def test_one_tensorboard_directory_name(tmp_path: Path) -> None:
    assert TENSORBOARD_DIR == "tensorboard"
    assert tensorboard_dir(tmp_path) == tmp_path / "tensorboard"
    assert tensorboard_dir(str(tmp_path)) == tmp_path / "tensorboard"
