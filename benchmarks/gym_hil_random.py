"""gym-hil's pick-cube with a seeded random cube position: `robot_rl_bench/PandaPickCubeRandom-v0`.

The registered `gym_hil/PandaPickCubeBase-v0` always resets to one state (the cube at (0.5, 0) m): an evaluation's
episodes are then copies and a policy can memorise one trajectory. gym-hil's own `random_block_position=True` draws
the cube's xy uniformly in x 0.3..0.5, y -0.15..0.15 m, but from numpy's global RNG, which no env seed reaches. This
module registers the same env with that option on and each reset's draw made from the env's own seeded RNG
(`reset(seed=s)` seeds it; later resets continue it), numpy's global state saved and restored around it. Importing
it registers the id, so `robot-rl train --env-id robot_rl_bench/PandaPickCubeRandom-v0 --env-module gym_hil_random`
(with benchmarks/ on the path) trains on it. Making the env needs gym-hil (the `bench` extra; a clear error names it
otherwise). Run as a script it prints where a seeded reset puts the cube::

    python benchmarks/gym_hil_random.py --seeds 0 1 2
"""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np

ENV_ID = "robot_rl_bench/PandaPickCubeRandom-v0"


class SeededBlockPosition(gymnasium.Wrapper):
    """Seeds numpy's global RNG from the env's own RNG around each reset (gym-hil draws the cube position there)."""

    def __init__(self, env: gymnasium.Env) -> None:
        super().__init__(env)
        self._rng = np.random.default_rng()

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        saved = np.random.get_state()  # noqa: NPY002 (gym-hil draws from the legacy global RNG)
        np.random.seed(int(self._rng.integers(2**31)))  # noqa: NPY002 (gym-hil draws from the legacy global RNG)
        try:
            return self.env.reset(seed=seed, options=options)
        finally:
            np.random.set_state(saved)  # noqa: NPY002 (gym-hil draws from the legacy global RNG)


def make(**kwargs: Any) -> gymnasium.Env:
    """The wrapped env (importing gym-hil registers its base env; MissingExtraError without the `bench` extra)."""
    from robot_rl.extras import optional_import

    optional_import("gym_hil", extra="bench", purpose="gym-hil's pick-cube env")
    return SeededBlockPosition(gymnasium.make("gym_hil/PandaPickCubeBase-v0", random_block_position=True, **kwargs))


if ENV_ID not in gymnasium.registry:
    gymnasium.register(ENV_ID, entry_point=make, max_episode_steps=100)


def main() -> None:
    from _prelude import bench_parser, set_env_defaults

    set_env_defaults(one_thread=True)  # headless MuJoCo rendering (gym-hil builds a renderer) before it loads
    p = bench_parser(__doc__)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="reset seeds")
    args = p.parse_args()
    env = gymnasium.make(ENV_ID)
    try:
        for seed in args.seeds:
            cube = env.reset(seed=seed)[0]["environment_state"]
            print(f"seed {seed}: cube at x {cube[0]:.3f} m, y {cube[1]:.3f} m, z {cube[2]:.3f} m")
    finally:
        env.close()


if __name__ == "__main__":
    main()
