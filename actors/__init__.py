"""Actors: the loop next to the robot (env + latest policy + transition stream + weight swaps).

Modules:
- `actors.actor`      Actor (the loop, endpoint and env injected), ChunkBuilder, PolicySwap (weights loaded off the
                      control thread, swapped between steps), evaluate
- `actors.actor_cli`  `robot-rl actor` (twin in process or env over a robot server; --evaluate CKPT)

Imports from learners are limited to `learners.agents.policy` (see ../shared/DESIGN.md, layering).
"""
