"""Named task presets: a task is data (which gymnasium env, with which options), not a copy of a script.

The presets are task files (robot_rl.task_file; the built-in ones in robot_rl/task_files, the twin presets), and
`get_preset` takes a preset's name or a task file's path: `--task twin-pick-cube` or `--task configs/lab.toml`.

The kernel holds the table; `envs` registers the gymnasium ids on import. Entry points (train, sim, record)
resolve `--task NAME` here, import `env_module` to get the registration, and call `gymnasium.make`.
Third-party envs work the same way through `--env-id ID --env-module M`.

Usage::

    preset = get_preset("twin-pick-cube")
    preset.env_id, preset.env_module, preset.env_kwargs   # "robot_rl/TwinPickCube-v0", "envs", {...}
    preset.make_kwargs(obs_mode="state")                  # env kwargs with overrides applied
    get_preset("configs/lab_pick.toml")                   # a lab's task file (extends a preset)
    task_reward("configs/lab_pick.toml")                  # ("classifier:/lab/cls", 4): the file's [reward]
    task_obs_mode("configs/lab_pick.toml")                # "pixels": the file's [observation] mode, else "state"

A task's training recipe (AgentConfig overrides, updates per env step) is not here: it lives beside AgentConfig
in learners.agents.recipes, typed and checked against AgentConfig's fields (the kernel stays free of torch).

A task that can be trained reset-free (`robot-rl train --forward-backward`) names its backward direction
(`TaskPreset.forward_backward`): the preset of the reverse task (its demos and recipe) and the env's goal names
(`info["goals"]`) that are each direction's true success.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Sequence
from typing import Any

from robot_rl.errors import ConfigError, RobotRLError, UnknownTaskError
from robot_rl.task_file import TaskFile, builtin, builtin_names, load_task_file, looks_like_task_file


@dataclasses.dataclass(frozen=True)
class ForwardBackward:
    """How a task pairs with its reverse for reset-free forward/backward training."""

    backward_task: str
    """The preset of the backward direction (its scripted demos start where the forward task ends)."""
    forward_goal: str
    """The env's `info["goals"]` key that is the forward direction's true success."""
    backward_goal: str
    """... and the backward direction's."""


@dataclasses.dataclass(frozen=True)
class TaskPreset:
    """One named task: gymnasium id, the module whose import registers it, default env kwargs."""

    name: str
    env_id: str
    description: str
    env_module: str = "envs"
    env_kwargs: tuple[tuple[str, Any], ...] = ()
    forward_backward: ForwardBackward | None = None
    """Set for tasks `robot-rl train --forward-backward` can train reset-free (see the module docstring)."""
    task_file: TaskFile | None = dataclasses.field(default=None, compare=False, repr=False)
    """The task file the preset comes from (robot_rl.task_file): the built-in ones, or a lab's."""

    def make_kwargs(self, **overrides: Any) -> dict[str, Any]:
        """The env kwargs with `overrides` (None values ignored) applied on top of the preset's."""
        kw = dict(self.env_kwargs)
        kw.update({k: v for k, v in overrides.items() if v is not None})
        return kw


def _twin_reference(tf: TaskFile) -> TaskFile:
    """The built-in task file of the twin scene a stand-alone twin file (task.twin_scene, no base) names; ConfigError
    (file + field) for a scene the twin lacks or an env id / module that runs another scene."""
    where, t = f"task file {tf.path}", tf.sections["task"]
    scenes = {builtin(n).value("task", "twin_scene"): builtin(n) for n in builtin_names()}
    ref = scenes.get(t["twin_scene"])
    if ref is None:
        raise ConfigError(f"{where}: task.twin_scene {t['twin_scene']!r} is not a twin scene; known: {sorted(scenes)}")
    ids = (ref.value("task", "env_id"), str(ref.value("task", "env_id")).replace("-v0", "State-v0"))
    if t["env_id"] not in ids or t.get("env_module", "envs") != ref.value("task", "env_module"):
        raise ConfigError(f"{where}: task.env_id {t['env_id']!r} (module {t.get('env_module', 'envs')!r}) does not run "
                          f"the twin scene {t['twin_scene']!r} of task.twin_scene; it runs on {' or '.join(ids)} "
                          f"(module {ref.value('task', 'env_module')!r})")
    return ref


def twin_file_kwargs(tf: TaskFile) -> dict[str, Any]:
    """The env kwargs of a stand-alone twin task file (a copy of a built-in one, edited): every value where it
    differs from the built-in file of its scene, whose values are the twin's own (tests check both), RobotEnvConfig
    fields as they are and Task fields as `task_fields`; {} for a built-in file. ConfigError naming the file and the
    field for what the twin cannot honour: real cameras ([cameras.NAME]), collision thresholds ([robot]: libfranka's,
    the twin has no reflex) and observation cameras the twin does not render."""
    if tf.base is not None or "twin_scene" not in tf.sections["task"]:
        return {}
    ref = _twin_reference(tf)
    where, hint = f"task file {tf.path}", f"a lab file that extends the preset (base = \"{ref.name}\")"
    twin_cams = tuple(ref.value("observation", "cameras", ()))
    for name in tf.sections.get("cameras", {}):
        raise ConfigError(f"{where}: cameras.{name}: the twin renders its own cameras ({list(twin_cams)}, named in "
                          f"observation.cameras); a real camera belongs in {hint}")
    for key in tf.sections.get("robot", {}):
        raise ConfigError(f"{where}: robot.{key}: the twin has no collision reflex to set (libfranka's thresholds, "
                          f"the franky backend); put [robot] in {hint}")
    missing = [c for c in tf.value("observation", "cameras", ()) if c not in twin_cams]
    if missing:
        raise ConfigError(f"{where}: observation.cameras names {missing[0]!r}, a camera the twin does not render; it "
                          f"has {list(twin_cams)}")
    ref_task, ref_env = ref.task_fields(), ref.env_fields()
    kwargs: dict[str, Any] = {f: v for f, v in tf.env_fields().items() if ref_env.get(f, _UNSET) != v}
    task_fields = {f: v for f, v in tf.task_fields().items() if ref_task.get(f, _UNSET) != v}
    if task_fields:
        kwargs["task_fields"] = tuple(sorted(task_fields.items()))
    return kwargs


_UNSET = object()


def preset_of(tf: TaskFile) -> TaskPreset:
    """The preset a task file declares. A file that extends a preset runs on its env, with the values the file
    itself sets passed as env kwargs: RobotEnvConfig fields as they are, the Task fields as `task_fields` (a tuple
    of (field, value) pairs, envs.env.make_twin_env). A stand-alone twin file (a copied built-in one) passes every
    value that differs from the built-in one of its scene (`twin_file_kwargs`)."""
    fb = tf.sections.get("forward_backward")
    backward = ForwardBackward(fb["backward_task"], fb["forward_goal"], fb["backward_goal"]) if fb else None
    if tf.base is None:
        t = tf.sections["task"]
        return TaskPreset(tf.name, t["env_id"], tf.description, t.get("env_module", "envs"),
                          tuple(twin_file_kwargs(tf).items()), backward, tf)
    base = preset_of(tf.base)
    kwargs = dict(base.env_kwargs)
    kwargs.update(tf.env_fields(only_own=True))
    fields = {**dict(kwargs.get("task_fields", ())), **tf.task_fields(only_own=True)}  # a lab base's, then its own
    if fields:
        kwargs["task_fields"] = tuple(sorted(fields.items()))
    return TaskPreset(tf.name, base.env_id, tf.description or base.description, base.env_module,
                      tuple(kwargs.items()), backward, tf)


PRESETS: dict[str, TaskPreset] = {name: preset_of(builtin(name)) for name in builtin_names()}
"""The built-in presets, from the task files in robot_rl/task_files."""


def get_preset(name: str) -> TaskPreset:
    """The preset called `name`, or the one a task file declares when `name` is a file's path (`--task` takes
    either); UnknownTaskError lists the known names, ConfigError names a task file's bad field."""
    if name not in PRESETS and looks_like_task_file(name):
        return preset_of(load_task_file(name))
    try:
        return PRESETS[name]
    except KeyError:
        raise UnknownTaskError(f"unknown task '{name}'; known tasks: {', '.join(sorted(PRESETS))}") from None


def task_reward(task: str | None) -> tuple[str | None, int | None]:
    """The `[reward]` of the task `--task` names: (its source as a `--reward` value: env, human or classifier:DIR;
    its gate_k), each None when the file does not say (and both for no task). Every command that decides a reward
    (actor, train, sim) takes these as its defaults; an explicit `--reward` / `--reward-gate-k` wins."""
    if task is None:
        return None, None
    tf = get_preset(task).task_file
    return (None, None) if tf is None else (tf.reward_arg(), tf.reward_gate_k)


def task_obs_mode(task: str | None, default: str = "state") -> str:
    """The observation mode of the task `--task` names (its file's `[observation] mode`: a lab's task file says
    "pixels", as a robot has no object state), `default` when it does not say, or when the task cannot be read
    (the command reports that itself)."""
    if task is None:
        return default
    try:
        tf = get_preset(task).task_file
    except RobotRLError:
        return default
    return default if tf is None else tf.obs_mode or default


class ObsModeFromTaskParser(argparse.ArgumentParser):
    """An argparse parser whose `--obs-mode` (dest obs_mode, default None) defaults to the `--task`'s
    `[observation] mode` (task_obs_mode) after parsing: an explicit flag wins; args.obs_mode is always set."""

    obs_mode_default = "state"

    def parse_known_args(  # type: ignore[override]  # argparse overloads it on the namespace type
            self, args: Sequence[str] | None = None, namespace: Any = None) -> tuple[argparse.Namespace, list[str]]:
        ns, rest = super().parse_known_args(args, namespace)
        if getattr(ns, "obs_mode", "") is None:
            ns.obs_mode = task_obs_mode(getattr(ns, "task", None), self.obs_mode_default)
        return ns, rest
