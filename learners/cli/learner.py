"""`robot-rl learner`: the distributed learner process (learners.distributed.learner over a ZeroMQ endpoint).

Binds the transition/weights endpoint, prints ``learner: listening on tcp://HOST:PORT`` as its first stdout line,
loads demos into the demo buffer, and trains at a fixed update-to-data ratio from what actors send (see
learners.distributed.learner). Writes OUT/agent_config.json, OUT/metrics.jsonl, OUT/status.json, OUT/learning_curve.png,
OUT/tensorboard/, OUT/checkpoints/, OUT/inbox/. Stops on Ctrl-C / SIGTERM (final checkpoint) or after
--max-env-steps.

The agent: the agent preset (--agent) with this machine's defaults, then the task's recipe (learners.agents.recipes;
--no-recipe skips it), then the explicit flags (--hidden, --batch, ...), then `--set FIELD=VALUE` for any
AgentConfig field (repeatable; learners.agents.options, the same as `robot-rl train --set`). The resolved
AgentConfig is printed at start and saved as OUT/agent_config.json; a resumed run uses its checkpoint's.

Usage::

    robot-rl learner --task twin-pick-cube --bind tcp://127.0.0.1:5555 --out runs/pick --demos demos/pick \\
        --obs-mode state
    robot-rl learner --task twin-pick-cube --bind tcp://127.0.0.1:5555 --out runs/pick --resume
    robot-rl learner --task twin-pick-cube --out runs/pick3 --demos demos/pick --set n_step=3 --set bc_weight=1
    robot-rl actor --task twin-pick-cube --learner tcp://127.0.0.1:5555        # one or more, anywhere
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
import time
from pathlib import Path
from types import FrameType
from typing import Any

from learners.agents.config import BACKENDS, AgentConfig, drq_config, hil_serl_config, rlpd_state_config, sac_config
from learners.agents.device_defaults import compile_default, gpu_notice, settle
from learners.agents.options import add_set_option, announce_agent_config, compile_what, parse_set, resolve_agent_config
from learners.agents.recipes import recipe_for
from learners.distributed.learner import Learner, LearnerConfig, checkpoint_exists, set_torch_threads
from learners.training.demos import load_demo_episodes
from robot_rl.checkpoint import load_checkpoint
from robot_rl.errors import ConfigError
from robot_rl.gym_env import env_spec_of, make_task_env
from robot_rl.presets import PRESETS, get_preset
from robot_rl.specs import EnvSpec

AGENTS = {"rlpd": rlpd_state_config, "drq": drq_config, "hil-serl": hil_serl_config, "sac": sac_config}

# Defaults of the distributed learner on a small CPU machine: state RLPD (ensemble 10 / subset 2, LayerNorm) with
# [128, 128] MLPs at batch 128 (the paper's [256, 256] / 256: --hidden 256,256 --batch 256, ~4x slower per update
# on CPU), one critic update per update() call and one update per received transition (UTD 1). Measured on the
# shared 2-core machine: see the sim report (updates/s is what paces the actors).
STATE_DEFAULTS: dict[str, Any] = {"critic_updates_per_actor_update": 1, "hidden_dims": (128, 128), "batch_size": 128}
PIXEL_DEFAULTS: dict[str, Any] = {"encoder": "conv", "batch_size": 64, "critic_updates_per_actor_update": 1}


def _ints(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="robot-rl learner", description=__doc__.split("\n\n")[0])
    p.add_argument("--task", required=True, help=f"task preset ({', '.join(PRESETS)})")
    p.add_argument("--bind", default="tcp://127.0.0.1:5555", help="endpoint address (port 0: a free port)")
    p.add_argument("--out", required=True, type=Path, help="run directory (checkpoints, metrics, status)")
    p.add_argument("--demos", type=Path, default=None, help="episode directory loaded into the demo buffer")
    p.add_argument("--resume", action="store_true", help="continue the run in --out from its last checkpoint")
    p.add_argument("--obs-mode", default="state", choices=("state", "pixels"), help="observation mode")
    p.add_argument("--image-size", type=int, default=None, help="camera image size (pixels mode)")
    p.add_argument("--faithful", action="store_true",
                   help="the actors run hardware-faithful (no object observation: proprio + cameras only)")
    g = p.add_argument_group("agent")
    g.add_argument("--agent", default="rlpd", choices=sorted(AGENTS), help="agent preset (learners.agents.config)")
    g.add_argument("--hidden", type=_ints, default=None, help="hidden layer sizes, e.g. 256,256")
    g.add_argument("--ensemble", type=int, default=None, help="critic ensemble size")
    g.add_argument("--batch", type=int, default=None, help="minibatch size")
    g.add_argument("--critic-updates", type=int, default=None, help="critic updates per actor update")
    g.add_argument("--encoder", default=None, choices=("resnet10", "conv"), help="camera encoder (pixels)")
    g.add_argument("--encoder-weights", default=None, help="local ResNet-10 safetensors file (pixels)")
    add_set_option(g)
    g.add_argument("--no-recipe", action="store_true",
                   help="ignore the task's training recipe (learners.agents.recipes): plain agent defaults + flags")
    g.add_argument("--backend", default=None, choices=BACKENDS,
                   help="learner backend (AgentConfig.backend): torch (default) or jax (the jax extra)")
    g.add_argument("--device", default="cpu", help="torch device (cpu, cuda, auto)")
    g.add_argument("--seed", type=int, default=0, help="seed of the networks and samplers")
    s = p.add_argument_group("schedule")
    d = LearnerConfig()
    s.add_argument("--utd", type=float, default=None,
                   help="agent updates per received transition (each: --critic-updates critic updates); default: "
                        f"the task's recipe, else {d.updates_per_transition}")
    s.add_argument("--learning-starts", type=int, default=d.learning_starts, help="transitions before learning")
    s.add_argument("--max-ahead", type=int, default=d.max_ahead, help="transitions actors may run ahead")
    s.add_argument("--publish-every", type=int, default=d.publish_every, help="publish weights every N updates")
    s.add_argument("--checkpoint-every", type=int, default=d.checkpoint_every, help="checkpoint every N transitions")
    s.add_argument("--max-env-steps", type=int, default=0, help="stop after this many transitions (0: never)")
    s.add_argument("--capacity", type=int, default=d.capacity, help="online replay slots")
    s.add_argument("--log-every", type=float, default=d.log_every_s, help="seconds between metrics rows")
    s.add_argument("--no-tensorboard", action="store_true", help="do not write TensorBoard scalars")
    s.add_argument("--takeover-terminal", action=argparse.BooleanOptionalAction, default=d.takeover_terminal,
                   help="store the policy step before each human takeover as terminal (learners.replay.buffer)")
    n = p.add_argument_group("network")
    n.add_argument("--keys", default=None, help="CURVE key directory (robot_rl.keys) for non-loopback binds")
    n.add_argument("--insecure", action="store_true", help="allow a non-loopback bind without keys")
    n.add_argument("--heartbeat", type=float, default=1.0, help="heartbeat interval (s)")
    n.add_argument("--threads", type=int, default=1, help="torch threads (0: torch's default)")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    return p


def agent_config(args: argparse.Namespace) -> AgentConfig:
    """The AgentConfig from the CLI options: agent preset < this machine's defaults < the task's recipe < the
    explicit flags < --set (learners.agents.options)."""
    machine: dict[str, Any] = dict(PIXEL_DEFAULTS if args.obs_mode == "pixels" else STATE_DEFAULTS)
    if args.agent != "rlpd":
        machine = {}
    get_preset(args.task)  # UnknownTaskError first
    recipe = {} if args.no_recipe else recipe_for(args.task).overrides(args.obs_mode, faithful=args.faithful)
    overrides: dict[str, Any] = {}
    for flag, field in (("hidden", "hidden_dims"), ("ensemble", "ensemble_size"), ("batch", "batch_size"),
                        ("critic_updates", "critic_updates_per_actor_update"), ("encoder", "encoder"),
                        ("encoder_weights", "encoder_weights"), ("backend", "backend")):
        value = getattr(args, flag)
        if value is not None:
            overrides[field] = value
    if args.encoder_weights is not None and args.encoder is None:
        overrides["encoder"] = "resnet10"
    if args.ensemble is not None:
        base = AGENTS[args.agent]().ensemble_subsample
        overrides["ensemble_subsample"] = None if base is None else min(base, args.ensemble)
    overrides.update(device=args.device, seed=args.seed)
    machine.update(compile_default(args.device, args.obs_mode == "pixels", args.agent))
    set_fields = parse_set(args.set)
    return settle(resolve_agent_config(AGENTS[args.agent], machine, recipe, overrides, set_fields), machine,
                  explicit=(recipe, overrides, set_fields))


def updates_per_transition(args: argparse.Namespace) -> float:
    """--utd, else the task's recipe (also when `robot-rl sim` passes no --utd), else LearnerConfig's default."""
    if args.utd is not None:
        return float(args.utd)
    if args.no_recipe:
        return LearnerConfig().updates_per_transition
    return float(recipe_for(args.task).updates_per_step)


def env_spec(task: str, obs_mode: str, image_size: int | None, faithful: bool = False) -> EnvSpec:
    """The task's EnvSpec, read from the env itself (made once through its preset, then closed); `faithful`: the
    hardware-faithful observation (no object state)."""
    extra = {"object_obs": False} if faithful else {}
    env = make_task_env(task, obs_mode=obs_mode, image_size=image_size, **extra)
    try:
        return env_spec_of(env, task)
    finally:
        env.close()


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(levelname)s: %(message)s")
    set_torch_threads(args.threads)
    existing = checkpoint_exists(args.out)
    if existing is not None and not args.resume:
        raise ConfigError(f"--out {args.out} already holds a run (checkpoint {existing.name}); pass --resume to "
                          f"continue it, or choose another --out")
    cfg = agent_config(args)  # a bad --set fails here, before the env is made
    spec = env_spec(args.task, args.obs_mode, args.image_size, faithful=args.faithful)
    if args.resume and existing is not None:  # resume with the run's own agent config
        _, meta = load_checkpoint(existing)
        if isinstance(meta.get("agent_config"), dict):
            cfg = AgentConfig.from_dict(meta["agent_config"])
    lcfg = LearnerConfig(updates_per_transition=updates_per_transition(args), learning_starts=args.learning_starts,
                         max_ahead=args.max_ahead, publish_every=args.publish_every,
                         checkpoint_every=args.checkpoint_every, max_env_steps=args.max_env_steps,
                         capacity=args.capacity, log_every_s=args.log_every, tensorboard=not args.no_tensorboard,
                         seed=args.seed, takeover_terminal=args.takeover_terminal)
    demos = load_demo_episodes(args.demos, spec) if args.demos is not None and not (args.resume and existing) else []
    from robot_rl.transport import TransportConfig, bind_learner

    keys = None
    if args.keys is not None:
        from robot_rl.keys import ServerKeys

        keys = ServerKeys.from_dir(args.keys)
    tcfg = TransportConfig(heartbeat_s=args.heartbeat, heartbeat_timeout_s=5 * args.heartbeat)
    endpoint = bind_learner(spec, args.bind, tcfg, keys=keys, insecure=args.insecure)
    stop = threading.Event()

    def _on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    prev_term = signal.signal(signal.SIGTERM, _on_signal)
    prev_int = signal.signal(signal.SIGINT, _on_signal)
    learner: Learner | None = None
    try:
        learner = Learner(spec, cfg, lcfg, endpoint, args.out, demos=demos, resume=args.resume)
        print(f"learner: listening on {endpoint.address} (task {args.task}, {args.obs_mode}, pid {os.getpid()})",
              flush=True)  # the first stdout line: robot-rl sim and the tests read the address from it
        announce_agent_config(learner.agent_cfg, args.out, prefix="learner:", log=lambda m: print(m, flush=True))
        if learner.agent_cfg.compile and learner.agent_cfg.backend == "torch":
            print("learner: torch.compile on (--set compile=false turns it off): the first update compiles the losses, "
                  "~20-70 s on a CPU, while actors wait for weights (they may reconnect meanwhile; nothing is lost)",
                  flush=True)
        cuda_notice = gpu_notice(learner.agent_cfg, bool(spec.cameras))
        if cuda_notice:
            print(f"learner: {cuda_notice}", flush=True)
        if learner.resumed_from is not None:
            print(f"learner: resumed from {learner.resumed_from} at env_step {learner.received} (updates "
                  f"{learner.updates}, +{learner.replayed_chunks} inbox chunks)", flush=True)
        elif demos:
            print(f"learner: {len(demos)} demo episode(s), {learner.demo_transitions} transitions in the demo buffer",
                  flush=True)
        last = time.monotonic()
        compile_reported = False
        while not learner.done and not stop.is_set():
            learner.step(max_wait_s=0.05)
            if not compile_reported and learner.first_update_s is not None:
                compile_reported = True
                print(f"learner: first update {learner.first_update_s:.1f} s ({compile_what(learner.agent)})",
                      flush=True)
            if not args.quiet and time.monotonic() - last >= 10.0:
                last = time.monotonic()
                st = learner.status()
                sr = st["success_rate"]
                print(f"learner: env_step {st['env_step']} episodes {st['episodes']} success "
                      f"{'-' if sr is None else f'{sr:.2f}'} updates {st['updates']} ({st['updates_per_s']:.1f}/s) "
                      f"weights v{st['weights_version']} buffers {st['online_size']}+{st['demo_size']} actors "
                      f"{sum(1 for a in st['actors'].values() if a['alive'])}", file=sys.stderr, flush=True)
    finally:  # handlers stay until the final checkpoint is written: a second signal must not cut it short
        try:
            if learner is not None:
                learner.close()
        finally:
            endpoint.close()
            signal.signal(signal.SIGTERM, prev_term)
            signal.signal(signal.SIGINT, prev_int)
    if learner is not None:
        print(f"learner: stopped at env_step {learner.received}, updates {learner.updates}, weights "
              f"v{learner.weights_version}; {'done' if learner.done else 'interrupted'}", flush=True)
    return 0
