"""Image path: random-shift augmentation, ResNet-10 weights from a local safetensors file, frozen backbones,
the DrQ agent on tiny images (obs and next_obs augmented independently), trainable state without frozen weights."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

import learners.agents.sac as sac_module
from learners.agents.config import AgentConfig
from learners.agents.encoders import (
    ConvBackbone,
    ResNet10,
    load_backbone_weights,
    random_shift,
    resnet10_keys,
    save_backbone_weights,
)
from learners.agents.policy import build_policy
from learners.agents.sac import SACAgent
from robot_rl.errors import ConfigError, ShapeError
from robot_rl.specs import ArraySpec, EnvSpec

torch.set_num_threads(1)


def _coord_images(b: int, h: int, w: int) -> torch.Tensor:
    """Channel 0 = row index, channel 1 = column index, channel 2 = image index."""
    rows = torch.arange(h).view(1, h, 1).expand(b, h, w)
    cols = torch.arange(w).view(1, 1, w).expand(b, h, w)
    idx = torch.arange(b).view(b, 1, 1).expand(b, h, w)
    return torch.stack([rows, cols, idx], -1).to(torch.uint8)


def test_random_shift_is_an_edge_padded_crop_within_pad() -> None:
    b, h, w, pad = 64, 20, 24, 4
    x = _coord_images(b, h, w)
    g = torch.Generator().manual_seed(0)
    y = random_shift(x, pad, g)
    assert y.shape == x.shape and y.dtype == torch.uint8
    shifts = set()
    for i in range(b):
        dy = int(y[i, h // 2, 0, 0]) - h // 2
        dx = int(y[i, 0, w // 2, 1]) - w // 2
        assert -pad <= dy <= pad and -pad <= dx <= pad
        want_rows = (torch.arange(h) + dy).clamp(0, h - 1)
        want_cols = (torch.arange(w) + dx).clamp(0, w - 1)
        assert torch.equal(y[i, :, 0, 0].long(), want_rows), "rows are not a shifted, edge-clamped crop"
        assert torch.equal(y[i, 0, :, 1].long(), want_cols)
        assert torch.all(y[i, :, :, 2] == i), "images were mixed across the batch"
        shifts.add((dy, dx))
    assert len(shifts) > 10, "shifts should be drawn independently per image"
    assert torch.equal(random_shift(x, 0, g), x)


def test_resnet10_shapes_and_local_weights_round_trip(tmp_path: Path) -> None:
    torch.manual_seed(0)
    net = ResNet10()
    out = net(torch.zeros(2, 128, 128, 3, dtype=torch.uint8))
    assert out.shape == (2, 512, 4, 4) and net.output_hw(128, 128) == (4, 4)
    assert all("num_batches" not in k and "running" not in k for k in resnet10_keys()), "GroupNorm: no stats"
    path = tmp_path / "r10.safetensors"
    save_backbone_weights(net, path)
    other = ResNet10()
    load_backbone_weights(other, path)
    for k, v in net.state_dict().items():
        assert torch.equal(v, other.state_dict()[k])
    with pytest.raises(ConfigError, match="not a file"):
        load_backbone_weights(other, tmp_path / "missing.safetensors")
    save_backbone_weights(ConvBackbone(3, (8,)), tmp_path / "wrong.safetensors")
    with pytest.raises(ShapeError, match="missing"):
        load_backbone_weights(other, tmp_path / "wrong.safetensors")
    (tmp_path / "garbage.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(ShapeError, match="unreadable"):
        load_backbone_weights(other, tmp_path / "garbage.safetensors")


def _img_spec(h: int = 16, act: int = 3, state: bool = True) -> EnvSpec:
    obs = [ArraySpec("images/front", (h, h, 3), "uint8", 0, 255), ArraySpec("images/wrist/left", (h, h, 3),
                                                                            "uint8", 0, 255)]
    if state:
        obs.append(ArraySpec("state", (7,), "float32"))
    return EnvSpec("img", tuple(sorted(obs, key=lambda s: s.name)), ArraySpec("action", (act,), "float32", -1, 1),
                   10.0)


def _img_obs(spec: EnvSpec, n: int | None, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    lead = () if n is None else (n,)
    out: dict = {}
    for s in spec.observation:
        arr = (rng.integers(0, 256, lead + s.shape, dtype=np.uint8) if s.is_image
               else rng.standard_normal(lead + s.shape).astype(np.float32))
        node = out
        parts = s.name.split("/")
        for p in parts[:-1]:
            node = node.setdefault(p, {})
        node[parts[-1]] = arr
    return out


def _img_batch(spec: EnvSpec, n: int, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    return {"obs": _img_obs(spec, n, seed), "next_obs": _img_obs(spec, n, seed + 1),
            "actions": rng.uniform(-1, 1, (n, spec.action.shape[0])).astype(np.float32),
            "rewards": rng.standard_normal(n).astype(np.float32), "terminated": np.zeros(n, bool)}


def _tiny(**kw: object) -> AgentConfig:
    base: dict = dict(encoder="conv", conv_channels=(8, 8), image_latent_dim=16, proprio_latent_dim=8,
                      hidden_dims=(16,), ensemble_size=3, ensemble_subsample=2, batch_size=4,
                      critic_updates_per_actor_update=2, device="cpu")
    base.update(kw)
    return AgentConfig(**base)


def test_conv_agent_on_nested_dict_obs_updates_and_acts() -> None:
    spec = _img_spec()
    agent = SACAgent(spec, _tiny())
    assert agent.encoder.out_dim == 8 + 16 + 16
    m = agent.update(_img_batch(spec, 8))
    assert np.isfinite(list(m.values())).all() and {"critic_loss", "actor_loss", "temperature"} <= set(m)
    a = agent.act(_img_obs(spec, None), deterministic=False)
    assert a.shape == (3,) and a.dtype == np.float32 and np.all(np.abs(a) <= 1.0)
    bad = _img_obs(spec, None)
    bad["images"]["front"] = bad["images"]["front"][:8]
    with pytest.raises(ShapeError, match="images/front"):
        agent.act(bad)
    bad = _img_obs(spec, None)
    bad["images"]["front"] = bad["images"]["front"].astype(np.float32)
    with pytest.raises(ShapeError, match="uint8"):
        agent.act(bad)


def test_obs_and_next_obs_are_augmented_independently(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = _img_spec(state=False)
    agent = SACAgent(spec, _tiny())
    outs: list[torch.Tensor] = []
    orig = sac_module.random_shift

    def spy(t: torch.Tensor, pad: int, g: torch.Generator | None = None) -> torch.Tensor:
        y = orig(t, pad, g)
        outs.append(y)
        return y

    monkeypatch.setattr(sac_module, "random_shift", spy)
    batch = _img_batch(spec, 8)
    batch["next_obs"] = batch["obs"]  # identical inputs: only the augmentation can make them differ
    agent.update(batch)
    assert len(outs) == 4  # 2 cameras x (obs, next_obs)
    front_obs, front_next = outs[0], outs[2]
    assert not torch.equal(front_obs, front_next)
    assert not torch.equal(front_obs, torch.as_tensor(batch["obs"]["images"]["front"]))


def test_frozen_resnet_needs_local_weights_and_never_trains_or_ships(tmp_path: Path) -> None:
    spec = _img_spec(h=32, act=2)
    with pytest.raises(ConfigError, match="encoder_weights"):
        SACAgent(spec, _tiny(encoder="resnet10"))
    path = tmp_path / "resnet10.safetensors"
    torch.manual_seed(3)
    save_backbone_weights(ResNet10(), path)
    cfg = _tiny(encoder="resnet10", encoder_weights=str(path), freeze_encoder=True)
    agent = SACAgent(spec, cfg)
    backbone = agent.encoder.cameras["images__front"].backbone  # type: ignore[union-attr]
    before = {k: v.clone() for k, v in backbone.state_dict().items()}
    head_before = agent.encoder.cameras["images__front"].dense.weight.detach().clone()  # type: ignore[union-attr]
    for i in range(2):
        agent.update(_img_batch(spec, 8, seed=i))
    for k, v in backbone.state_dict().items():
        assert torch.equal(v, before[k]), f"frozen weight {k} changed"
    assert not torch.equal(head_before, agent.encoder.cameras["images__front"].dense.weight)  # type: ignore[union-attr]
    # the target encoder shares the frozen backbone instead of copying it
    assert agent.target_encoder.cameras["images__front"].backbone is backbone  # type: ignore[union-attr]
    wire = agent.trainable_state()
    assert wire and not any(".backbone." in k for k in wire), "frozen encoder weights must not be sent"
    assert any(k.startswith("encoder.cameras.images__front.") for k in wire), "the trainable head must be sent"
    assert not any(".backbone." in k for k in agent.state_dict()), "frozen weights are not checkpointed"
    # actor side: builds from the same spec + config (loads the backbone from the same local file)
    policy = build_policy(spec, cfg, device="cpu")
    obs = _img_obs(spec, None, seed=5)
    assert not np.allclose(policy.act(obs, True), agent.act(obs, True))
    policy.load_trainable_state(wire)
    np.testing.assert_allclose(policy.act(obs, True), agent.act(obs, True), rtol=1e-5, atol=1e-6)


def test_unfrozen_backbone_is_trainable_and_shipped(tmp_path: Path) -> None:
    spec = _img_spec(h=32, act=2)
    agent = SACAgent(spec, _tiny(encoder="resnet10", freeze_encoder=False))
    wire = agent.trainable_state()
    assert any(".backbone." in k for k in wire)
    conv = SACAgent(spec, _tiny())
    assert any(".backbone." in k for k in conv.trainable_state()), "a from-scratch conv net trains and ships"


def test_images_too_small_for_the_backbone_raise() -> None:
    with pytest.raises(ShapeError, match="too small"):
        SACAgent(_img_spec(h=4), _tiny(conv_channels=(8, 8, 8)))
