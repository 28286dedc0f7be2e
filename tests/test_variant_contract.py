"""Every registered variant keeps the lifecycle the suite and ``verify`` call (``model.LIFECYCLE``): a
variant may implement ``launch`` or ``prepare``, never reuse the name with other parameters. Runs on the
CPU: the GPU variants' classes are inspected, not run."""

from __future__ import annotations

import pytest

from portabench.implementations import get_variant, list_kernels, list_variants
from portabench.implementations.model import LIFECYCLE, lifecycle_mismatches


@pytest.mark.parametrize("kernel", list_kernels())
def test_every_registered_variant_keeps_the_lifecycle_signatures(kernel: str) -> None:
    variants = list_variants(kernel)
    assert variants
    problems = [p for v in variants for p in lifecycle_mismatches(v)]
    assert problems == []


class StageLauncher:
    """A mixin whose ``launch`` means one stage of a multi-kernel solve: the shape of the bug."""

    def launch(self, kernel: str, units: int, per_block: bool, args: tuple) -> None:
        raise AssertionError("never called")


def _planted(name: str, body: dict) -> type:
    return type(name, (get_variant("stream", "numba-prange"),), body)


def test_a_mixin_that_reuses_launch_is_caught() -> None:
    planted = type("Planted", (StageLauncher, get_variant("stream", "numba-prange")), {})
    problems = lifecycle_mismatches(planted)
    assert len(problems) == 1, problems
    assert problems[0].startswith("Planted.launch: launch(self, kernel") and "StageLauncher" in problems[0]


@pytest.mark.parametrize("method, body", [
    ("prepare", {"prepare": lambda self: None}),
    ("run", {"run": lambda self, times: None}),
    ("output", {"output": lambda self, copy=True: None}),
    ("synchronize", {"synchronize": lambda self, stream: None}),
    ("supports", {"supports": lambda self, problem, device: None}),
    ("verified", {"verified": lambda self, problem: None}),
    ("unavailable", {"unavailable": lambda self: None}),  # an instance method where a classmethod is called
    ("launch", {"launch": staticmethod(lambda: None)}),
])
def test_each_planted_override_is_caught(method: str, body: dict) -> None:
    assert method in LIFECYCLE
    problems = lifecycle_mismatches(_planted("Planted", body))
    assert [p.split(":")[0] for p in problems] == [f"Planted.{method}"], problems


def test_an_override_that_keeps_the_signature_passes() -> None:
    def launch(self) -> None:
        self.run()

    def prepare(self, problem) -> None:
        super(planted, self).prepare(problem)

    planted = _planted("Planted", {"launch": launch, "prepare": prepare})
    assert lifecycle_mismatches(planted) == []


ASV_WORDS = ("setup", "teardown", "setup_cache")  # what asv calls on the suite's classes, not on variants


@pytest.mark.parametrize("kernel", list_kernels())
def test_no_variant_method_reuses_asvs_words(kernel: str) -> None:
    """A variant's ``setup`` would read as asv's (run before each benchmark) while meaning something else."""
    reused = sorted({f"{c.__qualname__}.{word}" for v in list_variants(kernel) for c in v.__mro__
                     for word in ASV_WORDS if word in vars(c)})
    assert reused == []
