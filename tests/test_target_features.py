"""AgentConfig.encoder_features: the frozen target heads a `robot-rl pretrain-encoder` file carries (per camera,
TCP now and at the next gripper event) as the camera's features, alone ('targets') or beside the trainable head
('both'); what a bad file or setting gets."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from learners.agents.backbones import (
    ResNet10,
    build_target_head,
    load_backbone_weights,
    load_target_head,
    save_backbone_weights,
)
from learners.agents.config import AgentConfig
from learners.agents.encoders import ObservationEncoder
from learners.agents.obs import ObsLayout
from learners.agents.sac_batch import cached_predictions
from learners.replay.buffer import ReplayBuffer
from learners.replay.feature_cache import attach_feature_caches
from robot_rl.errors import ConfigError, ShapeError
from tests.test_feature_cache import (  # two 32x32 cameras, a 5-element state, 3 actions
    CAMS,
    _fill,
    _spec,
    cached_equals_uncached,
)
from tests.test_feature_cache import _cfg as _cache_cfg

torch.set_num_threads(1)


def _write(path: Path, cams: tuple[str, ...] = CAMS, in_features: int = 512,
           n_out: int = 6) -> dict[str, torch.nn.Module]:
    """A ResNet-10 file with a random target head per camera (a 32x32 frame -> (512, 1, 1) features)."""
    torch.manual_seed(0)
    heads = {c: build_target_head(in_features, n_out) for c in cams}
    save_backbone_weights(ResNet10(), path, source="test", target_heads=heads, target_names=("a",) * n_out)
    return heads


def _cfg(path: Path, features: str = "targets") -> AgentConfig:
    return AgentConfig(encoder="resnet10", encoder_weights=str(path), encoder_features=features, image_latent_dim=16,
                       proprio_latent_dim=8, hidden_dims=(16,), ensemble_size=2, batch_size=8, device="cpu")


def test_target_heads_round_trip_and_the_backbone_loader_ignores_them(tmp_path: Path) -> None:
    path = tmp_path / "cell.safetensors"
    heads = _write(path)
    load_backbone_weights(ResNet10(), path)  # the head tensors are not "unexpected backbone weights"
    x = torch.randn(3, 512, 1, 1)
    for cam in CAMS:
        head = load_target_head(path, cam, 512)
        torch.testing.assert_close(head(x), heads[cam](x))
        assert not any(p.requires_grad for p in head.parameters())


def test_targets_are_the_camera_features_frozen_and_never_sent(tmp_path: Path) -> None:
    path = tmp_path / "cell.safetensors"
    heads = _write(path)
    layout = ObsLayout.from_spec(_spec())
    enc = ObservationEncoder(layout, _cfg(path))
    assert enc.out_dim == 8 + 6 * 2  # the proprio latent + 6 predictions per camera, no trainable image head
    imgs = {c: torch.randint(0, 256, (4, 32, 32, 3), dtype=torch.uint8) for c in CAMS}
    state = torch.randn(4, 5)
    out = enc(imgs, state)
    backbone = ResNet10()
    load_backbone_weights(backbone, path)
    backbone.eval()
    with torch.no_grad():
        for i, cam in enumerate(CAMS):
            torch.testing.assert_close(out[:, 8 + 6 * i: 14 + 6 * i], heads[cam](backbone(imgs[cam])))
    trainable = {id(p) for p in enc.trainable_parameters()}
    assert not any(id(p) in trainable for e in enc.camera_encoders().values() for p in e.targets.parameters())
    frozen = enc.frozen_names()
    assert "cameras.images__front.targets.1.weight" in frozen and "cameras.images__wrist.targets.3.bias" in frozen
    both = ObservationEncoder(layout, _cfg(path, "both"))
    assert both.out_dim == 8 + (16 + 6) * 2
    spatial = ObservationEncoder(layout, _cfg(path, "spatial"))  # the default ignores the heads
    assert spatial.out_dim == 8 + 16 * 2 and all(e.targets is None for e in spatial.camera_encoders().values())


def test_an_update_trains_the_agent_but_not_the_target_heads(tmp_path: Path) -> None:
    from learners.agents.sac import SACAgent

    path = tmp_path / "cell.safetensors"
    _write(path)
    spec = _spec()
    agent = SACAgent(spec, _cfg(path, "both"))
    heads = {c: {k: v.clone() for k, v in e.targets.state_dict().items()}
             for c, e in agent.encoder.camera_encoders().items()}
    rng = np.random.default_rng(0)
    n = agent.cfg.samples_per_update

    def obs() -> dict[str, np.ndarray]:
        o = {c: rng.integers(0, 256, (n, 32, 32, 3), dtype=np.uint8) for c in CAMS}
        return o | {"state": rng.standard_normal((n, 5)).astype(np.float32)}

    batch = {"obs": obs(), "next_obs": obs(), "actions": rng.uniform(-1, 1, (n, 3)).astype(np.float32),
             "rewards": rng.uniform(0, 1, n).astype(np.float32), "terminated": np.zeros(n, np.float32)}
    dense_before = agent.encoder.camera_encoders()["images/front"].dense.weight.detach().clone()
    for _ in range(3):
        assert np.isfinite(agent.update(batch)["critic_loss"])
    for c, e in agent.encoder.camera_encoders().items():
        for k, v in e.targets.state_dict().items():
            torch.testing.assert_close(v, heads[c][k])
    assert not torch.equal(agent.encoder.camera_encoders()["images/front"].dense.weight, dense_before)
    assert not any(".targets." in k for k in agent.state_dict())  # checkpoints: loaded from the file instead


def test_bad_files_and_settings_get_clear_errors(tmp_path: Path) -> None:
    path = tmp_path / "cell.safetensors"
    _write(path, cams=("images/front",))
    with pytest.raises(ConfigError, match=r"no target head for camera 'images/wrist' \(heads for: \['images/front'\]"):
        ObservationEncoder(ObsLayout.from_spec(_spec()), _cfg(path))
    plain = tmp_path / "plain.safetensors"
    save_backbone_weights(ResNet10(), plain)
    with pytest.raises(ConfigError, match="heads for: none"):
        load_target_head(plain, "images/front", 512)
    with pytest.raises(ShapeError, match="image size the agent sees"):  # heads trained on 64x64 frames: 2x2 maps
        load_target_head(path, "images/front", 512 * 4)
    with pytest.raises(ConfigError, match="needs encoder resnet10 / resnet18"):
        AgentConfig(encoder="conv", encoder_features="targets")
    with pytest.raises(ConfigError, match="encoder_features"):
        AgentConfig(encoder_features="keypoints")
    from learners.agents.jax.agent import check_supported

    with pytest.raises(ConfigError, match="encoder_features='targets' is not supported by backend=jax"):
        check_supported(_cfg(path))


def test_precomputed_predictions_are_what_the_head_computes(tmp_path: Path) -> None:
    path = tmp_path / "cell.safetensors"
    _write(path)
    enc = ObservationEncoder(ObsLayout.from_spec(_spec()), _cfg(path, "both"))
    enc.eval()
    imgs = {c: torch.randint(0, 256, (4, 32, 32, 3), dtype=torch.uint8) for c in CAMS}
    state = torch.randn(4, 5)
    feats = enc.backbone_features(imgs)
    preds = enc.target_predictions(feats)
    assert enc.prediction_dims() == {c: 6 for c in CAMS} and {k: tuple(v.shape) for k, v in preds.items()} == {
        c: (4, 6) for c in CAMS}
    torch.testing.assert_close(enc.head(feats, state, preds), enc.head(feats, state))
    # the head reads the predictions it is given (so a cache's are used, not recomputed)
    moved = enc.head(feats, state, {c: p + 1.0 for c, p in preds.items()})
    torch.testing.assert_close(moved[:, 8 + 16: 8 + 22], preds[CAMS[0]] + 1.0)
    spatial = ObservationEncoder(ObsLayout.from_spec(_spec()), _cfg(path, "spatial"))
    assert spatial.prediction_dims() == {} and spatial.target_predictions(feats) == {}


def test_the_feature_cache_keeps_each_crops_predictions_and_the_update_is_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "cell.safetensors"
    _write(path)
    batch = cached_equals_uncached(path, encoder_features="both")
    n = batch["actions"].shape[0]
    assert {k: v.shape for k, v in batch["obs_predictions"].items()} == {c: (n, 6) for c in CAMS}
    # each row's predictions are the heads on that row's cached crop (float16 storage: on the rounded features)
    spec = _spec()
    from learners.agents.sac import SACAgent

    agent = SACAgent(spec, _cache_cfg(path, encoder_features="both", feature_cache_dtype="float16"))
    buf = ReplayBuffer(spec, 64, seed=1)
    _fill(buf, 20)
    assert "feature cache on" in attach_feature_caches(agent, [buf], frames=64)
    cache = buf.feature_cache
    cache.refresh()
    assert cache.predictions[CAMS[0]].shape == (cache.rows, 3, 6)
    rows = buf.gather(np.array([1, 4, 11]))
    for key in ("obs", "next_obs"):
        feats = {c: torch.as_tensor(rows[f"{key}_features"][c]).float() for c in CAMS}
        ref = agent.encoder.target_predictions(feats)
        for c in CAMS:
            np.testing.assert_allclose(rows[f"{key}_predictions"][c], ref[c].numpy(), rtol=1e-5, atol=1e-5)
    with pytest.raises(ShapeError, match="obs_predictions"):
        cached_predictions({CAMS[0]: np.zeros((3, 6))}, agent.encoder, 3, torch.device("cpu"))
    with pytest.raises(ShapeError, match="expected"):
        cached_predictions({c: np.zeros((3, 5)) for c in CAMS}, agent.encoder, 3, torch.device("cpu"))
