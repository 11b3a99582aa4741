"""Learners: everything on the learning side of SERL / HIL-SERL, by concept; imports only robot_rl (never envs,
controllers, rclpy or zmq), and nothing at import time (import the module you need).

- `learners.agents`       the Agent seam and its implementations: `agent` (SupportsAct, LearnerAgent, make_agent),
                          `sac` (SACAgent: SAC / RLPD / DrQ, critic ensemble, HIL-SERL gripper head; its update in
                          critic / actor / temperature phases) with `sac_batch` (UpdateBatch, to_update_batch),
                          `jax` (JaxSACAgent and update_core, the `jax` extra, lazily), `policy` (the actor-side
                          Policy, build_policy, load_base_policy: what actors import), `config` (AgentConfig and the
                          presets drq_config, rlpd_state_config, hil_serl_config, sac_config), `options` (--set
                          parsing, resolve_agent_config), `recipes` (recipe_for), `device_defaults`, `encoders`
                          (ResNet-10, conv net, random_shift), `nets` (MLP, EnsembleMLP, HLGauss, soft_update), `obs`
                          (ObsLayout), `residual` (FrozenBase, save_policy_file), `lerobot_base`.
- `learners.replay`       `buffer` (ReplayBuffer with uint8 frames stored once, MixedSampler for RLPD's halves,
                          sampler_for, route_transition) and `prefetch` (BatchPrefetcher, BatchSource).
- `learners.rewards`      `reward_model` (the run-time rewards: ClassifierReward with its k-frame gate and proprio
                          predicate, HumanReward, RewardModelWrapper, make_reward_model), `classifier`
                          (RewardClassifier, save_classifier / load_classifier), `labels` (load_labels,
                          split_by_episode), `metrics` (thresholds, tables, gate_stats), `training`
                          (train_classifier), `evaluation` (eval-classifier) and `audit` (write_audit_labels).
- `learners.training`     one-process training: `config` (TrainConfig) and `flags` (its parser), `train` (train:
                          the run in named phases) with `session` (TrainSession: offline / online / evaluate /
                          checkpoint), `run_env` (the run's env over robot_rl.gym_env), `demos` (demo buffers),
                          `scalars` (ScalarWriter), `online` (train_online, train_offline, evaluate_episodes),
                          `evaluation` (robot-rl eval), `bc` (behaviour cloning), `warm_start` (init_agent_from),
                          `forward_backward` / `forward_backward_run` (reset-free training with two agents),
                          `gym_compat` (any gymnasium env's traits), `run_state` (TrainingRun: save / restore a run).
- `learners.distributed`  the distributed learner: `learner` (Learner, LearnerConfig), `inbox` (Inbox, SeqLedger),
                          `status` (LearnerOutputs: status.json, metrics, TensorBoard, per-actor records), `flags`
                          and `process` (the `robot-rl learner` process: its options and run_learner_process).
- `learners.cli`          the learner-side commands (`robot-rl train`, `eval`, `train-bc`, `train-classifier`,
                          `eval-classifier`, `audit-labels`, `learner`): parse, build a config, call one function;
                          nothing imports them but robot_rl.cli.

See ../shared/DESIGN.md for the seams (the Agent seam: learners.agents.agent).
"""
