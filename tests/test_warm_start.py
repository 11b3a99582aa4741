"""The offline phase (`robot-rl train --offline-updates N --max-env-steps 0`) and the WSRL warm start
(`--init-from RUN --warmup-steps W`, learners.training.warm_start), on a small point-reaching env built here: demos of a
scripted expert (human rows) plus recorded rollouts of a noisy one (not human, failures included)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from point_reach import ENV_ID, ENV_ID_3D, PointReachEnv, record_point_reach

from learners.agents.agent import make_agent
from learners.agents.config import AgentConfig
from learners.replay.buffer import MixedSampler
from learners.training import session
from learners.training.config import OFFLINE_BC_NOTE, TrainConfig
from learners.training.warm_start import compare_agent_configs, init_agent_from
from robot_rl.checkpoint import latest_checkpoint, load_checkpoint
from robot_rl.cli import main as cli_main
from robot_rl.metrics import read_metrics
from robot_rl.specs import EnvSpec

torch.set_num_threads(1)
FAST = ["--algo", "sac", "--hidden", "32", "--batch-size", "32", "--eval-episodes", "5"]


@pytest.fixture(scope="module")
def offline_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """20 demos + 20 noisy rollouts (failures included), and an offline-only run of 200 updates on both (BC
    term on the human rows): its directory, the counts of human and rollout steps and failed rollouts."""
    root = tmp_path_factory.mktemp("warm")
    demos = record_point_reach(root / "demos", 20, 0.0, human=True, seed=100)
    rollouts = record_point_reach(root / "rollouts", 20, 0.08, human=False, seed=500)
    out = root / "offline"
    assert cli_main(["train", "--env-id", ENV_ID, *FAST, "--demos", str(demos), str(rollouts), "--offline-updates",
                     "200", "--max-env-steps", "0", "--set", "bc_weight=10", "--out", str(out)]) == 0
    from robot_rl.episodes import load_dir

    steps = {name: [ep for ep in load_dir(d)[0]] for name, d in (("demos", demos), ("rollouts", rollouts))}
    return {"root": root, "demos": demos, "rollouts": rollouts, "out": out,
            "human_steps": sum(ep.length for ep in steps["demos"]),
            "rollout_steps": sum(ep.length for ep in steps["rollouts"]),
            "rollout_failures": sum(not ep.is_success for ep in steps["rollouts"])}


# ------------------------------------------------------------------ the offline phase
def test_offline_phase_writes_a_run_that_eval_accepts(offline_run: dict[str, Any],
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    out = offline_run["out"]
    assert offline_run["rollout_failures"] >= 3  # the rollouts do include failed episodes
    rows = read_metrics(out / "metrics.jsonl")
    assert len(rows) == 1 and rows[0]["env_step"] == 0 and rows[0]["episode"] == 0
    assert rows[0]["updates"] == rows[0]["offline_updates"] == 200
    assert rows[0]["online_buffer"] == 0 and rows[0]["demo_buffer"] == offline_run["human_steps"] + offline_run[
        "rollout_steps"]
    # the offline updates trained the policy: on the demos' states, its actions moved towards the demo actions
    from robot_rl.episodes import load_dir

    trained = _source_agent(out)
    untrained = make_agent(_spec(), trained.cfg)
    eps = load_dir(offline_run["demos"])[0]
    obs = np.concatenate([ep.observations["obs"][:-1] for ep in eps])
    target = np.concatenate([ep.actions for ep in eps]) / 0.1  # env units -> the agent's [-1, 1]

    def bc_error(agent: Any) -> float:
        return float(np.mean([np.sum((agent.act(o, deterministic=True) - a) ** 2) for o, a in zip(obs, target,
                                                                                                  strict=True)]))

    assert bc_error(trained) < 0.5 * bc_error(untrained), (bc_error(trained), bc_error(untrained))
    ckpt = latest_checkpoint(out / "checkpoints")
    assert ckpt is not None and ckpt.name == "ckpt_00000000"
    groups, meta = load_checkpoint(ckpt)
    assert int(groups["agent"]["num_updates"]) == 200 and meta["counters"]["offline_updates"] == 200
    assert int(groups["replay_online"]["valid"].sum()) == 0
    # rollout rows are not marked as interventions: only the demos' steps are human rows
    assert int(groups["replay_demo"]["fields/intervention"].sum()) == offline_run["human_steps"]
    capsys.readouterr()
    assert cli_main(["eval", "--checkpoint", str(out), "--episodes", "5", "--seed", str(1_000_000)]) == 0
    res = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert res["env_step"] == 0 and res["success_rate"] == rows[0]["success_rate"]  # same episodes, same policy


def test_offline_phase_needs_demos_and_max_env_steps_0_needs_it(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    for argv, msg in ((["--offline-updates", "10", "--max-env-steps", "0"], "needs --demos"),
                      (["--max-env-steps", "0"], "0 only with --offline-updates"),
                      (["--warmup-steps", "10"], "only with --init-from")):
        assert cli_main(["train", "--env-id", ENV_ID, *argv, "--out", str(out)]) == 1
        err = capsys.readouterr().err
        assert msg in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
        assert not out.exists()


# ------------------------------------------------------------------ the warm start
def _source_agent(run_dir: Path) -> Any:
    ckpt = latest_checkpoint(run_dir / "checkpoints")
    assert ckpt is not None
    groups, meta = load_checkpoint(ckpt)
    agent = make_agent(EnvSpec.from_dict(meta["spec"]), AgentConfig.from_dict(meta["agent_config"]))
    agent.load_state_dict(groups["agent"])
    return agent


def _spec() -> EnvSpec:
    env = PointReachEnv()
    return EnvSpec.from_spaces(ENV_ID, env.observation_space, env.action_space, 0.0)


def _probe_obs(n: int = 16) -> list[np.ndarray]:
    env = PointReachEnv()
    return [env.reset(seed=900 + i)[0] for i in range(n)]


def test_init_from_loads_the_networks_not_the_counters(offline_run: dict[str, Any]) -> None:
    source = _source_agent(offline_run["out"])
    spec = _spec()
    fresh = make_agent(spec, source.cfg.replace(seed=7))
    obs = _probe_obs()
    before = [fresh.act(o, deterministic=True) for o in obs]
    assert not all(np.allclose(a, source.act(o, deterministic=True)) for a, o in zip(before, obs, strict=True))
    ckpt, notes = init_agent_from(fresh, spec, offline_run["out"])
    assert ckpt.name == "ckpt_00000000" and notes == []
    for o in obs:  # the loaded policy's deterministic actions are the source's
        np.testing.assert_array_equal(fresh.act(o, deterministic=True), source.act(o, deterministic=True))
    own, src = fresh.state_dict(), source.state_dict()
    for key in src:
        if key.startswith(("critic/", "target_critic/", "log_alpha", "optim/")):
            np.testing.assert_array_equal(own[key], src[key], err_msg=key)
    assert fresh.num_updates == 0 and source.num_updates == 200  # this run counts its own updates


@pytest.fixture
def spies(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, list[Any]]]:
    """Records, for the online loop of `robot-rl train`: the env step of every agent update, the env steps at which
    the training policy acted (stochastic act calls), and the (online, demo) row counts of every sampled batch."""
    seen: dict[str, list[Any]] = {"update_steps": [], "act_steps": [], "counts": [], "demo": []}
    real = session.train_online

    def spy_loop(env: Any, agent: Any, online: Any, cfg: Any, **kw: Any) -> Iterator[dict[str, Any]]:
        counters = kw["counters"]
        update, act = agent.update, agent.act
        seen["demo"].append(kw.get("demo"))

        def spy_update(batch: Any) -> dict[str, float]:
            seen["update_steps"].append(counters.env_step)
            return update(batch)

        def spy_act(obs: Any, deterministic: bool = False) -> np.ndarray:
            if not deterministic:
                seen["act_steps"].append(counters.env_step)
            return act(obs, deterministic)

        agent.update, agent.act = spy_update, spy_act
        try:
            yield from real(env, agent, online, cfg, **kw)
        finally:
            del agent.update, agent.act

    real_sample = MixedSampler.sample

    def spy_sample(self: MixedSampler, n: int) -> Any:
        seen["counts"].append(self.counts(n))
        return real_sample(self, n)

    monkeypatch.setattr(session, "train_online", spy_loop)
    monkeypatch.setattr(MixedSampler, "sample", spy_sample)
    yield seen


def test_warm_start_collects_w_steps_with_the_loaded_policy_then_fine_tunes_on_online_data_only(
        offline_run: dict[str, Any], spies: dict[str, list[Any]], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    out, w = tmp_path / "warm", 60
    assert cli_main(["train", "--env-id", ENV_ID, *FAST, "--init-from", str(offline_run["out"]), "--warmup-steps",
                     str(w), "--max-env-steps", "100", "--eval-every", "50", "--out", str(out)]) == 0
    log = capsys.readouterr().out
    assert "warm start from" in log and "online data only" in log
    # the warm-up: every one of the first W steps acted with the policy (no uniform random actions), no update
    assert spies["act_steps"][:w] == list(range(1, w + 1))
    assert min(spies["update_steps"]) == w and len(spies["update_steps"]) == 100 - w + 1
    # fine-tuning: no demo buffer, every sampled row from online data
    assert spies["demo"] == [None] and spies["counts"] and all(d == 0 for _, d in spies["counts"])
    rows = read_metrics(out / "metrics.jsonl")
    assert rows[0]["env_step"] == 0 and rows[0]["updates"] == 0 and rows[0]["warmup_steps"] == w
    source_rows = read_metrics(offline_run["out"] / "metrics.jsonl")
    assert rows[0]["success_rate"] == source_rows[-1]["success_rate"]  # the loaded policy, the same eval episodes
    assert all(r["demo_buffer"] == 0 for r in rows) and rows[-1]["env_step"] >= 100
    ckpt = latest_checkpoint(out / "checkpoints")
    assert ckpt is not None
    groups, meta = load_checkpoint(ckpt)
    assert "replay_demo" not in groups and int(groups["replay_online"]["valid"].sum()) == rows[-1]["env_step"]
    assert meta["counters"]["updates"] == len(spies["update_steps"]) == int(groups["agent"]["num_updates"])
    assert meta["init_checkpoint"].endswith("ckpt_00000000")


def test_a_warm_start_stopped_within_its_warm_up_changed_nothing_and_resumes(
        offline_run: dict[str, Any], spies: dict[str, list[Any]], tmp_path: Path) -> None:
    out = tmp_path / "warmup_only"
    assert cli_main(["train", "--env-id", ENV_ID, *FAST, "--init-from", str(offline_run["out"]), "--warmup-steps", "80",
                     "--max-env-steps", "79", "--eval-every", "1000", "--demos", str(offline_run["demos"]),
                     "--demo-ratio", "0", "--out", str(out)]) == 0
    assert spies["update_steps"] == [] and spies["demo"][0] is not None
    groups, meta = load_checkpoint(latest_checkpoint(out / "checkpoints"))  # type: ignore[arg-type]
    assert int(groups["agent"]["num_updates"]) == 0 and meta["counters"]["updates"] == 0
    warmed, source = _source_agent(out), _source_agent(offline_run["out"])
    for o in _probe_obs():
        np.testing.assert_array_equal(warmed.act(o, deterministic=True), source.act(o, deterministic=True))
    # resumed, the run goes on as the same warm start: no second load or step-0 evaluation, updates from step W
    assert cli_main(["train", "--env-id", ENV_ID, *FAST, "--max-env-steps", "90", "--out", str(out), "--resume"]) == 0
    assert min(spies["update_steps"]) == 80 and len(spies["update_steps"]) == 11
    assert [r["env_step"] for r in read_metrics(out / "metrics.jsonl")][:2] == [0, 79]
    assert load_checkpoint(latest_checkpoint(out / "checkpoints"))[1]["init_checkpoint"] == meta["init_checkpoint"]  # type: ignore[arg-type]


def test_demos_given_with_a_warm_start_are_sampled_at_the_demo_ratio(
        offline_run: dict[str, Any], spies: dict[str, list[Any]], tmp_path: Path) -> None:
    """The control for the online-only check above: the spy does see demo rows when there are any."""
    assert cli_main(["train", "--env-id", ENV_ID, *FAST, "--init-from", str(offline_run["out"]), "--warmup-steps", "20",
                     "--max-env-steps", "30", "--demos", str(offline_run["demos"]), "--demo-ratio", "0.25",
                     "--out", str(tmp_path / "warm_demos")]) == 0
    assert spies["counts"] and all(o == 24 and d == 8 for o, d in spies["counts"])


def _tiny_run(root: Path, name: str, argv: list[str], dim: int = 2) -> Path:
    """An offline-only run of one update on one demo (a cheap checkpoint to warm-start from)."""
    demos = record_point_reach(root / f"demos_{name}", 1, 0.0, human=True, seed=0, dim=dim)
    out = root / name
    assert cli_main(["train", *argv, "--demos", str(demos), "--offline-updates", "1", "--max-env-steps", "0",
                     "--eval-episodes", "1", "--out", str(out)]) == 0
    return out


def test_bad_init_from_is_one_line_without_traceback(offline_run: dict[str, Any], tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    other_env = _tiny_run(tmp_path, "other_env", ["--env-id", ENV_ID_3D, *FAST], dim=3)
    wider = _tiny_run(tmp_path, "wider", ["--env-id", ENV_ID, *FAST, "--set", "hidden_dims=16,16"])
    corrupt = tmp_path / "corrupt"
    ckpt = latest_checkpoint(wider / "checkpoints")
    assert ckpt is not None
    (corrupt / "checkpoints" / ckpt.name).mkdir(parents=True)
    for f in ckpt.iterdir():
        (corrupt / "checkpoints" / ckpt.name / f.name).write_bytes(f.read_bytes())
    (corrupt / "checkpoints" / ckpt.name / "agent.npz").write_bytes(b"PK\x03\x04 truncated")
    capsys.readouterr()
    out = tmp_path / "run"
    cases = ((tmp_path / "nope", "no such file or directory"),
             (offline_run["demos"], "a directory of recorded episodes"),
             (corrupt, "unreadable checkpoint group"),
             (other_env, "trained on another env"),
             (wider, "hidden_dims (16, 16) -> (32, 32)"))
    for source, msg in cases:
        assert cli_main(["train", "--env-id", ENV_ID, *FAST, "--init-from", str(source), "--max-env-steps", "50",
                   "--out", str(out)]) == 1
        err = capsys.readouterr().err
        assert "--init-from" in err and msg in err, err
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
        assert not out.exists()
    assert cli_main(["train", "--env-id", ENV_ID, "--init-from", str(offline_run["out"]), "--start-steps", "10",
               "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert "start_steps=10 must be 0 with --init-from" in err and len(err.strip().splitlines()) == 1, err


def test_which_agent_differences_refuse_a_warm_start_and_which_are_noted() -> None:
    base = AgentConfig(hidden_dims=(32, 32), discount=0.95)
    arch, notes = compare_agent_configs(base, base.replace(discount=0.9, n_step=3, bc_weight=1.0))
    assert arch == [] and notes == ["discount 0.95 -> 0.9", "n_step 1 -> 3", "bc_weight 0.0 -> 1.0"]
    arch, _ = compare_agent_configs(base, base.replace(state_scale=10.0, ensemble_size=4, critic_loss="hl_gauss"))
    assert arch == ["state_scale 1.0 -> 10.0", "ensemble_size 10 -> 4", "critic_loss 'mse' -> 'hl_gauss'"]
    # an HL-Gauss critic's support derives from the discount: the same bins then mean other values
    hl = base.replace(critic_loss="hl_gauss")
    arch, notes = compare_agent_configs(hl, hl.replace(discount=0.9))
    assert len(arch) == 1 and arch[0].startswith("hl_gauss_support") and notes == ["discount 0.95 -> 0.9"]
    assert compare_agent_configs(hl.replace(hl_gauss_range=(-0.5, 1.5)),
                                 hl.replace(hl_gauss_range=(-0.5, 1.5), discount=0.9))[0] == []


def test_an_offline_run_clones_every_human_row_unless_set_says_otherwise() -> None:
    """The pick-cube recipe's Q-filtered BC term is off in an offline run (it let the policy chase the critic's
    overrated out-of-data actions: 0 % after 4k offline updates, 80 % without the filter) and stays in an online run;
    --set bc_q_filter=true puts it back, and only a run that dropped it prints the note."""
    def cfg(task: str = "twin-pick-cube", offline: int = 100, **kw: Any) -> tuple[TrainConfig, AgentConfig]:
        tc = TrainConfig(task=task, obs_mode="state", demos="d", offline_updates=offline,
                         max_env_steps=0 if offline else 10, **kw)
        return tc, tc.agent_config(has_cameras=False)

    offline, acfg = cfg()
    assert acfg.bc_q_filter is False and acfg.bc_weight == 30.0 and acfg.n_step == 5  # the rest of the recipe stays
    assert offline.offline_bc_note(False, acfg) == OFFLINE_BC_NOTE
    online, acfg = cfg(offline=0)
    assert acfg.bc_q_filter is True and online.offline_bc_note(False, acfg) is None
    kept, acfg = cfg(agent_set=("bc_q_filter=true",))
    assert acfg.bc_q_filter is True and kept.offline_bc_note(False, acfg) is None
    reach, acfg = cfg(task="twin-reach")
    assert acfg.bc_q_filter is False and reach.offline_bc_note(False, acfg) is None  # its recipe has no filter
