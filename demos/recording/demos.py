"""Recording demonstrations (`robot-rl record-demos`): a teleop device (or the scripted expert) drives the env,
each finished episode is written at once, atomically, in the episode format of robot_rl.episodes (so Ctrl-C never
loses a finished episode; recording appends to an existing directory). Failed episodes are dropped unless
`keep_failures`. An episode succeeds when the env says so (the twin's task success) or when the person presses the
device's success button (a "success" event), which also ends it: over a hardware robot server, which reports no
task success, the button is the only way to keep an episode, so a device that binds none is refused there before
anything is opened (`require_demo_success`), unless `keep_failures`.

`reward="classifier:DIR"` records the demos with the reward a hardware-faithful run will train on (HIL-SERL records
its demos with the reward classifier on): the twin does not end an episode at its own success, the classifier's
gated decision (`reward_gate_k`, default the card's) gives each step's reward and ends the episode, and only an
episode the classifier (or the person's success button) ended counts as a success. The demos then end where the
run's online episodes end, not earlier at the first frame the twin calls a success.

`camera_latency_ms` / `action_delay_ms` (twin only) record under the twin's simulated hardware timing: a faithful run
sees frames 100 ms late by default, and demos recorded on a real arm carry its cameras' latency too, so demos for
such a run should be recorded with the same timing (the scripted expert acts on the true state, so only the
recorded frames and the arm's lag change).

The env: the preset's twin in process (robot_rl.gym_env, the one env builder), or a RobotEnv over a robot server
(`robot`, envs.remote.make_remote_env). `cube_start="tray"` (twin cube-relocate tasks): each episode's cube starts
anywhere on the tray floor outside the target zone instead of in the start zone. `scenes="spread"` (in-process
twin): the episodes' seeds are chosen so their scenes cover the task's start area (demos.recording.scenes).

The options are `RecordDemosConfig`, one field per command-line flag (`record_demos_arg_parser`; launch files build
these command lines, and tests parse them the same way).

Usage::

    record_demos(RecordDemosConfig(task="twin-reach", episodes=20, out=Path("demos/reach")))     # exit code 0
    env = make_recording_env("twin-reach", robot=None, keys=None, obs_mode="state")
    ep = record_episode(env, make_device("scripted", task="twin-reach"), seed=0, task="twin-reach")
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from demos.devices.operators import require_success_binding, teleop_device_options
from demos.devices.teleop import DEVICES, build_hardware_device, make_device
from demos.recording.scenes import SCENES, spread_seeds
from envs.devices import HumanDevice
from robot_rl.config import Config, require
from robot_rl.episodes import Episode, episode_paths, save_episode
from robot_rl.errors import ConfigError
from robot_rl.gym_env import env_spec_of, make_gym_env
from robot_rl.presets import PRESETS, get_preset
from robot_rl.timing import add_timing_flags, timing_overrides


@dataclasses.dataclass(frozen=True)
class RecordDemosConfig(Config):
    """The options of `robot-rl record-demos` (the field names are the flags' dests; see the parser for help)."""

    task: str = "twin-reach"
    teleop: str = "scripted"
    episodes: int = 20
    out: Path = Path("demos")
    obs_mode: str = "pixels"
    image_size: int | None = None
    noise: float = 0.0
    seed: int = 0
    scenes: str = "seeded"
    cube_start: str | None = None
    keep_failures: bool = False
    max_attempts: int | None = None
    robot: str | None = None
    allow_twin_box: bool = False
    keys: str | None = None
    device_config: str | None = None
    reward: str = "env"
    reward_gate_k: int | None = None
    camera_latency_ms: float | None = None
    action_delay_ms: float | None = None

    def validate(self) -> None:
        if self.episodes < 1:
            raise ConfigError(f"--episodes={self.episodes} must be >= 1")
        require(self.reward == "env" or self.reward.startswith("classifier:"), "reward", self.reward,
                "must be env (the twin's success or the person's success button) or classifier:DIR")
        require(self.reward_gate_k is None or self.reward_gate_k >= 1, "reward_gate_k", self.reward_gate_k,
                "must be an integer >= 1")
        timing_overrides(False, self.camera_latency_ms, self.action_delay_ms)  # a bad value fails here
        require(self.teleop in DEVICES, "teleop", self.teleop, f"must be one of {list(DEVICES)}")
        require(self.cube_start in (None, "zone", "tray"), "cube_start", self.cube_start, "must be zone or tray")
        require(self.scenes in SCENES, "scenes", self.scenes, f"must be one of {list(SCENES)}")


def record_demos_arg_parser() -> argparse.ArgumentParser:
    """The `robot-rl record-demos` command line (one flag per `RecordDemosConfig` field)."""
    p = argparse.ArgumentParser(prog="robot-rl record-demos", description="`robot-rl record-demos`: record "
                                "teleoperated (or scripted) demonstration episodes to a directory.")
    p.add_argument("--task", required=True, help=f"task preset ({', '.join(PRESETS)}) or task file (.toml)")
    p.add_argument("--teleop", default="scripted", choices=DEVICES, help="teleop device")
    p.add_argument("--episodes", type=int, default=20, help="number of episodes to keep")
    p.add_argument("--out", required=True, type=Path, help="episode directory (created or appended to)")
    p.add_argument("--obs-mode", default="pixels", choices=("pixels", "state"), help="observation mode")
    p.add_argument("--image-size", type=int, default=None, help="camera image size (pixels mode)")
    p.add_argument("--noise", type=float, default=0.0, help="scripted teleop: Gaussian action noise std")
    p.add_argument("--seed", type=int, default=0, help="seed of the first episode (then +1 per episode)")
    p.add_argument("--scenes", default="seeded", choices=SCENES,
                   help="in-process twin: seeded (episode i on seed --seed + i) or spread (the seeds of a pool of "
                        "10 per episode whose scenes put the objects farthest apart first: demos that cover the "
                        "workspace, as a person spreads them on an arm)")
    p.add_argument("--cube-start", default=None, choices=("zone", "tray"),
                   help="twin cube-relocate tasks: the cube starts in the start zone (default) or anywhere on the "
                        "tray outside the target zone")
    p.add_argument("--keep-failures", action="store_true", help="also keep unsuccessful episodes")
    p.add_argument("--max-attempts", type=int, default=None, help="give up after this many episodes (default 3x)")
    p.add_argument("--robot", default=None, metavar="ADDR",
                   help="record on a robot server (robot-rl robot-server: hardware or a twin) instead of an "
                        "in-process twin")
    p.add_argument("--allow-twin-box", action="store_true",
                   help="with --robot on a hardware server: run a task whose workspace box is the twin's, not one "
                        "recorded in the lab (at your own risk)")
    p.add_argument("--keys", default=None, help="CURVE client key directory for a non-loopback --robot")
    p.add_argument("--device-config", default=None, metavar="FILE",
                   help="a hardware --teleop device's config fields as a JSON object (deadzone, scale, buttons, ...)")
    p.add_argument("--reward", default="env", metavar="SOURCE",
                   help="env (the twin's success, or the success button) or classifier:DIR: the classifier's gated "
                        "decision gives the reward and ends each demo, as in the faithful run that trains on them")
    p.add_argument("--reward-gate-k", type=int, default=None, metavar="K",
                   help="with --reward classifier:DIR: K consecutive positive frames (default: the card's)")
    add_timing_flags(p)  # the twin's late frames and late arm, as the run that trains on the demos sees them
    return p


def parse_record_demos_args(argv: Sequence[str]) -> RecordDemosConfig:
    """`robot-rl record-demos`'s arguments as a config (argparse's usage error and exit on bad flags)."""
    return RecordDemosConfig(**vars(record_demos_arg_parser().parse_args(list(argv))))


def make_recording_env(task: str, robot: str | None, keys: str | None, allow_twin_box: bool = False,
                       **env_kwargs: Any) -> Any:
    """The env to record on: the preset's in-process twin (gymnasium.make), or with `robot` a RobotEnv over that
    robot server (envs.remote.make_remote_env; the server's task must be `task`'s). On a server that drives a real
    arm the task's box must come from the lab (envs.task_file.check_served_box; `allow_twin_box` is the exception)."""
    preset = get_preset(task)
    if robot is None:
        return make_gym_env(preset.env_id, preset.env_module, **env_kwargs)
    from envs.remote import make_remote_env
    from envs.task_file import check_served_box, resolve_task
    from robot_rl.keys import ClientKeys

    client_keys = ClientKeys.from_dir(keys) if keys is not None else None
    options = {k: v for k, v in env_kwargs.items()
               if k not in ("task", "obs_mode", "image_size", "task_fields") and v is not None}
    lab = preset.task_file is not None and preset.task_file.base is not None  # a lab's task file: its box, reset, ...
    env = make_remote_env(robot, task=resolve_task(task) if lab else None,
                          obs_mode=env_kwargs.get("obs_mode", "pixels"),
                          image_size=env_kwargs.get("image_size"), keys=client_keys, **options)
    check_served_box(env, task, allow_twin_box)  # before anything moves
    return env


def env_spec_dict(env: Any, task: str) -> dict[str, Any]:
    """The env's EnvSpec as a dict, stored in every episode so readers can check compatibility."""
    return env_spec_of(env, task).to_dict()


def record_episode(env: Any, device: HumanDevice, seed: int, task: str,
                   env_kwargs: dict[str, Any] | None = None) -> Episode:
    """Run one episode driven by `device`; returns it (actions executed, flags from the env).

    `env_kwargs` (what the env was made with) is stored in the episode's info so replays rebuild the same env.
    """
    device.reset()
    obs, info = env.reset(seed=seed)
    observations, actions, rewards, terms, truncs, succ, interv = [obs], [], [], [], [], [], []
    while True:
        cmd = device.poll(env.unwrapped.last_state)
        action = cmd.action()
        obs, reward, terminated, truncated, info = env.step(action)
        observations.append(obs)
        actions.append(action)
        rewards.append(reward)
        terms.append(terminated)
        truncs.append(truncated)
        pressed = "success" in cmd.events  # the person says the task is done: a successful end
        # with a reward model (classifier) its gated decision is the success, never the twin's own flag
        done = info["reward_success"] if "reward_success" in info else info.get("success", False)
        succ.append(bool(done) or pressed)
        interv.append(True)  # every step of a demo is a human (teleop) action
        if terminated or truncated or pressed or "quit" in cmd.events:
            break
    return Episode.from_steps(observations, actions, rewards, terms, truncs, intervention=interv, success=succ,
                              task=task, spec=env_spec_dict(env, task),
                              info={"seed": seed, "teleop": getattr(device, "name", "?"),
                                    "env_kwargs": dict(env_kwargs or {})})


def with_classifier_reward(env: Any, cfg: RecordDemosConfig) -> Any:
    """`env` under cfg.reward's classifier (learners.rewards.reward_model.RewardModelWrapper), or `env` itself
    for 'env'; ConfigError when the card's cameras or sizes do not fit the env's."""
    if cfg.reward == "env":
        return env
    from learners.rewards.reward_model import RewardModelWrapper, camera_shapes_of_env, make_reward_model

    model = make_reward_model(cfg.reward, camera_shapes_of_env(env), None, k=cfg.reward_gate_k,
                              where=f"record-demos' {cfg.task} cameras (--obs-mode {cfg.obs_mode}, --image-size)")
    assert model is not None
    return RewardModelWrapper(env, model)


def served_backend(env: Any) -> str:
    """The backend of the robot server `env` steps over ("franky", "ros2", "twin"), "" for an in-process twin."""
    info = getattr(getattr(env.unwrapped, "robot", None), "info", None)
    return str(info.get("backend", "")) if isinstance(info, dict) else ""


def require_demo_success(teleop: str, options: dict[str, Any], backend: str, keep_failures: bool) -> None:
    """ConfigError when the episodes recorded with `teleop` over `backend` could never be kept: a hardware backend
    (envs.remote.HARDWARE_BACKENDS) reports no task success, so only the device's success button keeps an episode
    (without `keep_failures`); checked on the unopened device."""
    from envs.remote import HARDWARE_BACKENDS

    if backend not in HARDWARE_BACKENDS or keep_failures:
        return
    if teleop == "scripted":
        raise ConfigError(f"record-demos --teleop scripted over a {backend} robot server: the scripted expert steers "
                          "by object poses only the twin reports; use spacemouse, gamepad or keyboard")
    require_success_binding(teleop, build_hardware_device(teleop, **options).config,
                            f"record-demos over a {backend} robot server (hardware reports no task success: the "
                            "person's success button ends an episode and keeps it; or --keep-failures)")


def record_demos(cfg: RecordDemosConfig) -> int:
    """Record until `cfg.episodes` episodes are kept (or `max_attempts`, default 3x, were tried), printing one line
    per episode; returns 0, 1 when fewer were kept, 130 on Ctrl-C (the finished episodes are on disk)."""
    preset = get_preset(cfg.task)
    env_kwargs = preset.make_kwargs(obs_mode=cfg.obs_mode, image_size=cfg.image_size)
    if cfg.cube_start is not None:
        if cfg.robot is not None or not cfg.task.startswith("twin-cube-relocate"):
            raise ConfigError(f"--cube-start {cfg.cube_start}: only for the in-process twin's cube-relocate tasks "
                              f"(twin-cube-relocate, twin-cube-relocate-back), not --task {cfg.task}"
                              + (" with --robot" if cfg.robot is not None else ""))
        env_kwargs["cube_start"] = cfg.cube_start
    if cfg.scenes == "spread" and cfg.robot is not None:
        raise ConfigError("--scenes spread: only for the in-process twin, not with --robot (on an arm the objects "
                          "are where the person puts them: spread them over the workspace yourself)")
    options = teleop_device_options(cfg.teleop, cfg.device_config)
    env_kwargs.update(timing_overrides(False, cfg.camera_latency_ms, cfg.action_delay_ms))
    if cfg.reward != "env":
        from learners.rewards.reward_model import add_reward_cameras, env_overrides

        env_kwargs.update(env_overrides(cfg.reward))  # the classifier, not the twin's success, ends an episode
        add_reward_cameras(env_kwargs, (cfg.reward,), cfg.obs_mode)  # cameras the observation lacks: into info
    max_attempts = cfg.max_attempts or 3 * cfg.episodes
    env = make_recording_env(cfg.task, cfg.robot, cfg.keys, cfg.allow_twin_box, **env_kwargs)
    try:
        env = with_classifier_reward(env, cfg)
        require_demo_success(cfg.teleop, options, served_backend(env), cfg.keep_failures)
        seeds = (spread_seeds(env, cfg.seed, max(10 * cfg.episodes, max_attempts)) if cfg.scenes == "spread"
                 else [cfg.seed + i for i in range(max_attempts)])
        device = make_device(cfg.teleop, task=cfg.task, seed=cfg.seed, noise_std=cfg.noise, **options)
    except BaseException:
        env.close()
        raise
    existing = len(episode_paths(cfg.out)) if cfg.out.is_dir() else 0
    kept = attempts = successes = 0
    t0 = time.monotonic()
    try:
        while kept < cfg.episodes and attempts < max_attempts:
            ep = record_episode(env, device, seed=seeds[attempts], task=cfg.task, env_kwargs=env_kwargs)
            attempts += 1
            successes += ep.is_success
            if ep.is_success or cfg.keep_failures:
                path = save_episode(ep, cfg.out)
                kept += 1
                status = f"saved {path.name}"
            else:
                status = "failed, dropped"
            print(f"[record-demos] episode {attempts}: {ep.length} steps, success={ep.is_success} ({status}); "
                  f"kept {kept}/{cfg.episodes}, success rate {successes / attempts:.0%}, "
                  f"{time.monotonic() - t0:.0f}s", flush=True)
    except KeyboardInterrupt:
        print(f"\n[record-demos] interrupted: {kept} episode(s) saved this session, none lost", file=sys.stderr)
        return 130
    finally:
        env.close()
        device.close()
    print(f"[record-demos] done: {kept} new episode(s) in {cfg.out} ({existing + kept} in total)")
    if kept < cfg.episodes:
        print(f"[record-demos] warning: only {kept} of {cfg.episodes} episodes kept after {attempts} attempts",
              file=sys.stderr)
        return 1
    return 0
