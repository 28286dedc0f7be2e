"""``portabench run``: one asv run of this machine and its system record (the CLI then reports).

What runs: the run's plan (``harness/plan.py``): every kernel's main comparison on each
device present, plus the studies asked for, selected by the asv class names the kernels declare
(``Kernel.studies``). Everything a run is given is checked before asv starts (``selection.py``).
Before asv starts, the selected benchmarks' inputs and oracles are built several at a time
(``prefill.py``); asv then runs in a process of its own (``asv_process.py``) with the plan in its
environment, into a scratch results directory under ``.asv/`` that starts as a copy of this
machine's folder; the machine's folder is written back only when the run recorded something
(``results_merge.py``), and no other file under ``results/`` is touched.

asv's pitfalls handled here: an existing environment saves results only with ``--set-commit-hash``;
``--record-samples`` keeps every sample (the report's best sample, ``compare``'s tests). asv's
temporary files (its forkserver's folder) go to a folder of the run's, removed however the run ends.
"""

from __future__ import annotations

import itertools
import json
import math
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from portabench.datasets.paths import check_writable
from portabench.harness.machine.record import RUN_LOG_ENV, system_record, write_system_record
from portabench.implementations.model import PortabenchError
from portabench.harness.plan import RunPlan
from portabench.harness.statistics import CONTENDED

from .asv_config import config_dir, find_config, read_config
from .asv_process import (benchmark_environment, contention_of, git_head, launch_method, process_lives, run_lock,
                          run_with_progress, scratch_folder, wait_passively_if_busy, work_from_events)
from .prefill import PrefillSummary, prefill_plan
from .results_merge import (ROUND_SAMPLES, SmokeOutcome, result_files, smoke_outcome, this_runs_entries,
                            write_back)
from .selection import check_selects, machine_name


# asv attributes of a smoke run: one sample of one process, no warm-up (the path is checked, not timed).
SMOKE_ATTRIBUTES = ("repeat=1", "rounds=1", "warmup_time=0")
ASV = [sys.executable, "-m", "asv"]


@dataclass
class RunSummary:
    """What ``run_benchmarks`` did: asv's status, where things went, and where the time went."""

    status: int
    machine: str
    log: Path
    combinations: int = 0
    processes: int = 0  # benchmark processes: one per combination and round
    wall_s: float = 0.0
    timed_s: float = 0.0
    overheads_s: list[float] = field(default_factory=list)  # per combination that ran: all but its samples, every round
    prefill: PrefillSummary | None = None  # the inputs and oracles built before asv started (in wall_s)
    smoke: SmokeOutcome | None = None  # a ``--smoke`` run's findings (nothing recorded)
    # (benchmark class, params) -> the share of the CPU other processes took during each round's samples
    contention: dict[tuple[str, tuple[str, ...]], list[float]] = field(default_factory=dict)
    # (benchmark class, params) -> what the code that ran recorded of it (``asv_process.work_from_events``)
    work: dict[tuple[str, tuple[str, ...]], dict] = field(default_factory=dict)

    def contended(self) -> str:
        """A line where other processes took a noticeable share of the CPU during the samples, else ""."""
        shares = [s for values in self.contention.values() for s in values if s == s]
        if not shares or max(shares) < CONTENDED:
            return ""
        hit = sum(s >= CONTENDED for s in shares)
        return (f"other processes took {100 * sum(shares) / len(shares):.0f} % of the CPU on average while the "
                f"benchmark processes ran, at least {100 * CONTENDED:.0f} % in {hit} of {len(shares)} processes (worst "
                f"{100 * max(shares):.0f} %): those times are partly the neighbours' and are marked so")

    @property
    def median_overhead_s(self) -> float:
        values = sorted(self.overheads_s)
        if not values:
            return math.nan
        mid = len(values) // 2
        return values[mid] if len(values) % 2 else 0.5 * (values[mid - 1] + values[mid])

    def describe(self) -> str:
        processes = f" ({self.processes} processes)" if self.processes > self.combinations else ""
        text = (f"{self.combinations} parameter combinations{processes} in {duration(self.wall_s)}: {duration(self.timed_s)} "
                f"timed, {duration(self.wall_s - self.timed_s)} overhead (median {self.median_overhead_s:.2f} s "
                f"per combination)")
        return text + (f"; first, {self.prefill.describe()}" if self.prefill and self.prefill.jobs else "")


def duration(seconds: float) -> str:
    seconds = max(0.0, seconds)
    return f"{int(seconds // 60)} min {seconds % 60:04.1f} s" if seconds >= 60 else f"{seconds:.1f} s"


def run_benchmarks(machine: str | None, plan: RunPlan, *, quick: bool = False, user_peaks: dict | None = None,
                   verbose: bool = False, rounds: int = 1, smoke: bool = False) -> RunSummary:
    """Run asv on this machine over ``plan`` (``selection.plan_of``) and record its system. ``rounds``: processes
    per combination, asv running every combination once per round, so that on a busy machine each variant's
    samples come from several moments and processes; ``smoke`` (a plan of ``plan_of(..., smoke=True)``): every
    selected combination once, one sample, recording nothing (the summary's ``smoke`` says what passed). asv's
    status is the summary's (2: some benchmark failed)."""
    config = find_config()
    repo = config.parent
    machine = machine_name(machine)
    _check_run_flags(quick, rounds, smoke)
    commit = git_head(repo)
    results = check_writable(config_dir("results_dir", "results", config), "the results directory")

    env = benchmark_environment(plan, events=None)
    conf = read_config(config)
    benchmark_dir = (repo / conf.get("benchmark_dir", "suite")).resolve()
    chosen = plan.selection()
    check_selects(plan, benchmark_dir)
    record = system_record(machine, user_peaks)

    with run_lock(repo):
        busy = wait_passively_if_busy(env, record)
        if busy:
            print(f"portabench: warning: {busy}", file=sys.stderr, flush=True)
        scratch, log_path, events = scratch_folder(repo, machine)
        env[RUN_LOG_ENV] = str(events)
        mine = results / machine
        asv_tmp: Path | None = None
        try:
            # asv's temporary files (its forkserver's socket folder) go to a folder of this run's, removed with the
            # scratch folder however the run ends: in the temporary directory, under a short name, as the socket's
            # path must stay under 108 bytes.
            asv_tmp = Path(tempfile.mkdtemp(prefix="pb-"))
            env["TMPDIR"] = str(asv_tmp)
            if mine.is_dir() and not smoke:  # a smoke run reads back only what it wrote
                shutil.copytree(mine, scratch / machine)
            scratch_config = _write_scratch_config(conf, config, benchmark_dir, scratch, commit)
            command = _asv_command(scratch_config, commit, machine, chosen, quick, rounds, smoke)
            what = "smoke test of the main comparisons" if smoke else "main comparisons"
            print(f"portabench: benchmarking {machine} ({', '.join(plan.devices)}; {what}"
                  f"{' + ' + ', '.join(plan.studies) if plan.studies else ''}), asv's output in {log_path}", flush=True)
            started = time.time()
            summary = _run_asv(command, scratch_config, plan, env, (repo, machine, scratch, log_path, events), started,
                               verbose, rounds)
            if smoke:
                summary.smoke = smoke_outcome(scratch / machine, log_path)
            recorded = not smoke and write_back(scratch, machine, results, started, rounds, summary.contention,
                                                         summary.work)
        finally:
            for folder in (scratch, asv_tmp):
                if folder is not None:
                    shutil.rmtree(folder, ignore_errors=True)
        if recorded:
            path = write_system_record(results, record)
            print(f"portabench: results and system record -> {path.parent}")
        elif not smoke:
            print(f"portabench: nothing recorded (see {log_path})", file=sys.stderr)
    _say_status(summary.status, smoke, log_path)
    return summary


def _check_run_flags(quick: bool, rounds: int, smoke: bool) -> None:
    """Refuse flags that do not go together, and a machine without git, before anything starts."""
    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1 or (quick and rounds != 1):
        raise PortabenchError(f"--rounds must be a whole number >= 1, and 1 with --quick (got {rounds})")
    if smoke and (quick or rounds != 1):
        raise PortabenchError("--smoke runs the main comparisons at small sizes, one sample each: "
                              "give it no --size, --studies, --quick or --rounds")
    if shutil.which("git") is None:
        raise PortabenchError("git is not on PATH: asv needs it (install git, then run again)")


def _write_scratch_config(conf: dict, config: Path, benchmark_dir: Path, scratch: Path, commit: str) -> Path:
    """asv's configuration for this run, in the scratch folder: this checkout, its results into the scratch."""
    # ``branches``: asv resolves each before it runs, even with --set-commit-hash; naming the commit
    # itself lets any checkout run (a ``master`` default, a feature branch, a detached HEAD).
    conf.update(repo=str(config.parent), benchmark_dir=str(benchmark_dir), results_dir=str(scratch),
                html_dir=str(config_dir("html_dir", "html", config)), branches=[commit])
    scratch_config = scratch / "asv.conf.json"
    scratch_config.write_text(json.dumps(conf, indent=2))
    return scratch_config


def _asv_command(scratch_config: Path, commit: str, machine: str, chosen: str, quick: bool, rounds: int,
                 smoke: bool) -> list[str]:
    """The ``asv run`` of the selected benchmarks (``chosen``), with the samples the flags ask for."""
    command = [*ASV, "run", "--config", str(scratch_config), "--python=same", "--set-commit-hash", commit,
               "--machine", machine, "--record-samples", "--launch-method", launch_method(), "--show-stderr",
               "--bench", chosen]
    if smoke:
        command += [arg for attribute in SMOKE_ATTRIBUTES for arg in ("--attribute", attribute)]
    elif quick:  # asv's own --quick saves nothing; fewer samples keep the results
        command += ["--attribute", "repeat=3", "--attribute", "rounds=1"]
    elif rounds > 1:  # rounds of a known number of samples: compare's replicates (harness/statistics.py)
        command += ["--attribute", f"rounds={rounds}", "--attribute", f"repeat={ROUND_SAMPLES}"]
    return command


def _run_asv(command: list[str], scratch_config: Path, plan: RunPlan, env: dict[str, str],
             where: tuple[Path, str, Path, Path, Path], started: float, verbose: bool, rounds: int) -> RunSummary:
    """asv's machine record, the prefill of the plan's inputs, then ``command`` with its progress, from
    ``started``: what it did. ``where``: the checkout, the machine, the scratch folder, asv's log and the
    benchmark processes' events."""
    repo, machine, scratch, log_path, events = where
    with open(log_path, "w") as log:
        log.write(" ".join(command) + "\n")
        log.flush()
        subprocess.run([*ASV, "machine", "--yes", "--machine", machine, "--config", str(scratch_config)],
                       cwd=repo, env=env, check=True, stdout=log, stderr=subprocess.STDOUT)
        built = prefill_plan(plan, env, log, scratch, verbose)
        trace: list[tuple[float, dict]] = []
        status = run_with_progress(command, repo, env, log, scratch, events, verbose, rounds, trace)
    wall = time.time() - started
    return _summarize(RunSummary(status, machine, log_path, wall_s=wall, prefill=built), scratch / machine,
                      events, started, trace)


def _say_status(status: int, smoke: bool, log_path: Path) -> None:
    """asv's status beyond a failed benchmark as an error; failed benchmarks said once (a smoke run says them)."""
    if status not in (0, 2):
        raise PortabenchError(f"asv run failed with exit status {status}: see {log_path}")
    if status == 2 and not smoke:
        print(f"portabench: some benchmarks failed (wrong answer or error): they recorded no time; see {log_path}",
              file=sys.stderr)


def _summarize(summary: RunSummary, folder: Path, events: Path, started: float,
               trace: list[tuple[float, dict]] | None = None) -> RunSummary:
    """Timed seconds (every sample of this run) and each combination's overhead (its process's life
    less its samples) from the results asv wrote and the benchmark processes' events."""
    samples: dict[tuple[str, tuple[str, ...]], float] = {}
    for path in result_files(folder):
        for name, col in this_runs_entries(path, started):
            params = col.get("params") or []
            for combo, values in zip(itertools.product(*params), col.get("samples") or []):
                if isinstance(values, list):
                    key = (name.rsplit(".", 1)[0], tuple(combo))  # asv stores each value's repr()
                    samples[key] = samples.get(key, 0.0) + sum(v for v in values if isinstance(v, (int, float)))
    lives = process_lives(events)
    alive: dict[tuple, float] = {}  # each combination's processes' lives, every round
    for life in lives:
        alive[life["key"]] = alive.get(life["key"], 0.0) + life["end"] - life["start"]
    summary.contention = contention_of(lives, trace or [])
    summary.work = work_from_events(events)
    summary.combinations, summary.processes = len(alive), len(lives)
    summary.timed_s = sum(samples.values())
    summary.overheads_s = [seconds - samples.get(key, 0.0) for key, seconds in alive.items()]
    return summary


__all__ = ["SMOKE_ATTRIBUTES", "RunSummary", "duration", "run_benchmarks"]
