"""`robot-rl train-bc`: behaviour cloning on demo episodes, evaluated in the env, so a user sees what the demos
alone give before any RL; the result is also a base policy for residual RL (AgentConfig.residual_base).

The policy is the agent's own (learners.agents.policy: encoder + tanh-Gaussian actor), built from the AgentConfig a
`robot-rl train` run of the same task would use (the task's recipe: state selection and scale, image encoder;
`--set FIELD=VALUE` as on train), trained to put its mode tanh(mean) on the demo actions (mean squared error, in the
agent's [-1, 1]; demo actions are stored in env units and converted with the env's action bounds). Episodes are
split into training and held-out episodes (`--holdout`), whose loss is reported beside the training loss; the
deterministic policy is evaluated in the env every `--eval-every` steps and at the end.

Outputs in `--out DIR`: `config.json`, `agent_config.json`, `metrics.jsonl` (step, train_loss, holdout_loss,
success_rate, return), `learning_curve.png`, checkpoints in `checkpoints/` (numpy + JSON, no pickle; group `policy`:
the policy's weights; meta: agent_config, spec, config), which `robot-rl eval --checkpoint DIR` evaluates and
`robot-rl train --set residual_base=DIR` uses as a frozen base, and the final policy as `policy.safetensors` with
`policy.json` (agent_config, spec) beside it (also a residual base: `--set residual_base=DIR/policy.safetensors`).
With `--obs-norm` the state is normalised by the training demos' per-element mean and std (kept in the weights).
The library is learners.training.bc (flags: learners.training.flags).

Usage::

    robot-rl record-demos --task twin-pick-cube --episodes 20 --out demos/pick --obs-mode state
    robot-rl train-bc --task twin-pick-cube --obs-mode state --demos demos/pick --out runs/bc_pick
    robot-rl train --task twin-pick-cube --obs-mode state --demos demos/pick --out runs/res_pick \\
        --set residual_base=runs/bc_pick
"""

from __future__ import annotations

import argparse
import json

from learners.training.bc import train_bc
from learners.training.flags import bc_configs, build_bc_parser


def build_parser() -> argparse.ArgumentParser:
    return build_bc_parser(description=__doc__.split("\n\n")[0])


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    tcfg, bcfg = bc_configs(args)
    row = train_bc(tcfg, bcfg, args.out)
    print(json.dumps({"out": str(args.out), **{k: row.get(k) for k in ("step", "success_rate", "return",
                                                                       "holdout_loss")}}))
    return 0
