"""Flax (flax.nnx) port on JAX."""
