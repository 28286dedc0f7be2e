"""``portabench scale``: the kernels split across the devices of an MPI job, written as asv results.

asv runs each benchmark in a process it forks itself, which no MPI launcher starts, so the study across
devices is an MPI program: the user launches it (``mpirun -n 4 portabench scale``, or ``srun`` across
nodes), every rank takes one device, and for each device count 1, 2, 4, ... up to the job's size the first
ranks run every variant on their shares (``distributed.split_run``). Rank 0 writes the samples as an asv
results file of format version 2 (``<commit>-mpi-<device>.json``) into the machine's folder, with the
parameter names in its ``benchmarks.json``: ``portabench report`` and ``compare`` read them as they read
asv's. A machine is a set of nodes: name it by them (``--machine h200-x4``, ``--machine cluster-2nodes``).
"""

from __future__ import annotations

import datetime as _dt
import itertools
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

from portabench.datasets.paths import check_writable
from portabench.implementations import get_kernel, list_kernels
from portabench.harness.distributed.split_run import Measured, measure, problem_and_key
from portabench.harness.distributed.ranks import Ranks
from portabench.harness.machine.record import system_record, write_system_record
from portabench.implementations.model import (PARTITION_SETTING, SCALING_SETTING, STRONG, Device, Kernel,
                                              PortabenchError, Study, whole_size)

from .asv_config import config_dir, find_config
from .asv_process import git_head
from .results_merge import PARAM_NAMES_FILE, read_json
from .selection import machine_name

SAMPLES, QUICK_SAMPLES = 10, 3
COLUMNS = ["result", "params", "version", "started_at", "duration", "stats_q_25", "stats_q_75", "stats_number",
           "stats_repeat", "samples"]


def split_kernels() -> list[str]:
    """The kernels split across devices: those that know a split (``Kernel.partitions``). Every kernel is
    imported: called only where the list is needed (``scale`` without ``--kernel``, its help)."""
    return [name for name in list_kernels() if get_kernel(name).partitions]


def device_counts(size: int) -> tuple[int, ...]:
    """1, 2, 4, ... below ``size``, then ``size``: the device counts a job of ``size`` ranks measures."""
    counts = [1 << k for k in range(size.bit_length()) if 1 << k < size]
    return tuple(counts + [size])


def _quoted(value: str) -> str:
    return repr(str(value))  # asv stores parameter values as repr()s


def _say(ranks: Ranks, text: str) -> None:
    if ranks.rank == 0:
        print(text, flush=True)


def scale(kernels: list[str], device: Device, machine: str | None, sizes: dict[str, tuple[int, ...]],
          samples: int, variants: list[str] | None = None, cases: list[str] | None = None,
          results: Path | None = None) -> int:
    """Run the devices study of ``kernels`` on this job's ranks; rank 0 writes the results. 0, or 2 where a
    variant gave a wrong answer (no time recorded for it)."""
    unsplit = [k for k in kernels if not get_kernel(k).partitions]
    if unsplit:  # before MPI starts: an error here ends the job cleanly on every rank
        raise PortabenchError(f"{', '.join(unsplit)}: not split across devices; these are: {', '.join(split_kernels())}")
    ranks = Ranks.world(device)
    counts = device_counts(ranks.size)
    machine = machine_name(machine) if ranks.rank == 0 else ""
    if ranks.rank == 0:
        check_writable(results or config_dir("results_dir", "results", find_config()), "the results directory")
    _say(ranks, f"portabench scale: {ranks.size} rank(s), {device}, device counts {', '.join(map(str, counts))}")
    entries: dict[str, tuple[Study, Kernel, dict[tuple[str, ...], Measured]]] = {}
    failed = 0
    for name in kernels:
        kernel = get_kernel(name).at_sizes(sizes.get(name))
        study = kernel.devices_study(device, counts)
        assert study is not None  # every kernel here has a split (checked above)
        chosen = [v for v in study.variants if not variants or v in variants]
        measured: dict[tuple[str, ...], Measured] = {}
        for case, size, options in study.problems():
            if (cases and case not in cases) or kernel.unsupported(case, size, options):
                continue
            partitions = study.settings[PARTITION_SETTING]
            for scaling, count, partition in itertools.product(
                    study.settings.get(SCALING_SETTING, (STRONG,)), counts, partitions):
                if count == 1 and partition != partitions[0]:
                    continue  # one device splits nothing: its run is every partition's baseline
                sub = ranks.first(count)
                if sub is not None:
                    problem, key = problem_and_key(kernel, case, whole_size(size, count, scaling), options)
                    part = kernel.split(problem, sub.rank, sub.size, partition)  # once for every variant
                    for variant in chosen:
                        result = measure(sub, kernel, problem, key, part, variant, samples)
                        for recorded in (partitions if count == 1 else (partition,)):
                            combo = (case, str(size), *options.values(), variant, str(count), recorded,
                                     *([scaling] if SCALING_SETTING in study.settings else []))
                            measured[combo] = result
                        if result.check is not None and not result.check.passed:
                            failed += 1
                        _say(sub, _line(name, combo, result))
                    sub.free()
                ranks.barrier()
        entries[f"{name}.{study.class_name}.{study.method_names(name)[0]}"] = (study, kernel, measured)
    if ranks.rank == 0:
        _write(results, machine, device, entries)
    return 2 if failed else 0


def _line(kernel: str, combo: tuple[str, ...], result: Measured) -> str:
    what = f"{kernel} {' '.join(combo)}"
    if result.skipped:
        return f"  {what}: skipped: {result.skipped}"
    if not result.samples:
        return f"  {what}: WRONG ANSWER, not timed: {result.check.describe() if result.check else '?'}"
    median = sorted(result.samples)[len(result.samples) // 2]
    share, imbalance = result.balance()
    return (f"  {what}: {median * 1e3:.3f} ms (median of {len(result.samples)}; slowest share {share * 1e3:.3f} ms, "
            f"{imbalance:.1%} over the mean share; preparation {result.preparation_s:.1f} s)")


def _write(results: Path | None, machine: str, device: Device, entries: dict[str, tuple[Study, Kernel, dict]]) -> None:
    config = find_config()
    commit = git_head(config.parent)
    folder = (results or config_dir("results_dir", "results", config)) / machine
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{commit[:8]}-mpi-{device}.json"
    earlier = read_json(path) or {}
    recorded = dict(earlier.get("results") or {}) if earlier.get("result_columns") == COLUMNS else {}
    now = int(time.time() * 1000)
    for bench, (study, kernel, measured) in entries.items():
        grid = [list(values) for values in study.grid()]
        old = dict(zip(COLUMNS, recorded.get(bench) or []))
        if old.get("params") != [[_quoted(v) for v in values] for values in grid]:
            old = {}
        combos = list(itertools.product(*grid))
        column: dict[str, list[Any]] = {k: list(old.get(k) or [None] * len(combos))
                                        for k in ("result", "stats_q_25", "stats_q_75", "stats_number", "stats_repeat", "samples")}
        for i, combo in enumerate(combos):
            result = measured.get(tuple(combo))
            if result is None:
                if column["result"][i] is None:
                    column["result"][i] = math.nan  # not run: asv's "skipped"
                continue
            values = sorted(result.samples)
            if not values:  # skipped (NaN) or a wrong answer (null: failed)
                column["result"][i] = math.nan if result.skipped else None
                continue
            n = len(values)
            column["result"][i] = values[n // 2] if n % 2 else (values[n // 2 - 1] + values[n // 2]) / 2
            column["stats_q_25"][i], column["stats_q_75"][i] = values[n // 4], values[(3 * n) // 4]
            column["stats_number"][i], column["stats_repeat"][i] = 1, n
            column["samples"][i] = list(result.samples)
        recorded[bench] = [column["result"], [[_quoted(v) for v in values] for values in grid], "mpi", now, 0.0,
                          column["stats_q_25"], column["stats_q_75"], column["stats_number"], column["stats_repeat"],
                          column["samples"]]
        _add_param_names(folder, bench, kernel, study)
    data = {"commit_hash": commit, "env_name": f"mpi-{device}", "date": now,
            "params": {"machine": machine, "python": sys.executable}, "python": sys.executable, "requirements": {},
            "env_vars": {}, "result_columns": COLUMNS, "results": recorded, "durations": {}, "version": 2}
    path.write_text(json.dumps(data, allow_nan=True) + "\n")
    record = write_system_record(folder.parent, system_record(machine))
    print(f"portabench scale: results -> {path}; system record -> {record}", flush=True)


def _add_param_names(folder: Path, bench: str, kernel: Kernel, study: Study) -> None:
    path = folder / PARAM_NAMES_FILE
    known = read_json(path) or {}
    known[bench] = {"name": bench, "param_names": kernel.benchmark_param_names() + list(study.settings),
                    "params": [[_quoted(v) for v in values] for values in study.grid()], "type": "time",
                    "unit": "seconds", "version": "mpi",
                    "recorded_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")}
    path.write_text(json.dumps(known, indent=1, sort_keys=True) + "\n")
