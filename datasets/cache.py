"""Downloads and the local cache of real datasets.

Files live in ``$PORTABENCH_DATA`` (default: the user cache, ``~/.cache/portabench``),
one folder per dataset. Downloads go through pooch (checksum, progress bar, atomic
rename). FROSTT and SuiteSparse publish no checksums, so a registry entry may have
none: the SHA-256 of the first download (or registered copy) is then recorded in
``checksums.json`` in the cache and every later use is checked against it.
``$PORTABENCH_MIRROR`` replaces the hosts' base URLs with a local mirror.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path
from urllib.parse import urlsplit

from .errors import DatasetError, DatasetUnavailableError
from .registry import SHIPPED, Dataset

DATA_ENV = "PORTABENCH_DATA"
MIRROR_ENV = "PORTABENCH_MIRROR"
LEDGER = "checksums.json"


def cache_dir() -> Path:
    """The cache root (created on demand)."""
    root = os.environ.get(DATA_ENV)
    if root:
        return Path(root).expanduser()
    try:
        import platformdirs
    except ImportError:  # e.g. inside asv, which drops PYTHONPATH, with the stack installed by --target
        return Path.home() / ".cache" / "portabench"
    return Path(platformdirs.user_cache_dir("portabench"))


def cached_path(dataset: Dataset) -> Path:
    """Where the real file of ``dataset`` is, or would be once fetched."""
    if dataset.shipped:
        return SHIPPED / dataset.shipped
    if dataset.remote is None:
        raise DatasetError(f"dataset {dataset.name!r} has no real data, only a stand-in: use {dataset.name}@SCALE")
    return cache_dir() / dataset.name / dataset.remote.filename


def source_url(dataset: Dataset) -> str:
    assert dataset.remote is not None
    mirror = os.environ.get(MIRROR_ENV)
    if not mirror:
        return dataset.remote.url
    # Keep the host's path below the mirror root, so one mirror can serve every host.
    return mirror.rstrip("/") + "/" + urlsplit(dataset.remote.url).path.lstrip("/")


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            digest.update(block)
    return digest.hexdigest()


def _ledger() -> dict[str, str]:
    path = cache_dir() / LEDGER
    if not path.exists():
        return {}
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise DatasetError(f"{path}: unreadable checksum ledger ({exc}); delete it to start again") from None


def _record(name: str, digest: str) -> None:
    ledger = _ledger()
    ledger[name] = digest
    path = cache_dir() / LEDGER
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(ledger, indent=1, sort_keys=True) + "\n")
    tmp.replace(path)


def expected_sha256(dataset: Dataset) -> str | None:
    """The published checksum, else the one recorded at first download, else None."""
    if dataset.remote and dataset.remote.sha256:
        return dataset.remote.sha256
    return _ledger().get(dataset.name)


def _check(dataset: Dataset, path: Path) -> None:
    expected = expected_sha256(dataset)
    actual = sha256(path)
    if expected is None:
        _record(dataset.name, actual)
    elif actual != expected:
        raise DatasetError(
            f"{path}: SHA-256 {actual} does not match the expected {expected} for {dataset.name}; "
            f"delete the file and fetch it again"
        )


def by_hand_message(dataset: Dataset) -> str:
    path = cached_path(dataset)
    return (
        f"download {dataset.remote.url if dataset.remote else '(no URL)'} on a machine with internet, "
        f"then copy it to {path} or run `portabench datasets register {dataset.name} FILE`"
        + (f"; or use the stand-in {dataset.name}@SCALE" if dataset.standin else "")
    )


def locate(dataset: Dataset, download: bool = False, progress: bool = True) -> Path:
    """The verified real file of ``dataset``, downloading it if allowed and missing."""
    path = cached_path(dataset)
    if dataset.shipped:
        return path
    if path.exists():
        _check(dataset, path)
        return path
    if not download:
        raise DatasetUnavailableError(f"{dataset.name} is not in the cache ({path}): run "
                                      f"`portabench datasets fetch {dataset.name}`, or {by_hand_message(dataset)}")
    return fetch(dataset, progress=progress)


def fetch(dataset: Dataset, progress: bool = True) -> Path:
    """Download ``dataset`` into the cache (a no-op if present and verified)."""
    path = cached_path(dataset)
    if dataset.shipped:
        return path
    if path.exists():
        _check(dataset, path)
        return path
    try:
        import pooch
    except ImportError:
        raise DatasetUnavailableError(f"downloading needs pooch (pip install pooch); or {by_hand_message(dataset)}") from None
    known = expected_sha256(dataset)
    url = source_url(dataset)
    try:
        fetched = pooch.retrieve(
            url,
            known_hash=f"sha256:{known}" if known else None,
            fname=path.name,
            path=path.parent,
            progressbar=progress,
        )
    except ValueError as exc:  # pooch's checksum mismatch
        raise DatasetError(f"{dataset.name}: download from {url} failed its checksum: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - any network failure gets the same advice
        raise DatasetUnavailableError(
            f"{dataset.name} could not be downloaded from {url} ({type(exc).__name__}: {exc}); {by_hand_message(dataset)}"
        ) from None
    fetched_path = Path(fetched)
    if known is None:
        _record(dataset.name, sha256(fetched_path))
    return fetched_path


def register_local(dataset: Dataset, source: Path) -> Path:
    """Copy a file obtained by hand into the cache, checking it against any known checksum."""
    if dataset.remote is None:
        raise DatasetError(f"dataset {dataset.name!r} is not downloaded, so it cannot be registered")
    source = Path(source)
    if not source.is_file():
        raise DatasetError(f"{source}: no such file")
    known = expected_sha256(dataset)
    actual = sha256(source)
    if known is not None and actual != known:
        raise DatasetError(f"{source}: SHA-256 {actual} does not match the expected {known} for {dataset.name}")
    path = cached_path(dataset)
    path.parent.mkdir(parents=True, exist_ok=True)
    if source.resolve() != path.resolve():
        tmp = path.with_name(path.name + ".part")
        shutil.copyfile(source, tmp)
        tmp.replace(path)
    if known is None:
        _record(dataset.name, actual)
    return path
