"""Checkpoint evaluation counts success by the run's reward: with a classifier (the task file's `[reward]`, or
`--reward`) the classifier's gated success, the gate from `--reward-gate-k`, else the file's gate_k, with the twin's
true success beside it; otherwise the env's (the twin's true success), and the output says which. Both evaluators:
`robot-rl actor --evaluate` (which `robot-rl sim` runs) and `robot-rl eval`. Over a hardware robot server the env
measures no success: without a classifier the evaluation is refused in one line (a human reward included)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("mujoco")
pytest.importorskip("torch")

from robot_rl.cli import main
from robot_rl.errors import ConfigError
from tests.test_reward_classifier import constant_classifier

pytestmark = pytest.mark.filterwarnings("ignore:.*Box observation space m.*:UserWarning")

SIZE = 16


def lab_file(tmp_path: Path, prob: float = 0.999) -> Path:
    """A lab task over twin-reach whose [reward] is a classifier beside it (answers `prob` on every frame; its
    card's gate k = 1, the file's gate_k = 2)."""
    constant_classifier(tmp_path / "cls", prob, size=SIZE, k=1, cameras=("images/front",))
    path = tmp_path / "lab.toml"
    path.write_text('[task]\nname = "lab-reach"\nbase = "twin-reach"\n\n'
                    '[reward]\nsource = "classifier"\nclassifier = "cls"\ngate_k = 2\n')
    return path


def checkpoint(root: Path, task: str, group: str = "agent") -> Path:
    """A state-mode checkpoint of `task` as the learner writes it (group "agent": the policy's arrays under
    agent/policy/...) or as train-bc does (group "policy"), with the AgentConfig and the EnvSpec in the meta."""
    from envs.presets import make_env
    from learners.agents.config import AgentConfig
    from learners.agents.policy import build_policy
    from robot_rl.checkpoint import save_checkpoint
    from robot_rl.gym_env import env_spec_of

    env = make_env(task, obs_mode="state")
    spec = env_spec_of(env, task)
    env.close()
    cfg = AgentConfig(hidden_dims=(16, 16))
    state = {k: np.asarray(v) for k, v in build_policy(spec, cfg, device="cpu").trainable_state().items()}
    arrays = {f"policy/{k}": v for k, v in state.items()} if group == "agent" else state
    return save_checkpoint(root / "checkpoints", 100, {group: arrays},
                           {"agent_config": cfg.to_dict(), "spec": spec.to_dict(),
                            "counters": {"env_step": 100, "updates": 5}})


def actor_evaluate(capsys: pytest.CaptureFixture[str], tmp_path: Path, *argv: str) -> tuple[dict[str, Any], str]:
    summary = tmp_path / "eval.json"
    capsys.readouterr()
    assert main(["actor", *argv, "--episodes", "2", "--summary", str(summary)]) == 0, capsys.readouterr().err
    return json.loads(summary.read_text()), capsys.readouterr().out


def test_actor_evaluate_counts_the_files_classifier_with_its_gate_and_reports_the_truth(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lab = lab_file(tmp_path)
    checkpoint(tmp_path / "run", "twin-reach")
    run = str(tmp_path / "run")
    result, out = actor_evaluate(capsys, tmp_path, "--task", str(lab), "--evaluate", run)
    # a classifier that always fires, gated at the file's k = 2: every episode ends as a success on its 2nd step
    assert result["success_source"] == f"classifier:{tmp_path / 'cls'}" and result["reward_gate_k"] == 2
    assert result["success_rate"] == 1.0 and result["episode_length"] == 2.0
    assert result["true_success_rate"] is not None and result["true_success_rate"] <= 1.0
    assert result["reward_model"]["ended_by_model"] == 2
    assert "success rate 1.00 (by the classifier" in out and "(gate k=2)" in out
    assert "the twin's true success" in out and "metrics only" in out
    # --reward-gate-k wins over the file's gate_k
    result, _ = actor_evaluate(capsys, tmp_path, "--task", str(lab), "--evaluate", run, "--reward-gate-k", "3")
    assert result["reward_gate_k"] == 3 and result["episode_length"] == 3.0
    # --reward env wins over the file's classifier: the twin's true success, whole episodes
    result, out = actor_evaluate(capsys, tmp_path, "--task", str(lab), "--evaluate", run, "--reward", "env")
    assert result["success_source"] == "env" and "true_success_rate" not in result
    assert result["episode_length"] == 50.0 and "(the twin's true success)" in out
    # a human reward: no person evaluates, the twin's true success counts, and the line says so
    result, out = actor_evaluate(capsys, tmp_path, "--task", "twin-reach", "--evaluate", run, "--reward", "human")
    assert result["success_source"] == "env" and "the run's reward is human" in out


def test_a_classifier_that_never_fires_counts_no_success(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lab = lab_file(tmp_path, prob=0.001)
    checkpoint(tmp_path / "run", "twin-reach")
    result, _ = actor_evaluate(capsys, tmp_path, "--task", str(lab), "--evaluate", str(tmp_path / "run"))
    assert result["success_rate"] == 0.0 and result["successes"] == [False, False]
    assert result["episode_length"] == 50.0  # not ended by the twin's own success either


def test_robot_rl_eval_counts_the_files_classifier(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lab = lab_file(tmp_path)
    checkpoint(tmp_path / "run", str(lab), group="policy")
    run = str(tmp_path / "run")

    def row(*extra: str) -> dict[str, Any]:
        capsys.readouterr()
        assert main(["eval", "--checkpoint", run, "--episodes", "2", *extra]) == 0, capsys.readouterr().err
        return dict(json.loads(capsys.readouterr().out.strip().splitlines()[-1]))

    r = row("--task", str(lab))
    assert r["task"] == "lab-reach" and r["success_source"] == f"classifier:{tmp_path / 'cls'}"
    assert r["reward_gate_k"] == 2 and r["success_rate"] == 1.0 and r["mean_length"] == 2.0
    assert isinstance(r["true_success_rate"], float)
    assert row("--task", str(lab), "--reward-gate-k", "4")["mean_length"] == 4.0
    r = row("--task", str(lab), "--reward", "env")
    assert r["success_source"] == "env" and "true_success_rate" not in r and r["mean_length"] == 50.0
    # a learner run records only the task's name: another task file's name is refused in one line
    other = tmp_path / "other.toml"
    other.write_text('[task]\nname = "other"\nbase = "twin-reach"\n')
    capsys.readouterr()
    assert main(["eval", "--checkpoint", run, "--task", str(other)]) == 1
    err = capsys.readouterr().err
    assert "its task is 'other', but" in err and "trained on 'lab-reach'" in err and err.count("\n") == 1


def test_evaluation_over_a_hardware_server_needs_a_classifier(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import actors.evaluation as evaluation
    from actors.run import parse_actor_args, with_task_reward
    from tests.test_served_box import LAB, serve

    lab = tmp_path / "lab.toml"
    lab.write_text(LAB)  # the lab's own box: the box check passes, the success check is the one that refuses
    monkeypatch.setattr(evaluation, "load_learner_checkpoint", lambda path: None)
    for reward, why in (("env", ""), ("human", "the task's reward is human")):
        made = serve(monkeypatch, "franky")
        argv = ["--task", str(lab), "--robot", "tcp://127.0.0.1:1", "--evaluate", "runs/x", "--reward", reward]
        cfg = with_task_reward(parse_actor_args(argv)).evaluation()
        with pytest.raises(ConfigError, match=rf"over a franky robot server: the arm cannot measure the task's "
                                              rf"success.*{why}.*--reward classifier:DIR"):
            evaluation.evaluate_checkpoint(cfg)
        assert made[-1].closed  # refused before any episode, the connection closed


def test_summarize_counts_the_reward_models_success_and_drops_an_unmeasured_truth() -> None:
    from robot_rl.evaluation import summarize

    twin = [{"return": 1.0, "length": 3, "success": False, "reward_success": True},
            {"return": 0.0, "length": 5, "success": True, "reward_success": False}]
    s = summarize(twin, seed=0, deterministic=True, success_by="reward")
    assert s["successes"] == [True, False] and s["true_successes"] == [False, True] and s["true_success_rate"] == 0.5
    assert summarize(twin, seed=0, deterministic=True)["successes"] == [False, True]  # the env's, as before
    hardware = [{**r, "success": False, "success_unknown": True} for r in twin]
    s = summarize(hardware, seed=0, deterministic=True, success_by="reward")
    assert s["success_rate"] == 0.5 and s["true_success_rate"] is None and s["true_successes"] is None
    with pytest.raises(ValueError, match="success_by"):
        summarize(twin, seed=0, deterministic=True, success_by="oracle")
