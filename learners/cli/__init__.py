"""The learner-side commands (`robot-rl train`, `eval`, `train-bc`, `train-classifier`, `eval-classifier`,
`audit-labels`, `learner`). Command modules only parse arguments, build a config and call one function; nothing
imports them but `robot_rl.cli`.
"""
