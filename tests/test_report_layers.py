"""The report asks each kernel what its report needs (``Kernel`` declarations, through
``portabench.implementations.get_kernel``) and imports nothing from a kernel's folder."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from portabench.implementations import get_kernel, list_kernels
from portabench.implementations.model import Kernel, Sweep

REPO = Path(__file__).resolve().parents[1]
KERNEL_FOLDERS = tuple(f"portabench.implementations.{name}" for name in list_kernels())


def imported(path: Path) -> set[str]:
    """Every module ``path`` (a module of ``portabench.reports``) imports, lazy imports and relative ones included,
    and each name imported from a package as ``package.name``."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # inside reports/: ``from .x import y`` stays in the package
                base = ".".join(["portabench", "reports"][: 3 - node.level] + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            found |= {base} | {f"{base}.{alias.name}" for alias in node.names}
    return found


def test_no_report_module_imports_from_a_kernel_folder() -> None:
    modules = sorted((REPO / "reports").rglob("*.py"))
    assert len(modules) > 5 and REPO / "reports" / "sweeps.py" in modules
    inside = tuple(f"{folder}." for folder in KERNEL_FOLDERS)
    offending = {path.name: sorted(m for m in imported(path) if m in KERNEL_FOLDERS or m.startswith(inside))
                 for path in modules}
    assert not {name: found for name, found in offending.items() if found}


def test_the_import_walk_sees_a_kernel_import(tmp_path: Path) -> None:
    """The check above finds such imports: plain, from-, lazy (inside a function) and of a kernel package."""
    module = tmp_path / "m.py"
    module.write_text("import portabench.implementations.phi.variant\n"
                      "def f():\n    from portabench.implementations.bcsr.definition import SWEEP_STUDY\n"
                      "from portabench.implementations import gmres\n"
                      "from portabench.implementations import get_kernel\n")
    found = imported(module)
    assert {"portabench.implementations.phi.variant", "portabench.implementations.bcsr.definition",
            "portabench.implementations.gmres"} <= found
    assert not {m for m in found if m.startswith("portabench.implementations.get_kernel.")}


def test_kernels_declare_what_their_report_needs() -> None:
    """Neutral defaults on ``Kernel``; the kernels with a sweep, a launch study or a roofline say so."""
    assert Kernel.sweeps == () and Kernel.has_roofline is False
    bcsr, gmres, phi = get_kernel("bcsr"), get_kernel("gmres"), get_kernel("phi")
    (sweep,) = bcsr.sweeps
    assert isinstance(sweep, Sweep) and sweep.study in {s.name for s in bcsr.studies("gpu")}
    assert sweep.axis == "block_size" and bcsr.sweep_value("block-sweep-bs16") == 16
    (throughput,) = gmres.sweeps
    assert throughput.study is None and throughput.name == "gmres_throughput"
    assert phi.has_roofline and phi.default_launch_policy("gpu") == "t256-v0" and phi.default_launch_policy("cpu")
    launch = {k: get_kernel(k) for k in list_kernels()}
    for name, kernel in launch.items():
        policies = [s for d in ("cpu", "gpu") for s in kernel.studies(d) if "policy" in s.settings]
        # A kernel with a launch study says which policy is the default, one of those swept.
        for study in policies:
            assert kernel.default_launch_policy(study.device) in study.settings["policy"], name
        if not policies:
            assert kernel.default_launch_policy("gpu") is None, name
    names = [s.name for k in launch.values() for s in k.sweeps]
    assert len(names) == len(set(names))  # one table (CSV) per sweep
    with pytest.raises(Exception, match="sweeps no parameter"):
        get_kernel("stream").sweep_value("copy")
