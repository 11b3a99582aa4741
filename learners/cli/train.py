"""`robot-rl train`: one process (env + agent + replay, no ZeroMQ); `robot-rl eval` is learners.cli.eval.

The library is learners.training (config: TrainConfig, flags: this parser, train: the run).

Works on our twin presets (`--task twin-reach`) and on any gymnasium env with a Box action and a Box or Dict
observation (`--env-id Pendulum-v1`, plus `--env-module M` to import a third-party registration first).

The agent: the algorithm's defaults, then the device's (learners.agents.device_defaults: a cheaper state agent on a CPU,
announced at start), then the task defaults of an arm task and its recipe (learners.agents.recipes; `--no-recipe`
skips the recipe), then the explicit flags
(--discount, --hidden, ...), then `--set FIELD=VALUE` for any AgentConfig field (repeatable; see
learners.agents.options). The resolved AgentConfig is printed at start and saved as `agent_config.json`.

A gymnasium env as it comes (learners.training.gym_compat): `--success-key KEY` reads success from info[KEY] (a warning
says
when the env never reports the key); on `--env-id` runs the demo actions are compared with the env's action bounds
(a warning when the demos use a small part of them; not on the twin presets, whose recipes were measured with
their bounds) and `--action-scale auto|S` narrows the bounds the agent's [-1, 1] covers;
`--obs-norm` normalises the state by statistics of the demos and the first online transitions.

Outputs in `--out DIR`: `config.json` (this command's options), `agent_config.json`, `metrics.jsonl` (one row per
evaluation: env_step, success_rate, return, updates, updates_per_s, the mean losses since the previous row, train
success rate, buffer sizes), TensorBoard scalars in `tensorboard/` (when tensorboard is installed),
`learning_curve.png`, and atomic resumable checkpoints in `checkpoints/` (agent + optimizers, both replay
buffers, counters, RNG states). Nothing is written before the env and the agent are built. A directory becomes a
run once it holds a checkpoint or a metrics row (robot_rl.run_dir): then it is resumed with `--resume` or refused
with a clear message; anything less (e.g. what a failed start left behind) is reused.

Usage::

    robot-rl record-demos --task twin-reach --episodes 20 --out demos/reach --obs-mode state
    robot-rl train --task twin-reach --obs-mode state --demos demos/reach --max-env-steps 3000 --out runs/reach
    robot-rl train ... --out runs/reach --max-env-steps 6000 --resume      # continue the same run
    robot-rl train --task twin-pick-cube --obs-mode state --demos demos/pick --set n_step=3 --out runs/pick3
    robot-rl eval --checkpoint runs/reach --episodes 20                      # one JSON line
    robot-rl train --task twin-cube-relocate --obs-mode state --forward-backward --demos demos/fwd \\
        --backward-demos demos/bwd --max-env-steps 20000 --out runs/fb     # reset-free
        (learners.training.forward_backward_run)

Offline, then a warm start that keeps no offline data (WSRL, Zhou et al. 2024; learners.training.warm_start):
`--offline-updates N` trains on the demo buffer alone (`--demos DIR [DIR ...]`: demonstrations, and e.g. recorded
rollouts whose rows stay unmarked as human rows) before any env step, evaluates (env step 0) and checkpoints;
`--init-from RUN` loads another run's agent (not its replay, update counter or RNG states), evaluates it at env step
0, collects `--warmup-steps` (200) steps with it before the first update, then fine-tunes on online data only. An
offline run clones every human row: a recipe's Q-filtered BC term is off in it (OFFLINE_BC_NOTE says why)::

    robot-rl train --task twin-pick-cube --obs-mode state --demos demos/pick rollouts/pick --offline-updates 20000 \\
        --max-env-steps 0 --out runs/pick_offline                           # offline phase only
    robot-rl train --task twin-pick-cube --obs-mode state --init-from runs/pick_offline --warmup-steps 200 \\
        --max-env-steps 20000 --out runs/pick_wsrl                          # warm start, online data only

`--reward env|classifier:DIR|human` (learners.rewards.reward_model) says where training rewards come from; evaluation
always reports the env's true success. `--faithful` makes the twin's training env hardware-faithful
(envs.env.FAITHFUL: no object observation, no reward from the task's success, no teleport after the first reset);
the run then needs a reward that is not the env's: `--reward classifier:DIR` or `human` (with `--forward-backward`
also `--backward-reward`), e.g.

    robot-rl train --task twin-pick-cube --obs-mode pixels --faithful --reward classifier:runs/cls \\
        --demos demos/pick_px --max-env-steps 20000 --out runs/pick_faithful

A classifier with `--obs-mode state` (a state policy, a camera reward): the training env renders the card's
cameras at the card's size into info["reward_images"] for the classifier only (envs.env RobotEnvConfig.reward_cameras;
never in the observation, the replay buffer or a checkpoint), e.g.

    robot-rl train --task twin-pick-cube --obs-mode state --faithful --reward classifier:runs/cls \\
        --demos demos/pick --max-env-steps 20000 --out runs/pick_state_cls
"""

from __future__ import annotations

import argparse
import json

from learners.training.flags import build_train_parser, train_config
from learners.training.train import train


def build_parser() -> argparse.ArgumentParser:
    return build_train_parser(description=__doc__.split("\n\n")[0])


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    row = train(train_config(args), args.out, resume=args.resume)
    print(json.dumps({"out": str(args.out), **{k: row.get(k) for k in ("env_step", "success_rate", "return")}}))
    return 0
