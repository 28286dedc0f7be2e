"""Shared fixtures, and the ``gpu`` mark put on every test that runs GPU code.

A test uses the GPU when it is parametrized over a GPU variant (a variant class or instance
whose ``device`` is ``"gpu"``, or a parameter value or id naming one) or when it requests the
``cupy_gpu`` fixture. Such tests are marked ``gpu`` here, so ``pytest -m gpu`` on a GPU machine
selects them without anyone remembering the mark, and they skip with CuPy's reason where it
cannot run. A test that still skips for lack of CuPy without the mark fails instead: it runs GPU
code the rules above did not see (tests/test_gpu_marks.py checks the whole suite too).
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from portabench.implementations import list_variants
from portabench.implementations.gpu import cupy, cupy_unavailable

# Fixtures whose use means the test runs GPU code.
GPU_FIXTURES = frozenset({"cupy_gpu"})

# The environment before any test ran: loading MKL sets MKL_RT in os.environ, which a fresh
# interpreter must not inherit from the tests before it.
STARTING_ENVIRONMENT = dict(os.environ)


@pytest.fixture
def fresh_seed() -> int:
    """A new seed every test run (printed on failure through the test's parameters)."""
    return int(np.random.SeedSequence().entropy % (2**32))


@pytest.fixture
def cupy_gpu() -> ModuleType:
    """The cupy module, for a test that runs GPU code without a GPU variant parameter."""
    reason = cupy_unavailable()
    if reason is not None:
        pytest.skip(reason)
    return cupy()


@functools.cache
def gpu_variant_names() -> frozenset[str]:
    """The names of every kernel's GPU variants (no CPU variant shares one)."""
    return frozenset(v.name for v in list_variants(device="gpu"))


def _is_gpu_variant(value: Any) -> bool:
    if isinstance(value, str):
        return value in gpu_variant_names()
    if isinstance(value, (tuple, list)):
        return any(_is_gpu_variant(v) for v in value)
    cls = value if isinstance(value, type) else type(value)
    return getattr(cls, "device", None) == "gpu"


@functools.cache
def _gpu_id_pattern() -> re.Pattern[str]:
    # A variant name as a whole part of the id: "cupy-rows" in "cupy-rows-1-2", not in "numba-cupy-rowsx".
    names = "|".join(re.escape(n) for n in sorted(gpu_variant_names(), key=len, reverse=True))
    return re.compile(rf"(?:^|[-\[])(?:{names})(?=$|[-\]])")


def uses_gpu(item: pytest.Item) -> bool:
    """Whether the collected test runs GPU code, by its parameters and fixtures."""
    if GPU_FIXTURES & set(getattr(item, "fixturenames", ())):
        return True
    callspec = getattr(item, "callspec", None)
    if callspec is None:
        return False
    return any(_is_gpu_variant(v) for v in callspec.params.values()) or bool(_gpu_id_pattern().search(callspec.id))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    reason = cupy_unavailable()
    for item in items:
        if uses_gpu(item) and item.get_closest_marker("gpu") is None:
            item.add_marker(pytest.mark.gpu)
        if item.get_closest_marker("gpu") is not None and reason is not None:
            item.add_marker(pytest.mark.skip(reason=reason))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    reason = cupy_unavailable()
    # Only CuPy's own reason counts: other skips (an unsupported shape, a missing library) stay skips.
    if (report.skipped and reason is not None and item.get_closest_marker("gpu") is None
            and isinstance(report.longrepr, tuple) and reason in str(report.longrepr[2])):
        report.outcome = "failed"
        report.longrepr = (f"{item.nodeid} skipped for lack of a GPU ({reason}) but is not marked gpu: "
                           "parametrize it over the GPU variant, request the cupy_gpu fixture, "
                           "or mark it @pytest.mark.gpu")


@pytest.fixture
def fresh_interpreter():
    """Runs Python source in a new interpreter, in the environment the tests started with (a loaded
    library, a cached ``unavailable()`` or a variable set on loading cannot leak in from other
    tests; ``env``: variables to add); returns the completed process."""
    import subprocess
    import sys

    def run(source: str, **env: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-c", source], capture_output=True, text=True, timeout=300,
                              env={**STARTING_ENVIRONMENT, **env})

    return run
