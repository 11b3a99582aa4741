"""CI learning test: SAC (no demos) solves gymnasium's Pendulum-v1 on one CPU thread, with fixed seeds.

Solved = mean return > -250 over 10 deterministic evaluation episodes (a random policy scores about -1200,
a converged one about -145 averaged over many random starts). The 10-episode mean depends on the start states:
for converged policies, 10-episode chunks range from about -65 to -207; the evaluation here uses the hardest
chunk seen (env seeds 100000..100009: -199..-207 when converged), so it passes only when the policy handles the
hard starts. Measured while developing (training seeds 0-3): at 8000 steps seed 1 was not yet converged (-344 on
this chunk), at 10000 steps all four were (-133..-147 mean over 100 episodes). 10000 steps take ~45-60 s on one
shared core.
"""

from __future__ import annotations

import time

import numpy as np
import pytest
import torch

from learners.agents.config import AgentConfig
from learners.agents.sac import SACAgent
from learners.replay.buffer import ReplayBuffer
from learners.training.online import LoopConfig, evaluate, train_online
from robot_rl.specs import EnvSpec


@pytest.mark.slow
def test_sac_solves_pendulum() -> None:
    gym = pytest.importorskip("gymnasium")
    torch.set_num_threads(1)
    env = gym.make("Pendulum-v1")
    spec = EnvSpec.from_spaces("pendulum", env.observation_space, env.action_space, control_hz=20.0)
    # SAC with twin critics (min of both), UTD 1; smaller/faster nets than the robot defaults
    cfg = AgentConfig(ensemble_size=2, ensemble_subsample=None, critic_updates_per_actor_update=1, batch_size=128,
                      hidden_dims=(128, 128), activation="relu", layer_norm=False, discount=0.99, device="cpu",
                      seed=0)
    agent = SACAgent(spec, cfg)
    replay = ReplayBuffer(spec, capacity=10_000, seed=0)
    t0 = time.perf_counter()
    history = list(train_online(env, agent, replay, LoopConfig(total_steps=10_000, start_steps=1000,
                                                               learning_starts=1000, seed=0)))
    train_s = time.perf_counter() - t0
    assert history[-1]["env_step"] == 10_000 and history[-1]["updates"] == 10_000 - 1000 + 1
    returns = evaluate(gym.make("Pendulum-v1"), agent, episodes=10, seed=100_000)
    print(f"pendulum: eval returns {np.round(returns).tolist()} mean {np.mean(returns):.1f} after 10000 steps, "
          f"training {train_s:.1f} s; first episodes {[round(h['episode_return']) for h in history[:3]]}")
    assert np.mean(returns) > -250, returns
