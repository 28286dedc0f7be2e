"""The FROSTT tensors of the papers (downloaded on request) and their seeded stand-ins.

Dimensions and nonzero counts are FROSTT's (``reference/NOTES.md``); the stand-ins'
skew model is in ``standin.py``. Also registered: SPLATT's ``med.tns``, a small real
tensor shipped with portabench so that a real file can be read with no download.
"""

from __future__ import annotations

import math
from pathlib import Path

from ..registry import Dataset, Remote, register
from .coo import SparseTensor
from .tns import read_tns_cached, write_tns

FROSTT_DATA = "https://s3.us-east-2.amazonaws.com/frostt/frostt_data/"
QUICK_NNZ = 500_000  # a stand-in's default size: seconds of MTTKRP on a 2-core CPU

# name: (dims, nnz, path under FROSTT_DATA)
FROSTT: dict[str, tuple[tuple[int, ...], int, str]] = {
    "chicago-crime-comm": ((6186, 24, 77, 32), 5_330_673, "chicago-crime/comm/chicago-crime-comm.tns.gz"),
    "enron": ((6066, 5699, 244268, 1176), 54_202_099, "enron/enron.tns.gz"),
    "lbnl-network": ((1605, 4198, 1631, 4209, 868131), 1_698_825, "lbnl-network/lbnl-network.tns.gz"),
    "nell-2": ((12092, 9184, 28818), 76_879_419, "nell/nell-2.tns.gz"),
    "nips": ((2482, 2862, 14036, 17), 3_101_609, "nips/nips.tns.gz"),
    "uber": ((183, 24, 1140, 1717), 3_309_490, "uber-pickups/uber.tns.gz"),
    "vast-2015-mc1-5d": ((165427, 11374, 2, 100, 89), 26_021_945, "vast-2015-mc1/vast-2015-mc1-5d.tns.gz"),
    "delicious-4d": ((532924, 17262471, 2480308, 1443), 140_126_181, "delicious/delicious-4d.tns.gz"),
}


def _quick_scale(nnz: int) -> float:
    """QUICK_NNZ / nnz rounded down to one significant digit (0.09, 0.004, ...)."""
    raw = min(1.0, QUICK_NNZ / nnz)
    step = 10.0 ** math.floor(math.log10(raw))
    return math.floor(raw / step) * step


def _standin(name: str):
    def generate(scale: float, seed: int) -> SparseTensor:
        from .standin import generate as generate_standin

        return generate_standin(name, scale, seed)

    return generate


def _read(path: Path) -> SparseTensor:
    return read_tns_cached(path)


def _write(tensor: SparseTensor, path: Path) -> None:
    write_tns(tensor, path)


for _name, (_dims, _nnz, _path) in FROSTT.items():
    register(Dataset(
        name=_name,
        kind="tensor",
        summary=f"FROSTT {_name}: order {len(_dims)}, {_nnz:,} nonzeros",
        facts={"dims": _dims, "nnz": _nnz, "source": FROSTT_DATA + _path},
        remote=Remote(url=FROSTT_DATA + _path, filename=Path(_path).name, also=(f"{Path(_path).stem}",)),
        read=_read,
        standin=_standin(_name),
        write=_write,
        default_scale=_quick_scale(_nnz),
    ))

register(Dataset(
    name="splatt-med",
    kind="tensor",
    summary="SPLATT's test tensor med.tns (real, shipped): order 3, 100,000 nonzeros",
    facts={"dims": (2425, 10816, 29567), "nnz": 100_000, "source": "ShadenSmith/splatt tests/tensors/med.tns"},
    shipped="splatt/med.tns",
    read=_read,
    write=_write,
))
