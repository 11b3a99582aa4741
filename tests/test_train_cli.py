"""`robot-rl train`: run directory handling, metrics, checkpoints, and resume as one run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from learners.training.flags import build_train_parser, train_config
from learners.training.train import train
from robot_rl.checkpoint import latest_checkpoint, load_checkpoint
from robot_rl.cli import main as cli_main
from robot_rl.errors import ConfigError
from robot_rl.metrics import read_metrics
from robot_rl.run_dir import tensorboard_dir

TINY = ["--env-id", "Pendulum-v1", "--algo", "sac", "--hidden", "32", "--batch-size", "32", "--utd", "1",
        "--learning-starts", "100", "--start-steps", "100", "--eval-every", "200", "--eval-episodes", "2",
        "--checkpoint-every", "200", "--replay-capacity", "1000"]


def train_library(argv: list[str]) -> dict[str, Any]:
    """`robot-rl train ARGV` through the library, so a refusal raises (robot_rl.cli prints it in one line)."""
    args = build_train_parser().parse_args(argv)
    return train(train_config(args), args.out, resume=args.resume)


def _agent_state(run_dir: Path) -> dict[str, np.ndarray]:
    ckpt = latest_checkpoint(run_dir / "checkpoints")
    assert ckpt is not None
    groups, meta = load_checkpoint(ckpt)
    return {**{f"agent/{k}": v for k, v in groups["agent"].items()},
            **{f"online/{k}": v for k, v in groups["replay_online"].items() if k != "meta_json"},
            "counters": np.array([meta["counters"][k] for k in ("env_step", "episode", "updates")])}


def test_train_stop_resume_is_the_same_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    assert cli_main(["train", *TINY, "--max-env-steps", "400", "--out", str(one)]) == 0
    assert cli_main(["train", *TINY, "--max-env-steps", "200", "--out", str(two)]) == 0
    mid = _agent_state(two)
    assert list(mid["counters"]) == [200, 1, 101]
    assert cli_main(["train", *TINY, "--max-env-steps", "400", "--out", str(two), "--resume"]) == 0
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
    # TensorBoard scalars in the one directory every run writes them to (robot_rl.run_dir), as the learner does
    pytest.importorskip("tensorboard")
    assert any(tensorboard_dir(two).glob("events.out.tfevents.*")) and not (two / "tb").exists()


def test_existing_run_directory_is_refused_without_resume(tmp_path: Path) -> None:
    out = tmp_path / "run"
    assert cli_main(["train", *TINY, "--max-env-steps", "200", "--out", str(out)]) == 0
    with pytest.raises(ConfigError, match="--resume"):
        train_library([*TINY, "--max-env-steps", "200", "--out", str(out)])
    with pytest.raises(ConfigError, match="no checkpoint"):
        train_library([*TINY, "--max-env-steps", "200", "--out", str(tmp_path / "fresh"), "--resume"])


def test_set_reaches_the_run_and_the_resolved_config_is_printed_and_saved(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    assert cli_main(["train", *TINY, "--max-env-steps", "200", "--out", str(out), "--discount", "0.9",
                     "--set", "n_step=3", "--set", "layer_norm=false", "--set", "discount=0.8"]) == 0
    printed = [ln for ln in capsys.readouterr().out.splitlines() if "agent config" in ln]
    assert len(printed) == 1 and "n_step=3" in printed[0] and "discount=0.8" in printed[0]
    saved = json.loads((out / "agent_config.json").read_text())
    assert (saved["n_step"], saved["layer_norm"], saved["discount"], saved["hidden_dims"]) == (3, False, 0.8, [32, 32])
    ckpt = latest_checkpoint(out / "checkpoints")
    assert ckpt is not None and load_checkpoint(ckpt)[1]["agent_config"] == saved  # what eval rebuilds
    assert json.loads((out / "config.json").read_text())["agent_set"] == ["n_step=3", "layer_norm=false",
                                                                         "discount=0.8"]


def test_bad_input_is_one_line_and_leaves_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from robot_rl.cli import main

    out = tmp_path / "run"
    for argv, msg in ((["--env-id", "Foo-v0", "--env-module", "nosuchmodule"], "--env-module nosuchmodule: no such"),
                      (["--env-id", "NoSuchEnv-v0"], "--env-id NoSuchEnv-v0"),
                      (["--task", "twin-nope"], "unknown task 'twin-nope'"),
                      (["--env-id", "Pendulum-v1", "--set", "n_step=x"], "expected an integer for AgentConfig field"),
                      (["--env-id", "Pendulum-v1", "--set", "nstep=2"], "unknown AgentConfig field 'nstep'")):
        assert main(["train", *argv, "--out", str(out)]) == 1
        err = capsys.readouterr().err
        assert msg in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
        assert not out.exists()


def test_a_failed_start_does_not_block_the_retry(tmp_path: Path) -> None:
    """A first attempt that fails before training, or the files such an attempt left behind in older versions
    (config.json, no checkpoint, no metrics), do not make the directory a run: the retry needs no --resume."""
    out = tmp_path / "run"
    with pytest.raises(ConfigError, match="no such module"):
        train_library([*TINY, "--env-module", "nosuchmodule", "--max-env-steps", "200", "--out", str(out)])
    assert cli_main(["train", *TINY, "--max-env-steps", "200", "--out", str(out)]) == 0
    assert [r["env_step"] for r in read_metrics(out / "metrics.jsonl")] == [200]

    stale = tmp_path / "stale"  # what the old order (config.json first) left after a failing start
    stale.mkdir()
    (stale / "config.json").write_text(json.dumps({"env_id": "Pendulum-v1", "env_module": "nosuchmodule"}))
    (stale / "tb").mkdir()
    with pytest.raises(ConfigError, match="no checkpoint"):
        train_library([*TINY, "--max-env-steps", "200", "--out", str(stale), "--resume"])
    assert cli_main(["train", *TINY, "--max-env-steps", "200", "--out", str(stale)]) == 0
    assert json.loads((stale / "config.json").read_text())["env_module"] is None  # the new run's own config

    halfway = tmp_path / "halfway"  # metrics rows but no checkpoint: a run, though one that cannot be resumed
    halfway.mkdir()
    (halfway / "metrics.jsonl").write_text('{"env_step": 100}\n')
    with pytest.raises(ConfigError, match="before its first checkpoint"):
        train_library([*TINY, "--max-env-steps", "200", "--out", str(halfway)])
