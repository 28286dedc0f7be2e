"""The results of a run: which asv results files it wrote, how its machine's folder is written back
into ``results/`` (and only when the run recorded something), what an earlier run of the same commit
recorded kept beside this one's, each combination's rounds and contention written into the file, and
what a ``--smoke`` run found.

asv rewrites a commit's results file on every run, so the benchmarks an earlier run of that commit
recorded and this one did not run are kept (whole benchmarks, and of a benchmark both ran, the
parameter combinations only the earlier run had: a second ``--size`` adds to the first). asv's
``benchmarks.json`` goes to the machine's folder, where the report reads the parameter names.
"""

from __future__ import annotations

import itertools
import json
import math
import re
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from portabench.harness.machine.record import WORK_KEY
from portabench.harness.statistics import CONTENTION_KEY, ROUNDS_KEY, combo_key


INPUTS_MODULE = "dataset_io"
PARAM_NAMES_FILE = "benchmarks.json"  # per machine folder; asv skips files of this name


ROUND_SAMPLES = 7  # samples a round where a run takes several, so that each round's median is known


def read_json(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def result_files(folder: Path) -> list[Path]:
    return [f for f in folder.glob("*.json") if f.name not in ("machine.json", PARAM_NAMES_FILE)] if folder.is_dir() else []


def this_runs_entries(path: Path, started: float) -> Iterator[tuple[str, dict]]:
    """(benchmark, its result columns) of an asv results file, for the benchmarks the run that began at
    ``started`` ran (asv keeps earlier runs' entries of the commit beside them)."""
    data = read_json(path) or {}
    columns = data.get("result_columns") or []
    for name, entry in (data.get("results") or {}).items():
        col = dict(zip(columns, entry)) if isinstance(entry, list) else {}
        if isinstance(col.get("started_at"), (int, float)) and col["started_at"] / 1000 >= started - 1:
            yield name, col


def _recorded(path: Path, started: float) -> bool:
    """Whether the run recorded a value in ``path``: one whose every benchmark failed writes only nulls."""
    return any(isinstance(v, (int, float)) and math.isfinite(v)
               for _, col in this_runs_entries(path, started) for v in (col.get("result") or []))


def write_back(scratch: Path, machine: str, results: Path, started: float, rounds: int = 1,
               contention: dict | None = None, work: dict | None = None) -> bool:
    """Copy the machine's folder back into ``results`` if the run that began at ``started`` recorded a
    value (a results file of nothing but failed entries is left out); True if so. Parameter names of
    every benchmark the machine ran go beside its results (``benchmarks.json``); each results file says
    how many samples each round of this run took, what share of the CPU others took and what the code that ran
    recorded of each combination's work (``annotate_rounds``)."""
    ran, mine = scratch / machine, results / machine
    before = {f.name: f.stat().st_mtime_ns for f in result_files(mine)}
    changed = [f for f in result_files(ran) if before.get(f.name) != f.stat().st_mtime_ns and _recorded(f, started)]
    if not changed:
        return False
    mine.mkdir(parents=True, exist_ok=True)
    for f in changed:
        annotate_rounds(f, rounds, started, contention, work)
    for f in changed:
        if (mine / f.name).exists():
            for name in merge_earlier_results(f, mine / f.name):
                print(f"portabench: {name}: this commit's earlier results of other parameters (another --size) "
                      "are kept beside this run's", file=sys.stderr)
    for f in changed + [ran / "machine.json"]:
        if f.exists():
            shutil.copy2(f, mine / f.name)
    names = read_json(mine / PARAM_NAMES_FILE) or {}
    discovered = read_json(scratch / "benchmarks.json") or {}
    names.update({k: v for k, v in discovered.items() if isinstance(v, dict)})
    names["version"] = discovered.get("version", 2)
    (mine / PARAM_NAMES_FILE).write_text(json.dumps(names, indent=4, sort_keys=True) + "\n")
    return True


def annotate_rounds(path: Path, rounds: int, started: float,
                    contention: dict[tuple[str, tuple[str, ...]], list[float]] | None = None,
                    work: dict[tuple[str, tuple[str, ...]], dict] | None = None) -> None:
    """Write into asv's results file ``path`` how many samples each round took, for every combination
    timed since ``started`` (asv pools the rounds' samples into one list): ``rounds`` rounds of
    ``ROUND_SAMPLES`` where the samples add up to that, else one round of them all; and, from
    ``contention`` (``RunSummary.contention``), the share of the CPU others took during each round; from ``work``
    (``RunSummary.work``), what the code that ran recorded of each combination (``WORK_KEY``)."""
    data = read_json(path)
    if not data:
        return
    annotation, others = dict(data.get(ROUNDS_KEY) or {}), dict(data.get(CONTENTION_KEY) or {})
    recorded = dict(data.get(WORK_KEY) or {})
    for name, col in this_runs_entries(path, started):
        counts, shares, works = {}, {}, {}
        for combo, values in zip(itertools.product(*(col.get("params") or [])), col.get("samples") or []):
            if isinstance(values, list) and values:
                whole = rounds > 1 and len(values) == rounds * ROUND_SAMPLES
                counts[combo_key(combo)] = [ROUND_SAMPLES] * rounds if whole else [len(values)]
                measured = (contention or {}).get((name.rsplit(".", 1)[0], tuple(combo)))
                if measured:
                    shares[combo_key(combo)] = [round(x, 4) if x == x else None for x in measured]
            ran = (work or {}).get((name.rsplit(".", 1)[0], tuple(combo)))
            if ran:
                works[combo_key(combo)] = ran
        annotation[name], others[name], recorded[name] = counts, shares, works
    data[ROUNDS_KEY], data[CONTENTION_KEY], data[WORK_KEY] = annotation, others, recorded
    path.write_text(json.dumps(data))


def merge_earlier_results(new: Path, earlier: Path) -> list[str]:
    """asv writes a commit's results file afresh: keep in ``new`` what an earlier run of the same
    commit and environment (``earlier``) recorded for the benchmarks this run did not run, and for
    a benchmark both ran over different parameters (another ``--size``), the earlier run's
    combinations this one did not run. Returns the benchmarks merged that way."""
    old, current = read_json(earlier), read_json(new)
    if not old or not current or old.get("result_columns") != current.get("result_columns"):
        return []
    columns, earlier_results = old["result_columns"], old.get("results") or {}
    results, merged = dict(current.get("results") or {}), []
    for name, entry in earlier_results.items():
        if name not in results:
            results[name] = entry
            continue
        union = _union_of_grids(entry, results[name], columns)
        if union is not None:
            results[name] = union
            merged.append(name)
    annotations = {}
    for key in (ROUNDS_KEY, CONTENTION_KEY, WORK_KEY):  # per combination: the later run's where it ran one
        later, before = current.get(key) or {}, old.get(key) or {}
        annotations[key] = {name: {**before.get(name, {}), **later.get(name, {})} if name in current.get("results", {})
                            else before.get(name, {}) for name in results}
    if results != current.get("results") or any(annotations[k] != current.get(k) for k in annotations):
        current["results"] = results
        current.update(annotations)
        new.write_text(json.dumps(current))
    return merged


# asv's result columns that hold one value per parameter combination (the rest describe the benchmark).
PER_COMBINATION = ("result", "stats_ci_99_a", "stats_ci_99_b", "stats_q_25", "stats_q_75", "stats_number",
                   "stats_repeat", "samples")


def _union_of_grids(earlier: list, later: list, columns: list[str]) -> list | None:
    """One asv result entry over the union of two runs' parameter grids, the later run's values
    wherever it ran a combination and NaN (asv's "skipped") where neither did; None where the grids
    are the same or the entries cannot be joined (another benchmark version or parameter count)."""
    old, new = dict(zip(columns, earlier)), dict(zip(columns, later))
    grids = old.get("params"), new.get("params")
    if (grids[0] == grids[1] or old.get("version") != new.get("version")
            or not all(isinstance(g, list) and all(isinstance(p, list) for p in g) for g in grids)
            or len(grids[0]) != len(grids[1])):
        return None
    params = [o + [v for v in n if v not in o] for o, n in zip(*grids)]
    where = [{combo: i for i, combo in enumerate(itertools.product(*g))} for g in grids]
    joined = dict(new, params=params)
    for column in PER_COMBINATION:
        values = old.get(column), new.get(column)
        if values[0] is None and values[1] is None:
            continue
        out = []
        for combo in itertools.product(*params):
            i_new, i_old = where[1].get(combo), where[0].get(combo)
            if i_new is not None:
                out.append(values[1][i_new] if values[1] is not None else None)
            elif i_old is not None:
                out.append(values[0][i_old] if values[0] is not None else None)
            else:
                out.append(math.nan if column == "result" else None)
        joined[column] = out
    last = max(i for i, c in enumerate(columns) if joined.get(c) is not None)
    return [joined.get(c) for c in columns[: last + 1]]


@dataclass
class SmokeOutcome:
    """What a ``--smoke`` run found, per parameter combination: a time, a skip (asv: NaN) or a failure
    (asv: no value), with the reason or the last line of the traceback from asv's log."""

    passed: int = 0
    skipped: dict[str, int] = field(default_factory=dict)  # reason -> combinations
    failed: list[tuple[str, str]] = field(default_factory=list)  # (benchmark (params), error)

    @property
    def ok(self) -> bool:
        return not self.failed and self.passed > 0

    def describe(self) -> str:
        skipped = sum(self.skipped.values())
        head = (f"smoke: {self.passed + skipped + len(self.failed)} combinations through asv's path: "
                f"{self.passed} passed, {skipped} skipped, {len(self.failed)} failed")
        return "\n".join([head, *(f"  skipped {n}: {reason}" for reason, n in self.skipped.items()),
                          *(f"  FAILED {where}: {error}" for where, error in self.failed)])


def smoke_outcome(folder: Path, log: Path) -> SmokeOutcome:
    """Each combination's status in asv's results under ``folder``, explained from ``log``."""
    said = _asv_said(log)
    outcome = SmokeOutcome()
    for path in result_files(folder):
        data = read_json(path) or {}
        columns = data.get("result_columns") or []
        for name, entry in sorted((data.get("results") or {}).items()):
            col = dict(zip(columns, entry)) if isinstance(entry, list) else {}
            values = col.get("result")
            for combo, value in zip(itertools.product(*(col.get("params") or [])), values or []):
                params = ", ".join(combo)
                if value is None:
                    outcome.failed.append((f"{name}({params})", said.get(params, f"no value; see {log}")))
                elif isinstance(value, float) and math.isnan(value):
                    reason = said.get(params, "no reason given")
                    outcome.skipped[reason] = outcome.skipped.get(reason, 0) + 1
                else:
                    outcome.passed += 1
    return outcome


def _asv_said(log: Path) -> dict[str, str]:
    """What asv's log says of each combination that failed or skipped, by its parameters as asv prints
    them: "For parameters: 'copy', '1048576', 'numpy'", then "asv: skipped: <reason>", or a traceback
    whose last line at the indentation of its "Traceback" line is the exception (the last one where
    exceptions are chained)."""
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return {}
    found: dict[str, str] = {}
    params, base = None, None
    for line in lines:
        text = re.sub(r"^\s*\[[^]]*\]\s*·+", "", line).strip()  # asv's "[ 50.00%] ···" prefix, if any
        indent = len(line) - len(line.lstrip())
        if text.startswith("For parameters: "):
            params, base = text[len("For parameters: "):], None
        elif params is not None and text.startswith("asv: skipped: "):
            found[params] = _skip_reason(text[len("asv: skipped: "):])
        elif params is not None and text.startswith("Traceback ("):
            base = indent
        elif params is not None and base is not None and indent == base and text \
                and not text.startswith(("During handling", "The above exception", "asv: benchmark failed")):
            found[params] = text
    return found


def _skip_reason(text: str) -> str:
    """``NotImplementedError('why')`` as asv prints a skip: its reason."""
    match = re.fullmatch(r"\w+\((['\"])(.*)\1\)", text.strip())
    return match.group(2) if match else text.strip()
