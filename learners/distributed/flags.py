"""The command line of `robot-rl learner`: its argument parser and the LearnerProcessConfig it fills. The command
module (learners.cli.learner) parses with these and calls learners.distributed.process.run_learner_process; tests
read `robot-rl sim`'s learner command lines with the same parser.

The agent options (--agent, --hidden, --ensemble, --batch, --critic-updates, --encoder, --encoder-weights,
--backend, --device, --seed, --no-recipe, --set) fill learners.agents.options.AgentFlags, the one resolver's input,
as `robot-rl train`'s do (learners.training.flags): the same options give the same AgentConfig on both.

Usage::

    args = build_learner_parser().parse_args(["--task", "twin-reach", "--out", "runs/reach"])
    cfg = learner_process_config(args)           # LearnerProcessConfig
    agent_config(args)                           # the AgentConfig of a fresh run (resolve_agent)
"""

from __future__ import annotations

import argparse
from pathlib import Path

from learners.agents.config import BACKENDS, ENCODERS, AgentConfig
from learners.agents.options import ALGOS, AgentFlags, add_set_option, resolve_agent, updates_per_step
from learners.distributed.learner import LearnerConfig
from learners.distributed.process import LearnerProcessConfig
from robot_rl.errors import ConfigError
from robot_rl.presets import PRESETS, ObsModeFromTaskParser, get_preset


def _ints(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None


def build_learner_parser(description: str | None = None) -> argparse.ArgumentParser:
    """`robot-rl learner`'s parser; `description`: the command's summary for --help."""
    p = ObsModeFromTaskParser(prog="robot-rl learner", description=description)
    p.add_argument("--task", required=True, help=f"task preset ({', '.join(PRESETS)}) or task file (.toml)")
    p.add_argument("--bind", default="tcp://127.0.0.1:5555", help="endpoint address (port 0: a free port)")
    p.add_argument("--out", required=True, type=Path, help="run directory (checkpoints, metrics, status)")
    p.add_argument("--demos", type=Path, default=None, help="episode directory loaded into the demo buffer")
    p.add_argument("--resume", action="store_true", help="continue the run in --out from its last checkpoint")
    p.add_argument("--obs-mode", default=None, choices=("state", "pixels"),
                   help="observation mode (default: the task file's [observation] mode, else state)")
    p.add_argument("--image-size", type=int, default=None, help="camera image size (pixels mode)")
    p.add_argument("--faithful", action="store_true",
                   help="the actors run hardware-faithful (no object observation: proprio + cameras only)")
    g = p.add_argument_group("agent")
    g.add_argument("--agent", default="rlpd", choices=sorted(ALGOS),
                   help="agent preset (learners.agents.options.ALGORITHMS; rlpd: SERL's DrQ agent with cameras)")
    g.add_argument("--hidden", type=_ints, default=None, help="hidden layer sizes, e.g. 256,256")
    g.add_argument("--ensemble", type=int, default=None, help="critic ensemble size")
    g.add_argument("--batch", type=int, default=None, help="minibatch size")
    g.add_argument("--critic-updates", type=int, default=None, help="critic updates per actor update")
    g.add_argument("--encoder", default=None, choices=ENCODERS,
                   help="camera encoder (pixels; default conv, resnet10 with --encoder-weights)")
    g.add_argument("--encoder-weights", default=None, help="local ResNet-10 safetensors file (pixels)")
    add_set_option(g)
    g.add_argument("--no-recipe", action="store_true",
                   help="ignore the task's training recipe (learners.agents.recipes): the task defaults + flags")
    g.add_argument("--backend", default=None, choices=BACKENDS,
                   help="learner backend (AgentConfig.backend): torch (default) or jax (the jax extra)")
    g.add_argument("--device", default="auto", help="torch device (auto: cuda when available; cpu, cuda[:N])")
    g.add_argument("--seed", type=int, default=0, help="seed of the networks and samplers")
    s = p.add_argument_group("schedule")
    d = LearnerConfig()
    s.add_argument("--utd", type=float, default=None,
                   help="agent updates per received transition (each: --critic-updates critic updates); default: "
                        f"the task's recipe, else {d.updates_per_transition}")
    s.add_argument("--learning-starts", type=int, default=d.learning_starts, help="transitions before learning")
    s.add_argument("--offline-updates", type=int, default=d.offline_updates,
                   help="before serving: this many updates on the demos alone, published as the first weights (a "
                        "fresh run with --demos; e.g. 1000 on hardware, so the arm's first policy is trained)")
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
    p.add_argument("--prepare-only", action="store_true",
                   help="pretrain the camera encoder on the demos if the agent's config asks, then exit (robot-rl "
                        "sim runs this before the learner)")
    return p


def learner_agent_flags(args: argparse.Namespace) -> AgentFlags:
    """The agent options of parsed `robot-rl learner` arguments (validated: a bad --set fails here)."""
    return AgentFlags(algo=args.agent, task=args.task, faithful=args.faithful, no_recipe=args.no_recipe,
                      demos=args.demos is not None, device=args.device, seed=args.seed, hidden_dims=args.hidden,
                      ensemble_size=args.ensemble,
                      batch_size=args.batch, critic_updates=args.critic_updates, encoder=args.encoder,
                      encoder_weights=args.encoder_weights, backend=args.backend, set=tuple(args.set))


def agent_config(args: argparse.Namespace) -> AgentConfig:
    """The AgentConfig a fresh learner run of parsed arguments trains with (learners.agents.options.resolve_agent;
    a resumed run keeps its checkpoint's)."""
    get_preset(args.task)  # UnknownTaskError first
    return resolve_agent(learner_agent_flags(args), has_cameras=args.obs_mode == "pixels")


def updates_per_transition(args: argparse.Namespace) -> float:
    """--utd, else the task's recipe (also when `robot-rl sim` passes no --utd), else the task defaults' (state),
    else 1."""
    if args.utd is not None:
        return float(args.utd)
    return float(updates_per_step(args.task, args.no_recipe, has_cameras=args.obs_mode == "pixels",
                                  demos=args.demos is not None))


def learner_process_config(args: argparse.Namespace) -> LearnerProcessConfig:
    """The LearnerProcessConfig of parsed `robot-rl learner` arguments (an unknown task or a bad --set fails
    here, before anything is built)."""
    get_preset(args.task)  # UnknownTaskError first
    if args.offline_updates and args.demos is None:
        raise ConfigError("--offline-updates needs --demos DIR: the offline phase trains on the demos alone")
    schedule = LearnerConfig(updates_per_transition=updates_per_transition(args), learning_starts=args.learning_starts,
                             max_ahead=args.max_ahead, publish_every=args.publish_every,
                             checkpoint_every=args.checkpoint_every, max_env_steps=args.max_env_steps,
                             capacity=args.capacity, log_every_s=args.log_every, tensorboard=not args.no_tensorboard,
                             seed=args.seed, takeover_terminal=args.takeover_terminal,
                             offline_updates=args.offline_updates)
    return LearnerProcessConfig(task=args.task, out=args.out, agent=learner_agent_flags(args), schedule=schedule,
                                bind=args.bind, demos=args.demos, resume=args.resume, obs_mode=args.obs_mode,
                                image_size=args.image_size, faithful=args.faithful, keys=args.keys,
                                insecure=args.insecure, heartbeat_s=args.heartbeat, threads=args.threads,
                                quiet=args.quiet, prepare_only=args.prepare_only)
