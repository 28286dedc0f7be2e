"""The asv classes of a kernel, built from what the kernel declares (``Kernel.studies``).

Each declared study of each device of the run's plan becomes one class, named as the study says
(``MttkrpCPU``, ``MttkrpRankGPU``, ...), with parameters in the kernel's order: case, size,
options, variant, then the settings swept. Variants that cannot run here (MKL missing) are
left out of the grid, and a device outside the plan gets no class, so asv spends no process on
them; a combination that is no problem (a mode a tensor lacks) is skipped in ``setup``
before anything is made. ``portabench run`` selects the main comparisons, plus the studies
asked for, by the class names.

The plan (``harness/plan.py``) is the one ``portabench run`` built: it hands it to asv's
processes in ``$PORTABENCH_PLAN`` (JSON), read here. A plain ``asv run`` has none: its plan is every
device present (``$PORTABENCH_DEVICES``, comma-separated, where set) at the default sizes, or those
of ``$PORTABENCH_SIZE_<KERNEL>`` (or the kernel's older variable) where set. This package is the only
part of portabench that reads its settings from the environment.

Timing: a sample is one run (``number = 1``); at least 7 samples, so that the median of a round, which
``portabench compare`` judges (a t-test over rounds, harness/statistics.py), outlasts 3 slow outliers, and
at most 20, or 1 s of samples once 7 are taken. ``--quick`` takes 3. GPU classes first run the
kernel for ``GPU_WARMUP_S`` untimed: a GPU runs a process's first samples slower until it has
been busy for a while. They also run it once, untimed, at the end of ``setup``, right
before each sample: a GPU idle for the milliseconds between asv's samples runs the next kernel
slower, and by how much differs from process to process (implementations/bcsr/EXPERIMENTS.md,
"Idle gaps between samples").

A GPU sample is the mean of up to ``GPU_LAUNCHES_MAX`` runs launched back to back, as many as fill
about ``GPU_SAMPLE_S``, and one wait for the device; the class's clock divides by their number. A
sample of one run also timed the host's launch and synchronisation, which differed from process to
process by as much as a sub-millisecond kernel's margin over another; back to back, the host
launches the next run while the device works on the last, as an application's loop does.
asv cannot batch the runs itself: with a ``setup``, its ``number > 1`` re-runs ``setup`` between
calls and times each alone.
"""

from __future__ import annotations

import functools
import inspect
import json
import os
import time
from typing import Any

from portabench.harness.machine.record import RUN_LOG_ENV, cpu_seconds, detect_devices, process_start_time
from portabench.implementations.model import DEVICES, Device, Kernel, PortabenchError, Study, Variant
from portabench.harness.plan import PLAN_ENV, RunPlan

from .prepared import prepared

DEVICES_ENV = "PORTABENCH_DEVICES"  # a plain asv run's devices (comma-separated); default: those detected
GPU_WARMUP_S = 0.2
GPU_SAMPLE_S = 0.01  # long enough that a millisecond kernel takes several runs a sample
GPU_LAUNCHES_MAX = 10


def _time_kernel(self: Any, *params: str) -> None:
    self.variant.run()


def _time_kernel_launches(self: Any, *params: str) -> None:
    for _ in range(self.launches):
        self.variant.launch()
    self.variant.synchronize()


def _clock_per_launch(self: Any) -> float:
    """asv's ``timer`` of a GPU kernel class: its differences are a sample's time per run."""
    return time.perf_counter() / self.launches


def launches_per_sample(run_s: float) -> int:
    """How many back-to-back runs of ``run_s`` seconds one GPU sample takes."""
    return max(1, min(GPU_LAUNCHES_MAX, int(GPU_SAMPLE_S / max(run_s, 1e-9))))


@functools.cache
def _recorded(kernel: Kernel, case: str, size: int, options: tuple[tuple[str, str], ...],
              variant: str) -> dict[str, Any]:
    """What a combination's "ready" event records: the variant's family, and the work model's bytes and flops
    (``Work``: ``bytes_counted``, ``working_set`` null where the kernel has none) of one run. Once per process
    and combination: ``setup`` runs before every sample, and a work model may take a while (GMRES solves its
    pool for the iteration counts)."""
    work = kernel.work(case, size, **dict(options))
    return {"family": kernel.variant(variant).family, "bytes": work.bytes, "flops": work.flops,
            "bytes_counted": work.bytes_counted, "working_set": work.working_set}


def _time_preparation(self: Any, *params: str) -> None:
    self.variant.rearrange()


def _track_iterations_mean(self: Any, *params: str) -> float:
    iterations = self.variant.iterations()
    return float("nan") if iterations is None else float(iterations.mean())


def _track_iterations_max(self: Any, *params: str) -> float:
    iterations = self.variant.iterations()
    return float("nan") if iterations is None else float(iterations.max())


@functools.cache
def _constructor_parameters(variant: type[Variant]) -> frozenset[str]:
    """The settings a variant's constructor takes. Cached: asv calls ``setup`` before every sample, and
    ``inspect.signature`` of ``object.__init__`` (a class without its own) parses text, ten times
    the cost of the others: a longer pause between a GPU kernel's samples, which made them slower
    (implementations/bcsr/EXPERIMENTS.md, "Why `cupy-auto` was slower in asv")."""
    return frozenset(inspect.signature(variant.__init__).parameters)


class DeclaredBenchmark:
    """What every generated class shares: asv's timing attributes, ``setup`` and the run log."""

    kernel: Kernel
    study: Study
    number = 1
    repeat = (7, 20, 1.0)
    rounds = 1
    warmup_time = 0.0
    run_before_sample = False  # GPU kernel classes: one untimed run at the end of setup
    launches = 1  # runs a sample times (GPU kernel classes: set in setup)
    timeout = 1200  # generating a full-size input the first time dominates

    def setup(self, *params: str) -> None:
        self._log("start", params)
        p = dict(zip(self.param_names, params))
        kernel, study = self.kernel, self.study
        case = p[kernel.case_param]
        size = next(n for n in study.sizes if str(n) == p[kernel.size_param])  # asv's string, the plan's int
        options = {k: p[k] for k in kernel.options if k in p}
        reason = kernel.unsupported(case, size, options)
        if reason is not None:
            raise NotImplementedError(reason)
        settings = kernel.variant_settings({k: p[k] for k in study.settings})
        accepted = _constructor_parameters(kernel.variant(p["variant"]))
        if not set(settings) <= accepted:  # e.g. numba-privatized has no nonzeros per thread
            raise NotImplementedError(f"{p['variant']} takes no {', '.join(sorted(set(settings) - accepted))}")
        self.variant: Variant = prepared(kernel, p["variant"], case, size, options=options, settings=settings)
        self._log("ready", params)
        if self.run_before_sample:
            start = time.perf_counter()
            self.variant.run()
            self.launches = launches_per_sample(time.perf_counter() - start)

    def teardown(self, *params: str) -> None:
        self._log("end", params)

    def _log(self, event: str, params: tuple[str, ...]) -> None:
        """One line per event for ``portabench run``'s progress and overhead figures (nothing without it).
        Once the variant is ready, the line also says what the code that runs has the combination move and
        compute, and the variant's family (``_recorded``), for the report to read instead of its own code's."""
        path = os.environ.get(RUN_LOG_ENV)
        if not path:
            return
        record = {"pid": os.getpid(), "event": event, "t": time.time(), "process_start": process_start_time(),
                  "benchmark": f"{self.kernel.name}.{type(self).__name__}", "params": list(params)}
        if event != "start":  # around the samples: who else used the CPU meanwhile (the run's contention)
            record["cpu"] = cpu_seconds()
        if event == "ready":
            p = dict(zip(self.param_names, params))
            options = tuple((k, p[k]) for k in self.kernel.options if k in p)
            try:
                record.update(_recorded(self.kernel, p[self.kernel.case_param], int(p[self.kernel.size_param]),
                                        options, p["variant"]))
            except (PortabenchError, KeyError, ValueError, TypeError):
                pass  # the report then rates the combination by its own work model, as for older results
        line = json.dumps(record)
        with open(path, "a") as log:
            log.write(line + "\n")


_MEASURES = {"time_preparation": _time_preparation, "track_iterations_mean": _track_iterations_mean,
             "track_iterations_max": _track_iterations_max}


def _methods(kernel: Kernel, study: Study) -> dict[str, Any]:
    timed = _time_kernel_launches if study.device == "gpu" else _time_kernel
    return {name: _MEASURES.get(name, timed) for name in study.method_names(kernel.name)}


def asv_class(kernel: Kernel, study: Study) -> type | None:
    """The asv class of ``study``, or None when none of its variants can run here."""
    runnable = [v for v in study.variants
                if study.device != "cpu" or kernel.variant(v).unavailable() is None]
    if not runnable:
        return None
    names = kernel.benchmark_param_names() + list(study.settings)
    grid = study.grid(tuple(runnable))
    methods = _methods(kernel, study)
    gpu = study.device == "gpu"
    launched = any(m is _time_kernel_launches for m in methods.values())
    body = {"kernel": kernel, "study": study, "param_names": names, "params": grid,
            "__doc__": f"{kernel.name}, {study.name}: {study.title}", "__module__": f"suite.{kernel.name}",
            "warmup_time": GPU_WARMUP_S if gpu else 0.0, "run_before_sample": launched, **methods,
            **({"timer": _clock_per_launch} if launched else {})}
    return type(study.class_name, (DeclaredBenchmark,), body)


def environment_sizes(kernel: Kernel) -> tuple[int, ...] | None:
    """A plain ``asv run``'s sizes of ``kernel``: ``$PORTABENCH_SIZE_<KERNEL>`` or the kernel's older
    variable, checked as ``--size`` is (``Kernel.parse_sizes``), else None (the defaults)."""
    for env in (kernel.size_env, kernel.legacy_size_env):
        text = os.environ.get(env, "").strip() if env else ""
        if text:
            return kernel.parse_sizes(text, env)
    return None


def environment_devices() -> tuple[Device, ...]:
    """A plain ``asv run``'s devices: ``$PORTABENCH_DEVICES`` (comma-separated) if set, else those detected."""
    given = os.environ.get(DEVICES_ENV, "").strip()
    if given:
        return tuple(d for d in DEVICES if d in {part.strip() for part in given.split(",")})
    return tuple(detect_devices())


@functools.cache
def current_plan(kernel_name: str) -> RunPlan:
    """The plan this process's classes of ``kernel_name`` come from: ``$PORTABENCH_PLAN`` (``portabench run``'s,
    taken as it is), else a plain asv run's (only ``kernel_name``'s variables read, and checked, so that a
    process imports one kernel)."""
    text = os.environ.get(PLAN_ENV, "").strip()
    if text:
        return RunPlan.from_json(text)
    from portabench.implementations import get_kernel

    sizes = environment_sizes(get_kernel(kernel_name))
    return RunPlan.build(environment_devices(), sizes={kernel_name: sizes} if sizes else None)


def define(namespace: dict[str, Any], kernel_name: str) -> None:
    """Put the asv classes of ``kernel_name``'s studies on the plan's devices into ``namespace``."""
    plan = current_plan(kernel_name)
    kernel = plan.kernel(kernel_name)
    for study in plan.studies_of(kernel_name):
        cls = asv_class(kernel, study)
        if cls is not None:
            namespace[study.class_name] = cls


__all__ = ["DeclaredBenchmark", "asv_class", "current_plan", "define"]
