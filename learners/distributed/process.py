"""`robot-rl learner`'s library: one learner process over a ZeroMQ endpoint, from a LearnerProcessConfig to its
exit (learners.distributed.learner.Learner does the learning).

`run_learner_process(cfg)` reads as its phases: check the run directory (learners.distributed.learner
.check_learner_run_dir over robot_rl.run_dir), resolve the agent (learners.agents.options.resolve_agent; a resumed
run keeps its checkpoint's), read the task's EnvSpec from its env (`task_spec`), load the demos
(learners.training.demos.load_demo_episodes), bind the endpoint (`bind_endpoint`), then `serve` (the Learner's
`step` loop until done or SIGINT / SIGTERM, progress on stderr) and close (final checkpoint).

Prints ``learner: listening on tcp://HOST:PORT`` as its first stdout line (`robot-rl sim` and the tests read the
address from it), then the agent config (saved as OUT/agent_config.json) and what it starts from.

Usage::

    cfg = learner_process_config(build_learner_parser().parse_args(argv))     # learners.distributed.flags
    run_learner_process(cfg)                                                  # returns 0 when it stopped
"""

from __future__ import annotations

import dataclasses
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

from learners.agents.config import AgentConfig
from learners.agents.device_defaults import gpu_notice, notice
from learners.agents.options import (
    AgentFlags,
    announce_agent_config,
    compile_what,
    machine_layer,
    resolve_agent,
    state_select_origin,
)
from learners.distributed.learner import Learner, LearnerConfig, check_learner_run_dir, set_torch_threads
from learners.training.demos import load_demo_episodes
from learners.training.pretrain_encoder import with_run_encoder
from robot_rl.checkpoint import load_checkpoint
from robot_rl.config import Config, require
from robot_rl.gym_env import env_spec_of, make_task_env
from robot_rl.specs import EnvSpec

PROGRESS_EVERY_S = 10.0
"""Seconds between the progress lines on stderr (unless --quiet)."""


@dataclasses.dataclass(frozen=True)
class LearnerProcessConfig(Config):
    """One `robot-rl learner` process (what the command parses into)."""

    task: str
    """The task preset (its env gives the EnvSpec; its recipe the agent's defaults)."""
    out: Path
    """The run directory (checkpoints, metrics, status, inbox)."""
    agent: AgentFlags
    """The agent options (learners.agents.options.resolve_agent)."""
    schedule: LearnerConfig
    """The learner's schedule, buffers and outputs."""
    bind: str = "tcp://127.0.0.1:5555"
    """Endpoint address (port 0: a free port)."""
    demos: Path | None = None
    """Episode directory loaded into the demo buffer (a fresh run's)."""
    resume: bool = False
    """Continue the run in `out` (from its last checkpoint, else from its demos and inbox)."""
    obs_mode: str = "state"
    """state or pixels."""
    image_size: int | None = None
    """Camera image size (pixels)."""
    faithful: bool = False
    """The actors run hardware-faithful: no object observation."""
    keys: str | None = None
    """CURVE key directory (robot_rl.keys) for non-loopback binds."""
    insecure: bool = False
    """Allow a non-loopback bind without keys."""
    heartbeat_s: float = 1.0
    """Heartbeat interval in seconds (the timeout is 5 of them)."""
    threads: int = 1
    """torch threads (0: torch's default)."""
    quiet: bool = False
    """No progress lines on stderr."""
    prepare_only: bool = False
    """Resolve the agent, pretrain its camera encoder on the demos when its config asks (OUT/encoder.safetensors,
    learners.training.pretrain_encoder.with_run_encoder), and exit without serving: `robot-rl sim` runs this first,
    so the learner it then starts (which reuses the file) is up within the start timeout."""

    def validate(self) -> None:
        require(self.obs_mode in ("state", "pixels"), "obs_mode", self.obs_mode, "must be state or pixels")
        require(self.heartbeat_s > 0, "heartbeat_s", self.heartbeat_s, "must be > 0")

    @property
    def has_cameras(self) -> bool:
        return self.obs_mode == "pixels"


def task_spec(task: str, obs_mode: str, image_size: int | None, faithful: bool = False) -> EnvSpec:
    """The task's EnvSpec, read from the env itself (made once through its preset, then closed); `faithful`: the
    hardware-faithful observation (no object state)."""
    extra = {"object_obs": False} if faithful else {}
    env = make_task_env(task, obs_mode=obs_mode, image_size=image_size, **extra)
    try:
        return env_spec_of(env, task)
    finally:
        env.close()


def resumed_agent_config(checkpoint: Path, fallback: AgentConfig) -> AgentConfig:
    """The AgentConfig a resumed run trained with (its checkpoint's), whatever the flags say now."""
    _, meta = load_checkpoint(checkpoint)
    saved = meta.get("agent_config")
    return AgentConfig.from_dict(saved) if isinstance(saved, dict) else fallback


def bind_endpoint(cfg: LearnerProcessConfig, spec: EnvSpec) -> Any:
    """The learner's transport endpoint (robot_rl.transport over ZeroMQ; CURVE keys from `cfg.keys`)."""
    from robot_rl.transport import TransportConfig, bind_learner

    keys = None
    if cfg.keys is not None:
        from robot_rl.keys import ServerKeys

        keys = ServerKeys.from_dir(cfg.keys)
    tcfg = TransportConfig(heartbeat_s=cfg.heartbeat_s, heartbeat_timeout_s=5 * cfg.heartbeat_s)
    return bind_learner(spec, cfg.bind, tcfg, keys=keys, insecure=cfg.insecure)


def say(message: str) -> None:
    """One line on stdout, flushed (robot-rl sim reads the learner's stdout as it comes)."""
    print(message, flush=True)


def announce(learner: Learner, cfg: LearnerProcessConfig, address: str, spec: EnvSpec, demos: int) -> None:
    """The start-up lines: the address (first), the agent config (saved), compile notes, the CPU or GPU defaults in
    effect, what it starts from."""
    say(f"learner: listening on {address} (task {cfg.task}, {cfg.obs_mode}, pid {os.getpid()})")
    announce_agent_config(learner.agent_cfg, cfg.out, prefix="learner:", log=say,
                          origin=state_select_origin(cfg.agent, cfg.has_cameras))
    if learner.agent_cfg.compile and learner.agent_cfg.backend == "torch":
        say("learner: torch.compile on (--set compile=false turns it off): the first update compiles the losses, "
            "~20-70 s on a CPU, while actors wait for weights (they may reconnect meanwhile; nothing is lost)")
    layer = {k: v for k, v in machine_layer(cfg.agent, cfg.has_cameras).items() if k != "compile"}  # said above
    for line in (notice(learner.agent_cfg, layer),
                 gpu_notice(learner.agent_cfg, bool(spec.cameras))):
        if line:
            say(f"learner: {line}")
    if learner.resumed_from is not None:
        say(f"learner: resumed from {learner.resumed_from} at env_step {learner.received} (updates "
            f"{learner.updates}, +{learner.replayed_chunks} inbox chunks)")
    elif demos:
        say(f"learner: {demos} demo episode(s), {learner.demo_transitions} transitions in the demo buffer")


def progress_line(learner: Learner) -> str:
    """One progress line from the learner's status."""
    st = learner.status()
    sr = st["success_rate"]
    alive = sum(1 for a in st["actors"].values() if a["alive"])
    return (f"learner: env_step {st['env_step']} episodes {st['episodes']} success "
            f"{'-' if sr is None else f'{sr:.2f}'} updates {st['updates']} ({st['updates_per_s']:.1f}/s) weights "
            f"v{st['weights_version']} buffers {st['online_size']}+{st['demo_size']} actors {alive}")


def serve(learner: Learner, should_stop: Callable[[], bool], quiet: bool = False) -> None:
    """`learner.step` until it is done or `should_stop()`; the first update's time once, progress on stderr."""
    last = time.monotonic()
    compile_reported = False
    while not learner.done and not should_stop():
        learner.step(max_wait_s=0.05)
        if not compile_reported and learner.first_update_s is not None:
            compile_reported = True
            say(f"learner: first update {learner.first_update_s:.1f} s ({compile_what(learner.agent)})")
        if not quiet and time.monotonic() - last >= PROGRESS_EVERY_S:
            last = time.monotonic()
            print(progress_line(learner), file=sys.stderr, flush=True)


def run_learner_process(cfg: LearnerProcessConfig) -> int:
    """Run one learner process (module docstring); 0 once it stopped (done, or interrupted with its final
    checkpoint written)."""
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(levelname)s: %(message)s")
    set_torch_threads(cfg.threads)
    existing = check_learner_run_dir(cfg.out, cfg.resume)
    agent_cfg = resolve_agent(cfg.agent, cfg.has_cameras)  # a bad --set fails here, before the env is made
    spec = task_spec(cfg.task, cfg.obs_mode, cfg.image_size, faithful=cfg.faithful)
    if cfg.resume and existing is not None:  # resume with the run's own agent config
        agent_cfg = resumed_agent_config(existing, agent_cfg)
    demos = load_demo_episodes(cfg.demos, spec) if cfg.demos is not None and existing is None else []
    agent_cfg = with_run_encoder(agent_cfg, [cfg.demos] if cfg.demos is not None else [], cfg.out,
                                 log=lambda s: say(f"learner: {s}"))  # pixels with demos: pretrained on them
    if cfg.prepare_only:
        say(f"learner: prepared (encoder: {agent_cfg.encoder_weights or agent_cfg.encoder})")
        return 0
    endpoint = bind_endpoint(cfg, spec)
    stop = threading.Event()

    def _on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    prev_term = signal.signal(signal.SIGTERM, _on_signal)
    prev_int = signal.signal(signal.SIGINT, _on_signal)
    learner: Learner | None = None
    try:
        learner = Learner(spec, agent_cfg, cfg.schedule, endpoint, cfg.out, demos=demos, resume=cfg.resume)
        announce(learner, cfg, endpoint.address, spec, len(demos))
        serve(learner, stop.is_set, quiet=cfg.quiet)
    finally:  # handlers stay until the final checkpoint is written: a second signal must not cut it short
        try:
            if learner is not None:
                learner.close()
        finally:
            endpoint.close()
            signal.signal(signal.SIGTERM, prev_term)
            signal.signal(signal.SIGINT, prev_int)
    if learner is not None:
        say(f"learner: stopped at env_step {learner.received}, updates {learner.updates}, weights "
            f"v{learner.weights_version}; {'done' if learner.done else 'interrupted'}")
    return 0
