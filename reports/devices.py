"""Across devices: the kernels split across the devices of an MPI job (``portabench scale``), per system
a table (CSV beside it) and a figure per kernel.

Each row is one device count of one split problem: its median time, the devices' GB/s together and its
% of their peak together (``results._derive`` rates such a row against one device's peak times the
count), its parallel efficiency against the same split on one device, and for a portable variant its
speedup over the fastest vendor variant on as many devices. Strong scaling splits one problem, so
ideal is t(N) = t(1) / N: efficiency t(1) / (N t(N)); weak scaling gives every device a problem of the
recorded size (the whole is size x N), so ideal is t(N) = t(1): efficiency t(1) / t(N).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns
from matplotlib.lines import Line2D

from .figures import deferrable, slug, variant_label
from .metrics import SYSTEM, case_rank, with_basis, with_in_cache, with_noisy
from portabench.implementations.model import DEVICES_STUDY, PARTITION_SETTING, SCALING_SETTING, STRONG, whole_size

from .results import KERNEL_MEASURE
from .studies import StudyTable

# One split problem at every device count: what efficiency compares.
RUN_KEYS = SYSTEM + ["kernel", "case", "size", "partition", "scaling", "variant"]
# The same problem on as many devices: what the speedup over the fastest vendor compares.
VENDOR_KEYS = SYSTEM + ["kernel", "case", "size", "partition", "scaling", "devices"]
DEVICES_COLUMNS = SYSTEM + ["kernel", "case", "partition", "scaling", "size", "problem_size", "variant", "family",
                            "devices", "noisy", "in_cache", "time_s", "aggregate_gbs", "aggregate_peak_gbs", "pct",
                            "basis", "efficiency", "fastest_vendor", "t_fastest_vendor_s", "speedup"]
PANELS_PER_ROW = 4
IN_CACHE_LEGEND = "▣ in cache (GB/s may be cache bandwidth)"


def is_across_devices(rows: pd.DataFrame) -> pd.Series:
    """Which rows are of the study across devices (their own table and figures; out of every other one)."""
    return rows.study == DEVICES_STUDY


def devices_table(rows: pd.DataFrame) -> pd.DataFrame:
    """Per system, kernel, case, partition, scaling, size, variant and device count: median time, aggregate
    GB/s, % of the aggregate peak, parallel efficiency and (portable) speedup over the fastest vendor variant.
    ``rows``: the latest rows of a tidy table (``metrics.latest``); those of other studies are ignored."""
    picked = rows[is_across_devices(rows) & (rows.measure == KERNEL_MEASURE)]
    if picked.empty:
        return pd.DataFrame(columns=DEVICES_COLUMNS)
    params = picked.params.map(json.loads)
    t = with_basis(with_in_cache(with_noisy(picked))).assign(
        partition=params.map(lambda p: p.get(PARTITION_SETTING, "")),
        scaling=params.map(lambda p: p.get(SCALING_SETTING, STRONG)),
        devices=picked.devices.astype(int))
    t["problem_size"] = [whole_size(s, d, scaling) for s, d, scaling in zip(t["size"], t.devices, t.scaling)]
    t = t.rename(columns={"gbs": "aggregate_gbs"})
    # The peak the % is of: theoretical where known, else measured (``with_basis``); both already the devices'.
    t["aggregate_peak_gbs"] = t.peak_gbs.where(t.peak_gbs.notna(), t.measured_peak_gbs)
    one = t[t.devices == 1][RUN_KEYS + ["time_s"]].drop_duplicates(RUN_KEYS).rename(columns={"time_s": "_t1"})
    t = t.merge(one, on=RUN_KEYS, how="left")
    # One device's time for the whole problem at ideal speed: N t(N) for one problem split (strong), t(N) for a
    # problem per device (weak).
    ideal = t.time_s * t.devices * t["size"] / t.problem_size
    t["efficiency"] = t._t1 / ideal
    vendor = (t[t.family == "vendor"].sort_values("time_s").drop_duplicates(VENDOR_KEYS)
              [VENDOR_KEYS + ["variant", "time_s"]].rename(columns={"variant": "fastest_vendor", "time_s": "t_fastest_vendor_s"}))
    t = t.merge(vendor, on=VENDOR_KEYS, how="left")
    portable = t.family == "portable"
    t.loc[~portable, ["fastest_vendor", "t_fastest_vendor_s"]] = [math.nan, math.nan]
    t["speedup"] = t.t_fastest_vendor_s / t.time_s
    t = t.assign(_rank=case_rank(t)).sort_values(
        SYSTEM + ["kernel", "_rank", "case", "partition", "scaling", "size", "family", "variant", "devices"])
    return t[DEVICES_COLUMNS].reset_index(drop=True)


@deferrable
def _devices_figure(table: pd.DataFrame, y: str, path: Path, colors: dict, title: str) -> Path:
    """``y`` (efficiency, or aggregate GB/s) against device count: a panel per (case, scaling), a line per
    variant (colour) and partition (dashes); in-cache points ringed."""
    hue, style = "variant (family)", "partition"
    data = table.assign(**{hue: variant_label(table)}).dropna(subset=[y])
    hues = [h for h in colors if h in set(data[hue])]
    groups = list(dict.fromkeys(zip(data.case, data.scaling)))
    ncols = min(PANELS_PER_ROW, len(groups))
    nrows = math.ceil(len(groups) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.6 * ncols + 2.8, 3.8 * nrows), squeeze=False)
    handles, labels = [], []
    counts = sorted(set(data.devices))
    efficiency = y == "efficiency"
    top = max(1.15 if efficiency else 0.0, float(data[y].max()) * 1.1)
    for ax, (case, scaling) in zip(axes.flat, groups):
        part = data[(data.case == case) & (data.scaling == scaling)]
        sns.lineplot(data=part, x="devices", y=y, hue=hue, hue_order=[h for h in hues if h in set(part[hue])],
                     style=style, palette=colors, markers=True, dashes=True, ax=ax)
        cached = part[part.in_cache.astype(bool)]
        if len(cached):
            ax.scatter(cached.devices, cached[y], s=140, marker="s", facecolors="none", edgecolors="grey",
                       linewidths=1.2, zorder=5)
        if efficiency:
            ax.axhline(1.0, color="black", linewidth=1, linestyle=":")
        ax.set_xscale("log", base=2)
        ax.set_xticks(counts, [str(c) for c in counts])
        ax.minorticks_off()
        ylabel = f"parallel efficiency ({scaling})" if efficiency else "aggregate GB/s (median)"
        ax.set(xlabel="devices", ylabel=ylabel, title=f"{case}, {scaling} scaling",
               ylim=(0, top))
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
        ax.get_legend().remove()
    for ax in axes.flat[len(groups):]:
        ax.set_visible(False)
    if data.in_cache.astype(bool).any():
        handles.append(Line2D([], [], marker="s", linestyle="", markerfacecolor="none", markeredgecolor="grey",
                              markersize=10))
        labels.append(IN_CACHE_LEGEND)
    axes.flat[ncols - 1].legend(handles, labels, loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False, fontsize=8)
    fig.suptitle(title, y=1.0 + 0.06 / nrows)  # above the panels' own titles
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path


def devices_studies(rows: pd.DataFrame, fig_dir: Path, colors: dict) -> list[StudyTable]:
    """The "Across devices" table and a figure per (machine, device, kernel) at its largest size, where
    ``rows`` (the latest rows of a tidy table) hold any result of the study across devices."""
    table = devices_table(rows)
    if table.empty:
        return []
    study = StudyTable(
        "across_devices", "Across devices",
        "Each kernel split across N devices, one MPI rank each (portabench scale): median time; GB/s and % of peak "
        "of the N devices together (N times one device's theoretical peak, or its measured STREAM peak where the "
        "theoretical one is unknown; none for rows in cache, judged by each device's share against its own cache); "
        "parallel efficiency against the same variant and partition on one device, t(1) / (N t(N)) for strong "
        "scaling (one problem split) and t(1) / t(N) for weak scaling (size per device: the whole problem is size x "
        "N, problem_size); and each portable variant's speedup over the fastest vendor variant on the same problem, "
        "partition and N devices. The figure shows the efficiency at each kernel's largest size (1 = ideal; "
        "aggregate GB/s where no run on one device is known).",
        table)
    for (machine, device, kernel), group in table.groupby(SYSTEM + ["kernel"]):
        # The largest size per scaling: weak scaling's is per device, strong's the whole problem.
        shown = group[group["size"] == group.groupby("scaling")["size"].transform("max")]
        # No run on one device to compare with: the devices' GB/s together instead of the efficiency.
        y = "efficiency" if shown.efficiency.notna().any() else "aggregate_gbs"
        if shown[y].notna().any():
            what = "parallel efficiency" if y == "efficiency" else "aggregate GB/s (no run on one device)"
            study.figures[(machine, device, kernel)] = _devices_figure(
                shown, y, fig_dir / f"{slug(machine, device, kernel)}-devices.png", colors,
                f"{machine} {device}: {kernel} across devices, {what}")
    return [study]
