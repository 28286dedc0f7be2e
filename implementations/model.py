"""The kernel model: what every kernel and every variant of it provides.

A *kernel* (STREAM, MTTKRP, ...) owns its problem definition (cases, sizes, seeded
inputs), its work model (bytes and flops per run) and the check of an output against
its float64 oracle in ``portabench.reference``. A *variant* is one implementation of
one kernel on one backend (``backends``: the software it runs on, which offers the devices
it runs on), from one family: ``portable`` (Numba, CuPy kernels) or ``vendor``
(NumPy/SciPy/MKL, CuPy built-ins/cuBLAS/cuSPARSE).

A variant's life: ``unavailable()`` says why it cannot run here (or ``None``);
``prepare(problem)`` does everything that must not be timed (allocation, transfer,
compilation, warm-up); ``run()`` is the timed call and returns only once the device
has finished; ``output()`` hands the result back as a host float64 array.
"""

from __future__ import annotations

import copy
import inspect
import itertools
import math
import os
from abc import ABC, abstractmethod
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Iterator, Literal

import numpy as np

from portabench.datasets.errors import PortabenchError, UnknownNameError

if TYPE_CHECKING:
    from .backends import Backend

Family = Literal["portable", "vendor"]
Device = Literal["cpu", "gpu"]
FAMILIES: tuple[Family, ...] = ("portable", "vendor")
DEVICES: tuple[Device, ...] = ("cpu", "gpu")
MAIN = "main"  # the study name of a kernel's main portable-vs-vendor comparison
Measure = Literal["kernel", "preparation", "iterations"]


class WrongAnswerError(PortabenchError, AssertionError):
    """A variant's output disagrees with the oracle: it must not be timed."""


@dataclass(frozen=True)
class Work:
    """Bytes moved through main memory and floating-point operations of one run.

    ``bytes`` is the kernel's compulsory traffic (each array touched once). Kernels whose
    published work model also counts re-reads that caches may serve (GenTen's MTTKRP, the
    Φ kernel's Q) give that count as ``bytes_counted``; rates under it can pass 100 % of peak.
    ``working_set`` is the distinct data one run touches where a run passes over it many times
    (an iterative solver's tensor, Π and factors); None: ``bytes``. The report calls a result
    "in cache" by it.
    """

    bytes: float
    flops: float
    bytes_counted: float | None = None
    working_set: float | None = None


# The in-cache rule, written once: a working set below this many times its device's cache (the CPU's
# last-level cache, the GPU's L2) may be served from that cache, so its GB/s may be cache bandwidth. The
# report calls such a result "in cache" (no % of peak, no part in the measured peak); the kernels size their
# CPU defaults at least this far beyond the last-level cache (STREAM's rule for its arrays).
IN_CACHE_FACTOR = 4


def beyond_cache_bytes(cache_bytes: Any) -> Any:
    """The fewest bytes that are not in a cache of ``cache_bytes`` bytes (``IN_CACHE_FACTOR`` times it)."""
    return IN_CACHE_FACTOR * cache_bytes


def in_cache(working_set: Any, cache_bytes: Any) -> Any:
    """Whether a working set of ``working_set`` bytes is in a cache of ``cache_bytes`` bytes (below
    ``beyond_cache_bytes``); elementwise on arrays. An unknown cache (NaN) compares False: not in cache."""
    return working_set < beyond_cache_bytes(cache_bytes)


COMPONENTWISE = "max |out - oracle| over the componentwise error bound"  # a Check's measure where a bound is known


@dataclass(frozen=True)
class Check:
    """An output compared with the oracle."""

    max_rel_error: float
    tolerance: float

    what: str = "max relative error"  # what max_rel_error measures, for messages

    @property
    def passed(self) -> bool:
        # NaN compares False: an unwritten (poisoned) element never passes.
        return bool(self.max_rel_error <= self.tolerance)

    def describe(self) -> str:
        return f"{self.what} {self.max_rel_error:.3g} > tolerance {self.tolerance:.1g}"


@dataclass(frozen=True)
class Study:
    """One asv benchmark class of a kernel on one device, declared by the kernel: its main
    portable-vs-vendor comparison (``name == MAIN``, run by default) or a study (run on request).

    The class's parameters are, in the kernel's ``param_names`` order, the cases, the sizes, each
    problem option's values (``options``; an option left out takes its default), the variants,
    then the variant settings swept (``settings``, constructor arguments, as strings).
    ``measure``: what the class times ("kernel": one run; "preparation": the untimed
    rearrangement of one run; "iterations": asv ``track_`` counts of an iterative solver).
    """

    name: str
    device: Device
    class_name: str  # the asv class: stable across commits, so results stay comparable
    cases: tuple[str, ...]
    sizes: tuple[int, ...]
    variants: tuple[str, ...]
    options: dict[str, tuple[str, ...]] = field(default_factory=dict)
    settings: dict[str, tuple[str, ...]] = field(default_factory=dict)
    measure: Measure = "kernel"
    title: str = ""

    def method_names(self, kernel: str) -> tuple[str, ...]:
        """The asv methods of the class (``<kernel>.<class_name>.<method>`` are its benchmarks)."""
        if self.measure == "preparation":
            return ("time_preparation",)
        if self.measure == "iterations":
            return ("track_iterations_mean", "track_iterations_max")
        return (f"time_{kernel}",)

    def grid(self, variants: tuple[str, ...] | None = None) -> list[list[str]]:
        """The class's asv parameter values in order (cases, sizes, options, variants, settings), as strings;
        ``variants``: those in place of the declared ones (the suite leaves out what cannot run here)."""
        return [list(self.cases), [str(n) for n in self.sizes], *(list(v) for v in self.options.values()),
                list(self.variants if variants is None else variants), *(list(v) for v in self.settings.values())]

    @property
    def combinations(self) -> int:
        """Parameter combinations of the class (asv's grid: every list's product)."""
        return math.prod(len(values) for values in self.grid())

    def problems(self) -> Iterator[tuple[str, int, dict[str, str]]]:
        """(case, size, options) of every problem of the class, each once (the variants and settings share them)."""
        names = list(self.options)
        for case, size in itertools.product(self.cases, self.sizes):
            for values in itertools.product(*(self.options[n] for n in names)):
                yield case, size, dict(zip(names, values))


Partition = Literal["blocks", "rows", "nonzeros"]
# The study across devices (``Kernel.devices_study``, run by ``portabench scale``) and its settings: the device
# count, the partition and, where a kernel sweeps it, the scaling: "strong" splits one problem of the recorded
# size, "weak" gives every device a problem of that size (``whole_size``).
DEVICES_STUDY = "devices"
DEVICES_SETTING, PARTITION_SETTING, SCALING_SETTING = "devices", "partition", "scaling"
STRONG, WEAK = "strong", "weak"


def whole_size(size: int, devices: int, scaling: str = STRONG) -> int:
    """The size of the whole problem a run across ``devices`` devices split, its recorded size being ``size``."""
    return size * devices if scaling == WEAK else size


@dataclass(frozen=True)
class Part:
    """One device's share of a problem split across ``parts`` devices (``Kernel.split``).

    ``problem`` is the share as a problem of its own, which any single-device variant runs. ``combine``
    is what joins the shares' outputs inside the timed region: "none" (each device owns a disjoint part
    of the output), or "sum" (the shares' outputs add up: an all-reduce). ``rows``: the output rows the
    share owns (a split by output rows), or None. ``whole``: whether the problem split is one of its own,
    whose oracle checks the joined output (a tensor); else the whole is made of the shares' own inputs,
    and each share's oracle checks it (STREAM's blocks; a sum against the sum of the shares' oracles)."""

    problem: "Problem"
    combine: Literal["none", "sum"]
    rows: tuple[int, int] | None = None
    whole: bool = True
    # A solver's share: the rows of each mode's factor it updates (``problem`` is then the whole problem,
    # and the variant joins the devices' updates itself: ``cpapr_mu.variant.ModeRows``).
    mode_rows: tuple[tuple[int, int], ...] | None = None


class Problem(ABC):
    """One concrete, seeded instance of a kernel's problem. Every problem has a ``case`` (the kernel's
    case: a STREAM operation, a dataset, ...) and a ``size`` (its size parameter, as the benchmarks
    record it, in the kernel's ``size_unit``): fields of the problem, or properties where derived."""

    kernel: ClassVar[str]
    case: str
    size: int

    @abstractmethod
    def inputs(self) -> dict[str, np.ndarray]:
        """Every array the kernel consumes, generated from the seed (cached)."""

    def device_footprint(self) -> tuple[str, float]:
        """(what they are, their bytes): the arrays of this problem a variant holds in a device's memory, as
        an out-of-memory message names them. Here: every input's bytes (NaN for one without ``nbytes``); a
        kernel whose variants hold other arrays (rearranged inputs, an output as large) says which."""
        return "the inputs", float(sum(getattr(a, "nbytes", math.nan) for a in self.inputs().values()))

    @property
    def label(self) -> str:
        """How ``portabench verify`` lists and saves the problem: its case, unless several
        problems of one case are checked (e.g. a tensor's modes)."""
        return self.case

    def check_arrays(self) -> dict[str, np.ndarray]:
        """What the check derives from the inputs besides the oracle's output: the error bound of
        ``error_scale()`` where the problem has one. Stored with the oracle's output (``oracle_stored``)."""
        scale = getattr(self, "error_scale", None)
        return {"bound": scale()} if callable(scale) else {}

    def restore_check_arrays(self, arrays: dict[str, np.ndarray], reference: np.ndarray) -> None:
        """Take back what ``check_arrays`` gave (problems keep their bound as ``_cache["bound"]``)."""
        cache = getattr(self, "_cache", None)
        if "bound" in arrays and isinstance(cache, dict):
            cache["bound"] = arrays["bound"]


def smaller_size_hint(kernel: Kernel) -> str:
    """How a user chooses a smaller problem of ``kernel``, for a message saying one does not fit."""
    return f"choose fewer {kernel.size_unit} (--size {kernel.name}={kernel.size_param.upper()})"


class Variant(ABC):
    """One implementation of one kernel; a fresh instance per prepared problem. It runs on the devices
    its ``backend`` offers (``devices``, ``runs_on``)."""

    kernel: ClassVar[str]
    name: ClassVar[str]
    family: ClassVar[Family]
    backend: ClassVar[Backend]
    description: ClassVar[str] = ""
    # A comparison point at small sizes only: left out of larger studies, and of all but the smallest
    # problems of a quick ``portabench verify`` (``Kernel.verify_skips``).
    max_size: ClassVar[int | None] = None
    # Another formulation of a portable variant the main comparison already has (atomics instead of
    # sorted rows, say): benchmarked in the kernel's ``variants`` study, not by default.
    alternative: ClassVar[bool] = False

    @classmethod
    def devices(cls) -> tuple[Device, ...]:
        """The devices this variant runs on: its backend's."""
        return cls.backend.devices

    @classmethod
    def runs_on(cls, device: Device) -> bool:
        """Whether this variant runs on ``device`` (one its backend offers; available here or not)."""
        return device in cls.backend.devices

    @classmethod
    @abstractmethod
    def unavailable(cls) -> str | None:
        """Why this variant cannot run on this machine, or None if it can."""

    def supports(self, problem: Problem) -> str | None:
        """Why this variant does not handle ``problem``, or None if it does."""
        return None

    @abstractmethod
    def prepare(self, problem: Problem) -> None:
        """Untimed: allocate, transfer, compile and warm up for ``problem``."""

    @abstractmethod
    def run(self) -> None:
        """Timed: one run of the kernel; returns after the device is done."""

    def launch(self) -> None:
        """One run, started: a GPU variant may return before its device is done, so that runs timed
        back to back overlap the host's launch of one with the device's work on the last. Here: ``run``."""
        self.run()

    def synchronize(self) -> None:
        """Wait until the device is idle (a no-op on the CPU)."""

    @abstractmethod
    def output(self) -> np.ndarray:
        """The last run's result, copied to the host as float64."""

    def verified(self) -> None:
        """Called once the first run matched the oracle, before any timed run (a pressure-point
        variant swaps in its deliberately perturbed call here)."""

    def output_buffer(self) -> Any:
        """The last run's result where the variant computes it (a device array, a host array or a
        scalar), not copied: what a run split across devices sums in place (``Part.combine``)."""
        raise NotImplementedError(f"{type(self).__name__} keeps no output buffer")


# The methods the suite and ``verify`` call on every variant: a subclass may implement them, never
# reuse their names for something else (a ``launch(kernel, ...)`` of its own broke every GPU sample).
LIFECYCLE = ("unavailable", "supports", "prepare", "run", "launch", "synchronize", "output", "verified")


def lifecycle_mismatches(variant: type[Variant]) -> list[str]:
    """How ``variant``'s lifecycle methods differ from ``Variant``'s (their kind, their parameters' names,
    kinds and defaults); empty where each keeps the base signature."""

    def shape(owner: type, name: str) -> tuple[str, list[tuple[str, Any, bool]]]:
        kind = type(inspect.getattr_static(owner, name)).__name__  # function, classmethod, staticmethod, ...
        try:
            parameters = inspect.signature(getattr(owner, name)).parameters.values()
        except (TypeError, ValueError):
            return kind, []
        return kind, [(p.name, p.kind, p.default is not p.empty) for p in parameters]

    problems = []
    for name in LIFECYCLE:
        base, mine = shape(Variant, name), shape(variant, name)
        if mine != base:
            where = next((c.__qualname__ for c in variant.__mro__ if name in vars(c)), variant.__qualname__)
            shown = getattr(variant, name)
            try:
                shown = f"{name}{inspect.signature(shown)}"
            except (TypeError, ValueError):
                shown = f"{name} ({mine[0]})"
            problems.append(f"{variant.__qualname__}.{name}: {shown} (defined in {where}) differs from "
                            f"Variant.{name}{inspect.signature(getattr(Variant, name))}")
    return problems


class BoundVariant(Variant):
    """The lifecycle most variants share: the kernel's ``prepare`` leaves one zero-argument call in
    ``self._call``; ``launch`` makes it (its return value kept as ``self._result``), ``run`` makes it
    and waits for the device. Arrays move through ``to_device`` and ``to_host``, which keep them on
    the host here (a CPU variant runs anywhere); ``gpu.CupyArrays``, mixed in first, puts them in
    GPU memory. The variant is available where its backend can run on one of its devices."""

    _call: Callable[[], Any]
    _result: Any = None

    @classmethod
    def unavailable(cls) -> str | None:
        reasons = [cls.backend.unavailable(device) for device in cls.backend.devices]
        return None if None in reasons else "; ".join(r for r in reasons if r)

    def to_device(self, array: np.ndarray) -> Any:
        return array

    def full(self, shape: Any, value: float) -> Any:
        """A new float64 array of ``value`` where the variant computes (an output's NaN fill, so that
        an entry it never writes fails the check); made there, not copied there."""
        return np.full(shape, value)

    def to_host(self, array: Any) -> np.ndarray:
        return np.asarray(array, dtype=np.float64)

    def launch(self) -> None:
        if type(self).run is not BoundVariant.run:  # a solver with its own ``run``: whole, as it waits
            self.run()
            return
        self._result = self._call()

    def run(self) -> None:
        self.launch()
        self.synchronize()


@dataclass(frozen=True)
class LegacySize:
    """A size flag of ``portabench run`` and the environment variable of a plain ``asv run`` that came before
    ``--size KERNEL=N`` and ``PORTABENCH_SIZE_<KERNEL>``, kept as aliases: each sets the sizes of every kernel
    on the same inputs (``kernels``)."""

    flag: str
    env: str
    metavar: str
    kernels: tuple[str, ...]

    @property
    def dest(self) -> str:
        """The flag's attribute of the parsed arguments (argparse's name for it)."""
        return self.flag.removeprefix("--").replace("-", "_")


# Every older size alias, written once: the CLI's flags and the suite's variables (``Kernel.legacy_size_env``)
# read this table, which names the kernels, so that no kernel is imported to build the CLI.
LEGACY_SIZES: tuple[LegacySize, ...] = (
    LegacySize("--stream-n", "PORTABENCH_STREAM_N", "N[,N]", ("stream",)),
    LegacySize("--batched-n", "PORTABENCH_BATCHED_N", "N[,N]", ("batched_spmv", "gmres")),
    LegacySize("--tensor-nnz", "PORTABENCH_TENSOR_NNZ", "NNZ[,NNZ]", ("mttkrp", "phi", "pi")),
    LegacySize("--bcsr-mib", "PORTABENCH_BCSR_MIB", "MIB[,MIB]", ("bcsr",)),
)


@dataclass(frozen=True)
class Sweep:
    """A study the report draws against one parameter of the problem, declared by its kernel (``Kernel.sweeps``):
    the table's ``name`` (its CSV's), the page's ``title`` and ``intro``, and ``figure``, the figure file's suffix.

    Either the cases of the kernel's study ``study`` sweep the parameter ``axis`` (``Kernel.sweep_value`` gives
    each case's value, ``label`` names it on the figure): % of peak per variant and each portable variant's
    speedup over the fastest vendor one against it, at the largest size; those rows stay out of the kernel's
    own figures and geomeans. Or (``study`` None) the size is swept: the kernel's compared rows as ``size_unit``
    per second (size / time) against the size, per case and problem option, with the same speedups."""

    name: str
    title: str
    intro: str
    figure: str
    study: str | None = None
    axis: str = ""
    label: str = ""


class Kernel(ABC):
    """A kernel's definition: cases, problems, work model, oracle and variants."""

    name: ClassVar[str]
    description: ClassVar[str]
    cases: ClassVar[tuple[str, ...]]
    # The asv parameter names of the kernel's benchmarks: which one is the case,
    # which the size (the variant's is always "variant").
    case_param: ClassVar[str]
    size_param: ClassVar[str]
    # What the size counts, e.g. "nonzeros": sizes of different kernels are not comparable, so
    # every table and figure of the report names it beside the size.
    size_unit: ClassVar[str]
    # Further problem parameters (asv parameter name -> allowed values, the default first),
    # e.g. the batched SpMV's value layout. They reach ``problem`` as keyword arguments.
    options: ClassVar[dict[str, tuple[str, ...]]] = {}
    # Whether an option at its default value names the case in the report ("gri30 (order=natural)"); False
    # where the option came later, so that the default reads as the results recorded without it did.
    label_default_options: ClassVar[bool] = True
    verify_size: ClassVar[int] = 1 << 20  # ``portabench verify``'s full set: every case at this size
    # ``portabench verify``'s default where the full set is slow (minutes, or slow comparison points at size):
    # a quick check, case -> size, chosen so that every variant's code paths still run (the kernel says
    # why); None: the default is the full set. See ``verify_set`` and ``verify_skips``.
    quick_verify: ClassVar[dict[str, int] | None] = None
    # The sizes the benchmarks run (``at_sizes``); None: ``default_size`` of each device.
    _sizes: tuple[int, ...] | None = None
    # The input file ``portabench verify`` takes instead of generated inputs: the CLI flag's
    # name ("tensor", "matrix", "matrices"), or None (see ``problems_from_file``).
    file_kind: ClassVar[str | None] = None
    # Whether the oracle's output is kept on disk for the next process (not where it is cheaper to
    # compute than to read back: STREAM's arrays, Π's nnz x R rows).
    oracle_stored: ClassVar[bool] = True
    # What the report shows of this kernel beyond % of peak and speedups (reports/ asks the kernel, never its
    # modules), none by default: studies drawn against one parameter (``Sweep``; ``sweep_value``), a roofline
    # (GFLOP/s against flops per byte under ``Work.bytes`` and ``Work.bytes_counted``), and the launch policy
    # the others of a launch study (settings ``policy=...``) are compared with (``default_launch_policy``).
    sweeps: ClassVar[tuple[Sweep, ...]] = ()
    has_roofline: ClassVar[bool] = False

    def sweep_value(self, case: str) -> int:
        """The value of a ``Sweep``'s ``axis`` that a case of its study takes (BCSR: a sweep matrix's block size)."""
        raise PortabenchError(f"kernel {self.name} sweeps no parameter over its cases")

    def default_launch_policy(self, device: Device) -> str | None:
        """The launch policy (setting ``policy``) the kernel's launch study compares the others with on
        ``device``; None where it has no launch study."""
        return None

    def __init__(self, variants: tuple[type[Variant], ...]) -> None:
        names = [v.name for v in variants]
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate variant names in kernel {self.name}: {names}")
        self._variants = {v.name: v for v in variants}

    @property
    def variants(self) -> tuple[type[Variant], ...]:
        return tuple(self._variants.values())

    def variant(self, name: str) -> type[Variant]:
        try:
            return self._variants[name]
        except KeyError:
            raise UnknownNameError(
                f"unknown variant {name!r} of kernel {self.name!r}; "
                f"known: {', '.join(self._variants)}"
            ) from None

    def check_case(self, case: str) -> str:
        if case not in self.cases:
            raise UnknownNameError(
                f"unknown case {case!r} of kernel {self.name!r}; known: {', '.join(self.cases)}"
            )
        return case

    def case_and_size(self, params: dict[str, str]) -> tuple[str, int]:
        """(case, size) of one benchmark's asv parameters, e.g. {"op": "copy", "n": "1024", ...}."""
        return self.check_case(params[self.case_param]), int(params[self.size_param])

    @abstractmethod
    def default_size(self, device: Device) -> int:
        """The benchmark size on this machine's ``device`` (beyond its caches)."""

    @property
    def size_env(self) -> str:
        """The environment variable of the kernel's sizes for a plain ``asv run`` (read by suite/; ``portabench
        run`` hands the suite its sizes in the run plan instead)."""
        return f"PORTABENCH_SIZE_{self.name.upper()}"

    @property
    def legacy_size_env(self) -> str | None:
        """The environment variable that set the sizes before ``size_env`` (``LEGACY_SIZES``; shared by the
        kernels on the same inputs), or None: a plain ``asv run`` still honours it, read by suite/."""
        return next((legacy.env for legacy in LEGACY_SIZES if self.name in legacy.kernels), None)

    def at_sizes(self, sizes: tuple[int, ...] | None) -> Kernel:
        """This kernel with its benchmarks at ``sizes`` (None: the default of each device): the same definition
        and variants, so its studies declare the classes at those sizes. The sizes are taken as they are:
        they were checked where a user gave them (``parse_sizes``)."""
        if not sizes:
            return self
        sized = copy.copy(self)
        sized._sizes = tuple(sizes)
        return sized

    def check_size(self, size: int) -> int:
        """``size`` if this kernel can take it, else a PortabenchError saying what it takes (the kernel's rule;
        callers check through ``checked_sizes``)."""
        if not 1 <= size:
            raise PortabenchError(f"{self.name}: sizes are positive {self.size_unit}, got {size}")
        return size

    def checked_sizes(self, sizes: tuple[int, ...], where: str) -> tuple[int, ...]:
        """``sizes`` if this kernel takes each (``check_size``), else a PortabenchError naming ``where`` (the
        flag or variable that gave them): the one check of a size, made where a user hands it in."""
        try:
            return tuple(self.check_size(n) for n in sizes)
        except PortabenchError as exc:
            raise PortabenchError(f"{where}: {exc}") from None

    def parse_sizes(self, text: str, where: str) -> tuple[int, ...]:
        """Comma-separated sizes (``1e6`` allowed) from ``where`` (a flag or variable), each checked
        (``checked_sizes``)."""
        sizes = []
        for part in (p.strip() for p in str(text).split(",")):
            try:
                value = float(part)
                if not value.is_integer():
                    raise ValueError(part)
            except (ValueError, OverflowError):
                raise PortabenchError(f"{where}={text!r}: expected comma-separated {self.size_unit} "
                                      f"of kernel {self.name}, e.g. {self.verify_size}") from None
            sizes.append(int(value))
        return self.checked_sizes(tuple(sizes), f"{where}={text!r}")

    def benchmark_sizes(self, device: Device) -> list[int]:
        """The sizes the benchmarks run on ``device``: those given (``at_sizes``), else the default."""
        return list(self._sizes) if self._sizes else [self.default_size(device)]

    def benchmark_param_names(self) -> list[str]:
        """The asv parameter names of the kernel's benchmarks, before any variant settings."""
        return [self.case_param, self.size_param, *self.options, "variant"]

    def studies(self, device: Device) -> list[Study]:
        """The asv benchmark classes of ``device``: the main comparison first, then the studies."""
        return [self.study(MAIN, device, title=self.description)]

    def study(self, name: str, device: Device, *, suffix: str = "", cases: tuple[str, ...] | None = None,
              sizes: tuple[int, ...] | None = None, variants: tuple[str, ...] | None = None,
              options: dict[str, tuple[str, ...]] | None = None, settings: dict[str, tuple[str, ...]] | None = None,
              measure: Measure = "kernel", title: str = "") -> Study:
        """A study of this kernel on ``device`` whose asv class is ``<Kernel><suffix><DEVICE>``; what is not
        given is the main comparison's: every case, the benchmark sizes, every variant of the device, each
        option at its default."""
        stem = "".join(part.capitalize() for part in self.name.split("_"))
        sizes_ = tuple(sizes if sizes is not None else self.benchmark_sizes(device))
        return Study(
            name=name, device=device, class_name=f"{stem}{suffix}{device.upper()}",
            cases=tuple(cases if cases is not None else self.cases),
            sizes=sizes_,
            variants=tuple(variants if variants is not None else self._variants_up_to(device, max(sizes_), name == MAIN)),
            options={k: tuple((options or {}).get(k, allowed[:1])) for k, allowed in self.options.items()},
            settings=dict(settings or {}), measure=measure, title=title)

    def _variants_up_to(self, device: Device, size: int, main: bool = False) -> tuple[str, ...]:
        return tuple(v.name for v in self.variants if v.runs_on(device) and (v.max_size is None or size <= v.max_size)
                     and not (main and v.alternative))

    def variants_study(self, main: Study) -> list[Study]:
        """The ``variants`` study: the alternative portable variants on the main comparison's
        problems (their speedups pair with its vendor variants in the report); none without any."""
        alternatives = tuple(v.name for v in self.variants if v.runs_on(main.device) and v.alternative)
        if not alternatives:
            return []
        return [self.study("variants", main.device, suffix="Variants", cases=main.cases, sizes=main.sizes,
                           variants=alternatives, options=main.options,
                           title="the other formulations of the portable variants, on the main comparison's problems")]

    def unsupported(self, case: str, size: int, options: dict[str, str]) -> str | None:
        """Why (case, size, options) is no problem of this kernel here (a mode a tensor lacks, a matrix
        not downloaded), or None: the suite skips such a combination before making anything."""
        return None

    def variant_settings(self, settings: dict[str, str]) -> dict[str, Any]:
        """A study's swept settings (asv strings) as the variant's constructor arguments."""
        return {k: int(v) if v.isdigit() else v for k, v in settings.items()}

    def problems_from_file(self, path: Path, seed: int, options: dict[str, str], **extra: Any) -> list[Problem]:
        """The problems ``portabench verify`` checks on an input file of kind ``file_kind``."""
        raise PortabenchError(f"kernel {self.name} takes no input file")

    def problem_options(self, params: dict[str, str]) -> dict[str, str]:
        """The kernel's options among one benchmark's asv parameters (defaults where absent)."""
        out = {}
        for name, allowed in self.options.items():
            value = params.get(name, allowed[0])
            if value not in allowed:
                raise UnknownNameError(f"unknown {name} {value!r} of kernel {self.name!r}; known: {', '.join(allowed)}")
            out[name] = value
        return out

    @abstractmethod
    def problem(self, case: str, size: int, seed: int = 0, **options: str) -> Problem:
        """A seeded problem instance (``options``: see ``Kernel.options``)."""

    def verify_problems(self, cases: list[str], size: int, seed: int, options: dict[str, str]) -> list[Problem]:
        """The problems ``portabench verify`` checks: one per case (``options``: those given)."""
        return [self.problem(case, size, seed, **self.problem_options(options)) for case in cases]

    def verify_set(self, cases: list[str] | None = None, size: int | None = None, full: bool = False) -> dict[str, int]:
        """What ``portabench verify`` checks, case -> size: the cases and the size given, the rest from the
        quick check (``quick_verify``: its cases, each at its size, ``verify_size`` for a case it leaves out)
        unless ``full`` or the kernel has none, else from the full set (every case at ``verify_size``)."""
        quick = {} if full else dict(self.quick_verify or {})
        return {case: size if size is not None else quick.get(case, self.verify_size)
                for case in (cases or list(quick or self.cases))}

    def verify_set_problems(self, chosen: dict[str, int], seed: int, options: dict[str, str]) -> list[Problem]:
        """``verify_problems`` of a ``verify_set`` (case -> size), the cases of one size at a time."""
        by_size: dict[int, list[str]] = {}
        for case, size in chosen.items():
            by_size.setdefault(size, []).append(case)
        return [p for size, cases in by_size.items() for p in self.verify_problems(cases, size, seed, options)]

    def verify_skips(self, variant: type[Variant], problem: Problem, full: bool = False) -> str | None:
        """Why ``portabench verify`` leaves ``variant`` out on ``problem``, or None: the quick check (a kernel
        with ``quick_verify``, without ``full``) runs a slow comparison point (``max_size``) only on its
        smallest problems, up to the smallest size of ``quick_verify`` and its own ``max_size``."""
        if full or self.quick_verify is None or variant.max_size is None:
            return None
        limit = min(variant.max_size, *self.quick_verify.values())
        if problem.size <= limit:
            return None
        return f"a comparison point, up to {limit} {self.size_unit} in the quick check, {problem.size} here (--full runs it)"

    # The splits ``split`` knows, each a setting of the study across devices (``devices_study``); () where
    # the kernel has no split.
    partitions: ClassVar[tuple[Partition, ...]] = ()

    def split(self, problem: Problem, part: int, parts: int, partition: Partition) -> Part:
        """Share ``part`` of ``parts`` of ``problem`` (``partitions``): the devices' shares, together, are
        ``problem``."""
        raise PortabenchError(f"kernel {self.name} is not split across devices")

    def devices_study(self, device: Device, counts: tuple[int, ...]) -> Study | None:
        """The study across ``counts`` devices (MPI ranks, one device each), run by ``portabench scale``
        under MPI, not by asv: the main comparison's problems and variants, the device count and the
        partition as settings; None where the kernel has no split."""
        if not self.partitions:
            return None
        main = self.studies(device)[0]
        return self.study(DEVICES_STUDY, device, suffix="Devices", cases=main.cases, sizes=main.sizes,
                          variants=main.variants, options=main.options,
                          settings={DEVICES_SETTING: tuple(str(n) for n in counts), PARTITION_SETTING: self.partitions},
                          title="split across devices, one MPI rank each")

    @abstractmethod
    def work(self, case: str, size: int, **options: str) -> Work:
        """Bytes and flops of one run (the work model, see reference/NOTES.md); ``options`` as for ``problem``."""

    @abstractmethod
    def oracle(self, problem: Problem) -> np.ndarray:
        """The float64 reference output for ``problem``."""

    @abstractmethod
    def check(self, problem: Problem, output: np.ndarray, reference: np.ndarray) -> Check:
        """Compare a variant's output with the oracle's."""


_CHECK_CHUNK = 1 << 22  # bounds the temporaries when checking multi-GB outputs


def max_relative_error(output: Any, reference: np.ndarray) -> float:
    """Largest |out - ref| / max(|ref|, tiny) over all elements; NaN if shapes differ or out has NaN."""
    out = np.asarray(output, dtype=np.float64)
    ref = np.asarray(reference, dtype=np.float64)
    if out.shape != ref.shape:
        return float("nan")
    out, ref = out.reshape(-1), ref.reshape(-1)

    def chunk(start: int) -> float:
        o, r = out[start : start + _CHECK_CHUNK], ref[start : start + _CHECK_CHUNK]
        err = np.abs(o - r) / np.maximum(np.abs(r), np.finfo(np.float64).tiny)
        return float("nan") if np.isnan(err).any() else float(err.max())

    # Chunks on every core (NumPy releases the GIL): multi-GB outputs are checked before every timing.
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        errors = list(pool.map(chunk, range(0, out.size, _CHECK_CHUNK)))
    return float("nan") if any(e != e for e in errors) else max(errors, default=0.0)


def componentwise_error(output: np.ndarray, reference: np.ndarray, bound: np.ndarray) -> float:
    """max |output - reference| / bound over all entries; NaN if the shapes differ or any
    output entry is NaN (an entry equal to the reference counts 0 even where bound is 0)."""
    out = np.asarray(output, dtype=np.float64)
    ref = np.asarray(reference, dtype=np.float64)
    if out.shape != ref.shape or out.shape != bound.shape:
        return float("nan")
    if np.isnan(out).any():
        return float("nan")
    diff = np.abs(out - ref)
    with np.errstate(invalid="ignore"):  # inf - inf: an infinite output never passes
        err = np.where(diff == 0.0, 0.0, diff / np.maximum(bound, np.finfo(np.float64).tiny))
    if np.isnan(err).any():
        return float("inf")
    return float(err.max()) if err.size else 0.0
