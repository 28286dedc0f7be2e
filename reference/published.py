"""The papers' published figures (``published.csv``): the numbers the papers and talks state, each
with its source and the sentence it comes from, so the report can show them beside this suite's.

A row is one stated number, or one stated range (``low``-``high``), of one ``quantity``:

- ``pct_peak_mean``: mean % of theoretical bandwidth of a kernel, over the cases in ``detail``;
- ``speedup_geomean``: geometric-mean speedup of the portable code over the vendor one, over
  the cases in ``detail`` (all when empty);
- ``speedup_case``: that speedup on the dataset ``detail`` (its range over systems or cases);
- ``stream_measured_gbs``: the STREAM bandwidth measured on the paper's device;
- ``launch_speedup_mean``: the best launch policy over the default one, averaged over inputs;
- ``pressure_speedup``: a perturbed variant over itself unperturbed (``detail``: the perturbation);
- ``roofline_bound_gflops``: the roofline's bound on the paper's hardware;
- ``block_size_limit``: the largest block size the variant ``detail`` can take;
- ``best_from_block_size``: from which block size the first variant of ``detail``
  (``a|b|c``) is the fastest of them;
- ``variant_speedup_max``: the largest speedup of the variant over the baseline of ``detail`` (``variant|baseline``);
- ``iterations_max``: the most solver iterations a system of the dataset ``detail`` needs;
- ``sorting_cost``: sorting time in units of the paper's ``unit``, on the hardware ``detail``.

Nothing here is derived: a number the seed does not state is not in the file.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Collection
from importlib import resources
from pathlib import Path

import pandas as pd

from portabench.datasets.errors import PortabenchError

QUANTITIES = ("pct_peak_mean", "speedup_geomean", "speedup_case", "stream_measured_gbs", "launch_speedup_mean",
              "pressure_speedup", "roofline_bound_gflops", "block_size_limit", "best_from_block_size",
              "variant_speedup_max", "iterations_max", "sorting_cost")
COLUMNS = ("kernel", "device", "quantity", "detail", "value", "low", "high", "unit", "context", "source", "quote")
DEVICES = ("", "cpu", "gpu")  # "": the figure covers both kinds of device


def load_published(path: Path | None = None, kernels: Collection[str] | None = None) -> pd.DataFrame:
    """The rows of ``published.csv`` (or of ``path``), checked (a row's kernel among ``kernels`` where given);
    ``value``, ``low``, ``high`` as floats (NaN if blank).

    Raises ``PortabenchError`` naming the file and line of the first bad row.
    """
    text = (Path(path).read_text(encoding="utf-8") if path is not None else
            resources.files("portabench.reference").joinpath("published.csv").read_text(encoding="utf-8"))
    where = path or "published.csv"
    reader = csv.DictReader(io.StringIO(text))
    if tuple(reader.fieldnames or ()) != COLUMNS:
        raise PortabenchError(f"{where}: columns must be {', '.join(COLUMNS)}; found {reader.fieldnames}")
    rows = []
    for line, row in enumerate(reader, start=2):
        try:
            rows.append(_checked(row, kernels))
        except (ValueError, TypeError) as exc:
            raise PortabenchError(f"{where}:{line}: {exc}") from None
    return pd.DataFrame(rows, columns=list(COLUMNS))


def _checked(row: dict[str, str | None], kernels: Collection[str] | None) -> dict[str, object]:
    if None in row.values() or None in row:
        raise ValueError("wrong number of fields")
    out: dict[str, object] = {k: (row[k] or "").strip() for k in COLUMNS}
    if kernels is not None and out["kernel"] not in kernels:
        raise ValueError(f"unknown kernel {out['kernel']!r}")
    if out["device"] not in DEVICES:
        raise ValueError(f"device must be cpu, gpu or empty, not {out['device']!r}")
    if out["quantity"] not in QUANTITIES:
        raise ValueError(f"unknown quantity {out['quantity']!r}; known: {', '.join(QUANTITIES)}")
    for key in ("value", "low", "high"):
        out[key] = float(out[key]) if out[key] else math.nan
    if math.isnan(out["value"]) and (math.isnan(out["low"]) or math.isnan(out["high"])):
        raise ValueError("needs a value, or both low and high")
    if not out["low"] <= out["high"] and not (math.isnan(out["low"]) and math.isnan(out["high"])):
        raise ValueError(f"low {out['low']} above high {out['high']}")
    for key in ("unit", "context", "source", "quote"):
        if not out[key]:
            raise ValueError(f"empty {key}: every number needs its unit, context, source and quote")
    return out
