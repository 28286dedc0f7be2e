"""Block-sparse matrices: readers, writers, BCSR conversion, SuiteSparse stand-ins, block-size sweep."""

from __future__ import annotations

import gzip
import io
import math
import re
import tarfile
from pathlib import Path

import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp

from portabench.datasets import get_dataset, list_datasets, load
from portabench.datasets.errors import DatasetError, MalformedFileError, PatternMatrixWarning
from portabench.datasets.matrices import (
    SUITESPARSE, SWEEP_BLOCK_SIZES, BlockMatrix, block_sweep, read_cholmod_triplets, read_matrix, read_mtx,
    read_triplets, standin, to_bcsr, write_mtx,
)
from portabench.datasets.matrices.suitesparse import standin_size
from portabench.datasets.registry import SHIPPED

TRI0 = SHIPPED / "suitesparse" / "bcsstk01.tri0"
TRI = SHIPPED / "suitesparse" / "bcsstk01_cholmod.tri"


def random_sparse(n: int, m: int, density: float, seed: int) -> sp.csr_array:
    rng = np.random.default_rng(seed)
    a = sp.random_array((n, m), density=density, rng=rng, format="csr",
                        data_sampler=lambda size: rng.standard_normal(size))
    a.sort_indices()
    return a


def dense(a) -> np.ndarray:
    return a.toarray() if sp.issparse(a) else np.asarray(a)


# ----------------------------------------------------------------------------- shipped files

def test_bcsstk01_both_formats_agree():
    a = read_triplets(TRI0, symmetric=True)
    b = read_cholmod_triplets(TRI)  # stype -1: lower triangle, expanded
    assert a.shape == b.shape == (48, 48)
    assert a.nnz == b.nnz == 2 * 224 - 48 == 400
    assert a.has_canonical_format and a.dtype == np.float64
    np.testing.assert_array_equal(a.toarray(), b.toarray())
    d = a.toarray()
    np.testing.assert_array_equal(d, d.T)
    np.linalg.cholesky(d)  # SPD
    assert read_matrix(TRI).nnz == 400 and read_matrix(TRI0, symmetric=True).nnz == 400
    assert read_cholmod_triplets(TRI, symmetric=False).nnz == 224  # as stored


def test_bcsstk01_registry_entry():
    m = load("bcsstk01")
    assert isinstance(m, BlockMatrix) and m.bs == 6 and m.n == 48 and m.symmetric
    assert m.nnz == 400 and m.nnzb == get_dataset("bcsstk01").facts["nnzb_full"]
    assert m.nnzb_lower == get_dataset("bcsstk01").facts["nnzb"]
    np.testing.assert_array_equal(m.to_csr().toarray(), read_cholmod_triplets(TRI).toarray())


# ----------------------------------------------------------------------------- Matrix Market

@pytest.mark.parametrize("suffix", [".mtx", ".mtx.gz"])
def test_mm_round_trip(tmp_path, fresh_seed, suffix):
    a = random_sparse(37, 29, 0.15, fresh_seed)
    path = tmp_path / f"a{suffix}"
    write_mtx(a, path)
    b = read_mtx(path)
    assert b.shape == a.shape and b.has_canonical_format
    np.testing.assert_array_equal(b.toarray(), a.toarray())  # bit-exact values


def test_mm_round_trip_symmetric_standin(tmp_path, fresh_seed):
    m = standin("raefsky4", 0.01, fresh_seed)
    path = tmp_path / "s.mtx"
    write_mtx(m, path)
    assert "symmetric" in path.read_text().splitlines()[0]
    back = read_mtx(path)
    np.testing.assert_array_equal(back.toarray(), m.to_csr().toarray())
    again = get_dataset("raefsky4").read(path)
    assert isinstance(again, BlockMatrix) and again.bs == 3
    np.testing.assert_array_equal(again.bsr.toarray(), (m.bsr.toarray() != 0) * m.bsr.toarray())


def test_write_refuses_unsymmetric_as_symmetric(tmp_path, fresh_seed):
    a = random_sparse(20, 20, 0.2, fresh_seed) + sp.eye_array(20)
    with pytest.raises(DatasetError, match="non-symmetric"):
        write_mtx(a, tmp_path / "x.mtx", symmetric=True)


def _entries(rng, n, count, lower=True, strict=False):
    r = rng.integers(0, n, count)
    c = rng.integers(0, n, count)
    keep = (r > c) if strict else (r >= c)
    r, c = r[keep], c[keep]
    key = np.unique(r * n + c)
    return key // n, key % n


def test_mm_symmetric_skew_pattern_integer(tmp_path, fresh_seed):
    rng = np.random.default_rng(fresh_seed)
    n = 15
    r, c = _entries(rng, n, 60)
    v = rng.standard_normal(r.size)
    body = "".join(f"{i + 1} {j + 1} {float(x)!r}\n" for i, j, x in zip(r, c, v))
    (tmp_path / "sym.mtx").write_text(f"%%MatrixMarket matrix coordinate real symmetric\n{n} {n} {r.size}\n{body}")
    full = np.zeros((n, n))
    full[r, c] = v
    full[c, r] = v
    np.testing.assert_array_equal(read_mtx(tmp_path / "sym.mtx").toarray(), full)

    r, c = _entries(rng, n, 60, strict=True)
    v = rng.standard_normal(r.size)
    body = "".join(f"{i + 1} {j + 1} {float(x)!r}\n" for i, j, x in zip(r, c, v))
    (tmp_path / "skew.mtx").write_text(f"%%MatrixMarket matrix coordinate real skew-symmetric\n{n} {n} {r.size}\n{body}")
    skew = read_mtx(tmp_path / "skew.mtx").toarray()
    np.testing.assert_array_equal(skew, -skew.T)
    np.testing.assert_array_equal(skew[r, c], v)

    r, c = _entries(rng, n, 60)
    body = "".join(f"{i + 1} {j + 1}\n" for i, j in zip(r, c))
    (tmp_path / "pat.mtx").write_text(f"%%MatrixMarket matrix coordinate pattern general\n{n} {n} {r.size}\n{body}")
    with pytest.warns(PatternMatrixWarning, match="pat.mtx: a pattern-only Matrix Market file"):
        pat = read_mtx(tmp_path / "pat.mtx")
    assert pat.dtype == np.float64 and pat.nnz == r.size and np.all(pat.data == 1.0)
    np.testing.assert_array_equal(pat.toarray()[r, c], 1.0)

    k = rng.integers(-1000, 1000, r.size)
    body = "".join(f"{i + 1} {j + 1} {x}\n" for i, j, x in zip(r, c, k))
    (tmp_path / "int.mtx").write_text(f"%%MatrixMarket matrix coordinate integer general\n{n} {n} {r.size}\n{body}")
    ints = read_mtx(tmp_path / "int.mtx")
    assert ints.dtype == np.float64
    np.testing.assert_array_equal(ints.toarray()[r, c], k.astype(float))


def test_mm_duplicates_summed(tmp_path, fresh_seed):
    rng = np.random.default_rng(fresh_seed)
    x, y = rng.standard_normal(2)
    (tmp_path / "d.mtx").write_text(f"%%MatrixMarket matrix coordinate real general\n3 3 3\n2 1 {float(x)!r}\n3 3 1.5\n2 1 {float(y)!r}\n")
    a = read_mtx(tmp_path / "d.mtx")
    assert a.nnz == 2 and a.has_canonical_format and a[1, 0] == x + y


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


def _mm_bytes(a) -> bytes:
    buf = io.BytesIO()
    scipy.io.mmwrite(buf, a)
    return buf.getvalue()


def test_suitesparse_archive(tmp_path, fresh_seed):
    a = random_sparse(40, 40, 0.1, fresh_seed)
    rhs = random_sparse(40, 1, 1.0, fresh_seed + 1)
    coord = random_sparse(40, 2, 1.0, fresh_seed + 2)
    path = tmp_path / "Foo.tar.gz"
    with tarfile.open(path, "w:gz") as tar:  # rhs first, so picking the first .mtx would be wrong
        _add(tar, "Foo/Foo_b.mtx", _mm_bytes(rhs))
        _add(tar, "Foo/Foo.mtx", _mm_bytes(a))
        _add(tar, "Foo/Foo_coord.mtx", _mm_bytes(coord))
    np.testing.assert_array_equal(read_mtx(path).toarray(), a.toarray())
    np.testing.assert_array_equal(read_matrix(path).toarray(), a.toarray())


def test_archive_errors(tmp_path, fresh_seed):
    a = random_sparse(10, 10, 0.3, fresh_seed)
    none = tmp_path / "None.tar.gz"
    with tarfile.open(none, "w:gz") as tar:
        _add(tar, "None/README.txt", b"hello")
    with pytest.raises(MalformedFileError, match=re.escape(str(none)) + ".*no .mtx"):
        read_mtx(none)
    ambiguous = tmp_path / "Amb.tar.gz"
    with tarfile.open(ambiguous, "w:gz") as tar:
        _add(tar, "X/Y.mtx", _mm_bytes(a))
        _add(tar, "X/Z.mtx", _mm_bytes(a))
    with pytest.raises(MalformedFileError, match="cannot tell the main matrix"):
        read_mtx(ambiguous)
    broken = tmp_path / "Broken.tar.gz"
    broken.write_bytes(gzip.compress(b"not a tar archive at all" * 40))
    with pytest.raises(MalformedFileError, match=re.escape(str(broken))):
        read_mtx(broken)
    bad_member = tmp_path / "Bad.tar.gz"
    with tarfile.open(bad_member, "w:gz") as tar:
        _add(tar, "Bad/Bad.mtx", b"%%MatrixMarket matrix coordinate real general\n3 3 2\n1 1 1.0\n9 1 2.0\n")
    with pytest.raises(MalformedFileError, match=re.escape(f"{bad_member}[Bad/Bad.mtx]:4:")):
        read_mtx(bad_member)


# ----------------------------------------------------------------------------- malformed inputs

HEADER = "%%MatrixMarket matrix coordinate real general\n"
MALFORMED = {
    # name: (file name, text, reader, expected line or None, message pattern)
    "ragged": ("a.tri0", "0 0 1.5\n1 0 2.5\n2 1\n", "tri0", 3, "expected 3 fields"),
    "non-numeric": ("a.tri0", "0 0 1.5\n1 0 abc\n", "tri0", 2, "not a number: 'abc'"),
    "non-integer index": ("a.tri0", "0 0 1.5\n1.5 0 2.0\n", "tri0", 2, "not an integer"),
    "negative index": ("a.tri0", "0 0 1.5\n-1 0 2.0\n", "tri0", 2, "below 0"),
    "upper entry in lower file": ("a.tri0", "0 0 1.5\n1 0 2.0\n0 2 3.0\n", "tri0", 3, "above the diagonal"),
    "nan triplet": ("a.tri0", "0 0 1.5\n1 0 nan\n", "tri0", 2, "non-finite"),
    "inf triplet": ("a.tri", "% c\n3 3 2 -1\n1 1 1.0\n2 1 -inf\n", "tri", 4, "non-finite"),
    "empty triplets": ("a.tri0", "% only a comment\n\n", "tri0", None, "empty"),
    "empty file": ("a.tri", "", "tri", None, "empty file"),
    "outside declared size": ("a.tri", "% c\n3 3 2 -1\n1 1 1.0\n4 1 2.0\n", "tri", 4, "outside the declared size 3"),
    "zero index in 1-based": ("a.tri", "3 3 2 0\n1 1 1.0\n0 1 2.0\n", "tri", 3, "below 1"),
    "header count mismatch": ("a.tri", "% c\n% d\n3 3 3 -1\n1 1 1.0\n2 1 2.0\n", "tri", 3, "declares 3 entries"),
    "bad header": ("a.tri", "3 3\n1 1 1.0\n", "tri", 1, "expected a header"),
    "mm bad index": ("a.mtx", HEADER + "3 3 2\n1 1 1.0\n4 2 1.0\n", "mtx", 4, "Row index out of bounds"),
    "mm bad value": ("a.mtx", HEADER + "3 3 2\n1 1 1.0\n2 2 x\n", "mtx", 4, "Invalid floating-point"),
    "mm truncated": ("a.mtx", HEADER + "3 3 3\n1 1 1.0\n2 2 1.0\n", "mtx", None, "Truncated"),
    "mm no banner": ("a.mtx", "3 3 1\n1 1 1.0\n", "mtx", 1, "banner"),
    "mm empty": ("a.mtx", "", "mtx", None, "empty file"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_inputs_name_file_and_line(tmp_path, case):
    name, text, reader, line, message = MALFORMED[case]
    path = tmp_path / name
    path.write_text(text)
    read = {"tri0": lambda p: read_triplets(p, symmetric=True), "tri": read_cholmod_triplets, "mtx": read_mtx}[reader]
    where = re.escape(f"{path}:{line}:" if line is not None else f"{path}:")
    with pytest.raises(MalformedFileError, match=f"^{where}.*{message}") as info:
        read(path)
    assert info.value.line == line
    assert "\n" not in str(info.value)


def test_mm_nan_is_dataset_error(tmp_path):
    path = tmp_path / "n.mtx"
    path.write_text(HEADER + "3 3 2\n1 1 1.0\n3 2 nan\n")
    with pytest.raises(DatasetError, match=re.escape(str(path)) + r".*non-finite value nan at entry \(3, 2\)"):
        read_mtx(path)


def test_missing_file_and_complex(tmp_path):
    with pytest.raises(DatasetError, match="no such file"):
        read_mtx(tmp_path / "missing.mtx")
    path = tmp_path / "c.mtx"
    path.write_text("%%MatrixMarket matrix coordinate complex general\n2 2 1\n1 1 1.0 2.0\n")
    with pytest.raises(DatasetError, match="complex"):
        read_mtx(path)


# ----------------------------------------------------------------------------- BCSR

@pytest.mark.parametrize("n", [23, 24, 1])
@pytest.mark.parametrize("bs", [1, 2, 3, 5, 7, 32])
def test_bcsr_exact(fresh_seed, n, bs):
    a = random_sparse(n, n, 0.2, fresh_seed + bs) + sp.eye_array(n)
    m = to_bcsr(a, bs)
    n_padded = math.ceil(n / bs) * bs
    assert m.n == n and m.bs == bs and m.bsr.blocksize == (bs, bs) and m.n_padded == n_padded
    padded = np.zeros((n_padded, n_padded))
    padded[:n, :n] = a.toarray()
    np.testing.assert_array_equal(m.bsr.toarray(), padded)
    x = np.random.default_rng(fresh_seed).standard_normal(n)
    y = m.bsr @ m.padded_vector(x)
    np.testing.assert_allclose(m.unpadded(y), a @ x, rtol=1e-12, atol=1e-12)
    assert np.all(y[n:] == 0)
    np.testing.assert_allclose(m.matvec(x), a @ x, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(m.to_csr().toarray(), a.toarray())
    # Block counts against a direct count of the occupied blocks.
    occupied = {(i // bs, j // bs) for i, j in zip(*a.nonzero())}
    assert m.nnzb == len(occupied)
    assert m.nnzb_lower == sum(1 for i, j in occupied if j <= i)
    assert m.fill == pytest.approx(len(occupied) * bs * bs / a.nnz)
    facts = m.describe()
    assert facts["nnzb"] == m.nnzb and facts["padded"] == (n_padded != n) and facts["nnz"] == a.nnz


def test_bcsr_validation(fresh_seed):
    a = random_sparse(6, 6, 0.5, fresh_seed)
    for bad in (0, -2, 1.5, True, "3"):
        with pytest.raises(DatasetError, match="block size"):
            to_bcsr(a, bad)
    with pytest.raises(DatasetError, match="square"):
        to_bcsr(random_sparse(6, 5, 0.5, fresh_seed), 2)
    with pytest.raises(DatasetError, match="length"):
        to_bcsr(a, 4).padded_vector(np.ones(8))


# ----------------------------------------------------------------------------- stand-ins

SMALL = {"gt01r": 0.05, "raefsky4": 0.04, "bmw7st_1": 0.01, "pwtk": 0.01, "rm07r": 0.005, "audikw_1": 0.002}


@pytest.mark.parametrize("name", sorted(SMALL))
def test_standin_matches_table(fresh_seed, name):
    spec = SUITESPARSE[name]
    scale = SMALL[name]
    m = load(f"{name}@{scale}", seed=fresh_seed)
    assert isinstance(m, BlockMatrix) and m.bs == spec.bs
    n, block_rows = standin_size(name, scale)
    assert m.n == n and m.block_rows == block_rows
    assert m.n % spec.bs == spec.n % spec.bs  # bmw7st_1 and pwtk stay padded
    assert block_rows == pytest.approx(spec.block_rows * scale, rel=0.02)
    # Published blocks/row: the stored triangle's for symmetric matrices, to 1 %.
    counted = m.nnzb_lower if spec.symmetric else m.nnzb
    assert counted / m.block_rows == pytest.approx(spec.nnzb / spec.block_rows, rel=0.01)
    assert m.fill == pytest.approx(spec.fill if spec.fill > 1 else 1.0, rel=0.03)
    assert m.nnz / m.n == pytest.approx(spec.nnz / spec.n, rel=0.03)
    # FEM-like locality: block columns near the block row (uniform would average block_rows / 3).
    rows = np.repeat(np.arange(m.block_rows), np.diff(m.bsr.indptr))
    assert np.mean(np.abs(m.bsr.indices - rows)) < 0.2 * m.block_rows
    keys = rows * m.block_rows + m.bsr.indices
    i = np.arange(1, m.block_rows)
    adjacent = np.isin(i * m.block_rows + i - 1, keys) | np.isin((i - 1) * m.block_rows + i, keys)
    assert adjacent.mean() > 0.75  # mesh neighbours (nearly) always couple
    assert np.all(np.diff(m.bsr.indptr) >= 1) and m.bsr.has_sorted_indices
    a = m.to_csr().toarray()
    assert np.all(m.bsr.toarray()[m.n:] == 0) and np.all(m.bsr.toarray()[:, m.n:] == 0)
    assert np.all(np.diag(a) > 0)
    pattern = sp.csr_array((np.ones(m.nnzb), m.bsr.indices, m.bsr.indptr), shape=(m.block_rows,) * 2)
    pattern.setdiag(0)
    pattern.eliminate_zeros()
    mirrored = (pattern * pattern.T).nnz / pattern.nnz
    if spec.symmetric:
        np.testing.assert_array_equal(a, a.T)
        assert mirrored == 1.0
        np.linalg.cholesky(a)  # SPD
    else:
        assert 0.85 <= mirrored <= 0.95
        assert np.abs(a - a.T).max() > 0.1  # unsymmetric values
        off = a - np.diag(np.diag(a))
        assert np.all(np.abs(np.diag(a)) > np.abs(off).sum(axis=1))  # diagonally dominant: nonsingular


def test_standin_deterministic_and_seeded(fresh_seed):
    a = standin("pwtk", 0.005, fresh_seed)
    b = standin("pwtk", 0.005, fresh_seed)
    c = standin("pwtk", 0.005, fresh_seed + 1)
    np.testing.assert_array_equal(a.bsr.indices, b.bsr.indices)
    np.testing.assert_array_equal(a.bsr.data, b.bsr.data)
    assert not np.array_equal(a.bsr.indices, c.bsr.indices)
    assert a.nnzb_lower == c.nnzb_lower  # exact block count, whatever the seed


def test_standin_lower_triangle_is_published_count(fresh_seed):
    m = standin("audikw_1", 0.002, fresh_seed)
    low = m.lower_triangle()
    assert low.nnzb == m.nnzb_lower
    np.testing.assert_array_equal(low.to_csr().toarray(), np.tril(m.to_csr().toarray()))


def test_standin_too_small():
    with pytest.raises(DatasetError, match="too few"):
        standin("gt01r", 0.001, 0)


def test_registry_entries():
    names = {d.name for d in list_datasets("matrix")}
    assert set(SUITESPARSE) | {"bcsstk01"} | {f"block-sweep-bs{b}" for b in SWEEP_BLOCK_SIZES} <= names
    for name, spec in SUITESPARSE.items():
        d = get_dataset(name)
        assert d.remote.url == f"https://sparse.tamu.edu/MM/{spec.group}/{spec.name}.tar.gz"
        assert d.remote.filename == f"{spec.name}.tar.gz" and d.remote.sha256 is None
        assert d.facts["block_rows"] == math.ceil(spec.n / spec.bs)
        assert 0 < d.default_scale <= 1
    assert get_dataset("rm07r").facts["block_rows"] == 54_527
    assert get_dataset("rm07r").facts["blocks_per_row"] == pytest.approx(27.6, abs=0.05)
    assert get_dataset("audikw_1").facts["fill"] == pytest.approx(1.0, abs=1e-3)


def test_default_scales_are_quick(fresh_seed):
    for name in SUITESPARSE:
        d = get_dataset(name)
        m = d.standin(d.default_scale, fresh_seed)
        assert 1 << 20 <= m.values_bytes <= 8 << 20


# ----------------------------------------------------------------------------- block-size sweep

def test_block_sweep_constant_footprint(fresh_seed):
    scale = 1 / 64  # 4 MiB of block values
    sizes = []
    for bs in SWEEP_BLOCK_SIZES:
        m = load(f"block-sweep-bs{bs}@{scale}", seed=fresh_seed)
        assert m.bs == bs and m.fill == 1.0 and m.symmetric
        assert m.values_bytes == pytest.approx((256 << 20) * scale, rel=0.005)
        assert m.blocks_per_row == pytest.approx(15, rel=0.02)
        sizes.append(m.block_rows)
    assert sizes == sorted(sizes, reverse=True) and sizes[0] > 100 * sizes[-1]
    m = block_sweep(4, scale, fresh_seed)
    a = m.to_csr()
    assert abs(a - a.T).max() == 0
    diag = a.diagonal()
    assert np.all(diag > abs(a).sum(axis=1) - diag)  # SPD by strict diagonal dominance


def test_to_csr_cuts_off_entries_in_the_padding(fresh_seed):
    """The padding is empty by construction; a BlockMatrix built with entries there still gives
    only its n x n part (the slow path), and the fast path agrees where the padding is empty."""
    rng = np.random.default_rng(fresh_seed)
    dense = rng.standard_normal((9, 9)) * (rng.random((9, 9)) < 0.4)
    dense[8, 8] = dense[2, 8] = 1.5  # row and column 8 lie in the padding of n = 8
    m = BlockMatrix(sp.bsr_array(dense, blocksize=(3, 3)), n=8, bs=3)
    np.testing.assert_array_equal(m.to_csr().toarray(), dense[:8, :8])
    dense[8, :] = dense[:, 8] = 0.0
    empty = BlockMatrix(sp.bsr_array(dense, blocksize=(3, 3)), n=8, bs=3)
    csr = empty.to_csr()
    assert csr.shape == (8, 8) and csr.has_sorted_indices and np.all(csr.data != 0)
    np.testing.assert_array_equal(csr.toarray(), dense[:8, :8])


def test_writer_of_registry_writes_blockmatrix(tmp_path, fresh_seed):
    m = standin("gt01r", 0.05, fresh_seed)
    path: Path = tmp_path / "g.mtx"
    get_dataset("gt01r").write(m, path)
    assert "general" in path.read_text().splitlines()[0]
    np.testing.assert_array_equal(read_mtx(path).toarray(), m.to_csr().toarray())
