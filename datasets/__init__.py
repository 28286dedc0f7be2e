"""Inputs for the kernels: real datasets (shipped or downloaded once) and seeded stand-ins.

    >>> from portabench import datasets
    >>> X = datasets.load("nips@0.001", seed=1)      # stand-in for FROSTT nips, 0.1 % of its nnz
    >>> A = datasets.load("bcsstk01")                 # shipped SuiteSparse matrix
    >>> T = datasets.load("chicago-crime-comm", download=True)

Each kind lives in its own subpackage, which registers its datasets on import:
``tensors`` (FROSTT .tns and friends), ``matrices`` (Matrix Market, BCSR),
``batched`` (many small sparse systems).
"""

from __future__ import annotations

from typing import Any

from . import batched, matrices, tensors  # noqa: F401  (register their datasets)
from .cache import cache_dir, fetch, locate, register_local
from .errors import DatasetError, DatasetUnavailableError, MalformedFileError
from .registry import Dataset, get_dataset, list_datasets, parse_spec

__all__ = [
    "Dataset", "DatasetError", "DatasetUnavailableError", "MalformedFileError",
    "cache_dir", "fetch", "get_dataset", "list_datasets", "load", "locate", "parse_spec", "register_local",
]


def load(spec: str, seed: int = 0, download: bool = False, progress: bool = True) -> Any:
    """The dataset named by ``spec``: ``NAME`` (real) or ``NAME@S`` (stand-in at scale S, seeded)."""
    dataset, scale = parse_spec(spec)
    if scale is not None:
        return dataset.standin(scale, seed)
    if dataset.read is None:
        raise DatasetError(f"dataset {dataset.name!r} has no real data, only a stand-in: use {dataset.name}@SCALE")
    return dataset.read(locate(dataset, download=download, progress=progress))
