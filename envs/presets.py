"""Making the named task presets (the kernel's table, robot_rl.presets) into envs.

The kernel holds the data (name -> gymnasium id, registering module, default kwargs); this module adds what
needs the envs package: `make_env` (import the registering module, gymnasium.make with overrides) and the
twin task behind a preset (for the scripted experts).

Usage::

    from envs.presets import make_env, twin_task
    env = make_env("twin-pick-cube", obs_mode="state")     # gymnasium.make("robot_rl/TwinPickCube-v0", ...)
    twin_task("twin-pick-cube")                            # "pick_cube"
    make_env("twin-pik-cube")                              # UnknownTaskError listing the known names
"""

from __future__ import annotations

import importlib
from typing import Any

from envs import TWIN_ENV_IDS
from robot_rl.errors import UnknownTaskError
from robot_rl.extras import optional_import
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


def make_env(task_name: str, **overrides: Any) -> Any:
    """gymnasium.make the preset's env: its default kwargs updated by `overrides` (e.g. obs_mode='state')."""
    preset = get_preset(task_name)
    gymnasium = optional_import("gymnasium", extra="sim", purpose="the robot envs")
    importlib.import_module(preset.env_module)  # registers the id
    return gymnasium.make(preset.env_id, **preset.make_kwargs(**overrides))
