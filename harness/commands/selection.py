"""What a run selects, checked before asv starts: the machine's name, the sizes, the studies, the
devices and a ``--bench`` expression, made into the run's plan (``harness/plan.py``), and the
check that an expression selects some declared benchmark."""

from __future__ import annotations

import importlib.util
import itertools
import re
import socket
from dataclasses import replace
from pathlib import Path
from typing import Iterator

from portabench.implementations import get_kernel, list_kernels
from portabench.harness.machine.record import detect_devices
from portabench.implementations.model import Device, PortabenchError
from portabench.harness.plan import INPUTS_MODULE, RunPlan, study_names


def machine_name(name: str | None) -> str:
    """The results folder's name: ``name``, else this host's name; letters, digits, '.', '_' and '-'."""
    name = name or socket.gethostname().split(".")[0] or "machine"
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name):
        raise PortabenchError(f"machine name {name!r}: use letters, digits, '.', '_' and '-'")
    return name


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


def plan_of(devices: list[Device] | None, sizes: dict[str, tuple[int, ...]] | None = None,
            studies: list[str] | None = None, bench: str | None = None, smoke: bool = False) -> RunPlan:
    """The run's plan from its checked flags: ``devices`` (default: every device present), ``sizes`` (kernel
    -> sizes instead of the defaults), ``studies`` beside the main comparisons, ``bench``; ``smoke``: the main
    comparisons at ``smoke_sizes`` (no sizes or studies of its own)."""
    if smoke and (sizes or studies):
        raise PortabenchError("--smoke runs the main comparisons at small sizes, one sample each: "
                              "give it no --size, --studies, --quick or --rounds")
    return RunPlan.build(chosen_devices(devices), smoke_sizes() if smoke else sizes, studies or (), bench)


def smoke_sizes() -> dict[str, tuple[int, ...]]:
    """``--smoke``'s sizes: each kernel at its ``verify`` size, small enough that every main combination's
    whole asv path (setup, the gate, the timed method) takes about a second."""
    return {name: (get_kernel(name).verify_size,) for name in list_kernels()}


def chosen_devices(devices: list[Device] | None) -> list[Device]:
    """``devices`` if each is present here (default: every device present), else a one-line error."""
    present = detect_devices()
    missing = [d for d in devices or [] if d not in present]
    if missing:
        raise PortabenchError(f"--device {','.join(missing)}: not present here ({', '.join(present)} found)")
    return list(devices or present)


def declared_benchmarks(plan: RunPlan, benchmark_dir: Path) -> Iterator[tuple[str, list[list[str]]]]:
    """Every benchmark asv can find under ``plan``: its name ``<module>.<class>.<method>`` and its parameter
    grid as asv writes the values (repr)."""
    for name, study in plan.declared():
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


def check_selects(plan: RunPlan, benchmark_dir: Path) -> None:
    """Refuse a ``--bench`` expression that selects no benchmark (asv would fail saying only "see the
    log"), naming the classes it could select. asv matches a parametrized benchmark as
    ``name(param, ...)``, so an expression may name parameter values (the plan's sizes among them)."""
    if not plan.bench:
        return
    chosen, candidates = re.compile(plan.selection()), re.compile(replace(plan, bench=".*").selection())
    classes: list[str] = []
    for name, grid in declared_benchmarks(plan, benchmark_dir):
        if not candidates.search(name):
            continue
        classes += [name.rsplit(".", 1)[0]] if name.rsplit(".", 1)[0] not in classes else []
        combos = itertools.product(*grid) if grid else [None]
        if any(chosen.search(name if combo is None else f"{name}({', '.join(combo)})") for combo in combos):
            return
    among = f" among the main comparisons and {', '.join(plan.studies)}" if plan.studies else ""
    raise PortabenchError(f"--bench {plan.bench!r} selects no declared benchmark on {', '.join(plan.devices)}{among}; "
                          f"declared: {', '.join(classes)} (asv matches <class>.<method>(<parameters>); `portabench "
                          "list --studies` says what each runs)")


__all__ = ["check_selects", "chosen_devices", "declared_benchmarks", "machine_name", "parse_size_flags",
           "parse_studies", "plan_of", "smoke_sizes"]
