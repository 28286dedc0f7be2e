"""The dataset registry: every real dataset and stand-in generator, by name.

A dataset *spec* names what a benchmark or the command line wants:

- ``NAME``: the real data (shipped with portabench, or downloaded once into the cache);
- ``NAME@S``: its seeded synthetic stand-in at scale ``S`` (``S = 1`` is full size).

Each kind of data registers its entries from its own module (``tensors.frostt``,
``matrices.suitesparse``, ``batched.pele``); this module only holds the table.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Literal, Mapping

from .errors import UnknownNameError

from .errors import DatasetError

Kind = Literal["tensor", "matrix", "batched"]
SHIPPED = Path(__file__).resolve().parent / "data"


@dataclass(frozen=True)
class Remote:
    """Where a real dataset is downloaded from. ``sha256`` is None where the host publishes none.

    ``also``: other names the dataset's reader takes, for a copy registered by hand in another
    compression (``uber.tns`` for ``uber.tns.gz``); the cache keeps one of them.
    """

    url: str
    filename: str
    sha256: str | None = None
    also: tuple[str, ...] = ()

    @property
    def filenames(self) -> tuple[str, ...]:
        """Every name the cached copy may have, the download's first."""
        return (self.filename, *self.also)


@dataclass(frozen=True)
class Dataset:
    """One registered dataset.

    ``read(path)`` parses the real file; ``standin(scale, seed)`` generates the synthetic
    stand-in; ``write(obj, path)`` saves either in the dataset's text format.
    """

    name: str
    kind: Kind
    summary: str
    facts: Mapping[str, Any] = field(default_factory=dict)  # published metadata (dims, nnz, ...)
    remote: Remote | None = None
    shipped: str | None = None  # file name under datasets/data/
    read: Callable[[Path], Any] | None = None
    standin: Callable[[float, int], Any] | None = None
    write: Callable[[Any, Path], None] | None = None
    default_scale: float = 1.0  # the stand-in's scale for a quick run on a 2-core CPU

    @property
    def quick_spec(self) -> str:
        """The spec a quick run uses: the stand-in at ``default_scale``, else the real data."""
        return f"{self.name}@{self.default_scale:g}" if self.standin else self.name

    @property
    def sources(self) -> list[str]:
        out = []
        if self.shipped:
            out.append("shipped")
        if self.remote:
            out.append("download")
        if self.standin:
            out.append("stand-in")
        return out


_REGISTRY: dict[str, Dataset] = {}


def register(dataset: Dataset) -> Dataset:
    if dataset.name in _REGISTRY:
        raise ValueError(f"dataset {dataset.name!r} registered twice")
    if "@" in dataset.name or dataset.name != dataset.name.strip():
        raise ValueError(f"bad dataset name {dataset.name!r}")
    _REGISTRY[dataset.name] = dataset
    return dataset


def list_datasets(kind: Kind | None = None) -> list[Dataset]:
    return [d for d in _REGISTRY.values() if kind is None or d.kind == kind]


def get_dataset(name: str) -> Dataset:
    try:
        return _REGISTRY[name]
    except KeyError:
        known = ", ".join(sorted(_REGISTRY))
        raise UnknownNameError(f"unknown dataset {name!r}; known: {known}") from None


def parse_spec(spec: str) -> tuple[Dataset, float | None]:
    """``'nips'`` -> (nips, None); ``'nips@0.01'`` -> (nips, 0.01)."""
    name, sep, scale_text = spec.partition("@")
    dataset = get_dataset(name.strip())
    if not sep:
        return dataset, None
    try:
        scale = float(scale_text)
    except ValueError:
        raise DatasetError(f"bad scale in dataset spec {spec!r}: expected NAME@S with S a number") from None
    if not scale > 0:
        raise DatasetError(f"scale must be positive in {spec!r}")
    if dataset.standin is None:
        raise DatasetError(f"dataset {dataset.name!r} has no synthetic stand-in; use {dataset.name!r} alone")
    return dataset, scale
