"""What a run records about its machine beside the asv results: peaks, threads, software.

The record lives at ``<results>/<machine>/portabench.system`` (JSON). It is not named
``*.json`` because asv reads every ``*.json`` in a machine folder as a results file.
"""

from __future__ import annotations

import datetime as _dt
import importlib.metadata
import itertools
import json
import math
import os
import platform
import time
from pathlib import Path
from typing import Any

from portabench.implementations import hardware

SYSTEM_FILE = "portabench.system"
# Set by ``portabench run`` for asv's processes (read in suite/): the file of per-process timing events.
RUN_LOG_ENV = "PORTABENCH_RUN_LOG"
# What a run recorded of each combination it timed, in its results file beside asv's columns: {benchmark:
# {combination (``combo_key``): {field: value}}}, the fields ``RECORDED_WORK`` as the code that ran had them (the
# variant's family, the work model's bytes and flops). The suite logs them with each combination's "ready" event,
# the runner copies them here, and the report reads them instead of its own version's work model.
WORK_KEY = "portabench_work"
RECORDED_WORK = ("family", "bytes", "flops", "bytes_counted", "working_set")
THREAD_VARIABLES = (
    "OMP_NUM_THREADS", "NUMBA_NUM_THREADS", "NUMBA_THREADING_LAYER", "MKL_NUM_THREADS",
    "MKL_THREADING_LAYER", "OPENBLAS_NUM_THREADS", "OMP_PROC_BIND", "OMP_PLACES", "OMP_WAIT_POLICY",
    "CUDA_VISIBLE_DEVICES",
)
_PACKAGES = ("numpy", "scipy", "numba", "llvmlite", "pandas", "asv", "asv_runner", "cupy-cuda12x", "cupy-cuda13x", "mkl")


def thread_settings() -> dict[str, Any]:
    """Thread counts as the benchmarks see them: Numba's pool, BLAS pools and the variables."""
    import numba
    from threadpoolctl import threadpool_info

    return {
        "numba_num_threads": int(numba.config.NUMBA_NUM_THREADS),
        "logical_cpus_available": len(run_cpus()),
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


def detect_devices() -> list[str]:
    """The devices this machine can benchmark: those some backend can run on here (the CPU always,
    the GPU where the CuPy backend sees one)."""
    from portabench.implementations.backends import machine_devices

    return list(machine_devices())




def process_start_time() -> float:
    """When this process started (Unix time; Linux's /proc, else now): the interpreter's start-up
    counts in a benchmark process's overhead."""
    try:
        with open("/proc/self/stat") as stat:
            ticks = int(stat.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime") as uptime:
            booted = time.time() - float(uptime.read().split()[0])
        return booted + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return time.time()


def run_cpus() -> list[int]:
    """The CPUs this process may run on (its affinity: ``taskset``, a Slurm job's CPU set, a container's),
    inherited by the processes it starts; every CPU where the system does not say."""
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))


def _proc_stat_lines(cpus: list[int], path: str = "/proc/stat") -> list[list[int]]:
    """The counters of /proc/stat for ``cpus``: the machine's total line where they are all of its CPUs,
    else each one's own line (a CPU set's neighbours are those on its CPUs, not a job on the others)."""
    with open(path) as stat:  # the cpu lines come first: the rest (interrupts, a long line) is not read
        lines = [line.split() for line in itertools.takewhile(lambda line: line.startswith("cpu"), stat)]
    per_cpu = {int(f[0][3:]): f for f in lines[1:]}
    if set(per_cpu) <= set(cpus):
        return [[int(x) for x in lines[0][1:]]]
    return [[int(x) for x in per_cpu[c][1:]] for c in cpus if c in per_cpu]


def cpu_seconds(tree_of: int | None = None) -> dict[str, float]:
    """CPU seconds so far on the CPUs this run may use (``run_cpus``), by whom: ``busy`` (user, system
    and interrupts: /proc/stat), ``steal`` (taken by the hypervisor for other guests), ``own`` (this
    process, every thread) and, given ``tree_of``, ``run`` (``tree_seconds`` of that process); empty
    where /proc/stat cannot be read."""
    try:
        rows = _proc_stat_lines(run_cpus())
    except (OSError, ValueError, IndexError):
        return {}
    if not rows:
        return {}
    tick = os.sysconf("SC_CLK_TCK")
    user, nice, system, _idle, _iowait, irq, softirq, steal = [sum(col) for col in zip(*[(r + [0] * 8)[:8] for r in rows])]
    reading = {"busy": (user + nice + system + irq + softirq) / tick, "steal": steal / tick, "own": time.process_time()}
    if tree_of is not None:
        run = tree_seconds(tree_of)
        if run == run:
            reading["run"] = run
    return reading


def tree_seconds(root: int) -> float:
    """CPU seconds used so far by process ``root`` and every live process under it, each with the children
    it reaped (/proc/<pid>/stat: utime, stime, cutime, cstime): a run's harness (the runner, asv, its
    forkserver) and its benchmark processes together; NaN where /proc cannot be read."""
    parents: dict[int, int] = {}
    used: dict[int, int] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return math.nan
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            parents[int(name)], used[int(name)] = int(fields[1]), sum(int(x) for x in fields[11:15])
        except (OSError, ValueError, IndexError):  # a process that ended meanwhile
            continue
    if root not in used:
        return math.nan
    children: dict[int, list[int]] = {}
    for pid, parent in parents.items():
        children.setdefault(parent, []).append(pid)
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += used[pid]
        todo += children.get(pid, [])
    return total / os.sysconf("SC_CLK_TCK")


def busy_share(seconds: float = 1.0) -> float:
    """The share of this run's CPUs (``run_cpus``) other processes take now, over ``seconds`` (NaN where
    unknown)."""
    first = cpu_seconds()
    started = time.time()
    time.sleep(seconds)
    return others_share(first, cpu_seconds(), time.time() - started, len(run_cpus()))


def others_share(first: dict[str, float], last: dict[str, float], wall_s: float, cpus: int) -> float:
    """The share of the machine's CPU time that other processes (and other guests) took between two
    ``cpu_seconds`` readings of one process ``wall_s`` apart: 0.5 on 2 CPUs is one busy neighbour.
    Where both readings have ``run``, others are those outside the run's process tree (its harness
    between samples is no neighbour); else every process but this one."""
    if not first or not last or wall_s <= 0:
        return math.nan
    key = "run" if "run" in first and "run" in last else "own"
    others = (last["busy"] - first["busy"]) - (last[key] - first[key]) + (last["steal"] - first["steal"])
    return max(0.0, others / (wall_s * max(cpus, 1)))


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
