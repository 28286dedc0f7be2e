"""The asv process of a run: its environment and scratch folder, one run at a time in a checkout,
asv in its own session with a progress bar, and every process under it stopped on an interrupt
(Ctrl-C or SIGTERM); then what the benchmark processes' event log says of their lives and of the
share of the CPU others took meanwhile.

asv's pitfalls handled here: ``forkserver`` (``launch_method``) forks each benchmark from one
process that imported the suite, which must start neither CUDA nor OpenMP; asv puts the benchmark
processes in process groups of their own, so stopping asv's group alone would leave them running.
"""

from __future__ import annotations

import bisect
import contextlib
import fcntl
import json
import math
import multiprocessing
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Iterator

from portabench.datasets.paths import check_writable
from portabench.harness.machine.record import (RECORDED_WORK, RUN_LOG_ENV, busy_share, cpu_seconds, others_share,
                                               run_cpus)
from portabench.implementations.model import PortabenchError
from portabench.harness.plan import PLAN_ENV, RunPlan
from portabench.harness.statistics import CONTENDED


def git_head(repo: Path) -> str:
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


def launch_method() -> str:
    """asv's way of starting each benchmark: ``forkserver`` where there is one (a fork of a process
    that imported the suite once, saving each combination the interpreter's start and the imports),
    else a fresh interpreter (``spawn``). Fork-safe because nothing in the suite's import or grid
    building starts OpenMP or CUDA (``mkl.mkl_unavailable`` looks at files only). Nor may it set up
    Numba's compiler there: forks of a warmed-up parent name their parallel kernels alike (by object
    address), and a process loading two such cached kernels runs one for the other (STREAM's nstream
    once ran triad's loop)."""
    return "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"


def scratch_folder(repo: Path, machine: str) -> tuple[Path, Path, Path]:
    """A new scratch folder of a run under ``.asv/runs/``, and beside it the run's log and event files."""
    scratch_root = check_writable(repo / ".asv" / "runs", "the scratch folder")
    scratch_root.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f"{machine}-", dir=scratch_root))
    stem = f"{machine}-{time.strftime('%Y%m%d-%H%M%S')}"
    return scratch, scratch_root / f"{stem}.log", scratch_root / f"{stem}.events.jsonl"


def benchmark_environment(plan: RunPlan, events: Path | None) -> dict[str, str]:
    """The environment of asv and its benchmark processes: this one's, the run's plan (``$PORTABENCH_PLAN``,
    written here once, read back by the suite) and the event log."""
    env = dict(os.environ)
    env[PLAN_ENV] = plan.to_json()
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
# The machine's CPU counters are read this often while asv runs: a benchmark process's contention is
# interpolated between readings, which assumes the machine's load steady in between: false at a
# life's two ends, and over a life of a second or two half-second readings can err by a tenth of a
# 2-CPU machine. A reading costs tens of microseconds.
TRACE_S = 0.1


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


def run_with_progress(command: list[str], repo: Path, env: dict, log, scratch: Path, events: Path,
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
    if trace is not None:  # the machine's and this run's CPU seconds every TRACE_S: the processes' contention
        trace.append((time.time(), cpu_seconds(tree_of=os.getpid())))

    def watch() -> None:
        ticks = 0
        while not stop.wait(TRACE_S):
            if trace is not None:
                trace.append((time.time(), cpu_seconds(tree_of=os.getpid())))
            ticks += 1
            if ticks % round(0.5 / TRACE_S):  # the progress bar every half second
                continue
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
            trace.append((time.time(), cpu_seconds(tree_of=os.getpid())))


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


def read_events(events: Path) -> Iterator[dict]:
    try:
        lines = events.read_text().splitlines()
    except OSError:
        return
    for line in lines:
        try:
            yield json.loads(line)
        except ValueError:
            continue


def process_lives(events: Path) -> list[dict]:
    """Each benchmark process of a run from its events, in the order they started: its combination
    (``key``: benchmark class, asv's parameter reprs), start and end, and its last reading of its own CPU
    time (``own``: since its fork, every thread)."""
    lives: dict[int, dict] = {}
    for event in read_events(events):
        life = lives.setdefault(event["pid"], {"start": event["process_start"], "end": event["t"],
                                               "key": (event["benchmark"], tuple(repr(p) for p in event["params"]))})
        life["end"] = max(life["end"], event["t"])
        if event.get("cpu"):
            life["own"] = event["cpu"]["own"]
    return sorted(lives.values(), key=lambda life: life["start"])


def work_from_events(events: Path) -> dict[tuple[str, tuple[str, ...]], dict[str, Any]]:
    """Per combination (benchmark class, asv's parameter reprs), what its "ready" event recorded of the code that
    ran (``RECORDED_WORK``: the variant's family, the work model's bytes and flops); combinations whose event
    recorded none are left out."""
    work = {}
    for event in read_events(events):
        if event.get("event") == "ready" and all(k in event for k in RECORDED_WORK):
            work[(event["benchmark"], tuple(repr(p) for p in event["params"]))] = {k: event[k] for k in RECORDED_WORK}
    return work


def contention_of(lives: list[dict], trace: list[tuple[float, dict]]) -> dict[tuple[str, tuple[str, ...]], list[float]]:
    """Per combination, the share of the run's CPUs (``run_cpus``) other processes took during each of its
    processes' lives: those CPUs' seconds over the life (``trace``: the runner's readings, interpolated),
    less the run's (``run``: the runner's process tree, the benchmark process in it; where not read, the
    process's own).
    A whole life (a second or more), not its samples alone: /proc/stat counts in ticks of 10 ms, too
    coarse for the milliseconds of a short kernel's samples."""
    cpus, shares = len(run_cpus()), {}
    trace = [(t, c) for t, c in trace if c]
    times = [t for t, _ in trace]

    def at(t: float) -> dict[str, float]:  # the counters at t, read between two readings
        i = min(max(bisect.bisect_left(times, t), 1), len(times) - 1)
        (t0, c0), (t1, c1) = trace[i - 1], trace[i]
        w = (t - t0) / (t1 - t0) if t1 > t0 else 1.0
        return {k: c0[k] + w * (c1[k] - c0[k]) for k in ("busy", "steal", "run") if k in c0 and k in c1}

    for life in lives:
        if "own" not in life or len(trace) < 2 or life["start"] < times[0] or life["end"] > times[-1]:
            continue
        # The run's own processes (the runner, asv between samples) are left out where the trace read them.
        first, last = {**at(life["start"]), "own": 0.0}, {**at(life["end"]), "own": life["own"]}
        shares.setdefault(life["key"], []).append(others_share(first, last, life["end"] - life["start"], cpus))
    return shares
