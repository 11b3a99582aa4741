"""The one env builder and the one EnvSpec-of-an-env: every command makes its gymnasium env here.

`make_gym_env` imports the module that registers an env id (the project's `envs` for the twin presets, any
`--env-module` for a third-party env), calls `gymnasium.make` and turns a typo into a ConfigError naming the flag.
`make_task_env` does the same for a named preset (robot_rl.presets). What wraps the env afterwards (a reward
model, an intervention device, a robot server's client) belongs to the command that needs it; the base env always
comes from here. gymnasium is imported lazily (the `sim` extra), so the kernel stays importable without it.

Usage::

    env = make_task_env("twin-pick-cube", obs_mode="state")           # preset defaults + overrides
    env = make_gym_env("Pendulum-v1")                                  # any registered gymnasium id
    env = make_gym_env("MyArm-v0", module="my_lab.envs", seed_objects=3)
    env = with_operator(env, "spacemouse", task="twin-pick-cube")      # a person's interventions (HIL-SERL)
    spec = env_spec_of(env, "twin-pick-cube")                          # EnvSpec for handshakes and checks
"""

from __future__ import annotations

import importlib
from typing import Any

from robot_rl.errors import ConfigError
from robot_rl.extras import optional_import
from robot_rl.presets import PRESETS, get_preset
from robot_rl.specs import EnvSpec
from robot_rl.task_file import looks_like_task_file


def import_env_module(module: str) -> None:
    """Import the module whose import registers an env id; ConfigError when no such module exists (an error raised
    inside an existing module is not a typo: it propagates unchanged)."""
    try:
        importlib.import_module(module)
    except ModuleNotFoundError as err:
        if err.name != module.split(".")[0] and err.name != module:
            raise
        raise ConfigError(f"--env-module {module}: no such module ({err})") from None


def make_gym_env(env_id: str, module: str | None = None, **kwargs: Any) -> Any:
    """`gymnasium.make(env_id, **kwargs)` after importing `module` (which registers `env_id`); ConfigError for an
    unknown module or env id, or options the env refuses through gymnasium."""
    gymnasium = optional_import("gymnasium", extra="sim", purpose="the robot envs")
    if module:
        import_env_module(module)
    try:
        return gymnasium.make(env_id, **kwargs)
    except gymnasium.error.Error as err:
        raise ConfigError(f"--env-id {env_id}: {err}") from None


def make_task_env(task: str, **overrides: Any) -> Any:
    """The preset `task`'s env: its default kwargs updated by `overrides` (None values ignored; e.g.
    obs_mode='state'); UnknownTaskError lists the known presets."""
    preset = get_preset(task)
    return make_gym_env(preset.env_id, preset.env_module, **preset.make_kwargs(**overrides))


OPERATOR_MODULE = "demos.devices.operators"
"""The module that builds an operator's device and wraps an env in it (`wrap_with_operator`), imported by name at
run time as an env module is: the one-process `train` loop (learners) and the actor both reach it here, without
importing envs or demos themselves."""


def with_operator(env: Any, intervene: str | None, task: str, seed: int = 0, press_success: bool = False,
                  device_config: str | None = None) -> Any:
    """`env` with the interventions (and success key) of the operator `--intervene` names (robot_rl.operators:
    scripted, spacemouse, gamepad, keyboard; `device_config`: the JSON file of `--device-config`), or `env` itself
    for None. The device is opened here (missing library: the `teleop` extra's message; no device: one line naming
    what was found); on any failure `env` is closed."""
    if intervene is None:
        return env
    from robot_rl.operators import check_intervene, load_device_config

    try:
        check_intervene(intervene, device_config)
        fields = load_device_config(device_config) if device_config is not None else None
        wrap = importlib.import_module(OPERATOR_MODULE).wrap_with_operator
        return wrap(env, intervene, task, seed=seed, press_success=press_success, device_config=fields)
    except BaseException:
        env.close()
        raise


def env_spec_of(env: Any, name: str) -> EnvSpec:
    """The EnvSpec of a made env (its spaces, and its control rate when the env has a `config.control_hz`, as the
    project's robot envs do; 0.0 = not known), named `name` (the task or env id; a task file's path: the name in
    the file, so an actor and a learner given the same task by different paths agree)."""
    if name not in PRESETS and looks_like_task_file(name):
        name = get_preset(name).name
    hz = float(getattr(getattr(env.unwrapped, "config", None), "control_hz", 0.0) or 0.0)
    return EnvSpec.from_spaces(name, env.observation_space, env.action_space, control_hz=hz)
