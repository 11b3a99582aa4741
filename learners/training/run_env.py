"""The env of a `robot-rl train` run (and of `train-bc`, `eval` and the forward/backward run), built on the one env
builder robot_rl.gym_env: a twin preset or any gymnasium id, the run's reward-model and hardware-faithful options,
its success key and narrowed action box (learners.training.gym_compat), and the run's EnvSpec.

Usage::

    env = make_run_env(cfg, for_reward_model=True)    # the training env (a run whose reward is not the env's)
    eval_env = make_run_env(cfg)                      # evaluation: the env's own reward and true success
    spec = run_env_spec(env, cfg)                     # named after the task or env id
    cfg = resolve_action_box(cfg)                     # --action-scale auto|S -> cfg.action_low / action_high
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from learners.rewards.reward_model import add_reward_cameras, env_overrides, parse_reward_source
from learners.training.config import TrainConfig
from robot_rl.episodes import load_dir
from robot_rl.errors import ConfigError
from robot_rl.gym_env import env_spec_of, make_gym_env, with_operator
from robot_rl.presets import get_preset
from robot_rl.specs import EnvSpec


def make_run_env(cfg: TrainConfig, for_reward_model: bool = False, task: str | None = None,
             reward_sources: Sequence[str] = (), **env_kwargs: Any) -> Any:
    """gymnasium.make the run's env (preset or env id); ConfigError for a module or env id that does not exist.
    `for_reward_model`: the training env of a run whose reward is not the env's (a twin preset then does not end
    episodes on its own success; `reward_sources` defaults to (cfg.reward,)). `task`: another preset than cfg.task
    (the backward direction's); `env_kwargs`: extra env options (presets). In a faithful run every env drops the
    object observation; only the training env (`for_reward_model`) is made fully hardware-faithful (evaluation envs
    still teleport and report the true success). A state-mode twin preset whose `reward_sources` include a
    classifier renders the cards' cameras at the card's size (unless --image-size says otherwise) into
    info["reward_images"], never into the observation (learners.rewards.reward_model.reward_camera_overrides).
    The training env of a run with --intervene (`for_reward_model`, the run's own task) carries the operator's
    device innermost (robot_rl.gym_env.with_operator): the human's action replaces the policy's."""
    module: str | None = cfg.env_module
    env_id, kwargs = str(cfg.env_id), {}
    if for_reward_model and not reward_sources:
        reward_sources = (cfg.reward,)
    if cfg.task is not None:
        preset = get_preset(task or cfg.task)
        module, env_id = preset.env_module, preset.env_id
        kwargs = preset.make_kwargs(obs_mode=cfg.obs_mode, image_size=cfg.image_size, **env_kwargs)
        kwargs.update(cfg.env_timing())  # the same simulated timing in training and evaluation envs
        if cfg.camera_names():  # --cameras: the observation's cameras (demos' other cameras are dropped)
            kwargs["camera_names"] = cfg.camera_names()
        if for_reward_model:
            kwargs.update(env_overrides(cfg.reward))
            if cfg.faithful:
                kwargs["faithful"] = True
        if cfg.faithful:  # every env of a faithful run observes the same (evaluation envs may still teleport)
            kwargs.setdefault("object_obs", False)
        add_reward_cameras(kwargs, reward_sources, cfg.obs_mode)
    try:
        base = make_gym_env(env_id, module, **kwargs)
    except ConfigError as err:
        if "reward_cameras" not in kwargs:
            raise
        raise ConfigError(f"{' and '.join(s for s in reward_sources if s.startswith('classifier:'))} with "
                          f"--obs-mode {cfg.obs_mode} (the env renders the card's cameras "
                          f"{list(kwargs['reward_cameras'])}): {err}") from None
    if for_reward_model and cfg.intervene is not None and task is None:  # the training env: the operator's
        base = with_operator(base, cfg.intervene, str(cfg.task), seed=cfg.seed,  # device; closes base on failure
                             press_success=parse_reward_source(cfg.reward)[0] == "human",
                             device_config=cfg.device_config)
    from learners.training.gym_compat import ActionBoxWrapper, SuccessKeyWrapper

    env: Any = SuccessKeyWrapper(base, cfg.success_key)
    if cfg.action_low:
        env = ActionBoxWrapper(env, cfg.action_low, cfg.action_high)
    return env


def camera_source(obs_mode: str | None) -> str:
    """Where a run's reward classifier gets its frames, for its card-check errors."""
    if obs_mode == "state":
        return "reward cameras (--obs-mode state renders the classifier's cameras; --image-size)"
    return "observation (--obs-mode / --image-size)"


def resolve_action_box(cfg: TrainConfig, log: Any = print) -> TrainConfig:
    """`cfg` with action_low/high resolved from --action-scale (auto: from the demos' actions), or unchanged."""
    if cfg.action_scale is None or cfg.action_low:
        return cfg
    from learners.training.gym_compat import auto_action_box, parse_action_scale, scaled_action_box

    env = make_run_env(cfg)
    try:
        space = env.action_space
        low, high = np.asarray(space.low, np.float64), np.asarray(space.high, np.float64)
    finally:
        env.close()
    if not (np.all(np.isfinite(low)) and np.all(np.isfinite(high))):
        raise ConfigError("--action-scale needs an env with finite action bounds")
    half = parse_action_scale(cfg.action_scale, int(low.shape[0]))
    if half is None:
        if not cfg.demos:
            raise ConfigError("--action-scale auto needs --demos DIR (it uses the demos' action range)")
        episodes, _ = load_dir(cfg.demos)  # the first --demos directory: the demonstrations, not extra rollouts
        acts = [ep.actions for ep in episodes]
        box = auto_action_box(np.concatenate(acts) if acts else np.zeros((0, low.shape[0])), low, high)
    else:
        box = scaled_action_box(half, low, high)
    log(f"[train] action box: the agent's [-1, 1] covers [{', '.join(f'{a:.3g}' for a in box[0])}] .. "
        f"[{', '.join(f'{b:.3g}' for b in box[1])}] of the env's bounds (--action-scale {cfg.action_scale})")
    return cfg.replace(action_low=tuple(box[0]), action_high=tuple(box[1]))


def run_env_spec(env: Any, cfg: TrainConfig) -> EnvSpec:
    """The run's EnvSpec (robot_rl.gym_env.env_spec_of), named after its task or env id."""
    return env_spec_of(env, cfg.task or str(cfg.env_id))

