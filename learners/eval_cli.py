"""`robot-rl eval --checkpoint DIR --episodes K`: see learners.train_cli.eval_main."""

from __future__ import annotations

from learners.train_cli import eval_main


def main(argv: list[str]) -> int:
    return eval_main(argv)
