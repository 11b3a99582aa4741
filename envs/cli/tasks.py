"""`robot-rl tasks`: list the named task presets (the values `--task` accepts).

Usage::

    robot-rl tasks            # a table: name, gymnasium id, description
    robot-rl tasks --json     # the same as JSON
"""

from __future__ import annotations

import argparse
import json

from envs.presets import PRESETS


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="robot-rl tasks", description="List the named task presets.")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args(argv)
    if args.json:
        print(json.dumps([{"name": p.name, "env_id": p.env_id, "description": p.description,
                           "env_module": p.env_module, "env_kwargs": dict(p.env_kwargs)} for p in PRESETS.values()],
                         indent=2))
        return 0
    rows = [("name", "gymnasium id", "description")] + [(p.name, p.env_id, p.description) for p in PRESETS.values()]
    w0, w1 = (max(len(r[i]) for r in rows) for i in (0, 1))
    for name, env_id, desc in rows:
        print(f"{name.ljust(w0)}  {env_id.ljust(w1)}  {desc}")
    print("\nTwin tasks also have state-only ids (privileged object state, no rendering): append 'State' before "
          "'-v0', e.g. robot_rl/TwinPickCubeState-v0.")
    return 0
