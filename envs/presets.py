"""Making the named task presets (the kernel's table, robot_rl.presets) into envs.

The kernel holds the data (name -> gymnasium id, registering module, default kwargs); this module adds what
needs the envs package: `make_env` (robot_rl.gym_env.make_task_env, the one env builder, re-exported) and the
twin task behind a preset (for the scripted experts).

Usage::

    from envs.presets import make_env, twin_task
    env = make_env("twin-pick-cube", obs_mode="state")     # gymnasium.make("robot_rl/TwinPickCube-v0", ...)
    twin_task("twin-pick-cube")                            # "pick_cube"
    make_env("twin-pik-cube")                              # UnknownTaskError listing the known names
"""

from __future__ import annotations

from envs import TWIN_ENV_IDS
from robot_rl.errors import UnknownTaskError
from robot_rl.gym_env import make_task_env as make_env
from robot_rl.presets import PRESETS, TaskPreset, get_preset

__all__ = ["PRESETS", "TaskPreset", "get_preset", "make_env", "twin_task"]


def twin_task(preset_name: str) -> str:
    """The twin task ("reach", "pick_cube", "peg_insert") a preset runs; UnknownTaskError if it is not a
    twin preset."""
    env_id = get_preset(preset_name).env_id
    for task, stem in TWIN_ENV_IDS.items():
        if env_id in (f"{stem}-v0", f"{stem}State-v0"):
            return task
    raise UnknownTaskError(f"preset '{preset_name}' ({env_id}) is not a MuJoCo twin task")
