"""Inputs for the kernels: seeded generators (and, as kernels arrive, loaders of real data)."""
