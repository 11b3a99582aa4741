"""Batch prefetch (learners.replay.prefetch) and bf16 mixed precision (AgentConfig.mixed_precision), on a CPU.

The CUDA halves (pinned memory, the side stream, bf16 on a GPU) are measured by benchmarks/learner_speed.py
(--prefetch, --amp) where a GPU is present; here: the logic (which batches, in which order, errors, thread safety,
what becomes a tensor) and the numerics of bf16 autocast against float32 on the same batch.
"""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest
import torch

from learners.agents.config import AgentConfig
from learners.agents.sac import SACAgent
from learners.replay.buffer import MixedSampler, ReplayBuffer, ReplayEmptyError
from learners.replay.prefetch import BatchPrefetcher, BatchSource, batch_to_device, prefetch_enabled
from learners.training.online import LoopCounters, train_offline
from robot_rl.errors import ConfigError
from robot_rl.specs import ArraySpec, EnvSpec
from tests.test_learners_agent import _batch, _cfg, _spec


def _filled_buffer(n: int, seed: int = 0, obs_dim: int = 5) -> ReplayBuffer:
    """Transitions whose fields are tied to each other: reward = obs[0], next_obs = obs + 1, action = obs[:3] / 100."""
    buf = ReplayBuffer(_spec(obs_dim), n + n // 10 + 4, seed=seed)
    _add(buf, 0, n)
    return buf


def _add(buf: ReplayBuffer, start: int, n: int, obs_dim: int = 5) -> None:
    for t in range(start, start + n):
        obs = np.full(obs_dim, float(t), np.float32)
        buf.add({"state": obs}, obs[:3] / 100.0, float(t), {"state": obs + 1.0}, False, (t + 1) % 10 == 0)


def _consistent(batch: dict) -> bool:
    obs, nxt = np.asarray(batch["obs"]["state"]), np.asarray(batch["next_obs"]["state"])
    return bool(np.all(nxt == obs + 1.0) and np.all(np.asarray(batch["rewards"]) == obs[:, 0])
                and np.allclose(np.asarray(batch["actions"]), obs[:, :3] / 100.0))


def test_prefetched_batches_are_the_direct_batches_in_order() -> None:
    direct = MixedSampler(_filled_buffer(200, seed=3), _filled_buffer(50, seed=4), 0.5)
    ahead = MixedSampler(_filled_buffer(200, seed=3), _filled_buffer(50, seed=4), 0.5)
    with BatchPrefetcher(lambda: ahead.sample(32), "cpu") as pf:
        for _ in range(6):
            want, got = direct.sample(32), pf.next()
            for key in ("actions", "rewards", "terminated"):
                np.testing.assert_array_equal(got[key], want[key])
            np.testing.assert_array_equal(got["obs"]["state"], want["obs"]["state"])


def test_a_sampling_error_reaches_next_and_stays() -> None:
    empty = ReplayBuffer(_spec(), 10)
    pf = BatchPrefetcher(lambda: empty.sample(4), "cpu")
    with pytest.raises(ReplayEmptyError):
        pf.next(timeout=10)
    with pytest.raises(ReplayEmptyError):
        pf.next(timeout=10)
    pf.close()
    closed = BatchPrefetcher(lambda: _filled_buffer(20).sample(4), "cpu")
    closed.close()
    with pytest.raises(RuntimeError, match="after close"):
        closed.next()


def test_sampling_in_the_thread_while_the_caller_adds_never_sees_a_torn_row() -> None:
    buf = _filled_buffer(50)
    batches: list[dict] = []
    with BatchPrefetcher(lambda: buf.sample(64), "cpu") as pf:
        stop = threading.Event()

        def consume() -> None:
            while not stop.is_set():
                batches.append(pf.next(timeout=10))

        t = threading.Thread(target=consume)
        t.start()
        _add(buf, 50, 3000)  # wraps the ring buffer many times while the thread samples
        stop.set()
        t.join(timeout=30)
    assert len(batches) > 5
    assert all(_consistent(b) for b in batches)


def test_batch_to_device_moves_the_agent_columns_only() -> None:
    batch = _batch(6)
    batch["mc_returns"] = np.zeros(6, np.float32)
    batch["obs"] = {"state": batch["obs"]["state"], "cam": {"front": np.zeros((6, 4, 4, 3), np.uint8)}}
    out = batch_to_device(batch, torch.device("cpu"), pin=False)
    assert isinstance(out["actions"], torch.Tensor) and isinstance(out["rewards"], torch.Tensor)
    assert isinstance(out["obs"]["cam"]["front"], torch.Tensor) and out["obs"]["cam"]["front"].dtype == torch.uint8
    assert isinstance(out["mc_returns"], np.ndarray)  # read as numpy by learners.replay.buffer.mc_floor
    np.testing.assert_array_equal(out["next_obs"]["state"].numpy(), batch["next_obs"]["state"])
    assert out["terminated"].dtype == torch.bool


def test_prefetch_default_is_cuda_torch_without_a_residual_base() -> None:
    cuda, cpu = torch.device("cuda"), torch.device("cpu")
    assert prefetch_enabled(AgentConfig(), cuda) and not prefetch_enabled(AgentConfig(), cpu)
    assert prefetch_enabled(AgentConfig(prefetch=True), cpu)
    assert not prefetch_enabled(AgentConfig(prefetch=False), cuda)
    assert not prefetch_enabled(AgentConfig(residual_base="runs/bc"), cuda)
    assert not prefetch_enabled(AgentConfig(backend="jax"), cuda)
    assert not prefetch_enabled(AgentConfig(backend="jax", prefetch=True), cuda)


def test_training_through_the_prefetcher_equals_training_without_it() -> None:
    """The offline loop with prefetch=True (on a CPU: sampling in the thread) trains on the same batches in the same
    order as without it: the same weights after the same updates."""
    weights = []
    for prefetch in (False, True):
        agent = SACAgent(_spec(), _cfg(prefetch=prefetch, seed=5))
        source_enabled = BatchSource(lambda: {}, agent).enabled
        assert source_enabled is prefetch
        list(train_offline(agent, _filled_buffer(120, seed=9), updates=12, counters=LoopCounters(),
                           report_every=4))
        weights.append(agent.trainable_state())
    assert weights[0].keys() == weights[1].keys()
    for key in weights[0]:
        np.testing.assert_array_equal(weights[0][key], weights[1][key])


# ------------------------------------------------------------------------------------------- mixed precision
def test_bf16_update_tracks_float32_on_the_same_batch() -> None:
    batch = _batch(16, seed=2)
    metrics, agents = [], []
    for mp in ("off", "bf16"):
        agent = SACAgent(_spec(), _cfg(mixed_precision=mp, seed=1))
        metrics.append(agent.update(batch))
        agents.append(agent)
    for key in ("critic_loss", "q_mean", "actor_loss", "entropy"):
        assert np.isfinite(metrics[1][key])
        assert metrics[1][key] == pytest.approx(metrics[0][key], rel=0.05, abs=0.02), key
    assert metrics[1]["critic_loss"] != metrics[0]["critic_loss"]  # bf16 really ran: not bit-identical
    for (name, p32), (_, p16) in zip(agents[0].critic.named_parameters(), agents[1].critic.named_parameters(),
                                     strict=True):
        assert p16.dtype == torch.float32, name  # weights (and so the optimizer state) stay float32
        torch.testing.assert_close(p16, p32, rtol=0.0, atol=5e-3)  # one Adam step of lr 3e-4 from the same init
    state = agents[1].critic_opt.state[next(iter(agents[1].critic.parameters()))]
    assert state["exp_avg"].dtype == torch.float32


def test_bf16_with_images_hl_gauss_and_the_gripper_head() -> None:
    spec = EnvSpec("img", (ArraySpec("images/front", (16, 16, 3), "uint8", 0, 255),
                           ArraySpec("state", (4,), "float32")),
                   ArraySpec("action", (4,), "float32", -1.0, 1.0), 10.0)
    rng = np.random.default_rng(0)

    def obs() -> dict:
        return {"images/front": rng.integers(0, 256, (8, 16, 16, 3), dtype=np.uint8),
                "state": rng.standard_normal((8, 4)).astype(np.float32)}

    batch = {"obs": obs(), "next_obs": obs(), "actions": np.concatenate(
        [rng.uniform(-1, 1, (8, 3)), rng.choice([-1.0, 0.0, 1.0], (8, 1))], 1).astype(np.float32),
        "rewards": rng.random(8).astype(np.float32), "terminated": np.zeros(8, bool)}
    cfg = AgentConfig(encoder="conv", conv_channels=(8, 8), image_latent_dim=16, hidden_dims=(16,), batch_size=8,
                      critic_updates_per_actor_update=1, ensemble_size=2, critic_loss="hl_gauss", gripper_head=True,
                      device="cpu", mixed_precision="bf16")
    agent = SACAgent(spec, cfg)
    for _ in range(2):
        m = agent.update(batch)
    assert all(np.isfinite(v) for v in m.values())
    assert {"critic_loss", "gripper_loss", "hl_gauss_clipped_share"} <= m.keys()
    assert all(p.dtype == torch.float32 for p in agent.encoder.parameters())
    a = agent.act({"images/front": batch["obs"]["images/front"][0], "state": batch["obs"]["state"][0]})
    assert a.dtype == np.float32 and a.shape == (4,)


def test_bf16_on_a_cpu_without_native_bf16_warns_once_naming_the_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """Emulated bf16 is slower than float32: an agent asking for it on such a CPU says so (and how to turn it off);
    on a CPU with native bf16, or asking for none, it says nothing."""
    import warnings

    from learners.agents import precision

    cfg = _cfg(mixed_precision="bf16")
    monkeypatch.setattr(precision, "cpu_has_native_bf16", lambda: False)
    with pytest.warns(RuntimeWarning, match="mixed_precision=bf16 on a CPU without native bf16") as got:
        SACAgent(_spec(), cfg)
    assert len(got) == 1 and "--set mixed_precision=off" in str(got[0].message)
    both = precision.bf16_cpu_warning(cfg.replace(backbone_precision="bf16"), torch.device("cpu"))
    assert both is not None and "--set backbone_precision=float32" in both and "mixed_precision=bf16, backbone" in both
    assert precision.bf16_cpu_warning(_cfg(), torch.device("cpu")) is None
    monkeypatch.setattr(precision, "cpu_has_native_bf16", lambda: True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        SACAgent(_spec(), cfg)


def test_prefetch_with_a_residual_base_is_refused() -> None:
    with pytest.raises(ConfigError, match="prefetch"):
        AgentConfig(prefetch=True, residual_base="runs/bc")
    assert AgentConfig(prefetch=False, residual_base="runs/bc").prefetch is False


def test_mixed_precision_values_are_checked() -> None:
    with pytest.raises(ConfigError, match="mixed_precision"):
        AgentConfig(mixed_precision="fp16")
    from learners.agents.agent import make_agent

    with pytest.raises(ConfigError, match="mixed_precision"):
        make_agent(_spec(), _cfg(backend="jax", mixed_precision="bf16"))


def test_the_distributed_learner_trains_through_the_prefetcher_and_stops_it(tmp_path: Path) -> None:
    """Learner with prefetch=True (on a CPU: the thread samples while the learner stores): the update-to-data hold
    counts as without it, the checkpoint and resume work, close() stops the thread."""
    from learners.distributed.learner import Learner
    from tests.test_learner_runtime import AGENT, SPEC, Clock, FakeEndpoint, drain, lcfg, make_chunk

    ep = FakeEndpoint()
    learner = Learner(SPEC, AGENT.replace(prefetch=True), lcfg(checkpoint_every=10), ep, tmp_path, clock=Clock())
    assert learner.batches.enabled
    for i in range(5):
        ep.deliver("a0", "s", 8 * i, make_chunk(8, start=8 * i))
        drain(learner)
    assert learner.received == 40 and learner.updates == learner.target_updates == 15  # floor(0.5 * (40 - 10))
    prefetcher = learner.batches._prefetcher
    assert prefetcher is not None and prefetcher._thread.is_alive()
    learner.close()
    assert not prefetcher._thread.is_alive() and learner.batches._prefetcher is None
    resumed = Learner(SPEC, AGENT.replace(prefetch=True), lcfg(), FakeEndpoint(), tmp_path, resume=True,
                      clock=Clock())
    assert resumed.received == 40 and len(resumed.online) == 40
    resumed.close()


def test_the_gpu_notice_prints_the_gpu_settings_in_effect_on_cuda_only() -> None:
    from learners.agents.device_defaults import gpu_notice

    msg = gpu_notice(AgentConfig(device="cuda"), has_cameras=False)
    assert msg is not None and msg.startswith("GPU learner (torch): CUDA graphs on (cuda_graphs=auto)")
    assert "mixed_precision=off" in msg and "--set FIELD=VALUE" in msg and "backbone_precision" not in msg
    assert gpu_notice(AgentConfig(device="cuda:1"), has_cameras=False) == msg
    assert gpu_notice(AgentConfig(device="cpu"), has_cameras=False) is None
    images = gpu_notice(AgentConfig(device="cuda"), has_cameras=True)
    assert images is not None and "CUDA graphs on" in images and "backbone_precision=float32" in images
    off = gpu_notice(AgentConfig(device="cuda", cuda_graphs="off"), has_cameras=False)
    assert off is not None and "CUDA graphs off (cuda_graphs=off)" in off
    jax_msg = gpu_notice(AgentConfig(device="cuda", backend="jax"), has_cameras=False)
    assert jax_msg is not None and "backend jax" in jax_msg


# ------------------------------------------------------------------------- on a GPU (skipped without CUDA, as in CI)
cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@cuda
def test_on_cuda_prefetched_batches_arrive_whole_while_the_gpu_is_busy() -> None:
    """Pinned memory, the side stream and the event: each batch read on the current stream equals the direct batch,
    also when the current stream is busy (a missing wait would read half-copied memory)."""
    direct = MixedSampler(_filled_buffer(300, seed=3), _filled_buffer(80, seed=4), 0.5)
    ahead = MixedSampler(_filled_buffer(300, seed=3), _filled_buffer(80, seed=4), 0.5)
    busy = torch.randn(2048, 2048, device="cuda")
    with BatchPrefetcher(lambda: ahead.sample(256), "cuda") as pf:
        for _ in range(20):
            for _ in range(5):
                busy = torch.tanh(busy @ busy)  # queue work on the current stream
            got, want = pf.next(), direct.sample(256)
            assert got["actions"].is_cuda and got["obs"]["state"].is_cuda
            np.testing.assert_array_equal(got["obs"]["state"].cpu().numpy(), want["obs"]["state"])
            np.testing.assert_array_equal(got["rewards"].cpu().numpy(), want["rewards"])
            assert _consistent({k: (v.cpu().numpy() if isinstance(v, torch.Tensor) else
                                    {n: t.cpu().numpy() for n, t in v.items()} if isinstance(v, dict) else v)
                                for k, v in got.items()})


@cuda
def test_on_cuda_training_through_the_prefetcher_matches_training_without_it() -> None:
    weights = []
    for prefetch in (False, True):
        agent = SACAgent(_spec(), _cfg(prefetch=prefetch, seed=5, device="cuda"))
        assert BatchSource(lambda: {}, agent).enabled is prefetch
        list(train_offline(agent, _filled_buffer(120, seed=9), updates=12, counters=LoopCounters(), report_every=4))
        weights.append(agent.trainable_state())
    for key in weights[0]:
        np.testing.assert_allclose(weights[1][key], weights[0][key], rtol=1e-5, atol=1e-6)


@cuda
def test_on_cuda_bf16_tracks_float32() -> None:
    batch = _batch(16, seed=2)
    m = [SACAgent(_spec(), _cfg(mixed_precision=mp, seed=1, device="cuda")).update(batch) for mp in ("off", "bf16")]
    for key in ("critic_loss", "q_mean", "actor_loss", "entropy"):
        assert m[1][key] == pytest.approx(m[0][key], rel=0.05, abs=0.02), key
