"""Agents: the Agent seam and its implementations: the SAC / RLPD / DrQ learner agent in torch (and the JAX backend
in `learners.agents.jax`), their networks and encoders, the actor-side policy, residual-RL bases and the one
AgentConfig with its presets, recipes and command-line resolution.

Public modules: `agent` (the Agent seam, defined once: SupportsAct, LearnerAgent; make_agent), `sac` (SACAgent:
the update as named critic / actor / temperature phases), `sac_batch` (UpdateBatch, to_update_batch: one update's
checked batch and minibatches), `jax` (JaxSACAgent, update_core), `policy` (what actors import: Policy,
build_policy, load_base_policy, load_run_policy), `residual` (FrozenBase, the policy file format, py: / lerobot:
bases), `lerobot_base`, `config` (AgentConfig + presets), `options` (--set parsing, resolution order), `recipes`,
`device_defaults`, `encoders`, `backbones` (ResNet10 / ResNet18 and their weights files), `weights_convert`
(SERL's pickle and torchvision's .pth -> safetensors: `robot-rl convert-encoder`), `nets`, `obs`. This package
imports nothing at import time.
"""
