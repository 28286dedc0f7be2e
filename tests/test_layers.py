"""The package's structure: a variant lives in the module named after it, and the layers import
downwards only: datasets -> reference -> implementations -> suite and reports -> the command layer
(``implementations.commands``: the CLI, the runner, the prefill, tracking). Every import is checked, the lazy ones inside
functions included: an arrow running back would make a lower layer depend on code written against it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGE_DIRS = {"datasets": "portabench.datasets", "reference": "portabench.reference",
                "implementations": "portabench.implementations", "reports": "portabench.reports",
                "suite": "suite"}
COMMAND_LAYER = "portabench.implementations.commands"  # the package: the CLI, the runner and its parts, tracking
# Known exceptions, each with its reason. Keep this short.
ALLOWED = {
    ("portabench.datasets.batched.pele", "portabench.reference.gmres"):
        "a generated pool is accepted only once the GMRES oracle converged on every system (imported when a pool "
        "is built)",
}


def layer(module: str) -> int:
    if module == COMMAND_LAYER or module.startswith(COMMAND_LAYER + "."):
        return 4
    for prefix, rank in (("portabench.datasets", 0), ("portabench.reference", 1), ("portabench.implementations", 2),
                         ("portabench.reports", 3), ("suite", 3)):
        if module == prefix or module.startswith(prefix + "."):
            return rank
    return -1  # not ours (numpy, ...)


def modules() -> list[tuple[str, Path]]:
    out = []
    for folder, package in PACKAGE_DIRS.items():
        for path in sorted((REPO / folder).rglob("*.py")):
            parts = path.relative_to(REPO / folder).with_suffix("").parts
            name = ".".join((package, *parts)).removesuffix(".__init__")
            out.append((name, path))
    return out


def imports(module: str, path: Path) -> set[str]:
    """Every module ``path`` imports, relative imports resolved (``from . import x`` counts as ``pkg.x``)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([node.module] if node.module else []))
            found.add(base)
            found |= {f"{base}.{alias.name}" for alias in node.names if layer(f"{base}.{alias.name}") >= 0}
    return found


def test_the_walk_sees_every_package() -> None:
    names = {m for m, _ in modules()}
    assert {"portabench.datasets.errors", "portabench.reference.phi", "portabench.implementations.model",
            "portabench.implementations.machine.hardware", "portabench.reports.build", "suite.classes",
            "portabench.implementations.commands.cli", "portabench.implementations.commands.runner"} <= names
    assert layer("portabench.implementations.commands.prefill") == 4 and layer("portabench.implementations.plan") == 2


def allowed(module: str, target: str) -> bool:
    return any(module == m and (target == t or target.startswith(t + ".")) for m, t in ALLOWED)


@pytest.mark.parametrize("module, path", modules(), ids=[m for m, _ in modules()])
def test_imports_run_downwards(module: str, path: Path) -> None:
    upward = sorted(t for t in imports(module, path) if layer(t) > layer(module) and not allowed(module, t))
    assert not upward, f"{module} (layer {layer(module)}) imports from above: {upward}"


def test_suite_and_reports_do_not_import_each_other() -> None:
    for module, path in modules():
        if layer(module) != 3:
            continue
        other = "portabench.reports" if module.startswith("suite") else "suite"
        assert not [t for t in imports(module, path) if t == other or t.startswith(other + ".")], module


def test_each_variant_lives_in_the_module_named_after_it() -> None:
    from portabench.implementations import list_kernels, list_variants

    misplaced = [(k, v.name, v.__module__) for k in list_kernels() for v in list_variants(k)
                 if v.__module__ != f"portabench.implementations.{k}.{v.name.replace('-', '_')}"]
    assert not misplaced
