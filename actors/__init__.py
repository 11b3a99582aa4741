"""Actors: the loop next to the robot (env + latest policy + transition stream + weight swaps).

Modules:
- `actors.actor`      Actor (the loop, endpoint and env injected), ActorConfig
- `actors.chunks`     ChunkBuilder (steps into recycled, preallocated arrays in the wire layout)
- `actors.weights`    PolicySwap (weights loaded off the control thread, swapped between steps), config_from_weights
- `actors.actor_env`  make_actor_env (twin in process or env over a robot server; interventions; reward model),
                      backend_of
- `actors.evaluation` evaluate (deterministic episodes through robot_rl.evaluation), evaluate_checkpoint,
                      load_learner_checkpoint
- `actors.run`        the `robot-rl actor` process: ActorRunConfig, parse_actor_args (the command line, also for
                      checking the command lines `robot-rl sim` builds), run_actor
- `actors.actor_cli`  the command module (`robot-rl actor`): parse -> run_actor; nothing imports it

Imports from learners are limited to `learners.agents.policy` and `learners.rewards.reward_model` (see
../shared/DESIGN.md, layering).
"""
