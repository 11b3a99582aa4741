"""Gymnasium envs over a Robot, the MuJoCo twin, tasks, scripted experts and robot backends.

Importing `envs` registers the twin envs with gymnasium (when gymnasium is installed; the MuJoCo twin itself
is imported only when an env is made):

| id                              | task       | observation                          |
|---------------------------------|------------|--------------------------------------|
| robot_rl/TwinReach-v0           | reach      | proprio + camera images (pixels)     |
| robot_rl/TwinPickCube-v0        | pick_cube  | proprio + camera images (pixels)     |
| robot_rl/TwinPegInsert-v0       | peg_insert | proprio + camera images (pixels)     |
| robot_rl/TwinCubeRelocate-v0    | cube_relocate | proprio + camera images (pixels)  |
| robot_rl/TwinCubeRelocateBack-v0| cube_relocate_back | (the backward direction)     |
| robot_rl/Twin{...}State-v0      | same       | proprio + privileged object state    |

Usage::

    import gymnasium, envs
    env = gymnasium.make("robot_rl/TwinPickCube-v0", image_size=64)          # kwargs go to make_twin_env
    env = gymnasium.make("robot_rl/TwinPickCube-v0", obs_mode="state")
    env = envs.presets.make_env("twin-pick-cube", obs_mode="state")          # the CLI's --task names

Any `envs.env_config.RobotEnvConfig` field passes through as a kwarg (e.g. reset_noise_m=0.0; `faithful=True` for the
hardware-faithful mode), except
`max_episode_steps`, which gymnasium.make keeps for itself (a TimeLimit wrapper); the env's own episode length
is the task's default.
"""

from __future__ import annotations

import importlib.util

TWIN_ENV_IDS: dict[str, str] = {
    "reach": "robot_rl/TwinReach",
    "pick_cube": "robot_rl/TwinPickCube",
    "peg_insert": "robot_rl/TwinPegInsert",
    "cube_relocate": "robot_rl/TwinCubeRelocate",
    "cube_relocate_back": "robot_rl/TwinCubeRelocateBack",
}
"""Task name -> gymnasium id stem (append '-v0' for pixels, 'State-v0' for state mode)."""

ENTRY_POINT = "envs.env:make_twin_env"


def register_envs() -> list[str]:
    """Register the twin envs with gymnasium (idempotent); returns the ids. No-op without gymnasium."""
    if importlib.util.find_spec("gymnasium") is None:
        return []
    import gymnasium

    ids = []
    for task, stem in TWIN_ENV_IDS.items():
        for suffix, mode in (("-v0", "pixels"), ("State-v0", "state")):
            env_id = stem + suffix
            ids.append(env_id)
            if env_id not in gymnasium.registry:
                gymnasium.register(id=env_id, entry_point=ENTRY_POINT, kwargs={"task": task, "obs_mode": mode})
    return ids


register_envs()
