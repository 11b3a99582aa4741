"""`robot-rl eval --checkpoint DIR` on every run directory this project writes, built by the real commands at
tiny sizes: a `robot-rl train` run (twin-reach and a gymnasium env id), `robot-rl learner` runs (state and pixels:
the obs mode and image size come from the saved spec), their checkpoints/ directory and a single ckpt_*
directory; and one-line errors saying what DIR is for everything else. (`robot-rl sim`'s OUT, the learner's
run directory plus demos and logs, is evaluated after the real sim run in test_runtime_faults.py.)"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from robot_rl.checkpoint import latest_checkpoint, save_checkpoint
from robot_rl.cli import main
from robot_rl.episodes import Episode, save_episode

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "MUJOCO_GL": "egl", "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(ROOT)}
TINY_TRAIN = ["--hidden", "16", "--batch-size", "16", "--ensemble", "2", "--learning-starts", "20",
              "--eval-episodes", "1", "--replay-capacity", "500"]


def evaluate(capsys: pytest.CaptureFixture[str], path: Path, episodes: int = 1) -> dict[str, Any]:
    capsys.readouterr()
    assert main(["eval", "--checkpoint", str(path), "--episodes", str(episodes)]) == 0, capsys.readouterr().err
    out = capsys.readouterr().out.strip().splitlines()
    return dict(json.loads(out[-1]))


def eval_error(capsys: pytest.CaptureFixture[str], path: Path) -> str:
    capsys.readouterr()
    assert main(["eval", "--checkpoint", str(path)]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert err.startswith("robot-rl eval: error: ")
    return err


@pytest.fixture(scope="module")
def learner_runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    """Three real `robot-rl learner` run directories (state; pixels at 32 px; state --faithful: no object
    observation), stopped with SIGTERM once listening: each ends with its final checkpoint."""
    base = tmp_path_factory.mktemp("learner_runs")
    procs: dict[str, subprocess.Popen[str]] = {}
    for name, mode, extra in (("state", "state", []), ("pixels", "pixels", ["--image-size", "32"]),
                              ("faithful", "state", ["--faithful"])):
        argv = [sys.executable, "-m", "robot_rl.cli", "learner", "--task", "twin-reach", "--bind",
                "tcp://127.0.0.1:0", "--out", str(base / name), "--obs-mode", mode, *extra, "--hidden", "16,16",
                "--ensemble", "2", "--batch", "16", "--no-tensorboard", "--quiet"]
        procs[name] = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=ENV,
                                       cwd=ROOT)
    try:
        for proc in procs.values():
            assert proc.stdout is not None
            first = proc.stdout.readline()
            assert "listening on" in first, first  # (reading the rest would wait for the learner to exit)
            proc.send_signal(signal.SIGTERM)
            out, _ = proc.communicate(timeout=120)
            assert proc.returncode == 0, out
        yield {name: base / name for name in procs}
    finally:
        for proc in procs.values():
            proc.kill()


@pytest.mark.slow
def test_eval_a_train_run_its_checkpoints_and_one_checkpoint(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "train"
    assert main(["train", "--task", "twin-reach", "--obs-mode", "state", "--max-env-steps", "40", "--eval-every",
                 "40", "--checkpoint-every", "40", *TINY_TRAIN, "--set", "hidden_dims=24,24",
                 "--out", str(run)]) == 0  # eval must rebuild the 24-wide nets --set asked for
    ckpt = latest_checkpoint(run / "checkpoints")
    assert ckpt is not None
    for path in (run, run / "checkpoints", ckpt):
        res = evaluate(capsys, path)
        assert res["checkpoint"] == str(ckpt) and res["task"] == "twin-reach" and res["env_step"] == 40
        assert res["episodes"] == 1 and 0.0 <= res["success_rate"] <= 1.0 and res["mean_length"] > 0


@pytest.mark.slow
def test_eval_a_jax_train_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A `--backend jax` run's checkpoint is evaluated like any other (eval rebuilds the JAX agent its AgentConfig
    names, and acts with the torch policy); the first update's time (tracing + XLA compilation) is reported."""
    pytest.importorskip("jax")
    run = tmp_path / "train-jax"
    capsys.readouterr()
    assert main(["train", "--task", "twin-reach", "--obs-mode", "state", "--max-env-steps", "40", "--eval-every",
                 "40", "--checkpoint-every", "40", *TINY_TRAIN, "--backend", "jax", "--out", str(run)]) == 0
    out = capsys.readouterr().out
    logged = [line for line in out.splitlines() if line.startswith("[train] first update ")]
    assert len(logged) == 1 and "JAX" in logged[0], out
    row = json.loads((run / "metrics.jsonl").read_text().splitlines()[-1])
    assert 0.0 < row["first_update_s"] < 120.0, row
    ckpt = latest_checkpoint(run / "checkpoints")
    assert ckpt is not None
    assert json.loads((ckpt / "meta.json").read_text())["agent_config"]["backend"] == "jax"
    res = evaluate(capsys, run, episodes=2)
    assert res["task"] == "twin-reach" and res["episodes"] == 2 and res["env_step"] == 40
    assert 0.0 <= res["success_rate"] <= 1.0 and np.isfinite(res["mean_return"])


def test_eval_a_gymnasium_env_id_train_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    assert main(["train", "--env-id", "Pendulum-v1", "--algo", "sac", "--hidden", "32", "--batch-size", "32",
                 "--utd", "1", "--learning-starts", "100", "--start-steps", "100", "--eval-every", "200",
                 "--eval-episodes", "2", "--checkpoint-every", "200", "--replay-capacity", "1000",
                 "--max-env-steps", "200", "--out", str(out)]) == 0
    res = evaluate(capsys, out, episodes=2)
    assert res["episodes"] == 2 and res["success_rate"] == 0.0 and res["mean_length"] == 200.0
    assert -2000 < res["mean_return"] < 0 and res["task"] == "Pendulum-v1"


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["state", "pixels", "faithful"])
def test_eval_a_learner_run(learner_runs: dict[str, Path], mode: str, capsys: pytest.CaptureFixture[str]) -> None:
    run = learner_runs[mode]
    ckpt = latest_checkpoint(run / "checkpoints")
    assert ckpt is not None and ckpt.name == "ckpt_00000000"
    meta = json.loads((ckpt / "meta.json").read_text())
    assert "config" not in meta and "agent_config" in meta  # what made eval fail with KeyError: 'config'
    res = evaluate(capsys, run)
    assert res["checkpoint"] == str(ckpt) and res["task"] == "twin-reach" and res["env_step"] == 0
    assert res["mean_length"] > 0
    assert evaluate(capsys, ckpt)["checkpoint"] == str(ckpt)


def test_eval_explains_what_a_path_without_a_checkpoint_is(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    what_to_pass = "pass a run directory (the --out of robot-rl train, learner or sim), its checkpoints/ directory"
    err = eval_error(capsys, tmp_path / "typo")
    assert "typo: no such file or directory" in err and what_to_pass in err
    # a run directory with demos and logs beside its checkpoints (like robot-rl sim's OUT)
    run = tmp_path / "run"
    save_checkpoint(run / "checkpoints", 0, {"agent": {"w": np.zeros(1)}}, {"counters": {"env_step": 0}})
    obs = [{"state": np.zeros(3, np.float32)}] * 2
    episode = save_episode(Episode.from_steps(obs, np.zeros((1, 7)), [0.0], [False], [True], task="twin-reach"),
                           run / "demos")
    (run / "logs").mkdir()
    err = eval_error(capsys, run / "demos")
    assert "a directory of recorded episodes (demos or labels), not a training run" in err
    assert f"the run directory {run} above it has one" in err
    assert f"the run directory {run} above it has one" in eval_error(capsys, run / "logs")
    assert "an episode file, not a run directory" in eval_error(capsys, episode)
    # a checkpoint nobody here wrote: neither train's config nor the learner's agent_config + spec
    err = eval_error(capsys, run)
    assert "neither robot-rl train" in err and "ckpt_00000000" in err
    # a run that has not checkpointed yet
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    (fresh / "metrics.jsonl").write_text("")
    assert "a run directory without a complete checkpoint yet" in eval_error(capsys, fresh)
    (tmp_path / "empty").mkdir()
    assert "empty: not a run directory: no checkpoints/, no meta.json;" in eval_error(capsys, tmp_path / "empty")


@pytest.mark.slow
def test_per_episode_successes_match_the_rate(learner_runs: dict[str, Path]) -> None:
    """evaluate_checkpoint(per_episode=True) (benchmarks/demo_coverage.py) lists each episode's success."""
    from learners.training.evaluation import evaluate_checkpoint

    row = evaluate_checkpoint(learner_runs["faithful"], 3, per_episode=True)
    assert len(row["episode_successes"]) == 3 and all(isinstance(s, bool) for s in row["episode_successes"])
    assert np.mean(row["episode_successes"]) == pytest.approx(row["success_rate"])
    assert "episode_successes" not in evaluate_checkpoint(learner_runs["faithful"], 1)


def test_eval_runs_the_runs_own_simulated_timing_or_the_flags(learner_runs: dict[str, Path],
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """A sim run's summary.json names its timing (robot-rl sim --faithful: frames 100 ms late, targets 20 ms late):
    `robot-rl eval` of its checkpoint runs the same, as the sim's own final evaluation did; the flags override it
    (0 0: on time), and a bad value is a one-line error."""
    run = learner_runs["pixels"]
    assert "timing" not in evaluate(capsys, run)  # no summary.json: a plain learner run, no timing
    summary = run / "summary.json"
    summary.write_text(json.dumps({"timing": {"camera_latency_ms": 100.0, "action_delay_ms": 20.0}}))
    try:
        assert evaluate(capsys, run)["timing"] == {"camera_latency_ms": 100.0, "action_delay_ms": 20.0}
        capsys.readouterr()
        assert main(["eval", "--checkpoint", str(run), "--episodes", "1", "--camera-latency-ms", "0",
                     "--action-delay-ms", "0"]) == 0
        assert "timing" not in json.loads(capsys.readouterr().out.strip().splitlines()[-1])
        assert main(["eval", "--checkpoint", str(run), "--camera-latency-ms", "-5"]) == 1
        err = capsys.readouterr().err.strip()
        assert "--camera-latency-ms" in err and len(err.splitlines()) == 1 and "Traceback" not in err, err
        summary.write_text("[1, 2]")  # a summary that is not what sim writes: no timing, no crash
        assert "timing" not in evaluate(capsys, run)
    finally:
        summary.unlink()


def test_a_train_runs_own_timing_unless_the_flags_say_otherwise(tmp_path: Path) -> None:
    from learners.training.config import TrainConfig
    from learners.training.evaluation import run_timing

    faithful = TrainConfig(task="twin-pick-cube", faithful=True, reward="classifier:x")
    assert run_timing(faithful, tmp_path, False, None, None).env_timing() == {"camera_latency_ms": 100.0,
                                                                              "action_delay_ms": 20.0}
    off = run_timing(faithful, tmp_path, False, 0.0, 0.0)
    assert off.env_timing() == {"camera_latency_ms": 0.0, "action_delay_ms": 0.0}
    plain = TrainConfig(task="twin-pick-cube")
    assert run_timing(plain, tmp_path, False, None, None).env_timing() == {}
    assert run_timing(plain, tmp_path, False, 50.0, None).env_timing() == {"camera_latency_ms": 50.0,
                                                                           "action_delay_ms": 0.0}
