"""What a run records about its machine beside the asv results: peaks, threads, software.

The record lives at ``<results>/<machine>/portabench.system`` (JSON). It is not named
``*.json`` because asv reads every ``*.json`` in a machine folder as a results file.
"""

from __future__ import annotations

import datetime as _dt
import importlib.metadata
import json
import os
import platform
from pathlib import Path
from typing import Any

from portabench.reference import hardware

SYSTEM_FILE = "portabench.system"
THREAD_VARIABLES = (
    "OMP_NUM_THREADS", "NUMBA_NUM_THREADS", "NUMBA_THREADING_LAYER", "MKL_NUM_THREADS",
    "MKL_THREADING_LAYER", "OPENBLAS_NUM_THREADS", "OMP_PROC_BIND", "OMP_PLACES", "CUDA_VISIBLE_DEVICES",
)
_PACKAGES = ("numpy", "scipy", "numba", "llvmlite", "pandas", "asv", "asv_runner", "cupy-cuda12x", "cupy-cuda13x", "mkl")


def thread_settings() -> dict[str, Any]:
    """Thread counts as the benchmarks see them: Numba's pool, BLAS pools and the variables."""
    import numba
    from threadpoolctl import threadpool_info

    return {
        "numba_num_threads": int(numba.config.NUMBA_NUM_THREADS),
        "logical_cpus_available": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "environment": {k: os.environ.get(k) for k in THREAD_VARIABLES},
        "blas": [
            {k: pool.get(k) for k in ("internal_api", "version", "num_threads", "threading_layer")}
            for pool in threadpool_info()
        ],
    }


def software_versions() -> dict[str, str | None]:
    versions: dict[str, str | None] = {"python": platform.python_version()}
    for name in _PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    try:
        import cupy

        versions["cuda_runtime"] = str(cupy.cuda.runtime.runtimeGetVersion())
        versions["cuda_driver"] = str(cupy.cuda.runtime.driverGetVersion())
    except Exception:  # no CuPy or no GPU: nothing to record
        pass
    return versions


def system_record(machine: str, user_peaks: dict | None = None) -> dict[str, Any]:
    """The full record for ``machine``: hardware and peaks, threads, software, time."""
    record = hardware.detect_system(user_peaks)
    record.update(
        machine=machine,
        threads=thread_settings(),
        software=software_versions(),
        recorded_at=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    )
    return record


def write_system_record(results_dir: Path, record: dict[str, Any]) -> Path:
    path = Path(results_dir) / record["machine"] / SYSTEM_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    return path
