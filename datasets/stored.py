"""Arrays kept on disk between processes: generated inputs and oracle results, built once.

asv runs every parameter combination in a fresh process, so whatever a combination builds from
its parameters alone (a batch of systems, the float64 oracle's answer and error bound) would be
built again by the next variant, the next process and the next commit. ``stored_arrays`` keeps
it in the dataset cache (``$PORTABENCH_DATA/derived/<kind>/``), under a digest of its key and of
the source code that builds it, so a change of that code never serves an old entry.

An entry is never trusted: it is read back only if its recorded key equals the one asked for and
every array's SHA-256 matches the one recorded beside it; anything else (a truncated file, a
planted or stale one) is rebuilt and overwritten. Writes are atomic (a temporary file renamed),
so concurrent processes see a whole entry or none.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import warnings
import zipfile
from pathlib import Path
from typing import Callable, Iterable

import numpy as np

from .cache import cache_dir
from .errors import DatasetWarning

META = "__portabench_meta__"


@functools.cache
def source_digest(files: tuple[Path, ...]) -> str:
    """A digest of these source files' bytes (the code version an entry was built by)."""
    digest = hashlib.sha256()
    for path in sorted(files):
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def package_sources(*modules: object) -> tuple[Path, ...]:
    """Every ``.py`` file of these modules' packages (a module counts its whole folder)."""
    files: set[Path] = set()
    for module in modules:
        folder = Path(getattr(module, "__file__")).parent
        files.update(folder.rglob("*.py"))
    return tuple(sorted(files))


def _checksum(array: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(array).view(np.uint8).reshape(-1)).hexdigest()


def entry_path(kind: str, key: dict, sources: Iterable[Path]) -> Path:
    """Where the entry of ``key`` built by ``sources`` lives."""
    text = json.dumps({"key": key, "code": source_digest(tuple(sources))}, sort_keys=True, default=str)
    return cache_dir() / "derived" / kind / f"{hashlib.sha256(text.encode()).hexdigest()[:32]}.npz"


def read_npz(path: Path) -> dict[str, np.ndarray]:
    """Every array of an ``np.savez`` file, read straight from the file: NumPy reads an archive
    member through ``zipfile`` in small chunks with a CRC each (slow for a stand-in of gigabytes), while
    a stored (uncompressed) member is one contiguous ``.npy`` that ``read_array`` reads in one
    go from a real file. Raises OSError, ValueError or zipfile.BadZipFile on a damaged file."""
    arrays = {}
    with zipfile.ZipFile(path) as archive, open(path, "rb") as raw:
        for info in archive.infolist():
            name = info.filename.removesuffix(".npy")
            if info.compress_type != zipfile.ZIP_STORED:
                with archive.open(info) as member:
                    arrays[name] = np.lib.format.read_array(member, allow_pickle=False)
                continue
            raw.seek(info.header_offset)
            header = raw.read(30)  # the local file header; its name and extra field come next
            if len(header) != 30 or header[:4] != b"PK\x03\x04":
                raise ValueError(f"{info.filename}: no local header")
            name_length, extra_length = int.from_bytes(header[26:28], "little"), int.from_bytes(header[28:30], "little")
            raw.seek(info.header_offset + 30 + name_length + extra_length)
            arrays[name] = np.lib.format.read_array(raw, allow_pickle=False)
    return arrays


def _load(path: Path, key: dict) -> dict[str, np.ndarray] | None:
    """The entry's arrays if it is whole, of this key and unaltered; else None (and why, as a warning)."""
    if not path.is_file():
        return None
    try:
        data = read_npz(path)
        meta = json.loads(str(data[META]))
        arrays = {name: data[name] for name in meta["checksums"]}
        if meta["key"] != json.loads(json.dumps(key, sort_keys=True, default=str)):
            raise ValueError("it was stored under another key")
        bad = [name for name, digest in meta["checksums"].items() if _checksum(arrays[name]) != digest]
        if bad:
            raise ValueError(f"{', '.join(bad)} differ from their recorded checksums")
        return arrays
    except (OSError, ValueError, KeyError, TypeError, EOFError, zipfile.BadZipFile) as exc:
        warnings.warn(f"{path}: stored entry not used ({exc}); building it again", DatasetWarning, stacklevel=3)
        return None


def _save(path: Path, key: dict, arrays: dict[str, np.ndarray]) -> None:
    tmp = path.with_name(f"{path.stem}.{os.getpid()}.tmp.npz")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        meta = {"key": key, "checksums": {name: _checksum(a) for name, a in arrays.items()}}
        np.savez(tmp, **{META: json.dumps(meta, sort_keys=True, default=str)}, **arrays)
        tmp.replace(path)
    except OSError:  # an unwritable cache keeps no copy; the caller has its arrays
        tmp.unlink(missing_ok=True)


def stored_arrays(kind: str, key: dict, sources: Iterable[Path], build: Callable[[], dict[str, np.ndarray]],
                  max_bytes: int = 1 << 30) -> dict[str, np.ndarray]:
    """``build()``'s arrays, from the store when an intact entry of ``key`` exists; what is built is
    stored unless it exceeds ``max_bytes`` (a file larger than that reads slower than most builds)."""
    path = entry_path(kind, key, sources)
    arrays = _load(path, key)
    if arrays is None:
        arrays = {name: np.asarray(a) for name, a in build().items()}
        if sum(a.nbytes for a in arrays.values()) <= max_bytes:
            _save(path, key, arrays)
    return arrays
