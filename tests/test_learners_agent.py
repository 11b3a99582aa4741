"""Agent seam: shapes and validation, trainable state for actors, full state round trip, gripper head,
and the import rules (policy without critic/replay; no env packages at import time). torch.compile:
tests/test_compile_default.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from learners.agents.config import AgentConfig
from learners.agents.policy import build_policy, tanh_gaussian
from learners.agents.sac import SACAgent
from learners.agents.sac_batch import to_update_batch
from robot_rl.errors import ShapeError
from robot_rl.specs import ArraySpec, EnvSpec

torch.set_num_threads(1)
ROOT = Path(__file__).resolve().parents[1]


def _spec(obs_dim: int = 5, act_dim: int = 3, box: bool = False) -> EnvSpec:
    name = "obs" if box else "state"
    return EnvSpec("t", (ArraySpec(name, (obs_dim,), "float32"),), ArraySpec("action", (act_dim,), "float32",
                                                                            -1.0, 1.0), 10.0)


def _batch(n: int, obs_dim: int = 5, act_dim: int = 3, seed: int = 0, key: str = "state") -> dict:
    rng = np.random.default_rng(seed)
    return {"obs": {key: rng.standard_normal((n, obs_dim)).astype(np.float32)},
            "next_obs": {key: rng.standard_normal((n, obs_dim)).astype(np.float32)},
            "actions": rng.uniform(-1, 1, (n, act_dim)).astype(np.float32),
            "rewards": rng.standard_normal(n).astype(np.float32),
            "terminated": rng.random(n) < 0.1}


def _cfg(**kw: object) -> AgentConfig:
    base: dict = dict(ensemble_size=4, ensemble_subsample=2, critic_updates_per_actor_update=2, batch_size=8,
                      hidden_dims=(16, 16), device="cpu")
    base.update(kw)
    return AgentConfig(**base)


def test_act_shapes_bounds_and_validation() -> None:
    agent = SACAgent(_spec(), _cfg())
    obs = {"state": np.zeros(5, np.float32)}
    for det in (True, False):
        a = agent.act(obs, deterministic=det)
        assert a.shape == (3,) and a.dtype == np.float32 and np.all(np.abs(a) <= 1.0)
    np.testing.assert_array_equal(agent.act(obs, True), agent.act(obs, True))
    assert not np.array_equal(agent.act(obs, False), agent.act(obs, False))
    batch_actions = agent.policy.act({"state": np.zeros((4, 5), np.float32)}, True, batched=True)
    assert batch_actions.shape == (4, 3)
    with pytest.raises(ShapeError, match="state"):
        agent.act({"state": np.zeros(4, np.float32)})
    with pytest.raises(ShapeError, match="missing"):
        agent.act({"other": np.zeros(5, np.float32)})
    # a plain Box observation works too
    box = SACAgent(_spec(box=True), _cfg())
    assert box.act(np.zeros(5, np.float32)).shape == (3,)
    m = box.update({**_batch(16, key="obs"), "obs": _batch(16)["obs"]["state"],
                    "next_obs": _batch(16)["next_obs"]["state"]})
    assert np.isfinite(list(m.values())).all()


def test_update_validates_the_batch() -> None:
    agent = SACAgent(_spec(), _cfg())
    m = agent.update(_batch(16))
    assert {"critic_loss", "q_mean", "target_q_mean", "actor_loss", "entropy", "temperature"} <= set(m)
    assert all(isinstance(v, float) and np.isfinite(v) for v in m.values())
    with pytest.raises(ShapeError, match="equal minibatches"):
        agent.update(_batch(15))
    with pytest.raises(ShapeError, match="actions"):
        agent.update(_batch(16, act_dim=2))
    bad = _batch(16)
    bad["rewards"] = bad["rewards"][:8]
    with pytest.raises(ShapeError, match="rewards"):
        agent.update(bad)
    bad = _batch(16)
    del bad["terminated"]
    with pytest.raises(ShapeError, match="terminated"):
        agent.update(bad)


def test_tanh_gaussian_log_prob_matches_change_of_variables() -> None:
    mean = torch.tensor([[0.3, -1.2]])
    log_std = torch.tensor([[-0.5, 0.2]])
    noise = torch.tensor([[0.7, -0.4]])
    a, logp = tanh_gaussian(mean, log_std, noise)
    u = mean + log_std.exp() * noise
    base = torch.distributions.Normal(mean, log_std.exp()).log_prob(u).sum(-1)
    want = base - torch.log(1 - torch.tanh(u) ** 2).sum(-1)
    torch.testing.assert_close(a, torch.tanh(u))
    torch.testing.assert_close(logp, want, rtol=1e-5, atol=1e-5)


def test_std_bounds_hold_for_extreme_features() -> None:
    agent = SACAgent(_spec(), _cfg(std_min=1e-5, std_max=5.0, layer_norm=False))
    _, log_std = agent.actor(torch.randn(64, 5) * 1e4)
    assert torch.all(log_std >= np.log(1e-5) - 1e-6) and torch.all(log_std <= np.log(5.0) + 1e-6)
    _, log_std0 = agent.actor(torch.zeros(1, 5))
    torch.testing.assert_close(log_std0, torch.zeros_like(log_std0), atol=1e-3, rtol=0)  # std starts at ~1


def test_trainable_state_round_trip_to_an_actor_side_policy() -> None:
    spec, cfg = _spec(), _cfg()
    agent = SACAgent(spec, cfg)
    for i in range(3):
        agent.update(_batch(16, seed=i))
    wire = agent.trainable_state()
    assert all(isinstance(v, np.ndarray) for v in wire.values())
    assert not any(k.startswith(("critic", "target")) for k in wire), "only what the actor needs"
    policy = build_policy(spec, cfg, device="cpu")
    obs = {"state": np.linspace(-1, 1, 5).astype(np.float32)}
    policy.load_trainable_state(wire)
    np.testing.assert_array_equal(policy.act(obs, True), agent.act(obs, True))
    with pytest.raises(ShapeError, match="missing"):
        policy.load_trainable_state({k: v for k, v in list(wire.items())[1:]})
    with pytest.raises(ShapeError, match="unexpected"):
        policy.load_trainable_state({**wire, "bogus": np.zeros(1)})
    k0 = next(iter(wire))
    with pytest.raises(ShapeError, match="shape"):
        policy.load_trainable_state({**wire, k0: np.zeros((1, 1))})
    with pytest.raises(ShapeError, match="NaN"):
        policy.load_trainable_state({**wire, k0: np.full_like(wire[k0], np.nan)})


def test_full_state_round_trip_resumes_identically(tmp_path: Path) -> None:
    spec, cfg = _spec(), _cfg()
    a = SACAgent(spec, cfg)
    for i in range(3):
        a.update(_batch(16, seed=i))
    arrays = a.state_dict()
    assert all(isinstance(v, np.ndarray) and v.dtype != object for v in arrays.values())
    np.savez(tmp_path / "agent.npz", **arrays)
    with np.load(tmp_path / "agent.npz", allow_pickle=False) as z:
        loaded = {k: z[k] for k in z.files}
    b = SACAgent(spec, cfg.replace(seed=123))
    b.load_state_dict(loaded)
    ma, mb = a.update(_batch(16, seed=10)), b.update(_batch(16, seed=10))
    assert ma == mb
    for (n, p), q in zip(a.critic.named_parameters(), b.critic.parameters(), strict=True):
        assert torch.equal(p, q), n
    obs = {"state": np.ones(5, np.float32)}
    np.testing.assert_array_equal(a.act(obs, False), b.act(obs, False))
    with pytest.raises(ShapeError):
        b.load_state_dict({k: v for k, v in arrays.items() if k != "log_alpha"})
    bad = dict(arrays)
    bad["critic/out.weight"] = np.zeros((1, 1), np.float32)
    with pytest.raises(ShapeError, match="shape"):
        b.load_state_dict(bad)
    with pytest.raises(ShapeError, match="optimizer"):
        b.load_state_dict({**arrays, "optim/nope/0/step": np.zeros(())})


def test_gripper_head_learns_the_rewarded_command() -> None:
    spec = _spec(act_dim=3)
    cfg = _cfg(gripper_head=True, critic_updates_per_actor_update=1, batch_size=64, actor_lr=3e-3)
    agent = SACAgent(spec, cfg)
    assert agent.arm_dim == 2 and agent.critic.hidden[0].weight.shape[1] == 5 + 2  # arm dims only
    rng = np.random.default_rng(0)
    for i in range(150):
        b = _batch(64, act_dim=3, seed=i)
        grip = rng.integers(-1, 2, 64).astype(np.float32)
        b["actions"][:, -1] = grip
        b["rewards"] = (grip == 1.0).astype(np.float32) - 0.5 * (grip == -1.0)
        b["grasp_penalty"] = np.where(grip == 0.0, -0.02, 0.0).astype(np.float32)
        b["terminated"] = np.ones(64, bool)
        m = agent.update(b)
    assert "gripper_loss" in m and m["gripper_loss"] < 0.05
    obs = {"state": np.zeros(5, np.float32)}
    a = agent.act(obs, deterministic=True)
    assert a[-1] == 1.0 and np.all(np.abs(a[:2]) <= 1)
    stoch = np.array([agent.act(obs, False)[-1] for _ in range(20)])
    assert set(np.unique(stoch)) <= {-1.0, 0.0, 1.0}
    q = agent.gripper(agent.policy.features({}, torch.zeros(1, 5)))[0]  # type: ignore[misc]
    np.testing.assert_allclose(q.detach().numpy(), [-0.5, -0.02, 1.0], atol=0.15)


def test_grad_clipping_reports_norm() -> None:
    agent = SACAgent(_spec(), _cfg(grad_clip_norm=1e-3))
    m = agent.update(_batch(16))
    assert "critic_grad_norm" in m and m["critic_grad_norm"] > 1e-3


def test_policy_module_imports_no_critic_replay_or_env_code() -> None:
    code = (
        "import sys; import learners.agents.policy\n"
        "bad = [m for m in ('learners.agents.sac', 'learners.replay.buffer', 'learners.training.online', 'gymnasium',"
        " 'zmq', 'mujoco', 'envs', 'controllers') if m in sys.modules]\n"
        "assert not bad, bad\n"
        "import learners.agents.sac, learners.replay.buffer, learners.training.online\n"
        "import learners.agents.config, learners.agents.encoders\n"
        "bad = [m for m in ('gymnasium', 'zmq', 'mujoco', 'envs', 'controllers', 'rclpy') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    res = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr


class _FakeImageEnv:
    """A tiny gymnasium-like env with a Dict observation (camera + state) and Box actions in [-2, 2]."""

    class _Box:
        def __init__(self, low: float, high: float, shape: tuple[int, ...], dtype: type) -> None:
            self.low, self.high = np.full(shape, low, dtype), np.full(shape, high, dtype)
            self.shape, self.dtype = shape, np.dtype(dtype)

    class _Dict:
        def __init__(self, spaces: dict) -> None:
            self.spaces = spaces

    def __init__(self) -> None:
        self.observation_space = self._Dict({"images": self._Dict({"front": self._Box(0, 255, (16, 16, 3), np.uint8)}),
                                             "state": self._Box(-np.inf, np.inf, (4,), np.float32)})
        self.action_space = self._Box(-2.0, 2.0, (2,), np.float32)
        self.t = 0
        self.actions: list[np.ndarray] = []

    def _obs(self) -> dict:
        return {"images": {"front": np.full((16, 16, 3), self.t, np.uint8)}, "state": np.full(4, self.t, np.float32)}

    def reset(self, seed: int | None = None) -> tuple[dict, dict]:
        self.t = 0
        return self._obs(), {}

    def step(self, action: np.ndarray) -> tuple[dict, float, bool, bool, dict]:
        self.actions.append(np.asarray(action))
        self.t += 1
        info = {"intervention": self.t % 3 == 0, "success": self.t == 10}
        return self._obs(), float(-np.abs(action).sum()), False, self.t == 10, info


def test_train_online_with_dict_images_routes_interventions_and_rescales_actions() -> None:
    from learners.replay.buffer import ReplayBuffer
    from learners.training.online import LoopConfig, evaluate, train_online

    env = _FakeImageEnv()
    spec = EnvSpec.from_spaces("fake", env.observation_space, env.action_space, 10.0)
    agent = SACAgent(spec, _cfg(encoder="conv", conv_channels=(8, 8), image_latent_dim=16, proprio_latent_dim=8,
                                batch_size=4, critic_updates_per_actor_update=2))
    online, demo = ReplayBuffer(spec, 100), ReplayBuffer(spec, 100)
    loop = LoopConfig(total_steps=40, start_steps=10, learning_starts=10,
                      takeover_terminal=False)  # its relabels would start new segments (a test of their own)
    hist = list(train_online(env, agent, online, loop, demo=demo))
    assert [h["env_step"] for h in hist] == [10, 20, 30, 40]
    assert hist[-1]["updates"] == 31 and "critic_loss" in hist[-1] and hist[-1]["success"] is True
    assert len(online) == 40 and len(demo) == 12          # steps 3, 6, 9 of each 10-step episode
    assert online._filled == 44                           # 4 episodes x (10 + 1) frames: stored once
    acts = np.array(env.actions)
    assert np.abs(acts).max() > 1.0 and np.abs(acts).max() <= 2.0  # rescaled to the env's [-2, 2]
    assert np.abs(online.actions[online.valid]).max() <= 1.0        # stored in the agent's [-1, 1]
    assert len(evaluate(env, agent, episodes=2)) == 2


@pytest.mark.parametrize("takeover_terminal", [False, True])
def test_takeover_terminal_relabels_the_policy_step_before_each_takeover(takeover_terminal: bool) -> None:
    from learners.replay.buffer import ReplayBuffer
    from learners.training.online import LoopConfig, train_online

    env = _FakeImageEnv()  # interventions at steps 3, 6, 9 of each 10-step episode (1-based), truncated at 10
    spec = EnvSpec.from_spaces("fake", env.observation_space, env.action_space, 10.0)
    agent = SACAgent(spec, _cfg(encoder="conv", conv_channels=(8, 8), image_latent_dim=16, proprio_latent_dim=8,
                                batch_size=4, critic_updates_per_actor_update=2))
    online, demo = ReplayBuffer(spec, 100), ReplayBuffer(spec, 100)
    cfg = LoopConfig(total_steps=20, start_steps=20, learning_starts=50, takeover_terminal=takeover_terminal)
    list(train_online(env, agent, online, cfg, demo=demo))
    batch = online.gather(np.flatnonzero(online.valid))
    step = batch["obs"]["state"][:, 0].astype(int) + 1          # 1-based step of each stored transition
    terminal = sorted(set(step[batch["terminated"]].tolist()))
    assert terminal == ([2, 5, 8] if takeover_terminal else [])  # the policy steps right before a takeover
    assert not batch["intervention"][batch["terminated"]].any()  # the human's own steps are never relabelled
    assert len(online) == 20 and not demo.fields["terminated"][demo.valid].any()
    # a relabelled step ends its segment: the human's step after it starts a new one (its frame stored again)
    assert online._filled == 2 * 11 + (6 if takeover_terminal else 0)
    nxt = batch["next_obs"]["state"][:, 0].astype(int)
    np.testing.assert_array_equal(nxt, step)                      # next_obs is still the true successor


def test_terminate_last_relabels_only_an_open_transition() -> None:
    from learners.replay.buffer import ReplayBuffer

    spec = _spec()
    buf = ReplayBuffer(spec, 10)
    assert not buf.terminate_last()                               # nothing added yet
    obs = {"state": np.zeros(5, np.float32)}
    nxt = {"state": np.ones(5, np.float32)}
    slot = buf.add(obs, np.zeros(3), 0.0, nxt, False, False)
    assert buf.terminate_last() and buf.fields["terminated"][slot]
    assert not buf.terminate_last()                               # already ended
    buf.add(nxt, np.zeros(3), 0.0, obs, False, True)
    assert not buf.terminate_last()                               # truncated: ended already


def test_update_batch_minibatches_are_the_strided_rows_in_either_order() -> None:
    """learners.agents.sac_batch: minibatch i is rows i::k; in minibatch order it is the contiguous block i and
    holds the same rows (every column moved alike)."""
    agent = SACAgent(_spec(), _cfg(critic_updates_per_actor_update=3, batch_size=4))
    batch = _batch(12)
    batch["intervention"] = np.arange(12) % 2 == 0
    b = to_update_batch(batch, agent.policy.layout, agent.policy.action_dim, agent.cfg, agent.device)
    ordered = b.in_minibatch_order()
    assert (b.k, b.minibatch, ordered.strided) == (3, 4, False)
    for i in range(3):
        assert b.rows(i) == slice(i, None, 3) and ordered.rows(i) == slice(4 * i, 4 * i + 4)
        np.testing.assert_array_equal(b.actions[b.rows(i)].numpy(), batch["actions"][i::3])
        for name in ("actions", "state", "next_state", "returns", "bootstrap", "intervention"):
            np.testing.assert_array_equal(getattr(b, name)[b.rows(i)].numpy(),
                                          getattr(ordered, name)[ordered.rows(i)].numpy(), err_msg=name)
    with pytest.raises(ShapeError, match="equal minibatches"):
        to_update_batch(_batch(10), agent.policy.layout, agent.policy.action_dim, agent.cfg, agent.device)


def test_every_critic_minibatch_and_the_actor_see_the_same_source_mix() -> None:
    # samplers concatenate their sources (MixedSampler: online rows first, then demo rows); contiguous minibatches
    # would give the first critic updates only online rows and the later ones (and the actor) only demo rows
    agent = SACAgent(_spec(), _cfg(critic_updates_per_actor_update=4, bc_weight=1.0))
    batch = _batch(32)
    batch["rewards"] = np.r_[np.zeros(16), np.ones(16)].astype(np.float32)  # online 0, demo 1
    batch["intervention"] = np.r_[np.zeros(16, bool), np.ones(16, bool)]
    seen_rewards: list[float] = []
    seen_human: list[float] = []
    critic_loss, actor_loss = agent._critic_loss, agent._actor_loss

    def spy_critic(*args: torch.Tensor) -> object:
        seen_rewards.append(float(args[4].mean()))
        return critic_loss(*args)

    def spy_actor(*args: torch.Tensor) -> object:
        seen_human.append(float(args[4].float().mean()))
        return actor_loss(*args)

    agent._critic_loss, agent._actor_loss = spy_critic, spy_actor
    agent.update(batch)
    assert seen_rewards == [0.5, 0.5, 0.5, 0.5]
    assert seen_human == [0.5]


def test_bc_weight_imitates_human_rows_only() -> None:
    rng = np.random.default_rng(0)
    states = rng.standard_normal((64, 5)).astype(np.float32)
    target = np.tanh(states[:, :3]).astype(np.float32)  # the "human" action, a function of the state
    human = np.arange(64) < 32  # a sampler puts the demo rows last; here first, either works
    actions = np.where(human[:, None], target, -target).astype(np.float32)  # policy rows do the opposite
    batch = {"obs": {"state": states}, "next_obs": {"state": states}, "actions": actions,
             "rewards": np.zeros(64, np.float32), "terminated": np.ones(64, bool), "intervention": human}

    def error(bc_weight: float) -> float:
        agent = SACAgent(_spec(), _cfg(bc_weight=bc_weight, batch_size=32, hidden_dims=(32, 32), actor_lr=3e-3))
        for _ in range(300):
            m = agent.update(batch)
        assert ("bc_loss" in m) == (bc_weight > 0)
        act = agent.policy.act({"state": states}, deterministic=True, batched=True)
        return float(np.abs(act - target).mean())

    with_bc, without = error(10.0), error(0.0)
    print(f"mean |policy - human action|: {with_bc:.3f} with BC, {without:.3f} without")
    assert with_bc < 0.25 and without > 2 * with_bc


def test_q_filter_clones_only_where_the_critic_prefers_the_human_action() -> None:
    """bc_q_filter: a human row counts in the BC term only while Q(s, a_human) > Q(s, policy mode)."""
    agent = SACAgent(_spec(), _cfg(bc_weight=1.0, bc_q_filter=True))
    n = 64
    states = torch.as_tensor(np.random.default_rng(0).standard_normal((n, 5)), dtype=torch.float32)
    feats = agent.encoder({}, states)
    sign = torch.where(feats[:, 0] > 0, 1.0, -1.0)  # rows with state[0] > 0 prefer large actions, others small

    class FakeCritic(torch.nn.Module):
        def forward(self, x: torch.Tensor, members: object = None) -> torch.Tensor:
            return (sign * x[:, -3:].sum(-1))[None, :, None]  # (ensemble 1, B, 1)

    agent.critic = FakeCritic()  # type: ignore[assignment]
    human_actions = torch.full((n, 3), 0.99)  # (nearly) the largest action: better than the mode where sign > 0
    mode = torch.tanh(agent.actor(feats)[0]).detach()
    noise = torch.zeros(n, 3)
    _, _, bc, kept = agent._actor_loss_eager(feats.detach(), noise, torch.tensor(0.0), human_actions,
                                             torch.ones(n))
    want = (sign * (human_actions.sum(-1) - mode.sum(-1)) > 0).float()
    assert 0.3 < float(want.mean()) < 0.7  # both kinds of rows are there
    assert torch.equal(want, (sign > 0).float())
    assert float(kept) == pytest.approx(float(want.mean()))
    sq = (mode - human_actions).pow(2).sum(-1)
    assert float(bc) == pytest.approx(float((sq * want).sum() / n), rel=1e-5)
    # without the filter every human row counts
    agent.cfg = agent.cfg.replace(bc_q_filter=False)
    _, _, bc_all, kept_all = agent._actor_loss_eager(feats.detach(), noise, torch.tensor(0.0), human_actions,
                                                     torch.ones(n))
    assert float(kept_all) == 1.0 and float(bc_all) == pytest.approx(float(sq.mean()), rel=1e-5)


def test_state_select_feeds_only_the_chosen_elements() -> None:
    from learners.agents.obs import ObsLayout
    from robot_rl.errors import ConfigError

    spec = EnvSpec("t", (ArraySpec("object", (3,), "float32"), ArraySpec("state", (19,), "float32")),
                   ArraySpec("action", (7,), "float32", -1.0, 1.0), 10.0)
    assert ObsLayout.from_spec(spec).state_dim == 22
    layout = ObsLayout.from_spec(spec, ("object", "state[0:3]", "state[12]"))
    assert layout.state_dim == 7
    obs = {"object": np.arange(3, dtype=np.float32), "state": 10 + np.arange(19, dtype=np.float32)}
    _, st = layout.to_torch(obs, "cpu", batched=False)
    assert st is not None and st.tolist() == [[0, 1, 2, 10, 11, 12, 22]]
    assert ObsLayout.from_spec(spec, ("state[-2:]",)).to_torch(obs, "cpu", False)[1].tolist() == [[27, 28]]
    for bad, match in (("goal", "not a state leaf"), ("state[19]", "out of range"), ("state[5:5]", "nothing"),
                       ("state[", "expected")):
        with pytest.raises(ConfigError, match=match):
            ObsLayout.from_spec(spec, (bad,))
    with pytest.raises(ConfigError):
        _cfg(state_select=("state[0:",))
    agent = SACAgent(spec, _cfg(state_select=("object", "state[0:3]")))
    assert agent.policy.trainable_state()["actor.trunk.hidden.0.weight"].shape == (16, 6)
    a = agent.act(obs, deterministic=True)
    other = {"object": obs["object"], "state": obs["state"].copy()}
    other["state"][3:] = -50.0  # elements the agent does not see
    np.testing.assert_array_equal(agent.act(other, deterministic=True), a)
    other["state"][0] = 5.0
    assert not np.array_equal(agent.act(other, deterministic=True), a)
    m = agent.update({"obs": {k: np.stack([v] * 16) for k, v in obs.items()},
                      "next_obs": {k: np.stack([v] * 16) for k, v in other.items()},
                      "actions": np.zeros((16, 7), np.float32), "rewards": np.zeros(16, np.float32),
                      "terminated": np.zeros(16, bool)})
    assert np.isfinite(list(m.values())).all()
