"""asv results of many machines -> one tidy table: a row per timed parameter combination.

Nothing in a results directory is trusted: an unreadable or malformed file, a benchmark
whose columns disagree, a kernel or variant this version does not know are each turned
into a line in ``problems`` (path and reason) and skipped, so one bad file never hides
the others.
"""

from __future__ import annotations

import functools
import itertools
import json
import math
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from portabench.implementations import Kernel, PortabenchError, Work, get_kernel, get_variant
from portabench.implementations.model import (DEVICES, DEVICES_SETTING, DEVICES_STUDY, FAMILIES, SCALING_SETTING,
                                              STRONG, in_cache, whole_size)
from portabench.harness.machine.peaks import PEAK_KERNEL, measured_peaks as peaks_of
from portabench.harness.machine.record import SYSTEM_FILE, WORK_KEY

from portabench.harness.statistics import CONTENDED, CONTENTION_KEY, ROUNDS_KEY, NoiseRecord, combo_key

# Suite modules that time inputs, not kernels: no work model, so not in the kernel tables.
INPUT_BENCHMARKS = {"dataset_io"}
NO_RESULTS = "no asv results in {}: run `portabench run` first"
PARAM_NAMES_FILE = "benchmarks.json"  # asv's benchmark descriptions: the parameter names

COLUMNS = [
    "machine", "commit", "date", "kernel", "study", "benchmark", "measure", "case", "dataset", "options", "settings",
    "devices", "variant", "family", "device", "size", "size_unit", "params", "time_s", "time_best_s", "n_samples", "noise_pct",
    "noisy", "bytes", "working_set", "cache_bytes", "in_cache", "bytes_counted", "flops", "gbs", "gbs_best", "gbs_counted", "gflops", "peak_gbs", "peak_gflops",
    "pct_peak", "pct_peak_best",
    "pct_peak_counted", "measured_peak_gbs", "pct_measured_peak", "rounds", "contention", "noise_floor_pct",
]
# Each row's noise, for `portabench compare`: every sample (asv --record-samples), how many of them
# each round (process) took, and asv's 99 % confidence interval of the median. Kept in the table, not
# in tidy.csv.
NOISE_COLUMNS = ["samples", "round_counts", "ci_99_low", "ci_99_high"]
# A row's samples spread when their interquartile range exceeds this % of their median. A row is marked noisy
# (its time not to be taken as a tight one) when its samples spread or when it ran contended (``CONTENDED``).
SPREAD_IQR_PCT = 10.0
# A row in cache (``model.in_cache`` of its working set and its device's cache) may run at cache bandwidth:
# it is kept out of % of peak and of the measured peak; its times and speedups stay.
# The system record's key of each device's cache (the CPU's, or the first GPU's).
CACHE_KEYS = {"cpu": "llc_bytes", "gpu": "l2_bytes"}
CACHE_NAMES = {"cpu": "last-level cache", "gpu": "L2"}
PCT_OF_PEAK = ["pct_peak", "pct_peak_best", "pct_peak_counted", "pct_measured_peak"]
# What a time_ method measures: one run of the kernel, or (time_preparation) the untimed
# preparation of one run (sorting, scatter matrices), reported as a multiple of the kernel's time.
KERNEL_MEASURE, PREPARATION_MEASURE = "kernel", "preparation"
PREPARATION_METHOD = "time_preparation"


@dataclass
class Loaded:
    """The tidy table, each machine's system record ({} when missing) and what was skipped."""

    table: pd.DataFrame
    systems: dict[str, dict[str, Any]]
    problems: list[str]
    n_skipped: int  # parameter combinations without a time (skipped as unavailable, or failed, in asv)
    unreadable: list[str] = field(default_factory=list)  # the problems that are whole files unread


class _Skip(Exception):
    """A whole benchmark entry of a results file is unusable."""


def load_results(results_dir: Path) -> Loaded:
    """Read every machine folder of an asv results directory into a ``Loaded``."""
    results_dir = Path(results_dir)
    if results_dir.exists() and not results_dir.is_dir():
        raise PortabenchError(f"{results_dir} is a file, not a results folder: give the folder holding one folder "
                              "per machine (e.g. results/)")
    if not results_dir.is_dir():
        raise PortabenchError(f"results directory {results_dir} does not exist: run `portabench run` first")
    problems: list[str] = []
    files = sorted(f for d in results_dir.iterdir() if d.is_dir() for f in d.glob("*.json")
                   if f.name not in ("machine.json", PARAM_NAMES_FILE))
    if not files:
        raise PortabenchError(NO_RESULTS.format(results_dir))
    # Parameter names: each machine's own benchmarks.json (``portabench run`` writes it), over the
    # results directory's (plain ``asv run`` writes that one, and older runs left it).
    shared = results_dir / PARAM_NAMES_FILE
    top = _param_names(shared, problems) if shared.exists() else {}
    per_machine: dict[Path, dict[str, list[str]]] = {}
    for folder in sorted({f.parent for f in files}):
        own = folder / PARAM_NAMES_FILE
        per_machine[folder] = {**top, **(_param_names(own, problems) if own.exists() else {})}
        if not own.exists() and not shared.exists():
            problems.append(f"{own}: missing: parameter names are inferred from their values")
    rows: list[dict[str, Any]] = []
    unreadable: list[str] = []
    n_skipped = 0
    for path in files:
        file_rows, skipped = _read_file(path, per_machine[path.parent], problems, unreadable)
        rows += file_rows
        n_skipped += skipped
    machines = sorted({f.parent.name for f in files})
    systems = {m: _read_system(results_dir / m / SYSTEM_FILE, problems) for m in machines}
    records = {m: _read_noise(results_dir / m, problems) for m in machines}
    if not rows:
        raise PortabenchError(f"{NO_RESULTS.format(results_dir)} (no usable rows; {len(problems)} problem(s), "
                              f"first: {problems[0] if problems else 'none'})")
    table = _derive(pd.DataFrame(rows), systems, records)
    for machine, device in sorted(set(zip(table.machine, table.device))):
        if not cache_bytes(systems.get(machine, {}), device) > 0:
            problems.append(f"{results_dir / machine / SYSTEM_FILE}: no {CACHE_NAMES.get(device, 'cache')} size "
                            f"recorded: no {device} result is marked in cache, though some may be (their % of peak "
                            "would then be cache bandwidth)")
    return Loaded(table, systems, problems, n_skipped, unreadable)


def measured_peaks_by_machine(table: pd.DataFrame) -> dict[str, dict[str, float]]:
    """Machine -> device -> measured peak (``peaks.measured_peaks``: the best median STREAM GB/s of any run), from
    a tidy table."""
    # One device's: a row of the study across devices holds the devices' peak together.
    per_device = (table.measured_peak_gbs / table.devices).rename("measured_peak_gbs")
    peaks = per_device.groupby([table.machine, table.device]).first().dropna()
    measured: dict[str, dict[str, float]] = {}
    for (machine, device), value in peaks.items():
        measured.setdefault(str(machine), {})[str(device)] = float(value)
    return measured


def measured_peaks(results_dir: Path, machine: str) -> dict[str, float]:
    """The measured peak of ``machine`` per device ("cpu", "gpu") in ``results_dir``: the best median STREAM
    GB/s of any of its runs there (``peaks.measured_peaks``)."""
    table = load_results(results_dir).table
    if machine not in set(table.machine):
        raise PortabenchError(f"no results of machine {machine!r} in {results_dir}; "
                              f"machines: {', '.join(sorted(set(table.machine)))}")
    return measured_peaks_by_machine(table).get(machine, {})


def theoretical_peak(system: dict[str, Any], device: str, key: str) -> Any:
    """A peak key (or ``peak_source``) of the record's CPU, or of its first GPU; None if absent."""
    part = system.get("cpu") if device == "cpu" else (system.get("gpus") or [None])[0]
    return part.get(key) if isinstance(part, dict) else None


def cache_bytes(system: dict[str, Any], device: str) -> float:
    """The bytes of ``device``'s cache in a system record (the CPU's last-level cache, the first GPU's L2);
    NaN where unknown (a record older than the key, or none)."""
    key = CACHE_KEYS.get(device)
    value = _number(theoretical_peak(system, device, key)) if key else math.nan
    return value if value > 0 else math.nan


def _param_names(path: Path, problems: list[str]) -> dict[str, list[str]]:
    try:
        data = json.loads(path.read_text())
        if not isinstance(data, dict):
            problems.append(f"{path}: not a JSON object of benchmarks (a {type(data).__name__}): parameter names are "
                            "inferred from their values")
            return {}
        return {k: list(v["param_names"]) for k, v in data.items() if isinstance(v, dict) and "param_names" in v}
    except FileNotFoundError:
        problems.append(f"{path}: missing: parameter names are inferred from their values")
        return {}
    except (OSError, ValueError, TypeError, KeyError) as exc:
        problems.append(f"{path}: unreadable ({exc}): parameter names are inferred from their values")
        return {}


def _read_file(path: Path, names: dict[str, list[str]], problems: list[str],
               unreadable: list[str]) -> tuple[list[dict], int]:
    def unread(reason: str) -> tuple[list[dict], int]:
        problems.append(f"{path}: {reason}")
        unreadable.append(problems[-1])
        return [], 0

    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        return unread(f"not valid JSON ({exc})")
    missing = [k for k in ("commit_hash", "date", "result_columns", "results")
               if not isinstance(data, dict) or k not in data]
    if missing or data.get("version") != 2:
        return unread(f"not an asv results file of format version 2 (missing: {', '.join(missing) or 'none'})")
    try:
        base = {"machine": path.parent.name, "commit": str(data["commit_hash"]),
                "date": pd.Timestamp(int(data["date"]), unit="ms", tz="UTC")}
        columns = list(data["result_columns"])
        entries = dict(data["results"])
    except (TypeError, ValueError, OverflowError) as exc:
        return unread(f"malformed header ({exc})")
    rounds, others, works = ({k: v for k, v in (data.get(key) or {}).items() if isinstance(v, dict)}
                             if isinstance(data.get(key), dict) else {}
                             for key in (ROUNDS_KEY, CONTENTION_KEY, WORK_KEY))
    rows, n_skipped = [], 0
    for bench, entry in entries.items():
        if bench.split(".")[0] in INPUT_BENCHMARKS or not bench.rsplit(".", 1)[-1].startswith("time_"):
            continue  # input paths, and track_ benchmarks (counts such as iterations, not times)
        reasons: Counter[str] = Counter()
        try:
            bench_rows, skipped = _benchmark_rows(bench, entry, columns, names.get(bench), reasons,
                                                  rounds.get(bench, {}), others.get(bench, {}), works.get(bench, {}))
        except _Skip as exc:
            problems.append(f"{path}: {bench}: {exc}")
            continue
        rows += [{**base, **r} for r in bench_rows]
        n_skipped += skipped
        if reasons["failed"]:
            problems.append(f"{path}: {bench}: {reasons.pop('failed')} parameter combination(s) failed in asv "
                            "(no time recorded; `asv run --show-stderr` says why)")
        problems += [f"{path}: {bench}: {reason} ({n} row(s) skipped)" for reason, n in reasons.items()]
    return rows, n_skipped


def _benchmark_rows(bench: str, entry: Any, columns: list[str], names: list[str] | None, reasons: Counter[str],
                    rounds: dict[str, Any], others: dict[str, Any], works: dict[str, Any]) -> tuple[list[dict], int]:
    if not isinstance(entry, list):
        raise _Skip("entry is not a list of result columns")
    col = dict(zip(columns, entry))  # asv drops trailing columns that are empty
    params, result = col.get("params"), col.get("result")
    if not isinstance(params, list) or not all(isinstance(p, list) for p in params):
        raise _Skip("no parameter lists")
    combos = list(itertools.product(*params))
    if not isinstance(result, list) or len(result) != len(combos):
        raise _Skip(f"{len(result) if isinstance(result, list) else 'no'} results for {len(combos)} parameter combinations")
    per_combo = _per_combination(col, len(combos))
    try:
        kernel = get_kernel(bench.split(".")[0])
    except PortabenchError as exc:
        raise _Skip(f"{exc} (results of another version?)") from None
    if not names or len(names) != len(params):
        names = _infer_names(kernel, params)
        if names is None:
            raise _Skip("parameter names unknown (not in benchmarks.json) and not inferable")
    rows, n_skipped = [], 0
    for i, combo in enumerate(combos):
        time_s = _number(result[i])
        if not time_s > 0:
            # asv writes NaN for a benchmark skipped in setup (variant unavailable on that
            # machine: expected) and null for one that failed (a problem worth reporting).
            n_skipped += 1
            if result[i] is None:
                reasons["failed"] += 1
            continue
        p = {n: _unquote(v) for n, v in zip(names, combo)}
        study = study_of(kernel, bench)
        try:
            case, size = kernel.case_and_size(p)
            options, settings = _extras(kernel, p)
            devices = int(p[DEVICES_SETTING]) if study == DEVICES_STUDY else 1
            if devices < 1:
                raise ValueError(f"{devices} devices")
            # Weak scaling records the size per device (the ``size`` column keeps it, so that one row of each
            # device count pairs with another); the work, and so every rate, is the whole problem's.
            whole = whole_size(size, devices, p.get(SCALING_SETTING, STRONG))
            variant = get_variant(kernel.name, p["variant"])
            # What the run recorded, else (results older than the record) this version's work model and class.
            recorded = works.get(combo_key(combo))
            work = recorded_work(recorded) or kernel.work(case, whole,
                                                          **{k: v for k, v in p.items() if k in kernel.options})
            family = recorded_family(recorded) or variant.family
        except (PortabenchError, KeyError, ValueError, TypeError) as exc:
            reasons[str(exc) if isinstance(exc, PortabenchError) else f"bad parameters {p} ({exc!r})"] += 1
            continue
        raw = per_combo["samples"][i]
        samples = [s for s in (_number(x) for x in (raw if isinstance(raw, list) else [])) if s > 0]
        counts = rounds.get(combo_key(combo))
        counts = tuple(counts) if isinstance(counts, list) and sum(counts) == len(samples) else (len(samples),)
        shares = [_number(x) for x in others.get(combo_key(combo)) or [] if x is not None]
        q25 = _number(per_combo["stats_q_25"][i])
        rows.append({
            # A problem option (gmres' order, batched SpMV's layout) makes another case;
            # variant settings (a group-size sweep) are kept apart (``settings``).
            "kernel": kernel.name, "study": study, "benchmark": bench, "devices": devices,
            "measure": PREPARATION_MEASURE if bench.endswith("." + PREPARATION_METHOD) else KERNEL_MEASURE,
            "case": f"{case} ({options})" if options else case,
            "dataset": case, "options": options, "settings": settings, "variant": variant.name,
            "family": family,
            # The device of the asv class (``<Kernel><Study><DEVICE>``), else the variant's first.
            "device": next((d for d in DEVICES if bench.split(".")[-2].endswith(d.upper())), variant.devices()[0]),
            "size": size, "size_unit": kernel.size_unit,
            "params": json.dumps(p, separators=(",", ":")), "time_s": time_s,
            # The best sample is the closest to the machine's capability (asv keeps them with --record-samples).
            "time_best_s": min(samples) if samples else (q25 if q25 > 0 else time_s),
            "n_samples": len(samples), "noise_pct": iqr_percent(samples), "bytes": work.bytes, "flops": work.flops,
            "working_set": work.bytes if work.working_set is None else work.working_set,
            "bytes_counted": math.nan if work.bytes_counted is None else work.bytes_counted,
            "samples": tuple(samples), "round_counts": counts,
            "contention": max(shares) if shares else math.nan, "ci_99_low": _number(per_combo["stats_ci_99_a"][i]),
            "ci_99_high": _number(per_combo["stats_ci_99_b"][i]),
        })
    return rows, n_skipped


def _per_combination(col: dict[str, Any], n: int) -> dict[str, list]:
    """asv's per-combination columns of one benchmark (samples, quartile, confidence interval), each ``n`` long
    (Nones where asv left the column out)."""
    per_combo = {}
    for key in ("samples", "stats_q_25", "stats_ci_99_a", "stats_ci_99_b"):
        values = col.get(key)
        if values is not None and (not isinstance(values, list) or len(values) != n):
            raise _Skip(f"column {key} does not match the {n} parameter combinations")
        per_combo[key] = values or [None] * n
    return per_combo


def recorded_work(recorded: Any) -> Work | None:
    """The work a run recorded of one combination (``WORK_KEY``), or None where it recorded none (or no bytes
    and flops that are numbers)."""
    if not isinstance(recorded, dict):
        return None
    number = {k: _number(recorded.get(k)) for k in ("bytes", "flops", "bytes_counted", "working_set")}
    if not (number["bytes"] >= 0 and number["flops"] >= 0):
        return None
    return Work(bytes=number["bytes"], flops=number["flops"],
                bytes_counted=number["bytes_counted"] if number["bytes_counted"] >= 0 else None,
                working_set=number["working_set"] if number["working_set"] >= 0 else None)


def recorded_family(recorded: Any) -> str | None:
    """The variant's family a run recorded of one combination (``WORK_KEY``), or None."""
    family = recorded.get("family") if isinstance(recorded, dict) else None
    return family if family in FAMILIES else None


@functools.cache
def _studies_by_class(kernel: Kernel) -> dict[str, str]:
    # The study across devices is no asv class (``portabench scale`` runs it), so not among ``studies``;
    # its class name does not depend on the device counts.
    across = [kernel.devices_study(device, (1,)) for device in DEVICES]
    return {s.class_name: s.name for device in DEVICES for s in kernel.studies(device)} | {
        s.class_name: s.name for s in across if s is not None}


def study_of(kernel: Kernel, benchmark: str) -> str:
    """The declared study of an asv benchmark (``mttkrp.MttkrpRankCPU.time_mttkrp``: "rank"); a class
    this version does not declare keeps its own name."""
    cls = benchmark.split(".")[1] if benchmark.count(".") >= 2 else benchmark
    return _studies_by_class(kernel).get(cls, cls)


def _extras(kernel: Kernel, params: dict[str, str]) -> tuple[str, str]:
    """("order=sorted", "m=8"): the kernel's problem options, and the variant settings, among
    one benchmark's parameters beyond case, size and variant."""
    core = {kernel.case_param, kernel.size_param, "variant"}
    extra = [(k, v) for k, v in params.items() if k not in core]
    labelled = [(k, v) for k, v in extra if k in kernel.options
                and (kernel.label_default_options or v != kernel.options[k][0])]
    options = ", ".join(f"{k}={v}" for k, v in labelled)
    settings = ", ".join(f"{k}={v}" for k, v in extra if k not in kernel.options)
    return options, settings


def _infer_names(kernel: Kernel, params: list[list[str]]) -> list[str] | None:
    """Parameter names from their values (a results file older than benchmarks.json)."""
    variants = {v.name for v in kernel.variants}
    names = []
    for values in params:
        vals = {_unquote(v) for v in values}
        if vals <= set(kernel.cases):
            names.append(kernel.case_param)
        elif all(v.isdigit() for v in vals):
            names.append(kernel.size_param)
        elif vals & variants:  # unknown (old) variants among them are skipped row by row
            names.append("variant")
        else:
            return None
    return names if len(set(names)) == len(names) else None


def _read_system(path: Path, problems: list[str]) -> dict[str, Any]:
    try:
        record = json.loads(path.read_text())
        if not isinstance(record, dict):
            raise ValueError("not a JSON object")
        return record
    except FileNotFoundError:
        problems.append(f"{path}: missing: no theoretical peaks for this machine")
    except (OSError, ValueError) as exc:
        problems.append(f"{path}: unreadable ({exc}): no theoretical peaks for this machine")
    return {}


def _read_noise(folder: Path, problems: list[str]) -> NoiseRecord | None:
    try:
        return NoiseRecord.load(folder)
    except PortabenchError as exc:
        problems.append(f"{exc} (no noise floors for this machine)")
        return None


def _derive(t: pd.DataFrame, systems: dict[str, dict[str, Any]],
            records: dict[str, NoiseRecord | None] | None = None) -> pd.DataFrame:
    """Add rates, peaks, percentages of peak and each row's noise (its rounds, the neighbours' share of
    the CPU, the machine's noise floor for it) to the raw rows. A row split across ``devices`` devices is
    rated against their peaks together (one device's times ``devices``: its % of peak is of the aggregate
    peak), and is in cache where each device's share of the working set fits its own cache."""
    t["gbs"] = t.bytes / t.time_s / 1e9
    t["gbs_best"] = t.bytes / t.time_best_s / 1e9
    t["gbs_counted"] = t.bytes_counted / t.time_s / 1e9  # a model counting cached re-reads (GenTen's MTTKRP)
    t["gflops"] = t.flops / t.time_s / 1e9
    for col, key in (("peak_gbs", "peak_bandwidth_gbs"), ("peak_gflops", "peak_fp64_gflops")):
        t[col] = [_number(theoretical_peak(systems.get(m, {}), d, key)) for m, d in zip(t.machine, t.device)]
        t[col] *= t.devices
    t.loc[~(t.peak_gbs > 0), "peak_gbs"] = np.nan
    t.loc[~(t.peak_gflops > 0), "peak_gflops"] = np.nan
    t["pct_peak"] = 100 * t.gbs / t.peak_gbs
    t["pct_peak_best"] = 100 * t.gbs_best / t.peak_gbs  # STREAM's convention: the best run
    t["pct_peak_counted"] = 100 * t.gbs_counted / t.peak_gbs
    t["cache_bytes"] = [cache_bytes(systems.get(m, {}), d) for m, d in zip(t.machine, t.device)]
    # An unknown cache (NaN) compares False. ``cache_bytes`` is one device's.
    t["in_cache"] = in_cache(t.working_set / t.devices, t.cache_bytes)
    t = t.merge(_measured_peaks(t), on=["machine", "device"], how="left")
    t["measured_peak_gbs"] *= t.devices
    t["pct_measured_peak"] = 100 * t.gbs / t.measured_peak_gbs
    t.loc[t.in_cache, PCT_OF_PEAK] = np.nan  # cache bandwidth is no share of memory bandwidth
    t["rounds"] = t.round_counts.map(len)
    # NaN (fewer than 2 samples, contention not measured): not known to be noisy.
    t["noisy"] = (t.noise_pct > SPREAD_IQR_PCT) | (t.contention >= CONTENDED)
    records = records or {}
    t["noise_floor_pct"] = [records[m].floor_pct(b, p) if records.get(m) else math.nan
                            for m, b, p in zip(t.machine, t.benchmark, t.params)]
    return t[COLUMNS + NOISE_COLUMNS]


def _measured_peaks(t: pd.DataFrame) -> pd.DataFrame:
    """``measured_peak_gbs`` per (machine, device), by the one rule (``peaks.measured_peaks``) over the rows of
    asv's STREAM of every commit: one device's, not STREAM split across devices under MPI."""
    stream = t[(t.kernel == PEAK_KERNEL) & (t.measure == KERNEL_MEASURE) & (t.study != DEVICES_STUDY)]
    return peaks_of(stream, ["machine", "device"]).reset_index()


def iqr_percent(samples: tuple[float, ...] | list[float]) -> float:
    """The samples' spread: interquartile range over the median, in %; NaN for fewer than two."""
    if len(samples) < 2:
        return math.nan
    q1, q2, q3 = np.percentile(samples, [25, 50, 75])
    return float(100 * (q3 - q1) / q2)


def _number(x: Any) -> float:
    try:
        return float(x) if x is not None and not isinstance(x, bool) else math.nan
    except (TypeError, ValueError):
        return math.nan


def _unquote(value: Any) -> str:
    s = str(value)  # asv stores repr()s: "'copy'"
    return s[1:-1] if len(s) >= 2 and s[0] == s[-1] and s[0] in "'\"" else s
