"""Large block matrices kept on disk: generated once per (name, scale, seed), then read back.

asv runs every parameter combination in a fresh process, so a BCSR stand-in or sweep
matrix of hundreds of MiB (seconds to generate) would otherwise be generated once per
variant. Matrices of at least ``MIN_STORED_BYTES`` of block values are saved in the
dataset cache (``$PORTABENCH_DATA/standins/``) as an uncompressed ``.npz``, keyed by the
generator's source as well, so a change to the model never serves an old matrix.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import zipfile
from pathlib import Path
from typing import Callable

import numpy as np
import scipy.sparse as sp

from ..cache import cache_dir
from .bcsr import BlockMatrix

MIN_STORED_BYTES = 16 << 20  # smaller ones generate in a fraction of a second


@functools.cache
def _generator_version() -> str:
    digest = hashlib.sha256()
    for name in ("suitesparse.py", "bcsr.py"):
        digest.update(Path(__file__).with_name(name).read_bytes())
    return digest.hexdigest()[:16]


def _load(path: Path, key: dict) -> BlockMatrix | None:
    """The matrix saved at ``path`` under the same ``key``; None if absent, stale or damaged."""
    if not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as data:
            if json.loads(str(data["key"])) != key:
                return None
            n, bs, symmetric = (int(v) for v in data["meta"])
            size = -(-n // bs) * bs
            bsr = sp.bsr_array((data["data"], data["indices"], data["indptr"]), shape=(size, size),
                               blocksize=(bs, bs))
            return BlockMatrix(bsr=bsr, n=n, bs=bs, symmetric=bool(symmetric))
    except (OSError, ValueError, KeyError, zipfile.BadZipFile):
        return None


def _save(matrix: BlockMatrix, path: Path, key: dict) -> None:
    """Save atomically (concurrent readers never see half a file); an unwritable folder keeps no copy."""
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp.npz")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        bsr = matrix.bsr
        np.savez(tmp, key=json.dumps(key), meta=np.array([matrix.n, matrix.bs, int(matrix.symmetric)]),
                 indptr=bsr.indptr, indices=bsr.indices[: matrix.nnzb], data=bsr.data[: matrix.nnzb])
        tmp.replace(path)
    except OSError:
        tmp.unlink(missing_ok=True)


def stored(name: str, scale: float, seed: int, values_bytes: int, generate: Callable[[], BlockMatrix]) -> BlockMatrix:
    """``generate()`` (the matrix ``name`` at ``scale`` from ``seed``, ``values_bytes`` of blocks),
    through the on-disk store when it is large."""
    if values_bytes < MIN_STORED_BYTES:
        return generate()
    key = {"matrix": name, "scale": repr(float(scale)), "seed": int(seed), "generator": _generator_version()}
    path = cache_dir() / "standins" / f"{name}@{float(scale)!r}-seed{int(seed)}.npz"
    matrix = _load(path, key)
    if matrix is None:
        matrix = generate()
        _save(matrix, path, key)
    return matrix
