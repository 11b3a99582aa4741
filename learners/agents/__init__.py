"""Agents: the SAC / RLPD / DrQ learner agents (torch, and the JAX backend in `learners.agents.jax`), their
networks and encoders, the actor-side policy, residual-RL bases and the one AgentConfig with its presets, recipes
and command-line resolution.

Public modules: `config` (AgentConfig + presets), `options` (--set parsing, resolution order), `recipes`,
`device_defaults`, `agent` (the Agent seam, make_agent), `sac` (SACAgent), `policy` (what actors import),
`encoders`, `nets`, `obs`, `residual` (base policies), `lerobot_base`. This package imports nothing at import time.
"""
