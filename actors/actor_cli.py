"""`robot-rl actor`: one actor process (actors.actor over a ZeroMQ endpoint), or a policy evaluation.

Without --robot it runs the task's MuJoCo twin in process; with --robot it drives the env over a robot server
(`robot-rl robot-server`, RemoteRobot). Until the learner's first weights arrive it holds the pose (zero
actions), or acts randomly where that is safe (--warmup: by default random on the twin, in process or served,
and hold on any other backend, i.e. hardware; `--warmup random` opts in), then acts with the newest weights
(swapped between control steps), streams transitions, keeps running while the learner is away
and reconnects by itself. Stops on Ctrl-C / SIGTERM (flushing what the learner has not acknowledged, bounded by
--flush-timeout) or after --max-steps / --max-episodes. With --stats-out it writes its final stats as JSON.

--faithful runs the env hardware-faithful (envs.env_config.FAITHFUL: no object observation, no reward or termination
from the task's success, no teleport after the first reset; the true success stays in this process, see
actors.actor); the reward must then come from a reward model (a classifier or a human). With --evaluate it only drops
the object observation (evaluation episodes still start from a seeded, teleported scene and report the true success).

--evaluate CKPT runs `--episodes` deterministic episodes with the policy of a learner checkpoint (a checkpoint
directory or a run's checkpoints/ directory: its newest) instead, prints the success rate and writes --summary.

The options, the env, the run and the evaluation live in actors.run (ActorRunConfig, parse_actor_args,
run_actor), actors.actor_env and actors.evaluation.

Usage::

    robot-rl actor --task twin-pick-cube --learner tcp://127.0.0.1:5555 --actor-id a0 --obs-mode state
    robot-rl actor --task twin-pick-cube --learner tcp://127.0.0.1:5555 --robot tcp://127.0.0.1:5560
    robot-rl actor --task twin-pick-cube --evaluate runs/pick/checkpoints --episodes 20 --summary eval.json
"""

from __future__ import annotations

from actors.run import parse_actor_args, run_actor


def main(argv: list[str]) -> int:
    return run_actor(parse_actor_args(argv))
