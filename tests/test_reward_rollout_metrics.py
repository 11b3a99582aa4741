"""The reward classifier's frame precision and recall on the policy's own rollouts (learners.rewards.metrics.
FrameConfusion through RewardModelWrapper), and their rows in a training run's metrics.jsonl. On the twin the env
knows the true success, so each frame's classifier decision (prob >= threshold, before the gate) is compared with it:
a twin-only diagnostic.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")

from learners.rewards.metrics import FrameConfusion, SuccessOnsets
from learners.rewards.reward_model import ClassifierReward, RewardModelWrapper
from tests.test_reward_classifier import _BrightnessClassifier, _FakeEnv, constant_classifier

pytestmark = pytest.mark.filterwarnings("ignore:.*Box observation space m.*:UserWarning")


def test_frame_confusion_counts_and_window() -> None:
    conf = FrameConfusion()
    for positive, true in [(True, True), (True, False), (False, True), (False, False), (True, True)]:
        conf.add(positive, true)
    s = conf.summary()
    assert (s["frame_tp"], s["frame_fp"], s["frame_fn"], s["frame_tn"]) == (2, 1, 1, 1)
    assert s["frame_precision"] == pytest.approx(2 / 3) and s["frame_recall"] == pytest.approx(2 / 3)
    assert conf.window()["window_frame_tp"] == 2
    w = conf.window()  # nothing since: undefined, not 0
    assert w["window_frame_precision"] is None and w["window_frame_recall"] is None and w["window_frame_tn"] == 0
    conf.add(False, False)
    assert conf.summary()["frame_tn"] == 2 and conf.window()["window_frame_tn"] == 1


def _onsets_of(*episodes: list[tuple[bool, bool]]) -> dict[str, int]:
    onsets = SuccessOnsets()
    for frames in episodes:
        for positive, true in frames:
            onsets.add(positive, true)
        onsets.end()
    onsets.end()  # no frame since: changes nothing
    return onsets.counts


def test_success_onsets_say_when_the_first_positive_comes_against_the_first_true_frame() -> None:
    F, T = False, True
    counts = _onsets_of(
        [(F, F), (T, T), (T, T)],              # on time
        [(F, F), (F, T), (F, T), (T, T)],      # two steps late: its two false negatives are lateness
        [(T, F), (T, T)],                      # early
        [(F, T), (F, T)],                      # missed: false negatives, but not lateness
        [(T, F), (F, F)],                      # a positive, never a true frame
        [(F, F)],                              # neither
        [(F, F), (F, T), (T, T), (F, T), (T, T)],  # one step late, then a dropout (not lateness)
    )
    assert counts == {"onset_early": 1, "onset_on_time": 1, "onset_late": 2, "onset_late_steps": 3,
                      "onset_missed": 1, "onset_without_truth": 1, "frame_fn_late": 3}


class _TrueEarlyEnv(_FakeEnv):
    """The fake env with the true success from step 2 on, before the classifier's bright frames (step 3)."""

    def step(self, action: Any) -> Any:
        obs, r, term, trunc, _ = super().step(action)
        return obs, r, term, trunc, {"success": self.t >= 2}


def test_the_wrapper_reports_each_episode_s_onset() -> None:
    early = RewardModelWrapper(_FakeEnv(), ClassifierReward(_BrightnessClassifier(k=10)))
    _episode(early)
    assert early.stats()["onset_early"] == 1 and early.stats()["onset_late"] == 0
    late = RewardModelWrapper(_TrueEarlyEnv(), ClassifierReward(_BrightnessClassifier(k=10)))
    _episode(late)
    late.reset()  # an episode cut short (no terminated / truncated) is closed by the next reset
    for _ in range(3):
        late.step(None)
    late.reset()
    s = late.stats()
    assert (s["onset_late"], s["onset_late_steps"], s["frame_fn_late"], s["onset_early"]) == (2, 2, 2, 0)
    # with frames one step late, the first positive (step 3) is two steps before its scene's truth (step 5)
    lagged = RewardModelWrapper(_LateFakeEnv(), ClassifierReward(_BrightnessClassifier(k=10)))
    _episode(lagged)
    assert lagged.stats()["onset_early"] == 1


def _episode(env: RewardModelWrapper) -> None:
    env.reset()
    for _ in range(6):
        env.step(None)


def test_wrapper_compares_each_frame_decision_with_the_true_success() -> None:
    # the fake env: frames bright (the classifier says success) from step 3, the true success from step 4 on;
    # a gate k = 10 never ends the episode, so all 6 frames are judged
    env = RewardModelWrapper(_FakeEnv(), ClassifierReward(_BrightnessClassifier(k=10)))
    _episode(env)
    s = env.stats()
    assert (s["frame_tp"], s["frame_fp"], s["frame_fn"], s["frame_tn"]) == (3, 1, 0, 2)
    assert s["frame_precision"] == pytest.approx(0.75) and s["frame_recall"] == 1.0
    assert env.frame_window()["window_frame_fp"] == 1
    _episode(env)
    assert env.frame_window()["window_frame_tp"] == 3 and env.stats()["frame_tp"] == 6


class _LateFakeEnv(_FakeEnv):
    """The fake env with a twin config saying its frames are one control period late."""

    class config:  # stands in for RobotEnvConfig
        camera_latency_ms = 100.0
        control_hz = 10.0


def test_with_a_camera_latency_the_frame_is_judged_against_the_truth_when_it_was_rendered() -> None:
    env = RewardModelWrapper(_LateFakeEnv(), ClassifierReward(_BrightnessClassifier(k=10)))
    _episode(env)
    s = env.stats()
    # frame t compared with the truth of step t-1 (step 1 with the reset's, which reports none: skipped):
    # steps 2..6: positive F T T T T vs truth F F F T T
    assert (s["frame_tp"], s["frame_fp"], s["frame_fn"], s["frame_tn"]) == (2, 2, 0, 1)


@pytest.mark.parametrize("late", [False, True])
def test_the_audit_log_judges_each_frame_by_the_scene_it_shows(tmp_path: Path, late: bool) -> None:
    """The audit row's true_success is that of the step the frame was rendered at: with frames one step late the
    frame of the step the truth turns true still shows the scene before it (--true-success would otherwise label
    the boundary frame a success)."""
    import json

    from learners.rewards.reward_model import RewardAudit

    audit = RewardAudit(tmp_path / "audit")
    env = RewardModelWrapper(_LateFakeEnv() if late else _FakeEnv(),
                             ClassifierReward(_BrightnessClassifier(k=10), audit=audit))
    _episode(env)
    audit.close()
    rows = [json.loads(line) for line in (tmp_path / "audit" / "positives.jsonl").read_text().splitlines()]
    # positive frames at steps 3..6 (the two before them logged as lead frames); the truth turns true at step 4
    assert [(r["step"], r["positive"]) for r in rows[:2]] == [(1, False), (2, False)]
    rows = rows[2:]
    assert [r["step"] for r in rows] == [3, 4, 5, 6]
    assert [r["true_success"] for r in rows] == ([False, False, True, True] if late else [False, True, True, True])


def test_a_wrapper_without_a_classifier_or_a_truth_reports_no_frame_metrics() -> None:
    class _NoTruth(_FakeEnv):
        def step(self, action: Any) -> Any:
            obs, r, term, trunc, info = super().step(action)
            info.pop("success")
            return obs, r, term, trunc, info

    env = RewardModelWrapper(_NoTruth(), ClassifierReward(_BrightnessClassifier(k=10)))
    _episode(env)
    assert "frame_precision" not in env.stats() and env.frame_window() == {}


@pytest.mark.parametrize("prob", [0.999, 0.001])
def test_training_on_the_twin_logs_frame_precision_and_recall_per_evaluation(tmp_path: Path, prob: float) -> None:
    pytest.importorskip("mujoco")
    from learners.training.config import TrainConfig
    from learners.training.train import train
    from robot_rl.metrics import read_metrics

    cls = constant_classifier(tmp_path / "cls", prob, size=16, k=2, cameras=("images/front", "images/wrist"))
    cfg = TrainConfig(task="twin-reach", obs_mode="state", reward=f"classifier:{cls}", device="cpu", hidden=16,
                      batch_size=8, ensemble=2, learning_starts=4, start_steps=100, max_env_steps=12, eval_every=6,
                      eval_episodes=1, checkpoint_every=1000)
    train(cfg, tmp_path / "run", log=lambda *a, **k: None)
    rows = [r for r in read_metrics(tmp_path / "run" / "metrics.jsonl") if r["env_step"] > 0]
    # evaluations come at episode ends: every 2 steps when the classifier always fires (k = 2), else at the run's end
    assert [r["env_step"] for r in rows] == ([6, 12] if prob > 0.5 else [12])
    last = rows[-1]
    judged = sum(last[f"reward_frame_{k}"] for k in ("tp", "fp", "fn", "tn"))
    assert judged == 12  # every training frame, each compared once
    assert sum(r[f"reward_window_frame_{k}"] for r in rows for k in ("tp", "fp", "fn", "tn")) == 12
    if prob > 0.5:  # always positive: only true and false positives
        assert last["reward_frame_fn"] == last["reward_frame_tn"] == 0
        assert last["reward_frame_precision"] == pytest.approx(last["reward_frame_tp"] / 12)
    else:  # never positive: precision undefined
        assert last["reward_frame_tp"] == last["reward_frame_fp"] == 0 and last["reward_frame_precision"] is None
