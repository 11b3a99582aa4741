"""Reward classifiers without the twin: card and weights on disk, label loading and its errors, the split by
episode, training on synthetic frames, the run-time reward model (gates, audit, wrapper, human key)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from learners.rewards.classifier import (
    CARD_FILE,
    WEIGHTS_FILE,
    ClassifierCard,
    ClassifierModelConfig,
    RewardClassifier,
    load_classifier,
    save_classifier,
)
from learners.rewards.labels import load_labels, split_by_episode
from learners.rewards.reward_model import (
    ClassifierReward,
    HumanReward,
    ProprioPredicate,
    RewardAudit,
    RewardModelWrapper,
    make_reward_model,
    parse_reward_source,
)
from learners.rewards.training import TrainClassifierConfig, train_classifier
from robot_rl.episodes import Episode, episode_to_arrays, save_episode
from robot_rl.errors import ConfigError

SMALL = ClassifierModelConfig(conv_channels=(8, 16), image_latent_dim=16, hidden_dim=32)


def _frame(positive: bool, rng: np.random.Generator, size: int = 16) -> np.ndarray:
    """A noisy grey image; positives carry a bright square at a random place."""
    img = rng.integers(60, 120, (size, size, 3)).astype(np.uint8)
    if positive:
        r, c = rng.integers(0, size - 6, 2)
        img[r:r + 6, c:c + 6] = 240
    return img


def write_labels(directory: Path, episodes: int, seed: int = 0, size: int = 16, all_negative: bool = False,
                 cameras: tuple[str, ...] = ("front", "wrist")) -> list[Path]:
    """Synthetic label episodes: every other episode has a success run in its second half."""
    rng = np.random.default_rng(seed)
    paths = []
    for e in range(episodes):
        t = 12
        labels = [False] * t
        if not all_negative and e % 2 == 0:
            labels[6:10] = [True] * 4
        obs = [{"state": np.r_[np.zeros(12), 0.04 if i >= 7 else 0.08, np.zeros(6)].astype(np.float32),
                "images": {c: _frame(i > 0 and labels[i - 1], rng, size) for c in cameras}} for i in range(t + 1)]
        ep = Episode.from_steps(obs, np.zeros((t, 7)), [float(v) for v in labels], [False] * t, [False] * t,
                                success=labels, task="twin-pick-cube", info={"labels": "info", "segment": "x"})
        paths.append(save_episode(ep, directory))
    return paths


def constant_classifier(directory: Path, prob: float, size: int = 16, k: int = 1,
                        predicate: tuple[str, ...] = (), cameras: tuple[str, ...] = ("images/front",),
                        threshold: float = 0.5) -> Path:
    """A saved classifier that answers `prob` for every frame (zero output weights, bias = logit(prob))."""
    model = RewardClassifier({c: (size, size, 3) for c in cameras}, SMALL)
    with torch.no_grad():
        model.out.weight.zero_()
        model.out.bias.fill_(math.log(prob / (1 - prob)))
    card = ClassifierCard(task="twin-pick-cube", cameras=list(cameras), image_size=(size, size),
                          model=SMALL.to_dict(), threshold=threshold, target_precision=0.99,
                          gate={"k": k, "predicate": list(predicate)})
    save_classifier(directory, model, card)
    return directory


# ------------------------------------------------------------------------------------------ card and weights


def test_save_load_round_trip_predicts_the_same(tmp_path: Path) -> None:
    model = RewardClassifier({"images/front": (16, 16, 3), "images/wrist": (16, 16, 3)}, SMALL)
    card = ClassifierCard(task="t", cameras=["images/front", "images/wrist"], image_size=(16, 16),
                          model=SMALL.to_dict(), threshold=0.7, target_precision=0.99, gate={"k": 2, "predicate": []})
    save_classifier(tmp_path / "c", model, card)
    loaded = load_classifier(tmp_path / "c")
    rng = np.random.default_rng(0)
    imgs = {c: rng.integers(0, 256, (5, 16, 16, 3), dtype=np.uint8) for c in card.cameras}
    np.testing.assert_allclose(loaded.predict_proba(imgs), model.predict_proba(imgs), rtol=1e-6)
    data = json.loads((tmp_path / "c" / CARD_FILE).read_text())
    assert data["format"] == "robot-rl-reward-classifier" and data["threshold"] == 0.7
    assert len(data["training"]["weights_sha256"]) == 64
    assert loaded.card.gate == {"k": 2, "predicate": []} and loaded.card.image_size == (16, 16)


def test_conv_strides_default_to_a_stride_1_first_layer_and_old_cards_load_with_stride_2(tmp_path: Path) -> None:
    from learners.agents.encoders import ConvBackbone

    assert ClassifierModelConfig().strides() == (1, 2, 2, 2) and SMALL.strides() == (1, 2)
    assert ClassifierModelConfig(conv_strides=(2, 2, 2, 2)).strides() == (2, 2, 2, 2)
    # the first layer keeps the full resolution: 64 -> 62 -> 30 -> 14 -> 6 (all stride 2: 64 -> 31 -> 15 -> 7 -> 3)
    for strides, hw in (((1, 2, 2, 2), (6, 6)), ((2, 2, 2, 2), (3, 3))):
        net = ConvBackbone(3, (4, 4, 4, 4), strides)
        assert net.output_hw(64, 64) == hw and net(torch.zeros(1, 64, 64, 3, dtype=torch.uint8)).shape[2:] == hw
    with pytest.raises(ConfigError, match="conv_strides"):
        ClassifierModelConfig(conv_channels=(8, 16), conv_strides=(1,))
    with pytest.raises(ConfigError, match="conv strides"):
        ConvBackbone(3, (8, 16), (1, 0))
    # a card written before the field (no "conv_strides" in its model) was all stride 2 and still loads as that
    old = ClassifierModelConfig(conv_channels=(8, 16), image_latent_dim=16, hidden_dim=32, conv_strides=(2, 2))
    model = RewardClassifier({"images/front": (16, 16, 3)}, old)
    legacy = {k: v for k, v in old.to_dict().items() if k != "conv_strides"}
    save_classifier(tmp_path / "old", model, ClassifierCard(
        task="t", cameras=["images/front"], image_size=(16, 16), model=legacy, threshold=0.5,
        target_precision=0.99, gate={"k": 1, "predicate": []}))
    loaded = load_classifier(tmp_path / "old")
    assert loaded.card.model_config().strides() == (2, 2)
    imgs = {"images/front": np.random.default_rng(0).integers(0, 256, (3, 16, 16, 3), dtype=np.uint8)}
    np.testing.assert_allclose(loaded.predict_proba(imgs), model.predict_proba(imgs), rtol=1e-6)


def test_classifier_directory_errors_name_the_file_and_field(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="classifier directory does not exist"):
        load_classifier(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match=rf"empty: no {CARD_FILE}"):
        load_classifier(tmp_path / "empty")
    d = constant_classifier(tmp_path / "c", 0.9)
    card = json.loads((d / CARD_FILE).read_text())
    (d / WEIGHTS_FILE).rename(d / "moved.safetensors")
    with pytest.raises(ConfigError, match=rf"c: no {WEIGHTS_FILE}"):
        load_classifier(d)
    (d / "moved.safetensors").rename(d / WEIGHTS_FILE)
    for field, value, msg in (("threshold", 2.0, "field 'threshold'"), ("image_size", [16], "field 'image_size'"),
                              ("gate", {"k": 0}, "field 'gate'"), ("version", 7, "field 'version'")):
        (d / CARD_FILE).write_text(json.dumps({**card, field: value}))
        with pytest.raises(ConfigError, match=rf"{CARD_FILE}: {msg}"):
            load_classifier(d)
    (d / CARD_FILE).write_text(json.dumps({k: v for k, v in card.items() if k != "cameras"}))
    with pytest.raises(ConfigError, match="missing field 'cameras'"):
        load_classifier(d)
    (d / CARD_FILE).write_text(json.dumps({**card, "image_size": [32, 32]}))   # weights built for 16x16
    with pytest.raises(ConfigError, match=rf"{WEIGHTS_FILE}: weights do not match the model in .*{CARD_FILE}"):
        load_classifier(d)
    (d / CARD_FILE).write_text("{not json")
    with pytest.raises(ConfigError, match="not a readable JSON card"):
        load_classifier(d)


def test_camera_checks_against_the_card(tmp_path: Path) -> None:
    loaded = load_classifier(constant_classifier(tmp_path / "c", 0.9, cameras=("images/front", "images/wrist")))
    loaded.check_cameras({"images/front": (16, 16, 3), "images/wrist": (16, 16, 3)}, "x")
    with pytest.raises(ConfigError, match=r"ep\.npz: camera 'images/wrist' is 32x32x3, the classifier .*"
                                          r"card\.json: image_size\) expects 16x16x3"):
        loaded.check_cameras({"images/front": (16, 16, 3), "images/wrist": (32, 32, 3)}, "ep.npz")
    with pytest.raises(ConfigError, match=r"env: no camera 'images/wrist'.*cameras\) needs"):
        loaded.check_cameras({"images/front": (16, 16, 3)}, "env")


# ------------------------------------------------------------------------------------------ labels and split


def test_labels_load_frames_after_each_step_and_split_by_episode(tmp_path: Path) -> None:
    write_labels(tmp_path / "a", 6)
    write_labels(tmp_path / "b", 4, seed=1)
    data = load_labels([tmp_path / "a", tmp_path / "b"])
    assert len(data) == 120 and data.cameras == ["images/front", "images/wrist"] and data.image_size == (16, 16)
    assert data.state is not None and data.state.shape == (120, 19)
    # success[t] labels observation t + 1: the first frame of each episode is observation 1
    assert data.step[:3].tolist() == [1, 2, 3] and data.labels[6:10].all() and not data.labels[:6].any()
    assert [s["episodes"] for s in data.sources()] == [6, 4]
    train, val = split_by_episode(data, 0.25, 2, seed=0)
    assert not set(train) & set(val) and sorted(train + val) == list(range(10))
    assert any(data.episodes[e].positives for e in val) and any(data.episodes[e].positives for e in train)
    assert not set(data.episode[data.frames_of(val)]) & set(train)     # no frame of a val episode in train
    assert split_by_episode(data, 0.25, 2, seed=0) == (train, val)
    assert split_by_episode(data, 0.25, 2, seed=1) != (train, val)
    assert len(split_by_episode(data, 0.1, 4, seed=0)[1]) >= 4      # topped up to min_episodes


def test_label_errors_are_one_line_and_name_file_and_field(tmp_path: Path) -> None:
    write_labels(tmp_path / "neg", 4, all_negative=True)
    with pytest.raises(ConfigError, match=r"neg: all 48 frames .* labelled failure \(field 'success'\)"):
        load_labels([tmp_path / "neg"])
    with pytest.raises(ConfigError, match="no episode files"):
        (tmp_path / "none").mkdir()
        load_labels([tmp_path / "none"])
    write_labels(tmp_path / "few", 3)
    with pytest.raises(ConfigError, match=r"3 episode\(s\); the split by episode needs at least 2 for training "
                                          r"and 2 for validation"):
        split_by_episode(load_labels([tmp_path / "few"]), 0.25, 2, 0)
    # one success episode only
    write_labels(tmp_path / "one", 1)
    write_labels(tmp_path / "one_neg", 4, all_negative=True)
    with pytest.raises(ConfigError, match=r"only 1 episode\(s\) with success labels"):
        split_by_episode(load_labels([tmp_path / "one", tmp_path / "one_neg"]), 0.25, 2, 0)
    # a NaN in a label file: refused, not skipped
    paths = write_labels(tmp_path / "nan", 4)
    arrays = episode_to_arrays(Episode.from_steps([{"state": np.full(3, np.nan, np.float32)}] * 2, np.zeros((1, 7)),
                                                  [0.0], [False], [False]))
    np.savez(paths[1], **arrays)
    with pytest.raises(ConfigError, match=r"episode_000001\.npz: field 'obs/state' has a non-finite value"):
        load_labels([tmp_path / "nan"])
    # a camera of another size in a later file
    write_labels(tmp_path / "mixed", 2)
    write_labels(tmp_path / "mixed", 1, size=24)
    with pytest.raises(ConfigError, match=r"episode_000002\.npz: field obs/images/front is 24x24x3, .*"
                                          r"episode_000000\.npz has 16x16x3"):
        load_labels([tmp_path / "mixed"])
    write_labels(tmp_path / "cams", 2, cameras=("front",))
    with pytest.raises(ConfigError, match=r"no camera 'images/wrist' \(field obs/images/wrist\)"):
        load_labels([tmp_path / "cams"], cameras=["images/front", "images/wrist"])


def test_training_on_synthetic_frames_learns_and_writes_a_card(tmp_path: Path) -> None:
    write_labels(tmp_path / "l", 16)
    cfg = TrainClassifierConfig(model=SMALL, max_steps=150, eval_every=50, batch_size=32, lr=3e-3, predicate="none",
                                shift_pad=1, precision_confidence=0.0)
    res = train_classifier(cfg, [tmp_path / "l"], tmp_path / "c", log=lambda s: None)
    v = res.card.metrics["validation"]
    assert v["roc_auc"] > 0.95 and v["precision"] >= 0.9 and v["recall"] >= 0.8, v
    loaded = load_classifier(tmp_path / "c")
    val_idx = res.data.frames_of(res.val_episodes)
    np.testing.assert_allclose(loaded.predict_proba(res.data.subset_images(val_idx)), res.val_probs, rtol=1e-5)
    card = json.loads((tmp_path / "c" / CARD_FILE).read_text())
    assert set(card["training"]["val_episodes"]).isdisjoint(card["training"]["train_episodes"])
    assert card["label_sources"][0]["episodes"] == 16 and card["calibration"]
    assert [r["k"] for r in card["metrics"]["gate_by_k_validation"]] == [1, 2, 3, 4, 5]
    y_train = res.data.labels[res.data.frames_of(res.train_episodes)]
    assert card["training"]["pos_weight"] == pytest.approx((~y_train).sum() / y_train.sum())
    with pytest.raises(ConfigError, match="already exists and is not empty"):
        train_classifier(cfg, [tmp_path / "l"], tmp_path / "c", log=lambda s: None)


# ------------------------------------------------------------------------------------------ run-time reward


def test_predicate_parsing_and_evaluation() -> None:
    pred = ProprioPredicate.parse("state[12]>=0.01, state[12]<=0.07,state[2]>-0.2")
    states = np.zeros((3, 19))
    states[:, 12] = [0.039, 0.0, 0.039]
    states[:, 2] = [-0.1, -0.1, -0.23]
    assert pred.evaluate(states).tolist() == [True, False, False]
    assert pred({"state": states[0]}) and not pred({"state": states[1]})
    with pytest.raises(ConfigError, match="expected 'state\\[i\\] OP value'"):
        ProprioPredicate.parse("gripper>0")
    with pytest.raises(ConfigError, match="indexes state\\[12\\] but the state has 7 values"):
        pred.check_dim(7, "labels")


def _obs(bright: bool, width: float = 0.04) -> dict[str, Any]:
    img = np.full((16, 16, 3), 200 if bright else 10, np.uint8)
    return {"images": {"front": img}, "state": np.r_[np.zeros(12), width, np.zeros(6)].astype(np.float32)}


class _BrightnessClassifier:
    """Stands in for a LoadedClassifier: logit +10 for bright frames, -10 for dark ones."""

    def __init__(self, k: int = 2, predicate: tuple[str, ...] = ()) -> None:
        self.card = ClassifierCard(task="t", cameras=["images/front"], image_size=(16, 16), model=SMALL.to_dict(),
                                   threshold=0.5, target_precision=0.99, gate={"k": k, "predicate": list(predicate)})

        def model(batch: dict[str, torch.Tensor]) -> torch.Tensor:
            return (batch["images/front"].float().mean(dim=(1, 2, 3)) > 100).float() * 20 - 10

        self.model = model

    def check_cameras(self, shapes: Any, where: str) -> None:
        pass


def test_classifier_reward_gates_on_k_frames_and_the_predicate_and_logs_positives(tmp_path: Path) -> None:
    audit = RewardAudit(tmp_path / "audit")
    rm = ClassifierReward(_BrightnessClassifier(k=2, predicate=("state[12]>=0.01",)), audit=audit)
    seq = [_obs(True), _obs(False), _obs(True), _obs(True, width=0.0), _obs(True)]
    out = [rm.step(o, {"success": False}, episode=0, t=i + 1) for i, o in enumerate(seq)]
    assert [d.positive for d in out] == [True, False, True, True, True]
    assert [d.run for d in out] == [1, 0, 1, 2, 3]
    # frame 4 has 2 positives in a row but the gripper is closed on nothing: the predicate holds it back
    assert [d.success for d in out] == [False, False, False, False, True] and out[4].reward == 1.0
    audit.close()
    rows = [json.loads(line) for line in (tmp_path / "audit" / "positives.jsonl").read_text().splitlines()]
    # the negative frame 2 comes back as a lead frame ("positive": false) before the positive frame 3 it precedes
    assert [r["step"] for r in rows] == [1, 2, 3, 4, 5]
    assert [r["positive"] for r in rows] == [True, False, True, True, True]
    assert [r["rewarded"] for r in rows] == [False, False, False, False, True]
    assert rows[3]["predicate_ok"] is False and rows[4]["true_success"] is False
    assert all((tmp_path / "audit" / r["image"]).read_bytes()[:4] == b"\x89PNG" for r in rows)
    rm.reset()
    assert rm.step(_obs(True), {}, 1, 1).run == 1


class _FakeEnv:
    """Episodes of 6 steps; bright frames from step 3 on; the env's own success from step 4 on."""

    def __init__(self) -> None:
        self.t = 0
        self.closed = False
        self.action_space = "box"

    @property
    def unwrapped(self) -> _FakeEnv:
        return self

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[dict[str, Any], dict[str, Any]]:
        self.t = 0
        return _obs(False), {}

    def step(self, action: Any) -> tuple[dict[str, Any], float, bool, bool, dict[str, Any]]:
        self.t += 1
        return _obs(self.t >= 3), 0.0, False, self.t >= 6, {"success": self.t >= 4}

    def close(self) -> None:
        self.closed = True


def test_wrapper_takes_reward_and_termination_from_the_model_and_keeps_true_success() -> None:
    env = RewardModelWrapper(_FakeEnv(), ClassifierReward(_BrightnessClassifier(k=2)))
    assert env.action_space == "box" and env.unwrapped is env.env
    env.reset(seed=0)
    steps = [env.step(None) for _ in range(4)]
    rewards = [s[1] for s in steps]
    terminated = [s[2] for s in steps]
    assert rewards == [0.0, 0.0, 0.0, 1.0] and terminated == [False, False, False, True]
    info = steps[-1][4]
    assert info["success"] is True and info["reward_success"] is True and info["reward_prob"] > 0.99
    assert "reward_false_positive" not in info
    # k=1 ends the episode at step 3, before the env's true success: counted
    env1 = RewardModelWrapper(_FakeEnv(), ClassifierReward(_BrightnessClassifier(k=1)))
    env1.reset()
    out = [env1.step(None) for _ in range(3)]
    assert out[-1][2] and out[-1][4]["reward_false_positive"] is True
    assert env1.stats()["ended_without_true_success"] == 1 and env1.stats()["false_end_share"] == 1.0
    env1.close()
    assert env1.env.closed


def test_human_reward_uses_the_success_key_and_needs_events() -> None:
    h = HumanReward()
    assert not h.step({}, {"events": ()}, 0, 1).success
    d = h.step({}, {"events": ("intervene", "success")}, 0, 2)
    assert d.success and d.reward == 1.0
    with pytest.raises(ConfigError, match="reports no teleop events"):
        HumanReward().step({}, {"success": True}, 0, 1)


def test_reward_sources(tmp_path: Path) -> None:
    assert parse_reward_source("env") == ("env", None)
    assert parse_reward_source("classifier:runs/c") == ("classifier", "runs/c")
    for bad in ("classifier:", "oracle", "Human"):
        with pytest.raises(ConfigError, match="expected env, human or classifier:DIR"):
            parse_reward_source(bad)
    assert make_reward_model("env") is None and isinstance(make_reward_model("human"), HumanReward)
    d = constant_classifier(tmp_path / "c", 0.9)
    with pytest.raises(ConfigError, match=r"the env's observation: camera 'images/front' is 64x64x3"):
        make_reward_model(f"classifier:{d}", {"images/front": (64, 64, 3)})
    with pytest.raises(ConfigError, match=r"no card\.json"):
        make_reward_model(f"classifier:{tmp_path}", {"images/front": (16, 16, 3)})


def test_frozen_resnet10_backbone_from_a_local_file_stays_frozen(tmp_path: Path) -> None:
    """encoder='resnet10': the backbone comes from a local safetensors file, is never trained, and the saved
    classifier (backbone included) is self-contained; without the file it is a one-line config error."""
    from learners.agents.encoders import ResNet10, save_backbone_weights

    torch.manual_seed(0)
    weights = tmp_path / "resnet10.safetensors"
    save_backbone_weights(ResNet10(), weights)
    write_labels(tmp_path / "l", 8, size=32)
    model_cfg = ClassifierModelConfig(encoder="resnet10", encoder_weights=str(weights), image_latent_dim=16,
                                      hidden_dim=32)
    cfg = TrainClassifierConfig(model=model_cfg, max_steps=6, eval_every=3, batch_size=8, predicate="none",
                                precision_confidence=0.0)
    res = train_classifier(cfg, [tmp_path / "l"], tmp_path / "c", log=lambda s: None)
    from safetensors.torch import load_file

    original = load_file(str(weights))
    trained = res.model.state_dict()
    for name, t in original.items():
        torch.testing.assert_close(trained[f"encoders.images__front.backbone.{name}"], t)
    weights.unlink()   # the classifier directory does not need the file any more
    loaded = load_classifier(tmp_path / "c")
    imgs = {c: np.full((2, 32, 32, 3), 128, np.uint8) for c in loaded.card.cameras}
    np.testing.assert_allclose(loaded.predict_proba(imgs), res.model.predict_proba(imgs), rtol=1e-5)
    with pytest.raises(ConfigError, match="encoder='resnet10' needs a local safetensors file"):
        ClassifierModelConfig(encoder="resnet10")
