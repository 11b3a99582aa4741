"""State replay on the JAX device (learners.agents.jax.device_replay), on CPU JAX.

- The tables hold exactly the rows JaxSACAgent._batch makes of the host buffers' valid transitions (n-step columns
  included), padded to capacity; refresh() picks up new transitions and only then.
- An update on given table rows with given random draws equals JaxSACAgent.update_with_draws on the host batch of
  the same rows (metrics and parameters).
- update() draws indices inside the jitted function: metrics are finite, the agent's key advances, the batch split
  follows MixedSampler.counts, and the drawn rows cover both buffers uniformly (a draw-distribution check).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

pytest.importorskip("jax")
pytest.importorskip("torch")

from learners.agents.config import AgentConfig
from learners.agents.jax.agent import JaxSACAgent
from learners.agents.jax.device_replay import TABLE_COLUMNS, DeviceReplay
from learners.replay.buffer import MixedSampler, ReplayBuffer
from robot_rl.errors import ConfigError
from robot_rl.specs import ArraySpec, EnvSpec


def _spec(cameras: int = 0) -> EnvSpec:
    obs = [ArraySpec(f"images/cam{i}", (16, 16, 3), "uint8", 0, 255) for i in range(cameras)]
    obs.append(ArraySpec("state", (5,), "float32"))
    return EnvSpec("test", tuple(obs), ArraySpec("action", (3,), "float32", -1.0, 1.0), 10.0)


def _cfg(**kw: Any) -> AgentConfig:
    base: dict[str, Any] = dict(hidden_dims=(16, 16), ensemble_size=4, ensemble_subsample=2, batch_size=8,
                                critic_updates_per_actor_update=2, discount=0.9, tau=0.5, actor_lr=1e-3,
                                critic_lr=1e-3, temperature_lr=1e-3, device="cpu", backend="jax", seed=1,
                                n_step=3, encoder="conv", conv_channels=(8,), image_latent_dim=8)
    base.update(kw)
    return AgentConfig(**base)


def _fill(buf: ReplayBuffer, n: int, seed: int, episode: int = 7) -> None:
    rng = np.random.default_rng(seed)
    spec = buf.spec

    def frame() -> dict[str, np.ndarray]:
        return {s.name: (rng.integers(0, 256, s.shape, dtype=np.uint8) if s.is_image
                         else rng.standard_normal(s.shape).astype(np.float32)) for s in spec.observation}

    obs = frame()
    for t in range(n):
        nxt = frame()
        end = (t + 1) % episode == 0
        buf.add(obs, rng.uniform(-1, 1, spec.action.shape).astype(np.float32), float(rng.random()), nxt,
                bool(end and t % 2 == 0), end)
        obs = frame() if end else nxt


def _sampler(online: int = 40, demo: int = 30) -> MixedSampler:
    on, de = ReplayBuffer(_spec(), 64, seed=1), ReplayBuffer(_spec(), 48, seed=2)
    _fill(on, online, 3)
    _fill(de, demo, 4)
    return MixedSampler(on, de, 0.5, n_step=3)


def _draws(cfg: AgentConfig, seed: int) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    k, mb = cfg.critic_updates_per_actor_update, cfg.batch_size
    return {"noise": rng.standard_normal((k, mb, 3)).astype(np.float32),
            "members": np.stack([rng.permutation(cfg.ensemble_size)[:2] for _ in range(k)]).astype(np.int32),
            "actor_noise": rng.standard_normal((mb, 3)).astype(np.float32), "shifts": None, "dropout": None}


def test_tables_hold_the_host_rows_and_refresh_on_new_transitions() -> None:
    sampler = _sampler()
    agent = JaxSACAgent(_spec(), _cfg())
    replay = DeviceReplay(agent, sampler)
    sizes = replay.sizes()
    assert sizes == {"online": len(sampler.online), "demo": len(sampler.demo)}
    n = sizes["online"]
    table = {c: np.asarray(v) for c, v in replay._tables["online"].items()}
    assert table["state"].shape == (sampler.online.capacity, 5)
    host = agent._batch(sampler.online.gather(np.flatnonzero(sampler.online.valid), 3), any_rows=True)
    valid = np.flatnonzero(sampler.online.valid)  # one table row per slot
    assert valid.size == n
    for c in ("state", "next_state", "actions", "returns", "bootstrap"):
        np.testing.assert_allclose(table[c][valid], host[c], rtol=1e-6)
        assert not np.delete(table[c], valid, axis=0).any()  # padding
    assert not replay.refresh()  # nothing new
    _fill(sampler.online, 5, 9)
    assert replay.refresh()
    assert replay.sizes()["online"] == len(sampler.online)


def _assert_table_is_the_host_rows(replay: DeviceReplay, agent: JaxSACAgent, buf: ReplayBuffer, name: str) -> None:
    slots = np.flatnonzero(buf.valid)
    table = {c: np.asarray(v) for c, v in replay._tables[name].items()}
    np.testing.assert_array_equal(table["slots"][: slots.size], slots)
    host = agent._batch(buf.gather(slots, replay.sampler.n_step), any_rows=True)
    for c in TABLE_COLUMNS:
        np.testing.assert_allclose(table[c][slots], np.asarray(host[c], np.float32), rtol=1e-6, atol=1e-7,
                                   err_msg=c)


def test_refresh_copies_only_changed_rows_and_equals_a_full_rebuild() -> None:
    """Incremental refreshes (new transitions, a wrap-around over old slots, a relabelled last transition,
    Monte-Carlo returns that become known when an episode terminates) leave every valid row equal to the host's."""
    sampler = _sampler()
    for buf in (sampler.online, sampler.demo):
        buf.track_returns(0.9)
    agent = JaxSACAgent(_spec(), _cfg(mc_lower_bound=True))
    replay = DeviceReplay(agent, sampler)
    full = replay.rows_copied
    for step, seed in enumerate((11, 12, 13, 14)):
        _fill(sampler.online, 3 + 5 * step, seed)  # 3, 8, 13, 18 more: wraps the 64 slots
        if step == 1:
            sampler.online.terminate_last()
        before = replay.rows_copied
        assert replay.refresh()
        assert replay.rows_copied - before < len(sampler.online)  # not a full copy
        _assert_table_is_the_host_rows(replay, agent, sampler.online, "online")
        _assert_table_is_the_host_rows(replay, agent, sampler.demo, "demo")
    assert replay.rows_copied > full
    assert np.isfinite(replay.update()["critic_loss"])


def test_update_on_given_rows_equals_the_host_update_of_the_same_rows() -> None:
    sampler = _sampler()
    cfg = _cfg()
    a, b = JaxSACAgent(_spec(), cfg), JaxSACAgent(_spec(), cfg)
    replay = DeviceReplay(b, sampler)
    n_online, n_demo = replay.counts()
    rng = np.random.default_rng(5)
    for step in range(3):
        idx = {"online": rng.integers(0, replay.sizes()["online"], n_online),
               "demo": rng.integers(0, replay.sizes()["demo"], n_demo)}
        draws = _draws(cfg, step)
        ma = a.update_with_draws(replay.host_rows(idx), draws)
        mb = replay.update_rows(idx, draws)
        assert ma.keys() == mb.keys()
        for key in ma:
            np.testing.assert_allclose(mb[key], ma[key], rtol=1e-5, atol=1e-6, err_msg=key)
    sa, sb = a.state_dict(), b.state_dict()
    for name in sa:
        np.testing.assert_allclose(sb[name], sa[name], rtol=1e-5, atol=1e-6, err_msg=name)


def test_update_draws_on_the_device_and_covers_both_buffers() -> None:
    sampler = _sampler()
    agent = JaxSACAgent(_spec(), _cfg())
    replay = DeviceReplay(agent, sampler)
    key0 = np.asarray(agent._s["key"]).copy()
    for _ in range(3):
        m = replay.update()
        assert all(np.isfinite(v) for v in m.values())
    assert agent.num_updates == 3
    assert not np.array_equal(np.asarray(agent._s["key"]), key0)
    assert replay.counts() == sampler.counts(agent.cfg.samples_per_update) == (8, 8)
    # the index draw itself: uniform over [0, count) per buffer (same jax.random.randint as inside update)
    import jax

    counts = replay.sizes()
    draws = np.asarray(jax.random.randint(jax.random.PRNGKey(0), (20_000,), 0, counts["online"]))
    assert draws.min() == 0 and draws.max() == counts["online"] - 1
    freq = np.bincount(draws, minlength=counts["online"]) / draws.size
    assert np.abs(freq - 1 / counts["online"]).max() < 0.01


def test_images_are_refused() -> None:
    spec = _spec(cameras=1)
    agent = JaxSACAgent(spec, _cfg())
    on = ReplayBuffer(spec, 16)
    with pytest.raises(ConfigError, match="state observations only"):
        DeviceReplay(agent, MixedSampler(on))


def test_train_online_with_device_replay_learns_like_host_sampling() -> None:
    """`train_online` with device_replay=on (CPU JAX): the loop's updates draw on the device from incrementally
    refreshed tables. Its batches come from the agent's JAX key, not the buffers' numpy generators, so the run is not
    equal to the host-sampled one; it matches it statistically: same env steps and update count, finite metrics
    of the same scale, and both off and on reproduce themselves exactly."""
    from learners.replay.prefetch import BatchSource
    from learners.training.online import LoopConfig, train_online
    from tests.point_reach import PointReachEnv, point_reach_spec

    spec = point_reach_spec()
    loop = LoopConfig(total_steps=60, start_steps=20, learning_starts=20, updates_per_step=1, seed=0)

    def run(mode: str) -> tuple[list[dict[str, Any]], dict[str, np.ndarray]]:
        agent = JaxSACAgent(spec, _cfg(device_replay=mode, n_step=1))
        online = ReplayBuffer(spec, 200, seed=0)
        rows = list(train_online(PointReachEnv(), agent, online, loop))
        return rows, agent.trainable_state()

    assert not BatchSource(lambda: {}, JaxSACAgent(spec, _cfg(n_step=1)), object()).device_replay  # auto on a CPU
    off, on, on2 = run("off"), run("on"), run("on")
    assert [r["updates"] for r in on[0]] == [r["updates"] for r in off[0]] and on[0][-1]["updates"] == 41
    for k in on2[1]:
        np.testing.assert_array_equal(on2[1][k], on[1][k])  # reproducible
    assert any(not np.array_equal(on[1][k], off[1][k]) for k in on[1])  # other batches
    mean = {name: {key: float(np.mean([r[key] for r in rows if key in r])) for key in ("critic_loss", "q_mean")}
            for name, (rows, _) in (("on", on), ("off", off))}
    assert all(np.isfinite(v) for m in mean.values() for v in m.values())
    assert 1 / 3 <= mean["on"]["critic_loss"] / mean["off"]["critic_loss"] <= 3  # same scale (41 updates: coarse)
    assert abs(mean["on"]["q_mean"]) < 1 and abs(mean["off"]["q_mean"]) < 1


def test_device_replay_option_is_validated() -> None:
    with pytest.raises(ConfigError, match="device_replay"):
        AgentConfig(device_replay="yes")
    assert _cfg(device_replay="on").device_replay == "on"
