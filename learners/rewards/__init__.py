"""Rewards: the run-time reward model and the reward classifier's whole loop (labels -> training -> evaluation ->
audit -> relabel). The library behind `robot-rl train-classifier`, `eval-classifier` and `audit-labels` (their
command modules in learners.cli parse arguments and call one function here). Nothing is imported here.

Modules and their public names:
- `reward_model`  RewardModel sources (ClassifierReward with k-frame gate + proprio predicate and audit log,
                  HumanReward, GoalReward), RewardModelWrapper, make_reward_model, parse_reward_source
- `audit_log`     RewardDecision, RewardAudit (positive frames + the lead frames before them), true_success,
                  camera_frames
- `classifier`    RewardClassifier (per-camera encoders + head), ClassifierCard, save_classifier / load_classifier
- `labels`        load_labels (LabelledFrames), split_by_episode
- `metrics`       binary_metrics, calibration_table, threshold_for_precision, gate_stats, FrameConfusion,
                  SuccessOnsets, the tables' text
- `training`      train_classifier(TrainClassifierConfig, label dirs, out): the recipe as named phases; report_text
- `evaluation`    evaluate_classifier, write_worst_sheet, evaluate_classifier_dir (`robot-rl eval-classifier`)
- `audit`         write_audit_labels: audit frames + verdicts -> label episodes (`robot-rl audit-labels`)
"""
