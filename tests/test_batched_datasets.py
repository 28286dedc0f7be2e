"""Batched small systems: BatchedSystems, Kokkos Kernels batched CRS files, the GMRES oracle,
the PeleLM stand-ins and their registry entries."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from portabench.datasets import get_dataset, list_datasets, load
from portabench.datasets.batched import (
    MECHANISMS, BatchedSystems, num_systems, pele, random_systems, read_kokkos, rhs_path, standin, write_kokkos,
)
from portabench.datasets.errors import DatasetError, MalformedFileError
from portabench.datasets.registry import SHIPPED
from portabench.reference.gmres import NotConvergedError, gmres, solve_batched, true_residual

KK_A = SHIPPED / "kokkos-kernels" / "batched_A.mm"
KK_B = SHIPPED / "kokkos-kernels" / "batched_B.mm"


# -- BatchedSystems ---------------------------------------------------------------------


def test_systems_views_agree(fresh_seed: int) -> None:
    rng = np.random.default_rng(fresh_seed)
    s = random_systems(rng, n=int(rng.integers(5, 30)), count=4)
    assert s.num_systems == 4 and s.nnz == s.col_idx.size and s.density == s.nnz / s.n**2
    for i in range(4):
        a = s.matrix(i)
        assert isinstance(a, sp.csr_array)
        np.testing.assert_array_equal(a.toarray(), s.dense(i))
        np.testing.assert_array_equal(np.diag(s.dense(i)), s.diagonal()[i])
        assert np.count_nonzero(s.dense(i)) == s.nnz
    assert s.pool_index is None and s.pool_size is None
    assert s.row_ptr.dtype == np.int32 and s.values.dtype == np.float64


def _tiny(**change):
    # 2 x 2 systems, pattern [[x, x], [., x]]
    base = dict(n=2, row_ptr=[0, 2, 3], col_idx=[0, 1, 1], values=[[4.0, 1.0, 3.0], [5.0, -1.0, 2.0]],
                rhs=[[1.0, 2.0], [3.0, 4.0]])
    base.update(change)
    return BatchedSystems(**base)


@pytest.mark.parametrize("change, message", [
    (dict(row_ptr=[0, 2]), r"row_ptr has shape \(2,\), expected \(3,\)"),
    (dict(row_ptr=[0, 2, 4]), "end at nnz=3"),
    (dict(col_idx=[0, 2, 1]), "column index 2 outside 0..1"),
    (dict(col_idx=[1, 0, 1]), "unsorted column 0 in row 0"),
    (dict(col_idx=[0, 0, 1]), "duplicate column 0 in row 0"),
    (dict(col_idx=[0, 1, 0]), "row 1 has no diagonal entry"),
    (dict(values=[[4.0, 1.0, 3.0]]), r"rhs has shape \(2, 2\), expected \(1, 2\)"),
    (dict(values=[[4.0, 1.0], [5.0, -1.0]]), r"values has shape \(2, 2\), expected \(N, 3\)"),
    (dict(values=[[4.0, np.nan, 3.0], [5.0, -1.0, 2.0]]), "values of system 0 holds nan"),
    (dict(rhs=[[1.0, 2.0], [np.inf, 4.0]]), "rhs of system 1 holds inf"),
    (dict(values=[[4.0, 1.0, 3.0], [5.0, -1.0, 0.0]]), "system 1 has a zero diagonal in row 1"),
    (dict(pool_index=[0, -1]), "pool_index must hold 2 non-negative integers"),
    (dict(n=0), "n must be a positive integer"),
])
def test_systems_validation(change, message) -> None:
    with pytest.raises(DatasetError, match=message):
        _tiny(**change)
    _tiny()  # the unchanged systems are fine


# -- Kokkos Kernels files ----------------------------------------------------------------


def test_read_shipped_kokkos_files() -> None:
    s = read_kokkos(KK_A)
    assert (s.n, s.nnz, s.num_systems) == (200, 1624, 96)
    ds = get_dataset("kk-batched")
    assert (ds.facts["n"], ds.facts["nnz"], ds.facts["N"]) == (s.n, s.nnz, s.num_systems)
    # Pattern: a 2-D stencil, structurally symmetric, 4/6/9 entries per row, full diagonal.
    pattern = s.pattern()
    assert (pattern != pattern.T).nnz == 0
    assert sorted(set(np.diff(s.row_ptr).tolist())) == [4, 6, 9]
    np.testing.assert_array_equal(s.col_idx[s.diagonal_positions], np.arange(200))
    # Spot values: the file's first entry line "1 1 2.14513915723297 1.8141890647117656 ..."
    # and the B file's first values "0.5880555879641587" / "0.5225436485395436".
    assert s.values[0, 0] == 2.14513915723297 and s.values[1, 0] == 1.8141890647117656
    assert s.dense(0)[0, 1] == -0.3894117089200724 and s.dense(0)[199, 199] == 2.0775444084355352
    assert s.rhs[0, 0] == 0.5880555879641587 and s.rhs[1, 0] == 0.5225436485395436
    # The registry reads the same thing through the shipped A file.
    r = load("kk-batched")
    np.testing.assert_array_equal(r.values, s.values)
    np.testing.assert_array_equal(r.rhs, s.rhs)
    assert rhs_path(KK_A) == KK_B


def test_shipped_systems_solve() -> None:
    s = read_kokkos(KK_A)
    for i in (0, 57, 95):
        result = gmres(s.matrix(i), s.rhs[i], tol=1e-10)
        assert result.converged and 1 < result.iterations < 200
        exact = np.linalg.solve(s.dense(i), s.rhs[i])
        assert np.linalg.norm(result.x - exact) <= 1e-7 * np.linalg.norm(exact)


def test_write_read_round_trip(tmp_path: Path, fresh_seed: int) -> None:
    rng = np.random.default_rng(fresh_seed)
    s = random_systems(rng, n=int(rng.integers(3, 25)), count=int(rng.integers(1, 6)))
    a, b = write_kokkos(s, tmp_path / "sys_A.mm")
    assert b == tmp_path / "sys_B.mm" and a.read_text().startswith("%%MatrixMarket batched CRS matrix\n")
    r = read_kokkos(a)
    for name in ("row_ptr", "col_idx", "values", "rhs"):
        np.testing.assert_array_equal(getattr(r, name), getattr(s, name))  # exact: shortest round-trip text
    assert r.n == s.n


def test_reader_accepts_unsorted_entries(tmp_path: Path, fresh_seed: int) -> None:
    rng = np.random.default_rng(fresh_seed)
    s = random_systems(rng, n=8, count=3)
    a, b = write_kokkos(s, tmp_path / "A.mm")
    lines = a.read_text().splitlines()
    head, body = lines[:4], lines[4:]
    rng.shuffle(body)
    a.write_text("\n".join(head + body) + "\n")
    r = read_kokkos(a, b)
    np.testing.assert_array_equal(r.values, s.values)
    np.testing.assert_array_equal(r.col_idx, s.col_idx)


GOOD_A = """%%MatrixMarket batched CRS matrix
% a comment
3 3 5 2
1 1 4.0 5.0
1 2 1.0 -1.0
2 2 3.0 2.5
3 1 0.5 0.25
3 3 2.0 6.0
"""
GOOD_B = """%%MatrixMarket 2D view
%
2 3
1.0 2.0 3.0
4.0 5.0 6.0
"""


def _files(tmp_path: Path, a: str = GOOD_A, b: str = GOOD_B) -> tuple[Path, Path]:
    pa, pb = tmp_path / "m_A.mm", tmp_path / "m_B.mm"
    pa.write_text(a)
    pb.write_text(b)
    return pa, pb


def _replace_line(text: str, line: int, new: str) -> str:
    lines = text.splitlines()
    lines[line - 1] = new
    return "\n".join(lines) + "\n"


def test_good_small_files(tmp_path: Path) -> None:
    s = read_kokkos(_files(tmp_path)[0])
    np.testing.assert_array_equal(s.dense(1), [[5.0, -1.0, 0], [0, 2.5, 0], [0.25, 0, 6.0]])
    np.testing.assert_array_equal(s.rhs, [[1, 2, 3], [4, 5, 6]])


@pytest.mark.parametrize("which, line, text, message", [
    ("A", 5, "1 2 1.0", r"expected row, column and N=2 values \(4 fields\), found 3"),
    ("A", 5, "1 2 1.0 -1.0 7.0", "found 5"),
    ("A", 5, "1 2 1.0 abc", "non-numeric value 'abc'"),
    ("A", 5, "1 2 1.0 nan", "non-finite value 'nan'"),
    ("A", 5, "1 x 1.0 2.0", "index: 'x' is not an integer"),
    ("A", 5, "1 4 1.0 2.0", "column index 4 outside 1..3"),
    ("A", 5, "0 2 1.0 2.0", "row index 0 outside 1..3"),
    ("A", 7, "3 2 0.5 0.25", None),  # a valid new entry: no error
    ("A", 7, "1 2 0.5 0.25", r"duplicate entry \(1, 2\), first on line 5"),
    ("A", 3, "3 3 6 2", "header says nnz=6 but the file has 5 entries"),
    ("A", 3, "3 3 4 2", "more entries than the header's nnz=4"),  # blamed on the first extra line, 8
    ("A", 3, "3 3 5", "header must be 'nrows ncols nnz N', found 3 fields"),
    ("A", 3, "3 4 5 2", "must be square"),
    ("A", 6, "2 1 3.0 2.5", "row 2 has no diagonal entry"),
    ("A", 8, "3 3 2.0 0.0", r"zero diagonal \(3, 3\) in system 2 of 2"),
    ("A", 1, "%%MatrixMarket matrix coordinate real general", "is not a batched CRS matrix"),
    ("B", 4, "1.0 2.0", "expected n=3 values, found 2"),
    ("B", 5, "4.0 5.0 x", "non-numeric value 'x'"),
    ("B", 3, "3 3", "header says N=3 but the file has 2 right-hand sides"),
    ("B", 3, "1 3", "more right-hand sides than the header's N=1"),  # blamed on line 5
])
def test_malformed_files(tmp_path: Path, which: str, line: int, text: str, message: str | None) -> None:
    a, b = GOOD_A, GOOD_B
    if which == "A":
        a = _replace_line(a, line, text)
        if line == 7 and message is None:  # replacing (3,1) by (3,2) is still a valid file
            read_kokkos(_files(tmp_path, a, b)[0])
            return
    else:
        b = _replace_line(b, line, text)
    pa, pb = _files(tmp_path, a, b)
    path = pa if which == "A" else pb
    # Missing-diagonal errors have no single line to blame; extra lines are blamed on the
    # first of them; all others name the line changed.
    if message.startswith("more "):
        line = 8 if which == "A" else 5
    where = re.escape(f"{path}:") if "no diagonal" in message else re.escape(f"{path}:{line}:")
    with pytest.raises(MalformedFileError, match=where + ".*" + message):
        read_kokkos(pa)


@pytest.mark.parametrize("header, message", [
    ("3 3", "N=3 right-hand sides but m_A.mm holds N=2 matrices"),
    ("2 4", "n=4 but m_A.mm has n=3 rows"),
])
def test_a_and_b_disagree(tmp_path: Path, header: str, message: str) -> None:
    rows = 3 if header == "3 3" else 2
    width = 4 if header == "2 4" else 3
    b = "%%MatrixMarket 2D view\n%\n" + header + "\n" + "".join(" ".join(["1.0"] * width) + "\n" for _ in range(rows))
    pa, pb = _files(tmp_path, GOOD_A, b)
    with pytest.raises(MalformedFileError, match=re.escape(f"{pb}:3: {message}")):
        read_kokkos(pa)


@pytest.mark.parametrize("which", ["A", "B"])
def test_empty_files(tmp_path: Path, which: str) -> None:
    pa, pb = _files(tmp_path, "" if which == "A" else GOOD_A, "%%MatrixMarket 2D view\n%\n" if which == "B" else GOOD_B)
    path = pa if which == "A" else pb
    with pytest.raises(MalformedFileError, match=re.escape(f"{path}: empty file")):
        read_kokkos(pa)


def test_rhs_path_and_missing_files(tmp_path: Path) -> None:
    assert rhs_path("x/gri30_A.mm") == Path("x/gri30_B.mm")
    assert rhs_path("x/A.mm") == Path("x/B.mm")
    assert rhs_path("x/gri30.mm") == Path("x/gri30_B.mm")
    pa, pb = _files(tmp_path)
    pb.unlink()
    with pytest.raises(DatasetError, match=re.escape(f"{pb}: no such file (the right-hand-side (B) file)")):
        read_kokkos(pa)


# -- the GMRES oracle --------------------------------------------------------------------


def test_gmres_matches_numpy_solve(fresh_seed: int) -> None:
    rng = np.random.default_rng(fresh_seed)
    for trial in range(6):
        s = random_systems(rng, n=int(rng.integers(4, 60)), count=1, density=rng.uniform(0.1, 1.0))
        exact = np.linalg.solve(s.dense(0), s.rhs[0])
        for A in (s.matrix(0), s.dense(0)):
            result = gmres(A, s.rhs[0], tol=1e-12)
            assert result.converged, (fresh_seed, trial)
            assert np.linalg.norm(result.x - exact) <= 1e-9 * np.linalg.norm(exact), (fresh_seed, trial)
            h = result.residuals
            assert h[0] == 1.0 and len(h) == result.iterations + 1
            assert np.all(np.diff(h) <= 1e-15)  # GMRES residuals never grow
            assert h[-1] < 1e-12 <= h[-2]  # stops at the first iteration below tol
            assert true_residual(A, s.rhs[0], result.x) < 1e-11


def test_gmres_iterations_for_k_distinct_eigenvalues(fresh_seed: int) -> None:
    """D^{-1} A = S B S^{-1}, B block diagonal with 2x2 blocks [[1, a], [c, 1]] (eigenvalues 1 +- sqrt(ac))
    drawing ac from k/2 values: k distinct eigenvalues, diagonalizable, so GMRES needs exactly k
    iterations for a generic b (and never more)."""
    rng = np.random.default_rng(fresh_seed)
    for k in (2, 4, 6):
        products = np.linspace(0.1, 0.6, k // 2)
        blocks = 12
        B = np.eye(2 * blocks)
        for j in range(blocks):
            a = rng.uniform(0.5, 2.0)
            B[2 * j, 2 * j + 1] = a
            B[2 * j + 1, 2 * j] = products[j % (k // 2)] / a
        perm = rng.permutation(2 * blocks)
        B = B[np.ix_(perm, perm)]  # still unit diagonal
        S = 10.0 ** rng.uniform(-1, 1, 2 * blocks)
        C = S[:, None] * B / S[None, :]  # diagonal similarity: same eigenvalues, unit diagonal
        D = 10.0 ** rng.uniform(-4, 4, 2 * blocks)
        A = D[:, None] * C
        assert np.unique(np.round(np.linalg.eigvals(C).real, 8)).size == k
        b = rng.standard_normal(2 * blocks)
        result = gmres(A, b, tol=1e-10)
        assert result.iterations == k and result.converged, (fresh_seed, k, result.residuals)
        np.testing.assert_allclose(result.x, np.linalg.solve(A, b), rtol=1e-7)
        # Without Jacobi the row scaling D hides the structure: many more iterations.
        assert gmres(A, b, tol=1e-10, jacobi=False).iterations > 2 * k


def test_gmres_edge_cases(fresh_seed: int) -> None:
    rng = np.random.default_rng(fresh_seed)
    s = random_systems(rng, n=10, count=1)
    zero = gmres(s.matrix(0), np.zeros(10))
    assert zero.iterations == 0 and zero.converged and not zero.x.any()
    capped = gmres(s.matrix(0), s.rhs[0], tol=1e-14, max_iter=2)
    assert capped.iterations == 2 and not capped.converged and capped.residuals[-1] >= 1e-14
    # A start x0: the same solution; the tolerance is relative to the initial residual (as in
    # Kokkos Kernels), so the residual drops below tol * ||D^-1 (b - A x0)||.
    exact = np.linalg.solve(s.dense(0), s.rhs[0])
    x0 = exact + 1e-3 * rng.standard_normal(10)
    started = gmres(s.matrix(0), s.rhs[0], tol=1e-8, x0=x0)
    assert started.converged
    d = np.diag(s.dense(0))
    assert (np.linalg.norm((s.rhs[0] - s.dense(0) @ started.x) / d)
            < 2e-8 * np.linalg.norm((s.rhs[0] - s.dense(0) @ x0) / d))
    np.testing.assert_allclose(started.x, exact, rtol=1e-6, atol=1e-9 * np.abs(exact).max())
    with pytest.raises(ValueError, match="zero diagonal in row 1"):
        gmres(np.array([[1.0, 2.0], [3.0, 0.0]]), np.ones(2))


def test_solve_batched(fresh_seed: int) -> None:
    rng = np.random.default_rng(fresh_seed)
    s = random_systems(rng, n=12, count=5)
    x, its = solve_batched(s, tol=1e-12)
    for i in range(5):
        exact = np.linalg.solve(s.dense(i), s.rhs[i])
        assert np.linalg.norm(x[i] - exact) <= 1e-8 * np.linalg.norm(exact), (fresh_seed, i)
        assert its[i] == gmres(s.matrix(i), s.rhs[i], tol=1e-12).iterations
    with pytest.raises(NotConvergedError, match="not below tol"):
        solve_batched(s, tol=1e-14, max_iter=2)
    _, its = solve_batched(s, tol=1e-14, max_iter=2, require_convergence=False)
    assert np.all(its == 2)


# -- PeleLM stand-ins --------------------------------------------------------------------

SMALL = 200 / 51200  # 200 systems: more than either pool


@pytest.mark.parametrize("name, n, density, pool_size, target", [
    ("gri30", 54, 87.79, 90, 7), ("isooctane", 144, 29.59, 72, 17),
])
def test_standin_shape_and_pattern(name: str, n: int, density: float, pool_size: int, target: int) -> None:
    s = standin(name, SMALL, seed=3)
    assert (s.n, s.num_systems) == (n, 200)
    assert s.nnz == round(density / 100 * n * n) == get_dataset(name).facts["nnz"]
    assert abs(100 * s.density - density) < 0.005
    dense_pattern = s.pattern().toarray()
    assert dense_pattern[-1].all() and dense_pattern[:, -1].all()  # temperature row and column
    assert np.all(np.diag(dense_pattern))
    # Structurally near-symmetric: at most one one-way coupling.
    assert np.count_nonzero(dense_pattern != dense_pattern.T) <= 1
    # Tiling: system k is pool system k mod pool, pool systems differ.
    assert s.pool_size == pool_size
    np.testing.assert_array_equal(s.pool_index, np.arange(200) % pool_size)
    np.testing.assert_array_equal(s.values[pool_size:2 * pool_size], s.values[:pool_size])
    np.testing.assert_array_equal(s.rhs[pool_size + 3], s.rhs[3])
    assert not np.array_equal(s.values[0], s.values[1]) and not np.array_equal(s.rhs[0], s.rhs[1])
    # The pattern is the mechanism's: the same for another seed and scale.
    other = standin(name, 1 / 51200, seed=4)
    np.testing.assert_array_equal(other.col_idx, s.col_idx)
    np.testing.assert_array_equal(other.row_ptr, s.row_ptr)
    assert other.num_systems == 1


@pytest.mark.parametrize("name, target", [("gri30", 7), ("isooctane", 17)])
def test_standin_convergence(name: str, target: int, fresh_seed: int) -> None:
    s = standin(name, SMALL, seed=fresh_seed)
    _, its = solve_batched(s, tol=1e-8)  # the oracle, independently of the generator's own check
    assert its.max() <= target, (fresh_seed, its.max())
    assert its.max() >= target - pele.BAND, (fresh_seed, its.max())
    assert its.max() == target, (fresh_seed, its.max())  # what the calibration aims at
    assert its.min() < its.max()  # a spread of iteration counts over the pool
    np.testing.assert_array_equal(its[: s.pool_size], pele.pool_iterations(name, fresh_seed))
    # Error weights: row scales span decades, so unpreconditioned GMRES is far slower.
    diag = np.abs(s.diagonal())
    assert np.all(diag.max(axis=1) / diag.min(axis=1) > 1e4)
    magnitudes = np.abs(s.values[0])
    assert magnitudes.max() / magnitudes.min() > 1e6
    plain = gmres(s.matrix(0), s.rhs[0], tol=1e-8, jacobi=False)
    assert plain.iterations > 3 * its[0]


@pytest.mark.parametrize("name", ["gri30", "isooctane"])
def test_standin_determinism(name: str, fresh_seed: int) -> None:
    first = pele.pool.__wrapped__(name, fresh_seed)  # regenerated, not the cached pool
    again = pele.pool.__wrapped__(name, fresh_seed)
    np.testing.assert_array_equal(first.values, again.values)
    np.testing.assert_array_equal(first.rhs, again.rhs)
    assert first.strength == again.strength
    other = pele.pool.__wrapped__(name, fresh_seed + 1)
    assert not np.allclose(other.values, first.values)
    assert not np.allclose(other.rhs, first.rhs)
    np.testing.assert_array_equal(other.col_idx, first.col_idx)


def test_standin_generation_checks_convergence(monkeypatch: pytest.MonkeyPatch) -> None:
    # Calibrate too strong (worst residual 50 x tol after 7 steps): the oracle check must refuse.
    monkeypatch.setattr(pele, "SAFETY", 50.0)
    with pytest.raises(DatasetError, match="does not converge in 7 Jacobi-preconditioned GMRES iterations"):
        pele.pool.__wrapped__("gri30", 0)
    # Calibrate far too weak: the worst system converges well below the published maximum.
    monkeypatch.setattr(pele, "SAFETY", 1e-6)
    with pytest.raises(DatasetError, match="more than 2 below the published 7"):
        pele.pool.__wrapped__("gri30", 0)


def test_standin_write_read(tmp_path: Path) -> None:
    s = standin("gri30", 5 / 51200, seed=2)
    get_dataset("gri30").write(s, tmp_path / "gri30.mm")
    assert (tmp_path / "gri30_B.mm").is_file()
    r = read_kokkos(tmp_path / "gri30.mm")
    assert r.describe() | {"pool": 90} == s.describe() | {"pool": 90}
    assert s.describe()["density_percent"] == 87.79 and s.describe()["diagonal_decades"] > 4
    np.testing.assert_array_equal(r.values, s.values)
    np.testing.assert_array_equal(r.rhs, s.rhs)
    np.testing.assert_array_equal(r.col_idx, s.col_idx)


def test_registry_entries() -> None:
    names = {d.name for d in list_datasets("batched")}
    assert {"gri30", "isooctane", "kk-batched"} <= names
    for name, mech in MECHANISMS.items():
        d = get_dataset(name)
        assert d.sources == ["stand-in"] and d.read is None and d.kind == "batched"
        assert d.facts["pool"] == mech.pool and d.facts["max_iterations"] == mech.max_iterations
        assert d.facts["tol"] == 1e-8 and "not public" in d.facts["source"]
        assert d.quick_spec == f"{name}@0.02"
        assert num_systems(d.default_scale) == 1024
    kk = get_dataset("kk-batched")
    assert kk.sources == ["shipped"] and kk.standin is None
    spec = load("gri30@0.0001", seed=5)
    assert spec.num_systems == num_systems(0.0001) == 5
    assert num_systems(1.0) == 51200 and num_systems(1e-9) == 1
    with pytest.raises(DatasetError, match="scale must be positive"):
        num_systems(0.0)
