"""Feature cache kept on the agent's device (AgentConfig.feature_cache_device): training batches carry no camera
images, the cached rows come out as tensors gathered on the device, and the update equals the host cache's update
on the same rows. The CPU runs the tensor path with device=cpu; the CUDA test (skipped without a GPU) the real one."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from test_feature_cache import CAMS, _cfg, _fill, _spec, write_weights

from learners.agents.config import AgentConfig
from learners.agents.sac import SACAgent
from learners.replay.buffer import MixedSampler, ReplayBuffer
from learners.replay.feature_cache import FeatureCache, attach_feature_caches, cache_on_device
from learners.replay.prefetch import batch_to_device
from robot_rl.errors import ConfigError

torch.set_num_threads(1)


@pytest.fixture()
def weights(tmp_path: Path) -> Path:
    return write_weights(tmp_path)


def _pair(weights: Path, device: str, dtype: str = "float32") -> tuple[SACAgent, SACAgent, MixedSampler,
                                                                       MixedSampler]:
    """Two agents and samplers over identical buffers: a host cache and one on `device`."""
    spec = _spec()
    out = []
    for where in ("host", "device"):
        agent = SACAgent(spec, _cfg(weights, device=device, feature_cache_device=where, feature_cache_dtype=dtype))
        online, demo = ReplayBuffer(spec, 96, seed=1), ReplayBuffer(spec, 64, seed=2)
        _fill(online, 40)
        _fill(demo, 20, seed=5)
        note = attach_feature_caches(agent, [online, demo], frames=160)
        assert ("kept on the host" if where == "host" else f"kept on {agent.device}") in note
        out.append((agent, MixedSampler(online, demo, 0.5)))
    (a_host, s_host), (a_dev, s_dev) = out
    return a_host, a_dev, s_host, s_dev


def test_training_batches_leave_the_cached_cameras_out(weights: Path) -> None:
    a_host, _, s_host, _ = _pair(weights, "cpu")
    batch = s_host.sample(a_host.cfg.samples_per_update)
    for key in ("obs", "next_obs"):
        assert set(batch[key]) == {"state"}  # no image bytes gathered
        assert set(batch[f"{key}_features"]) == set(CAMS)
    full = s_host.online.gather(np.array([1, 2]))  # explicit gathers (diagnostics) keep everything
    assert set(full["obs"]) == {*CAMS, "state"} and "obs_features" in full
    assert set(s_host.online.sample(4, images=True)["obs"]) == {*CAMS, "state"}
    assert np.isfinite(a_host.update(batch)["critic_loss"])


def test_device_cache_equals_the_host_cache(weights: Path) -> None:
    a_host, a_dev, s_host, s_dev = _pair(weights, "cpu")
    cache = s_dev.online.feature_cache
    assert isinstance(cache, FeatureCache) and cache.on_device
    for _ in range(3):
        b_host = s_host.sample(a_host.cfg.samples_per_update)
        b_dev = s_dev.sample(a_dev.cfg.samples_per_update)
        for key in ("obs_features", "next_obs_features"):
            for cam in CAMS:
                assert isinstance(b_dev[key][cam], torch.Tensor) and isinstance(b_host[key][cam], np.ndarray)
                np.testing.assert_array_equal(b_dev[key][cam].numpy(), b_host[key][cam])
        torch.manual_seed(11)
        m_host = a_host.update(b_host)
        torch.manual_seed(11)
        m_dev = a_dev.update(b_dev)
        assert m_host == m_dev
    assert cache.nbytes() == s_host.online.feature_cache.nbytes()


def test_cache_placement_option() -> None:
    cfg = AgentConfig()
    assert cfg.feature_cache_device == "auto"
    assert cache_on_device(cfg, torch.device("cpu"), 10) == (False, "kept on the host")
    assert cache_on_device(cfg.replace(feature_cache_device="device"), torch.device("cpu"), 10)[0]
    assert not cache_on_device(cfg.replace(feature_cache_device="host"), torch.device("cpu"), 10)[0]
    with pytest.raises(ConfigError, match="feature_cache_device"):
        AgentConfig(feature_cache_device="gpu")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_cache_lives_on_the_gpu_and_matches_the_host_cache(weights: Path) -> None:
    """On a GPU: auto keeps the (small) cache on the device, the batch's features are CUDA tensors gathered there,
    the prefetcher leaves them alone, and the update is the host cache's (float16 storage: the same rounded values
    on both sides, so the metrics agree to float32 kernel rounding)."""
    spec = _spec()
    agents, samplers = [], []
    for where in ("host", "auto"):
        agent = SACAgent(spec, _cfg(weights, device="cuda", feature_cache_device=where, feature_cache_dtype="float16",
                                    cuda_graphs="off"))
        online = ReplayBuffer(spec, 96, seed=1)
        _fill(online, 40)
        attach_feature_caches(agent, [online], frames=96)
        agents.append(agent)
        samplers.append(MixedSampler(online))
    assert not samplers[0].online.feature_cache.on_device and samplers[1].online.feature_cache.on_device
    feats = samplers[1].online.feature_cache.features[CAMS[0]]
    assert feats.device.type == "cuda" and feats.dtype == torch.float16
    for _ in range(2):
        b_host = samplers[0].sample(agents[0].cfg.samples_per_update)
        b_dev = batch_to_device(samplers[1].sample(agents[1].cfg.samples_per_update), agents[1].device, pin=True)
        for key in ("obs_features", "next_obs_features"):
            for cam in CAMS:
                assert b_dev[key][cam].device.type == "cuda"
                np.testing.assert_allclose(b_dev[key][cam].cpu().float().numpy(), b_host[key][cam].astype(np.float32),
                                           rtol=2e-3, atol=1e-4)
        torch.manual_seed(11)
        m_host = agents[0].update(b_host)
        torch.manual_seed(11)
        m_dev = agents[1].update(b_dev)
        for k in m_host:
            assert m_dev[k] == pytest.approx(m_host[k], rel=1e-3, abs=1e-4), k
