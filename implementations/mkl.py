"""MKL access for CPU vendor variants: found and loaded lazily, so a plain install never needs it.
``mkl_unavailable`` is the availability of the MKL backend (``backends.MKL``) those variants declare.

The ``mkl`` wheel puts ``libmkl_rt`` in ``<prefix>/lib``, off the loader path, and
``sparse_dot_mkl`` finds it only through ``$MKL_RT`` (``reference/NOTES.md``, MKL from PyPI): this module points
``MKL_RT`` at it before the import. ``MKL_THREADING_LAYER=GNU`` makes MKL share Numba's
libgomp instead of starting Intel's OpenMP runtime beside it, which makes thread scaling
erratic.
"""

from __future__ import annotations

import ctypes.util
import functools
import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType


def _libmkl_rt() -> Path | None:
    for prefix in dict.fromkeys((sys.prefix, sys.base_prefix)):
        found = sorted(Path(prefix, "lib").glob("libmkl_rt.so*"))
        if found:
            return found[-1]
    return None


@functools.cache
def mkl_unavailable() -> str | None:
    """Why MKL (through sparse_dot_mkl) is not installed here, or None.

    Looks at files only: loading MKL starts its OpenMP runtime, which a process must not have
    when it forks (asv's forkserver builds the benchmark grids, asking every variant this, in
    the process each benchmark is forked from; a forked Numba OpenMP region then hangs). A
    library that is present but fails to load is reported when a variant loads it.
    """
    os.environ.setdefault("MKL_THREADING_LAYER", "GNU")
    if "MKL_RT" not in os.environ:
        library = _libmkl_rt()
        if library is not None:
            os.environ["MKL_RT"] = str(library)
    if importlib.util.find_spec("sparse_dot_mkl") is None:
        return "MKL is not usable (pip install 'portabench[mkl]'): sparse_dot_mkl is not installed"
    library = os.environ.get("MKL_RT") or ctypes.util.find_library("mkl_rt")
    if library is None or ("/" in library and not Path(library).is_file()):
        return f"MKL is not usable (pip install 'portabench[mkl]'): libmkl_rt not found ({library or 'no MKL_RT'})"
    return None


@functools.cache
def sparse_dot_mkl() -> ModuleType:
    """The sparse_dot_mkl module, MKL located first whatever the caller did before (a variant
    prepared without ``unavailable()`` must still load it); VariantUnavailable with the reason
    when MKL cannot load."""
    reason = mkl_unavailable()  # sets MKL_RT: the import below cannot find libmkl_rt without it
    if reason is None:
        try:
            import sparse_dot_mkl as module

            return module
        except ImportError as exc:
            reason = f"MKL is not usable (pip install 'portabench[mkl]'): {str(exc).splitlines()[0]}"
        except Exception as exc:  # a broken MKL install fails in other ways at load
            reason = f"MKL failed to load: {exc}"
    from .verification import VariantUnavailable  # here, not at the top: verification is the heavier module

    raise VariantUnavailable(reason)
