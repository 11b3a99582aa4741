"""The JAX learner backend (the `jax` extra, imported lazily): `agent` (JaxSACAgent, the update as one jitted
function) and `nets` (torch <-> JAX parameter maps, networks as jnp functions, Adam). Nothing is imported here.
"""
