"""Block-sparse matrices for BCSR SpMV: Matrix Market and triplet readers, BCSR conversion,
the paper's SuiteSparse matrices and their stand-ins, and the block-size sweep.

Importing this package registers the ``matrix`` datasets (``suitesparse`` module).
"""

from . import suitesparse  # noqa: F401  (registers the datasets)
from .bcsr import BlockMatrix, to_bcsr
from .mmio import read_cholmod_triplets, read_matrix, read_mtx, read_triplets, write_mtx
from .suitesparse import SUITESPARSE, SWEEP_BLOCK_SIZES, block_sweep, fem_block_matrix, standin

__all__ = [
    "BlockMatrix", "SUITESPARSE", "suitesparse", "SWEEP_BLOCK_SIZES", "block_sweep", "fem_block_matrix",
    "read_cholmod_triplets", "read_matrix", "read_mtx", "read_triplets", "standin", "to_bcsr", "write_mtx",
]
