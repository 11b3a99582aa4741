"""`robot-rl learner`: the distributed learner process (learners.distributed.learner over a ZeroMQ endpoint).

Binds the transition/weights endpoint, prints ``learner: listening on tcp://HOST:PORT`` as its first stdout line,
loads demos into the demo buffer, and trains at a fixed update-to-data ratio from what actors send (see
learners.distributed.learner). Writes OUT/agent_config.json, OUT/metrics.jsonl, OUT/status.json, OUT/learning_curve.png,
OUT/tensorboard/, OUT/checkpoints/, OUT/inbox/. Stops on Ctrl-C / SIGTERM (final checkpoint) or after
--max-env-steps.

The agent: the agent preset (--agent) with this machine's defaults, then the task defaults and the task's recipe
(learners.agents.recipes; --no-recipe skips the recipe, not the task defaults), then the explicit flags (--hidden,
--batch, ...), then `--set FIELD=VALUE` for any
AgentConfig field (repeatable): learners.agents.options.resolve_agent, the one resolver `robot-rl train` uses too,
so the same options give the same agent. The resolved AgentConfig is printed at start and saved as
OUT/agent_config.json; a resumed run uses its checkpoint's.

The library: learners.distributed.flags (this parser), learners.distributed.process (the process's run).

Usage::

    robot-rl learner --task twin-pick-cube --bind tcp://127.0.0.1:5555 --out runs/pick --demos demos/pick \\
        --obs-mode state
    robot-rl learner --task twin-pick-cube --bind tcp://127.0.0.1:5555 --out runs/pick --resume
    robot-rl learner --task twin-pick-cube --out runs/pick3 --demos demos/pick --set n_step=3 --set bc_weight=1
    robot-rl actor --task twin-pick-cube --learner tcp://127.0.0.1:5555        # one or more, anywhere
"""

from __future__ import annotations

import argparse

from learners.distributed.flags import build_learner_parser, learner_process_config
from learners.distributed.process import run_learner_process


def build_parser() -> argparse.ArgumentParser:
    return build_learner_parser(description=__doc__.split("\n\n")[0])


def main(argv: list[str]) -> int:
    return run_learner_process(learner_process_config(build_parser().parse_args(argv)))
