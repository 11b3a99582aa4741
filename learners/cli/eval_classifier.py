"""`robot-rl eval-classifier` (implemented in learners.cli.train_classifier)."""

from __future__ import annotations

from learners.cli.train_classifier import eval_main


def main(argv: list[str]) -> int:
    return eval_main(argv)
