"""`robot-rl pretrain-encoder` on a few twin episodes: targets come from proprio + the recorded gripper command
only, the objective's loss falls, and the written file loads as a frozen encoder in the agent."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from demos.recording.demos import parse_record_demos_args, record_demos
from learners.agents.backbones import weights_architecture
from learners.agents.config import AgentConfig
from learners.agents.sac import SACAgent
from learners.training.pretrain_encoder import PretrainConfig, event_targets, pretrain_encoder
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
