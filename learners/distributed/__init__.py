"""The distributed learner: the library behind `robot-rl learner` (its command module, learners.cli.learner, only
parses arguments, builds a config and calls one function here). Nothing is imported here.

Modules and their public names:
- `learner`   Learner (ingest transitions, UTD schedule, weights out, checkpoints; endpoint and clocks injected),
              LearnerConfig, check_learner_run_dir (robot_rl.run_dir over checkpoints and the inbox)
- `process`   run_learner_process(LearnerProcessConfig): one learner process over ZeroMQ (task_spec, serve)
- `flags`     build_learner_parser, learner_process_config, agent_config: the command line
- `inbox`     Inbox (durable write-ahead inbox) and SeqLedger (duplicate detection)
- `status`    LearnerOutputs (status.json, metrics, TensorBoard in OUT/tensorboard, plot), per-actor records
"""
