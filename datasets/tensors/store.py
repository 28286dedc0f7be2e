"""Large stand-ins kept on disk: generated once per (name, scale, seed), then read back.

asv runs every parameter combination in a fresh process, so a stand-in of tens of millions
of nonzeros (a minute to generate) would otherwise be generated once per benchmark. Stand-ins
of at least ``MIN_STORED_NNZ`` nonzeros are saved in the dataset cache
(``$PORTABENCH_DATA/standins/``), keyed by the generator's source as well, so a change to the
model never serves an old tensor.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

from ..cache import cache_dir
from .coo import SparseTensor
from .standin import generate, scaled_shape
from .tns import load_binary, save_binary

MIN_STORED_NNZ = 100_000  # smaller stand-ins generate in a fraction of a second


@functools.cache
def _generator_version() -> str:
    return hashlib.sha256(Path(__file__).with_name("standin.py").read_bytes()).hexdigest()[:16]


def stored_standin(name: str, scale: float, seed: int) -> SparseTensor:
    """``standin.generate(name, scale, seed)``, through the on-disk store for large ones."""
    _, nnz = scaled_shape(name, scale)
    if nnz < MIN_STORED_NNZ:
        return generate(name, scale, seed)
    key = {"standin": name, "scale": repr(float(scale)), "seed": int(seed), "generator": _generator_version()}
    path = cache_dir() / "standins" / f"{name}@{float(scale)!r}-seed{int(seed)}.npz"
    tensor = load_binary(path, key)
    if tensor is None:
        tensor = generate(name, scale, seed)
        save_binary(tensor, path, key)
    return tensor
