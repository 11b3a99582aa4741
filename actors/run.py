"""The `robot-rl actor` process: its options (`ActorRunConfig`, one field per command-line flag, parsed by
`parse_actor_args`: `robot-rl sim` builds actor command lines, and tests parse them the same way), and `run_actor`:
one actor (actors.actor.Actor over a ZeroMQ endpoint) until Ctrl-C / SIGTERM or its step / episode budget, or with
`evaluate` set a checkpoint evaluation (actors.evaluation).

Phases of an acting run: `_connect` (the env, actors.actor_env; the endpoint, robot_rl.transport) -> `_act` (the
loop with a progress line every 10 s; signals only set a stop flag) -> `_finish` (flush what the learner has not
acknowledged within `flush_timeout`, close, write `stats_out`).

Usage::

    cfg = parse_actor_args(["--task", "twin-pick-cube", "--learner", "tcp://127.0.0.1:5555", "--max-steps", "100"])
    run_actor(cfg)                                   # 0; prints the actor's start and stop lines
    run_actor(cfg.replace(evaluate=Path("runs/pick/checkpoints"), summary=Path("eval.json")))
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import Any

from actors.actor import LEARNER_LOSS, Actor, ActorConfig
from actors.actor_env import backend_of, make_actor_env
from actors.evaluation import CheckpointEvalConfig, evaluate_checkpoint, write_json
from robot_rl.config import Config, require
from robot_rl.errors import ProtocolError, RobotRLError, SpecMismatchError
from robot_rl.gym_env import env_spec_of
from robot_rl.operators import INTERVENE_CHOICES, check_intervene
from robot_rl.presets import PRESETS, ObsModeFromTaskParser, get_preset, task_reward
from robot_rl.scene_resets import CONFIRM_CHOICES, OperatorSceneResets, operator_prompt, resolve_confirm
from robot_rl.timing import add_timing_flags, timing_overrides

WARMUP_CHOICES = ("auto", "hold", "random")
"""--warmup: auto = random on the twin (in process or served), hold on any other backend (hardware)."""
PACE_CHOICES = ("auto", "step", "episode", "off")
"""--pace: auto = step on the twin, episode on any other backend (actor_config)."""


@dataclasses.dataclass(frozen=True)
class ActorRunConfig(Config):
    """The options of `robot-rl actor` (the field names are the flags' dests; see `actor_arg_parser` for help)."""

    task: str = "twin-pick-cube"
    learner: str = "tcp://127.0.0.1:5555"
    robot: str | None = None
    actor_id: str | None = None
    obs_mode: str = "state"
    image_size: int | None = None
    seed: int = 0
    task_config: str | None = None
    allow_twin_box: bool = False
    warmup: str = "auto"
    chunk_steps: int = ActorConfig().chunk_steps
    no_pace: bool = False
    pace: str = "auto"
    on_learner_loss: str = "auto"
    learner_loss_hold_s: float = 10.0
    intervene: str | None = None
    device_config: str | None = None
    faithful: bool = False
    camera_latency_ms: float | None = None
    action_delay_ms: float | None = None
    reward: str | None = None
    reward_gate_k: int | None = None
    operator_reset_after: int = 0
    """After K episodes in a row without success (by the reward this actor sends) a person puts the scene back
    (robot_rl.scene_resets); 0: never, the robot's resets alone."""
    operator_reset_confirm: str = "auto"
    """How the actor on a robot waits for that person: enter, pause, auto (Enter when stdin is a terminal)."""
    operator_reset_pause_s: float = 20.0
    reward_audit: Path | None = None
    max_steps: int = 0
    max_episodes: int = 0
    flush_timeout: float = 5.0
    stats_out: Path | None = None
    keys: str | None = None
    insecure: bool = False
    heartbeat: float = 1.0
    threads: int = 1
    quiet: bool = False
    evaluate: Path | None = None
    episodes: int = 20
    eval_seed: int = 10_000
    summary: Path | None = None

    def validate(self) -> None:
        require(self.obs_mode in ("state", "pixels"), "obs_mode", self.obs_mode, "must be 'state' or 'pixels'")
        require(self.warmup in WARMUP_CHOICES, "warmup", self.warmup, f"must be one of {list(WARMUP_CHOICES)}")
        require(self.pace in PACE_CHOICES, "pace", self.pace, f"must be one of {list(PACE_CHOICES)}")
        require(self.on_learner_loss in ("auto", *LEARNER_LOSS), "on_learner_loss", self.on_learner_loss,
                f"must be one of {['auto', *LEARNER_LOSS]}")
        require(self.learner_loss_hold_s >= 0, "learner_loss_hold_s", self.learner_loss_hold_s, "must be >= 0")
        require(self.reward_gate_k is None or self.reward_gate_k >= 1, "reward_gate_k", self.reward_gate_k,
                "must be an integer >= 1")
        # an evaluation takes no device: a human reward there counts the twin's true success (actors.evaluation)
        check_intervene(self.intervene, self.device_config, (self.reward or "env") if self.evaluate is None else "env")
        timing_overrides(self.faithful, self.camera_latency_ms, self.action_delay_ms)  # a bad value fails here
        require(self.operator_reset_after >= 0, "operator_reset_after", self.operator_reset_after,
                "must be >= 0 (failed episodes in a row; 0: never)")
        require(self.operator_reset_confirm in CONFIRM_CHOICES, "operator_reset_confirm",
                self.operator_reset_confirm, f"must be one of {list(CONFIRM_CHOICES)}")
        require(self.operator_reset_pause_s >= 0, "operator_reset_pause_s", self.operator_reset_pause_s,
                "must be >= 0 seconds")

    def evaluation(self) -> CheckpointEvalConfig:
        """The checkpoint evaluation these options ask for (`evaluate` set)."""
        assert self.evaluate is not None
        return CheckpointEvalConfig(checkpoint=self.evaluate, task=self.task, obs_mode=self.obs_mode,
                                    image_size=self.image_size, robot=self.robot, faithful=self.faithful,
                                    allow_twin_box=self.allow_twin_box, reward=self.reward or "env",
                                    reward_gate_k=self.reward_gate_k,
                                    camera_latency_ms=self.camera_latency_ms, action_delay_ms=self.action_delay_ms,
                                    episodes=self.episodes, seed=self.eval_seed, summary=self.summary)


def actor_config(cfg: ActorRunConfig, backend: str) -> ActorConfig:
    """The actor loop's options for `cfg` on `backend` (actors.actor_env.backend_of): the 'auto' choices resolved,
    the twin's (random warm-up, pacing between steps, continue without the learner) or hardware's (hold before the
    first weights, pacing only between episodes, hold after `learner_loss_hold_s` without the learner)."""
    twin = backend == "twin"
    warmup = cfg.warmup if cfg.warmup != "auto" else ("random" if twin else "hold")
    pace = "off" if cfg.no_pace else cfg.pace if cfg.pace != "auto" else ("step" if twin else "episode")
    loss = cfg.on_learner_loss if cfg.on_learner_loss != "auto" else ("continue" if twin else "hold")
    return ActorConfig(chunk_steps=cfg.chunk_steps, seed=cfg.seed, warmup=warmup, pace=pace != "off",
                       pace_mid_episode=pace == "step", on_learner_loss=loss,
                       learner_loss_hold_s=cfg.learner_loss_hold_s)


def actor_arg_parser() -> argparse.ArgumentParser:
    """The `robot-rl actor` command line (one flag per `ActorRunConfig` field)."""
    p = ObsModeFromTaskParser(prog="robot-rl actor", description="`robot-rl actor`: one actor process (actors.actor "
                                "over a ZeroMQ endpoint), or a policy evaluation.")
    p.add_argument("--task", required=True, help=f"task preset ({', '.join(PRESETS)}) or task file (.toml)")
    p.add_argument("--learner", default="tcp://127.0.0.1:5555", help="the learner's address")
    p.add_argument("--robot", default=None, help="robot server address (default: the twin in this process)")
    p.add_argument("--actor-id", default=None, help="unique name of this actor (default: host-pid)")
    p.add_argument("--obs-mode", default=None, choices=("state", "pixels"),
                   help="observation mode (default: the task file's [observation] mode, else state)")
    p.add_argument("--image-size", type=int, default=None, help="camera image size (pixels mode)")
    p.add_argument("--seed", type=int, default=0, help="seed of the first reset and of the random warm-up")
    p.add_argument("--task-config", default=None,
                   help="deprecated (pass --task FILE): with --robot, a task file whose box the env clips to")
    p.add_argument("--allow-twin-box", action="store_true",
                   help="with --robot on hardware: run inside the task's twin box, not one recorded in the lab (at "
                        "your own risk)")
    p.add_argument("--warmup", default="auto", choices=WARMUP_CHOICES,
                   help="before the first weights: hold the pose or act randomly (auto: random on the twin only)")
    p.add_argument("--chunk-steps", type=int, default=ActorConfig().chunk_steps,
                   help="send transitions at every episode end and at least every N steps")
    p.add_argument("--no-pace", action="store_true", help="never wait for the learner's budget (= --pace off)")
    p.add_argument("--pace", default="auto", choices=PACE_CHOICES,
                   help="wait for the learner's env-step budget: step (between any two steps), episode (only before "
                        "an episode's first step: a robot is never left waiting mid-motion), off; auto: step on the "
                        "twin, episode on hardware")
    p.add_argument("--on-learner-loss", default="auto", choices=("auto", *LEARNER_LOSS),
                   help="the learner goes silent: continue (act on with the last weights) or hold (stop stepping "
                        "after --learner-loss-hold-s, resume when it is back); auto: continue on the twin, hold on "
                        "hardware")
    p.add_argument("--learner-loss-hold-s", type=float, default=10.0,
                   help="seconds without the learner before an actor with --on-learner-loss hold holds")
    p.add_argument("--intervene", default=None, choices=INTERVENE_CHOICES,
                   help="human-in-the-loop interventions (HIL-SERL): a person at a teleop device (spacemouse, "
                        "gamepad, keyboard: the bindings of record-demos) or the twin's scripted operator")
    p.add_argument("--device-config", default=None, metavar="FILE",
                   help="with a hardware --intervene: a JSON object of the device's config fields (e.g. deadzone, "
                        "scale, path, index, layout)")
    p.add_argument("--faithful", action="store_true",
                   help="hardware-faithful twin: proprio + cameras only, no task reward, no teleports after the first")
    add_timing_flags(p)
    p.add_argument("--reward", default=None,
                   help="env (the env's reward), classifier:DIR (a trained reward classifier, gated) or human (the "
                        "teleop device's success key; needs --intervene); --faithful needs classifier:DIR or human")
    p.add_argument("--reward-gate-k", type=int, default=None, metavar="K",
                   help="a classifier reward's gate: K consecutive positive frames (default: the task file's "
                        "reward.gate_k, else the classifier's card)")
    p.add_argument("--reward-audit", type=Path, default=None,
                   help="where positives of a classifier/human reward are logged (default: reward_audit/ACTOR_ID)")
    p.add_argument("--operator-reset-after", type=int, default=0, metavar="K",
                   help="after K episodes in a row without success (by the reward sent), a person puts the scene back "
                        "before the next reset (the twin teleports instead); 0: never")
    p.add_argument("--operator-reset-confirm", default="auto", choices=CONFIRM_CHOICES,
                   help="on a robot, wait for that person: enter (on this terminal), pause (--operator-reset-pause-s, "
                        "for a headless actor), auto (Enter when stdin is a terminal)")
    p.add_argument("--operator-reset-pause-s", type=float, default=20.0,
                   help="seconds the arm holds for a scene reset with --operator-reset-confirm pause")
    p.add_argument("--max-steps", type=int, default=0, help="stop after this many env steps (0: never)")
    p.add_argument("--max-episodes", type=int, default=0, help="stop after this many episodes (0: never)")
    p.add_argument("--flush-timeout", type=float, default=5.0, help="seconds to wait for acks when stopping")
    p.add_argument("--stats-out", type=Path, default=None, help="write the final stats here (JSON)")
    p.add_argument("--keys", default=None, help="CURVE client key directory (robot_rl.keys) for non-loopback")
    p.add_argument("--insecure", action="store_true", help="allow a non-loopback learner without keys")
    p.add_argument("--heartbeat", type=float, default=1.0, help="heartbeat interval (s)")
    p.add_argument("--threads", type=int, default=1, help="torch threads (0: torch's default)")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    e = p.add_argument_group("evaluation")
    e.add_argument("--evaluate", type=Path, default=None, help="evaluate this checkpoint instead of acting")
    e.add_argument("--episodes", type=int, default=20, help="evaluation episodes")
    e.add_argument("--eval-seed", type=int, default=10_000, help="seed of the first evaluation episode")
    e.add_argument("--summary", type=Path, default=None, help="write the evaluation result here (JSON)")
    return p


def parse_actor_args(argv: Sequence[str]) -> ActorRunConfig:
    """`robot-rl actor`'s arguments as a config (argparse's usage error and exit on bad flags)."""
    return ActorRunConfig(**vars(actor_arg_parser().parse_args(list(argv))))


def with_task_reward(cfg: ActorRunConfig) -> ActorRunConfig:
    """`cfg` with the task file's `[reward]` (robot_rl.presets.task_reward; the twin presets: the env's) filling
    --reward and --reward-gate-k where they were not given."""
    file_reward, file_gate_k = task_reward(cfg.task)
    return cfg.replace(reward=cfg.reward or file_reward or "env",
                       reward_gate_k=cfg.reward_gate_k if cfg.reward_gate_k is not None else file_gate_k)


def run_actor(cfg: ActorRunConfig) -> int:
    """Run one actor (or, with `cfg.evaluate`, evaluate a checkpoint); returns the exit code."""
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(levelname)s: %(message)s")
    if cfg.threads > 0:
        import torch

        torch.set_num_threads(cfg.threads)
    get_preset(cfg.task)  # UnknownTaskError (or a task file's ConfigError) early
    cfg = with_task_reward(cfg)
    if cfg.evaluate is not None:
        evaluate_checkpoint(cfg.evaluation())
        return 0
    actor_id = cfg.actor_id or f"{socket.gethostname()}-{os.getpid()}"
    env, endpoint = _connect(cfg, actor_id)
    actor = Actor(env, endpoint, actor_config(cfg, backend_of(env)))
    stop = threading.Event()

    def _on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    prev_term = signal.signal(signal.SIGTERM, _on_signal)
    prev_int = signal.signal(signal.SIGINT, _on_signal)
    print(f"actor {actor_id}: {cfg.task} ({cfg.obs_mode}, {'robot ' + cfg.robot if cfg.robot else 'twin'}) -> "
          f"learner {cfg.learner} (pid {os.getpid()})", flush=True)
    refused: RobotRLError | None = None
    try:
        _act(cfg, actor_id, actor, endpoint, stop)
    except (SpecMismatchError, ProtocolError) as err:  # the learner refused this actor: stop now, exit 1
        refused = err
    finally:  # the signal handlers stay until the end: a second SIGTERM must not cut the flush short
        try:
            final = _finish(cfg, actor_id, actor, env, endpoint, quiet_errors=refused is not None)
        finally:
            signal.signal(signal.SIGTERM, prev_term)
            signal.signal(signal.SIGINT, prev_int)
    if refused is not None:
        code = refused.code if isinstance(refused, ProtocolError) else "spec_mismatch"
        raise LearnerRefusedError(refused_message(cfg, refused, final["env_steps"]), code) from None
    unacked = "" if final["flushed"] else " (not all acknowledged)"
    if "operator_scene_resets" in final:
        unacked += f"; {final['operator_scene_resets']} scene reset(s) asked of a person"
    print(f"actor {actor_id}: stopped after {final['env_steps']} steps, {final['episodes']} episodes; sent up to seq "
          f"{final['next_seq'] - 1}, acked {final['acked_upto']}{unacked}", flush=True)
    return 0


class LearnerRefusedError(ProtocolError):
    """The learner refused this actor (spec_mismatch, bad_version, unauthorized): the actor stops at once."""


def refused_message(cfg: ActorRunConfig, err: RobotRLError, steps: int) -> str:
    """One line for an actor the learner refused: who refused, why (the differing fields), what to check."""
    hint = ""
    if isinstance(err, SpecMismatchError):
        hint = (f"; start the actor and the learner with the same --task, --obs-mode and --image-size (this actor: "
                f"--task {cfg.task} --obs-mode {cfg.obs_mode}"
                f"{'' if cfg.image_size is None else f' --image-size {cfg.image_size}'})")
    return f"the learner at {cfg.learner} refused this actor ({err}){hint}; stopped after {steps} steps"


def _connect(cfg: ActorRunConfig, actor_id: str) -> tuple[Any, Any]:
    """The actor's env and its endpoint to the learner (the handshake runs on the endpoint's thread)."""
    from robot_rl.transport import TransportConfig, connect_actor

    keys = None
    if cfg.keys is not None:
        from robot_rl.keys import ClientKeys

        keys = ClientKeys.from_dir(cfg.keys)
    audit = cfg.reward_audit if cfg.reward_audit is not None else Path("reward_audit") / actor_id
    env = make_actor_env(cfg.task, cfg.obs_mode, cfg.image_size, cfg.robot, cfg.intervene, cfg.seed,
                         reward=cfg.reward or "env", reward_gate_k=cfg.reward_gate_k, reward_audit=audit,
                         task_config=cfg.task_config,
                         faithful=cfg.faithful, allow_twin_box=cfg.allow_twin_box,
                         timing=timing_overrides(cfg.faithful, cfg.camera_latency_ms, cfg.action_delay_ms),
                         device_config=cfg.device_config)
    if cfg.operator_reset_after:
        env = with_operator_resets(env, cfg, actor_id)
    if cfg.faithful:
        print(f"actor {actor_id}: hardware-faithful env: rewards and successes sent to the learner come from "
              f"--reward {cfg.reward}, never from the task's true success", file=sys.stderr, flush=True)
    spec = env_spec_of(env, cfg.task)
    tcfg = TransportConfig(heartbeat_s=cfg.heartbeat, heartbeat_timeout_s=5 * cfg.heartbeat)
    try:
        endpoint = connect_actor(spec, actor_id, cfg.learner, tcfg, keys=keys, insecure=cfg.insecure)
    except BaseException:
        env.close()
        raise
    return env, endpoint


def with_operator_resets(env: Any, cfg: ActorRunConfig, actor_id: str) -> Any:
    """`env` (the actor's, its reward model outermost) asking a person for a scene reset after
    cfg.operator_reset_after failed episodes in a row (robot_rl.scene_resets); closes `env` on a
    ConfigError (e.g. Enter asked for without a terminal on a robot)."""
    backend = backend_of(env)
    try:
        ask = operator_prompt(backend, cfg.operator_reset_after, cfg.operator_reset_confirm,
                              cfg.operator_reset_pause_s,
                              log=lambda line: print(f"actor {actor_id}: {line}", file=sys.stderr, flush=True))
        how = "the twin teleports" if backend == "twin" else f"confirm: {resolve_confirm(cfg.operator_reset_confirm)}"
    except BaseException:
        env.close()
        raise
    k = cfg.operator_reset_after
    print(f"actor {actor_id}: a person puts the scene back after {k} episode{'' if k == 1 else 's'} in a row "
          f"without success ({how})", file=sys.stderr, flush=True)
    return OperatorSceneResets(env, cfg.operator_reset_after, ask)


def _act(cfg: ActorRunConfig, actor_id: str, actor: Actor, endpoint: Any, stop: threading.Event) -> None:
    """The actor's loop until `stop` or its budget, with a progress line on stderr every 10 s (unless quiet)."""
    last = time.monotonic()
    actor.start()

    def should_stop() -> bool:
        nonlocal last
        if not cfg.quiet and time.monotonic() - last >= 10.0:
            last = time.monotonic()
            s = actor.stats()
            sr = s["success_rate"]
            print(f"actor {actor_id}: steps {s['env_steps']} episodes {s['episodes']} success "
                  f"{'-' if sr is None else f'{sr:.2f}'} weights v{s['weights_version']} "
                  f"{endpoint.stats().state}{' (paused)' if s['paused'] else ''}", file=sys.stderr, flush=True)
        return stop.is_set()

    actor.run(should_stop, max_steps=cfg.max_steps, max_episodes=cfg.max_episodes)


def _finish(cfg: ActorRunConfig, actor_id: str, actor: Actor, env: Any, endpoint: Any,
            quiet_errors: bool = False) -> dict[str, Any]:
    """Flush (bounded by `flush_timeout`), close the endpoint and the env, write `stats_out`; the final stats.
    `quiet_errors`: the endpoint's failure is reported by the caller (not printed here)."""
    flushed = False
    try:
        flushed = actor.close(flush_s=0.0 if quiet_errors else cfg.flush_timeout)
    except Exception as err:  # the endpoint failed (e.g. spec mismatch): report below, still clean up
        if not quiet_errors:
            print(f"actor {actor_id}: {err}", file=sys.stderr)
    final = {**actor.stats(), "actor_id": actor_id, "flushed": flushed}
    if callable(getattr(env, "stats", None)):  # a reward model: episodes it ended, and without true success
        final["reward_model"] = env.stats()
    st = endpoint.stats()
    final.update(session=st.session, next_seq=st.next_seq, acked_upto=st.acked_upto, unacked=st.unacked_messages,
                 reconnects=st.reconnects, resent_messages=st.resent_messages, state=st.state)
    endpoint.close()
    env.close()
    if cfg.stats_out is not None:
        write_json(cfg.stats_out, final)
    return final
