"""The loop of one `robot-rl train` run over a built `Run` (learners.training.train builds it): its phases as
methods of `TrainSession`.

`run()` is: the offline phase (`--offline-updates N`: updates on the demo buffer alone, an evaluation at env step 0,
a checkpoint), the warm start's evaluation (`--init-from`: the loaded policy before any online step), the online
phase (learners.training.online.train_online; an evaluation every `eval_every` env steps and a checkpoint every
`checkpoint_every`, a wall-clock budget), and a last evaluation + checkpoint when the run ended between two. Each
evaluation (robot_rl.evaluation through learners.training.online.evaluate_episodes) is one metrics row: in
OUT/metrics.jsonl, TensorBoard (OUT/tensorboard), OUT/learning_curve.png and one progress line.

Usage::

    run = build_run(cfg, reward_audit=out / "reward_audit")          # learners.training.train
    row = TrainSession(run, out).run()                               # the last metrics row; closes the envs
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from learners.agents.agent import LearnerAgent
from learners.agents.options import compile_what
from learners.replay.buffer import ReplayBuffer, concat_batches
from learners.rewards.reward_model import RewardModelWrapper, frame_lag_steps
from learners.training.config import TrainConfig
from learners.training.diagnostics import RunDiagnostics
from learners.training.gym_compat import SuccessKeyWrapper, success_warning
from learners.training.online import (
    LoopConfig,
    LoopCounters,
    env_rng_state,
    evaluate_episodes,
    train_offline,
    train_online,
)
from learners.training.run_state import TrainingRun
from learners.training.scalars import ScalarWriter
from robot_rl.forwarding import wrapper_of
from robot_rl.metrics import MetricsLog, plot_learning_curve, read_metrics
from robot_rl.run_dir import CHECKPOINTS_DIR, METRICS_FILE, tensorboard_dir
from robot_rl.scene_resets import OperatorSceneResets
from robot_rl.specs import EnvSpec

LOSS_KEYS = ("critic_loss", "actor_loss", "temperature", "q_mean", "entropy")
"""Update metrics averaged into each metrics row."""


@dataclasses.dataclass
class Run:
    """Everything a training run holds in memory."""

    cfg: TrainConfig
    env: Any
    eval_env: Any
    spec: EnvSpec
    agent: LearnerAgent
    online: ReplayBuffer
    demo: ReplayBuffer | None
    counters: LoopCounters
    rng: np.random.Generator
    notes: list[str] = dataclasses.field(default_factory=list)
    """One-line notes on how the run was built (the feature cache's), said when a fresh run starts."""

    def training_run(self) -> TrainingRun:
        return TrainingRun(self.agent, self.online, self.demo, dataclasses.asdict(self.counters), self.rng)

    def close(self) -> None:
        """Close both envs."""
        self.env.close()
        self.eval_env.close()


class TrainSession:
    """The phases of one training run over `run`, writing into `out` (see the module docstring). `init_source`:
    the checkpoint a warm start loaded (kept in this run's checkpoints); `resumed`: the run was restored from a
    checkpoint (its start-up notes were said before)."""

    def __init__(self, run: Run, out: Path, log: Any = print, init_source: str | None = None,
                 resumed: bool = False) -> None:
        self.run_, self.cfg, self.out, self.log = run, run.cfg, out, log
        self.init_source, self.resumed = init_source, resumed
        self.metrics = MetricsLog(out / METRICS_FILE)
        self.tb = ScalarWriter(tensorboard_dir(out))
        self.last_eval = run.counters.env_step // self.cfg.eval_every
        self.last_ckpt = run.counters.env_step // self.cfg.checkpoint_every
        self.window: list[dict[str, Any]] = []  # per-episode training metrics since the last row
        self.started = self.t0 = time.perf_counter()
        self.updates0 = run.counters.updates
        self.first_update_s: float | None = None  # the first update() traces and compiles (reported once)
        self.warned: set[str] = set()
        self.diagnostics = RunDiagnostics(seed=self.cfg.seed) if self.cfg.diagnostics else None
        self.progress_at = (self.started, run.counters.env_step, run.counters.updates)  # (time, env step, updates)

    # ------------------------------------------------------------------ the run
    def run(self, evaluate_warm_start: bool = False) -> dict[str, Any]:
        """The offline phase, the warm start's evaluation, the online phase, a last evaluation; the last metrics
        row. Closes the envs and the TensorBoard writer."""
        run, cfg = self.run_, self.cfg
        row: dict[str, Any] = {}
        loop_cfg = self.loop_config()
        try:
            if cfg.offline_updates > run.counters.offline_updates:
                row = self.offline_phase()
            if evaluate_warm_start:  # the loaded policy before any online step: the level at the switch
                row = self.evaluate({"warmup_steps": cfg.warmup()})
            if cfg.max_env_steps > run.counters.env_step:
                row = self.online_phase(loop_cfg) or row
            if not row or row.get("env_step") != run.counters.env_step:
                row = self.evaluate()  # the run ended mid-episode: evaluate what we have
                self.save_checkpoint()
        finally:
            self.tb.close()
            run.close()
        return row

    def loop_config(self) -> LoopConfig:
        """The online loop's schedule: no uniform random warm-up on a residual base; a warm start's warm-up
        collects cfg.warmup() steps with the loaded policy before the first update."""
        cfg, agent_cfg = self.cfg, self.run_.agent.cfg
        start_steps = cfg.start_steps
        if agent_cfg.residual_base is not None and start_steps > 0:
            start_steps = 0  # uniform random actions would throw the base policy away
            if not self.resumed:
                self.log(f"[train] residual RL on the base policy {agent_cfg.residual_base}: no uniform random "
                         "warm-up (--start-steps ignored); the base plus the exploring residual acts from the first "
                         "step")
        learning_starts = max(1, cfg.warmup()) if cfg.init_from is not None else cfg.learning_starts
        hold, lag = self.gate_credit()
        return LoopConfig(total_steps=max(1, cfg.max_env_steps), start_steps=start_steps,
                          learning_starts=learning_starts, updates_per_step=cfg.steps_per_update(),
                          demo_ratio=cfg.demo_ratio, seed=cfg.seed,
                          frame_lag_steps=frame_lag_steps(self.run_.env) if cfg.align_frames else 0,
                          credit_hold_steps=hold, credit_lag_steps=lag)

    def gate_credit(self) -> tuple[int, int]:
        """(credit_hold_steps, credit_lag_steps) of LoopConfig for --credit-first-positive: the classifier's gate k
        plus the camera lag held back, and that lag; (0, 0) without the flag or a classifier reward."""
        wrapper = wrapper_of(self.run_.env, RewardModelWrapper)
        k = getattr(getattr(wrapper, "model", None), "k", None)
        if not self.cfg.credit_first_positive or k is None:
            return 0, 0
        lag = frame_lag_steps(self.run_.env)
        return int(k) + lag, lag

    def offline_phase(self) -> dict[str, Any]:
        """--offline-updates: updates on the demo buffer alone, then an evaluation (env step 0) and a checkpoint."""
        run, cfg, log = self.run_, self.cfg, self.log
        assert run.demo is not None  # TrainConfig.validate: --offline-updates needs --demos
        done_before = run.counters.offline_updates
        log(f"[train] offline phase: {cfg.offline_updates} updates on the demo buffer alone ({len(run.demo)} "
            f"transitions), no env steps" + (f"; {done_before} done before" if done_before else ""))
        every = max(1, min(1000, cfg.offline_updates // 10))
        t_start = time.perf_counter()
        last: dict[str, Any] = {}
        for m in train_offline(run.agent, run.demo, cfg.offline_updates, run.counters, report_every=every,
                               on_learning_start=self.fit_obs_norm):
            self.note_first_update()
            last = m
            rate = (m["offline_updates"] - done_before) / max(time.perf_counter() - t_start, 1e-9)
            log(f"[train] offline update {m['offline_updates']}/{cfg.offline_updates}  critic_loss "
                f"{m.get('critic_loss', float('nan')):.4f}  actor_loss {m.get('actor_loss', float('nan')):.4f}  "
                f"q_mean {m.get('q_mean', float('nan')):.3f}  ({rate:.1f} updates/s)")
        row = self.evaluate({"offline_updates": run.counters.offline_updates,
                             **{k: float(last[k]) for k in LOSS_KEYS if k in last}})
        path = self.save_checkpoint()
        log(f"[train] offline phase done: checkpoint {path.name}")
        return row

    def online_phase(self, loop_cfg: LoopConfig) -> dict[str, Any]:
        """train_online until --max-env-steps (or the --max-minutes budget): evaluations and checkpoints on
        their schedules; the last evaluation's row ({} when none fell due)."""
        run, cfg = self.run_, self.cfg
        row: dict[str, Any] = {}
        for m in train_online(run.env, run.agent, run.online, loop_cfg, demo=run.demo,
                              counters=run.counters, rng=run.rng, on_learning_start=self.fit_obs_norm):
            self.window.append(m)
            self.warn_success()  # at the first episode end that shows it, not at the first evaluation
            self.progress()
            step = run.counters.env_step
            self.note_first_update()
            done = step >= cfg.max_env_steps
            if step // cfg.eval_every > self.last_eval or done:
                self.last_eval = step // cfg.eval_every
                row = self.evaluate()
                if cfg.max_minutes > 0 and time.perf_counter() - self.started > 60.0 * cfg.max_minutes and not done:
                    self.log(f"[train] stopping at env step {step}: --max-minutes {cfg.max_minutes} reached")
                    done = True
            if step // cfg.checkpoint_every > self.last_ckpt or done:
                path = self.save_checkpoint()
                self.log(f"[train] checkpoint {path.name}")
            if done:
                break
        return row

    def progress(self) -> None:
        """Every `progress_every_s` (at an episode end): one line with env steps/s and updates/s since the last
        line, the training episodes' success (last 20 that report it), and the time left at that rate."""
        c, cfg, now = self.run_.counters, self.cfg, time.perf_counter()
        t0, steps0, updates0 = self.progress_at
        if cfg.progress_every_s <= 0 or now - t0 < cfg.progress_every_s:
            return
        self.progress_at = (now, c.env_step, c.updates)
        sps, ups = (c.env_step - steps0) / (now - t0), (c.updates - updates0) / (now - t0)
        recent = [bool(m["success"]) for m in self.window[-20:] if "success" in m]
        success = f"  training success {np.mean(recent):.0%} (last {len(recent)})" if recent else ""
        eta = (cfg.max_env_steps - c.env_step) / sps if sps > 0 else float("inf")
        self.log(f"[train] step {c.env_step}/{cfg.max_env_steps}  {sps:.1f} env steps/s  {ups:.1f} updates/s"
                 f"{success}  ETA {'-' if eta == float('inf') else f'{int(eta // 60)}m{int(eta % 60):02d}s'}")

    # ------------------------------------------------------------------ evaluations, checkpoints
    def evaluate(self, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Evaluate the deterministic policy; write the metrics row (file, TensorBoard, plot, one line)."""
        run, cfg = self.run_, self.cfg
        self.note_first_update()
        res = evaluate_episodes(run.eval_env, run.agent, episodes=cfg.eval_episodes, seed=1_000_000 + cfg.seed)
        row = self.metrics_row(res, extra)
        self.metrics.write(row)
        self.tb.write(row, run.counters.env_step)
        plot_learning_curve(read_metrics(self.out / METRICS_FILE), self.out / "learning_curve.png",
                            title=run.spec.task)
        self.log(f"[train] step {row['env_step']}/{cfg.max_env_steps}  episode {row['episode']}  eval success "
                 f"{row['success_rate']:.0%}  return {row['return']:.2f}  updates {row['updates']} "
                 f"({row['updates_per_s']:.1f}/s)  buffers {row['online_buffer']}+{row['demo_buffer']} demo"
                 + _reward_frames(row))
        self.window, self.t0, self.updates0 = [], time.perf_counter(), run.counters.updates
        self.warn_success()
        return row

    def metrics_row(self, res: list[dict[str, Any]], extra: Mapping[str, Any] | None) -> dict[str, Any]:
        """One metrics row from evaluation episodes `res` and the training episodes since the last row."""
        run, c = self.run_, self.run_.counters
        r: dict[str, Any] = {
            "env_step": c.env_step, "episode": c.episode, "updates": c.updates,
            "success_rate": float(np.mean([e["success"] for e in res])),
            "return": float(np.mean([e["return"] for e in res])),
            "updates_per_s": (c.updates - self.updates0) / max(time.perf_counter() - self.t0, 1e-9),
            "online_buffer": len(run.online), "demo_buffer": len(run.demo) if run.demo is not None else 0,
        }
        window = self.window
        if window:
            r["train_return"] = float(np.mean([m["episode_return"] for m in window]))
            if "success" in window[-1]:
                r["train_success_rate"] = float(np.mean([bool(m.get("success")) for m in window]))
            for k in LOSS_KEYS:
                vals = [m[k] for m in window if k in m]
                if vals:
                    r[k] = float(np.mean(vals))
            for k in ("credited_successes", "credit_dropped_steps"):  # --credit-first-positive: counts so far
                if k in window[-1]:
                    r[k] = int(window[-1][k])
        r.update(extra or {})
        if self.diagnostics is not None:  # --diagnostics: the diag_* columns (learners.training.diagnostics)
            r.update(self.diagnostics.measure(run.agent, run.online, run.demo, window, self.cfg.demo_ratio))
        if self.first_update_s is not None:
            r["first_update_s"] = self.first_update_s
        operator = wrapper_of(run.env, OperatorSceneResets)
        if operator is not None:  # scene resets a person made (the twin: teleports)
            r["operator_scene_resets"] = operator.requests
        model_env = wrapper_of(run.env, RewardModelWrapper)
        if model_env is not None:  # training episodes the reward model ended, and wrongly
            r.update({f"reward_{k}": v for k, v in model_env.stats().items()})
            # the classifier's frame precision / recall on the policy's own rollouts since the last row (twin only)
            r.update({f"reward_{k}": v for k, v in model_env.frame_window().items()})
        return r

    def save_checkpoint(self) -> Path:
        """An atomic checkpoint of the whole run (agent, buffers, counters, RNG states, the env's RNG)."""
        run = self.run_
        meta: dict[str, Any] = {"config": self.cfg.to_dict(), "agent_config": run.agent.cfg.to_dict(),
                                "spec": run.spec.to_dict(), "env_rng": env_rng_state(run.env)}
        if self.init_source is not None:
            meta["init_checkpoint"] = self.init_source
        self.last_ckpt = run.counters.env_step // self.cfg.checkpoint_every
        return run.training_run().save(self.out / CHECKPOINTS_DIR, extra_meta=meta)

    # ------------------------------------------------------------------ notes
    def note_first_update(self) -> None:
        """Report the first update's time once (JAX / torch.compile: tracing and compilation)."""
        compile_s = getattr(self.run_.agent, "compile_s", None)
        if self.first_update_s is None and compile_s is not None:
            self.first_update_s = float(compile_s)
            self.log(f"[train] first update {self.first_update_s:.1f} s ({compile_what(self.run_.agent)})")

    def warn_success(self) -> None:
        """Once: warn when the env never reported its success key (learners.training.gym_compat)."""
        wrapper = wrapper_of(self.run_.env, SuccessKeyWrapper)
        msg = success_warning(wrapper) if wrapper is not None and self.run_.counters.episode > 0 else None
        if msg and "success" not in self.warned:
            self.warned.add("success")
            self.log(f"[train] warning: {msg}")

    def fit_obs_norm(self) -> None:
        """--obs-norm: the state's normalisation from the demos and the online data so far (a warm start keeps
        the loaded statistics)."""
        run = self.run_
        if not run.agent.cfg.obs_norm or self.cfg.init_from is not None:
            return
        from learners.agents.sac import SACAgent

        assert isinstance(run.agent, SACAgent)  # obs_norm is a torch-only option: the JAX backend refuses it
        parts = [buf.sample(min(len(buf) * 4, 20_000), images=True)["obs"] for buf in (run.demo, run.online)
                 if buf is not None and len(buf) > 0]
        obs = concat_batches([{"obs": p} for p in parts])["obs"]
        mean, std = run.agent.set_state_normalization(obs)
        self.log(f"[train] observation normalisation from {len(run.online)} online"
                 f"{f' + {len(run.demo)} demo' if run.demo is not None else ''} transitions: mean "
                 f"{np.round(mean.astype(np.float64), 3).tolist()[:8]}{'...' if mean.size > 8 else ''}, std "
                 f"{np.round(std.astype(np.float64), 3).tolist()[:8]}{'...' if std.size > 8 else ''}")


def _reward_frames(row: Mapping[str, Any]) -> str:
    """'  classifier frames P 0.98 R 0.71 (twin truth)' for a row with the reward model's window counts, else ''."""
    if "reward_window_frame_tp" not in row:
        return ""

    def f(v: float | None) -> str:
        return "-" if v is None else f"{v:.2f}"

    return (f"  classifier frames P {f(row['reward_window_frame_precision'])} "
            f"R {f(row['reward_window_frame_recall'])} (twin truth)")

