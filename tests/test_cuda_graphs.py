"""CUDA-graph capture of the torch agent's update (learners.agents.graphs, AgentConfig.cuda_graphs).

On any machine: the option's validation, 'on' without a CUDA device (eager, one warning, the status says so), the
capture's fallback (a capture that raises leaves the agent exactly as before and the update runs eager, with one
warning: forced here by capturing on a CPU), and 'auto' staying off on a CPU.

On a CUDA device only (skipped elsewhere): the graphed update gives the same losses as the eager update on the same
batches and the same weights after N updates (state RLPD with n-step rows and BC; a trainable conv image encoder with
DrQ shifts outside the graph), a checkpoint load re-captures and still matches, and a batch of another shape runs
eager with one warning.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest
import torch

from learners.agents.config import AgentConfig
from learners.agents.graphs import GraphedUpdate, graphs_mode
from learners.agents.sac import SACAgent
from robot_rl.errors import ConfigError
from robot_rl.specs import ArraySpec, EnvSpec

CUDA = torch.cuda.is_available()
cuda_only = pytest.mark.skipif(not CUDA, reason="needs a CUDA device")


def _spec(cameras: int = 0) -> EnvSpec:
    obs = [ArraySpec(f"images/cam{i}", (32, 32, 3), "uint8", 0, 255) for i in range(cameras)]
    obs.append(ArraySpec("state", (11,), "float32"))
    return EnvSpec("test", tuple(obs), ArraySpec("action", (4,), "float32", -1.0, 1.0), 10.0)


def _cfg(**kw: Any) -> AgentConfig:
    base: dict[str, Any] = dict(hidden_dims=(64, 64), ensemble_size=6, ensemble_subsample=2, batch_size=32,
                                critic_updates_per_actor_update=4, discount=0.95, device="cpu", seed=4,
                                encoder="conv", conv_channels=(8, 16), image_latent_dim=16, proprio_latent_dim=8,
                                num_spatial_features=4, encoder_dropout=0.0, freeze_encoder=False)
    base.update(kw)
    return AgentConfig(**base)


def _batch(spec: EnvSpec, n: int, seed: int, n_step: int = 0) -> dict[str, Any]:
    rng = np.random.default_rng(seed)

    def obs() -> dict[str, np.ndarray]:
        return {s.name: (rng.integers(0, 256, (n, *s.shape), dtype=np.uint8) if s.is_image
                         else rng.standard_normal((n, *s.shape)).astype(np.float32)) for s in spec.observation}

    b: dict[str, Any] = {"obs": obs(), "next_obs": obs(), "actions": rng.uniform(-1, 1, (n, 4)).astype(np.float32),
                         "rewards": rng.random(n).astype(np.float32), "terminated": rng.random(n) < 0.1,
                         "intervention": rng.random(n) < 0.3}
    if n_step:
        b["n_rewards"] = rng.random((n, n_step)).astype(np.float32)
        b["n_grasp_penalty"] = np.zeros((n, n_step), np.float32)
        b["n_steps"] = rng.integers(1, n_step + 1, n)
    return b


def _assert_same_state(a: SACAgent, b: SACAgent, atol: float) -> None:
    sa, sb = a.state_dict(), b.state_dict()
    assert sa.keys() == sb.keys()
    for name in sa:
        if name.startswith("rng/"):
            continue
        np.testing.assert_allclose(sa[name], sb[name], rtol=1e-3, atol=atol, err_msg=name)


def _assert_same_updates(init: dict[str, np.ndarray], a: SACAgent, b: SACAgent, rel: float = 1e-2) -> None:
    """The two agents moved every array the same way from `init`: |delta_a - delta_b| <= rel |delta_b| (norms per
    array). A few updates move weights by ~lr per step only, so comparing the weights themselves would hardly tell
    a wrong update (other random draws, a stale input) from a right one; comparing the moves does."""
    sa, sb = a.state_dict(), b.state_dict()
    assert sa.keys() == sb.keys()
    moved = 0
    for name in sa:
        if name.startswith("rng/") or not np.issubdtype(sa[name].dtype, np.floating):
            continue
        base = init.get(name, np.zeros_like(sa[name]))  # Adam states start at zero
        da, db = sa[name] - base, sb[name] - base
        scale = float(np.linalg.norm(db))
        moved += scale > 0
        assert float(np.linalg.norm(da - db)) <= rel * scale + 1e-7, (name, float(np.linalg.norm(da - db)), scale)
    assert moved > 0


# ---------------------------------------------------------------------------------------------- any machine
def test_option_validation() -> None:
    with pytest.raises(ConfigError, match="cuda_graphs"):
        AgentConfig(cuda_graphs="sometimes")
    with pytest.raises(ConfigError, match="mixed_precision"):
        AgentConfig(cuda_graphs="on", mixed_precision="bf16")
    AgentConfig(cuda_graphs="auto", mixed_precision="bf16")  # auto just stays off
    with pytest.raises(ConfigError, match="backbone_precision"):
        AgentConfig(backbone_precision="fp8")


def test_auto_is_off_on_a_cpu_and_on_with_cuda() -> None:
    assert graphs_mode(_cfg(), torch.device("cpu")) == (False, None)
    assert graphs_mode(_cfg(cuda_graphs="off"), torch.device("cpu")) == (False, None)
    if CUDA:
        dev = torch.device("cuda")
        assert graphs_mode(_cfg(), dev) == (True, None)  # cameras or not: the agent does not ask
        assert graphs_mode(_cfg(mixed_precision="bf16"), dev) == (False, None)
        assert graphs_mode(_cfg(cuda_graphs="on"), dev) == (True, None)


def test_on_without_cuda_runs_eager_with_one_warning() -> None:
    with pytest.warns(RuntimeWarning, match="needs a CUDA device"):
        agent = SACAgent(_spec(), _cfg(cuda_graphs="on"))
    assert agent.graphs_status.startswith("eager (cuda_graphs=on needs a CUDA device")
    eager = SACAgent(_spec(), _cfg(cuda_graphs="off"))
    assert eager.graphs_status == "off"
    batch = _batch(_spec(), 128, 0)
    assert agent.update(batch) == eager.update(batch)


def test_a_failed_capture_falls_back_to_eager_leaving_no_trace() -> None:
    spec, cfg = _spec(), _cfg(cuda_graphs="off")
    agent, eager = SACAgent(spec, cfg), SACAgent(spec, cfg)
    # a capture on a CPU device raises (no CUDA streams): the fallback path of a failed capture on a GPU
    agent._graphs = GraphedUpdate(agent._update_tensors, agent.generator, list(agent._optimizers().values()),
                                  agent.state_dict, agent.load_state_dict)
    batches = [_batch(spec, 128, i, n_step=3) for i in range(3)]
    with pytest.warns(RuntimeWarning, match="cuda_graphs: capturing the update failed"):
        first = agent.update(batches[0])
    assert first == eager.update(batches[0])
    assert agent.graphs_status.startswith("eager (CUDA graph capture failed")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # one warning only
        for b in batches[1:]:
            assert agent.update(b) == eager.update(b)
    _assert_same_state(agent, eager, atol=0.0)


def test_frozen_backbone_options_on_a_cpu(tmp_path: Any) -> None:
    from learners.agents.encoders import ResNet10, save_backbone_weights

    path = str(tmp_path / "resnet10.safetensors")
    save_backbone_weights(ResNet10(), path)
    spec = _spec(cameras=1)
    base = dict(encoder="resnet10", encoder_weights=path, freeze_encoder=True)
    ref = SACAgent(spec, _cfg(**base))
    images = {"images/cam0": torch.as_tensor(_batch(spec, 4, 0)["obs"]["images/cam0"])}
    want = ref.encoder.backbone_features(images)["images/cam0"]
    cl = SACAgent(spec, _cfg(**base, channels_last=True))
    conv = next(m for m in cl.encoder.modules() if isinstance(m, torch.nn.Conv2d))
    assert conv.weight.is_contiguous(memory_format=torch.channels_last)
    torch.testing.assert_close(cl.encoder.backbone_features(images)["images/cam0"], want, rtol=1e-4, atol=1e-4)
    bf = SACAgent(spec, _cfg(**base, backbone_precision="bf16"))
    got = bf.encoder.backbone_features(images)["images/cam0"]
    assert got.dtype == torch.float32 and got.shape == want.shape
    assert float((got - want).abs().max()) <= 0.05 * float(want.abs().max()) + 1e-3
    batch = _batch(spec, bf.cfg.samples_per_update, 1)
    assert all(np.isfinite(v) for v in bf.update(batch).values())


# ---------------------------------------------------------------------------------------------- CUDA only
def _pair(spec: EnvSpec, **kw: Any) -> tuple[SACAgent, SACAgent]:
    graphed = SACAgent(spec, _cfg(device="cuda", cuda_graphs="on", **kw))
    eager = SACAgent(spec, _cfg(device="cuda", cuda_graphs="off", **kw))
    return graphed, eager


def _close(m1: dict[str, float], m2: dict[str, float]) -> None:
    assert m1.keys() == m2.keys()
    for key in m1:
        np.testing.assert_allclose(m1[key], m2[key], rtol=1e-3, atol=1e-5, err_msg=key)


@cuda_only
@pytest.mark.parametrize("kw", [dict(n_step=3, bc_weight=0.5), dict(ensemble_subsample=None, grad_clip_norm=1.0)],
                         ids=["rlpd-nstep-bc", "min-all-clip"])
def test_graphed_update_matches_eager_on_the_same_batches(kw: dict[str, Any]) -> None:
    spec = _spec()
    graphed, eager = _pair(spec, **kw)
    init = eager.state_dict()
    n_step = kw.get("n_step", 0)
    for i in range(8):
        batch = _batch(spec, graphed.cfg.samples_per_update, i, n_step=n_step if n_step > 1 else 0)
        _close(graphed.update(batch), eager.update(batch))
    assert graphed.graphs_status == "captured", graphed.graphs_status
    assert graphed._graphs is not None and graphed._graphs.captures == 1
    assert graphed.num_updates == eager.num_updates == 8
    _assert_same_updates(init, graphed, eager)


@cuda_only
def test_graphed_image_update_matches_eager() -> None:
    spec = _spec(cameras=2)
    graphed, eager = _pair(spec, augment_pad=2, critic_updates_per_actor_update=2, batch_size=16)
    init = eager.state_dict()
    for i in range(5):
        batch = _batch(spec, graphed.cfg.samples_per_update, 10 + i)
        _close(graphed.update(batch), eager.update(batch))
    assert graphed.graphs_status == "captured", graphed.graphs_status
    _assert_same_updates(init, graphed, eager)


@cuda_only
def test_checkpoint_load_recaptures_and_still_matches() -> None:
    spec = _spec()
    graphed, eager = _pair(spec)
    rows = graphed.cfg.samples_per_update
    for i in range(3):
        graphed.update(_batch(spec, rows, i))
        eager.update(_batch(spec, rows, i))
    saved = eager.state_dict()
    graphed.load_state_dict(saved)
    eager.load_state_dict(saved)
    for i in range(3, 6):
        _close(graphed.update(_batch(spec, rows, i)), eager.update(_batch(spec, rows, i)))
    assert graphed._graphs is not None and graphed._graphs.captures == 2
    _assert_same_updates(saved, graphed, eager)


@cuda_only
def test_another_batch_shape_runs_eager_with_one_warning() -> None:
    spec = _spec()
    graphed, eager = _pair(spec)
    init = eager.state_dict()
    rows = graphed.cfg.samples_per_update
    _close(graphed.update(_batch(spec, rows, 0)), eager.update(_batch(spec, rows, 0)))
    with pytest.warns(RuntimeWarning, match="another shape"):
        _close(graphed.update(_batch(spec, rows * 2, 1)), eager.update(_batch(spec, rows * 2, 1)))
    _close(graphed.update(_batch(spec, rows, 2)), eager.update(_batch(spec, rows, 2)))
    assert graphed._graphs is not None and graphed._graphs.captures == 1
    _assert_same_updates(init, graphed, eager)


@cuda_only
def test_frozen_backbone_bf16_and_channels_last_stay_close_to_float32() -> None:
    from learners.agents.encoders import ResNet10, save_backbone_weights

    path = "/tmp/robot_rl_test_resnet10.safetensors"
    save_backbone_weights(ResNet10(), path)
    spec = _spec(cameras=1)
    base = dict(device="cuda", encoder="resnet10", encoder_weights=path, freeze_encoder=True, cuda_graphs="off")
    ref = SACAgent(spec, _cfg(**base))
    fast = SACAgent(spec, _cfg(**base, backbone_precision="bf16", channels_last=True))
    images = torch.as_tensor(_batch(spec, 8, 0)["obs"]["images/cam0"], device="cuda")
    a = ref.encoder.backbone_features({"images/cam0": images})["images/cam0"]
    b = fast.encoder.backbone_features({"images/cam0": images})["images/cam0"]
    assert b.dtype == torch.float32 and b.shape == a.shape
    assert float((a - b).abs().max()) <= 0.05 * float(a.abs().max()) + 1e-3
