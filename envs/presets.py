"""Making the named task presets (the kernel's table, robot_rl.presets) into envs.

The kernel holds the data (name -> gymnasium id, registering module, default kwargs); this module adds what
needs the envs package: `make_env` (robot_rl.gym_env.make_task_env, the one env builder, re-exported), the
twin task behind a preset (for the scripted experts) and the listing `robot-rl tasks` prints (`presets_table`,
`presets_json`).

Usage::

    from envs.presets import make_env, twin_task
    env = make_env("twin-pick-cube", obs_mode="state")     # gymnasium.make("robot_rl/TwinPickCube-v0", ...)
    twin_task("twin-pick-cube")                            # "pick_cube"
    make_env("twin-pik-cube")                              # UnknownTaskError listing the known names
    print(presets_table())                                 # name, gymnasium id, description
"""

from __future__ import annotations

import json

from envs import TWIN_ENV_IDS
from robot_rl.errors import UnknownTaskError
from robot_rl.gym_env import make_task_env as make_env
from robot_rl.presets import PRESETS, TaskPreset, get_preset

__all__ = ["PRESETS", "TaskPreset", "get_preset", "make_env", "presets_json", "presets_table", "twin_task"]


def twin_task(preset_name: str) -> str:
    """The twin task ("reach", "pick_cube", "peg_insert") a preset runs; UnknownTaskError if it is not a
    twin preset."""
    env_id = get_preset(preset_name).env_id
    for task, stem in TWIN_ENV_IDS.items():
        if env_id in (f"{stem}-v0", f"{stem}State-v0"):
            return task
    raise UnknownTaskError(f"preset '{preset_name}' ({env_id}) is not a MuJoCo twin task")


def presets_table() -> str:
    """The presets as a text table (name, gymnasium id, description) and a note on the state-only ids."""
    rows = [("name", "gymnasium id", "description")] + [(p.name, p.env_id, p.description) for p in PRESETS.values()]
    w0, w1 = (max(len(r[i]) for r in rows) for i in (0, 1))
    lines = [f"{name.ljust(w0)}  {env_id.ljust(w1)}  {desc}" for name, env_id, desc in rows]
    lines.append("\nTwin tasks also have state-only ids (privileged object state, no rendering): append 'State' "
                 "before '-v0', e.g. robot_rl/TwinPickCubeState-v0.")
    return "\n".join(lines)


def presets_json() -> str:
    """The presets as JSON: name, env_id, description, env_module, env_kwargs per preset."""
    return json.dumps([{"name": p.name, "env_id": p.env_id, "description": p.description,
                        "env_module": p.env_module, "env_kwargs": dict(p.env_kwargs)} for p in PRESETS.values()],
                      indent=2)
