"""A scripted, privileged-state expert for gym-hil's `gym_hil/PandaPickCubeBase-v0`, its rollouts, and its demos.

The env (gym-hil, the `bench` extra; read from its source, gym_hil/envs/panda_pick_gym_env.py and
gym_hil/mujoco_gym_env.py, version 0.1.14):

- Observation, a Dict of float32 Boxes (state mode, `image_obs=False`, the registered default):
  `agent_pos` (18,): [0:7] the Panda's joint angles (rad), [7:14] joint velocities (rad/s), [14] the gripper's
  *command* (the actuator's ctrl, 0 = open .. 255 = closed; not the fingers' measured opening), [15:18] the TCP
  position: the 2F-85's pinch site (m, world frame; z up, the table at z = 0).
  `environment_state` (3,): the cube's centre (m, world frame): the privileged object state a real arm lacks.
  At reset the TCP is at about (0.49, 0, 0.078) and the cube (a 4 cm cube) at (0.50, 0, 0.02): the block position
  is not random in the registered env (`random_block_position=False`), so every reset is the same state; the
  benchmark's env id (ENV_ID, benchmarks/gym_hil_random.py) draws the cube's xy in x 0.3..0.5, y -0.15..0.15 m from
  the env's seed.
- Action, Box [-1, 1]^7: [0:3] a position delta (m per 0.1 s step, world frame) added to the mocap target that
  the op-space controller tracks, clipped to x 0.2..0.6, y -0.3..0.3, z 0..0.5 m; so +-1 is +-1 m per step and
  the expert's steps are a few cm. [3:6] rotation: ignored by the env (the orientation target stays fixed).
  [6] a gripper delta added to the command (normalised 0 = open .. 1 = closed, clipped): +1 closes fully in one
  step, -1 opens.
- Success: the cube lifted more than 0.1 m above its start height; the step reward (sparse) is 1.0 then, and
  `info["succeed"]` is True, and the episode terminates (also when the cube leaves the sampling area by 5 cm).
  Episodes are truncated at 100 steps (10 s). `robot-rl train` reads success from info["success"]: pass
  `--success-key succeed`.

The expert (`expert_action`, a pure function of the observation and a small `ExpertState`): reach above the
cube (xy aligned at `hover_m` over its centre), descend until the pinch point is at the cube's centre, close the
gripper and hold for `close_steps` steps while the fingers close, then lift; if the cube falls out of the hand
while lifting, open and start over. Position steps are `gain` x the remaining error, at most `max_step_m` per
axis, plus optional Gaussian noise (`noise` x `max_step_m`, for varied demos). `rollout` runs it for one episode;
`record_demos` writes successful episodes in the project's episode format (robot_rl.episodes: `Episode.from_steps`
+ `save_episode`, the writer `robot-rl record-demos` uses) for `robot-rl train --demos DIR`.

Run as a script it measures the expert's success rate (no files written)::

    python benchmarks/third_party_expert.py --episodes 30               # seeds 0..29, no noise
    python benchmarks/third_party_expert.py --episodes 30 --noise 0.3   # the noise the demos use
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from _prelude import bench_parser, print_table, set_env_defaults

set_env_defaults(one_thread=True)  # before numpy: its BLAS reads the thread count when it loads

import numpy as np  # noqa: E402

ENV_ID = "robot_rl_bench/PandaPickCubeRandom-v0"
ENV_MODULE = "gym_hil_random"
"""PandaPickCubeBase-v0 with the cube at a seeded random position (benchmarks/gym_hil_random.py)."""
SUCCESS_KEY = "succeed"
"""gym-hil's info key of the task's success."""

GRIPPER_INDEX = 14
"""agent_pos[14]: the gripper command, 0 (open) .. GRIPPER_FULL (closed)."""
GRIPPER_FULL = 255.0
TCP_SLICE = slice(15, 18)
"""agent_pos[15:18]: the TCP (pinch site) position, m, world frame."""
ACTION_DIM = 7

PHASES = ("reach", "descend", "close", "lift")


@dataclasses.dataclass(frozen=True)
class ExpertConfig:
    """The scripted expert's gains and thresholds (m, world frame; steps of 0.1 s)."""

    max_step_m: float = 0.03
    """Largest position action per axis and step (m)."""
    gain: float = 1.0
    """Fraction of the remaining position error commanded per step."""
    hover_m: float = 0.05
    """Height of the pinch point above the cube's centre while aligning in xy (m)."""
    xy_tol_m: float = 0.008
    """xy distance (pinch point to cube centre) below which the expert descends (m)."""
    grasp_tol_m: float = 0.008
    """Distance (pinch point to cube centre) at which the expert closes the gripper (m)."""
    close_steps: int = 4
    """Steps the expert holds still with the gripper closing before it lifts."""
    lift_m: float = 0.2
    """Lift target above the cube's height when the grasp began (m; success needs 0.1)."""
    lost_m: float = 0.04
    """While lifting, a cube farther than this from the pinch point was dropped: open and start over (m)."""
    noise: float = 0.0
    """Gaussian noise on the position actions, std as a fraction of max_step_m (0: none)."""

    def __post_init__(self) -> None:
        for name in ("max_step_m", "gain", "hover_m", "xy_tol_m", "grasp_tol_m", "lift_m", "lost_m"):
            if not getattr(self, name) > 0:
                raise ValueError(f"ExpertConfig.{name}={getattr(self, name)} must be > 0")
        if self.close_steps < 1 or self.noise < 0:
            raise ValueError(f"ExpertConfig: close_steps={self.close_steps} must be >= 1, noise={self.noise} >= 0")


@dataclasses.dataclass(frozen=True)
class ExpertState:
    """Where the expert is in its routine: the phase, steps spent in it, and the cube's height (m) at the grasp."""

    phase: str = "reach"
    steps: int = 0
    grasp_z_m: float = 0.0


def observation_parts(obs: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray, float]:
    """(TCP position (3,) m world, cube centre (3,) m world, gripper command 0 = open .. 1 = closed) of a
    PandaPickCubeBase-v0 state observation; ValueError for another layout."""
    if not isinstance(obs, Mapping) or "agent_pos" not in obs or "environment_state" not in obs:
        raise ValueError("expected a PandaPickCubeBase-v0 state observation (keys agent_pos, environment_state; "
                         f"got {sorted(obs) if isinstance(obs, Mapping) else type(obs).__name__})")
    agent = np.asarray(obs["agent_pos"], np.float64)
    cube = np.asarray(obs["environment_state"], np.float64)
    if agent.shape != (18,) or cube.shape != (3,):
        raise ValueError(f"agent_pos must be (18,) and environment_state (3,), got {agent.shape} and {cube.shape}")
    return agent[TCP_SLICE], cube, float(agent[GRIPPER_INDEX] / GRIPPER_FULL)


def _move(tcp: np.ndarray, target: np.ndarray, cfg: ExpertConfig) -> np.ndarray:
    return np.clip(cfg.gain * (target - tcp), -cfg.max_step_m, cfg.max_step_m)


def expert_action(obs: Mapping[str, Any], state: ExpertState, cfg: ExpertConfig = ExpertConfig(),
                  rng: np.random.Generator | None = None) -> tuple[np.ndarray, ExpertState]:
    """The expert's action (7,) in the env's units (m per step; gripper delta) and its next state, from one
    observation. `rng` draws the position noise when cfg.noise > 0."""
    tcp, cube, _ = observation_parts(obs)
    move, grip = np.zeros(3), -1.0
    phase, steps, grasp_z = state.phase, state.steps, state.grasp_z_m
    xy_err = float(np.linalg.norm(cube[:2] - tcp[:2]))
    if phase == "reach" and xy_err < cfg.xy_tol_m:
        phase, steps = "descend", 0
    elif phase == "descend" and xy_err > 2 * cfg.xy_tol_m:
        phase, steps = "reach", 0
    elif phase == "descend" and float(np.linalg.norm(cube - tcp)) < cfg.grasp_tol_m:
        phase, steps, grasp_z = "close", 0, float(cube[2])
    elif phase == "close" and steps >= cfg.close_steps:
        phase, steps = "lift", 0
    elif phase == "lift" and float(np.linalg.norm(cube - tcp)) > cfg.lost_m:
        phase, steps = "reach", 0  # dropped it: open (below) and start over
    if phase == "reach":
        move = _move(tcp, cube + np.array([0.0, 0.0, cfg.hover_m]), cfg)
    elif phase == "descend":
        move = _move(tcp, cube, cfg)
    elif phase == "close":
        grip = 1.0
    else:  # lift
        move, grip = _move(tcp, np.array([tcp[0], tcp[1], grasp_z + cfg.lift_m]), cfg), 1.0
        move[:2] = 0.0
    if cfg.noise > 0 and rng is not None and phase != "close":
        move = move + rng.normal(0.0, cfg.noise * cfg.max_step_m, 3)
    action = np.zeros(ACTION_DIM)
    action[:3], action[6] = move, grip
    return np.clip(action, -1.0, 1.0), ExpertState(phase, steps + 1, grasp_z)


def make_env(**kwargs: Any) -> Any:
    """gymnasium.make(ENV_ID) after importing gym_hil (which registers it); ConfigError without the `bench` extra."""
    from robot_rl.gym_env import make_gym_env

    return make_gym_env(ENV_ID, ENV_MODULE, **kwargs)


def rollout(env: Any, seed: int, cfg: ExpertConfig = ExpertConfig()) -> dict[str, Any]:
    """One expert episode (reset with `seed`; the noise is seeded with it too): its observations (T+1), actions,
    rewards, flags and per-step success (info["succeed"])."""
    rng = np.random.default_rng(seed)
    obs, _ = env.reset(seed=seed)
    state = ExpertState()
    ep: dict[str, list[Any]] = {k: [] for k in ("actions", "rewards", "terminated", "truncated", "success")}
    observations = [obs]
    while True:
        action, state = expert_action(obs, state, cfg, rng)
        obs, reward, terminated, truncated, info = env.step(action.astype(np.float32))
        observations.append(obs)
        for key, val in zip(ep, (action.astype(np.float32), float(reward), bool(terminated), bool(truncated),
                                 bool(info.get(SUCCESS_KEY, False))), strict=True):
            ep[key].append(val)
        if terminated or truncated:
            break
    return {"observations": observations, **ep, "seed": seed}


def record_demos(out: Path, episodes: int, cfg: ExpertConfig = ExpertConfig(), first_seed: int = 0,
                 max_attempts: int | None = None, log: Any = print) -> dict[str, Any]:
    """Roll the expert out from seed `first_seed` on until `episodes` successful episodes are in `out` (episodes
    already there count; failures are dropped), each written with robot_rl.episodes.save_episode (spec: the env's
    EnvSpec named ENV_ID, as `robot-rl train --env-id` names its run's); gives up after `max_attempts` rollouts
    (default 3x). Returns {"kept", "attempts", "success_rate" (of this call's rollouts; None when none ran)}."""
    from robot_rl.episodes import Episode, episode_paths, save_episode
    from robot_rl.gym_env import env_spec_of

    have = len(episode_paths(out)) if out.is_dir() else 0
    limit = max_attempts if max_attempts is not None else 3 * max(episodes - have, 1)
    env = make_env()
    attempts = successes = 0
    try:
        spec = env_spec_of(env, ENV_ID).to_dict()
        while have < episodes and attempts < limit:
            ep = rollout(env, first_seed + attempts, cfg)
            attempts += 1
            ok = any(ep["success"])
            successes += ok
            if ok:
                save_episode(Episode.from_steps(
                    ep["observations"], ep["actions"], ep["rewards"], ep["terminated"], ep["truncated"],
                    intervention=[True] * len(ep["actions"]), success=ep["success"], task=ENV_ID, spec=spec,
                    info={"seed": ep["seed"], "teleop": "third_party_expert", "expert": dataclasses.asdict(cfg)}),
                    out)
                have += 1
            log(f"[expert] seed {ep['seed']}: {'success' if ok else 'failure'} in {len(ep['actions'])} steps "
                f"({have}/{episodes} kept)")
    finally:
        env.close()
    return {"kept": have, "attempts": attempts, "success_rate": successes / attempts if attempts else None}


def measure(episodes: int, cfg: ExpertConfig = ExpertConfig(), first_seed: int = 0) -> dict[str, Any]:
    """The expert's success over seeds first_seed .. first_seed + episodes - 1: rate, per-episode lengths (steps,
    successes only) and wall time per episode (s)."""
    env = make_env()
    lengths, ok, t0 = [], 0, time.perf_counter()
    try:
        for i in range(episodes):
            ep = rollout(env, first_seed + i, cfg)
            if any(ep["success"]):
                ok += 1
                lengths.append(len(ep["actions"]))
    finally:
        env.close()
    return {"episodes": episodes, "first_seed": first_seed, "successes": ok, "success_rate": ok / episodes,
            "steps_mean": float(np.mean(lengths)) if lengths else None, "steps_max": max(lengths, default=None),
            "noise": cfg.noise, "s_per_episode": (time.perf_counter() - t0) / episodes}


def main(argv: list[str] | None = None) -> int:
    p = bench_parser(__doc__)
    p.add_argument("--episodes", type=int, default=30, help="episodes (seeds first-seed ..)")
    p.add_argument("--first-seed", type=int, default=0)
    p.add_argument("--noise", type=float, nargs="+", default=[0.0],
                   help="position noise std(s), fraction of the expert's largest step (one row each)")
    args = p.parse_args(argv)
    if args.episodes < 1 or min(args.noise) < 0:
        raise SystemExit("--episodes must be >= 1 and --noise >= 0")
    rows = [measure(args.episodes, ExpertConfig(noise=n), args.first_seed) for n in args.noise]
    print_table(f"{'noise':>6} {'success':>8} {'episodes':>9} {'steps (mean)':>13} {'s/episode':>10}",
                [f"{r['noise']:>6.2f} {r['success_rate']:>8.0%} {r['episodes']:>9} "
                 f"{r['steps_mean'] or float('nan'):>13.1f} {r['s_per_episode']:>10.3f}" for r in rows])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
