"""The distributed learner: `learner` (Learner: ingest transitions, UTD schedule, weights out, checkpoints), `inbox`
(durable inbox + sequence ledger) and `status` (status.json, metrics, TensorBoard, plots). Nothing is imported here.
"""
