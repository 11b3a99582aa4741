"""torch.compile as the CPU default of the torch state agent (learners.agents.device_defaults, learners.agents.sac):
where the
default applies and where not, the fallback to eager when compiling fails, compiled == eager numerically, and
`robot-rl train` with no flags really training compiled (the rest of the suite runs with ROBOT_RL_COMPILE=0, see
conftest.py, because every compile costs 20-70 s on the CI machine)."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from learners.agents import device_defaults, sac
from learners.agents.config import AgentConfig
from learners.agents.device_defaults import COMPILE_ENV, compile_default, machine_defaults, notice, settle
from learners.agents.sac import SACAgent
from learners.distributed.flags import agent_config as learner_agent_config
from learners.distributed.flags import build_learner_parser
from learners.training.config import TrainConfig
from robot_rl.cli import main as cli_main
from tests.test_learners_agent import _batch as _agent_batch
from tests.test_learners_agent import _spec


@pytest.fixture
def compile_works(monkeypatch: pytest.MonkeyPatch) -> None:
    """The compile default switched on as on a machine with a C++ compiler (the probe itself is not asked)."""
    monkeypatch.delenv(COMPILE_ENV, raising=False)
    monkeypatch.setattr(device_defaults, "_compile_check", lambda: None)


def _batch(n: int, seed: int) -> dict[str, Any]:
    """The agent tests' batch with human rows, so the BC term is in the compiled actor loss too."""
    b = _agent_batch(n, seed=seed)
    b["intervention"] = np.random.default_rng(seed + 100).random(n) < 0.5
    return b


def _cfg(**kw: Any) -> AgentConfig:
    base: dict[str, Any] = dict(ensemble_size=2, ensemble_subsample=None, critic_updates_per_actor_update=2,
                                batch_size=8, hidden_dims=(32, 32), device="cpu", bc_weight=1.0)
    base.update(kw)
    return AgentConfig(**base)


def test_compile_default_applies_to_the_torch_state_agent_on_a_cpu_only(compile_works: None,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    assert machine_defaults("cpu", has_cameras=False, agent="rlpd")["compile"] is True
    for device, cams, agent in (("cuda", False, "rlpd"), ("cpu", True, "rlpd"), ("cpu", False, "sac"),
                                ("cpu", False, "hil-serl")):
        assert "compile" not in machine_defaults(device, cams, agent) and not compile_default(device, cams, agent)
    plain = TrainConfig(env_id="Pendulum-v1", device="cpu").agent_config(has_cameras=False)
    assert plain.compile and plain.backend == "torch"
    msg = notice(plain, machine_defaults("cpu", False))
    assert msg is not None and "torch.compile on" in msg and "compile=false" in msg
    # a twin recipe replaces the CPU ensemble defaults, not compile: the notice is then about compile alone
    pick = TrainConfig(task="twin-pick-cube", device="cpu").agent_config(has_cameras=False)
    assert pick.compile
    assert notice(pick, machine_defaults("cpu", False)) == (
        "CPU learner: torch.compile on for the agent's losses (first update ~20-70 s while it compiles; "
        "--set compile=false turns it off)")
    assert not TrainConfig(task="twin-pick-cube", obs_mode="pixels", device="cpu").agent_config(True).compile
    # --set wins; another backend drops the default (JAX compiles anyway and refuses compile=True by name) ...
    off = TrainConfig(env_id="Pendulum-v1", device="cpu", agent_set=("compile=false",)).agent_config(False)
    assert not off.compile and notice(off, machine_defaults("cpu", False)) is not None  # the ensemble part stays
    assert not TrainConfig(env_id="Pendulum-v1", device="cpu", backend="jax").agent_config(False).compile
    # ... but an explicit compile=true with backend=jax is left for the JAX agent to refuse
    explicit = TrainConfig(env_id="Pendulum-v1", device="cpu", backend="jax", agent_set=("compile=true",))
    assert explicit.agent_config(False).compile
    # the distributed learner: the same machine layer, so the same compile default (state only)
    learner = ["--task", "twin-pick-cube", "--out", "x", "--device", "cpu"]
    assert learner_agent_config(build_learner_parser().parse_args(learner)).compile
    assert not learner_agent_config(build_learner_parser().parse_args([*learner, "--obs-mode", "pixels"])).compile
    assert not learner_agent_config(build_learner_parser().parse_args([*learner, "--backend", "jax"])).compile
    # switched off: by the environment variable, or where torch.compile cannot build code
    monkeypatch.setenv(COMPILE_ENV, "0")
    assert "compile" not in machine_defaults("cpu", False)
    assert not TrainConfig(env_id="Pendulum-v1", device="cpu").agent_config(has_cameras=False).compile
    monkeypatch.delenv(COMPILE_ENV)
    monkeypatch.setattr(device_defaults, "_compile_check", lambda: "no C++ compiler (g++) for torch.compile's CPU code")
    assert device_defaults.compile_usable() == "no C++ compiler (g++) for torch.compile's CPU code"
    assert machine_defaults("cpu", False) == device_defaults.CPU_STATE_DEFAULTS


def test_settle_keeps_configs_it_has_no_business_with() -> None:
    cfg = AgentConfig(compile=True)
    assert settle(cfg, {"compile": True}, explicit=()) is cfg  # torch backend: kept
    jax = AgentConfig(backend="jax", compile=True)
    assert not settle(jax, {"compile": True}, explicit=()).compile
    assert settle(jax, {"compile": True}, explicit=({"compile": True},)).compile
    assert settle(jax, {}, explicit=()).compile  # not the layer's doing: the agent refuses it by name


def _failing_compile(fn: Any, *args: Any, **kwargs: Any) -> Any:
    def compiled(*a: Any, **k: Any) -> Any:
        raise RuntimeError("InvalidCxxCompiler: No working C++ compiler found in torch._inductor.config.cpp.cxx")

    return compiled


def test_a_compile_that_fails_falls_back_to_eager_with_a_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    eager = SACAgent(_spec(), _cfg())
    monkeypatch.setattr(sac.torch, "compile", _failing_compile)
    agent = SACAgent(_spec(), _cfg(compile=True))
    assert agent.compile_status == "compiled"
    with pytest.warns(RuntimeWarning, match="torch.compile of the agent's losses failed.*InvalidCxxCompiler"):
        m = agent.update(_batch(16, seed=0))
    assert agent.compile_status.startswith("eager (torch.compile failed: RuntimeError: InvalidCxxCompiler")
    assert agent.compile_s is not None and agent.compile_s >= 0.0
    # nothing was stepped twice or skipped: the same numbers as an agent that never tried to compile
    me = eager.update(_batch(16, seed=0))
    assert m == pytest.approx(me)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # one warning, not one per update
        m2, me2 = agent.update(_batch(16, seed=1)), eager.update(_batch(16, seed=1))
    assert m2 == pytest.approx(me2)
    for p, q in zip(eager.critic.parameters(), agent.critic.parameters(), strict=True):
        torch.testing.assert_close(p, q)


def test_a_real_error_is_not_taken_for_a_compile_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    """A loss that fails compiled AND eager raises (the eager rerun is the judge); after the compiled losses have
    run once, their errors are never swallowed."""
    monkeypatch.setattr(sac.torch, "compile", _failing_compile)
    agent = SACAgent(_spec(), _cfg(compile=True))

    def broken(*a: Any, **k: Any) -> Any:
        raise ValueError("a real bug")

    monkeypatch.setattr(agent, "_critic_loss_eager", broken)
    with pytest.warns(RuntimeWarning), pytest.raises(ValueError, match="a real bug"):
        agent.update(_batch(16, seed=0))
    proven = SACAgent(_spec(), _cfg(compile=True))
    proven._critic_loss, proven._actor_loss = proven._critic_loss_eager, proven._actor_loss_eager
    proven.update(_batch(16, seed=0))  # both losses ran once: proven
    assert proven._unproven == set()
    monkeypatch.setattr(proven, "_critic_loss", broken)
    with pytest.raises(ValueError, match="a real bug"):
        proven.update(_batch(16, seed=1))
    assert proven.compile_status == "compiled"


@pytest.mark.slow
def test_torch_compile_matches_eager_without_graph_breaks() -> None:
    """The compiled losses give the eager numbers (3 updates, the BC term on) and dynamo traces each loss whole."""
    import torch._dynamo.utils as dynamo_utils

    if device_defaults._compile_check() is not None:
        pytest.skip(f"torch.compile cannot build code here: {device_defaults._compile_check()}")

    dynamo_utils.counters.clear()
    cfg = _cfg()
    eager, compiled = SACAgent(_spec(), cfg), SACAgent(_spec(), cfg.replace(compile=True))
    for i in range(3):
        me, mc = eager.update(_batch(16, seed=i)), compiled.update(_batch(16, seed=i))
        for k in me:
            assert mc[k] == pytest.approx(me[k], rel=1e-4, abs=1e-5), k
    for p, q in zip(eager.critic.parameters(), compiled.critic.parameters(), strict=True):
        torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-5)
    assert compiled.compile_status == "compiled" and compiled.compile_s is not None and compiled.compile_s > 0
    assert not dict(dynamo_utils.counters["graph_break"]), dict(dynamo_utils.counters["graph_break"])


@pytest.mark.slow
def test_train_with_no_flags_trains_compiled(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """`robot-rl train --env-id` with the CPU defaults: compile on, said at start, the first update's time reported,
    and the run's config (what eval and resume rebuild) records it."""
    monkeypatch.delenv(COMPILE_ENV, raising=False)
    if device_defaults.compile_usable() is not None:
        pytest.skip(f"torch.compile cannot build code here: {device_defaults.compile_usable()}")
    out = tmp_path / "run"
    assert cli_main(["train", "--env-id", "Pendulum-v1", "--batch-size", "32", "--hidden", "32",
                     "--learning-starts", "100", "--start-steps", "100", "--eval-every", "150",
                     "--eval-episodes", "1", "--checkpoint-every", "150", "--replay-capacity", "1000",
                     "--max-env-steps", "150", "--out", str(out)]) == 0
    log = capsys.readouterr().out
    assert "torch.compile on for its losses" in log, log
    first = [line for line in log.splitlines() if line.startswith("[train] first update ")]
    assert len(first) == 1 and "torch.compile: tracing + inductor" in first[0], log
    assert json.loads((out / "agent_config.json").read_text())["compile"] is True
    row = json.loads((out / "metrics.jsonl").read_text().splitlines()[-1])
    assert row["env_step"] == 150 and row["updates"] > 0 and row["first_update_s"] > 0
