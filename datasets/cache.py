"""Downloads and the local cache of real datasets.

Files live in ``$PORTABENCH_DATA`` (default: the user cache, ``~/.cache/portabench``),
one folder per dataset. Downloads go through pooch (checksum, progress bar, atomic
rename). FROSTT and SuiteSparse publish no checksums, so a registry entry may have
none: the SHA-256 of the first download (or registered copy) is then recorded in
``checksums.json`` in the cache and every later use is checked against it.
``$PORTABENCH_MIRROR`` replaces the hosts' base URLs with a local mirror.

A copy obtained by hand (``register_local``) is parsed by the dataset's reader before it is
stored or its checksum recorded, and is stored under the name for its compression (sniffed
from its bytes: ``uber.tns`` if it is plain text, ``uber.tns.gz`` if gzip), which
``cached_path`` then finds.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import shutil
import tempfile
import warnings
import zlib
from pathlib import Path
from urllib.parse import urlsplit

from .errors import DatasetError, DatasetUnavailableError
from .paths import check_input_file
from .registry import SHIPPED, Dataset, list_datasets

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
    folder = cache_dir() / dataset.name
    for name in dataset.remote.filenames:  # a copy registered in another compression
        if (folder / name).exists():
            return folder / name
    return folder / dataset.remote.filename


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


_PACKING = {"tar.gz": "a gzip-compressed tar archive", "gz": "gzip-compressed", "tar": "a tar archive",
            "": "uncompressed"}


def _packing_of_name(name: str) -> str:
    lower = name.lower()
    if lower.endswith((".tar.gz", ".tgz")):
        return "tar.gz"
    for suffix in ("gz", "tar"):
        if lower.endswith("." + suffix):
            return suffix
    return ""


def _packing_of_bytes(path: Path) -> str:
    """How ``path`` is packed, from its bytes (a name may lie: a browser may have unzipped it)."""
    with open(path, "rb") as f:
        head = f.read(512)
    if head[:2] == b"\x1f\x8b":
        try:
            with gzip.open(path, "rb") as f:
                head = f.read(512)
        except (OSError, EOFError, zlib.error):
            return "gz"  # a damaged one: the reader's parse names the damage
        return "tar.gz" if head[257:262] == b"ustar" else "gz"
    return "tar" if head[257:262] == b"ustar" else ""


def _stored_name(dataset: Dataset, source: Path) -> str:
    """The cache's name for ``source``: the dataset's file name for its packing."""
    assert dataset.remote is not None
    packing = _packing_of_bytes(source)
    for name in dataset.remote.filenames:
        if _packing_of_name(name) == packing:
            return name
    raise DatasetError(f"{source}: not registered as {dataset.name}: it is {_PACKING[packing]}, and "
                       f"{dataset.name} is read from {' or '.join(dataset.remote.filenames)}")


def _parse(dataset: Dataset, staged: Path, source: Path) -> None:
    """Read ``staged`` (the copy of ``source``) with the dataset's own reader: errors and
    warnings name ``source``, the file the user knows."""
    if dataset.read is None:
        return
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            parsed = dataset.read(staged)
        except DatasetError as exc:
            raise DatasetError(f"{str(exc).replace(str(staged), str(source))} ({source} not registered as "
                               f"{dataset.name})") from None
    for w in caught:
        warnings.warn(str(w.message).replace(str(staged), str(source)), w.category, stacklevel=3)
    published = dataset.facts.get("dims")
    order = len(getattr(parsed, "dims", ()))
    if published is not None and order and order != len(published):  # e.g. uber's file offered as nell-2
        raise DatasetError(f"{source}: not registered as {dataset.name}: it holds an order-{order} tensor, "
                           f"{dataset.name} is order {len(published)}")


def register_local(dataset: Dataset, source: Path) -> Path:
    """Copy a file obtained by hand into the cache, checking it against any known checksum.

    The copy is parsed by the dataset's reader first: a malformed file is refused with nothing
    stored and no checksum recorded. It is stored under the dataset's name for its packing
    (``Remote.filenames``), replacing a copy stored under another one.
    """
    if dataset.remote is None:
        what = (f"{dataset.name} is shipped with portabench: there is nothing to register" if dataset.shipped
                else f"{dataset.name} has no real data, only a stand-in ({dataset.name}@SCALE)")
        takes = ", ".join(d.name for d in list_datasets() if d.remote is not None)
        raise DatasetError(f"{what}; register takes the real data of a downloadable dataset: {takes}")
    source = check_input_file(source, f"the file of {dataset.name}")
    name = _stored_name(dataset, source)
    known = expected_sha256(dataset)
    actual = sha256(source)
    if known is not None and actual != known:
        raise DatasetError(f"{source}: SHA-256 {actual} does not match the expected {known} for {dataset.name}")
    folder = cache_dir() / dataset.name
    path = folder / name
    if source.resolve() == path.resolve():
        _parse(dataset, path, source)
    else:
        root = cache_dir()
        root.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".register-", dir=root))  # same file system: moves are renames
        try:
            staged = staging / name
            shutil.copyfile(source, staged)
            _parse(dataset, staged, source)
            folder.mkdir(parents=True, exist_ok=True)
            for other in dataset.remote.filenames:
                if other != name:
                    (folder / other).unlink(missing_ok=True)
            # The file, and what the reader kept beside it (a tensor's parsed binary copy).
            for item in sorted(staging.iterdir(), key=lambda p: p != staged):
                item.replace(folder / item.name)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    if known is None:
        _record(dataset.name, actual)
    return path
