"""Every test that runs GPU code carries the ``gpu`` mark, so ``pytest -m gpu`` runs all of them.

The suite is collected in a child pytest with tests/gpu_mark_probe.py, which reads each test's
parameters and body without conftest's rules; here, every test that looks like GPU code must come
out marked. The conftest's own two safeguards (marking by parameters and fixtures, and failing an
unmarked test that skips for lack of CuPy) are exercised on a small synthetic suite.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from portabench.implementations.gpu import cupy_unavailable

TESTS = Path(__file__).parent

# Tests that name GPU variants but run only host code (constructors, supports(), a fake CuPy).
HOST_ONLY = {
    "tests/test_batched_spmv.py::test_team_group_size_out_of_range_is_rejected": "the constructor rejects m",
    "tests/test_batched_spmv.py::test_cusparse_declines_what_32_bit_indices_cannot_hold": "supports() on the host",
    "tests/test_batched_spmv.py::test_staged_declines_what_shared_memory_cannot_hold": "supports() and the constructor",
    "tests/test_bcsr.py::test_by_block_refuses_large_blocks_and_auto_covers_every_size": "supports() on the host",
    "tests/test_bcsr.py::test_row_per_thread_layouts": "the layout rule and supports() on the host",
    "tests/test_bcsr.py::test_row_per_thread_block_column_offsets": "the offsets, the rule and supports() on the host",
    "tests/test_bcsr.py::test_csr16_refuses_rows_wider_than_its_offsets": "supports() on the host",
    "tests/test_gpu_arrays.py::test_out_of_memory_is_one_line_and_drops_the_prepared_state": "a stand-in cupy",
    "tests/test_mttkrp.py::test_segmented_gpu_staging_rule_and_settings": "the staging rule and settings",
}


def _pytest(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args], cwd=cwd,
                          env={**os.environ, **(env or {})}, capture_output=True, text=True, timeout=300)


def test_every_test_that_runs_gpu_code_is_marked(tmp_path: Path) -> None:
    out = tmp_path / "rows.json"
    env = {"GPU_MARK_PROBE_OUT": str(out), "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])}
    done = _pytest("--collect-only", "-q", "-p", "gpu_mark_probe", "tests", cwd=TESTS.parent, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = json.loads(out.read_text())
    assert len(rows) > 500  # the whole suite, not an empty collection
    unmarked = []
    for row in rows:
        function = row["id"].split("[")[0]
        # A variant parameter decides; otherwise what the body calls, unless it is host-only code.
        gpu = row["gpu_param"] or (not row["cpu_param"] and row["calls"] and function not in HOST_ONLY)
        if gpu and not row["marked"]:
            unmarked.append(f"{row['id']} ({', '.join(row['calls']) or 'a GPU variant parameter'})")
    assert not unmarked, "GPU tests without the gpu mark:\n" + "\n".join(unmarked)
    assert all(any(r["id"].startswith(f + "[") or r["id"] == f for r in rows) for f in HOST_ONLY), "stale HOST_ONLY"


SYNTHETIC = '''
import pytest
from portabench.implementations.gpu import cupy_unavailable

@pytest.mark.parametrize("variant", ["numba-team", "cupy-team"])
def test_by_name(variant):
    pass

@pytest.mark.usefixtures("cupy_gpu")
def test_by_fixture():
    pass

def test_forgotten():
    if cupy_unavailable():
        pytest.skip(cupy_unavailable())
'''


def test_conftest_marks_by_parameter_and_fixture_and_fails_a_forgotten_skip(tmp_path: Path) -> None:
    shutil.copy(TESTS / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "test_synthetic.py").write_text(SYNTHETIC)
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    gpu: needs a GPU\n")
    done = _pytest("--collect-only", "-q", "-m", "gpu", cwd=tmp_path)
    listed = {line for line in done.stdout.splitlines() if "::" in line}
    assert listed == {"test_synthetic.py::test_by_name[cupy-team]", "test_synthetic.py::test_by_fixture"}, done.stdout
    if cupy_unavailable() is None:
        pytest.skip("CuPy runs here: nothing skips for lack of it")
    done = _pytest("-q", "-ra", cwd=tmp_path)
    assert "FAILED test_synthetic.py::test_forgotten" in done.stdout, done.stdout
    assert done.stdout.strip().splitlines()[-1].startswith("1 failed, 1 passed, 2 skipped in"), done.stdout
