"""Classification critic (AgentConfig.critic_loss='hl_gauss', Farebrother et al. 2024): the projection of a scalar
target onto the value bins (learners.agents.nets.HLGauss), the cross-entropy loss and the expected-value readers of the
agent against hand computations, learning a regression-like batch, config validation, checkpoints, the actor-side
policy, and the JAX backend's refusal."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch

from learners.agents.agent import make_agent
from learners.agents.config import AgentConfig
from learners.agents.nets import HLGauss
from learners.agents.options import parse_set
from learners.agents.policy import build_policy, tanh_gaussian
from learners.agents.sac import SACAgent
from robot_rl.errors import ConfigError, ShapeError
from robot_rl.specs import ArraySpec, EnvSpec

torch.set_num_threads(1)


def _spec() -> EnvSpec:
    return EnvSpec("t", (ArraySpec("state", (5,), "float32"),), ArraySpec("action", (3,), "float32", -1.0, 1.0),
                   10.0)


def _cfg(**kw: object) -> AgentConfig:
    base: dict = dict(ensemble_size=3, ensemble_subsample=2, critic_updates_per_actor_update=2, batch_size=8,
                      hidden_dims=(16, 16), device="cpu", critic_loss="hl_gauss", hl_gauss_bins=21,
                      hl_gauss_range=(-1.0, 3.0), discount=0.9)
    base.update(kw)
    return AgentConfig(**base)


def _batch(n: int, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    return {"obs": {"state": rng.standard_normal((n, 5)).astype(np.float32)},
            "next_obs": {"state": rng.standard_normal((n, 5)).astype(np.float32)},
            "actions": rng.uniform(-1, 1, (n, 3)).astype(np.float32),
            "rewards": rng.uniform(0, 1, n).astype(np.float32),
            "terminated": rng.random(n) < 0.3}


def _projection_by_hand(target: float, v_min: float, v_max: float, bins: int, sigma: float) -> np.ndarray:
    """The Gaussian's mass per bin by numerical integration of its density (no erf), renormalised."""
    t = min(max(target, v_min), v_max)
    edges = np.linspace(v_min, v_max, bins + 1)
    out = np.empty(bins)
    for i in range(bins):
        x = np.linspace(edges[i], edges[i + 1], 2001)
        out[i] = np.trapezoid(np.exp(-0.5 * ((x - t) / sigma) ** 2), x)
    return out / out.sum()


# ------------------------------------------------------------------------------------------------ projection
def test_projection_keeps_the_mean_sums_to_one_and_matches_integration() -> None:
    hl = HLGauss(-1.0, 4.0, bins=50, sigma_ratio=0.75)
    w = hl.bin_width
    assert w == pytest.approx(0.1) and hl.sigma == pytest.approx(0.075)
    assert torch.allclose(hl.centres[[0, -1]], torch.tensor([-0.95, 3.95]))
    # targets at least 2 bins inside the support, off and on bin centres
    targets = torch.linspace(-1.0 + 2 * w, 4.0 - 2 * w, 97)
    p = hl.project(targets)
    assert p.shape == (97, 50) and bool((p >= 0).all())
    assert torch.allclose(p.sum(-1), torch.ones(97), atol=1e-5)
    mean = p @ hl.centres
    assert float((mean - targets).abs().max()) < w / 10
    # the same numbers as integrating the density bin by bin
    for t in (0.0, 1.234, 3.5):
        want = _projection_by_hand(t, -1.0, 4.0, 50, 0.075)
        np.testing.assert_allclose(hl.project(torch.tensor(t)).numpy(), want, atol=2e-5)


def test_targets_outside_the_support_clip_and_edges_pull_inward() -> None:
    hl = HLGauss(-1.0, 4.0, bins=50, sigma_ratio=0.75)
    for outside, edge in ((7.0, 4.0), (4.0001, 4.0), (-3.0, -1.0), (-1e6, -1.0)):
        assert torch.equal(hl.project(torch.tensor(outside)), hl.project(torch.tensor(edge)))
    # a target on an edge loses the Gaussian's outer half: its projection's mean sits inside, about a half-normal's
    # mean (0.8 sigma) plus the bins' discretisation away, which is what the docstring warns about
    top = float(hl.project(torch.tensor(4.0)) @ hl.centres)
    assert 4.0 - 1.2 * hl.sigma < top < 4.0 - 0.6 * hl.sigma
    q = hl.expected(torch.log(hl.project(torch.tensor([0.3, 2.0]))))
    assert torch.allclose(q, torch.tensor([0.3, 2.0]), atol=hl.bin_width / 10)
    with pytest.raises(ValueError, match="HLGauss"):
        HLGauss(1.0, 1.0, bins=11, sigma_ratio=0.75)


def test_a_fresh_critic_starts_near_zero_not_at_the_support_midpoint() -> None:
    cfg = _cfg(hl_gauss_range=None, hl_gauss_bins=101, discount=0.95, ensemble_size=4, hidden_dims=(64, 64))
    agent = SACAgent(_spec(), cfg)
    v_min, v_max = cfg.hl_gauss_support
    assert (v_min + v_max) / 2 > 9.0  # the midpoint a plain xavier-initialised output layer would start near
    x = torch.as_tensor(np.random.default_rng(0).standard_normal((256, 8)), dtype=torch.float32)
    with torch.no_grad():
        q = agent.q_values(x)
        tq = agent.q_values(x, target=True)
    assert q.shape == (4, 256) and torch.equal(q, tq)
    assert float(q.abs().max()) < 0.5, float(q.abs().max())


# ------------------------------------------------------------------------------------------------ the loss
def test_critic_loss_is_the_cross_entropy_toward_the_min_expected_target() -> None:
    """_critic_loss by hand: target = returns + bootstrap x min over the chosen target members of the expected
    Q (then the Monte-Carlo floor), the loss = cross-entropy of every member's logits toward the target's
    Gaussian over the bins, mean over members and rows."""
    agent = SACAgent(_spec(), _cfg(ensemble_size=3, mc_lower_bound=True))
    with torch.no_grad():  # make the target critics differ from the online ones
        for p in agent.target_critic.parameters():
            p.add_(0.3 * torch.randn_like(p))
    rng = np.random.default_rng(1)
    n = 6
    feats = torch.as_tensor(rng.standard_normal((n, 5)), dtype=torch.float32)
    arm = torch.as_tensor(rng.uniform(-1, 1, (n, 3)), dtype=torch.float32)
    target_in = torch.as_tensor(rng.standard_normal((n, 8)), dtype=torch.float32)
    returns = torch.tensor([0.0, 1.0, 0.5, 0.0, 0.2, 9.0])  # the last one lands above the support: clipped
    bootstrap = torch.tensor([0.9, 0.0, 0.9, 0.9, 0.9, 0.0])
    floor = torch.tensor([-np.inf, -np.inf, -np.inf, 2.5, -np.inf, -np.inf])  # row 3: a Monte-Carlo return
    members = torch.tensor([2, 0])

    edges = np.linspace(-1.0, 3.0, 22)
    centres = (edges[:-1] + edges[1:]) / 2
    sigma = 0.75 * 4.0 / 21

    def expected(logits: np.ndarray) -> np.ndarray:
        e = np.exp(logits - logits.max(-1, keepdims=True))
        return (e / e.sum(-1, keepdims=True)) @ centres

    with torch.no_grad():
        t_logits = agent.target_critic(target_in).numpy().astype(np.float64)  # (3, n, bins)
        logits = agent.critic(torch.cat([feats, arm], -1)).numpy().astype(np.float64)
    tq = expected(t_logits[[2, 0]]).min(0)
    target = np.maximum(returns.numpy() + bootstrap.numpy() * tq, floor.numpy())
    assert target[3] == 2.5 and target[5] == 9.0
    probs = np.empty((n, 21))
    for b in range(n):
        t = min(max(target[b], -1.0), 3.0)
        cdf = np.array([0.5 * (1 + math.erf((e - t) / (math.sqrt(2) * sigma))) for e in edges])
        probs[b] = np.diff(cdf) / (cdf[-1] - cdf[0])
    log_soft = logits - logits.max(-1, keepdims=True)
    log_soft = log_soft - np.log(np.exp(log_soft).sum(-1, keepdims=True))
    want_loss = float(-(probs[None] * log_soft).sum(-1).mean())

    loss, info = agent._critic_loss_eager(feats, arm, target_in, torch.zeros(n), returns, bootstrap, members,
                                          torch.tensor(0.0), floor)
    assert float(loss.detach()) == pytest.approx(want_loss, rel=1e-5)
    assert float(info["target_q_mean"]) == pytest.approx(float(target.mean()), rel=1e-5)
    assert float(info["q_mean"]) == pytest.approx(float(expected(logits).mean()), rel=1e-5, abs=1e-6)
    assert float(info["hl_gauss_clipped_share"]) == pytest.approx(1 / 6)
    assert float(info["mc_bound_share"]) == pytest.approx(1 / 6)


def test_actor_loss_reads_the_ensemble_mean_of_the_expected_q() -> None:
    agent = SACAgent(_spec(), _cfg(bc_weight=1.0, bc_q_filter=True))
    n = 8
    feats = torch.as_tensor(np.random.default_rng(2).standard_normal((n, 5)), dtype=torch.float32)
    noise = torch.randn(n, 3, generator=torch.Generator().manual_seed(0))
    human = torch.zeros(n)  # no human rows: the loss is -Q (alpha 0)
    loss, _, _, _ = agent._actor_loss_eager(feats, noise, torch.tensor(0.0), torch.zeros(n, 3), human)
    with torch.no_grad():
        mean, log_std = agent.actor(feats)
        a, _ = tanh_gaussian(mean, log_std, noise)
        logits = agent.critic(torch.cat([feats, a], -1))  # (3, n, bins)
        q = (torch.softmax(logits, -1) @ agent.hl_gauss.centres).mean(0)  # type: ignore[union-attr]
    assert float(loss.detach()) == pytest.approx(-float(q.mean()), rel=1e-5)


def test_update_runs_with_every_q_reader_and_the_gripper_head_stays_mse() -> None:
    spec = _spec()
    cfg = _cfg(bc_weight=1.0, bc_q_filter=True, mc_lower_bound=True, gripper_head=True, n_step=1)
    agent = SACAgent(spec, cfg)
    batch = _batch(16)
    batch["intervention"] = np.arange(16) % 2 == 0
    batch["actions"][:, -1] = np.sign(batch["actions"][:, -1])
    batch["mc_returns"] = np.full(16, 2.5, np.float32)
    batch["mc_valid"] = np.arange(16) < 4
    m = agent.update(batch)
    assert {"critic_loss", "q_mean", "hl_gauss_clipped_share", "bc_kept", "gripper_loss", "mc_bound_share"} <= set(m)
    assert all(np.isfinite(v) for v in m.values())
    assert agent.critic.out.weight.shape == (3, 16, 21)
    assert agent.gripper is not None and agent.gripper(torch.zeros(2, 5)).shape == (2, 3)  # one Q per command


def test_critic_learns_terminal_rewards_as_its_expected_value() -> None:
    """Terminal rows: the target is the reward; the expected value of the learned distribution goes to it."""
    rng = np.random.default_rng(3)
    n = 32
    states = rng.standard_normal((n, 5)).astype(np.float32)
    actions = rng.uniform(-1, 1, (n, 3)).astype(np.float32)
    rewards = rng.uniform(0, 1, n).astype(np.float32)
    batch = {"obs": {"state": states}, "next_obs": {"state": states}, "actions": actions, "rewards": rewards,
             "terminated": np.ones(n, bool)}
    agent = SACAgent(_spec(), _cfg(hl_gauss_range=None, hl_gauss_bins=51, discount=0.9, batch_size=n,
                                   critic_updates_per_actor_update=1, ensemble_size=2, hidden_dims=(64, 64),
                                   critic_lr=3e-3))
    first = agent.update(batch)["critic_loss"]
    for _ in range(400):
        m = agent.update(batch)
    with torch.no_grad():
        q = agent.q_values(torch.cat([torch.as_tensor(states), torch.as_tensor(actions)], -1)).mean(0).numpy()
    err = np.abs(q - rewards)
    print(f"cross-entropy {first:.3f} -> {m['critic_loss']:.3f}; |Q - r| mean {err.mean():.4f} max {err.max():.4f}")
    assert m["critic_loss"] < first and m["hl_gauss_clipped_share"] == 0.0
    assert err.mean() < 0.03 and err.max() < 0.1


# ------------------------------------------------------------------------------------------------ config
@pytest.mark.parametrize("kw, pattern", [
    (dict(critic_loss="huber"), r"critic_loss='huber' must be one of \('mse', 'hl_gauss'\)"),
    (dict(hl_gauss_bins=1), r"hl_gauss_bins=1 must be >= 2"),
    (dict(hl_gauss_sigma_ratio=0.0), r"hl_gauss_sigma_ratio=0.0 must be a finite number > 0"),
    (dict(hl_gauss_sigma_ratio=-1.0), r"hl_gauss_sigma_ratio"),
    (dict(hl_gauss_sigma_ratio=float("nan")), r"hl_gauss_sigma_ratio"),
    (dict(hl_gauss_range=(1.0, 0.0)), r"hl_gauss_range=\(1.0, 0.0\) must be two finite numbers v_min < v_max"),
    (dict(hl_gauss_range=(0.0, float("inf"))), r"hl_gauss_range"),
    (dict(hl_gauss_range=(0.0, 1.0, 2.0)), r"hl_gauss_range"),
    (dict(hl_gauss_range=None, discount=1.0), r"hl_gauss_range=None cannot be derived with discount=1.0"),
    (dict(hl_gauss_range=None, hl_gauss_bins=4), r"cannot be derived with hl_gauss_bins=4"),
])
def test_bad_hl_gauss_settings_are_one_line_errors(kw: dict, pattern: str) -> None:
    with pytest.raises(ConfigError, match=pattern) as err:
        _cfg(**kw)
    assert "\n" not in str(err.value)


def test_the_derived_support_and_set_parsing() -> None:
    cfg = AgentConfig(critic_loss="hl_gauss", discount=0.95)
    v_min, v_max = cfg.hl_gauss_support
    w = (v_max - v_min) / 101
    assert w == pytest.approx(20.0 / (101 - 4.5))  # [0, 1/(1 - gamma)] plus 3 sigma on each side
    assert -v_min == pytest.approx(3 * 0.75 * w) and v_max - 20.0 == pytest.approx(3 * 0.75 * w)
    # the MSE default needs no derivable support (discount 1 is fine there)
    AgentConfig(discount=1.0)
    assert parse_set(["critic_loss=hl_gauss", "hl_gauss_range=-0.5,1.5", "hl_gauss_bins=51"]) == {
        "critic_loss": "hl_gauss", "hl_gauss_range": (-0.5, 1.5), "hl_gauss_bins": 51}
    assert AgentConfig(critic_loss="hl_gauss", hl_gauss_range=(-0.5, 1.5), discount=1.0).hl_gauss_support == (
        -0.5, 1.5)


# ------------------------------------------------------------------------------------------------ state
def test_checkpoint_round_trip_and_the_actor_side_policy(tmp_path: Path) -> None:
    spec, cfg = _spec(), _cfg()
    a = SACAgent(spec, cfg)
    for i in range(3):
        a.update(_batch(16, seed=i))
    arrays = a.state_dict()
    assert arrays["critic/out.weight"].shape == (3, 16, 21) and arrays["target_critic/out.bias"].shape == (3, 1, 21)
    np.savez(tmp_path / "agent.npz", **arrays)
    with np.load(tmp_path / "agent.npz", allow_pickle=False) as z:
        loaded = {k: z[k] for k in z.files}
    b = SACAgent(spec, cfg.replace(seed=123))
    b.load_state_dict(loaded)
    assert a.update(_batch(16, seed=9)) == b.update(_batch(16, seed=9))
    for (name, p), q in zip(a.critic.named_parameters(), b.critic.parameters(), strict=True):
        assert torch.equal(p, q), name
    # an MSE critic's checkpoint does not load into a classification agent (and back), in one line
    mse = SACAgent(spec, cfg.replace(critic_loss="mse"))
    with pytest.raises(ShapeError, match=r"wrong shapes.*critic/out"):
        b.load_state_dict(mse.state_dict())
    with pytest.raises(ShapeError, match="wrong shapes"):
        mse.load_state_dict(arrays)
    # actors: the policy carries no critic, so its weights are the MSE agent's names and shapes
    wire = a.trainable_state()
    assert {k: v.shape for k, v in wire.items()} == {k: v.shape for k, v in mse.trainable_state().items()}
    policy = build_policy(spec, cfg, device="cpu")
    policy.load_trainable_state(wire)
    obs = {"state": np.linspace(-1, 1, 5).astype(np.float32)}
    np.testing.assert_array_equal(policy.act(obs, True), a.act(obs, True))


def test_the_jax_backend_refuses_it_by_name() -> None:
    with pytest.raises(ConfigError, match=r"critic_loss='hl_gauss' is not supported by backend=jax") as err:
        make_agent(_spec(), _cfg(backend="jax"))
    assert "\n" not in str(err.value)
