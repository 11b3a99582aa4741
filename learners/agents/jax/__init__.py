"""The JAX learner backend (the `jax` extra, imported lazily): `agent` (JaxSACAgent: the Agent seam, state, weights,
checkpoints), `update` (update_core: the update's critic, gripper, actor and temperature phases as pure functions,
jitted as one) and `nets` (torch <-> JAX parameter maps, networks as jnp functions, Adam). Nothing is imported here.
"""
