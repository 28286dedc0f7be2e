"""Sparse tensors: the COO type, .tns reading/writing, FROSTT registry and stand-ins."""

from . import frostt  # noqa: F401  (registers the FROSTT tensors)
from .coo import SparseTensor

__all__ = ["SparseTensor"]
