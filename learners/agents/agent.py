"""The Agent seam and the backend factory: one interface, two implementations (torch and JAX).

The seam is defined here and nowhere else, in two halves: `SupportsAct` (an action for one observation: what
evaluation needs; learners.agents.policy.Policy, both agents and anything with the same `act` satisfy it) and
`LearnerAgent` (SupportsAct + update, weights for the wire, full state for checkpoints: what the training loops,
the distributed learner, checkpoints and `robot-rl eval` need).

`make_agent(spec, cfg)` builds the learner agent for `cfg.backend`: 'torch' (learners.agents.sac.SACAgent, the default)
or 'jax' (learners.agents.jax.agent.JaxSACAgent, imported only then; without the `jax` extra it is a one-line
MissingExtraError naming it). Everything around the agent is backend-agnostic and shared: replay buffers and
samplers (learners.replay.buffer, n-step targets included), demo and intervention routing, recipes, the training loop,
the distributed learner and checkpoints (learners.training.run_state.TrainingRun). Actors always run the torch policy
(learners.agents.policy): both backends publish `trainable_state()` under the torch policy's parameter names.

Usage::

    agent = make_agent(spec, cfg)                    # cfg.backend picks the implementation
    metrics = agent.update(sampler.sample(agent.cfg.samples_per_update))
    action = agent.act(obs, deterministic=True)      # float32 (A,) in [-1, 1]
    wire = agent.trainable_state()                   # {torch policy name: array} -> policy.load_trainable_state
    arrays = agent.state_dict(); agent.load_state_dict(arrays)   # full state for checkpoints
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

import numpy as np

from learners.agents.config import AgentConfig
from robot_rl.specs import EnvSpec


class SupportsAct(Protocol):
    """The acting half of the seam: what evaluation needs (an agent, or an actor-side policy)."""

    def act(self, obs: Any, deterministic: bool = False) -> np.ndarray:
        """Action in [-1, 1] (float32 (A,)) for one observation."""
        ...


class LearnerAgent(SupportsAct, Protocol):
    """What the training loops, the distributed learner, checkpoints and `robot-rl eval` need from an agent."""

    cfg: AgentConfig
    num_updates: int

    def update(self, batch: Mapping[str, Any]) -> dict[str, float]:
        """critic_updates_per_actor_update critic updates + one actor/temperature update on one batch; pure
        (no I/O, no clocks); float metrics."""
        ...

    def trainable_state(self) -> dict[str, np.ndarray]:
        """The policy's trainable weights under the torch policy's names (what actors load)."""
        ...

    def load_trainable_state(self, arrays: Mapping[str, Any]) -> None: ...

    def state_dict(self) -> dict[str, np.ndarray]:
        """Everything needed to resume, as named numpy arrays (no pickle)."""
        ...

    def load_state_dict(self, arrays: Mapping[str, Any]) -> None: ...


def make_agent(spec: EnvSpec, cfg: AgentConfig) -> LearnerAgent:
    """The learner agent of `cfg.backend` for `spec` (see the module docstring)."""
    if cfg.backend == "jax":
        from learners.agents.jax.agent import JaxSACAgent

        return JaxSACAgent(spec, cfg)
    from learners.agents.sac import SACAgent

    return SACAgent(spec, cfg)
