"""`robot-rl eval --checkpoint DIR --episodes K`: deterministic episodes with a checkpoint's policy, one JSON line.

DIR is any run directory this project writes, or a part of one (robot_rl.checkpoint.find_checkpoint):

- a `robot-rl train` run (OUT/checkpoints/ckpt_*/meta.json holds the TrainConfig: task or gymnasium env id);
- a `robot-rl train-bc` run (the same, with the cloned policy alone in a 'policy' group);
- a `robot-rl learner` run, and so `robot-rl sim`'s OUT, which is the learner's run directory (meta.json holds the
  AgentConfig and the EnvSpec: the task preset, state or pixels, and the image size come from the spec);
- a checkpoints/ directory (its newest checkpoint) or one ckpt_* directory.

Anything else (a demo directory, a run without a checkpoint yet, a typo) is a one-line error saying what DIR is
and what to pass instead. The library is learners.training.evaluation.

Success is counted by the run's reward (`--reward`, else the train run's, else the task file's `[reward]`): a
classifier's success with its gate (`--reward-gate-k`), the twin's true success beside it (`true_success_rate`);
otherwise the env's own. The line says which (`success_source`). A learner or sim run records only its task's
name: `--task FILE` names the task file it trained on (its env values and its `[reward]`).

Usage::

    robot-rl eval --checkpoint runs/reach --episodes 20                      # a train run
    robot-rl eval --checkpoint runs/sim-twin-pick-cube --episodes 20         # a sim / learner run
    robot-rl eval --checkpoint runs/reach/checkpoints/ckpt_00003000          # one checkpoint
    robot-rl eval --checkpoint runs/sim-lab --task configs/lab.toml          # the file's values and [reward]
    robot-rl eval --checkpoint runs/pick --reward classifier:runs/cls --reward-gate-k 3
    robot-rl eval --checkpoint runs/pick --camera-latency-ms 100 --action-delay-ms 20   # late frames, a late arm

The twin's simulated timing (`--camera-latency-ms`, `--action-delay-ms`): by default the run's own (a train run's
config; a sim run's summary.json), so the evaluation sees what training saw; a flag evaluates the same policy with
other timing (0 turns it off; with one flag given the other is 0, or for a --faithful run its faithful default).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from learners.training.evaluation import evaluate_checkpoint
from robot_rl.timing import add_timing_flags


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="robot-rl eval", description=__doc__.split("\n\n")[0])
    p.add_argument("--checkpoint", required=True, type=Path,
                   help="run directory (train, learner or sim --out), its checkpoints/ or one ckpt_* directory")
    p.add_argument("--episodes", type=int, default=10)
    p.add_argument("--seed", type=int, default=2_000_000, help="env seed of the first episode (+1 per episode)")
    p.add_argument("--task", default=None,
                   help="the task file a learner or sim run trained on (its checkpoint records only the task's name)")
    p.add_argument("--reward", default=None,
                   help="count success by this reward: env, or classifier:DIR (its gated success; the twin's true "
                        "success beside it); default: the train run's, else the task file's [reward], else env")
    p.add_argument("--reward-gate-k", type=int, default=None, metavar="K",
                   help="a classifier's gate: K consecutive positive frames (default: the run's or the task file's "
                        "gate_k, else the card's)")
    add_timing_flags(p)
    return p


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    print(json.dumps(evaluate_checkpoint(args.checkpoint, args.episodes, seed=args.seed, reward=args.reward,
                                         reward_gate_k=args.reward_gate_k, task=args.task,
                                         camera_latency_ms=args.camera_latency_ms,
                                         action_delay_ms=args.action_delay_ms)))
    return 0
