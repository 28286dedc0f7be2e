"""``portabench run``: one asv run of this machine and its system record (the CLI then reports).

What runs: every kernel's main comparison on each device present, plus the studies asked for,
selected by the asv class names the kernels declare (``Kernel.studies``). Everything a run is
given is checked before asv starts (sizes, the benchmark expression, the studies, the folders).

asv writes into a scratch results directory under ``.asv/`` that starts as a copy of this
machine's folder; the machine's folder is written back only when the run recorded something,
and no other file under ``results/`` is touched (asv's ``benchmarks.json`` goes to the machine's
folder, where the report reads the parameter names). asv's pitfalls handled here: an existing
environment saves results only with ``--set-commit-hash``; ``forkserver`` (``launch_method``)
forks each benchmark from one process that imported the suite, which must start neither CUDA nor
OpenMP; a run of one commit rewrites its results file, so the benchmarks an earlier run of that
commit recorded and this one did not run are kept (whole benchmarks, and of a benchmark both ran,
the parameter combinations only the earlier run had: a second ``--size`` adds to the first);
``--record-samples`` keeps every sample (the report's best sample, ``compare``'s tests). Before
asv starts, the selected benchmarks' inputs and oracles are built several at a time
(``prefill.py``). asv's output goes to a log file; the terminal shows one progress bar, and an
interrupt (Ctrl-C or SIGTERM) stops asv and every benchmark process it started. asv's temporary
files (its forkserver's folder) go to a folder of the run's, removed however the run ends; one run
at a time in a checkout (``run_lock``).
"""

from __future__ import annotations

import bisect
import contextlib
import fcntl
import importlib.util
import itertools
import json
import math
import multiprocessing
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from portabench.datasets.paths import check_writable
from portabench.reports.rounds import CONTENDED, CONTENTION_KEY, ROUNDS_KEY, combo_key

from portabench.implementations import get_kernel, list_kernels
from .asv_config import config_dir, find_config, read_config
from portabench.implementations.model import MAIN, Device, PortabenchError
from portabench.implementations.machine.runinfo import (DEVICES_ENV, RUN_LOG_ENV, busy_share, cpu_seconds, detect_devices, others_share,
                              system_record, write_system_record)
from .prefill import PrefillSummary, environment, prefill, selected_jobs

INPUTS_STUDY = "inputs"  # the dataset readers' and generators' benchmarks (suite/dataset_io.py): not a kernel
INPUTS_MODULE = "dataset_io"
PARAM_NAMES_FILE = "benchmarks.json"  # per machine folder; asv skips files of this name


def machine_name(name: str | None) -> str:
    name = name or socket.gethostname().split(".")[0] or "machine"
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name):
        raise PortabenchError(f"machine name {name!r}: use letters, digits, '.', '_' and '-'")
    return name


def _git_head(repo: Path) -> str:
    """The commit checked out at ``repo`` (asv files results by commit), else one line saying what to do."""
    try:
        out = subprocess.run(["git", "rev-parse", "--verify", "HEAD^{commit}"], cwd=repo, capture_output=True,
                             text=True)
    except OSError as exc:
        raise PortabenchError(f"git could not run in {repo}: {exc.strerror or exc}") from None
    if out.returncode == 0:
        return out.stdout.strip()
    said = next((line for line in out.stderr.splitlines() if line.startswith("fatal:")), out.stderr.strip())
    if "dubious ownership" in said:
        todo = f"git config --global --add safe.directory {repo}"
    elif "not a git repository" in said:
        todo = "run it from a git clone of portabench (git clone ...; pip install -e .)"
    else:
        todo = "commit the checkout first (git add -A && git commit -m ...)"
    raise PortabenchError(f"{repo}: asv records results per commit, and git finds none here "
                          f"({said.removeprefix('fatal: ') or 'no HEAD'}): {todo}")


# --- what to run --------------------------------------------------------------------------------


def parse_size_flags(pairs: list[str]) -> dict[str, tuple[int, ...]]:
    """``--size KERNEL=N[,N]`` flags as kernel -> sizes, each checked by its kernel."""
    sizes: dict[str, tuple[int, ...]] = {}
    for pair in pairs:
        name, sep, text = pair.partition("=")
        if not sep or not text.strip():
            raise PortabenchError(f"--size {pair!r}: expected KERNEL=N[,N], e.g. stream=1048576; "
                                  f"kernels: {', '.join(list_kernels())}")
        kernel = get_kernel(name.strip())
        sizes[kernel.name] = kernel.parse_sizes(text, f"--size {kernel.name}")
    return sizes


def study_names() -> list[str]:
    """Every study some kernel declares on some device (the main comparison excluded), and ``inputs``."""
    names: list[str] = []
    for kernel in list_kernels():
        for device in ("cpu", "gpu"):
            names += [s.name for s in get_kernel(kernel).studies(device) if s.name != MAIN and s.name not in names]
    return names + [INPUTS_STUDY]


def parse_studies(text: str | None) -> list[str]:
    """``--studies NAME[,NAME]|all`` as study names (checked)."""
    if not text:
        return []
    known = study_names()
    asked = [s.strip() for s in text.split(",") if s.strip()]
    if asked == ["all"]:
        return known
    unknown = [s for s in asked if s not in known]
    if unknown or not asked:
        raise PortabenchError(f"--studies {text!r}: unknown {', '.join(unknown) or 'empty list'}; "
                              f"known: {', '.join(known)}, or all")
    return asked


def check_regex(pattern: str | None) -> str | None:
    if pattern is None:
        return None
    try:
        re.compile(pattern)
    except re.error as exc:
        raise PortabenchError(f"--bench {pattern!r} is not a regular expression: {exc}") from None
    return pattern


def selection(studies: list[str], devices: list[Device], bench: str | None) -> str:
    """The asv ``--bench`` expression: the main comparisons and ``studies`` on ``devices``; with
    ``bench`` and no studies, any declared benchmark matching it; with both, those matching it."""
    classes = []
    for kernel in list_kernels():
        for device in devices:
            for study in get_kernel(kernel).studies(device):
                if study.name == MAIN or study.name in studies or (bench and not studies):
                    classes.append(f"{kernel}\\.{study.class_name}")
    if INPUTS_STUDY in studies or (bench and not studies):
        classes.append(f"{INPUTS_MODULE}\\.\\w+")
    chosen = f"^(?:{'|'.join(classes)})\\."
    return f"(?=.*(?:{bench})){chosen}" if bench else chosen


def smoke_sizes() -> dict[str, tuple[int, ...]]:
    """``--smoke``'s sizes: each kernel at its ``verify`` size, small enough that every main combination's
    whole asv path (setup, the gate, the timed method) takes about a second."""
    return {name: (get_kernel(name).verify_size,) for name in list_kernels()}


ROUND_SAMPLES = 7  # samples a round where a run takes several, so that each round's median is known

# asv attributes of a smoke run: one sample of one process, no warm-up (the path is checked, not timed).
SMOKE_ATTRIBUTES = ("repeat=1", "rounds=1", "warmup_time=0")


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
    for path in _result_files(folder):
        data = _read_json(path) or {}
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


# --- the run -------------------------------------------------------------------------------------


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


def run_benchmarks(
    machine: str | None,
    bench: str | None = None,
    sizes: dict[str, tuple[int, ...]] | None = None,
    studies: list[str] | None = None,
    devices: list[Device] | None = None,
    quick: bool = False,
    user_peaks: dict | None = None,
    verbose: bool = False,
    rounds: int = 1,
    smoke: bool = False,
) -> RunSummary:
    """Run asv on this machine and record its system. ``sizes``: kernel -> sizes instead of the
    defaults; ``studies``: study names beside the main comparisons; ``devices``: those to run (default:
    every device present); ``rounds``: processes per combination, asv running every combination
    once per round, so that on a noisy machine each variant's samples come from several moments
    and processes; ``smoke``: every selected combination once, at ``smoke_sizes``, one sample, recording
    nothing (the summary's ``smoke`` says what passed). asv's status is the summary's (2: some benchmark
    failed)."""
    config = find_config()
    repo = config.parent
    machine = machine_name(machine)
    check_regex(bench)
    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1 or (quick and rounds != 1):
        raise PortabenchError(f"--rounds must be a whole number >= 1, and 1 with --quick (got {rounds})")
    if smoke and (sizes or studies or quick or rounds != 1):
        raise PortabenchError("--smoke runs the main comparisons at small sizes, one sample each: "
                              "give it no --size, --studies, --quick or --rounds")
    if smoke:
        sizes = smoke_sizes()
    if shutil.which("git") is None:
        raise PortabenchError("git is not on PATH: asv needs it (install git, then run again)")
    commit = _git_head(repo)
    devices = chosen_devices(devices)
    results = check_writable(config_dir("results_dir", "results", config), "the results directory")

    env = benchmark_environment(sizes, devices, events=None)
    conf = read_config(config)
    benchmark_dir = (repo / conf.get("benchmark_dir", "suite")).resolve()
    chosen = selection(studies or [], devices, bench)
    with environment(env):  # the sizes asked for are among the parameters an expression may name
        check_selects(studies or [], devices, bench, benchmark_dir)
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
            # ``branches``: asv resolves each before it runs, even with --set-commit-hash; naming the commit
            # itself lets any checkout run (a ``master`` default, a feature branch, a detached HEAD).
            conf.update(repo=str(repo), benchmark_dir=str(benchmark_dir), results_dir=str(scratch),
                        html_dir=str(config_dir("html_dir", "html", config)), branches=[commit])
            scratch_config = scratch / "asv.conf.json"
            scratch_config.write_text(json.dumps(conf, indent=2))

            asv = [sys.executable, "-m", "asv"]
            command = [*asv, "run", "--config", str(scratch_config), "--python=same", "--set-commit-hash", commit,
                       "--machine", machine, "--record-samples", "--launch-method", launch_method(), "--show-stderr",
                       "--bench", chosen]
            if smoke:
                command += [arg for attribute in SMOKE_ATTRIBUTES for arg in ("--attribute", attribute)]
            elif quick:  # asv's own --quick saves nothing; fewer samples keep the results
                command += ["--attribute", "repeat=3", "--attribute", "rounds=1"]
            elif rounds > 1:  # rounds of a known number of samples: compare's replicates (reports/rounds.py)
                command += ["--attribute", f"rounds={rounds}", "--attribute", f"repeat={ROUND_SAMPLES}"]
            what = "smoke test of the main comparisons" if smoke else "main comparisons"
            print(f"portabench: benchmarking {machine} ({', '.join(devices)}; {what}"
                  f"{' + ' + ', '.join(studies) if studies else ''}), asv's output in {log_path}", flush=True)
            started = time.time()
            with open(log_path, "w") as log:
                log.write(" ".join(command) + "\n")
                log.flush()
                subprocess.run([*asv, "machine", "--yes", "--machine", machine, "--config", str(scratch_config)],
                               cwd=repo, env=env, check=True, stdout=log, stderr=subprocess.STDOUT)
                built = _prefill(chosen, devices, env, log, scratch, verbose)
                trace: list[tuple[float, dict]] = []
                status = _run_with_progress(command, repo, env, log, scratch, events, verbose, rounds, trace)
            wall = time.time() - started
            summary = _summarize(RunSummary(status, machine, log_path, wall_s=wall, prefill=built), scratch / machine,
                                 events, started, trace)
            if smoke:
                summary.smoke = smoke_outcome(scratch / machine, log_path)
            recorded = not smoke and _write_back(scratch, machine, results, started, rounds, summary.contention)
        finally:
            for folder in (scratch, asv_tmp):
                if folder is not None:
                    shutil.rmtree(folder, ignore_errors=True)
        if recorded:
            path = write_system_record(results, record)
            print(f"portabench: results and system record -> {path.parent}")
        elif not smoke:
            print(f"portabench: nothing recorded (see {log_path})", file=sys.stderr)
    if status not in (0, 2):
        raise PortabenchError(f"asv run failed with exit status {status}: see {log_path}")
    if status == 2 and not smoke:
        print(f"portabench: some benchmarks failed (wrong answer or error): they recorded no time; see {log_path}",
              file=sys.stderr)
    return summary


def chosen_devices(devices: list[Device] | None) -> list[Device]:
    """``devices`` if each is present here (default: every device present), else a one-line error."""
    present = detect_devices()
    missing = [d for d in devices or [] if d not in present]
    if missing:
        raise PortabenchError(f"--device {','.join(missing)}: not present here ({', '.join(present)} found)")
    return list(devices or present)


def scratch_folder(repo: Path, machine: str) -> tuple[Path, Path, Path]:
    """A new scratch folder of a run under ``.asv/runs/``, and beside it the run's log and event files."""
    scratch_root = check_writable(repo / ".asv" / "runs", "the scratch folder")
    scratch_root.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f"{machine}-", dir=scratch_root))
    stem = f"{machine}-{time.strftime('%Y%m%d-%H%M%S')}"
    return scratch, scratch_root / f"{stem}.log", scratch_root / f"{stem}.events.jsonl"


def benchmark_environment(sizes: dict[str, tuple[int, ...]] | None, devices: list[Device],
                          events: Path | None) -> dict:
    """The environment of asv and its benchmark processes: the kernels' sizes, the devices, the event log."""
    env = dict(os.environ)
    for kernel, values in (sizes or {}).items():
        env[get_kernel(kernel).size_env] = ",".join(str(n) for n in values)
    env[DEVICES_ENV] = ",".join(devices)
    if events is not None:
        env[RUN_LOG_ENV] = str(events)
    env.setdefault("MKL_THREADING_LAYER", "GNU")  # keep MKL's OpenMP runtime from fighting Numba's
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def wait_passively_if_busy(env: dict, record: dict | None = None) -> str:
    """On a busy machine, OpenMP's threads (Numba's, MKL's) wait passively in the run's processes, and a
    line says so ("" on a quiet one). libgomp's threads spin at a barrier; with a neighbour on a core, a
    spinning thread holds a core while the one with work waits for a time slice, and a run of a short
    Numba kernel stalls many times over (reference/NOTES.md, "Numba on a busy CPU"). Passive waits slow
    short kernels on a quiet machine, so they are not the default."""
    share = busy_share()
    if not share >= CONTENDED:
        return ""
    said = f"other processes took {share:.0%} of the CPU just before the run"
    if "OMP_WAIT_POLICY" in env:
        return f"{said} (OMP_WAIT_POLICY={env['OMP_WAIT_POLICY']}, as set); its times are partly the neighbours'"
    env["OMP_WAIT_POLICY"] = "passive"
    if record is not None:
        record.setdefault("threads", {}).setdefault("environment", {})["OMP_WAIT_POLICY"] = "passive"
    return (f"{said}: OpenMP threads wait passively in this run (OMP_WAIT_POLICY=passive), so that a neighbour "
            "cannot stall them; its times are partly the neighbours' and are marked so")


LOCK_FILE = "run.lock"  # under the checkout's .asv/: held by the run in progress, its pid inside


@contextlib.contextmanager
def run_lock(repo: Path) -> Iterator[None]:
    """Hold the checkout's run lock for a run: two runs at once would each write back the machine's
    folder, the second silently replacing the first's results of the same benchmarks. A second run
    is refused at once, naming the first's process."""
    path = repo / ".asv" / LOCK_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            raise PortabenchError(f"another portabench run (pid {f.read().strip() or '?'}) is in progress in {repo}: "
                                  "wait for it to end, or stop it") from None
        f.seek(0)
        f.truncate()
        f.write(f"{os.getpid()}\n")
        f.flush()
        try:
            yield
        finally:
            f.truncate(0)  # released with the file's closing


class Terminated(KeyboardInterrupt):
    """SIGTERM, handled as an interrupt: asv and every process under it stopped, the scratch folder removed."""


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Within the block, SIGTERM raises ``Terminated`` (once: a second does not interrupt the clean-up)."""
    def terminated(signum: int, frame: object) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise Terminated()

    previous = signal.signal(signal.SIGTERM, terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def declared_benchmarks(devices: list[Device], benchmark_dir: Path) -> Iterator[tuple[str, list[list[str]]]]:
    """Every benchmark asv can find on ``devices``: its name ``<module>.<class>.<method>`` and its parameter
    grid as asv writes the values (repr). Sizes as the environment sets them."""
    for name in list_kernels():
        kernel = get_kernel(name)
        for device in devices:
            for study in kernel.studies(device):
                grid = [[repr(v) for v in values] for values in study.grid()]
                for method in study.method_names(name):
                    yield f"{name}.{study.class_name}.{method}", grid
    path = benchmark_dir / f"{INPUTS_MODULE}.py"
    spec = importlib.util.spec_from_file_location(f"_portabench_{INPUTS_MODULE}", path)
    if not path.is_file() or spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for cls_name, cls in vars(module).items():
        if isinstance(cls, type) and cls.__module__ == module.__name__:
            grid = [[repr(v) for v in values] for values in getattr(cls, "params", [])]
            for method in dir(cls):
                if method.startswith(("time_", "track_")):
                    yield f"{INPUTS_MODULE}.{cls_name}.{method}", grid


def check_selects(studies: list[str], devices: list[Device], bench: str | None, benchmark_dir: Path) -> None:
    """Refuse a ``--bench`` expression that selects no benchmark (asv would fail saying only "see the
    log"), naming the classes it could select. asv matches a parametrized benchmark as
    ``name(param, ...)``, so an expression may name parameter values."""
    if not bench:
        return
    chosen, candidates = re.compile(selection(studies, devices, bench)), re.compile(selection(studies, devices, ".*"))
    classes: list[str] = []
    for name, grid in declared_benchmarks(devices, benchmark_dir):
        if not candidates.search(name):
            continue
        classes += [name.rsplit(".", 1)[0]] if name.rsplit(".", 1)[0] not in classes else []
        combos = itertools.product(*grid) if grid else [None]
        if any(chosen.search(name if combo is None else f"{name}({', '.join(combo)})") for combo in combos):
            return
    among = f" among the main comparisons and {', '.join(studies)}" if studies else ""
    raise PortabenchError(f"--bench {bench!r} selects no declared benchmark on {', '.join(devices)}{among}; declared: "
                          f"{', '.join(classes)} (asv matches <class>.<method>(<parameters>); `portabench list "
                          "--studies` says what each runs)")


def _prefill(chosen: str, devices: list[Device], env: dict, log, scratch: Path, verbose: bool) -> PrefillSummary:
    """The selected benchmarks' inputs and oracles, built several at a time before asv starts."""
    from tqdm import tqdm

    with environment(env):
        jobs = selected_jobs(chosen, devices)
    with tqdm(total=len(jobs), desc="inputs and oracles", unit="problem", file=sys.stderr, leave=False,
              disable=verbose or not jobs, mininterval=0.5 if sys.stderr.isatty() else 30.0, delay=1.0) as bar:
        summary = prefill(jobs, env, log, scratch / "numba-cache", progress=bar.update)
    log.write(f"prefill: {summary.describe()}\n")
    log.flush()
    return summary


def _run_with_progress(command: list[str], repo: Path, env: dict, log, scratch: Path, events: Path,
                       verbose: bool, rounds: int = 1, trace: list | None = None) -> int:
    """asv in its own session (so that an interrupt reaches it only through us), its output to ``log``
    (and the terminal with ``verbose``), a progress bar of benchmark processes begun (one per
    combination and round); on an interrupt,
    asv and every process under it are stopped before KeyboardInterrupt goes on."""
    from tqdm import tqdm

    process = subprocess.Popen(command, cwd=repo, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, bufsize=1, start_new_session=True)
    # Not a terminal (a CI log): a line every half minute instead of ten a second.
    bar = tqdm(total=None, desc="benchmarks", unit="comb", file=sys.stderr, disable=verbose,
               mininterval=0.5 if sys.stderr.isatty() else 30.0,
               delay=1.0, bar_format="{desc}: {n}/{total} " + ("combinations" if rounds == 1 else "processes")
               + " [{elapsed}<{remaining}] {postfix}")
    stop, begun_so_far = threading.Event(), _Begun(events)
    if trace is not None:  # the machine's CPU seconds every half second: the processes' contention
        trace.append((time.time(), cpu_seconds()))

    def watch() -> None:
        while not stop.wait(0.5):
            if trace is not None:
                trace.append((time.time(), cpu_seconds()))
            if bar.total is None:
                selected = _combinations_selected(scratch, command[command.index("--bench") + 1])
                bar.total = None if selected is None else selected * rounds
            begun = begun_so_far.count()
            if begun > bar.n:
                bar.update(begun - bar.n)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        for line in process.stdout:
            log.write(line)
            log.flush()
            if verbose:
                sys.stdout.write(line)
            elif "failed" in line and "···" in line:
                bar.set_postfix_str("some failed: see the log", refresh=True)
        return process.wait()
    except KeyboardInterrupt:
        _stop_tree(process.pid)
        raise
    finally:
        stop.set()
        watcher.join(1.0)
        bar.close()
        if trace is not None:
            trace.append((time.time(), cpu_seconds()))


def _combinations_selected(scratch: Path, pattern: str) -> int | None:
    """Parameter combinations asv will run: from the benchmarks it discovered (None until it has)."""
    try:
        found = json.loads((scratch / "benchmarks.json").read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(found, dict):
        return None
    total = 0
    for name, info in found.items():
        if isinstance(info, dict) and re.search(pattern, name):
            total += math.prod(len(p) for p in info.get("params") or [[None]])
    return total


class _Begun:
    """Benchmark processes begun so far, from the run's event log, read on from where the last look ended
    (the log grows by a line every sample: reading it whole twice a second took a share of a small machine)."""

    def __init__(self, events: Path) -> None:
        self.events, self.offset, self.pids, self.rest = events, 0, set(), ""

    def count(self) -> int:
        try:
            with open(self.events) as f:
                f.seek(self.offset)
                text = f.read()
                self.offset = f.tell()
        except OSError:
            return len(self.pids)
        lines = (self.rest + text).split("\n")
        self.rest = lines.pop()  # a line still being written
        self.pids |= {line.split(",", 1)[0] for line in lines if '"event": "start"' in line}
        return len(self.pids)


def _descendants(pid: int) -> list[int]:
    """Every process under ``pid`` (Linux /proc; elsewhere none)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
        except (OSError, ValueError, IndexError):
            continue
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def _stop_tree(pid: int, grace_s: float = 2.0) -> None:
    """Stop asv (``pid``, its own process group) and every process it started, which asv puts in
    process groups of their own: SIGTERM, then SIGKILL for what is left after ``grace_s``."""
    tree = [pid, *_descendants(pid)]
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for p in tree:
            for kill in (lambda: os.killpg(p, sig), lambda: os.kill(p, sig)):
                try:
                    kill()
                except (ProcessLookupError, PermissionError):
                    pass
        deadline = time.time() + grace_s
        while time.time() < deadline and any(_alive(p) for p in tree):
            time.sleep(0.05)
        if not any(_alive(p) for p in tree):
            return


def _alive(pid: int) -> bool:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _result_files(folder: Path) -> list[Path]:
    return [f for f in folder.glob("*.json") if f.name not in ("machine.json", PARAM_NAMES_FILE)] if folder.is_dir() else []


def _this_runs_entries(path: Path, started: float) -> Iterator[tuple[str, dict]]:
    """(benchmark, its result columns) of an asv results file, for the benchmarks the run that began at
    ``started`` ran (asv keeps earlier runs' entries of the commit beside them)."""
    data = _read_json(path) or {}
    columns = data.get("result_columns") or []
    for name, entry in (data.get("results") or {}).items():
        col = dict(zip(columns, entry)) if isinstance(entry, list) else {}
        if isinstance(col.get("started_at"), (int, float)) and col["started_at"] / 1000 >= started - 1:
            yield name, col


def _recorded(path: Path, started: float) -> bool:
    """Whether the run recorded a value in ``path``: one whose every benchmark failed writes only nulls."""
    return any(isinstance(v, (int, float)) and math.isfinite(v)
               for _, col in _this_runs_entries(path, started) for v in (col.get("result") or []))


def _write_back(scratch: Path, machine: str, results: Path, started: float, rounds: int = 1,
                contention: dict | None = None) -> bool:
    """Copy the machine's folder back into ``results`` if the run that began at ``started`` recorded a
    value (a results file of nothing but failed entries is left out); True if so. Parameter names of
    every benchmark the machine ran go beside its results (``benchmarks.json``); each results file says
    how many samples each round of this run took and what share of the CPU others took
    (``annotate_rounds``)."""
    ran, mine = scratch / machine, results / machine
    before = {f.name: f.stat().st_mtime_ns for f in _result_files(mine)}
    changed = [f for f in _result_files(ran) if before.get(f.name) != f.stat().st_mtime_ns and _recorded(f, started)]
    if not changed:
        return False
    mine.mkdir(parents=True, exist_ok=True)
    for f in changed:
        annotate_rounds(f, rounds, started, contention)
    for f in changed:
        if (mine / f.name).exists():
            for name in merge_earlier_results(f, mine / f.name):
                print(f"portabench: {name}: this commit's earlier results of other parameters (another --size) "
                      "are kept beside this run's", file=sys.stderr)
    for f in changed + [ran / "machine.json"]:
        if f.exists():
            shutil.copy2(f, mine / f.name)
    names = _read_json(mine / PARAM_NAMES_FILE) or {}
    discovered = _read_json(scratch / "benchmarks.json") or {}
    names.update({k: v for k, v in discovered.items() if isinstance(v, dict)})
    names["version"] = discovered.get("version", 2)
    (mine / PARAM_NAMES_FILE).write_text(json.dumps(names, indent=4, sort_keys=True) + "\n")
    return True


def annotate_rounds(path: Path, rounds: int, started: float,
                    contention: dict[tuple[str, tuple[str, ...]], list[float]] | None = None) -> None:
    """Write into asv's results file ``path`` how many samples each round took, for every combination
    timed since ``started`` (asv pools the rounds' samples into one list): ``rounds`` rounds of
    ``ROUND_SAMPLES`` where the samples add up to that, else one round of them all; and, from
    ``contention`` (``RunSummary.contention``), the share of the CPU others took during each round."""
    data = _read_json(path)
    if not data:
        return
    annotation, others = dict(data.get(ROUNDS_KEY) or {}), dict(data.get(CONTENTION_KEY) or {})
    for name, col in _this_runs_entries(path, started):
        counts, shares = {}, {}
        for combo, values in zip(itertools.product(*(col.get("params") or [])), col.get("samples") or []):
            if isinstance(values, list) and values:
                whole = rounds > 1 and len(values) == rounds * ROUND_SAMPLES
                counts[combo_key(combo)] = [ROUND_SAMPLES] * rounds if whole else [len(values)]
                measured = (contention or {}).get((name.rsplit(".", 1)[0], tuple(combo)))
                if measured:
                    shares[combo_key(combo)] = [round(x, 4) if x == x else None for x in measured]
        annotation[name], others[name] = counts, shares
    data[ROUNDS_KEY], data[CONTENTION_KEY] = annotation, others
    path.write_text(json.dumps(data))


def merge_earlier_results(new: Path, earlier: Path) -> list[str]:
    """asv writes a commit's results file afresh: keep in ``new`` what an earlier run of the same
    commit and environment (``earlier``) recorded for the benchmarks this run did not run, and for
    a benchmark both ran over different parameters (another ``--size``), the earlier run's
    combinations this one did not run. Returns the benchmarks merged that way."""
    old, current = _read_json(earlier), _read_json(new)
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
    for key in (ROUNDS_KEY, CONTENTION_KEY):  # per combination: the later run's where it ran one
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


def _read_json(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _events(events: Path) -> Iterator[dict]:
    try:
        lines = events.read_text().splitlines()
    except OSError:
        return
    for line in lines:
        try:
            yield json.loads(line)
        except ValueError:
            continue


def launch_method() -> str:
    """asv's way of starting each benchmark: ``forkserver`` where there is one (a fork of a process
    that imported the suite once, saving the interpreter and imports, about a second per
    combination), else a fresh interpreter (``spawn``). Fork-safe because nothing in the suite's
    import or grid building starts OpenMP or CUDA (``mkl.mkl_unavailable`` looks at files only).
    Nor may it set up Numba's compiler there: forks of a warmed-up parent name their parallel
    kernels alike (by object address), and a process loading two such cached kernels runs one
    for the other (tried at ddcfd33: STREAM's nstream ran triad's loop)."""
    return "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"


def _lives(events: Path) -> list[dict]:
    """Each benchmark process of a run from its events, in the order they started: its combination
    (``key``: benchmark class, asv's parameter reprs), start and end, and its last reading of its own CPU
    time (``own``: since its fork, every thread)."""
    lives: dict[int, dict] = {}
    for event in _events(events):
        life = lives.setdefault(event["pid"], {"start": event["process_start"], "end": event["t"],
                                               "key": (event["benchmark"], tuple(repr(p) for p in event["params"]))})
        life["end"] = max(life["end"], event["t"])
        if event.get("cpu"):
            life["own"] = event["cpu"]["own"]
    return sorted(lives.values(), key=lambda life: life["start"])


def contention_of(lives: list[dict], trace: list[tuple[float, dict]]) -> dict[tuple[str, tuple[str, ...]], list[float]]:
    """Per combination, the share of the CPU other processes took during each of its processes' lives: the
    machine's CPU seconds over the life (``trace``: the runner's readings, interpolated), less the
    process's own. A whole life (a second or more), not its samples alone: /proc/stat counts in ticks
    of 10 ms, too coarse for the milliseconds of a short kernel's samples."""
    cpus, shares = os.cpu_count() or 1, {}
    trace = [(t, c) for t, c in trace if c]
    times = [t for t, _ in trace]

    def at(t: float) -> dict[str, float]:  # the machine's counters at t, read between two readings
        i = min(max(bisect.bisect_left(times, t), 1), len(times) - 1)
        (t0, c0), (t1, c1) = trace[i - 1], trace[i]
        w = (t - t0) / (t1 - t0) if t1 > t0 else 1.0
        return {k: c0[k] + w * (c1[k] - c0[k]) for k in ("busy", "steal")}

    for life in lives:
        if "own" not in life or len(trace) < 2 or life["start"] < times[0] or life["end"] > times[-1]:
            continue
        first, last = {**at(life["start"]), "own": 0.0}, {**at(life["end"]), "own": life["own"]}
        shares.setdefault(life["key"], []).append(others_share(first, last, life["end"] - life["start"], cpus))
    return shares


def _summarize(summary: RunSummary, folder: Path, events: Path, started: float,
               trace: list[tuple[float, dict]] | None = None) -> RunSummary:
    """Timed seconds (every sample of this run) and each combination's overhead (its process's life
    less its samples) from the results asv wrote and the benchmark processes' events."""
    samples: dict[tuple[str, tuple[str, ...]], float] = {}
    for path in _result_files(folder):
        for name, col in _this_runs_entries(path, started):
            params = col.get("params") or []
            for combo, values in zip(itertools.product(*params), col.get("samples") or []):
                if isinstance(values, list):
                    key = (name.rsplit(".", 1)[0], tuple(combo))  # asv stores each value's repr()
                    samples[key] = samples.get(key, 0.0) + sum(v for v in values if isinstance(v, (int, float)))
    lives = _lives(events)
    alive: dict[tuple, float] = {}  # each combination's processes' lives, every round
    for life in lives:
        alive[life["key"]] = alive.get(life["key"], 0.0) + life["end"] - life["start"]
    summary.contention = contention_of(lives, trace or [])
    summary.combinations, summary.processes = len(alive), len(lives)
    summary.timed_s = sum(samples.values())
    summary.overheads_s = [seconds - samples.get(key, 0.0) for key, seconds in alive.items()]
    return summary

