"""A LeRobot policy checkpoint as a residual base (`residual_base=lerobot:DIR`, learners.agents.lerobot_base), against a
stand-in package with LeRobot 0.4's names and signatures (tests/fake_lerobot; the real lerobot 0.4.4 needs
torch < 2.11 and torchvision): observation keys and image layout as LeRobot's features, pre-processor ->
predict_action_chunk -> first action -> post-processor, the agent acting as that base, refusals in one line. The
last test runs against the real package where it is installed (a venv of its own: README)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

from learners.agents.config import AgentConfig
from learners.agents.policy import load_base_policy
from learners.agents.residual import absolute_source
from learners.agents.sac import SACAgent
from robot_rl.errors import ConfigError
from robot_rl.specs import ArraySpec, EnvSpec

FAKE = Path(__file__).parent / "fake_lerobot"
IMG = (32, 28, 3)  # H, W, C (H != W: the layout is checked)


@pytest.fixture
def fake_lerobot(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    import sys

    monkeypatch.syspath_prepend(str(FAKE))
    for name in [m for m in sys.modules if m == "lerobot" or m.startswith("lerobot.")]:
        monkeypatch.delitem(sys.modules, name)
    from lerobot.policies import factory

    factory.CALLS.clear()
    yield factory
    for name in [m for m in sys.modules if m == "lerobot" or m.startswith("lerobot.")]:
        del sys.modules[name]  # imported from the stand-in during the test: gone with it


def _spec(action_dim: int = 3) -> EnvSpec:
    return EnvSpec("twin-pick-cube", (ArraySpec("images/front", IMG, "uint8"), ArraySpec("state", (4,), "float32")),
                   ArraySpec("action", (action_dim,), "float32", -1.0, 1.0), 10.0)


def _checkpoint(root: Path, chunk: int = 4, action_dim: int = 3, features: dict[str, Any] | None = None) -> Path:
    """A pretrained_model directory of the stand-in's linear_chunk policy with seeded weights and stats."""
    d = root / "pretrained_model"
    d.mkdir(parents=True)
    feats = features or {"observation.images.front": {"type": "VISUAL", "shape": [3, IMG[0], IMG[1]]},
                         "observation.state": {"type": "STATE", "shape": [4]}}
    (d / "config.json").write_text(json.dumps({
        "type": "linear_chunk", "chunk_size": chunk, "device": "cuda", "input_features": feats,
        "output_features": {"action": {"type": "ACTION", "shape": [action_dim]}}}))
    d_in = sum(int(np.prod(f["shape"])) for f in feats.values())
    g = torch.Generator().manual_seed(0)
    save_file({"linear.weight": torch.randn(chunk * action_dim, d_in, generator=g) * 0.05,
               "linear.bias": torch.randn(chunk * action_dim, generator=g) * 0.1}, str(d / "model.safetensors"))
    (d / "policy_preprocessor.json").write_text(json.dumps({k: {"mean": 0.25, "std": 2.0} for k in feats}))
    (d / "policy_postprocessor.json").write_text(json.dumps({"action": {"mean": 0.1, "std": 0.5}}))
    return d


def _obs(b: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"images/front": rng.integers(0, 256, (b, *IMG), dtype=np.uint8),
            "state": rng.standard_normal((b, 4)).astype(np.float32)}


def _expected(d: Path, obs: dict[str, np.ndarray], chunk: int = 4, action_dim: int = 3) -> np.ndarray:
    """By hand: LeRobot's image layout, the pre-processor's standardisation, the linear map, the chunk's first
    action, the post-processor."""
    from safetensors.numpy import load_file

    w = load_file(str(d / "model.safetensors"))
    img = obs["images/front"].transpose(0, 3, 1, 2).astype(np.float64) / 255.0
    x = np.concatenate([((img - 0.25) / 2.0).reshape(len(img), -1), (obs["state"] - 0.25) / 2.0], axis=1)
    out = (x @ w["linear.weight"].T + w["linear.bias"]).reshape(len(img), chunk, action_dim)[:, 0]
    return out * 0.5 + 0.1


def test_a_lerobot_checkpoint_acts_as_its_first_postprocessed_action(fake_lerobot: Any, tmp_path: Path) -> None:
    d = _checkpoint(tmp_path)
    base = load_base_policy(f"lerobot:{d}", _spec(), device="cpu")
    obs = _obs(5)
    got = base(obs).numpy()
    np.testing.assert_allclose(got, np.clip(_expected(d, obs), -1.0, 1.0), rtol=1e-5, atol=1e-5)
    # local files only, and the device overridden (the checkpoint's config says cuda) for policy and processors
    assert fake_lerobot.CALLS["from_pretrained"] == {"local_files_only": True, "device": "cpu"}
    assert fake_lerobot.CALLS["processors"]["preprocessor_overrides"] == {"device_processor": {"device": "cpu"}}
    assert fake_lerobot.CALLS["processors"]["postprocessor_overrides"] == {"device_processor": {"device": "cpu"}}
    # a pure function of the observation: the same batch gives the same actions (no action queue)
    np.testing.assert_array_equal(base(obs).numpy(), got)
    assert absolute_source(f"lerobot:{d.relative_to(tmp_path.parent)}").startswith("lerobot:/")


def test_the_residual_agent_starts_as_the_lerobot_base(fake_lerobot: Any, tmp_path: Path) -> None:
    d = _checkpoint(tmp_path)
    cfg = AgentConfig(residual_base=f"lerobot:{d}", hidden_dims=(16, 16), ensemble_size=2, batch_size=8,
                      device="cpu", encoder="conv", conv_channels=(4, 4), image_latent_dim=8, proprio_latent_dim=4)
    agent = SACAgent(_spec(), cfg)
    obs = _obs(1, seed=3)
    act = agent.act({k: v[0] for k, v in obs.items()}, deterministic=True)
    np.testing.assert_allclose(act, np.clip(_expected(d, obs)[0], -1.0, 1.0), atol=1e-5)  # the correction starts at 0


def test_a_box_observation_env_is_the_policys_state(fake_lerobot: Any, tmp_path: Path) -> None:
    d = _checkpoint(tmp_path, chunk=2, action_dim=1, features={"observation.state": {"type": "STATE", "shape": [3]}})
    spec = EnvSpec("Pendulum-v1", (ArraySpec("obs", (3,), "float32"),), ArraySpec("action", (1,), "float32", -2.0,
                                                                                   2.0), 20.0)
    base = load_base_policy(f"lerobot:{d}", spec)
    x = np.random.default_rng(1).standard_normal((4, 3)).astype(np.float32)
    assert base(x).shape == (4, 1)


@pytest.mark.parametrize("case, match", [
    ("camera", r"the policy reads 'observation.images.wrist', which this env does not observe"),
    ("image_shape", r"'observation.images.front' has shape \(3, 8, 8\), this env's 'images/front' is \(32, 28, 3\) "
                    r"\(as \(C, H, W\)\)"),
    ("action", r"the policy's action feature is \(7,\), this env's actions are \(3,\)"),
    ("type", r"LeRobot could not load it \(ValueError: Policy type 'act' is not available.\)"),
    ("no_config", r"no config.json there"),
])
def test_refusals_name_the_mismatch(fake_lerobot: Any, tmp_path: Path, case: str, match: str) -> None:
    feats = {"camera": {"observation.images.wrist": {"type": "VISUAL", "shape": [3, 32, 28]}},
             "image_shape": {"observation.images.front": {"type": "VISUAL", "shape": [3, 8, 8]}}}.get(case)
    d = _checkpoint(tmp_path, action_dim=7 if case == "action" else 3, features=feats)
    if case == "type":
        cfg = json.loads((d / "config.json").read_text())
        (d / "config.json").write_text(json.dumps({**cfg, "type": "act"}))
    if case == "no_config":
        (d / "config.json").unlink()
    with pytest.raises(ConfigError, match=match):
        load_base_policy(f"lerobot:{d}", _spec())


def test_without_lerobot_the_error_says_what_to_do(tmp_path: Path) -> None:
    import importlib.util

    if importlib.util.find_spec("lerobot") is not None:
        pytest.skip("lerobot is installed here")
    d = _checkpoint(tmp_path)
    with pytest.raises(ConfigError, match=r"the lerobot package is not importable .*pip install lerobot.*py:MODULE"):
        load_base_policy(f"lerobot:{d}", _spec())


def test_a_real_lerobot_act_checkpoint_as_the_base(tmp_path: Path) -> None:
    """Against the real package, where it is installed (not in CI: lerobot 0.4.x pins torch < 2.11; README says how
    this was run): an ACT policy with random weights and dataset statistics, saved as `lerobot-train` saves a
    checkpoint (policy, pre- and post-processor), loads as a base whose actions are LeRobot's own `select_action`
    (after a reset: the chunk's first action) through its processors; the residual agent then starts as that base."""
    import importlib.util

    if importlib.util.find_spec("lerobot") is None or "fake_lerobot" in str(importlib.util.find_spec("lerobot")):
        pytest.skip("the real lerobot package is not installed")
    from lerobot.configs.types import FeatureType, PolicyFeature
    from lerobot.policies.act.configuration_act import ACTConfig
    from lerobot.policies.act.modeling_act import ACTPolicy
    from lerobot.policies.factory import make_pre_post_processors

    cfg = ACTConfig(input_features={"observation.images.front": PolicyFeature(FeatureType.VISUAL, (3, IMG[0], IMG[1])),
                                    "observation.state": PolicyFeature(FeatureType.STATE, (4,))},
                    output_features={"action": PolicyFeature(FeatureType.ACTION, (3,))}, chunk_size=5,
                    n_action_steps=5, pretrained_backbone_weights=None, dim_model=32, n_heads=2, dim_feedforward=64,
                    n_encoder_layers=1, n_decoder_layers=1, latent_dim=8, device="cpu")
    torch.manual_seed(0)
    policy = ACTPolicy(cfg)
    stats = {"observation.images.front": {"mean": torch.full((3, 1, 1), 0.4), "std": torch.full((3, 1, 1), 0.2)},
             "observation.state": {"mean": torch.full((4,), 0.5), "std": torch.full((4,), 2.0)},
             "action": {"mean": torch.tensor([0.1, -0.1, 0.0]), "std": torch.tensor([0.2, 0.3, 0.1])}}
    pre, post = make_pre_post_processors(cfg, dataset_stats=stats)
    d = tmp_path / "pretrained_model"
    policy.save_pretrained(d)
    pre.save_pretrained(d)
    post.save_pretrained(d)

    base = load_base_policy(f"lerobot:{d}", _spec(), device="cpu")
    obs = _obs(3, seed=4)
    got = base(obs).numpy()
    policy.eval()
    want = []
    for i in range(3):  # LeRobot's own inference: one observation at a time, select_action after a reset
        policy.reset()
        batch = {"observation.images.front": torch.as_tensor(obs["images/front"][i:i + 1]).permute(0, 3, 1, 2)
                 .float() / 255.0, "observation.state": torch.as_tensor(obs["state"][i:i + 1])}
        with torch.no_grad():
            want.append(post(policy.select_action(pre(batch))).numpy()[0])
    np.testing.assert_allclose(got, np.clip(np.stack(want), -1.0, 1.0), rtol=1e-4, atol=1e-5)
    assert np.abs(got).max() > 1e-3  # not a degenerate all-zero policy

    agent = SACAgent(_spec(), AgentConfig(residual_base=f"lerobot:{d}", hidden_dims=(16, 16), ensemble_size=2,
                                          batch_size=8, device="cpu", encoder="conv", conv_channels=(4, 4),
                                          image_latent_dim=8, proprio_latent_dim=4))
    act = agent.act({k: v[0] for k, v in obs.items()}, deterministic=True)
    np.testing.assert_allclose(act, np.clip(want[0], -1.0, 1.0), atol=1e-5)
