"""GPU vendor: cuSPARSE's BSR matrix-vector product, ``cusparseDbsrmv``, through ``ctypes``.

CuPy wraps no BSR routine, but the legacy ``cusparseDbsrmv`` is still in libcusparse
(checked against SciPy: ``reference/NOTES.md``). The library is the one
CuPy itself loaded (found in the process's memory map after importing CuPy's cuSPARSE
module), else the loader's ``libcusparse``. The handle runs on CuPy's current stream;
``bind`` creates it and the matrix descriptor (general, zero-based), untimed; each run is
one ``cusparseDbsrmv`` with row-major blocks (alpha 1, beta 0: y is not read). Handle and
descriptor are destroyed with the variant.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import importlib
from typing import Any, Callable

from portabench.datasets.matrices import BlockMatrix

from ..gpu import cupy, cupy_unavailable
from ..model import PortabenchError
from .variant import CupyBcsrVariant, block_arrays

DIRECTION_ROW = 0  # CUSPARSE_DIRECTION_ROW: blocks stored row by row (scipy's data)
OPERATION_NON_TRANSPOSE = 0
_P = ctypes.c_void_p


def _loaded_path() -> str | None:
    """The libcusparse this process has mapped (CuPy's), if any."""
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.split()[-1]
                if "libcusparse.so" in path:
                    return path
    except OSError:
        pass
    return None


@functools.cache
def _library() -> Any:
    """libcusparse with the argument types of the calls used here."""
    for module in ("cupyx.cusparse", "cupy_backends.cuda.libs.cusparse"):  # make CuPy load its libcusparse
        try:
            importlib.import_module(module)
        except ImportError:
            pass
    names = [p for p in (_loaded_path(), ctypes.util.find_library("cusparse")) if p]
    names += ["libcusparse.so.13", "libcusparse.so.12", "libcusparse.so"]
    errors = []
    for name in names:
        try:
            lib = ctypes.CDLL(name)
            break
        except OSError as exc:
            errors.append(str(exc))
    else:
        raise OSError(f"libcusparse not found ({'; '.join(errors)})")
    lib.cusparseCreate.argtypes = [ctypes.POINTER(_P)]
    lib.cusparseDestroy.argtypes = [_P]
    lib.cusparseSetStream.argtypes = [_P, _P]
    lib.cusparseCreateMatDescr.argtypes = [ctypes.POINTER(_P)]
    lib.cusparseDestroyMatDescr.argtypes = [_P]
    lib.cusparseDbsrmv.argtypes = [_P, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                                   ctypes.POINTER(ctypes.c_double), _P, _P, _P, _P, ctypes.c_int, _P,
                                   ctypes.POINTER(ctypes.c_double), _P]
    for name in ("cusparseCreate", "cusparseDestroy", "cusparseSetStream", "cusparseCreateMatDescr",
                 "cusparseDestroyMatDescr", "cusparseDbsrmv"):
        getattr(lib, name).restype = ctypes.c_int
    return lib


@functools.cache
def cusparse_bsrmv_unavailable() -> str | None:
    """Why ``cusparseDbsrmv`` cannot be called here, or None."""
    reason = cupy_unavailable()
    if reason is not None:
        return reason
    try:
        _library()
    except (OSError, AttributeError) as exc:
        return f"cusparseDbsrmv not available: {exc}"
    return None


def _check(status: int, call: str) -> None:
    if status != 0:
        raise PortabenchError(f"cuSPARSE {call} failed with status {status}")


class _Handle:
    """A cuSPARSE handle on CuPy's current stream and a general matrix descriptor."""

    def __init__(self) -> None:
        self.lib = _library()
        self.handle, self.descr = _P(), _P()
        _check(self.lib.cusparseCreate(ctypes.byref(self.handle)), "cusparseCreate")
        _check(self.lib.cusparseSetStream(self.handle, _P(cupy().cuda.get_current_stream().ptr)), "cusparseSetStream")
        _check(self.lib.cusparseCreateMatDescr(ctypes.byref(self.descr)), "cusparseCreateMatDescr")

    def close(self) -> None:
        if self.descr:
            self.lib.cusparseDestroyMatDescr(self.descr)
            self.descr = _P()
        if self.handle:
            self.lib.cusparseDestroy(self.handle)
            self.handle = _P()

    def __del__(self) -> None:
        self.close()


class CusparseBsrmv(CupyBcsrVariant):
    name = "cusparse-bsrmv"
    family = "vendor"
    description = "cuSPARSE cusparseDbsrmv (legacy BSR mv, ctypes on CuPy's libcusparse), row-major blocks"

    @classmethod
    def unavailable(cls) -> str | None:
        return cusparse_bsrmv_unavailable()

    def bind(self, matrix: BlockMatrix, x: Any, y: Any) -> Callable[[], Any]:
        row_ptr, col_idx, val = (self.to_device(a) for a in block_arrays(matrix, order="row"))
        self._arrays = (row_ptr, col_idx, val)  # cuSPARSE reads them at every run
        self._handle = _Handle()
        lib, handle, descr = self._handle.lib, self._handle.handle, self._handle.descr
        alpha, beta = ctypes.c_double(1.0), ctypes.c_double(0.0)
        mb = nb = matrix.block_rows
        args = (handle, DIRECTION_ROW, OPERATION_NON_TRANSPOSE, mb, nb, matrix.nnzb, ctypes.byref(alpha), descr,
                _P(val.data.ptr), _P(row_ptr.data.ptr), _P(col_idx.data.ptr), matrix.bs, _P(x.data.ptr),
                ctypes.byref(beta), _P(y.data.ptr))
        self._scalars = (alpha, beta)

        def call() -> Any:
            _check(lib.cusparseDbsrmv(*args), "cusparseDbsrmv")
            return y

        return call
