"""The env an actor steps: the task's MuJoCo twin in process, or a `RobotEnv` over a robot server (RemoteRobot),
with an operator's interventions (the scripted one or a person at a teleop device) and a reward model (a classifier
or a human's success key) on top.

Base envs come from the one env builder (robot_rl.gym_env through envs.presets.make_env) or, over a robot server,
from envs.remote.make_remote_env. `backend_of` says what drives the env (the actor's warm-up default: random
actions on the twin only, hold on hardware).

Usage::

    env = make_actor_env("twin-pick-cube", "state", None, None)                       # the twin, in process
    env = make_actor_env("twin-pick-cube", "pixels", 128, "tcp://127.0.0.1:5560")     # over a robot server
    env = make_actor_env("twin-pick-cube", "state", None, None, intervene="scripted", reward="human",
                         faithful=True)                   # HIL-SERL on the hardware-faithful twin
    env = make_actor_env("configs/lab.toml", "state", None, "tcp://10.0.0.2:5560", intervene="spacemouse",
                         reward="human")          # a person at a SpaceMouse, on hardware (the lab's task file)
    backend_of(env)                                       # "twin", "franky", "ros2", ...
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from robot_rl.errors import ConfigError


def backend_of(env: Any) -> str:
    """'twin' for the in-process twin or a robot server serving the twin, else the served backend's name."""
    robot = getattr(getattr(env, "unwrapped", env), "robot", None)
    info = getattr(robot, "info", None)
    if isinstance(info, dict):  # a RemoteRobot: what the server serves
        return str(info.get("backend", ""))
    return "twin" if type(robot).__name__ == "TwinRobot" else type(robot).__name__


def check_operator_backend(intervene: str | None, backend: str) -> None:
    """ConfigError for `--intervene scripted` on a backend other than the twin: the scripted operator steers by the
    object poses only the twin reports (envs.twin.experts); on a real robot a person intervenes at a device."""
    if intervene == "scripted" and backend != "twin":
        raise ConfigError(f"--intervene scripted: the scripted operator steers by the object poses only the twin "
                          f"reports, and this robot server serves the {backend or 'unknown'} backend; a person "
                          f"intervenes with --intervene spacemouse, gamepad or keyboard")


def make_actor_env(task: str, obs_mode: str, image_size: int | None, robot: str | None,
                   intervene: str | None = None, seed: int = 0, reward: str = "env",
                   reward_audit: Path | None = None, task_config: str | None = None, faithful: bool = False,
                   evaluation: bool = False, timing: dict[str, float] | None = None,
                   device_config: str | None = None, allow_twin_box: bool = False,
                   reward_gate_k: int | None = None) -> Any:
    """The env an actor steps: the twin in process, or a RobotEnv over a robot server (`robot`); with a
    classifier or human `reward`, wrapped in learners.rewards.reward_model.RewardModelWrapper (outermost);
    `task` is a preset's name or a task file's path (robot_rl.task_file); over a robot server the env takes the file's
    Task (box, reset, ...) and env fields (cameras, image size, home joints, gains), and on a hardware backend it
    refuses a task without a box from the lab (envs.task_file.require_lab_box) unless `allow_twin_box`.
    `task_config` (deprecated; a task file or a `robot-rl safety-box record` JSON) stands in for `task`'s file.
    `faithful`: the hardware-faithful mode (envs.env_config.FAITHFUL; for an `evaluation` env only its observation:
    no object state). A classifier `reward` in state mode: the env renders the card's cameras (at the card's size,
    or `image_size`; over a robot server at the size it serves) into info["reward_images"], never into the
    observation (learners.rewards.reward_model.reward_camera_overrides). A faithful acting env needs a reward model
    (`reward` classifier:DIR or human): ConfigError for 'env', whose reward would be 0 on every step. `timing`: the
    twin's simulated camera latency / action delay (envs.env_config.timing_overrides; evaluation envs too, the
    policy sees the same late frames there; a robot server serving hardware refuses it). `reward_gate_k`: a
    classifier's gate, K consecutive positive frames (None: the card's).
    `intervene` (robot_rl.operators: scripted, spacemouse, gamepad, keyboard; `device_config` a hardware device's
    JSON config file): the operator's interventions replace the policy's actions, and under `reward` human its
    success key ends the episode (demos.devices.operators, through robot_rl.gym_env.with_operator)."""
    from envs.env_config import FAITHFUL
    from envs.presets import make_env
    from learners.rewards.reward_model import (
        RewardModelWrapper,
        add_reward_cameras,
        camera_shapes_of_env,
        env_overrides,
        make_reward_model,
        parse_reward_source,
    )
    from robot_rl.gym_env import with_operator
    from robot_rl.operators import check_intervene
    from robot_rl.presets import get_preset

    kind, _ = parse_reward_source(reward)
    check_intervene(intervene, device_config, reward)
    if faithful and not evaluation and kind == "env":
        raise ConfigError("--faithful: the hardware-faithful env gives no reward (no Task.success); pass --reward "
                          "classifier:DIR (robot-rl train-classifier) or --reward human (with --intervene)")
    overrides = env_overrides(reward)
    if faithful:
        overrides.update({"object_obs": False} if evaluation else FAITHFUL)
    overrides.update(timing or {})
    # the card's cameras the observation lacks (state mode: every one; an evaluation counting a classifier's
    # success too) are rendered into info
    overrides["image_size"] = image_size
    source = task_config if task_config is not None else task
    observed = dict(get_preset(source).env_kwargs).get("camera_names") if kind == "classifier" else None
    add_reward_cameras(overrides, (reward,), obs_mode, served_size=robot is not None, camera_names=observed)
    image_size = overrides.pop("image_size")
    try:
        if robot is None:
            env = make_env(task, obs_mode=obs_mode, image_size=image_size, **overrides)
        else:
            from envs.remote import make_remote_env
            from envs.task_file import check_served_box, resolve_task

            file_fields = {k: v for k, v in get_preset(source).env_kwargs if k != "task_fields"}
            size = image_size if image_size is not None else file_fields.pop("image_size", None)
            remote_env = make_remote_env(robot, task=resolve_task(source), obs_mode=obs_mode, image_size=size,
                                         **{**file_fields, **overrides})
            env = remote_env
            check_served_box(remote_env, source, allow_twin_box)  # what the server serves; nothing moved yet
    except ConfigError as err:
        if "reward_cameras" not in overrides:
            raise
        raise ConfigError(f"--reward {reward} with --obs-mode {obs_mode} (the env renders the card's cameras "
                          f"{list(overrides['reward_cameras'])} for it): {err}") from None
    try:
        check_operator_backend(intervene, backend_of(env))
    except ConfigError:
        env.close()
        raise
    env = with_operator(env, intervene, task, seed=seed, press_success=kind == "human", device_config=device_config)
    try:
        where = (f"the actor's {task} reward cameras (the env renders the classifier's cameras its "
                 f"--obs-mode {obs_mode} observation lacks; --image-size)" if "reward_cameras" in overrides
                 else f"the actor's {task} observation (--obs-mode {obs_mode}, --image-size)")
        model = make_reward_model(reward, camera_shapes_of_env(env), reward_audit, k=reward_gate_k, where=where)
    except Exception:
        env.close()
        raise
    return env if model is None else RewardModelWrapper(env, model)
