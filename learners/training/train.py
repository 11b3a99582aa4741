"""`robot-rl train`'s library: one training run in one process (env + agent + replay, no ZeroMQ), from a
TrainConfig to the last metrics row.

`train(cfg, out)` reads as its phases: check the run directory (robot_rl.run_dir: refuse or resume), settle the
config (a resumed run's own, the action box), build the run (`build_run`: envs, reward model, agent, buffers,
demos), load a warm start's agent (learners.training.warm_start), write the run's files and say what it trains
with (`announce_start`), restore a checkpoint (`restore_run`), then hand over to
learners.training.session.TrainSession (offline phase, warm-start evaluation, online phase, evaluations and
checkpoints). `--forward-backward` runs go to learners.training.forward_backward_run instead.

Outputs in `out`: config.json, agent_config.json, metrics.jsonl, tensorboard/ (robot_rl.run_dir.tensorboard_dir),
learning_curve.png, checkpoints/, reward_audit/ (a classifier reward's positives). Nothing is written before the
env, the agent and the buffers are built.

Usage::

    cfg = TrainConfig(task="twin-reach", obs_mode="state", demos="demos/reach", max_env_steps=3000)
    row = train(cfg, Path("runs/reach"))                  # the last metrics row
    row = train(cfg.replace(max_env_steps=6000), Path("runs/reach"), resume=True)
    run = build_run(cfg)                                   # envs, agent and buffers alone (tests, benchmarks)
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np
import torch

from learners.agents.agent import make_agent
from learners.agents.device_defaults import gpu_notice, notice
from learners.agents.options import announce_agent_config, state_select_origin
from learners.replay.buffer import ReplayBuffer, ReplayConfig
from learners.replay.feature_cache import attach_feature_caches, run_frames
from learners.rewards.reward_model import RewardModelWrapper, camera_shapes_of_env, make_reward_model
from learners.training.config import TrainConfig
from learners.training.demos import load_demo_buffer
from learners.training.forward_backward_run import train_forward_backward
from learners.training.online import LoopCounters, action_bounds, set_env_rng_state
from learners.training.pretrain_encoder import with_run_encoder
from learners.training.run_env import camera_source, make_run_env, resolve_action_box, run_env_spec
from learners.training.session import Run, TrainSession
from learners.training.warm_start import source_encoder_weights
from robot_rl.run_dir import check_run_dir
from robot_rl.scene_resets import OperatorSceneResets


@dataclasses.dataclass(frozen=True)
class WarmStart:
    """What a warm start (--init-from) loaded: the checkpoint, and how its training settings differ from the run's."""

    checkpoint: Path
    notes: list[str]


def build_run(cfg: TrainConfig, reward_audit: Path | None = None, out: Path | None = None, log: Any = print) -> Run:
    """Make the envs, agent and buffers (demo episodes loaded) for `cfg`. With a learned or human reward the
    training env is wrapped in `RewardModelWrapper` (positives logged in `reward_audit`); the evaluation env
    keeps the env's own reward and success. A faithful run's training env is hardware-faithful (TrainConfig.faithful;
    the reward model is then its only reward). With --intervene the training env carries the operator's device and
    the run has a demo buffer even without --demos: the operator's rows go to both buffers. An agent config that asks
    for a camera encoder pretrained on the demos (AgentConfig.encoder_pretrain_steps) gets it first, in `out`
    (learners.training.pretrain_encoder.with_run_encoder; `out` None: the current directory)."""
    torch.set_num_threads(cfg.torch_threads)
    env, eval_env = make_run_env(cfg, for_reward_model=True), make_run_env(cfg)
    model = make_reward_model(cfg.reward, camera_shapes_of_env(env), reward_audit, k=cfg.reward_gate_k,
                              where=f"the {cfg.task or cfg.env_id} {camera_source(cfg.obs_mode)}")
    if model is not None:
        env = RewardModelWrapper(env, model)
    if cfg.operator_reset_after:  # a person restores the scene after failed episodes in a row (the twin: teleports)
        k = cfg.operator_reset_after
        env = OperatorSceneResets(env, k, ask=lambda n: log(
            f"[train] scene reset {n}: {k} training episodes in a row without success; the twin teleports a fresh "
            "scene (on a robot a person puts it back)"))
    spec = run_env_spec(env, cfg)
    online = ReplayBuffer(spec, cfg.replay_capacity, seed=cfg.seed)
    demo = (load_demo_buffer(cfg.demo_dirs(), spec, seed=cfg.seed + 1, bounds=action_bounds(env),
                             narrowed_actions=bool(cfg.action_low), align_frames=cfg.align_frames,
                             warn_action_space=env.action_space if not cfg.action_low and cfg.task is None else None)
            if cfg.demos else None)
    try:  # the demos are checked first: a camera encoder may then be pretrained on them (minutes)
        source = source_encoder_weights(cfg.init_from) if cfg.init_from is not None else None
        agent_cfg = with_run_encoder(cfg.agent_config(has_cameras=bool(spec.cameras)), cfg.demo_dirs(),
                                     out if out is not None else Path("."), log=lambda s: log(f"[train] {s}"),
                                     source_weights=source)
    except BaseException:
        env.close()
        eval_env.close()
        raise
    agent = make_agent(spec, agent_cfg)
    if demo is None and cfg.intervene is not None:  # the operator's rows go to a demo buffer too (HIL-SERL)
        demo = ReplayBuffer(spec, ReplayConfig().demo_capacity, seed=cfg.seed + 1)
    run = Run(cfg, env, eval_env, spec, agent, online, demo, LoopCounters(), np.random.default_rng(cfg.seed))
    try:  # learners.replay.feature_cache: frozen backbones' outputs once per stored frame (AgentConfig.feature_cache)
        run.notes.append(attach_feature_caches(agent, [online, demo], run_frames([online, demo], cfg.max_env_steps),
                                               seed=cfg.seed))
    except BaseException:
        run.close()
        raise
    return run


def resumed_config(cfg: TrainConfig, out: Path) -> TrainConfig:
    """The config a resumed run continues with: its own (OUT/config.json), extended to `cfg.max_env_steps`."""
    saved = TrainConfig.from_dict(json.loads((out / "config.json").read_text()))
    return saved.replace(max_env_steps=cfg.max_env_steps)


def load_warm_start(run: Run) -> WarmStart:
    """--init-from: load the source run's agent into `run.agent` (learners.training.warm_start); the run's envs
    are closed when that fails."""
    from learners.training.warm_start import init_agent_from

    assert run.cfg.init_from is not None
    try:
        ckpt, notes = init_agent_from(run.agent, run.spec, run.cfg.init_from)
    except BaseException:
        run.close()
        raise
    return WarmStart(ckpt, notes)


def write_run_files(run: Run, out: Path, log: Any = print) -> None:
    """OUT/config.json (the run's TrainConfig) and OUT/agent_config.json (announced in one line)."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(run.cfg.to_dict(), indent=1))
    announce_agent_config(run.agent.cfg, out, prefix="[train]", log=log,
                          origin=state_select_origin(run.cfg.agent_flags(), bool(run.spec.cameras)))


def announce_start(run: Run, warm: WarmStart | None, log: Any = print) -> None:
    """A fresh run's notices: the CPU defaults it keeps, the GPU hint, the offline phase's BC note, the demo buffer
    and the warm start."""
    cfg, has_cams = run.cfg, bool(run.spec.cameras)
    for line in (*(n for n in run.notes if has_cams), notice(run.agent.cfg, cfg.machine_defaults(has_cameras=has_cams)),
                 gpu_notice(run.agent.cfg, has_cams), cfg.offline_bc_note(has_cams, run.agent.cfg)):
        if line:
            log(f"[train] {line}")
    if run.demo is not None:
        human = int(np.count_nonzero(run.demo.fields["intervention"] & run.demo.valid))
        log(f"[train] demo buffer: {len(run.demo)} transitions from {', '.join(cfg.demo_dirs())} ({human} human "
            f"rows, {len(run.demo) - human} not human); demo ratio {cfg.demo_ratio}")
    if warm is not None:
        log(f"[train] warm start from {warm.checkpoint}: actor, critics, targets, temperature and Adam moments loaded "
            f"(not its replay data, update counter or RNG states); warm-up: {cfg.warmup()} env steps with the loaded "
            "policy, no updates, then fine-tuning on "
            + ("online data only" if run.demo is None else f"online + demo data (demo ratio {cfg.demo_ratio})"))
        if warm.notes:
            log(f"[train] --init-from: training settings differ from the source's (source -> this run): "
                f"{'; '.join(warm.notes)}")


def restore_run(run: Run, ckpt: Path, log: Any = print) -> str | None:
    """Restore `run` from checkpoint `ckpt` (agent, buffers, counters, RNG states, the env's RNG); returns the warm
    start's source checkpoint the run recorded (None for a run that was not warm-started)."""
    tr = run.training_run()
    meta = tr.restore(ckpt)
    if "env_rng" in meta:
        set_env_rng_state(run.env, meta["env_rng"])
    run.counters = LoopCounters(**{k: int(tr.counters.get(k, 0)) for k in ("env_step", "episode", "updates",
                                                                           "offline_updates")})
    log(f"[train] resumed from {ckpt.name}: env_step {run.counters.env_step}, episode {run.counters.episode}, "
        f"updates {run.counters.updates}, online buffer {len(run.online)}")
    source = meta.get("init_checkpoint")
    return source if isinstance(source, str) else None


def train(cfg: TrainConfig, out: Path, resume: bool = False, log: Any = print) -> dict[str, Any]:
    """Run (or resume) a training run into `out`; returns the last metrics row (the module docstring's phases)."""
    if cfg.forward_backward:
        return train_forward_backward(cfg, out, resume=resume, log=log)
    ckpt = check_run_dir(out, resume)
    cfg = resolve_action_box(resumed_config(cfg, out) if ckpt is not None else cfg, log=log)
    if ckpt is None and cfg.init_from is not None and cfg.demos is None and cfg.task is None:
        from learners.training.warm_start import source_learned_from_demos  # (an --env-id run's demo defaults)

        cfg = dataclasses.replace(cfg, source_demos=source_learned_from_demos(cfg.init_from))
    run = build_run(cfg, reward_audit=out / "reward_audit", out=out, log=log)
    warm = load_warm_start(run) if cfg.init_from is not None and ckpt is None else None  # a resumed one restores
    write_run_files(run, out, log=log)
    if ckpt is None:
        announce_start(run, warm, log=log)
        source = str(warm.checkpoint.resolve()) if warm is not None else None
    else:
        source = restore_run(run, ckpt, log=log)
    return TrainSession(run, out, log=log, init_source=source, resumed=ckpt is not None).run(
        evaluate_warm_start=warm is not None)
