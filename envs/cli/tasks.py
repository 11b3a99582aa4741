"""`robot-rl tasks`: list the named task presets (the values `--task` accepts).

Usage::

    robot-rl tasks            # a table: name, gymnasium id, description
    robot-rl tasks --json     # the same as JSON
"""

from __future__ import annotations

import argparse

from envs.presets import presets_json, presets_table


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="robot-rl tasks", description="List the named task presets.")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args(argv)
    print(presets_json() if args.json else presets_table())
    return 0
