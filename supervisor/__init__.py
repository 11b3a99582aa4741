"""Process supervision: start named child processes, watch them, restart them per policy, stop them in order.

The generic part knows nothing about robots or learning; the wiring of one job (which processes, with which
command lines, what to do when they finish) sits beside it. `robot-rl sim` is the first such job; hardware
bring-up (robot servers, cameras, learner and actors on real machines) reuses the same parts.

Modules (import the one you need; this package imports nothing at import time):
- `supervisor.process`     ChildSpec (one process: argv, log file, restart policy, stop order) and Child (a running
                           process in its own process group, output copied to its log, SIGTERM on the
                           supervisor's death via PR_SET_PDEATHSIG on Linux)
- `supervisor.supervisor`  Supervisor: starts children by name, polls for exits (restarting per policy), runs
                           one child to its end, stops everything in stop order (SIGTERM, SIGKILL after the
                           grace period), turns SIGINT / SIGTERM into a stop request
- `supervisor.display`     Display (live in-place redraw on a terminal, or a line every N seconds), number
                           formatting, reading the JSON status files children write
- `supervisor.sim`         Sim / run_sim: `robot-rl sim`'s job: demo recording, twin robot servers, learner and
                           actors of a simulated training run, its progress view (render_status), final
                           evaluation and summary
- `supervisor.sim_config`  SimConfig, build_sim_parser, sim_config: `robot-rl sim`'s options (the command module
                           `supervisor.sim_cli` parses with them and calls run_sim)

Layering: supervisor imports only robot_rl (and the standard library). Everything else runs as a child process
(``python -m robot_rl.cli ...``), so a supervisor never imports torch, mujoco, gymnasium or zmq.
"""
