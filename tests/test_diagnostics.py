"""`robot-rl train --diagnostics` (learners.training.diagnostics): each diagnostic on inputs with a known answer,
and the flag end to end on a short twin-reach state run with demos."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from learners.training.diagnostics import (
    bc_share,
    effective_rank,
    feature_drift,
    monte_carlo_returns,
    q_against_returns,
    srank,
)
from robot_rl.cli import main as cli_main
from robot_rl.metrics import read_metrics


def test_effective_rank_and_srank_of_known_matrices() -> None:
    rng = np.random.default_rng(0)
    q, _ = np.linalg.qr(rng.normal(size=(50, 8)))
    v, _ = np.linalg.qr(rng.normal(size=(16, 8)))
    equal2 = q[:, :2] @ v[:, :2].T * 3.0  # rank 2, two equal singular values
    assert effective_rank(equal2) == pytest.approx(2.0, abs=1e-9)
    assert srank(equal2) == 2
    skewed = q[:, :2] @ np.diag([3.0, 1.0]) @ v[:, :2].T  # p = (0.75, 0.25)
    assert effective_rank(skewed) == pytest.approx(math.exp(-(0.75 * math.log(0.75) + 0.25 * math.log(0.25))))
    assert effective_rank(np.outer(np.arange(1.0, 6.0), np.ones(4))) == pytest.approx(1.0)
    assert effective_rank(q[:, :8] @ v.T) == pytest.approx(8.0)  # full rank 8, equal singular values
    assert srank(q[:, :3] @ np.diag([100.0, 1.0, 0.5]) @ v[:, :3].T) == 2  # 101 / 101.5 < 0.99 < 1
    assert effective_rank(np.zeros((4, 3))) == 0.0 and srank(np.zeros((4, 3))) == 0


def test_feature_drift() -> None:
    a = np.ones((4, 3))
    assert feature_drift(a, a) == 0.0
    assert feature_drift(a, 1.5 * a) == pytest.approx(0.5)
    assert feature_drift(np.zeros((2, 2)), np.zeros((2, 2))) == 0.0
    assert feature_drift(np.zeros((2, 2)), np.ones((2, 2))) == math.inf


def test_monte_carlo_returns_of_hand_made_episodes() -> None:
    # ring of 8 slots: episode A = slots 5, 6, 7, 0 (wraps; terminated with reward 1), an invalid slot 1 (the
    # frame after A's end), episode B = slots 2, 3 (truncated, rewards 0.5 then 0), slot 4 never written
    rewards = np.array([1.0, 0.0, 0.5, 0.0, 0.0, 0.0, 0.0, 0.0])
    terminated = np.array([1, 0, 0, 0, 0, 0, 0, 0], bool)
    truncated = np.array([0, 0, 0, 1, 0, 0, 0, 0], bool)
    valid = np.array([1, 0, 1, 1, 0, 1, 1, 1], bool)
    g, known, cut = monte_carlo_returns(rewards, terminated, truncated, valid, 0.9)
    assert g[[5, 6, 7, 0]] == pytest.approx([0.9 ** 3, 0.9 ** 2, 0.9, 1.0])
    assert g[[2, 3]] == pytest.approx([0.5, 0.0])
    assert known.tolist() == [True, False, True, True, False, True, True, True]
    assert cut.tolist() == [False, False, True, True, False, False, False, False]
    # an episode still running (no end stored) has no known return
    _, known2, _ = monte_carlo_returns(np.ones(3), np.zeros(3, bool), np.zeros(3, bool), np.ones(3, bool), 0.9)
    assert not known2.any()


def test_q_against_returns_and_bc_share() -> None:
    g = np.array([0.0, 0.5, 1.0])
    out = q_against_returns(2.0 * g + 0.1, g, "demo")
    assert out["diag_demo_bias"] == pytest.approx(np.mean(g) + 0.1)
    assert out["diag_demo_corr"] == pytest.approx(1.0)
    assert q_against_returns(np.ones(3), g, "policy")["diag_policy_corr"] is None  # a constant Q: no correlation
    window = [{"actor_loss": 2.0, "bc_loss": 0.1}, {"actor_loss": 4.0, "bc_loss": 0.1, "bc_kept": 0.5}]
    # actor loss 3.0 = policy term 0.0 + 30 x 0.1: the BC term is all of it
    assert bc_share(window, 30.0)["diag_bc_share"] == pytest.approx(1.0)
    out = bc_share([{"actor_loss": -1.0, "bc_loss": 0.1}], 10.0)  # policy term -2, BC term 1 -> 1 / 3
    assert out["diag_bc_share"] == pytest.approx(1.0 / 3.0) and out["diag_policy_term"] == pytest.approx(-2.0)
    assert bc_share(window, 30.0)["diag_bc_kept"] == pytest.approx(0.5)
    assert bc_share(window, 0.0)["diag_bc_share"] is None


def test_train_diagnostics_flag_end_to_end(tmp_path: Path) -> None:
    demos = tmp_path / "demos"
    assert cli_main(["record-demos", "--task", "twin-reach", "--obs-mode", "state", "--episodes", "3", "--out",
                     str(demos)]) == 0
    out = tmp_path / "run"
    assert cli_main(["train", "--task", "twin-reach", "--obs-mode", "state", "--demos", str(demos),
                     "--max-env-steps", "300", "--eval-every", "150", "--eval-episodes", "1", "--learning-starts",
                     "50", "--batch-size", "32", "--hidden", "32", "--device", "cpu", "--diagnostics",
                     "--out", str(out)]) == 0
    rows = read_metrics(out / "metrics.jsonl")
    assert len(rows) >= 2
    first, last = rows[0], rows[-1]
    for row in rows:
        assert row["diag_demo_rows"] > 0 and row["diag_policy_rows"] > 0
        assert 1.0 <= row["diag_encoder_rank"] <= row["diag_encoder_dim"]
        assert 1 <= row["diag_encoder_srank"] <= row["diag_encoder_dim"]
        assert row["diag_demo_batch_share"] == pytest.approx(0.5)  # RLPD's symmetric sampling
        assert 0.0 < row["diag_demo_data_share"] < 1.0
        assert 0.0 < row["diag_bc_share"] <= 1.0  # the twin recipe's BC term
        assert row["diag_policy_std"] > 0.0 and len(row["diag_policy_std_dims"]) >= 1
        assert -1.0 <= row["diag_demo_corr"] <= 1.0
        assert row["diag_demo_mc"] > 0.0  # every demo reaches its goal: a positive discounted return
        assert row["diag_demo_bias"] == pytest.approx(row["diag_demo_q"] - row["diag_demo_mc"])
    assert first["diag_encoder_drift"] is None
    # the state 'encoder' is the identity: the same probe observations give the same features
    assert last["diag_encoder_drift"] == pytest.approx(0.0)


def test_cameras_selects_the_observed_cameras_and_refuses_nonsense() -> None:
    from learners.training.config import TrainConfig
    from learners.training.run_env import make_run_env
    from robot_rl.errors import ConfigError

    cfg = TrainConfig(task="twin-reach", obs_mode="pixels", image_size=32, cameras="front")
    env = make_run_env(cfg)
    try:
        assert list(env.observation_space["images"].spaces) == ["front"]
    finally:
        env.close()
    with pytest.raises(ConfigError, match="cameras"):
        TrainConfig(task="twin-reach", obs_mode="state", cameras="front")
    with pytest.raises(ConfigError, match="at least one camera"):
        TrainConfig(task="twin-reach", obs_mode="pixels", cameras=" , ")


def test_diagnostics_refuses_forward_backward() -> None:
    from learners.training.config import TrainConfig
    from robot_rl.errors import ConfigError

    with pytest.raises(ConfigError, match="diagnostics"):
        TrainConfig(task="twin-cube-relocate", obs_mode="state", forward_backward=True, diagnostics=True)
