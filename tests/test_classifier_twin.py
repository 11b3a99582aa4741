"""Reward classifiers on the MuJoCo twin: a tiny classifier trained on a handful of recorded pick-cube episodes
(scripted, with near misses) beats chance on held-out episodes; eval-classifier; the classifier / human reward
inside `robot-rl train` and the actor's env; one-line errors for mismatched inputs.

Kept fast: 32x32 images, a 3-layer stride-2 conv net, 400 gradient steps (~25 s for the module on 2 shared cores).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("MUJOCO_GL", "egl")
pytest.importorskip("mujoco")
pytest.importorskip("torch")

from demos.recording.labels import parse_record_labels_args, record_labels
from learners.rewards.classifier import load_classifier
from learners.rewards.labels import load_labels
from learners.rewards.metrics import binary_metrics, roc_auc
from learners.rewards.reward_model import RewardModelWrapper
from robot_rl import cli
from robot_rl.errors import ConfigError
from tests.test_reward_classifier import constant_classifier

SIZE = 32


def labels_main(argv: list[str]) -> int:
    """`robot-rl record-labels ARGV` through its library (errors raise, typed)."""
    return record_labels(parse_record_labels_args(argv))


@pytest.fixture(scope="module")
def twin(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Labels recorded on the twin (train: seeds 0.., test: seeds 500..) and a classifier trained on them."""
    root = tmp_path_factory.mktemp("cls")
    for name, frames, seed in (("train", 900, 0), ("test", 300, 500)):
        assert labels_main(["--task", "twin-pick-cube", "--out", str(root / name), "--frames", str(frames),
                            "--image-size", str(SIZE), "--seed", str(seed)]) == 0
    assert cli.main(["train-classifier", "--labels", str(root / "train"), "--out", str(root / "cls"),
                     "--max-steps", "400", "--eval-every", "50", "--conv-channels", "16,32,32",
                     "--conv-strides", "2,2,2", "--latent", "32",
                     "--batch-size", "32", "--lr", "1e-3"]) == 0
    return {"root": root, "train": root / "train", "test": root / "test", "cls": root / "cls"}


def test_tiny_classifier_beats_chance_on_held_out_twin_episodes(twin: dict[str, Path]) -> None:
    loaded = load_classifier(twin["cls"])
    card = loaded.card
    assert card.cameras == ["images/front", "images/wrist"] and card.image_size == (SIZE, SIZE)
    assert card.gate["predicate"] and card.label_sources[0]["segments"]["near-miss:lift-drop"] >= 3
    test = load_labels([twin["test"]], card.cameras)
    assert {e.segment for e in test.episodes} >= {"expert", "near-miss:lift-drop", "near-miss:grip-beside"}
    probs = loaded.predict_proba(test.images)
    m = binary_metrics(probs, test.labels, 0.5)
    # chance: ROC-AUC 0.5, balanced accuracy 0.5 (always "failure" would score 0.83 plain accuracy here)
    assert roc_auc(probs, test.labels) >= 0.9 and m["balanced_accuracy"] >= 0.75, m
    # near misses are mostly rejected
    near = np.isin(test.episode, [i for i, e in enumerate(test.episodes) if e.segment.startswith("near-miss")])
    assert (probs[near] < 0.5).mean() >= 0.9


def test_eval_classifier_writes_the_table_and_the_worst_frames(twin: dict[str, Path],
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    out = twin["root"] / "eval"
    assert cli.main(["eval-classifier", "--classifier", str(twin["cls"]), "--labels", str(twin["test"]),
                     "--out", str(out), "--worst", "4"]) == 0
    text = capsys.readouterr().out
    assert "precision" in text and "FP/1000" in text and "ROC-AUC" in text and "calibration" in text
    ev = json.loads((out / "eval.json").read_text())
    loaded = load_classifier(twin["cls"])
    test = load_labels([twin["test"]], loaded.card.cameras)
    probs = loaded.predict_proba(test.images)
    assert ev["metrics"]["labels"] == pytest.approx(binary_metrics(probs, test.labels, loaded.card.threshold))
    assert len(ev["worst_false_positives"]) == 4
    assert ev["worst_false_positives"][0]["prob"] == pytest.approx(float(probs[~test.labels].max()))
    assert (out / "worst.png").read_bytes()[:4] == b"\x89PNG"


def test_mismatched_inputs_are_one_line_errors(twin: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    other = twin["root"] / "labels48"
    assert labels_main(["--task", "twin-pick-cube", "--out", str(other), "--frames", "10", "--image-size",
                        "48"]) == 0
    capsys.readouterr()
    assert cli.main(["eval-classifier", "--classifier", str(twin["cls"]), "--labels", str(other)]) == 1
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "episode_000000.npz: camera 'images/front' is 48x48x3" in err
    assert "card.json: image_size) expects 32x32x3" in err
    assert cli.main(["eval-classifier", "--classifier", str(twin["root"]), "--labels", str(other)]) == 1
    assert "no card.json" in capsys.readouterr().err
    assert cli.main(["train-classifier", "--labels", str(other), "--out", str(twin["root"] / "x")]) == 1
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "labels48: all 10 frames in 1 episode(s) are labelled failure (field 'success')" in err


def test_classifier_reward_ends_scripted_pick_cube_episodes_on_the_twin(twin: dict[str, Path]) -> None:
    from envs.presets import make_env
    from envs.twin.experts import ScriptedExpert
    from learners.rewards.reward_model import image_shapes_of_space, make_reward_model

    base = make_env("twin-pick-cube", image_size=SIZE, terminate_on_success=False)
    model = make_reward_model(f"classifier:{twin['cls']}", image_shapes_of_space(base.observation_space),
                              audit_dir=twin["root"] / "audit")
    assert model is not None
    env = RewardModelWrapper(base, model)
    expert = ScriptedExpert("twin-pick-cube")
    ends = []
    try:
        for seed in (900, 901, 902):
            env.reset(seed=seed)
            expert.reset()
            while True:
                _, reward, terminated, truncated, info = env.step(expert.act(env.unwrapped.last_state))
                if terminated or truncated:
                    ends.append((terminated, reward, info["success"]))
                    break
    finally:
        env.close()
    # every episode was ended by the classifier, with reward 1, while the cube was truly lifted
    assert ends == [(True, 1.0, True)] * 3
    assert env.stats()["ended_by_model"] == 3 and env.stats()["ended_without_true_success"] == 0
    rows = [json.loads(r) for r in (twin["root"] / "audit" / "positives.jsonl").read_text().splitlines()]
    assert sum(r["rewarded"] for r in rows) == 3 and all((twin["root"] / "audit" / r["image"]).is_file() for r in rows)


def test_train_takes_rewards_from_the_classifier(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A classifier that calls every frame a success (gate k=2): `robot-rl train --reward classifier:DIR` stores
    reward 1 and a termination every second step, the env no longer ends episodes itself, evaluation keeps
    the env's own reward, and the positives are in the audit log."""
    from learners.training.config import TrainConfig
    from learners.training.online import LoopConfig, train_online
    from learners.training.train import build_run

    cls = constant_classifier(tmp_path / "always", 0.999, size=SIZE, k=2, cameras=("images/front", "images/wrist"))
    cfg = TrainConfig(task="twin-reach", obs_mode="pixels", image_size=SIZE, reward=f"classifier:{cls}",
                      device="cpu", learning_starts=1000, start_steps=100)
    run = build_run(cfg, reward_audit=tmp_path / "audit")
    try:
        assert isinstance(run.env, RewardModelWrapper)
        assert run.env.unwrapped.config.terminate_on_success is False
        assert run.eval_env.unwrapped.config.terminate_on_success is True
        episodes = list(train_online(run.env, run.agent, run.online, LoopConfig(total_steps=8, start_steps=100,
                                                                                learning_starts=1000)))
        valid = run.online.valid
        assert run.online.fields["rewards"][valid].tolist() == [0.0, 1.0] * 4
        assert run.online.fields["terminated"][valid].tolist() == [False, True] * 4
        assert [m["episode_length"] for m in episodes] == [2] * 4
        assert run.env.stats()["ended_by_model"] == 4
    finally:
        run.env.close()
        run.eval_env.close()
    assert len((tmp_path / "audit" / "positives.jsonl").read_text().splitlines()) == 8
    # a classifier for another image size is refused before anything runs, in one line
    small = constant_classifier(tmp_path / "small", 0.5, size=16, cameras=("images/front", "images/wrist"))
    assert cli.main(["train", "--task", "twin-reach", "--obs-mode", "pixels", "--image-size", str(SIZE), "--reward",
                     f"classifier:{small}", "--out", str(tmp_path / "run")]) == 1
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "camera 'images/front' is 32x32x3" in err and "expects 16x16x3" in err
    assert not (tmp_path / "run").exists()


def test_actor_env_with_classifier_and_human_rewards(tmp_path: Path) -> None:
    from actors.actor_env import make_actor_env
    from envs.twin.experts import ScriptedExpert

    with pytest.raises(ConfigError, match=r"--reward human: .* add --intervene"):
        make_actor_env("twin-pick-cube", "state", None, None, reward="human")
    cls = constant_classifier(tmp_path / "c", 0.01, size=SIZE, cameras=("images/front", "images/wrist"))
    env = make_actor_env("twin-pick-cube", "pixels", SIZE, None, reward=f"classifier:{cls}")
    try:
        assert isinstance(env, RewardModelWrapper) and env.unwrapped.config.terminate_on_success is False
        env.reset(seed=0)
        assert env.step(np.zeros(7, np.float32))[1:3] == (0.0, False)
    finally:
        env.close()
    # human: the scripted operator presses its success key once it sees the cube lifted; the episode ends there
    env = make_actor_env("twin-pick-cube", "state", None, None, intervene="scripted", reward="human",
                         reward_audit=tmp_path / "human")
    expert = ScriptedExpert("twin-pick-cube")
    try:
        env.reset(seed=3)
        first_true = None
        for t in range(1, 101):
            _, reward, terminated, truncated, info = env.step(expert.act(env.unwrapped.last_state))
            if info["success"] and first_true is None:
                first_true = t
            if terminated or truncated:
                break
        assert terminated and reward == 1.0 and first_true is not None and t == first_true + 1
        assert "success" in info["events"]
    finally:
        env.close()
    assert (tmp_path / "human" / "positives.jsonl").is_file()
