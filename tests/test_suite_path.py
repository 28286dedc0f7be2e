"""Every variant of every main comparison through the suite's own path, exactly as asv runs one
benchmark process: the class ``suite/classes.py`` builds from the kernel's declaration (at the smoke
sizes of ``portabench run --smoke``), the benchmark asv_runner's discovery makes of its timed method,
then ``do_setup`` (the problem, the gate against the oracle), ``do_run`` (the timed method: one
sample, on the GPU the runs launched back to back) and ``do_teardown``.

The variant API alone (``verify``, each kernel's tests) never calls ``launch`` or the GPU sample's
clock: a variant whose ``launch`` meant something else passed every one of those and failed every
asv sample. GPU variants run with ``pytest -m gpu`` and skip here without a GPU.
"""

from __future__ import annotations

import itertools
import math
import types

import pytest
from asv_runner.discovery import _get_benchmark

from portabench.implementations import get_kernel, list_kernels
from portabench.implementations.model import MAIN
from portabench.harness.commands.runner import SMOKE_ATTRIBUTES
from portabench.harness.commands.selection import smoke_sizes
from portabench.harness.plan import RunPlan
from suite.classes import asv_class

SMOKE_PLAN = RunPlan.build(("cpu", "gpu"), sizes=smoke_sizes())  # as ``portabench run --smoke`` plans


def _main_variants() -> list[tuple[str, str, str]]:
    """(kernel, device, variant) of every main comparison at the smoke sizes (a variant may be declared
    for small sizes only)."""
    return [(kernel, study.device, variant) for kernel in list_kernels() for study in SMOKE_PLAN.studies_of(kernel)
            if study.name == MAIN for variant in study.variants]


def _smoke_attributes() -> type:
    """asv's ``--attribute`` values of a smoke run, as asv_runner applies them (a first attribute source)."""
    values = {name: float(value) if "." in value else int(value)
              for name, value in (a.split("=") for a in SMOKE_ATTRIBUTES)}
    return type("ExtraBenchmarkAttrs", (), values)


@pytest.mark.parametrize("kernel, device, variant", _main_variants(),
                         ids=[f"{k}-{d}-{v}" for k, d, v in _main_variants()])
def test_each_main_variant_runs_through_setup_the_timed_method_and_teardown(
        kernel: str, device: str, variant: str, monkeypatch: pytest.MonkeyPatch) -> None:
    k = get_kernel(kernel)
    reason = k.variant(variant).unavailable()
    if reason is not None:
        pytest.skip(f"{variant}: {reason}")
    study = next(s for s in SMOKE_PLAN.studies_of(kernel) if s.device == device)
    assert study.name == MAIN and variant in study.variants
    cls = asv_class(SMOKE_PLAN.kernel(kernel), study)
    module = types.ModuleType(f"suite.{kernel}")
    ran = 0
    for method in study.method_names(kernel):
        benchmark = _get_benchmark(method, module, cls, getattr(cls, method))
        benchmark._attr_sources.insert(0, _smoke_attributes())
        column = cls.param_names.index("variant")
        combinations = [i for i, combo in enumerate(itertools.product(*benchmark._params)) if combo[column] == variant]
        assert combinations, (kernel, device, variant)
        for index in combinations:
            benchmark.set_param_idx(index)
            skipped = benchmark.do_setup()
            try:
                if skipped:
                    continue
                result = benchmark.do_run()
            finally:
                benchmark.do_teardown()
            (sample,) = result["samples"]
            assert math.isfinite(sample) and sample > 0, (benchmark.name, benchmark._current_params, result)
            ran += 1
    assert ran, f"{kernel}/{variant}: every combination skipped"
