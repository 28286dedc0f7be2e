"""Downloads and the cache, without the network: a local HTTP server plays the mirror."""

from __future__ import annotations

import functools
import http.server
import json
import threading
from pathlib import Path

import numpy as np
import pytest

from portabench import datasets
from portabench.datasets import cache
from portabench.datasets.errors import DatasetError, DatasetUnavailableError
from portabench.datasets.registry import Dataset, Remote
from portabench.datasets.tensors import SparseTensor
from portabench.datasets.tensors.tns import write_tns
from portabench.harness.commands.cli import main


@pytest.fixture
def data_dir(tmp_path, monkeypatch) -> Path:
    root = tmp_path / "cache"
    monkeypatch.setenv(cache.DATA_ENV, str(root))
    return root


@pytest.fixture
def mirror(tmp_path, monkeypatch):
    """A local HTTP server over tmp_path/mirror, set as $PORTABENCH_MIRROR; yields that folder."""
    folder = tmp_path / "mirror"
    folder.mkdir()
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(folder))
    handler.log_message = lambda *a, **k: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv(cache.MIRROR_ENV, f"http://127.0.0.1:{server.server_address[1]}/")
    yield folder
    server.shutdown()
    server.server_close()


def _serve_nips(mirror: Path, seed: int) -> SparseTensor:
    """A small random tensor served where the mirror would hold FROSTT's nips.tns.gz."""
    rng = np.random.default_rng(seed)
    dims = (11, 13, 17, 5)
    flat = rng.choice(int(np.prod(dims)), size=200, replace=False)
    tensor = SparseTensor(dims, np.column_stack(np.unravel_index(flat, dims)), rng.integers(1, 9, 200).astype(float))
    write_tns(tensor, mirror / "frostt" / "frostt_data" / "nips" / "nips.tns.gz")
    return tensor


def test_fetch_records_the_checksum_then_loads(data_dir, mirror, fresh_seed):
    served = _serve_nips(mirror, fresh_seed)
    nips = datasets.get_dataset("nips")
    with pytest.raises(DatasetUnavailableError, match="portabench datasets fetch nips"):
        datasets.load("nips")  # not fetched, and load does not download by default
    path = datasets.fetch(nips, progress=False)
    assert path == data_dir / "nips" / "nips.tns.gz"
    ledger = json.loads((data_dir / cache.LEDGER).read_text())
    assert ledger["nips"] == cache.sha256(path)
    assert datasets.load("nips").equals(served)
    assert datasets.fetch(nips, progress=False) == path  # cached: no second download


def test_a_changed_cached_file_fails_its_checksum(data_dir, mirror, fresh_seed):
    _serve_nips(mirror, fresh_seed)
    path = datasets.fetch(datasets.get_dataset("nips"), progress=False)
    path.write_bytes(path.read_bytes() + b"\0")
    with pytest.raises(DatasetError, match="does not match the expected"):
        datasets.load("nips")


def test_published_checksum_is_enforced_on_download(data_dir, mirror, fresh_seed):
    _serve_nips(mirror, fresh_seed)
    real = datasets.get_dataset("nips")
    wrong = Dataset(name="nips-wrong-sum", kind="tensor", summary="test", remote=Remote(
        url=real.remote.url, filename="nips.tns.gz", sha256="0" * 64))
    with pytest.raises(DatasetError, match="failed its checksum"):
        datasets.fetch(wrong, progress=False)
    assert not (data_dir / "nips-wrong-sum" / "nips.tns.gz").exists()


def test_offline_gives_where_to_put_the_file(data_dir, monkeypatch):
    monkeypatch.setenv(cache.MIRROR_ENV, "http://127.0.0.1:9/")  # nothing listens on the discard port
    with pytest.raises(DatasetUnavailableError) as info:
        datasets.fetch(datasets.get_dataset("uber"), progress=False)
    message = str(info.value)
    assert str(data_dir / "uber" / "uber.tns.gz") in message
    assert "portabench datasets register uber FILE" in message and "uber@SCALE" in message


def test_register_a_copy_obtained_by_hand(data_dir, tmp_path, fresh_seed):
    rng = np.random.default_rng(fresh_seed)
    dims = (6, 24, 7, 32)
    # A .tns file has no header: its dims are the largest indices, so the last coordinate
    # (every mode's largest index) is always among the nonzeros (else ~3 % of seeds fail).
    last = int(np.prod(dims)) - 1
    flat = np.append(rng.choice(last, size=119, replace=False), last)
    tensor = SparseTensor(dims, np.column_stack(np.unravel_index(flat, dims)), rng.integers(1, 5, 120).astype(float))
    copy = write_tns(tensor, tmp_path / "elsewhere" / "chicago.tns.gz")
    chicago = datasets.get_dataset("chicago-crime-comm")
    target = datasets.register_local(chicago, copy)
    assert target == data_dir / "chicago-crime-comm" / "chicago-crime-comm.tns.gz"
    assert datasets.load("chicago-crime-comm").equals(tensor)
    # The recorded checksum now guards the cache: another file cannot be registered over it.
    other = write_tns(SparseTensor(dims, tensor.coords, tensor.values + 1), tmp_path / "other.tns.gz")
    with pytest.raises(DatasetError, match="does not match the expected"):
        datasets.register_local(chicago, other)


def test_specs_and_names():
    with pytest.raises(DatasetError, match="bad scale"):
        datasets.parse_spec("nips@big")
    with pytest.raises(DatasetError, match="must be positive"):
        datasets.parse_spec("nips@0")
    with pytest.raises(KeyError, match="unknown dataset 'nipps'"):
        datasets.parse_spec("nipps")
    with pytest.raises(DatasetError, match="no synthetic stand-in"):
        datasets.parse_spec("splatt-med@0.5")
    assert datasets.parse_spec("nips@0.25")[1] == 0.25


def test_every_dataset_is_loadable_from_its_quick_spec_or_file():
    """Each registry entry has real data or a stand-in, and names that the CLI accepts."""
    for d in datasets.list_datasets():
        assert d.standin or d.shipped or d.remote, d.name
        assert d.default_scale > 0
        if d.shipped:
            assert cache.cached_path(d).is_file(), d.name


# --- the command line ----------------------------------------------------------------------

def test_cli_list_info_generate(tmp_path, capsys, data_dir):
    assert main(["datasets", "list"]) == 0
    listed = capsys.readouterr().out
    for name in ("lbnl-network", "nips", "splatt-med"):
        assert name in listed
    assert main(["datasets", "info", "nips"]) == 0
    info = capsys.readouterr().out
    assert "3101609" in info and "not fetched" in info
    out = tmp_path / "lbnl.tns"
    assert main(["datasets", "generate", "lbnl-network", "--scale", "0.002", "--seed", "3", "--out", str(out)]) == 0
    tensor = datasets.tensors.tns.read_tns(out)
    assert tensor.order == 5 and tensor.nnz == round(0.002 * 1_698_825)
    assert main(["datasets", "info", "splatt-med", "--stats"]) == 0
    assert "100000" in capsys.readouterr().out


def test_cli_errors_are_one_line(capsys, data_dir, monkeypatch):
    monkeypatch.setenv(cache.MIRROR_ENV, "http://127.0.0.1:9/")
    assert main(["datasets", "fetch", "uber", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("portabench: error: uber could not be downloaded") and err.count("\n") == 1
    assert main(["datasets", "info", "nope"]) == 2
    assert "unknown dataset 'nope'" in capsys.readouterr().err
    assert main(["datasets", "generate", "splatt-med", "--out", "x.tns"]) == 2
    assert "no stand-in" in capsys.readouterr().err


def test_stored_arrays_are_built_once_and_a_damaged_or_planted_entry_is_rebuilt(tmp_path, monkeypatch) -> None:
    """An entry is read back only when whole, of the same key and unaltered; otherwise rebuilt."""
    import numpy as np

    from portabench.datasets import stored

    monkeypatch.setenv("PORTABENCH_DATA", str(tmp_path))
    rng = np.random.default_rng()
    truth = {"reference": rng.standard_normal((50, 7)), "bound": rng.random((50, 7)) + 0.5}
    calls = []

    def build() -> dict:
        calls.append(1)
        return {k: v.copy() for k, v in truth.items()}

    key, sources = {"kernel": "k", "case": "c", "size": 50, "seed": 3}, (Path(stored.__file__),)
    first = stored.stored_arrays("oracle", key, sources, build)
    again = stored.stored_arrays("oracle", key, sources, build)
    assert len(calls) == 1 and all(np.array_equal(again[k], truth[k]) for k in truth)
    path = stored.entry_path("oracle", key, sources)

    # a planted entry: valid format, wrong numbers, under the right name
    planted = {k: v + 1.0 for k, v in first.items()}
    meta = np.load(path, allow_pickle=False)[stored.META]
    np.savez(path, **{stored.META: meta}, **planted)
    with pytest.warns(UserWarning, match="differ from their recorded checksums"):
        rebuilt = stored.stored_arrays("oracle", key, sources, build)
    assert len(calls) == 2 and np.array_equal(rebuilt["bound"], truth["bound"])

    # a truncated file
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    with pytest.warns(UserWarning, match="not used"):
        stored.stored_arrays("oracle", key, sources, build)
    assert len(calls) == 3
    assert np.array_equal(stored.stored_arrays("oracle", key, sources, build)["reference"], truth["reference"])
    assert len(calls) == 3  # the rebuilt entry is good again

    # another key or another code version never reads this entry
    stored.stored_arrays("oracle", {**key, "seed": 4}, sources, build)
    stored.stored_arrays("oracle", key, (Path(stored.__file__), Path(__file__)), build)
    assert len(calls) == 5
