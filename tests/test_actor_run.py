"""`robot-rl actor`'s library (actors.run, actors.evaluation): the options parse into ActorRunConfig, and
`--evaluate CKPT` evaluates a learner checkpoint's policy on the actor's env (summary written, clear one-line
errors for a missing checkpoint or another spec)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("MUJOCO_GL", "egl")
pytest.importorskip("mujoco")
pytest.importorskip("torch")

from actors.run import ActorRunConfig, parse_actor_args
from robot_rl.cli import main
from robot_rl.errors import ConfigError


def _learner_checkpoint(root: Path, obs_mode: str = "state") -> Path:
    """A checkpoint as the distributed learner writes it: the policy's arrays under agent/policy/..., the
    AgentConfig and the EnvSpec in the meta."""
    from envs.presets import make_env
    from learners.agents.config import AgentConfig
    from learners.agents.policy import build_policy
    from robot_rl.checkpoint import save_checkpoint
    from robot_rl.gym_env import env_spec_of

    env = make_env("twin-reach", obs_mode=obs_mode, image_size=32)
    spec = env_spec_of(env, "twin-reach")
    env.close()
    cfg = AgentConfig()
    policy = build_policy(spec, cfg, device="cpu")
    arrays = {f"policy/{k}": np.asarray(v) for k, v in policy.trainable_state().items()}
    return save_checkpoint(root / "checkpoints", 1234, {"agent": arrays},
                           {"agent_config": cfg.to_dict(), "spec": spec.to_dict(),
                            "counters": {"env_step": 1234, "updates": 56}})


def test_the_command_line_parses_into_the_run_config() -> None:
    cfg = parse_actor_args(["--task", "twin-reach", "--robot", "tcp://127.0.0.1:5560", "--no-pace", "--faithful",
                            "--reward", "human", "--intervene", "scripted", "--reward-audit", "audit"])
    assert cfg == ActorRunConfig(task="twin-reach", robot="tcp://127.0.0.1:5560", no_pace=True, faithful=True,
                                 reward="human", intervene="scripted", reward_audit=Path("audit"))
    with pytest.raises(SystemExit):
        parse_actor_args(["--task", "twin-reach", "--warmup", "sometimes"])
    with pytest.raises(ConfigError, match="warmup"):
        ActorRunConfig(warmup="sometimes")


def test_evaluate_a_learner_checkpoint_writes_the_summary(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ckpt = _learner_checkpoint(tmp_path / "run")
    summary = tmp_path / "eval.json"
    assert main(["actor", "--task", "twin-reach", "--evaluate", str(tmp_path / "run"), "--episodes", "2",
                 "--summary", str(summary)]) == 0
    out = capsys.readouterr().out
    assert f"actor: evaluated {ckpt.name} (env_step 1234)" in out and "over 2 deterministic episodes" in out
    result = json.loads(summary.read_text())
    assert result["checkpoint"] == str(ckpt) and result["env_step"] == 1234 and result["updates"] == 56
    assert result["task"] == "twin-reach" and len(result["returns"]) == 2 and 0.0 <= result["success_rate"] <= 1.0


def test_evaluate_refuses_a_missing_checkpoint_and_another_spec_in_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["actor", "--task", "twin-reach", "--evaluate", str(tmp_path / "nothing")]) == 1
    err = capsys.readouterr().err
    assert "no checkpoint there" in err and err.count("\n") == 1 and "Traceback" not in err
    _learner_checkpoint(tmp_path / "run")
    assert main(["actor", "--task", "twin-reach", "--evaluate", str(tmp_path / "run"), "--obs-mode", "pixels",
                 "--image-size", "32"]) == 1
    err = capsys.readouterr().err
    assert "was trained on another spec" in err and err.count("\n") == 1, err


def test_an_actor_the_learner_refuses_stops_at_once_with_exit_1(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """A learner that answers the actor's hello with spec_mismatch (here: it trains on pixels, the actor runs
    state): the actor stops within seconds, exit 1, one line naming the learner and the differing fields (it used to
    wait for a budget that never came, and exit 0 with no steps once stopped)."""
    import time

    from envs.presets import make_env
    from robot_rl.gym_env import env_spec_of
    from robot_rl.transport import bind_learner
    from tests.test_runtime_faults import free_port

    env = make_env("twin-reach", obs_mode="pixels", image_size=16)
    spec = env_spec_of(env, "twin-reach")
    env.close()
    address = f"tcp://127.0.0.1:{free_port()}"
    learner = bind_learner(spec, address)
    stop = False

    def serve() -> None:
        while not stop:
            learner.recv(timeout=0.05)

    import threading

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        t0 = time.monotonic()
        code = main(["actor", "--task", "twin-reach", "--learner", address, "--max-steps", "50", "--quiet",
                     "--stats-out", str(tmp_path / "stats.json")])
        took = time.monotonic() - t0
    finally:
        stop = True
        thread.join(5)
        learner.close()
    err = capsys.readouterr().err
    assert code == 1 and took < 30, (code, took, err)
    assert f"the learner at {address} refused this actor" in err and "spec_mismatch" in err, err
    assert "observation/" in err and "--obs-mode state" in err and "stopped after 0 steps" in err, err
    assert err.count("robot-rl actor: error:") == 1 and "Traceback" not in err, err
    stats = json.loads((tmp_path / "stats.json").read_text())
    assert stats["env_steps"] == 0 and stats["state"] == "failed", stats
