"""Any gymnasium env as a new user meets it (learners.training.gym_compat, `robot-rl train --env-id`): small envs built
here,
each with one trait of a third-party env: success under another info key, action bounds far wider than the demos'
actions, and readings of very different scales (a gripper at 0-255 beside positions in metres)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
import pytest
import torch

from learners.agents.config import AgentConfig
from learners.agents.policy import build_policy
from learners.agents.sac import SACAgent
from learners.training.config import TrainConfig
from learners.training.flags import build_train_parser, train_config
from learners.training.gym_compat import auto_action_box, demo_action_warning, parse_action_scale
from learners.training.train import build_run, train
from robot_rl.checkpoint import latest_checkpoint, load_checkpoint
from robot_rl.cli import main as cli_main
from robot_rl.episodes import Episode, save_episode
from robot_rl.errors import ConfigError
from robot_rl.metrics import read_metrics
from robot_rl.specs import EnvSpec

torch.set_num_threads(1)
TINY = ["--algo", "sac", "--hidden", "32", "--batch-size", "32", "--utd", "1", "--learning-starts", "100",
        "--eval-every", "100", "--eval-episodes", "2", "--checkpoint-every", "1000", "--replay-capacity", "2000"]


class SucceedEnv(gym.Env):  # type: ignore[type-arg]
    """Reports success as info['succeed'] (never 'success'): 10-step episodes, success when the last action > 0."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    action_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(2, np.float32), {}

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        self.t += 1
        ok = bool(action[0] > 0)
        return np.full(2, self.t / 10, np.float32), float(ok), False, self.t >= 10, {"succeed": ok}


class WideActionEnv(gym.Env):  # type: ignore[type-arg]
    """A 2-D point whose action is a displacement in metres with bounds +-1 m per step; the goal is 5 cm away and
    must be reached within 1 cm. Records the largest |action| it was ever given (class-wide)."""

    observation_space = gym.spaces.Box(-5.0, 5.0, (4,), np.float32)
    action_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    max_abs_action: ClassVar[float] = 0.0

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        self.pos = np.zeros(2)
        ang = self.np_random.uniform(0, 2 * np.pi)
        self.goal = 0.05 * np.array([np.cos(ang), np.sin(ang)])
        self.t = 0
        return self._obs(), {}

    def _obs(self) -> np.ndarray:
        return np.r_[self.pos, self.goal - self.pos].astype(np.float32)

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        a = np.asarray(action, np.float64)
        WideActionEnv.max_abs_action = max(WideActionEnv.max_abs_action, float(np.abs(a).max()))
        self.pos = self.pos + a
        self.t += 1
        ok = bool(np.linalg.norm(self.goal - self.pos) < 0.01)
        return self._obs(), float(ok), ok, self.t >= 20, {"success": ok}


class GripperScaleEnv(gym.Env):  # type: ignore[type-arg]
    """Observation: a position in metres (~0.1) and a gripper reading 0-255."""

    observation_space = gym.spaces.Box(np.array([-1.0, 0.0], np.float32), np.array([1.0, 255.0], np.float32))
    action_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def _obs(self) -> np.ndarray:
        return np.array([0.1 * self.np_random.standard_normal(), self.np_random.uniform(0, 255)], np.float32)

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        self.t += 1
        return self._obs(), 0.0, False, self.t >= 10, {}


for _id, _cls in (("RobotRLTest-Succeed-v0", SucceedEnv), ("RobotRLTest-WideAction-v0", WideActionEnv),
                  ("RobotRLTest-GripperScale-v0", GripperScaleEnv)):
    if _id not in gym.registry:
        gym.register(id=_id, entry_point=_cls)


def _train(args: list[str], out: Path) -> list[str]:
    lines: list[str] = []
    cfg = train_config(build_train_parser().parse_args([*args, "--out", str(out)]))
    train(cfg, out, log=lines.append)
    return lines


# ------------------------------------------------------------------ success under another key
def test_success_key_is_read_and_its_absence_is_reported(tmp_path: Path) -> None:
    base = ["--env-id", "RobotRLTest-Succeed-v0", *TINY, "--max-env-steps", "200"]
    lines = _train([*base, "--success-key", "succeed"], tmp_path / "with")
    rows = read_metrics(tmp_path / "with" / "metrics.jsonl")
    assert not any("never reported" in line for line in lines)
    assert 0.0 < rows[-1]["train_success_rate"] <= 1.0  # the random early policy succeeds in some episodes

    lines = _train(base, tmp_path / "without")
    warnings = [line for line in lines if "never reported info['success']" in line]
    assert len(warnings) == 1, lines  # once, not at every evaluation
    assert "--success-key succeed" in warnings[0]
    first_eval = next(i for i, line in enumerate(lines) if "eval success" in line)
    assert lines.index(warnings[0]) < first_eval, lines  # at the first episode end, before any evaluation
    assert "train_success_rate" not in read_metrics(tmp_path / "without" / "metrics.jsonl")[-1]


# ------------------------------------------------------------------ demos far inside the action bounds
def _wide_demos(directory: Path, episodes: int = 4) -> None:
    """Scripted demos: steps of at most 2.5 cm straight to the goal."""
    env = WideActionEnv()
    spec = EnvSpec.from_spaces("RobotRLTest-WideAction-v0", env.observation_space, env.action_space, 0.0)
    for i in range(episodes):
        obs, _ = env.reset(seed=i)
        frames, acts, rews, terms = [obs], [], [], []
        for _ in range(20):
            a = np.clip(obs[2:], -0.025, 0.025).astype(np.float32)
            obs, r, term, trunc, _ = env.step(a)
            frames.append(obs)
            acts.append(a)
            rews.append(r)
            terms.append(term)
            if term or trunc:
                break
        t = len(acts)
        save_episode(Episode({"obs": np.stack(frames)}, np.stack(acts), np.array(rews, np.float32),
                             np.array(terms), np.zeros(t, bool), np.ones(t, bool), np.array(terms),
                             task="RobotRLTest-WideAction-v0", spec=spec.to_dict()), directory)


def test_demo_action_range_is_compared_with_the_bounds(tmp_path: Path) -> None:
    acts = np.array([[0.025, -0.02], [-0.01, 0.025]])
    msg = demo_action_warning(acts, np.array([-1.0, -1.0]), np.array([1.0, 1.0]))
    assert msg is not None and "40x" in msg and "--action-scale auto" in msg
    assert demo_action_warning(acts, np.array([-0.03, -0.03]), np.array([0.03, 0.03])) is None
    assert "leave the env's bounds" in str(demo_action_warning(acts, np.array([-0.02] * 2), np.array([0.02] * 2)))
    # a dim no demo moves gets its own words, not a 1e12x ratio; the ratio covers the dims that move
    still = demo_action_warning(np.array([[0.1, 0.0], [-0.2, 0.0]]), np.array([-1.0, -1.0]), np.array([1.0, 1.0]))
    assert still is not None and "never move action dim(s) [1]" in still and "5x larger" in still, still
    assert "e+" not in still and "1000000" not in still
    only_still = demo_action_warning(np.zeros((3, 2)), np.array([-1.0, -1.0]), np.array([1.0, 1.0]))
    assert only_still is not None and "x larger" not in only_still and "never move action dim(s) [0, 1]" in only_still
    low, high = auto_action_box(acts, np.array([-1.0, -1.0]), np.array([1.0, 1.0]))
    np.testing.assert_allclose(low, [-0.025, -0.025])
    np.testing.assert_allclose(high, [0.025, 0.025])
    # a dim the demos never moved keeps 1 % of its bounds; gripper-like [0, 255] bounds scale around their centre
    low, high = auto_action_box(np.array([[0.0, 127.5]]), np.array([-1.0, 0.0]), np.array([1.0, 255.0]))
    np.testing.assert_allclose(low, [-0.01, 126.225])
    np.testing.assert_allclose(parse_action_scale("0.5", 3), [0.5, 0.5, 0.5])
    assert parse_action_scale("auto", 2) is None
    for bad in ("abc", "0", "1,2", "-1"):
        with pytest.raises(ConfigError, match="--action-scale"):
            parse_action_scale(bad, 3)


def test_action_scale_narrows_what_the_agent_can_do_in_training_and_eval(tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    demos = tmp_path / "demos"
    _wide_demos(demos)
    base = ["--env-id", "RobotRLTest-WideAction-v0", *TINY, "--max-env-steps", "150", "--demos", str(demos)]
    WideActionEnv.max_abs_action = 0.0
    _train(base, tmp_path / "plain")
    err = capsys.readouterr().err
    assert "[train] warning: the demos' actions use a small part of the env's action bounds" in err
    assert WideActionEnv.max_abs_action > 0.2  # the policy acts over the whole +-1 m

    WideActionEnv.max_abs_action = 0.0
    lines = _train([*base, "--action-scale", "auto"], tmp_path / "auto")
    assert "small part" not in capsys.readouterr().err
    assert any("action box" in line and "-0.025" in line for line in lines), lines
    saved = json.loads((tmp_path / "auto" / "config.json").read_text())
    np.testing.assert_allclose(saved["action_low"], [-0.025, -0.025], atol=1e-6)
    assert WideActionEnv.max_abs_action <= 0.025 + 1e-6
    # the demo buffer holds the demos in the agent's [-1, 1] over the narrowed box: the largest demo step is 1
    run = build_run(TrainConfig.from_dict(saved))
    assert run.demo is not None
    assert np.abs(run.demo.actions[run.demo.valid]).max() == pytest.approx(1.0, abs=1e-4)
    # `robot-rl eval` rebuilds the same box from the run's config
    WideActionEnv.max_abs_action = 0.0
    assert cli_main(["eval", "--checkpoint", str(tmp_path / "auto"), "--episodes", "2"]) == 0
    assert 0.0 < WideActionEnv.max_abs_action <= 0.025 + 1e-6

    _train([*base, "--action-scale", "0.1"], tmp_path / "fixed")
    np.testing.assert_allclose(json.loads((tmp_path / "fixed" / "config.json").read_text())["action_high"],
                               [0.1, 0.1], atol=1e-6)
    with pytest.raises(ConfigError, match="needs --demos"):
        _train(["--env-id", "RobotRLTest-WideAction-v0", *TINY, "--action-scale", "auto"], tmp_path / "nodemos")


def test_demo_actions_are_stored_in_the_agents_units(tmp_path: Path) -> None:
    # bounds +-2 (Pendulum-like): an env-unit demo action of 1.0 is 0.5 in the agent's [-1, 1]
    env = gym.make("Pendulum-v1")
    spec = EnvSpec.from_spaces("Pendulum-v1", env.observation_space, env.action_space, 0.0)
    obs = np.zeros((3, 3), np.float32)
    save_episode(Episode({"obs": obs}, np.array([[1.0], [-2.0]], np.float32), np.zeros(2, np.float32),
                         np.zeros(2, bool), np.array([False, True]), np.ones(2, bool), np.zeros(2, bool),
                         task="Pendulum-v1", spec=spec.to_dict()), tmp_path)
    run = build_run(TrainConfig(env_id="Pendulum-v1", demos=str(tmp_path), algo="sac",
                                hidden=16))
    assert run.demo is not None
    np.testing.assert_allclose(sorted(run.demo.actions[run.demo.valid, 0]), [-1.0, 0.5])


# ------------------------------------------------------------------ readings of very different scales
def test_obs_norm_uses_data_statistics_and_travels_with_the_policy(tmp_path: Path) -> None:
    lines = _train(["--env-id", "RobotRLTest-GripperScale-v0", *TINY, "--max-env-steps", "150", "--obs-norm"],
                   tmp_path / "run")
    assert any("observation normalisation from 100 online transitions" in line for line in lines), lines
    groups, meta = load_checkpoint(latest_checkpoint(tmp_path / "run" / "checkpoints"))
    state = groups["agent"]
    mean, inv_std = state["policy/encoder.state_norm.mean"], state["policy/encoder.state_norm.inv_std"]
    assert abs(mean[0]) < 0.05 and 100 < mean[1] < 155          # positions ~0, the gripper ~127
    assert 5 < 1 / inv_std[0] * 100 < 20 and 60 < 1 / inv_std[1] < 90  # std ~0.1 m and ~74 (uniform 0-255)
    np.testing.assert_array_equal(state["target_encoder/state_norm.mean"], mean)
    # an actor-side policy built from the config gets the statistics with the weights and acts the same
    cfg = AgentConfig.from_dict(meta["agent_config"])
    env = GripperScaleEnv()
    spec = EnvSpec.from_spaces("RobotRLTest-GripperScale-v0", env.observation_space, env.action_space, 0.0)
    agent = SACAgent(spec, cfg)
    agent.load_state_dict(state)
    policy = build_policy(spec, cfg, device="cpu")
    policy.load_trainable_state(agent.trainable_state())
    obs = np.array([0.05, 200.0], np.float32)
    np.testing.assert_array_equal(policy.act(obs, deterministic=True), agent.act(obs, deterministic=True))
    feats = agent.encoder({}, torch.tensor([[float(mean[0]), float(mean[1] + 1 / inv_std[1])]]))
    np.testing.assert_allclose(feats.detach().numpy(), [[0.0, 1.0]], atol=1e-5)
    with pytest.raises(ConfigError, match="obs_norm"):
        SACAgent(spec, AgentConfig(hidden_dims=(8,), device="cpu")).set_state_normalization({"obs": np.ones((4, 2))})


def test_train_shows_progress_between_evaluations_and_uses_the_cores(tmp_path: Path) -> None:
    """A progress line (env steps/s, updates/s, training success, ETA) comes between evaluations; --threads
    defaults to one per core (0), and an explicit count is kept."""
    import os

    import torch

    lines = _train(["--env-id", "RobotRLTest-Succeed-v0", *TINY, "--max-env-steps", "300", "--eval-every", "300",
                    "--success-key", "succeed", "--progress-every-s", "0.001", "--threads", "1"], tmp_path / "p")
    progress = [line for line in lines if "env steps/s" in line]
    first_eval = next(i for i, line in enumerate(lines) if "eval success" in line)
    assert progress and lines.index(progress[0]) < first_eval, lines
    assert "updates/s" in progress[-1] and "ETA" in progress[-1] and "training success" in progress[-1]
    assert torch.get_num_threads() == 1
    cfg = train_config(build_train_parser().parse_args(["--env-id", "RobotRLTest-Succeed-v0", "--out", "x"]))
    assert cfg.threads == 0 and cfg.progress_every_s == 30.0
    try:
        _train(["--env-id", "RobotRLTest-Succeed-v0", *TINY, "--max-env-steps", "20", "--eval-every", "20"],
               tmp_path / "q")
        assert torch.get_num_threads() == (os.cpu_count() or 1)
    finally:
        torch.set_num_threads(1)
