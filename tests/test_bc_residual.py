"""Behaviour-cloning pre-training (`robot-rl train-bc`, learners.cli.train_bc), the base-policy interface
(learners.agents.residual) and residual RL on a frozen base (AgentConfig.residual_base): on a small point-reaching env
built here whose scripted expert BC can clone, and on synthetic bases."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from point_reach import ENV_ID, PointReachEnv, point_reach_spec, record_point_reach

from learners.agents.config import AgentConfig
from learners.agents.policy import build_policy, load_base_policy, load_run_policy
from learners.agents.sac import SACAgent
from learners.training.bc import BCConfig, train_bc
from learners.training.config import TrainConfig
from learners.training.flags import build_bc_parser, build_train_parser, train_config
from learners.training.online import evaluate_episodes
from learners.training.train import train
from robot_rl.checkpoint import latest_checkpoint, load_checkpoint
from robot_rl.cli import main as cli_main
from robot_rl.errors import ConfigError, SpecMismatchError
from robot_rl.metrics import read_metrics
from robot_rl.specs import ArraySpec, EnvSpec

torch.set_num_threads(1)
SMALL = ["--set", "hidden_dims=64,64"]


def _spec() -> EnvSpec:
    return point_reach_spec()


@pytest.fixture(scope="module")
def bc_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, list[str]]:
    """(demo directory, a train-bc run directory, its log lines): 30 demos, 1500 BC steps."""
    root = tmp_path_factory.mktemp("bc")
    demos = record_point_reach(root / "demos", 30)
    out = root / "bc"
    args = build_bc_parser().parse_args(["--env-id", ENV_ID, "--demos", str(demos), "--out", str(out),
                                         "--steps", "1500", "--eval-every", "750", "--eval-episodes", "20",
                                         *SMALL])
    lines: list[str] = []
    bcfg = BCConfig(**{f: getattr(args, f) for f in BCConfig.__dataclass_fields__})
    tcfg = TrainConfig(env_id=ENV_ID, demos=str(demos), threads=1, seed=args.seed,
                       agent_set=tuple(args.agent_set))
    train_bc(tcfg, bcfg, out, log=lines.append)
    return demos, out, lines


# ------------------------------------------------------------------ robot-rl train-bc
def test_train_bc_clones_the_demos_and_reports_what_they_give(bc_run: tuple[Path, Path, list[str]]) -> None:
    _, out, lines = bc_run
    rows = read_metrics(out / "metrics.jsonl")
    assert [r["step"] for r in rows] == [750, 1500]
    assert rows[-1]["train_loss"] < rows[0]["train_loss"] < 1.0
    assert "holdout_loss" in rows[-1] and rows[-1]["holdout_loss"] < 0.05  # 3 of 30 episodes held out
    assert rows[-1]["success_rate"] >= 0.8, rows
    assert any("27 training episodes" in line and "3 held out" in line for line in lines), lines
    assert (out / "learning_curve.png").is_file() and (out / "agent_config.json").is_file()
    # an untrained policy of the same config does not reach the goals
    spec, cfg = _spec(), AgentConfig(hidden_dims=(64, 64), device="cpu")
    env = gym.make(ENV_ID)
    untrained = evaluate_episodes(env, build_policy(spec, cfg), episodes=20, seed=1_000_000)
    assert np.mean([r["success"] for r in untrained]) <= 0.2
    # numpy + JSON checkpoints (loaded with allow_pickle=False), and the safetensors export with its JSON sidecar
    ckpt = latest_checkpoint(out / "checkpoints")
    assert ckpt is not None
    groups, meta = load_checkpoint(ckpt)
    assert set(groups) == {"policy"} and meta["kind"] == "bc" and meta["agent_config"]["hidden_dims"] == [64, 64]
    side = json.loads((out / "policy.json").read_text())
    assert side["spec"] == spec.to_dict() and (out / "policy.safetensors").is_file()
    from safetensors.numpy import load_file

    exported = load_file(str(out / "policy.safetensors"))
    assert set(exported) == set(groups["policy"])
    for k, v in exported.items():
        np.testing.assert_array_equal(v, groups["policy"][k])


def test_eval_evaluates_a_train_bc_run(bc_run: tuple[Path, Path, list[str]],
                                       capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = bc_run
    assert cli_main(["eval", "--checkpoint", str(out), "--episodes", "10"]) == 0
    res = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert res["episodes"] == 10 and res["success_rate"] >= 0.7


def test_train_bc_refuses_bad_input_in_one_line(bc_run: tuple[Path, Path, list[str]], tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    demos, out, _ = bc_run
    base = ["train-bc", "--env-id", ENV_ID, "--demos", str(demos), *SMALL]
    cases = {
        "already holds a train-bc run": [*base, "--out", str(out)],
        "no readable episodes": ["train-bc", "--env-id", ENV_ID, "--demos", str(tmp_path / "none"),
                                 "--out", str(tmp_path / "a")],
        "steps=0 must be >= 1": [*base, "--steps", "0", "--out", str(tmp_path / "b")],
        "residual_base belongs on robot-rl train": [*base, "--set", f"residual_base={out}",
                                                    "--out", str(tmp_path / "c")],
        "unknown AgentConfig field": [*base, "--set", "hiden_dims=3", "--out", str(tmp_path / "d")],
    }
    (tmp_path / "none").mkdir()
    for want, argv in cases.items():
        assert cli_main(argv) == 1, want
        err = capsys.readouterr().err.strip()
        assert err.startswith("robot-rl train-bc: error:") and want in err and "\n" not in err, (want, err)


# ------------------------------------------------------------------ the base-policy interface
def _write_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str) -> str:
    name = f"rrl_test_base_{abs(hash(body)) % 10**8}"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(body))
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop(name, None)
    return name


BASES = """
import numpy as np
import torch

def constant(spec):
    return lambda obs: np.tile(np.array([[0.3, -0.5, 0.9]], np.float32), (len(obs["state"]), 1))

def chunked(spec):  # an action chunk of 4 steps (B, 4, A); the agent uses the first
    return lambda obs: torch.stack([torch.full((len(obs["state"]), 3), 0.1 * (h + 1)) for h in range(4)], 1)

def wrong_shape(spec):
    return lambda obs: np.zeros((len(obs["state"]), 2))

def from_state(spec):  # a base that depends on the observation: tanh of the first three state values
    return lambda obs: torch.tanh(torch.as_tensor(obs["state"])[:, :3])
"""


def _rspec() -> EnvSpec:
    return EnvSpec("t", (ArraySpec("state", (5,), "float32"),), ArraySpec("action", (3,), "float32", -1.0, 1.0), 10.0)


def _rcfg(**kw: Any) -> AgentConfig:
    base: dict[str, Any] = dict(ensemble_size=2, ensemble_subsample=2, critic_updates_per_actor_update=2,
                                batch_size=16, hidden_dims=(32, 32), device="cpu")
    base.update(kw)
    return AgentConfig(**base)


def test_base_policy_interface_actions_chunks_and_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mod = _write_module(tmp_path, monkeypatch, BASES)
    spec = _rspec()
    obs = {"state": np.zeros((4, 5), np.float32)}
    const = load_base_policy(f"py:{mod}:constant", spec)
    out = const(obs)
    assert out.dtype == torch.float32 and out.shape == (4, 3) and not out.requires_grad
    np.testing.assert_allclose(out.numpy(), np.tile([0.3, -0.5, 0.9], (4, 1)), rtol=1e-6)
    np.testing.assert_allclose(load_base_policy(f"py:{mod}:chunked", spec)(obs).numpy(), np.full((4, 3), 0.1),
                               rtol=1e-6)
    with pytest.raises(ConfigError, match=r"expected actions \(B, 3\)"):
        load_base_policy(f"py:{mod}:wrong_shape", spec)(obs)
    with pytest.raises(ConfigError, match="cannot import 'nope'"):
        load_base_policy(f"py:{mod}:nope", spec)
    with pytest.raises(ConfigError, match="py:MODULE:FACTORY"):
        load_base_policy("py:justone", spec)
    with pytest.raises(ConfigError, match="no such run directory"):
        load_base_policy(str(tmp_path / "missing"), spec)
    with pytest.raises(ConfigError, match="gripper_head"):
        AgentConfig(residual_base="x", gripper_head=True)
    with pytest.raises(ConfigError, match="residual_scale"):
        AgentConfig(residual_base="x", residual_scale=0.0)


def test_a_train_bc_run_loads_as_a_base_from_its_directory_or_policy_file(
        bc_run: tuple[Path, Path, list[str]]) -> None:
    _, out, _ = bc_run
    spec = _spec()
    env = PointReachEnv()
    obs = np.stack([env.reset(seed=i)[0] for i in range(8)])
    ref = load_run_policy(out, spec).act({"obs": obs}, deterministic=True, batched=True)
    for source in (out, out / "checkpoints", out / "policy.safetensors"):
        got = load_base_policy(str(source), spec)({"obs": obs}).numpy()
        np.testing.assert_allclose(got, ref, rtol=1e-6, atol=1e-7)
    other = EnvSpec.from_spaces("other", gym.spaces.Box(-1, 1, (4,)), gym.spaces.Box(-1, 1, (2,)), 0.0)
    with pytest.raises(SpecMismatchError, match="the base policy"):
        load_base_policy(str(out), other)


# ------------------------------------------------------------------ residual RL
def test_residual_policy_starts_as_the_base_and_stays_within_its_bound(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    mod = _write_module(tmp_path, monkeypatch, BASES)
    agent = SACAgent(_rspec(), _rcfg(residual_base=f"py:{mod}:from_state", residual_scale=0.2))
    rng = np.random.default_rng(0)
    for _ in range(20):
        state = rng.standard_normal(5).astype(np.float32)
        base = np.tanh(state[:3])
        np.testing.assert_allclose(agent.act({"state": state}, deterministic=True), base, atol=1e-6)
        a = agent.act({"state": state}, deterministic=False)
        assert np.all(np.abs(a - base) <= 0.2 + 1e-6) and np.all(np.abs(a) <= 1.0)
    # the actor network sees the features and the base's action
    assert agent.actor.trunk.hidden[0].in_features == 5 + 3


def test_residual_critic_scores_the_combined_action_and_the_correction_saturates(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With Q = -(a - target)^2 on the executed action, the actor moves its correction to target - base where that
    is inside the bound (dim 0: +0.1), and stops at the bound where it is not (dim 1: +0.5 > 0.2)."""
    mod = _write_module(tmp_path, monkeypatch, BASES)
    agent = SACAgent(_rspec(), _rcfg(residual_base=f"py:{mod}:constant", residual_scale=0.2, actor_lr=3e-3))
    base = torch.tensor([0.3, -0.5, 0.9])
    target = base + torch.tensor([0.1, 0.5, 0.0])
    seen: list[torch.Tensor] = []

    class FakeCritic(torch.nn.Module):
        def forward(self, x: torch.Tensor, members: object = None) -> torch.Tensor:
            seen.append(x[:, -3:].detach())
            return (-(x[:, -3:] - target).pow(2).sum(-1))[None, :, None]

    agent.critic = FakeCritic()  # type: ignore[assignment]
    n = 64
    states = torch.as_tensor(np.random.default_rng(1).standard_normal((n, 5)), dtype=torch.float32)
    obs = {"state": states.numpy()}
    base_actions = agent.policy.base_actions(obs)
    assert base_actions is not None
    feats = agent.encoder({}, states).detach()
    gen = torch.Generator().manual_seed(0)
    for _ in range(400):
        noise = torch.randn(n, 3, generator=gen)
        loss, _, _, _ = agent._actor_loss_eager(feats, noise, torch.tensor(1e-3), torch.zeros(n, 3), torch.zeros(n),
                                             base_actions)
        agent._step(agent.actor_opt, agent._actor_params, loss)
    # the critic saw executed actions: the base plus at most 0.2
    executed = torch.cat(seen)
    assert float((executed - base).abs().max()) <= 0.2 + 1e-6
    act = np.stack([agent.act({"state": s}, deterministic=True) for s in states.numpy()[:8]])
    np.testing.assert_allclose(act[:, 0], 0.4, atol=0.02)
    assert np.all(act[:, 1] > -0.5 + 0.19) and np.all(act[:, 1] <= -0.3 + 1e-6)  # saturated at base + 0.2
    np.testing.assert_allclose(act[:, 2], 0.9, atol=0.02)


def test_residual_agent_on_a_bc_base_updates_checkpoints_and_trains(bc_run: tuple[Path, Path, list[str]],
                                                                    tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    demos, bc_out, _ = bc_run
    spec = _spec()
    cfg = _rcfg(residual_base=str(bc_out), critic_updates_per_actor_update=2, batch_size=16)
    agent = SACAgent(spec, cfg)
    bc_policy = load_run_policy(bc_out, spec)
    # before any update the residual agent acts exactly as its base: the same evaluation
    env = gym.make(ENV_ID)
    got = evaluate_episodes(env, agent, episodes=5, seed=7)
    want = evaluate_episodes(env, bc_policy, episodes=5, seed=7)
    assert got == want
    base_weights = {k: v.copy() for k, v in bc_policy.trainable_state().items()}
    base_module = agent.policy.base.fn.policy  # type: ignore[union-attr]
    rng = np.random.default_rng(0)
    n = cfg.samples_per_update
    batch = {"obs": {"obs": rng.uniform(-0.3, 0.3, (n, 4)).astype(np.float32)},
             "next_obs": {"obs": rng.uniform(-0.3, 0.3, (n, 4)).astype(np.float32)},
             "actions": rng.uniform(-1, 1, (n, 2)).astype(np.float32), "rewards": rng.random(n).astype(np.float32),
             "terminated": np.zeros(n, bool)}
    for _ in range(5):
        metrics = agent.update(batch)
    assert np.isfinite(metrics["critic_loss"]) and np.isfinite(metrics["actor_loss"])
    for k, v in base_module.trainable_state().items():  # the base never trains
        np.testing.assert_array_equal(v, base_weights[k])
    # the checkpointed state holds the residual agent only (the base comes from its own file)
    state = agent.state_dict()
    assert not any("base" in k for k in state)
    again = SACAgent(spec, cfg)
    again.load_state_dict(state)
    o = np.array([0.05, 0.0, 0.1, -0.1], np.float32)
    np.testing.assert_array_equal(again.act(o, deterministic=True), agent.act(o, deterministic=True))

    # robot-rl train with --set residual_base=<the train-bc run>: no random warm-up, the base saved as an
    # absolute path, and robot-rl eval rebuilds the residual agent with its base
    run = tmp_path / "res"
    lines: list[str] = []
    monkey_cwd = bc_out.parent
    rel = bc_out.name
    import os

    old = os.getcwd()
    os.chdir(monkey_cwd)
    try:
        cfg_args = build_train_parser().parse_args(
            ["--env-id", ENV_ID, "--demos", str(demos), "--out", str(run), "--max-env-steps", "120",
             "--start-steps", "50", "--learning-starts", "60", "--eval-every", "120", "--eval-episodes", "3",
             "--set", f"residual_base={rel}", "--set", "hidden_dims=32,32", "--set", "ensemble_size=2",
             "--set", "critic_updates_per_actor_update=1", "--set", "batch_size=32"])
        train(train_config(cfg_args), run, log=lines.append)
    finally:
        os.chdir(old)
    assert any("no uniform random warm-up" in line for line in lines), lines
    saved = json.loads((run / "agent_config.json").read_text())
    assert saved["residual_base"] == str(bc_out.resolve())
    assert cli_main(["eval", "--checkpoint", str(run), "--episodes", "3"]) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["episodes"] == 3
    # a residual run is not a base
    with pytest.raises(ConfigError, match="itself a residual policy"):
        load_base_policy(str(run), spec)
