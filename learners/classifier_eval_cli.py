"""`robot-rl eval-classifier` (implemented in learners.classifier_cli)."""

from __future__ import annotations

from learners.classifier_cli import eval_main


def main(argv: list[str]) -> int:
    return eval_main(argv)
