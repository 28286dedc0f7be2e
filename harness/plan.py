"""A run's plan: the selected studies of every kernel, expanded once into asv classes and problems.

``portabench run`` (and ``noise``, ``check``) builds one ``RunPlan`` from its flags: the devices, each
kernel's sizes (ints, checked once by the kernel where the user gave them: ``Kernel.parse_sizes``), the
studies asked for beside the main comparisons and a ``--bench`` expression. Nothing downstream checks a
size again: the plan's JSON, the suite's classes and ``Kernel.at_sizes`` take its sizes as they are.
Everything that needs the grid reads it from the plan: the runner's selection (``selection``, the asv
``--bench`` expression), the prefill (``jobs``) and the asv classes of the suite (``studies``). asv starts
the benchmark processes itself, so the runner hands them the plan in one environment variable
(``PLAN_ENV``, ``to_json``); ``suite/`` reads it back (``from_json``) and is the only reader of the
environment.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Iterator, Mapping, Sequence

from portabench.implementations import get_kernel, list_kernels
from portabench.implementations.model import DEVICES, MAIN, Device, Kernel, PortabenchError, Study

PLAN_ENV = "PORTABENCH_PLAN"  # the plan as JSON, for asv's benchmark processes (read in suite/)
INPUTS_STUDY = "inputs"  # the dataset readers' and generators' benchmarks (suite/dataset_io.py): not a kernel
INPUTS_MODULE = "dataset_io"


@dataclass(frozen=True)
class Job:
    """One problem to build ahead of the benchmarks: a kernel's (case, size, options)."""

    kernel: str
    case: str
    size: int
    options: tuple[tuple[str, str], ...]

    def describe(self) -> str:
        return " ".join([self.kernel, self.case, str(self.size), *(f"{k}={v}" for k, v in self.options)])


@dataclass(frozen=True)
class RunPlan:
    """What one run benchmarks. ``sizes``: (kernel, sizes) for the kernels not at their default sizes;
    ``studies``: the study names run beside every main comparison (``inputs``: the dataset benchmarks);
    ``bench``: a regular expression the benchmarks must also match (alone: any declared benchmark
    matching it). Kernels are expanded on first use, one at a time (an asv process imports one kernel)."""

    devices: tuple[Device, ...]
    sizes: tuple[tuple[str, tuple[int, ...]], ...] = ()
    studies: tuple[str, ...] = ()
    bench: str | None = None
    _expanded: dict[str, list[Study]] = field(default_factory=dict, init=False, repr=False, compare=False)

    @classmethod
    def build(cls, devices: Sequence[Device], sizes: Mapping[str, Sequence[int]] | None = None,
              studies: Sequence[str] = (), bench: str | None = None) -> RunPlan:
        """A plan of checked values: known devices, a valid expression, and ``sizes`` as the kernels checked them
        where they were given (``Kernel.parse_sizes``: the flags, a plain asv run's variables), or the kernels'
        own (``--smoke``'s): no kernel is imported here."""
        unknown = [d for d in devices if d not in DEVICES]
        if unknown:
            raise PortabenchError(f"unknown device {', '.join(unknown)}; known: {', '.join(DEVICES)}")
        unknown = [name for name in sizes or {} if name not in list_kernels()]
        if unknown:
            raise PortabenchError(f"unknown kernel {', '.join(unknown)}; known: {', '.join(list_kernels())}")
        if bench is not None:
            try:
                re.compile(bench)
            except re.error as exc:
                raise PortabenchError(f"--bench {bench!r} is not a regular expression: {exc}") from None
        given = tuple(sorted((name, tuple(values)) for name, values in (sizes or {}).items()))
        return cls(devices=tuple(devices), sizes=given, studies=tuple(studies), bench=bench)

    # --- the environment of asv's processes -------------------------------------------------------

    def to_json(self) -> str:
        return json.dumps({"devices": list(self.devices), "sizes": {k: list(v) for k, v in self.sizes},
                           "studies": list(self.studies), "bench": self.bench})

    @classmethod
    def from_json(cls, text: str) -> RunPlan:
        """The plan ``to_json`` wrote, taken as it is: its values were checked when it was built (no kernel is
        imported here)."""
        try:
            data = json.loads(text)
            return cls(devices=tuple(data["devices"]), sizes=tuple((k, tuple(v)) for k, v in data["sizes"].items()),
                       studies=tuple(data["studies"]), bench=data["bench"])
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise PortabenchError(f"${PLAN_ENV}: not a run plan ({exc})") from None

    # --- the grid ---------------------------------------------------------------------------------

    def sizes_of(self, kernel: str) -> tuple[int, ...] | None:
        """The sizes the plan gives ``kernel``, or None: its default size on each device."""
        return dict(self.sizes).get(kernel)

    def kernel(self, name: str) -> Kernel:
        """``name``'s kernel at the plan's sizes."""
        return get_kernel(name).at_sizes(self.sizes_of(name))

    def studies_of(self, name: str) -> list[Study]:
        """Every study kernel ``name`` declares on the plan's devices (the asv classes), device by device."""
        if name not in self._expanded:
            kernel = self.kernel(name)
            self._expanded[name] = [study for device in self.devices for study in kernel.studies(device)]
        return self._expanded[name]

    def declared(self) -> Iterator[tuple[str, Study]]:
        """(kernel, study) of every kernel's declared studies on the plan's devices."""
        for name in list_kernels():
            for study in self.studies_of(name):
                yield name, study

    def chosen(self, study: Study) -> bool:
        """Whether the run selects ``study``'s class: a main comparison, a study asked for, or with
        ``bench`` and no studies, any class (the expression then decides)."""
        return study.name == MAIN or study.name in self.studies or (self.bench is not None and not self.studies)

    def selection(self) -> str:
        """The asv ``--bench`` expression: the chosen classes (``chosen``), and where ``bench`` is given,
        only the benchmarks matching it."""
        classes = [f"{name}\\.{study.class_name}" for name, study in self.declared() if self.chosen(study)]
        if INPUTS_STUDY in self.studies or (self.bench is not None and not self.studies):
            classes.append(f"{INPUTS_MODULE}\\.\\w+")
        chosen = f"^(?:{'|'.join(classes)})\\."
        return f"(?=.*(?:{self.bench})){chosen}" if self.bench else chosen

    def jobs(self) -> list[Job]:
        """The problems of every selected benchmark whose kernel keeps its oracle on disk, once each (those
        the kernel calls unsupported left out): what the prefill builds before asv starts."""
        regex = re.compile(self.selection())
        seen: dict[Job, None] = {}
        for name in list_kernels():
            kernel = self.kernel(name)
            if not kernel.oracle_stored:
                continue
            for study in self.studies_of(name):
                if not any(regex.search(f"{name}.{study.class_name}.{m}") for m in study.method_names(name)):
                    continue
                for case, size, options in study.problems():
                    job = Job(name, case, size, tuple(sorted(options.items())))
                    if job not in seen and kernel.unsupported(case, size, options) is None:
                        seen[job] = None
        return list(seen)


def study_names() -> list[str]:
    """Every study some kernel declares on some device (the main comparison excluded), and ``inputs``."""
    names: list[str] = []
    for _, study in RunPlan(devices=DEVICES).declared():
        if study.name != MAIN and study.name not in names:
            names.append(study.name)
    return names + [INPUTS_STUDY]


__all__ = ["INPUTS_MODULE", "INPUTS_STUDY", "PLAN_ENV", "Job", "RunPlan", "study_names"]
