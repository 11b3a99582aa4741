"""Learners: SAC / RLPD / DrQ agents (HIL-SERL gripper head) in torch and JAX, encoders, replay buffers, training loop.

Modules (import the one you need; this package imports nothing at import time):
- `learners.agents.config`   AgentConfig + presets (drq_config, rlpd_state_config, hil_serl_config, sac_config)
- `learners.agents.recipes`  per-task training recipes (typed AgentConfig overrides, updates per env step)
- `learners.agents.options`  --set FIELD=VALUE parsing, defaults < recipe < flags < --set, OUT/agent_config.json
- `learners.agents.policy`   actor-side policy (encoder + tanh-Gaussian actor + gripper head): build_policy, act,
                      trainable_state / load_trainable_state. Actors import only this module and reward_model.
- `learners.rewards.reward_model`  run-time rewards: ClassifierReward (k-frame gate + proprio predicate, audit log),
                      HumanReward (success key), RewardModelWrapper (any gymnasium-style env), --reward parsing
- `learners.rewards.classifier`  the reward classifier (per-camera CameraEncoder + HIL-SERL head), card, save / load;
                      `classifier_data` (labels, split by episode), `classifier_metrics` (threshold, tables,
                      k-gate replay), `classifier_train`, `classifier_cli` (train-classifier / eval-classifier)
- `learners.agents.sac`      SACAgent: critic ensemble, targets, temperature, UTD updates, full state for checkpoints
- `learners.agents.agent`   the Agent seam (LearnerAgent) and make_agent: cfg.backend 'torch' (sac) or 'jax'
- `learners.agents.jax.agent`  JaxSACAgent: sac's update as one jitted JAX function (the `jax` extra, imported lazily);
                      acts and publishes through the torch policy
- `learners.agents.jax.nets`  its building blocks: ParamMap (torch names/layouts <-> JAX paths), the networks as jnp
                      functions, Adam (jax imported lazily, inside the functions)
- `learners.replay.buffer`   ReplayBuffer (uint8 frames stored once), MixedSampler (RLPD), route_transition
- `learners.training.online`     train_online (generator of per-episode metrics) and evaluate, for any gymnasium-like
env
- `learners.agents.encoders` ResNet-10 (GroupNorm, local safetensors weights), small conv net, random shift
- `learners.distributed.learner`  the distributed learner (ingest, UTD schedule, weights out, checkpoints), with
                      `learners.distributed.inbox` (durable inbox + seq ledger) and `learners.distributed.status`
                      (status.json,
                      metrics, TensorBoard, plot, per-actor records)
- `learners.cli.train`, `learners.cli.learner`, `learners.cli.eval`  the train / learner / eval commands
- `learners.agents.nets`, `learners.agents.obs`, `learners.training.run_state`  building blocks

See ../shared/DESIGN.md for the agent seam.
"""
