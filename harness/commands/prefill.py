"""The inputs and oracle answers of a run, built before asv starts, several problems at a time.

asv runs one parameter combination at a time, so the first variant of each problem would build its
inputs and float64 oracle while every core but one waited (on a GPU host, a large share of the
run). Here every problem the run's plan selects (``RunPlan.jobs``) is built first,
in worker processes (one per core, as host memory allows); the benchmark processes then read them
from the dataset cache (``datasets/stored.py``: keyed by the problem and the code, checked on read).

It only moves work: a problem that fails here (a dataset missing, too little memory) is left to
the benchmark's own ``setup``, which fails or skips it as it would have anyway. Kernels that keep
no oracle on disk (STREAM, Π) have nothing to build ahead. Problems of one case and size go one
after the other's first (MTTKRP, Φ and the CP-APR solvers share a generated stand-in).

Each worker has a Numba cache folder of its own: Numba's on-disk cache is not safe for two
processes compiling different signatures of one function at once (both may write the same
numbered file, leaving an index that points at the other's machine code).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import traceback
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, TextIO

from portabench.implementations import get_kernel
from portabench.harness.machine.record import run_cpus
from portabench.harness.plan import Job, RunPlan

MEMORY_FRACTION = 0.7  # of MemAvailable, for all builds at once
MEMORY_PER_BUILD = 8 * 2**30  # set aside per worker: a full-size nell-2 stand-in alone is 2.5 GB, before the oracle's


@dataclass
class PrefillSummary:
    jobs: int = 0
    failed: int = 0
    wall_s: float = 0.0
    workers: int = 0

    def describe(self) -> str:
        text = f"inputs and oracles of {self.jobs} problems in {self.wall_s:.1f} s ({self.workers} at a time)"
        return text + (f", {self.failed} left to the benchmarks (see the log)" if self.failed else "")


def build(job: Job, seed: int = 0) -> None:
    """Build ``job``'s inputs and oracle answer into the dataset cache (in this process)."""
    from portabench.implementations.verification import oracle_key, stored_reference

    kernel = get_kernel(job.kernel)
    problem = kernel.problem(job.case, job.size, seed, **dict(job.options))
    stored_reference(kernel, problem, oracle_key(job.case, job.size, seed, dict(job.options)))


def prefill(jobs: list[Job], env: dict[str, str], log: TextIO, numba_cache: Path, workers: int | None = None,
            available_memory: float | None = None, progress: Callable[[int], object] | None = None) -> PrefillSummary:
    """Build ``jobs`` in worker processes (their output to ``log``, a file), as many as there are cores (or
    ``workers``) and ``MEMORY_PER_BUILD`` in ``MEMORY_FRACTION`` of the available host memory."""
    from portabench.datasets.memory import available_host_memory_bytes

    started = time.time()
    memory = available_memory or available_host_memory_bytes() or 16 * 2**30
    workers = max(1, min(workers or len(run_cpus()), len(jobs) or 1, int(MEMORY_FRACTION * memory // MEMORY_PER_BUILD)))
    groups: dict[tuple[str, int], list[Job]] = {}
    for job in jobs:
        groups.setdefault((job.case, job.size), []).append(job)
    ready = [group.pop(0) for group in groups.values()]
    summary = PrefillSummary(jobs=len(jobs), workers=workers)
    state = {"unstarted": len(jobs), "stopping": False}
    changed = threading.Condition()  # guards the above, and starting workers once stopping
    processes: list[subprocess.Popen] = []

    def next_job() -> Job | None:
        with changed:
            while not ready and state["unstarted"] and not state["stopping"]:
                changed.wait()  # until a running build releases its case's other problems
            if not ready or state["stopping"]:
                return None
            state["unstarted"] -= 1
            return ready.pop(0)

    def serve(slot: int) -> None:
        process = None
        while (job := next_job()) is not None:
            try:
                if process is None or process.poll() is not None:
                    with changed:
                        if state["stopping"]:
                            return
                        process = _start_worker(env, log, numba_cache / f"slot-{slot}")
                        processes.append(process)
                process.stdin.write(json.dumps(asdict(job)) + "\n")
                process.stdin.flush()
                ok = process.stdout.readline().strip() == "ok"
            except Exception:  # the worker died (out of memory?) or could not start: a new one takes the next
                ok = False
            with changed:
                if state["stopping"]:
                    return  # interrupted: the log may be closed already
                if not ok:
                    summary.failed += 1
                    log.write(f"prefill: {job.describe()} failed: left to the benchmark\n")
                    log.flush()
                ready.extend(groups.pop((job.case, job.size), []))
                changed.notify_all()
            if progress is not None:
                progress(1)
        if process is not None:
            with contextlib.suppress(OSError):
                process.stdin.close()
            process.wait()

    threads = [threading.Thread(target=serve, args=(slot,), daemon=True) for slot in range(workers)]
    for thread in threads:
        thread.start()
    try:
        for thread in threads:
            while thread.is_alive():
                thread.join(0.2)
    except KeyboardInterrupt:
        with changed:  # no worker starts after this
            state["stopping"] = True
            changed.notify_all()
            for process in processes:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(process.pid, signal.SIGKILL)
        raise
    summary.wall_s = time.time() - started
    return summary


def _start_worker(env: dict[str, str], log: TextIO, numba_cache: Path) -> subprocess.Popen:
    numba_cache.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen([sys.executable, "-m", __name__], env={**env, "NUMBA_CACHE_DIR": str(numba_cache)},
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True, bufsize=1,
                            start_new_session=True)


def main() -> int:
    """A worker: one job (JSON) per line on stdin, ``ok`` or ``failed`` per job on stdout; the
    builds' own output and errors go to stderr (the run's log)."""
    reply, sys.stdout = sys.stdout, sys.stderr
    for line in sys.stdin:
        fields = json.loads(line)
        job = Job(**{**fields, "options": tuple(tuple(pair) for pair in fields["options"])})
        started = time.time()
        try:
            build(job)
        except Exception:  # the benchmark's setup meets it again and reports it
            traceback.print_exc()
            print(f"prefill: {job.describe()} failed", flush=True)
            reply.write("failed\n")
        else:
            print(f"prefill: {job.describe()} built in {time.time() - started:.1f} s", flush=True)
            reply.write("ok\n")
        reply.flush()
    return 0


def prefill_plan(plan: RunPlan, env: dict[str, str], log: TextIO, scratch: Path, verbose: bool) -> PrefillSummary:
    """The inputs and oracles of the plan's selected benchmarks (``RunPlan.jobs``), built several at a time
    before asv starts, with a progress bar unless ``verbose``."""
    from tqdm import tqdm

    jobs = plan.jobs()
    with tqdm(total=len(jobs), desc="inputs and oracles", unit="problem", file=sys.stderr, leave=False,
              disable=verbose or not jobs, mininterval=0.5 if sys.stderr.isatty() else 30.0, delay=1.0) as bar:
        summary = prefill(jobs, env, log, scratch / "numba-cache", progress=bar.update)
    log.write(f"prefill: {summary.describe()}\n")
    log.flush()
    return summary


__all__ = ["PrefillSummary", "build", "prefill", "prefill_plan"]


if __name__ == "__main__":
    sys.exit(main())
