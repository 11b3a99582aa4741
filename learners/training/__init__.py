"""One-process training: the library behind `robot-rl train`, `train-bc` and `eval` (their command modules in
learners.cli only parse arguments, build a config and call one function here). Nothing is imported here.

Modules and their public names:
- `config`       TrainConfig (a run's options; saved as OUT/config.json), ALGOS, OFFLINE_BC_NOTE
- `flags`        build_train_parser / train_config, build_bc_parser / bc_configs: the two command lines
- `train`        train(cfg, out, resume): one run as named phases; build_run (envs, agent, buffers), Run
- `session`      TrainSession: the run's loop (offline phase, online phase, evaluations, checkpoints)
- `run_env`      make_run_env, run_env_spec, resolve_action_box: the run's env over robot_rl.gym_env
- `demos`        load_demo_buffer (train), load_demo_episodes (the distributed learner), without_extra_leaves
- `scalars`      ScalarWriter: TensorBoard scalars in OUT/tensorboard (robot_rl.run_dir)
- `bc`           train_bc, BCConfig, BehaviourCloning: behaviour cloning (`robot-rl train-bc`)
- `evaluation`   evaluate_checkpoint: a checkpoint's deterministic episodes (`robot-rl eval`)
- `online`       train_online / train_offline (generators of metrics) and evaluate_episodes, for any env
- `warm_start`   init_agent_from (WSRL's --init-from)
- `forward_backward` and `forward_backward_run`: reset-free training with two agents (`--forward-backward`)
- `gym_compat`   any gymnasium env's traits (success key, action box, demo action range)
- `run_state`    TrainingRun: save / restore a whole run (agent, buffers, counters, RNG states)
- `pretrain_encoder` pretrain_encoder, PretrainConfig: a camera backbone from recorded episodes
  (`robot-rl pretrain-encoder`)
"""
