"""Feature cache for frozen backbones (learners.replay.feature_cache): each stored frame encoded once per write, for
K fixed random-shift crops; the cached update equals the uncached one on the same crops; memory plan and refusals;
replay state and agent weights untouched."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from learners.agents.config import AgentConfig
from learners.agents.encoders import ResNet10, random_shift, save_backbone_weights
from learners.agents.sac import SACAgent
from learners.replay.buffer import ReplayBuffer
from learners.replay.feature_cache import (
    FeatureCache,
    attach_feature_caches,
    plan_feature_cache,
    run_frames,
    shift_images,
)
from robot_rl.errors import ConfigError, ShapeError
from robot_rl.specs import ArraySpec, EnvSpec

torch.set_num_threads(1)
CAMS = ("images/front", "images/wrist")


def _spec(h: int = 32) -> EnvSpec:
    obs = [ArraySpec(c, (h, h, 3), "uint8", 0, 255) for c in CAMS] + [ArraySpec("state", (5,), "float32")]
    return EnvSpec("img", tuple(sorted(obs, key=lambda s: s.name)), ArraySpec("action", (3,), "float32", -1, 1),
                   10.0)


def _cfg(weights: Path, **kw: object) -> AgentConfig:
    base: dict = dict(encoder="resnet10", encoder_weights=str(weights), freeze_encoder=True, hidden_dims=(32,),
                      ensemble_size=2, batch_size=8, critic_updates_per_actor_update=2, image_latent_dim=16,
                      proprio_latent_dim=8, augment_pad=3, feature_cache="on", feature_cache_crops=3,
                      feature_cache_dtype="float32", device="cpu", seed=3)
    base.update(kw)
    return AgentConfig(**base)


def write_weights(folder: Path) -> Path:
    """A random frozen ResNet-10 (seed 0) as a weights file in `folder`."""
    torch.manual_seed(0)
    path = folder / "resnet10.safetensors"
    save_backbone_weights(ResNet10(), path)
    return path


@pytest.fixture()
def weights(tmp_path: Path) -> Path:
    return write_weights(tmp_path)


def _fill(buf: ReplayBuffer, steps: int, seed: int = 0, ep_len: int = 7) -> None:
    rng = np.random.default_rng(seed)

    def obs() -> dict:
        return {"images": {c.split("/")[1]: rng.integers(0, 256, (32, 32, 3), dtype=np.uint8) for c in CAMS},
                "state": rng.normal(size=5).astype(np.float32)}

    o = obs()
    for t in range(steps):
        nxt = obs()
        end = (t + 1) % ep_len == 0
        buf.add(o, rng.uniform(-1, 1, 3), float(rng.random()), nxt, end, False, intervention=bool(t % 2))
        o = obs() if end else nxt


def test_shift_images_is_random_shift_with_the_same_offsets() -> None:
    images = torch.randint(0, 256, (16, 12, 10, 3), dtype=torch.uint8)
    pad = 3
    gen = torch.Generator().manual_seed(5)
    shifts = torch.randint(0, 2 * pad + 1, (16, 2), generator=torch.Generator().manual_seed(5)) - pad
    assert torch.equal(shift_images(images, shifts), random_shift(images, pad, gen))
    with pytest.raises(ShapeError):
        shift_images(images, shifts[:3])


def test_cached_crops_equal_the_backbone_on_the_same_shifted_frames(weights: Path) -> None:
    spec = _spec()
    agent = SACAgent(spec, _cfg(weights))
    buf = ReplayBuffer(spec, 64, seed=1)
    _fill(buf, 20)
    assert "feature cache on" in attach_feature_caches(agent, [buf], frames=64)
    cache = buf.feature_cache
    assert isinstance(cache, FeatureCache)
    assert cache.refresh() == buf._filled and cache.refresh() == 0  # each frame once
    shifts = cache.shifts[: buf._filled]
    assert shifts.min() >= -3 and shifts.max() <= 3 and len(np.unique(shifts.reshape(-1, 2), axis=0)) > 5
    for slot, crop in ((0, 0), (5, 2), (buf._filled - 1, 1)):  # batch size changes the float sums a little
        imgs = {k: torch.as_tensor(v)[None] for k, v in cache.crop_images(slot, crop).items()}
        ref = agent.encoder.backbone_features(imgs)
        for cam in CAMS:
            np.testing.assert_allclose(cache.features[cam][slot, crop], ref[cam][0].numpy(), rtol=1e-4, atol=1e-5)
    # the rows of a batch carry their own slots' crops
    batch = buf.gather(np.array([2, 9]))
    for row, slot in enumerate((2, 9)):
        for key, s in (("obs", slot), ("next_obs", slot + 1)):
            crop = batch[f"{key}_crops"][row]
            assert np.array_equal(batch[f"{key}_features"][CAMS[0]][row], cache.features[CAMS[0]][s, crop])


def test_cached_update_equals_the_uncached_update_on_the_same_crops(weights: Path) -> None:
    cached_equals_uncached(weights)


def cached_equals_uncached(weights: Path, **kw: object) -> dict:
    """Two agents of the same seed, one updated on a feature cache's rows, one on the same crops as images (no
    cache, no shift): the same metrics and weights after two updates; returns the cached batch."""
    spec = _spec()
    cached = SACAgent(spec, _cfg(weights, **kw))
    plain = SACAgent(spec, _cfg(weights, augment_pad=0, feature_cache="off", **kw))  # fed the crops as images
    buf = ReplayBuffer(spec, 64, seed=1)
    _fill(buf, 30)
    attach_feature_caches(cached, [buf], frames=64)
    cache = buf.feature_cache
    idx = buf.sample_indices(cached.cfg.samples_per_update)
    for _ in range(2):
        batch = buf.gather(idx)
        shifted = {key: {cam: np.stack([cache.crop_images(int(s), int(c))[cam]
                                        for s, c in zip(slots, batch[f"{key}_crops"], strict=True)])
                         for cam in CAMS} for key, slots in (("obs", idx), ("next_obs", (idx + 1) % buf.capacity))}
        plain_batch = {k: v for k, v in batch.items() if not k.endswith(("_features", "_crops", "_predictions"))}
        for key in ("obs", "next_obs"):
            plain_batch[key] = {**batch[key], **shifted[key]}
        torch.manual_seed(11)  # the heads' dropout
        m_cached = cached.update(batch)
        torch.manual_seed(11)
        m_plain = plain.update(plain_batch)
        for k in m_plain:
            assert m_cached[k] == pytest.approx(m_plain[k], rel=1e-4, abs=1e-5), k
    a, b = cached.trainable_state(), plain.trainable_state()
    assert a.keys() == b.keys()
    for k in a:
        np.testing.assert_allclose(a[k], b[k], rtol=1e-4, atol=1e-5)
    assert cached.state_dict().keys() == plain.state_dict().keys()  # checkpoints: the cache is not in them
    return batch


def test_float16_cache_is_close_and_half_the_bytes(weights: Path) -> None:
    spec = _spec()
    agent = SACAgent(spec, _cfg(weights))
    b32, b16 = ReplayBuffer(spec, 64, seed=1), ReplayBuffer(spec, 64, seed=1)
    _fill(b32, 12)
    _fill(b16, 12)
    attach_feature_caches(agent, [b32], frames=64, seed=4)
    plan16 = plan_feature_cache(_cfg(weights, feature_cache_dtype="float16"), agent.encoder, 64)[0]
    assert plan16 is not None
    b16.feature_cache = FeatureCache(b16, agent.encoder.backbone_features, plan16, seed=4)
    b32.feature_cache.refresh()
    b16.feature_cache.refresh()
    for cam in CAMS:
        f32, f16 = b32.feature_cache.features[cam], b16.feature_cache.features[cam]
        assert f16.dtype == np.float16 and f16.nbytes * 2 == f32.nbytes
        np.testing.assert_allclose(f16.astype(np.float32), f32, rtol=2e-3, atol=2e-3)


def test_rewritten_and_loaded_frames_are_encoded_again(weights: Path, tmp_path: Path) -> None:
    spec = _spec()
    agent = SACAgent(spec, _cfg(weights))
    buf = ReplayBuffer(spec, 16, seed=1)
    _fill(buf, 10)
    attach_feature_caches(agent, [buf], frames=16)
    assert buf.feature_cache.refresh() == buf._filled
    _fill(buf, 4, seed=9)  # new segment: 5 more frames, wrapping onto the first slots
    assert buf.feature_cache.refresh() == 5
    path = buf.save(tmp_path / "replay.npz")
    assert not any("feature" in k for k in buf.state_arrays())  # derived data: never saved
    buf.load(path)
    assert buf.feature_cache.refresh() == buf._filled


def test_plan_refuses_or_falls_back_with_a_reason(weights: Path) -> None:
    spec = _spec()
    agent = SACAgent(spec, _cfg(weights))
    plan, note = plan_feature_cache(agent.cfg, agent.encoder, 1000)
    # 2 cameras x 3 crops x (512, 1, 1) float32 per frame
    assert plan is not None and plan.frame_bytes == 2 * 3 * 512 * 4 and "0.01 GB" in note
    tiny = _cfg(weights, feature_cache_budget_gb=0.001)
    with pytest.raises(ConfigError, match="lower --replay-capacity"):
        plan_feature_cache(tiny, agent.encoder, 1000)
    plan, note = plan_feature_cache(tiny.replace(feature_cache="auto"), agent.encoder, 1000)
    assert plan is None and "budget" in note
    assert plan_feature_cache(_cfg(weights, augment_pad=0), agent.encoder, 10)[0].crops == 1  # type: ignore[union-attr]
    conv = SACAgent(spec, _cfg(weights, encoder="conv", feature_cache="auto"))
    assert plan_feature_cache(conv.cfg, conv.encoder, 10)[0] is None
    with pytest.raises(ConfigError, match="backbone trains"):
        plan_feature_cache(conv.cfg.replace(feature_cache="on"), conv.encoder, 10)
    with pytest.raises(ShapeError, match="trains"):  # a cached batch for a trainable backbone
        buf = ReplayBuffer(spec, 32, seed=1)
        _fill(buf, 20)
        attach_feature_caches(agent, [buf], frames=32)
        conv.update(buf.sample(conv.cfg.samples_per_update))
    for bad in (dict(feature_cache="yes"), dict(feature_cache_crops=0), dict(feature_cache_dtype="int8"),
                dict(feature_cache_budget_gb=0.0)):
        with pytest.raises(ConfigError):
            _cfg(weights, **bad)


def test_run_frames_bounds_what_the_buffers_can_hold() -> None:
    spec = _spec()
    a, b = ReplayBuffer(spec, 100, seed=0), ReplayBuffer(spec, 1000, seed=0)
    _fill(b, 10)
    assert run_frames([a, b, None], 30) == 60 + b._filled + 60
    assert run_frames([a], 500) == 100


def test_new_frames_are_encoded_in_batches_and_not_drawn_before(weights: Path) -> None:
    spec = _spec()
    agent = SACAgent(spec, _cfg(weights, feature_cache_crops=1))
    buf = ReplayBuffer(spec, 256, seed=1)
    _fill(buf, 40)
    attach_feature_caches(agent, [buf], frames=256)
    cache = buf.feature_cache
    buf.sample(8)  # the first draw encodes everything stored
    assert cache.stale().size == 0
    before = buf._filled
    _fill(buf, 5, seed=2)  # a new segment: 6 new frames, fewer than min_batch
    new = np.arange(before, buf._filled)
    idx = np.concatenate([buf.sample_indices(64) for _ in range(10)])
    assert cache.stale().size == 6 and not np.isin(idx, new).any()  # not drawn while unencoded
    rows = buf.gather(new[:-1])  # asked for explicitly: encoded on the spot
    assert cache.stale().size == 0 and rows["obs_features"][CAMS[0]].shape == (5, 512, 1, 1)
    _fill(buf, cache.min_batch + 3, seed=3)
    buf.sample_indices(4)
    assert cache.stale().size == 0  # a whole batch gathered: encoded at the next draw


def test_robot_rl_train_builds_cached_buffers_for_a_frozen_backbone(weights: Path, tmp_path: Path) -> None:
    """The in-process path (learners.training.train.build_run): demo + online buffers cached, the note said, and an
    update runs on the cached rows; the small conv encoder of the pixel recipe stays uncached."""
    from learners.training.config import TrainConfig
    from learners.training.train import build_run

    cfg = TrainConfig(task="twin-reach", obs_mode="pixels", image_size=32, encoder_weights=str(weights),
                      max_env_steps=50, replay_capacity=200, device="cpu")
    run = build_run(cfg)
    try:
        assert run.online.feature_cache is not None and run.notes and "feature cache on" in run.notes[0]
        obs, _ = run.env.reset(seed=0)
        for _ in range(40):
            nxt, r, term, trunc, _ = run.env.step(run.env.action_space.sample())
            run.online.add(obs, np.zeros(run.spec.action.shape), float(r), nxt, term, trunc)
            obs = run.env.reset()[0] if term or trunc else nxt
        batch = run.online.sample(run.agent.cfg.samples_per_update)
        assert set(batch["obs_features"]) == {c.name for c in run.spec.cameras}
        assert np.isfinite(run.agent.update(batch)["critic_loss"])
    finally:
        run.close()
    run = build_run(cfg.replace(encoder_weights=None))
    try:
        assert run.online.feature_cache is None and "backbone trains" in run.notes[0]
    finally:
        run.close()
