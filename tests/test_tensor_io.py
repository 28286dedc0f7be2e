"""Sparse tensor text files: every shipped dialect, round trips, malformed input, the binary cache."""

from __future__ import annotations

import gzip
import os
import warnings

import numpy as np
import pytest

from portabench.datasets.errors import DatasetError, IndexBaseWarning, MalformedFileError
from portabench.datasets.tensors.text_scan import parse_rows
from portabench.datasets.registry import SHIPPED
from portabench.datasets.tensors import SparseTensor
from portabench.datasets.tensors.tns import CACHE_SUFFIX, read_tns, read_tns_cached, write_tns


def random_tensor(seed: int, dims=(7, 5, 9, 4), nnz: int = 60) -> SparseTensor:
    """Distinct random coordinates with non-integer values (never a constant)."""
    rng = np.random.default_rng(seed)
    flat = rng.choice(int(np.prod(dims)), size=nnz, replace=False)
    coords = np.column_stack(np.unravel_index(flat, dims))
    return SparseTensor(dims, coords, rng.uniform(-3.0, 7.0, nnz))


# --- every shipped dialect ----------------------------------------------------------------

@pytest.mark.parametrize("name, dims, nnz", [
    ("splatt/small.tns", (2, 3, 2), 6),
    ("splatt/small4.tns", (2, 2, 3, 3), 8),
    ("splatt/med.tns", (2425, 10816, 29567), 100_000),
    ("parti/3d_3_8.tns", (3, 3, 3), 8),
    ("parti/3D_12031.tns", (100, 80, 60), 12031),
    ("parti/4d_3_16.tns", (3, 3, 3, 3), 16),
    ("pyttb/sptensor.tns", (5, 4, 3), 18),
    ("genten/C_sptensor.txt", (4, 3, 2), 5),
    ("genten/test_sptensor.txt", (2, 3, 4), 11),
])
def test_shipped_files_parse_to_their_published_shape(name, dims, nnz):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # none of them has duplicates or an ambiguous base
        tensor = read_tns(SHIPPED / name)
    assert tensor.dims == dims and tensor.nnz == nnz
    assert tensor.duplicate_count() == 0


def test_first_entries_match_the_text():
    small = read_tns(SHIPPED / "splatt/small.tns")  # first line "2 2 2 6.0", 1-based
    assert small.values[0] == 6.0 and tuple(small.coords[0]) == (1, 1, 1)
    genten = read_tns(SHIPPED / "genten/C_sptensor.txt")  # 0-based: "0 0 0 1.0"
    assert tuple(genten.coords[0]) == (0, 0, 0) and genten.values[0] == 1.0


def test_one_and_zero_based_twins_are_the_same_tensor():
    assert read_tns(SHIPPED / "pyttb/sptensor.tns").equals(read_tns(SHIPPED / "pyttb/sptensor_0_based.tns"))
    # SPLATT's zero-indexed file is 0-based in its last mode only (detected per mode, and said).
    with pytest.warns(IndexBaseWarning, match="mode-4 is read as 0-based and mode-1, mode-2, mode-3 as 1-based"):
        zero_indexed = read_tns(SHIPPED / "splatt/small4_zeroidx.tns")
    assert read_tns(SHIPPED / "splatt/small4.tns").equals(zero_indexed)


def test_stated_base_overrides_detection(tmp_path):
    path = tmp_path / "t.tns"
    path.write_text("1 2 3 1.5\n2 3 1 2.5\n")
    assert read_tns(path).dims == (2, 3, 3)
    assert read_tns(path, base=0).dims == (3, 4, 4)


# --- round trips ---------------------------------------------------------------------------

@pytest.mark.parametrize("style", ["frostt", "parti", "pyttb", "genten"])
@pytest.mark.parametrize("suffix", [".tns", ".tns.gz"])
def test_write_read_round_trip(tmp_path, fresh_seed, style, suffix):
    tensor = random_tensor(fresh_seed)
    path = write_tns(tensor, tmp_path / f"x{suffix}", style=style)
    back = read_tns(path, base=0 if style == "genten" else 1, dims=tensor.dims)
    assert back.equals(tensor), f"seed {fresh_seed}"
    if suffix.endswith(".gz"):
        with gzip.open(path, "rt") as f:
            assert f.readline()


def test_header_dims_kept_beyond_the_largest_index(tmp_path, fresh_seed):
    tensor = random_tensor(fresh_seed)
    bigger = SparseTensor(tuple(d + 3 for d in tensor.dims), tensor.coords, tensor.values)
    assert read_tns(write_tns(bigger, tmp_path / "x.tns", style="pyttb"), base=1).dims == bigger.dims


def test_ambiguous_base_warns(tmp_path):
    path = tmp_path / "t.tns"
    path.write_text("3\n5 5 5\n2 2 2 1.0\n3 4 2 2.0\n")
    with pytest.warns(UserWarning, match="ambiguous"):
        assert read_tns(path).dims == (5, 5, 5)


# --- duplicates --------------------------------------------------------------------------

def test_duplicates_summed_with_a_warning_or_rejected(tmp_path):
    path = tmp_path / "dup.tns"
    path.write_text("# two entries at (1,2,3)\n1 2 3 1.25\n2 2 2 4.0\n1 2 3 0.5\n")
    with pytest.warns(UserWarning, match="1 duplicate"):
        tensor = read_tns(path)
    assert tensor.nnz == 2
    assert dict(zip(map(tuple, tensor.coords), tensor.values))[(0, 1, 2)] == pytest.approx(1.75)
    with pytest.raises(MalformedFileError, match=r"dup\.tns:4: duplicate coordinate \(first seen on line 2\)"):
        read_tns(path, duplicates="error")


# --- malformed input: each failure mode names the file and line ----------------------------

@pytest.mark.parametrize("text, message", [
    ("1 2 3 1.0\n1 2 4.0\n", r":2: expected 3 indices and a value, got 3 fields"),
    ("1 2 3 1.0\n1 2 3 4 5.0\n", r":2: expected 3 indices and a value, got 5 fields"),
    ("# c\n1 2 3 1.0\n1 x 3 2.0\n", r":3: mode-2 index 'x' is not an integer"),
    ("1 2 3 1.0\n1 2.5 3 2.0\n", r":2: mode-2 index '2.5' is not an integer"),
    ("1 2 3 1.0\n1 2 3 abc\n", r":2: value 'abc' is not a number"),
    ("1 2 3 1.0\n4 2 3 nan\n", r":2: value nan is not finite"),
    ("1 2 3 1.0\n1 -2 3 1.0\n", r":2: mode-2 index -2 is below"),
    ("3\n2 2 2\n1 1 1 1.0\n3 1 1 1.0\n", r":4: mode-1 index 3 is outside the declared dimension 2"),
    ("sptensor\n3\n2 2 2\n3\n1 1 1 1.0\n", r":4: header declares 3 nonzeros, the file has 1"),
    ("sptensor\nthree\n2 2 2\n", r":2: expected the tensor order"),
    ("3\n2 2\n1 1 1 1.0\n", r":2: expected 3 positive dimensions"),
    ("# only a comment\n\n", r": empty file"),
    ("", r": empty file"),
])
def test_malformed_files_name_file_and_line(tmp_path, text, message):
    path = tmp_path / "bad.tns"
    path.write_text(text)
    with pytest.raises(MalformedFileError, match=r"bad\.tns" + message):
        read_tns(path)


def test_declared_dims_are_enforced(tmp_path):
    path = tmp_path / "t.tns"
    path.write_text("1 2 3 1.0\n2 5 1 1.0\n")
    with pytest.raises(MalformedFileError, match=r"t\.tns:2: mode-2 index 5 is outside the declared dimension 4"):
        read_tns(path, dims=(2, 4, 3))
    with pytest.raises(DatasetError, match="2 dimensions declared for an order-3"):
        read_tns(path, dims=(2, 4))


def test_missing_file_and_bad_options(tmp_path):
    with pytest.raises(DatasetError, match="no such file"):
        read_tns(tmp_path / "absent.tns")
    path = tmp_path / "t.tns"
    path.write_text("1 1 1.0\n")
    with pytest.raises(DatasetError, match="duplicates must be"):
        read_tns(path, duplicates="keep")
    with pytest.raises(DatasetError, match="base must be"):
        read_tns(path, base=2)


# --- the binary cache ---------------------------------------------------------------------

def test_binary_cache_is_reused_and_invalidated(tmp_path, fresh_seed):
    tensor = random_tensor(fresh_seed)
    path = write_tns(tensor, tmp_path / "x.tns")
    cached = path.with_name(path.name + CACHE_SUFFIX)
    assert read_tns_cached(path).equals(tensor)
    assert cached.is_file()
    # Reused: damage the text without changing size or mtime, the cache still answers.
    stat = path.stat()
    text = path.read_bytes()
    path.write_bytes(text.replace(b"\n", b"x", 1)[: len(text)])
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert read_tns_cached(path).equals(tensor)
    # Invalidated: a changed file is parsed again.
    other = random_tensor(fresh_seed + 1)
    write_tns(other, path)
    assert read_tns_cached(path).equals(other)


def test_binary_cache_in_a_read_only_folder(tmp_path, fresh_seed):
    tensor = random_tensor(fresh_seed)
    path = write_tns(tensor, tmp_path / "ro" / "x.tns")
    path.parent.chmod(0o555)
    try:
        assert read_tns_cached(path).equals(tensor)
    finally:
        path.parent.chmod(0o755)


def test_sparse_tensor_rejects_bad_arrays():
    with pytest.raises(DatasetError, match="out of range"):
        SparseTensor((2, 2), np.array([[0, 2]]), np.array([1.0]))
    with pytest.raises(DatasetError, match="NaN"):
        SparseTensor((2, 2), np.array([[0, 1]]), np.array([np.nan]))
    with pytest.raises(DatasetError, match="values must have shape"):
        SparseTensor((2, 2), np.array([[0, 1]]), np.array([1.0, 2.0]))


def test_fiber_lengths_against_a_direct_count(fresh_seed):
    tensor = random_tensor(fresh_seed, dims=(3, 4, 6), nnz=40)
    direct = {}
    for i, j, _ in tensor.coords:
        direct[(i, j)] = direct.get((i, j), 0) + 1
    assert sorted(tensor.fiber_lengths(-1)) == sorted(direct.values())
    assert tensor.slice_counts(0).sum() == tensor.nnz


def test_tokenizer_floats_are_exact_in_every_notation(tmp_path, fresh_seed):
    rng = np.random.default_rng(fresh_seed)
    reals = rng.random(400) * 10.0 ** rng.integers(-40, 40, 400) * rng.choice([-1, 1], 400)
    tokens = [f"{x:.17g}" for x in reals] + [f"{x:.6g}" for x in reals] + [f"{x:.3e}" for x in reals] + [
        "0", "-0", "1.", ".5", "+2", "1e5", "1E-5", "007.250", "123456789012345678901234", "0.000000000000000000000123",
        "1e308", "4.9e-324", "2.2250738585072014e-308", "9007199254740993", "0.1", "3.0000000000000004",
    ]
    lines = [f"{k % 3 + 1}\t{k % 5 + 1} {tok}" for k, tok in enumerate(tokens)]
    path = tmp_path / "floats.tns"
    path.write_text("# every notation\n" + "\r\n".join(lines) + "   # trailing comment, no newline")
    coords, values = parse_rows(np.fromfile(path, dtype=np.uint8), 0, 2)  # raw rows: coordinates repeat
    assert len(values) == len(tokens)
    assert np.array_equal(values, np.array([float(t) for t in tokens]))
    assert np.array_equal(coords[:, 0], np.arange(len(tokens)) % 3 + 1)


@pytest.mark.parametrize("line", ["1 2 -3 1.0", "1 2 3 1.0 7", "1 2 3 x", "1 2 3 1e", "1 2 3", "1 2 3 --1", "1 2 3.5 1"])
def test_tokenizer_rejects_what_the_rescan_names(tmp_path, line):
    path = tmp_path / "bad.tns"
    path.write_text(f"1 1 1 2.0\n\n{line}\n")
    assert parse_rows(np.fromfile(path, dtype=np.uint8), 0, 3) is None
    with pytest.raises(MalformedFileError, match=r"bad\.tns:3:"):
        read_tns(path)
