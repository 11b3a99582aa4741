"""`robot-rl pretrain-encoder` on a few twin episodes: targets come from proprio + the recorded gripper command
only, the objective's loss falls, and the written file loads as a frozen encoder in the agent."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from demos.recording.demos import parse_record_demos_args, record_demos
from learners.agents.backbones import weights_architecture
from learners.agents.config import AgentConfig
from learners.agents.sac import SACAgent
from learners.training.pretrain_encoder import PretrainConfig, event_targets, pretrain_encoder, with_run_encoder
from robot_rl.episodes import Episode
from robot_rl.errors import ConfigError, ShapeError
from robot_rl.specs import ArraySpec, EnvSpec

torch.set_num_threads(1)


def _episode(grip: list[float]) -> Episode:
    t = len(grip)
    state = np.zeros((t + 1, 19), np.float32)
    state[:, 0] = np.arange(t + 1)  # tcp x = frame index
    actions = np.zeros((t, 7), np.float32)
    actions[:, -1] = grip
    z = np.zeros(t, np.float32)
    return Episode({"state": state, "images/front": np.zeros((t + 1, 8, 8, 3), np.uint8)}, actions, z, z.astype(bool),
                   z.astype(bool), z.astype(bool), z.astype(bool))


def test_event_targets_point_at_the_next_gripper_command_change() -> None:
    y = event_targets(_episode([-1, -1, -1, 1, 1, -1, -1]))   # close at step 3, open at step 5, 8 frames
    assert y.shape == (8, 9)
    np.testing.assert_array_equal(y[:, 0], np.arange(8))
    np.testing.assert_array_equal(y[:, 3], [3, 3, 3, 3, 5, 5, 7, 7])
    np.testing.assert_array_equal(y[:, 6], [3, 2, 1, 0, 1, 0, 1, 0])  # the event relative to the TCP now
    np.testing.assert_array_equal(event_targets(_episode([1, 1, 1]))[:, 3], [3, 3, 3, 3])  # no event: the last frame
    # 0 = "no gripper change" (label recordings): -1, 0, -1 is no event; -1, 0, 1 is one, where the 1 is commanded
    np.testing.assert_array_equal(event_targets(_episode([-1, 0, -1, 0, 1, 0]))[:, 3], [4, 4, 4, 4, 4, 6, 6])
    ep = _episode([1, 1])
    del ep.observations["state"]
    with pytest.raises(ShapeError, match="proprio 'state'"):
        event_targets(ep)


def test_pretraining_on_twin_episodes_lowers_the_loss_and_loads_frozen(tmp_path: Path) -> None:
    demos = tmp_path / "demos"
    assert record_demos(parse_record_demos_args(["--task", "twin-pick-cube", "--episodes", "3", "--out", str(demos),
                                                 "--obs-mode", "pixels", "--image-size", "32"])) == 0
    out = tmp_path / "w" / "cell.safetensors"
    report = pretrain_encoder(PretrainConfig(episodes=(str(demos),), out=str(out), steps=40, batch_size=16,
                                             lr=1e-3, seed=0))
    assert report.train_episodes == 2 and report.val_episodes == 1 and report.frames > 40
    assert report.fit_loss_last < 0.75 * report.fit_loss_first, report  # all training frames, no augmentation
    assert report.val_loss_last < report.val_loss_first, report        # and a held-out episode
    assert Path(str(out) + ".json").is_file() and weights_architecture(out) == "resnet10"
    spec = EnvSpec("img", (ArraySpec("images/front", (32, 32, 3), "uint8", 0, 255),
                           ArraySpec("state", (19,), "float32")), ArraySpec("action", (7,), "float32", -1, 1), 10.0)
    agent = SACAgent(spec, AgentConfig(encoder="resnet10", encoder_weights=str(out), image_latent_dim=16,
                                       proprio_latent_dim=8, hidden_dims=(16,), ensemble_size=2, device="cpu"))
    assert agent.encoder.all_backbones_frozen
    # the file keeps the heads: their nine predictions per camera are the agent's image features
    targets = SACAgent(spec, AgentConfig(encoder="resnet10", encoder_weights=str(out), encoder_features="targets",
                                         proprio_latent_dim=8, hidden_dims=(16,), ensemble_size=2, device="cpu"))
    assert targets.encoder.out_dim == 8 + 9
    with pytest.raises(ConfigError, match="at least one episode"):
        PretrainConfig(episodes=())
    with pytest.raises(ConfigError, match="no such episode"):
        pretrain_encoder(PretrainConfig(episodes=(str(tmp_path / "absent"),), out=str(out)))


def test_a_pixel_run_with_demos_pretrains_its_encoder_first_and_a_resume_reuses_it(tmp_path: Path) -> None:
    """The pixel defaults (cameras + demos on an arm task) pretrain the encoder on the run's demos into
    OUT/encoder.safetensors before training; the run's agent config names that file with its target features, and
    a resumed run loads the same file instead of pretraining again."""
    from robot_rl.cli import main as cli_main

    demos, out = tmp_path / "demos", tmp_path / "run"
    assert record_demos(parse_record_demos_args(["--task", "twin-pick-cube", "--episodes", "2", "--out", str(demos),
                                                 "--obs-mode", "pixels", "--image-size", "32"])) == 0
    argv = ["train", "--task", "twin-pick-cube", "--obs-mode", "pixels", "--image-size", "32", "--demos", str(demos),
            "--out", str(out), "--eval-every", "20", "--eval-episodes", "1", "--batch-size", "8", "--hidden", "16",
            "--device", "cpu", "--set", "encoder_pretrain_steps=4", "--set", "image_latent_dim=8"]
    assert cli_main([*argv, "--max-env-steps", "20"]) == 0
    weights = out / "encoder.safetensors"
    cfg = json.loads((out / "agent_config.json").read_text())
    assert (cfg["encoder"], cfg["encoder_features"], cfg["encoder_weights"]) == ("resnet10", "both",
                                                                                 str(weights.resolve()))
    report = json.loads(Path(str(weights) + ".json").read_text())
    assert report["steps"] == 4 and report["cameras"] == ["images/front", "images/wrist"]
    stamp = weights.stat().st_mtime_ns
    assert cli_main([*argv, "--max-env-steps", "30", "--resume"]) == 0
    assert weights.stat().st_mtime_ns == stamp  # reused, not pretrained again
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert rows[-1]["env_step"] == 30
    # a warm start builds the source's encoder (its file), not one pretrained anew
    warm = tmp_path / "warm"
    assert cli_main([*argv[:argv.index("--out")], "--out", str(warm), *argv[argv.index("--out") + 2:],
                     "--max-env-steps", "10", "--init-from", str(out), "--warmup-steps", "5"]) == 0
    assert json.loads((warm / "agent_config.json").read_text())["encoder_weights"] == str(weights.resolve())
    assert not (warm / "encoder.safetensors").exists()


def test_the_run_encoder_needs_demos_and_leaves_other_encoders_alone(tmp_path: Path) -> None:
    want = AgentConfig(encoder="resnet10", encoder_pretrain_steps=10, encoder_features="both")
    with pytest.raises(ConfigError, match=r"pretrained on the run's demos and this run has none.*--demos"):
        with_run_encoder(want, [], tmp_path)
    for cfg in (AgentConfig(encoder="conv", encoder_pretrain_steps=10), want.replace(encoder_weights="/w.safetensors"),
                want.replace(encoder_pretrain_steps=0)):
        assert with_run_encoder(cfg, [], tmp_path) == cfg
    assert not (tmp_path / "encoder.safetensors").exists()


def test_the_learner_prepares_its_encoder_in_a_step_of_its_own(tmp_path: Path) -> None:
    """`robot-rl learner --prepare-only` (what `robot-rl sim` runs before the learner) pretrains the encoder the
    pixel defaults ask for into OUT and exits without serving; the same command again reuses the file; a run without
    demos has nothing to prepare."""
    from robot_rl.cli import main as cli_main

    demos, out = tmp_path / "demos", tmp_path / "run"
    assert record_demos(parse_record_demos_args(["--task", "twin-pick-cube", "--episodes", "2", "--out", str(demos),
                                                 "--obs-mode", "pixels", "--image-size", "32"])) == 0
    argv = ["learner", "--task", "twin-pick-cube", "--obs-mode", "pixels", "--image-size", "32", "--demos",
            str(demos), "--out", str(out), "--device", "cpu", "--set", "encoder_pretrain_steps=3", "--prepare-only"]
    assert cli_main(argv) == 0
    weights = out / "encoder.safetensors"
    stamp = weights.stat().st_mtime_ns
    assert json.loads(Path(str(weights) + ".json").read_text())["steps"] == 3
    assert not (out / "checkpoints").exists() and not (out / "agent_config.json").exists()  # nothing served
    assert cli_main(argv) == 0 and weights.stat().st_mtime_ns == stamp
    state_out = tmp_path / "state"
    assert cli_main(["learner", "--task", "twin-pick-cube", "--out", str(state_out), "--device", "cpu",
                     "--prepare-only"]) == 0
    assert not (state_out / "encoder.safetensors").exists()
