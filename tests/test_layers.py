"""The package's structure: folders are floors (``FLOORS``), and imports run sideways or down, never up:
datasets -> reference -> implementations -> harness (plan, machine record, statistics) -> suite and reports ->
harness/commands. Every import is checked, the lazy ones inside functions included: an arrow running back would
make a lower floor depend on code written against it. A variant lives in the module named after it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# Each folder's floor; a folder not named sits on its parent's. Imports may run sideways or down, never up.
FLOORS = {
    "datasets": 0,            # inputs: files, generators, the error types
    "reference": 1,           # the float64 oracles
    "implementations": 2,     # the kernel model, the kernels, the backends
    "harness": 3,             # the run plan, the machine record, the statistics, runs split across devices
    "suite": 4,               # asv's benchmark classes
    "reports": 4,             # results -> tables, figures, pages
    "harness/commands": 5,    # portabench's commands
}
# Known exceptions, each with its reason. Keep this short.
ALLOWED = {
    ("portabench.datasets.batched.pele", "portabench.reference.gmres"):
        "a generated pool is accepted only once the GMRES oracle converged on every system (imported when a pool "
        "is built)",
}


def import_name(folder: str) -> str:
    """``harness/commands`` -> ``portabench.harness.commands``; the suite is imported by asv as ``suite``."""
    return folder.replace("/", ".") if folder.split("/")[0] == "suite" else "portabench." + folder.replace("/", ".")


def layer(module: str) -> int:
    """The floor of ``module``: its deepest folder named in FLOORS; -1 for modules not ours (numpy, ...)."""
    best = max((f for f in FLOORS if module == import_name(f) or module.startswith(import_name(f) + ".")),
               key=len, default=None)
    return -1 if best is None else FLOORS[best]


def modules() -> list[tuple[str, Path]]:
    out = []
    for folder in (f for f in FLOORS if "/" not in f):
        for path in sorted((REPO / folder).rglob("*.py")):
            parts = path.relative_to(REPO / folder).with_suffix("").parts
            name = ".".join((import_name(folder), *parts)).removesuffix(".__init__")
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
            "portabench.implementations.hardware", "portabench.reports.build", "suite.classes",
            "portabench.harness.commands.cli", "portabench.harness.plan"} <= names
    assert layer("portabench.harness.commands.prefill") == 5 and layer("portabench.harness.plan") == 3
    assert layer("numpy") == -1 and layer("portabench.harnessx") == -1


def test_every_python_folder_is_a_package_of_the_wheel() -> None:
    """pyproject.toml names its packages by hand: one left out still imports from an editable install, but is
    missing from the wheels ``portabench check`` builds."""
    import tomllib

    setuptools = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    folders = {p.parent.relative_to(REPO).as_posix() for f in FLOORS if f.split("/")[0] != "suite"
               for p in (REPO / f).rglob("*.py")}
    expected = {import_name(f) for f in folders}
    assert set(setuptools["packages"]) == expected, (expected ^ set(setuptools["packages"]))
    assert setuptools["package-dir"] == {import_name(f): f for f in FLOORS if "/" not in f and f != "suite"}


def allowed(module: str, target: str) -> bool:
    return any(module == m and (target == t or target.startswith(t + ".")) for m, t in ALLOWED)


@pytest.mark.parametrize("module, path", modules(), ids=[m for m, _ in modules()])
def test_imports_run_downwards(module: str, path: Path) -> None:
    upward = sorted(t for t in imports(module, path) if layer(t) > layer(module) and not allowed(module, t))
    assert not upward, f"{module} (layer {layer(module)}) imports from above: {upward}"


def test_suite_and_reports_do_not_import_each_other() -> None:
    for module, path in modules():
        if layer(module) != FLOORS["suite"]:
            continue
        other = "portabench.reports" if module.startswith("suite") else "suite"
        assert not [t for t in imports(module, path) if t == other or t.startswith(other + ".")], module


def test_each_variant_lives_in_the_module_named_after_it() -> None:
    from portabench.implementations import list_kernels, list_variants

    misplaced = [(k, v.name, v.__module__) for k in list_kernels() for v in list_variants(k)
                 if v.__module__ != f"portabench.implementations.{k}.{v.name.replace('-', '_')}"]
    assert not misplaced
