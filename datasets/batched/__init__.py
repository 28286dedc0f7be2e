"""Batched small sparse systems (batched GMRES): the ``BatchedSystems`` type, Kokkos Kernels'
batched CRS files, and the PeleLM stand-ins.

Importing this package registers the ``batched`` datasets (``pele`` module):
``gri30`` and ``isooctane`` (stand-ins only) and ``kk-batched`` (shipped).
"""

from . import pele  # noqa: F401  (registers the datasets)
from .kokkos import read_kokkos, read_matrices, read_rhs, rhs_path, write_kokkos
from .pele import MECHANISMS, Mechanism, num_systems, pool, pool_iterations, standin
from .systems import BatchedSystems, random_systems

__all__ = [
    "BatchedSystems", "MECHANISMS", "Mechanism", "num_systems", "pele", "pool", "pool_iterations", "random_systems",
    "read_kokkos", "read_matrices", "read_rhs", "rhs_path", "standin", "write_kokkos",
]
