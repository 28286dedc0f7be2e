"""The known-systems table (``systems.csv``): published peak bandwidth and FP64 rate of CPUs and
GPUs, matched on the CPU model string or the GPU name (``implementations.hardware`` uses it
when a device reports no peaks of its own)."""

from __future__ import annotations

import csv
import functools
import io
import re
from importlib import resources

PEAK_KEYS = ("peak_bandwidth_gbs", "peak_fp64_gflops")


@functools.cache
def load_systems() -> tuple[dict, ...]:
    """Rows of ``systems.csv``; empty peak cells become None, ``sockets`` an int."""
    text = resources.files("portabench.reference").joinpath("systems.csv").read_text(encoding="utf-8")
    rows = []
    for row in csv.DictReader(io.StringIO(text)):
        for key in PEAK_KEYS:
            row[key] = float(row[key]) if row[key].strip() else None
        row["sockets"] = int(row["sockets"])
        rows.append(row)
    return tuple(rows)


def match_system(kind: str, name: str) -> dict | None:
    """First ``systems.csv`` row of ``kind`` ("cpu"/"gpu") whose regex matches ``name``, or None."""
    return next((r for r in load_systems()
                 if r["kind"] == kind and re.search(r["match"], name, re.IGNORECASE)), None)
