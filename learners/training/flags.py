"""The command lines of `robot-rl train` and `robot-rl train-bc`: their argument parsers and the configs they
fill (TrainConfig, BCConfig). The command modules (learners.cli.train, learners.cli.train_bc) parse with these and
call one library function; tests and benchmarks build the same configs from the same flags here.

`robot-rl train` has one flag per TrainConfig field (`--max-env-steps` for max_env_steps, booleans as switches),
plus `--out`, `--resume`, `--demos DIR [DIR ...]` (the first directory into `demos`, the rest into `extra_demos`)
and the repeatable `--set FIELD=VALUE` (learners.agents.options).

Usage::

    args = build_train_parser().parse_args(["--task", "twin-reach", "--obs-mode", "state", "--out", "runs/reach"])
    cfg = train_config(args)                                     # TrainConfig; args.out, args.resume
    args = build_bc_parser().parse_args([...]); tcfg, bcfg = bc_configs(args)
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import Any

from learners.agents.config import BACKENDS
from learners.agents.options import add_set_option
from learners.training.bc import BCConfig
from learners.training.config import ALGOS, DEFAULT_WARMUP_STEPS, TrainConfig
from robot_rl.operators import INTERVENE_CHOICES
from robot_rl.presets import PRESETS, task_obs_mode, task_reward

FLAG_HELP = {
    "demos": "episode directories of the demo buffer: demonstrations first (--action-scale auto reads the first), "
             "then e.g. recorded rollouts, failures included (rows keep their episodes' intervention flags)",
    "demo_ratio": "fraction of each batch from the demo buffer while it holds data (default: 0.5, RLPD)",
    "offline_updates": "offline phase: N agent updates on the demo buffer alone before any env step, then an "
                       "evaluation at env step 0 and a checkpoint; with --max-env-steps 0 the run ends there "
                       "(default: 0)",
    "init_from": "warm start (WSRL): load the agent of this run directory or checkpoint (actor, critics, targets, "
                 "temperature, Adam moments; not its replay, update counter or RNG states), evaluate it at env "
                 "step 0, collect --warmup-steps steps with it, then fine-tune on online data only (plus --demos "
                 "when given)",
    "encoder": "camera encoder: conv (small, trained from scratch; the default), resnet10 or resnet18 (with "
               "--encoder-weights the architecture the file names is the default)",
    "algo": "rlpd (RLPD; SERL's DrQ agent with cameras), drq, sac or hil-serl (default: rlpd)",
    "camera_latency_ms": "twin presets: the camera frames the policy sees were rendered this long ago (ms; default: "
                         "100 with --faithful, else 0; every env of the run, evaluation too)",
    "action_delay_ms": "twin presets: the arm's target changes this long after the action (ms; default: 20 with "
                       "--faithful, else 0)",
    "credit_first_positive": "with --reward classifier:DIR: credit its success to the step whose frame first "
                             "showed it (the gate's k - 1 frames and the camera latency earlier) and store nothing "
                             "after it, as if the episode had ended there",
    "align_frames": "learn from frames on time: each stored step gets the camera frames of its own instant, which "
                    "arrive the camera latency later (the policy still acts on the late ones; the twin's simulated "
                    "latency; demos shift by the latency their files record)",
    "intervene": "interventions in the training env (HIL-SERL): the twin's scripted operator, or a person at a "
                 "teleop device (spacemouse, gamepad, keyboard; the bindings of record-demos); its action replaces "
                 "the policy's and goes to both buffers; --reward human takes its success key",
    "device_config": "with a hardware --intervene: a JSON object of the device's config fields (deadzone, scale, "
                     "path, index, layout, ...)",
    "operator_reset_after": "after K training episodes in a row without success, a person puts the scene back "
                            "(the twin: a teleport stands in; default 0: never; for robot resets that leave the "
                            "scene where the policy fails, --faithful)",
    "threads": "torch CPU threads (default 0: one per core of this machine; 1 when several runs share it)",
    "progress_every_s": "seconds between progress lines (env steps/s, updates/s, training success, ETA) between "
                        "evaluations (default: 30; 0: none)",
    "reward": "env (the env's own), classifier:DIR (a trained reward classifier, gated) or human (the teleop "
              "success key) (default: the task file's [reward], else env)",
    "reward_gate_k": "a classifier reward's gate: K consecutive positive frames (default: the task file's "
                     "reward.gate_k, else the classifier card's)",
    "warmup_steps": f"with --init-from: env steps collected with the loaded policy before the first update (no "
                    f"random actions; replaces --learning-starts; default: {DEFAULT_WARMUP_STEPS})",
}


class _DemoDirs(argparse.Action):
    """`--demos DIR [DIR ...]`: the first directory into `demos`, the others into `extra_demos` (TrainConfig)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        dirs = [str(v) for v in values]
        namespace.demos = dirs[0]
        namespace.extra_demos = tuple(dirs[1:])


def build_train_parser(description: str | None = None) -> argparse.ArgumentParser:
    """`robot-rl train`'s parser (one flag per TrainConfig field; see the module docstring); `description`: the
    command's one-paragraph summary for --help."""
    p = argparse.ArgumentParser(prog="robot-rl train", description=description)
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--task", help=f"task preset ({', '.join(PRESETS)}) or task file (.toml)")
    src.add_argument("--env-id", help="any gymnasium env id (Box action; Box or Dict observation)")
    p.add_argument("--env-module", help="module to import first (registers --env-id)")
    p.add_argument("--out", required=True, type=Path, help="run directory")
    p.add_argument("--resume", action="store_true", help="continue the run in --out from its last checkpoint")
    p.add_argument("--demos", nargs="+", metavar="DIR", default=None, action=_DemoDirs, help=FLAG_HELP["demos"])
    p.set_defaults(extra_demos=(), action_low=(), action_high=())  # filled from --action-scale, not flags
    add_set_option(p, dest="agent_set")
    for f in dataclasses.fields(TrainConfig):
        if f.name in ("task", "env_id", "env_module", "agent_set", "action_low", "action_high", "demos",
                      "extra_demos", "source_demos"):  # (source_demos: set by train from an --init-from source)
            continue
        flag = "--" + f.name.replace("_", "-")
        default = f.default
        kind = {"max_env_steps": int, "start_steps": int, "learning_starts": int, "utd": int, "batch_size": int,
                "hidden": int, "eval_every": int, "eval_episodes": int, "checkpoint_every": int,
                "replay_capacity": int, "threads": int, "progress_every_s": float, "seed": int, "image_size": int,
                "ensemble": int,
                "state_scale": float, "discount": float, "bc_weight": float, "updates_per_step": int,
                "max_minutes": float, "demo_ratio": float, "offline_updates": int, "warmup_steps": int,
                "camera_latency_ms": float, "action_delay_ms": float, "reward_gate_k": int,
                "operator_reset_after": int,
                }.get(f.name, str)
        choices = {"algo": ALGOS, "obs_mode": ("state", "pixels"), "encoder": ("conv", "resnet10", "resnet18"),
                   "backend": BACKENDS, "intervene": INTERVENE_CHOICES}.get(f.name)
        if default is False:
            p.add_argument(flag, action="store_true", help="(flag)")
            continue
        if f.name == "reward":  # None: the task file's (train_config)
            default = None
        metavar = {"offline_updates": "N", "init_from": "RUN_DIR_OR_CHECKPOINT", "warmup_steps": "W",
                   "device_config": "FILE", "operator_reset_after": "K"}.get(f.name)
        p.add_argument(flag, type=kind, default=default, choices=choices, metavar=metavar,
                       help=FLAG_HELP.get(f.name, f"(default: {default})"))
    return p



def train_config(args: argparse.Namespace) -> TrainConfig:
    """The TrainConfig of parsed `robot-rl train` arguments (validated: a bad --set fails here)."""
    values = {f.name: getattr(args, f.name) for f in dataclasses.fields(TrainConfig) if hasattr(args, f.name)}
    file_reward, file_gate_k = task_reward(values.get("task"))  # the task file's [reward]; explicit flags win
    if values.get("reward") is None:
        values["reward"] = file_reward or "env"
    if values.get("reward_gate_k") is None:
        values["reward_gate_k"] = file_gate_k
    if values.get("obs_mode") is None and values.get("task"):  # the task file's [observation] mode; the flag wins
        values["obs_mode"] = task_obs_mode(values["task"], "") or None
    return TrainConfig(**{**values, "agent_set": tuple(args.agent_set)})


def build_bc_parser(description: str | None = None) -> argparse.ArgumentParser:
    """`robot-rl train-bc`'s parser: the env and agent options of `robot-rl train` it shares, and one flag per
    BCConfig field; `description`: the command's summary for --help."""
    p = argparse.ArgumentParser(prog="robot-rl train-bc", description=description)
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--task", help=f"task preset ({', '.join(PRESETS)}) or task file (.toml)")
    src.add_argument("--env-id", help="any gymnasium env id (Box action; Box or Dict observation)")
    p.add_argument("--env-module", help="module to import first (registers --env-id)")
    p.add_argument("--obs-mode", choices=("state", "pixels"), help="twin presets: observation mode")
    p.add_argument("--image-size", type=int, help="twin presets in pixels mode: camera image size")
    p.add_argument("--demos", required=True, help="directory of demo episodes")
    p.add_argument("--out", required=True, type=Path, help="run directory")
    p.add_argument("--no-recipe", action="store_true",
                   help="ignore the task's training recipe (the task defaults stay)")
    p.add_argument("--success-key", default="success", help="info key the env reports success under")
    p.add_argument("--action-scale", default=None, help="'auto' or S: narrow the action bounds (as on train)")
    p.add_argument("--obs-norm", action="store_true", help="normalise the state by the demos' mean and std")
    p.add_argument("--device", default="auto", help="auto, cpu, cuda[:N]")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    for f in dataclasses.fields(BCConfig):
        p.add_argument("--" + f.name.replace("_", "-"), type=type(f.default), default=f.default,
                       help=f"(default: {f.default})")
    add_set_option(p, dest="agent_set")
    return p


def bc_configs(args: argparse.Namespace) -> tuple[TrainConfig, BCConfig]:
    """(the env and agent options as a TrainConfig, the BCConfig) of parsed `robot-rl train-bc` arguments."""
    bcfg = BCConfig(**{f.name: getattr(args, f.name) for f in dataclasses.fields(BCConfig)})
    tcfg = TrainConfig(task=args.task, env_id=args.env_id, env_module=args.env_module, obs_mode=args.obs_mode,
                       image_size=args.image_size, demos=args.demos, no_recipe=args.no_recipe,
                       success_key=args.success_key, action_scale=args.action_scale, obs_norm=args.obs_norm,
                       device=args.device, threads=args.threads, seed=args.seed, agent_set=tuple(args.agent_set))
    return tcfg, bcfg
