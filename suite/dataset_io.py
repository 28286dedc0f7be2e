"""Dataset input paths: the .tns reader's throughput and the stand-in generators' speed.

Not kernels (the report leaves them out of %-of-peak); they are tracked so that a slow
reader or generator is caught like any other regression.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from portabench.datasets import list_datasets, load
from portabench.datasets.tensors.tns import read_tns, write_tns

# A stand-in of FROSTT nips with about a million nonzeros: ~25 MB of text.
READER_INPUT = "nips@0.3"


class TensorTextReader:
    """Parse a FROSTT .tns file: portabench's reader against ``numpy.loadtxt``."""

    params = [["read_tns", "numpy.loadtxt"]]
    param_names = ["reader"]
    number = 1
    repeat = (3, 10, 20.0)
    timeout = 600

    def setup_cache(self) -> tuple[str, int]:
        tensor = load(READER_INPUT, seed=1)
        path = write_tns(tensor, Path("reader-input.tns").resolve())  # asv keeps this folder for the run
        return str(path), tensor.nnz

    def setup(self, cache: tuple[str, int], reader: str) -> None:
        path, nnz = cache
        self.path = Path(path)
        self.read = (lambda: read_tns(self.path)) if reader == "read_tns" else (lambda: np.loadtxt(self.path))
        # Never time a wrong answer: both readers must see every nonzero.
        got = self.read()
        count = got.nnz if reader == "read_tns" else got.shape[0]
        if count != nnz:
            raise RuntimeError(f"{reader} read {count} nonzeros of {nnz}")

    def time_read(self, cache: tuple[str, int], reader: str) -> None:
        self.read()

    def track_megabytes_per_second(self, cache: tuple[str, int], reader: str) -> float:
        best = min(_seconds(self.read) for _ in range(3))
        return self.path.stat().st_size / 1e6 / best

    track_megabytes_per_second.unit = "MB/s"


def _seconds(call) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


class StandinGenerators:
    """Generate each registered stand-in at its quick scale (one block-size sweep entry only)."""

    params = [[
        d.quick_spec
        for d in list_datasets()
        if d.standin and (not d.name.startswith("block-sweep") or d.name == "block-sweep-bs8")
    ]]
    param_names = ["dataset"]
    number = 1
    repeat = (3, 10, 20.0)
    timeout = 600

    def time_generate(self, spec: str) -> None:
        load(spec, seed=7)
