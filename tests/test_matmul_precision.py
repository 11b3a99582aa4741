"""AgentConfig.matmul_precision (learners.agents.precision): validated, printed in the GPU notice, the TF32 switches
set for one update on a CUDA device and restored after, and no effect at all on a CPU."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from learners.agents.config import AgentConfig
from learners.agents.device_defaults import gpu_notice
from learners.agents.precision import matmul_precision
from learners.agents.sac import SACAgent
from robot_rl.errors import ConfigError
from robot_rl.specs import ArraySpec, EnvSpec

torch.set_num_threads(1)
SPEC = EnvSpec("s", (ArraySpec("state", (6,), "float32"),), ArraySpec("action", (2,), "float32", -1, 1), 10.0)


def _switches() -> tuple[bool, bool]:
    return torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32


def test_option_is_validated_and_defaults_to_torchs_own_setting() -> None:
    assert AgentConfig().matmul_precision == "high"  # TF32 on CUDA (measured faster); nothing on a CPU
    for ok in ("default", "high", "highest"):
        AgentConfig(matmul_precision=ok)
    with pytest.raises(ConfigError, match="matmul_precision"):
        AgentConfig(matmul_precision="tf32")


def test_switches_are_set_for_the_block_and_restored_on_cuda_only() -> None:
    before = _switches()
    cuda = torch.device("cuda")  # the switches are plain process flags: settable without a GPU
    with matmul_precision(AgentConfig(matmul_precision="high"), cuda):
        assert _switches() == (True, True)
    assert _switches() == before
    with matmul_precision(AgentConfig(matmul_precision="highest"), cuda):
        assert _switches() == (False, False)
    assert _switches() == before
    with pytest.raises(RuntimeError), matmul_precision(AgentConfig(matmul_precision="high"), cuda):
        raise RuntimeError("an update that fails")
    assert _switches() == before
    for cfg, dev in ((AgentConfig(matmul_precision="high"), torch.device("cpu")),
                     (AgentConfig(matmul_precision="default"), cuda)):
        with matmul_precision(cfg, dev):
            assert _switches() == before


def test_no_effect_on_cpu_results() -> None:
    rng = np.random.default_rng(0)
    batch = {"obs": {"state": rng.normal(size=(32, 6)).astype(np.float32)},
             "next_obs": {"state": rng.normal(size=(32, 6)).astype(np.float32)},
             "actions": rng.uniform(-1, 1, (32, 2)).astype(np.float32),
             "rewards": rng.normal(size=32).astype(np.float32), "terminated": np.zeros(32, bool)}
    base = dict(device="cpu", hidden_dims=(32, 32), batch_size=16, critic_updates_per_actor_update=2, seed=1)
    runs = []
    for prec in ("default", "high", "highest"):
        agent = SACAgent(SPEC, AgentConfig(matmul_precision=prec, **base))
        runs.append([agent.update(batch) for _ in range(2)])
        runs[-1].append(agent.trainable_state())
    for other in runs[1:]:
        assert other[:2] == runs[0][:2]
        for k, v in runs[0][2].items():
            np.testing.assert_array_equal(other[2][k], v)


def test_gpu_notice_names_the_precision() -> None:
    msg = gpu_notice(AgentConfig(device="cuda", matmul_precision="high"), has_cameras=True)
    assert msg is not None and "matmul_precision=high (TF32 matmuls + convolutions)" in msg
    assert "feature_cache=auto (on auto)" in msg
    assert "matmul_precision=high" in (gpu_notice(AgentConfig(device="cuda"), has_cameras=False) or "")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_update_runs_under_the_switches_and_restores_them() -> None:
    """On a GPU: an update with 'high' leaves the process switches as they were and stays close to 'highest'
    (TF32 rounds matmul inputs to a 10-bit mantissa: losses agree to ~1e-2 relative after one update)."""
    before = _switches()
    rng = np.random.default_rng(0)
    batch = {"obs": {"state": rng.normal(size=(256, 6)).astype(np.float32)},
             "next_obs": {"state": rng.normal(size=(256, 6)).astype(np.float32)},
             "actions": rng.uniform(-1, 1, (256, 2)).astype(np.float32),
             "rewards": rng.normal(size=256).astype(np.float32), "terminated": np.zeros(256, bool)}
    out = {}
    for prec in ("high", "highest"):
        agent = SACAgent(SPEC, AgentConfig(device="cuda", matmul_precision=prec, batch_size=128,
                                           critic_updates_per_actor_update=2, seed=1, cuda_graphs="off"))
        out[prec] = agent.update(batch)
        assert _switches() == before
    for k in ("critic_loss", "q_mean", "actor_loss"):
        assert out["high"][k] == pytest.approx(out["highest"][k], rel=5e-2, abs=5e-3), k
