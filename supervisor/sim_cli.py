"""`robot-rl sim`: distributed training in simulation, every part a separate process, one progress view.

Starts (each as ``python -m robot_rl.cli ...`` in its own process group): scripted demo recording (unless --demos),
one twin robot server per actor (``robot-server``), the learner (``learner``) and N actors (``actor --robot``).
Renders the learner's OUT/status.json as one live display (env steps, success rate, updates/s, weights version
per actor, buffer sizes). Finishes when the learner reaches --max-env-steps, then stops the actors and servers,
redraws the learning curves (OUT/learning_curve.png against env steps, OUT/learning_curve_time.png against wall
time) and evaluates the last checkpoint deterministically (``actor --evaluate``): success rate printed and in
OUT/summary.json. Ctrl-C or SIGTERM stops everything cleanly (terminate, then kill after a grace period; the
learner writes its final checkpoint) and still evaluates (a second Ctrl-C skips that). A dying actor is
restarted (up to --actor-restarts times); the learner keeps training meanwhile.

Everything runs under a `supervisor.Supervisor`; the wiring of this one job (which children, with which command
lines, in which stop order, what happens when the learner finishes) is supervisor.sim, its options
supervisor.sim_config. It spawns processes and reads files; it imports nothing outside robot_rl and supervisor.
Logs: OUT/logs/.

Usage (more examples in supervisor.sim)::

    robot-rl sim --task twin-pick-cube                       # state obs, RLPD, 20 scripted demos, 2 actors
    robot-rl sim --task twin-pick-cube --out runs/pick --resume         # continue an interrupted run
"""

from __future__ import annotations

import argparse

from supervisor.sim import run_sim
from supervisor.sim_config import build_sim_parser, sim_config


def build_parser() -> argparse.ArgumentParser:
    return build_sim_parser(description=__doc__.split("\n\n")[0])


def main(argv: list[str]) -> int:
    return run_sim(sim_config(build_parser().parse_args(argv)))
