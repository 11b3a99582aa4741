"""learners.replay.gate_credit: a classifier's gated success credited to the step whose frame first showed it
(`robot-rl train --credit-first-positive`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from learners.replay.frame_align import Transition
from learners.replay.gate_credit import GateCredit
from robot_rl.errors import ConfigError


def _step(t: int, reward: float = 0.0, terminated: bool = False) -> Transition:
    return Transition({"state": np.full(2, t, np.float32)}, np.full(2, t, np.float32), reward,
                      {"state": np.full(2, t + 1, np.float32)}, terminated, False)


def _run(credit: GateCredit, length: int, steps_back: int | None) -> list[Transition]:
    out: list[Transition] = []
    for t in range(length):
        last = t == length - 1
        out += credit.push(_step(t, 1.0 if last and steps_back is not None else 0.0, last))
    return out + credit.end(steps_back)


def test_a_gated_success_ends_the_stored_episode_at_the_step_it_was_first_seen() -> None:
    credit = GateCredit(hold_steps=4)        # k = 3 plus one step of camera lag
    out = _run(credit, 10, steps_back=3)     # the gate fired at step 9: the first positive frame showed step 6
    assert [int(t.action[0]) for t in out] == list(range(7))
    assert out[-1].terminated and out[-1].reward == 1.0 and not out[-1].truncated
    assert not any(t.terminated for t in out[:-1]) and all(t.reward == 0.0 for t in out[:-1])
    assert credit.dropped == 3 and credit.credited == 1 and credit.held == 0


def test_other_ends_release_everything_unchanged_and_a_long_run_credits_the_oldest_held_step() -> None:
    credit = GateCredit(hold_steps=4)
    out = _run(credit, 6, steps_back=None)   # a time limit or the env's own end
    assert [int(t.action[0]) for t in out] == list(range(6)) and credit.dropped == 0
    out = _run(credit, 10, steps_back=7)     # a run longer than the gate's k (a predicate held it): capped
    assert [int(t.action[0]) for t in out] == list(range(7)) and out[-1].terminated and credit.dropped == 3
    out = _run(credit, 2, steps_back=3)      # an episode shorter than the hold: its first step takes the credit
    assert [int(t.action[0]) for t in out] == [0] and out[0].reward == 1.0 and out[0].terminated
    assert _run(GateCredit(0), 3, steps_back=2)[-1].action[0] == 2       # off: passes through
    assert _run(credit, 5, steps_back=0)[-1].action[0] == 4              # the gate at its first frame: unchanged


def test_terminate_last_and_bad_holds() -> None:
    credit = GateCredit(2)
    assert not credit.terminate_last()
    credit.push(_step(0))
    assert credit.terminate_last() and credit.end(None)[0].terminated
    for bad in (-1, 2.0, True):
        with pytest.raises(ConfigError, match="hold_steps"):
            GateCredit(bad)  # type: ignore[arg-type]


def test_the_training_loop_stores_the_episode_up_to_the_first_positive_frame(tmp_path: Path) -> None:
    """The twin's pick-cube (state) with a classifier that fires on every frame and a gate of k = 2, one step of
    camera lag: the wrapper ends each episode at step 2; credited, the stored episode is one step long."""
    from learners.rewards.classifier import load_classifier
    from learners.rewards.reward_model import ClassifierReward, RewardModelWrapper
    from learners.training.config import TrainConfig
    from learners.training.online import train_online
    from learners.training.session import TrainSession
    from learners.training.train import build_run
    from tests.test_reward_classifier import constant_classifier

    cls = constant_classifier(tmp_path / "always", 0.999, size=16, k=2, cameras=("images/front", "images/wrist"))
    assert load_classifier(cls).card.gate["k"] == 2
    for credit in (False, True):
        cfg = TrainConfig(task="twin-pick-cube", obs_mode="state", reward=f"classifier:{cls}", faithful=True,
                          device="cpu", hidden=16, batch_size=8, ensemble=2, max_env_steps=6, start_steps=100,
                          learning_starts=100, camera_latency_ms=100.0, credit_first_positive=credit)
        run = build_run(cfg, reward_audit=tmp_path / f"audit{credit}")
        try:
            assert isinstance(run.env, RewardModelWrapper) and isinstance(run.env.model, ClassifierReward)
            session = TrainSession(run, tmp_path / f"run{credit}", log=lambda s: None)
            loop = session.loop_config()
            assert (loop.credit_hold_steps, loop.credit_lag_steps) == ((3, 1) if credit else (0, 0))
            rows = list(train_online(run.env, run.agent, run.online, loop, counters=run.counters))
            session.window = rows
            logged = session.metrics_row([{"success": True, "return": 1.0}], None)
            valid = run.online.valid
            rewards = run.online.fields["rewards"][valid].tolist()
            terminated = run.online.fields["terminated"][valid].tolist()
        finally:
            run.close()
        # 3 episodes the gate ends at their 2nd step (k = 2); credited 2 - 1 + 1 = 2 steps back: capped at the first
        assert (rewards, terminated) == (([1.0] * 3, [True] * 3) if credit else ([0.0, 1.0] * 3, [False, True] * 3))
        # each episode's row reports the run's counts so far (credited: one success and one dropped step per episode)
        counts = [(r.get("credited_successes"), r.get("credit_dropped_steps")) for r in rows]
        assert counts == ([(1, 1), (2, 2), (3, 3)] if credit else [(None, None)] * 3)
        assert (logged.get("credited_successes"), logged.get("credit_dropped_steps")) == ((3, 3) if credit else
                                                                                          (None, None))


def test_the_flag_needs_a_classifier_reward(tmp_path: Path) -> None:
    from learners.training.config import TrainConfig

    with pytest.raises(ConfigError, match="credit_first_positive"):
        TrainConfig(task="twin-pick-cube", credit_first_positive=True)
