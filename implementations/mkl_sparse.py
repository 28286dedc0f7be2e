"""MKL's inspector-executor sparse matrix-vector product through ``ctypes`` (BSR and CSR).

``sparse_dot_mkl`` rebuilds its MKL handle on every call; a benchmark builds it once:
``MklMatrix`` creates the handle (``mkl_sparse_d_create_bsr`` / ``_csr``), hints the
expected number of products and lets MKL optimise it (``mkl_sparse_set_mv_hint``,
``mkl_sparse_optimize``: the inspector, untimed), then each ``mv`` is one
``mkl_sparse_d_mv`` (the executor). MKL keeps pointers into the index and value arrays,
so the handle keeps them alive; ``close`` (or garbage collection) frees the handle.

The library is the ``libmkl_rt`` that ``mkl.py`` locates and that ``sparse_dot_mkl`` has
loaded (one copy per process), with its integer width (``MKL_INT``: 32-bit under the
default LP64 interface) and ``MKL_THREADING_LAYER=GNU`` (``reference/NOTES.md``).
"""

from __future__ import annotations

import ctypes
import functools
import os
from typing import Any

import numpy as np

from .mkl import sparse_dot_mkl
from .model import PortabenchError

# mkl_spblas.h enumerations
SPARSE_STATUS = {0: "success", 1: "not initialized", 2: "alloc failed", 3: "invalid value", 4: "execution failed",
                 5: "internal error", 6: "not supported"}
INDEX_BASE_ZERO = 0
LAYOUT_ROW_MAJOR = 101  # blocks stored row by row (scipy's bsr data)
OPERATION_NON_TRANSPOSE = 10
MATRIX_TYPE_GENERAL, FILL_MODE_LOWER, DIAG_NON_UNIT = 20, 121, 131
EXPECTED_CALLS = 1000  # mkl_sparse_set_mv_hint: many products follow, worth a thorough optimisation


class MatrixDescr(ctypes.Structure):
    """``struct matrix_descr``, passed by value (fill mode and diagonal are ignored for general matrices)."""

    _fields_ = [("type", ctypes.c_int), ("mode", ctypes.c_int), ("diag", ctypes.c_int)]


GENERAL = MatrixDescr(MATRIX_TYPE_GENERAL, FILL_MODE_LOWER, DIAG_NON_UNIT)
_P = ctypes.c_void_p


@functools.cache
def _library() -> tuple[Any, type]:
    """(libmkl_rt with argument types set, the numpy dtype of MKL_INT); VariantUnavailable with the
    reason when MKL cannot load or lacks the inspector-executor API."""
    index = np.dtype(sparse_dot_mkl().mkl_interface_integer_dtype()).type  # loads MKL, setting MKL_RT
    try:
        lib = ctypes.CDLL(os.environ["MKL_RT"])
        c_int = ctypes.c_int64 if index == np.int64 else ctypes.c_int32
        lib.mkl_sparse_d_create_bsr.argtypes = [ctypes.POINTER(_P), ctypes.c_int, ctypes.c_int, c_int, c_int, c_int,
                                                _P, _P, _P, _P]
        lib.mkl_sparse_d_create_csr.argtypes = [ctypes.POINTER(_P), ctypes.c_int, c_int, c_int, _P, _P, _P, _P]
        lib.mkl_sparse_set_mv_hint.argtypes = [_P, ctypes.c_int, MatrixDescr, c_int]
        lib.mkl_sparse_optimize.argtypes = [_P]
        lib.mkl_sparse_d_mv.argtypes = [ctypes.c_int, ctypes.c_double, _P, MatrixDescr, _P, ctypes.c_double, _P]
        lib.mkl_sparse_destroy.argtypes = [_P]
        for name in ("mkl_sparse_d_create_bsr", "mkl_sparse_d_create_csr", "mkl_sparse_set_mv_hint",
                     "mkl_sparse_optimize", "mkl_sparse_d_mv", "mkl_sparse_destroy"):
            getattr(lib, name).restype = ctypes.c_int
    except (OSError, AttributeError, KeyError) as exc:
        from .verification import VariantUnavailable

        raise VariantUnavailable(f"MKL inspector-executor API not found in libmkl_rt: {exc}") from None
    return lib, index


def _check(status: int, call: str) -> None:
    if status != 0:
        raise PortabenchError(f"MKL {call} failed: {SPARSE_STATUS.get(status, status)}")


class MklMatrix:
    """An optimised MKL sparse handle (BSR or CSR) and the arrays it points into."""

    def __init__(self, kind: str, rows: int, cols: int, indptr: np.ndarray, indices: np.ndarray,
                 values: np.ndarray, block_size: int = 0) -> None:
        lib, index = _library()  # loads MKL if nothing did yet
        self._lib = lib
        self.handle = _P()
        # Copies in MKL's integer type and contiguous values: MKL reads these for the handle's life.
        self._indptr = np.ascontiguousarray(indptr, dtype=index)
        self._indices = np.ascontiguousarray(indices, dtype=index)
        self._values = np.ascontiguousarray(values, dtype=np.float64)
        starts = self._indptr.ctypes.data
        ends = starts + self._indptr.itemsize  # rows_end = rows_start + 1 (3-array CSR as 4 arrays)
        pointers = (_P(starts), _P(ends), _P(self._indices.ctypes.data), _P(self._values.ctypes.data))
        if kind == "bsr":
            status = lib.mkl_sparse_d_create_bsr(ctypes.byref(self.handle), INDEX_BASE_ZERO, LAYOUT_ROW_MAJOR,
                                                 rows, cols, block_size, *pointers)
        elif kind == "csr":
            status = lib.mkl_sparse_d_create_csr(ctypes.byref(self.handle), INDEX_BASE_ZERO, rows, cols, *pointers)
        else:
            raise ValueError(f"kind must be 'bsr' or 'csr', not {kind!r}")
        _check(status, f"mkl_sparse_d_create_{kind}")
        _check(lib.mkl_sparse_set_mv_hint(self.handle, OPERATION_NON_TRANSPOSE, GENERAL, EXPECTED_CALLS),
               "mkl_sparse_set_mv_hint")
        _check(lib.mkl_sparse_optimize(self.handle), "mkl_sparse_optimize")

    def mv(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """y = A x (x and y: contiguous float64 of the matrix's column and row counts)."""
        status = self._lib.mkl_sparse_d_mv(OPERATION_NON_TRANSPOSE, 1.0, self.handle, GENERAL, _P(x.ctypes.data),
                                           0.0, _P(y.ctypes.data))
        _check(status, "mkl_sparse_d_mv")
        return y

    def close(self) -> None:
        """Free the handle (idempotent)."""
        if self.handle:
            self._lib.mkl_sparse_destroy(self.handle)
            self.handle = _P()

    def __del__(self) -> None:
        self.close()
