"""Bad dataset input through the real ``portabench`` entry: one-line errors (exit 2, the file
and what is wrong, no traceback) or one warning naming the file and what was assumed."""

from __future__ import annotations

import gzip
import json
import warnings
from pathlib import Path

import numpy as np
import pytest

from portabench.datasets import cache
from portabench.datasets.errors import (BlockPaddingWarning, DatasetWarning, IndexBaseWarning,
                                        PatternMatrixWarning)
from portabench.harness.commands.cli import main
from portabench.datasets import memory

from test_cli import _one_line_error


def _tns_lines(rng: np.random.Generator, dims: tuple[int, ...], nnz: int, base: int = 1) -> list[str]:
    """Distinct random coordinates (``base``-based) and non-integer values, one nonzero a line;
    never the coordinate of every mode's largest index (a test may add it)."""
    flat = rng.choice(int(np.prod(dims)) - 1, size=nnz, replace=False)
    coords = np.column_stack(np.unravel_index(flat, dims)) + base
    values = rng.uniform(0.5, 9.5, nnz)
    return [" ".join(map(str, c)) + f" {v!r}" for c, v in zip(coords.tolist(), values.tolist())]


def _dataset_warnings(argv: list[str]) -> tuple[int, list[warnings.WarningMessage]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        code = main(argv)
    return code, [w for w in caught if issubclass(w.category, DatasetWarning)]


# --- 1. a mode too large for int32 indices or for this machine's memory ------------------------

@pytest.mark.parametrize("kernel", ["mttkrp", "phi"])
def test_an_index_beyond_int32_is_named_before_anything_is_allocated(tmp_path, capsys, fresh_seed, kernel):
    rng = np.random.default_rng(fresh_seed)
    lines = _tns_lines(rng, (9, 7, 11), 40)
    row, mode = int(rng.integers(len(lines))), int(rng.integers(3))
    fields = lines[row].split()
    fields[mode] = str(2**40 + 1)
    lines[row] = " ".join(fields)
    big = tmp_path / "big.tns"
    big.write_text("\n".join(lines) + "\n")
    assert main(["verify", "--kernel", kernel, "--tensor", str(big), "--quiet", "--seed", str(fresh_seed)]) == 2
    _one_line_error(capsys, f"{big}:{row + 1}:", f"mode-{mode + 1} index {2**40 + 1}", "int32")


def test_a_mode_too_large_for_memory_is_named(tmp_path, capsys, fresh_seed, monkeypatch):
    rng = np.random.default_rng(fresh_seed)
    lines = _tns_lines(rng, (6, 8, 5, 7), 30)
    fields = lines[-1].split()
    large = int(rng.integers(200_000, 400_000))
    fields[1] = str(large)
    lines[-1] = " ".join(fields)
    wide = tmp_path / "wide.tns"
    wide.write_text("\n".join(lines) + "\n")
    monkeypatch.setattr(memory, "available_host_memory_bytes", lambda: 1 << 20)  # 1 MiB: 8 bytes x 200 000 is more
    assert main(["verify", "--kernel", "mttkrp", "--tensor", str(wide), "--quiet"]) == 2
    _one_line_error(capsys, f"{wide}:{len(lines)}:", f"mode-2 index {large}", "memory", "GiB is available")


@pytest.mark.parametrize("kernel", ["mttkrp", "phi"])
def test_factor_matrices_too_large_for_memory_are_refused(tmp_path, capsys, fresh_seed, monkeypatch, kernel):
    """A mode that passes the reader (one value per index fits) but not at the rank asked for."""
    rng = np.random.default_rng(fresh_seed)
    lines = _tns_lines(rng, (6, 8, 5), 30)
    large = int(rng.integers(100_000, 200_000))
    lines.append(f"{large} 1 1 0.75")
    wide = tmp_path / "wide.tns"
    wide.write_text("\n".join(lines) + "\n")
    monkeypatch.setattr(memory, "available_host_memory_bytes", lambda: 4 << 20)  # 8 B x 200 000 fits, x 16 x 4 does not
    assert main(["verify", "--kernel", kernel, "--tensor", str(wide), "--quiet", "--rank", "16"]) == 2
    _one_line_error(capsys, f"{kernel}: the tensor's mode 0 (dimension {large})", "at rank 16", "--rank")


# --- 2. a damaged .tns.gz ----------------------------------------------------------------------

def test_a_truncated_gzip_tensor_is_named(tmp_path, capsys, fresh_seed):
    text = "\n".join(_tns_lines(np.random.default_rng(fresh_seed), (30, 40, 50), 3000)) + "\n"
    packed = gzip.compress(text.encode())
    cut = tmp_path / "cut.tns.gz"
    cut.write_bytes(packed[: len(packed) * 2 // 3])
    assert main(["verify", "--kernel", "mttkrp", "--tensor", str(cut), "--quiet"]) == 2
    _one_line_error(capsys, str(cut), "truncated gzip file")


def test_a_gz_that_is_not_gzip_is_named(tmp_path, capsys, fresh_seed):
    plain = tmp_path / "plain.tns.gz"
    plain.write_text("\n".join(_tns_lines(np.random.default_rng(fresh_seed), (5, 6, 7), 20)) + "\n")
    assert main(["verify", "--kernel", "phi", "--tensor", str(plain), "--quiet"]) == 2
    _one_line_error(capsys, str(plain), "not gzip-compressed", "rename it without .gz")


# --- 3. datasets register ----------------------------------------------------------------------

@pytest.fixture
def data_dir(tmp_path, monkeypatch) -> Path:
    root = tmp_path / "cache"
    monkeypatch.setenv(cache.DATA_ENV, str(root))
    return root


def test_register_an_uncompressed_tensor_then_load_it(tmp_path, capsys, data_dir, fresh_seed):
    rng = np.random.default_rng(fresh_seed)
    dims = (11, 24, 13, 17)
    lines = _tns_lines(rng, dims, 150)
    lines.append(" ".join(map(str, dims)) + " 2.5")  # every mode's largest index, so the dims are known
    plain = tmp_path / "plain.tns"
    plain.write_text("\n".join(lines) + "\n")
    assert main(["datasets", "register", "uber", str(plain)]) == 0
    stored = data_dir / "uber" / "uber.tns"
    assert str(stored) in capsys.readouterr().out
    assert stored.read_bytes() == plain.read_bytes() and not (data_dir / "uber" / "uber.tns.gz").exists()
    assert json.loads((data_dir / cache.LEDGER).read_text())["uber"] == cache.sha256(plain)
    assert main(["datasets", "info", "uber", "--stats"]) == 0
    out = capsys.readouterr().out
    assert f"{stored} (present)" in out and f"dims: {dims}" in out and "nnz: 151" in out


def test_register_stores_a_gzip_copy_under_the_gzip_name_whatever_its_name(tmp_path, capsys, data_dir, fresh_seed):
    rng = np.random.default_rng(fresh_seed)
    text = "\n".join(_tns_lines(rng, (8, 9, 10), 60) + ["8 9 10 1.25"]) + "\n"
    misnamed = tmp_path / "nell.tns"  # gzip data under a plain name
    misnamed.write_bytes(gzip.compress(text.encode()))
    assert main(["datasets", "register", "nell-2", str(misnamed)]) == 0
    assert (data_dir / "nell-2" / "nell-2.tns.gz").read_bytes() == misnamed.read_bytes()
    assert main(["datasets", "info", "nell-2", "--stats"]) == 0
    assert "nnz: 61" in capsys.readouterr().out


def _nothing_stored(data_dir: Path) -> bool:
    return not (data_dir / cache.LEDGER).exists() and not any(p.is_file() for p in data_dir.rglob("*"))


def test_register_refuses_a_ragged_tensor(tmp_path, capsys, data_dir, fresh_seed):
    rng = np.random.default_rng(fresh_seed)
    lines = _tns_lines(rng, (12, 9, 28), 50)
    row = int(rng.integers(1, len(lines)))
    lines[row] += f" {int(rng.integers(1, 9))}"  # one field too many
    ragged = tmp_path / "ragged.tns"
    ragged.write_text("\n".join(lines) + "\n")
    assert main(["datasets", "register", "nell-2", str(ragged)]) == 2
    _one_line_error(capsys, f"{ragged}:{row + 1}:", "expected 3 indices and a value, got 5 fields", "not registered")
    assert _nothing_stored(data_dir)


def test_register_refuses_a_tensor_of_another_order(tmp_path, capsys, data_dir, fresh_seed):
    other = tmp_path / "four.tns"
    other.write_text("\n".join(_tns_lines(np.random.default_rng(fresh_seed), (5, 6, 7, 8), 30)) + "\n")
    assert main(["datasets", "register", "nell-2", str(other)]) == 2
    _one_line_error(capsys, str(other), "order-4", "nell-2 is order 3")
    assert _nothing_stored(data_dir)


def _mtx_text(rng: np.random.Generator, n: int, field: str = "real") -> str:
    entries = sorted({(int(rng.integers(1, n + 1)), int(rng.integers(1, n + 1))) for _ in range(3 * n)}
                     | {(i, i) for i in range(1, n + 1)})
    body = [f"{r} {c}" + ("" if field == "pattern" else f" {float(rng.uniform(-4, 4))!r}") for r, c in entries]
    return f"%%MatrixMarket matrix coordinate {field} general\n{n} {n} {len(entries)}\n" + "\n".join(body) + "\n"


def test_register_an_uncompressed_matrix_then_load_it(tmp_path, capsys, data_dir, fresh_seed):
    rng = np.random.default_rng(fresh_seed)
    n = int(rng.integers(40, 80))
    mtx = tmp_path / "downloaded.mtx"
    mtx.write_text(_mtx_text(rng, n))
    assert main(["datasets", "register", "gt01r", str(mtx)]) == 0
    stored = data_dir / "gt01r" / "GT01R.mtx"
    assert stored.read_bytes() == mtx.read_bytes()
    assert main(["datasets", "info", "gt01r", "--stats"]) == 0
    out = capsys.readouterr().out
    assert f"{stored} (present)" in out and f"\n  n: {n}\n" in out


def test_register_refuses_a_malformed_matrix(tmp_path, capsys, data_dir, fresh_seed):
    rng = np.random.default_rng(fresh_seed)
    lines = _mtx_text(rng, 30).splitlines()
    row = int(rng.integers(3, len(lines)))
    lines[row] = lines[row].split()[0]  # an entry without its column and value
    bad = tmp_path / "bad.mtx"
    bad.write_text("\n".join(lines) + "\n")
    assert main(["datasets", "register", "raefsky4", str(bad)]) == 2
    _one_line_error(capsys, str(bad), "not a valid Matrix Market file", "not registered as raefsky4")
    assert _nothing_stored(data_dir)
    tensor = tmp_path / "tensor.tns.gz"  # not Matrix Market at all
    tensor.write_bytes(gzip.compress("\n".join(_tns_lines(rng, (4, 5, 6), 10)).encode()))
    assert main(["datasets", "register", "raefsky4", str(tensor)]) == 2
    _one_line_error(capsys, str(tensor), "not registered as raefsky4")
    assert _nothing_stored(data_dir)


# --- 4. a mode read as 0-based by SPLATT's per-mode rule ----------------------------------------

def test_a_single_zero_index_in_one_mode_is_warned_once(tmp_path, capsys, fresh_seed):
    rng = np.random.default_rng(fresh_seed)
    lines = _tns_lines(rng, (6, 7, 8), 40)
    row, mode = int(rng.integers(len(lines))), int(rng.integers(3))
    fields = lines[row].split()
    fields[mode] = "0"
    lines[row] = " ".join(fields)
    mixed = tmp_path / "mixed.tns"
    mixed.write_text("\n".join(lines) + "\n")
    code, caught = _dataset_warnings(["verify", "--kernel", "mttkrp", "--tensor", str(mixed), "--quiet",
                                      "--variant", "numba-segmented", "--rank", "4"])
    assert code == 0, capsys.readouterr()
    assert len(caught) == 1 and caught[0].category is IndexBaseWarning, [str(w.message) for w in caught]
    message = str(caught[0].message)
    assert "\n" not in message and message.startswith(f"{mixed}:{row + 1}: mode-{mode + 1} is read as 0-based")


# --- 5. accepted with a notice: a pattern-only matrix, a block size that does not divide n ---------

def test_pattern_matrix_and_padding_are_noticed(tmp_path, capsys, fresh_seed):
    rng = np.random.default_rng(fresh_seed)
    bs = int(rng.integers(3, 6))
    n = bs * int(rng.integers(8, 15)) + int(rng.integers(1, bs))
    matrix = tmp_path / "F.mtx"
    matrix.write_text(_mtx_text(rng, n, "pattern"))
    code, caught = _dataset_warnings(["verify", "--kernel", "bcsr", "--matrix", str(matrix), "--block-size", str(bs),
                                      "--quiet", "--variant", "scipy-bsr"])
    assert code == 0, capsys.readouterr()
    by_category = {w.category: str(w.message) for w in caught}
    assert len(caught) == 2 and set(by_category) == {PatternMatrixWarning, BlockPaddingWarning}, by_category
    assert by_category[PatternMatrixWarning].startswith(f"{matrix}: a pattern-only Matrix Market file")
    pad = -n % bs
    assert f"n = {n} is not a multiple of the block size {bs}: padded to {n + pad}" in by_category[BlockPaddingWarning]
    assert all("\n" not in m for m in by_category.values())
    # A block size that divides n, and a file with values: no notice.
    matrix.write_text(_mtx_text(rng, n - n % bs, "real"))
    code, caught = _dataset_warnings(["verify", "--kernel", "bcsr", "--matrix", str(matrix), "--block-size", str(bs),
                                      "--quiet", "--variant", "scipy-bsr"])
    assert code == 0 and caught == []
