"""Critic ensemble (batched weights), target subset min, soft updates, temperature direction."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from learners.agents.config import AgentConfig, drq_config, hil_serl_config, rlpd_state_config, sac_config
from learners.agents.nets import EnsembleMLP, soft_update
from learners.agents.sac import SACAgent
from robot_rl.errors import ConfigError
from robot_rl.specs import ArraySpec, EnvSpec

torch.set_num_threads(1)


def _spec(obs_dim: int = 5, act_dim: int = 2) -> EnvSpec:
    return EnvSpec("t", (ArraySpec("state", (obs_dim,), "float32"),), ArraySpec("action", (act_dim,), "float32",
                                                                               -1.0, 1.0), 10.0)


def _batch(n: int, obs_dim: int = 5, act_dim: int = 2, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    return {"obs": {"state": rng.standard_normal((n, obs_dim)).astype(np.float32)},
            "next_obs": {"state": rng.standard_normal((n, obs_dim)).astype(np.float32)},
            "actions": rng.uniform(-1, 1, (n, act_dim)).astype(np.float32),
            "rewards": rng.standard_normal(n).astype(np.float32),
            "terminated": rng.random(n) < 0.1}


@pytest.mark.parametrize("layer_norm", [False, True])
def test_ensemble_members_are_independent_output_layer_included(layer_norm: bool) -> None:
    torch.manual_seed(0)
    net = EnsembleMLP(4, 6, (16, 16), 1, layer_norm=layer_norm, activation="silu")
    x = torch.randn(8, 6)
    out = net(x)
    assert out.shape == (4, 8, 1)
    # members start different (independent init), even on the same input
    assert not torch.allclose(out[0], out[1])
    i = 2
    out[i].pow(2).sum().backward()
    params = dict(net.named_parameters())
    assert any("out" in n for n in params), "the output layer must be an ensemble layer"
    for name, p in params.items():
        assert p.shape[0] == 4, f"{name} is not per member: {tuple(p.shape)}"
        g = p.grad
        assert g is not None
        for j in range(4):
            if j == i:
                assert g[j].abs().sum() > 0, f"{name}: member {i} got no gradient"
            else:
                assert torch.count_nonzero(g[j]) == 0, f"{name}: gradient of member {i} leaked into member {j}"


def test_member_subset_matches_full_forward() -> None:
    torch.manual_seed(1)
    net = EnsembleMLP(10, 6, (16,), 1, layer_norm=True)
    x = torch.randn(5, 6)
    full = net(x)
    idx = torch.tensor([7, 2])
    sub = net(x, members=idx)
    assert sub.shape == (2, 5, 1)
    torch.testing.assert_close(sub, full[idx])


def test_soft_update_math() -> None:
    t = [torch.full((3,), 2.0), torch.zeros(2, 2)]
    o = [torch.full((3,), 4.0), torch.ones(2, 2)]
    soft_update(t, o, 0.25)
    torch.testing.assert_close(t[0], torch.full((3,), 2.5))
    torch.testing.assert_close(t[1], torch.full((2, 2), 0.25))
    with pytest.raises(ValueError):
        soft_update(t, o[:1], 0.1)


def test_agent_target_is_soft_updated_once_per_critic_update() -> None:
    cfg = AgentConfig(ensemble_size=3, ensemble_subsample=2, critic_updates_per_actor_update=1, batch_size=16,
                      hidden_dims=(16, 16), tau=0.1, device="cpu")
    agent = SACAgent(_spec(), cfg)
    before_t = [p.detach().clone() for p in agent.target_critic.parameters()]
    agent.update(_batch(16))
    after_o = [p.detach().clone() for p in agent.critic.parameters()]
    for bt, ao, at in zip(before_t, after_o, agent.target_critic.parameters(), strict=True):
        torch.testing.assert_close(at.detach(), 0.9 * bt + 0.1 * ao)


def test_target_min_uses_a_random_subset_of_m_members(monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = AgentConfig(ensemble_size=10, ensemble_subsample=2, critic_updates_per_actor_update=1, batch_size=32,
                      hidden_dims=(16, 16), discount=0.9, device="cpu")
    agent = SACAgent(_spec(), cfg)
    calls: list[tuple[torch.Tensor, torch.Tensor]] = []
    orig = agent.target_critic.forward

    def spy(x: torch.Tensor, members: torch.Tensor | None = None) -> torch.Tensor:
        out = orig(x, members)
        assert members is not None, "target critic ran all members"
        calls.append((members.clone(), out.detach().clone()))
        return out

    monkeypatch.setattr(agent.target_critic, "forward", spy)
    batch = _batch(32)
    seen = set()
    for _ in range(5):
        m = agent.update(batch)
        members, out = calls[-1]
        assert members.shape == (2,) and len(set(members.tolist())) == 2
        assert out.shape == (2, 32, 1)
        seen.add(tuple(sorted(members.tolist())))
        target = (torch.as_tensor(batch["rewards"]) + 0.9 * (1 - torch.as_tensor(batch["terminated"]).float())
                  * out.squeeze(-1).min(0).values)
        assert m["target_q_mean"] == pytest.approx(float(target.mean()), rel=1e-5, abs=1e-6)
    assert len(seen) > 1, "the subset should be redrawn every update"


def test_min_over_all_members_when_no_subset(monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = AgentConfig(ensemble_size=3, ensemble_subsample=None, critic_updates_per_actor_update=1, batch_size=8,
                      hidden_dims=(8,), device="cpu")
    agent = SACAgent(_spec(), cfg)
    sizes = []
    orig = agent.target_critic.forward
    monkeypatch.setattr(agent.target_critic, "forward",
                        lambda x, members=None: sizes.append(len(members)) or orig(x, members))
    agent.update(_batch(8))
    assert sizes == [3]


@pytest.mark.parametrize("target, direction", [(5.0, +1), (-50.0, -1)])
def test_temperature_moves_toward_target_entropy(target: float, direction: int) -> None:
    cfg = AgentConfig(ensemble_size=2, ensemble_subsample=None, critic_updates_per_actor_update=2, batch_size=16,
                      hidden_dims=(16,), target_entropy=target, temperature_lr=1e-2, device="cpu")
    agent = SACAgent(_spec(), cfg)
    t0 = agent.temperature
    for i in range(10):
        m = agent.update(_batch(32, seed=i))
    assert (agent.temperature - t0) * direction > 0, (t0, agent.temperature, m["entropy"])
    assert m["temperature"] == pytest.approx(agent.temperature, rel=1e-6)


def test_utd_runs_k_critic_updates_and_one_actor_update() -> None:
    cfg = AgentConfig(ensemble_size=2, ensemble_subsample=None, critic_updates_per_actor_update=4, batch_size=8,
                      hidden_dims=(8,), device="cpu")
    agent = SACAgent(_spec(), cfg)
    counts = {"critic": 0, "actor": 0}
    orig_c, orig_a = agent.critic_opt.step, agent.actor_opt.step

    def c_step(*a, **k):  # type: ignore[no-untyped-def]
        counts["critic"] += 1
        return orig_c(*a, **k)

    def a_step(*a, **k):  # type: ignore[no-untyped-def]
        counts["actor"] += 1
        return orig_a(*a, **k)

    agent.critic_opt.step, agent.actor_opt.step = c_step, a_step  # type: ignore[method-assign]
    agent.update(_batch(32))
    assert counts == {"critic": 4, "actor": 1}


def test_actor_step_does_not_touch_the_critic() -> None:
    cfg = AgentConfig(ensemble_size=2, ensemble_subsample=None, critic_updates_per_actor_update=1, batch_size=8,
                      hidden_dims=(8,), device="cpu")
    agent = SACAgent(_spec(), cfg)
    seen: dict = {}
    orig = agent.actor_opt.step

    def step(*a, **k):  # type: ignore[no-untyped-def]
        seen["requires_grad"] = [p.requires_grad for p in agent.critic.parameters()]
        seen["critic"] = [p.detach().clone() for p in agent.critic.parameters()]
        seen["actor"] = [p.detach().clone() for p in agent.actor.parameters()]
        return orig(*a, **k)

    agent.actor_opt.step = step  # type: ignore[method-assign]
    agent.update(_batch(8))
    assert not any(seen["requires_grad"]), "critic weights must not get gradients from the actor loss"
    assert all(p.requires_grad for p in agent.critic.parameters())
    for before, p in zip(seen["critic"], agent.critic.parameters(), strict=True):
        assert torch.equal(before, p.detach())
    assert any(not torch.equal(b, p.detach()) for b, p in zip(seen["actor"], agent.actor.parameters(), strict=True))


def test_config_validation_and_presets() -> None:
    with pytest.raises(ConfigError, match="ensemble_subsample"):
        AgentConfig(ensemble_size=2, ensemble_subsample=3)
    with pytest.raises(ConfigError, match="discount"):
        AgentConfig(discount=1.5)
    with pytest.raises(ConfigError, match="encoder"):
        AgentConfig(encoder="vit")
    d = drq_config()
    assert (d.ensemble_size, d.ensemble_subsample, d.critic_updates_per_actor_update, d.batch_size) == (10, 2, 4, 256)
    assert (d.temperature_init, d.tau, d.actor_lr, d.std_min, d.std_max, d.augment_pad) == (1e-2, 0.005, 3e-4, 1e-5,
                                                                                          5.0, 4)
    assert not d.backup_entropy and d.layer_norm and d.hidden_dims == (256, 256)
    assert rlpd_state_config().critic_updates_per_actor_update == 8
    assert hil_serl_config().gripper_head and hil_serl_config().ensemble_subsample is None
    assert sac_config().target_entropy_per_dim == -1.0
    assert AgentConfig.from_dict(d.to_dict()) == d
    agent = SACAgent(_spec(act_dim=4), AgentConfig(hidden_dims=(8,), device="cpu"))
    assert agent.target_entropy == -2.0
