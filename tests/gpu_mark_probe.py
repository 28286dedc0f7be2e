"""A pytest plugin for tests/test_gpu_marks.py: after collection, writes one JSON row per test
saying whether it is marked ``gpu`` and whether, read independently of conftest's rules, it
looks like it runs GPU code (its parameters name a GPU variant, or its body calls one)."""

from __future__ import annotations

import ast
import inspect
import json
import os
import textwrap
from typing import Any

import pytest

from portabench.implementations import list_variants

GPU_CLASSES = frozenset(v.__name__ for v in list_variants(device="gpu"))
GPU_NAMES = frozenset(v.name for v in list_variants(device="gpu"))
CPU_NAMES = frozenset(v.name for v in list_variants(device="cpu"))
# Calls that run (or build) the variant named by a string argument.
RUNNERS = frozenset({"run_once", "prepare_verified", "variant", "_variant", "_skip_if_unavailable"})


def _called(func: ast.expr) -> str | None:
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None


def gpu_calls(function: Any) -> list[str]:
    """What in the test's own body runs GPU code: CuPy itself, a GPU variant class, a GPU variant
    by name, or the module's list of GPU variant names (``GPU``)."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    except (OSError, TypeError):
        return []
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = _called(node.func)
            if name == "cupy" or name in GPU_CLASSES:
                found.append(f"{name}()")
            elif name in RUNNERS and any(isinstance(a, ast.Constant) and a.value in GPU_NAMES for a in node.args):
                found.append(f"{name}({next(a.value for a in node.args if isinstance(a, ast.Constant))!r})")
        elif isinstance(node, ast.Name) and node.id == "GPU" and isinstance(node.ctx, ast.Load):
            found.append("GPU")
    return found


def pytest_collection_finish(session: pytest.Session) -> None:
    rows = []
    for item in session.items:
        callspec = getattr(item, "callspec", None)
        values = [v for v in callspec.params.values() if isinstance(v, str)] if callspec else []
        rows.append({"id": item.nodeid, "marked": item.get_closest_marker("gpu") is not None,
                     "gpu_param": any(v in GPU_NAMES for v in values),
                     "cpu_param": any(v in CPU_NAMES for v in values),
                     "calls": gpu_calls(getattr(item, "function", None))})
    with open(os.environ["GPU_MARK_PROBE_OUT"], "w") as out:
        json.dump(rows, out)
