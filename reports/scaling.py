"""Throughput against a problem parameter, per system, each a table (CSV beside it) and a figure:

- BCSR block-size sweep (the paper [001]'s "variable block sizes" figures): the ``block-sweep-bs<B>``
  cases, equal bytes of block values at every B: % of peak (or GB/s, where no peak is known)
  per variant against B, and each portable variant's speedup over the fastest vendor one;
- batched GMRES against the batch size N (the paper [004]'s throughput figures): systems solved
  per second per variant, for each dataset and order, with the speedup over the fastest vendor.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
from matplotlib.ticker import NullLocator
import pandas as pd
import seaborn as sns

from portabench.implementations.bcsr.definition import SWEEP_STUDY

from .figures import deferrable, slug, variant_label
from .metrics import SYSTEM
from .studies import StudyTable

BCSR, GMRES = "bcsr", "gmres"
SWEEP_PREFIX = "block-sweep-bs"
SPEEDUP_KEYS = SYSTEM + ["kernel", "case", "size", "variant"]
SPEEDUP_LABEL = "speedup over fastest vendor (>1: portable faster)"


def is_sweep(rows: pd.DataFrame) -> pd.Series:
    """Which rows are of BCSR's block-size study (shown in the sweep figure, not with the paper's matrices)."""
    return (rows.kernel == BCSR) & (rows.study == SWEEP_STUDY)


def block_sweep_table(pct: pd.DataFrame, spd: pd.DataFrame) -> pd.DataFrame:
    """Per system, sweep size, variant and block size: GB/s, % of peak and (portable) speedup over the
    fastest vendor variant. ``pct`` has ``with_basis`` columns; ``spd`` is ``metrics.speedup``'s per-case table."""
    rows = pct[is_sweep(pct)]
    rows = rows.assign(block_size=rows.case.str[len(SWEEP_PREFIX):].astype(int))
    ratios = spd[(spd.kernel == BCSR) & spd.case.isin(set(rows.case))][SPEEDUP_KEYS + ["reference", "speedup"]]
    out = rows.merge(ratios, on=SPEEDUP_KEYS, how="left")
    columns = SYSTEM + ["kernel", "size", "block_size", "variant", "family", "gbs", "pct", "basis", "reference", "speedup"]
    return out.sort_values(SYSTEM + ["size", "family", "variant", "block_size"])[columns].reset_index(drop=True)


def gmres_table(rows: pd.DataFrame, spd: pd.DataFrame) -> pd.DataFrame:
    """Per system, case, N and variant: time, systems solved per second and the speedup over the fastest vendor."""
    g = rows[rows.kernel == GMRES]
    g = g.assign(systems_per_s=g["size"] / g.time_s, order=g.options.fillna("").str.replace("order=", ""))
    ratios = spd[(spd.kernel == GMRES) & (spd.case != "geomean")][SPEEDUP_KEYS + ["reference", "speedup"]]
    out = g.merge(ratios, on=SPEEDUP_KEYS, how="left").rename(columns={"size": "N"})
    columns = SYSTEM + ["kernel", "dataset", "order", "N", "variant", "family", "time_s", "systems_per_s",
                        "reference", "speedup"]
    return out.sort_values(SYSTEM + ["dataset", "order", "family", "variant", "N"])[columns].reset_index(drop=True)


@deferrable
def _block_sweep_figure(table: pd.DataFrame, path: Path, colors: dict, title: str) -> Path:
    data = table.assign(hue=variant_label(table))
    hues = [h for h in colors if h in set(data.hue)]
    fig, (left, right) = plt.subplots(1, 2, figsize=(12.5, 4.4))
    theoretical = (data.basis == "theoretical").all()
    y, ylabel = ("pct", "% of theoretical peak") if theoretical else ("gbs", "GB/s (no theoretical peak known)")
    sns.lineplot(data=data, x="block_size", y=y, hue="hue", hue_order=hues, palette=colors, marker="o", ax=left)
    handles, labels = left.get_legend_handles_labels()  # every variant: the one legend, right of both panels
    left.get_legend().remove()
    portable = data[data.speedup.notna()]
    if len(portable):
        sns.lineplot(data=portable, x="block_size", y="speedup", hue="hue", palette=colors, marker="o", ax=right,
                     legend=False)
        right.axhline(1.0, color="black", linewidth=1, linestyle="--")
    else:
        right.text(0.5, 0.5, "no vendor variant to compare with", ha="center", va="center", transform=right.transAxes)
    ticks = sorted(set(data.block_size))
    for ax, label in ((left, ylabel), (right, SPEEDUP_LABEL)):
        ax.set_xscale("log", base=2)
        ax.set_xticks(ticks, [str(t) for t in ticks])
        ax.minorticks_off()
        ax.set(xlabel="block size bs", ylabel=label)
        ax.set_ylim(bottom=0)
    right.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False, fontsize=8)
    fig.suptitle(title)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path


@deferrable
def _gmres_figure(table: pd.DataFrame, path: Path, colors: dict, title: str) -> Path:
    hue = "variant (family)"  # the legend's heading
    data = table.assign(**{hue: variant_label(table)})
    hues = [h for h in colors if h in set(data[hue])]
    datasets = list(dict.fromkeys(data.dataset))
    fig, axes = plt.subplots(1, len(datasets), figsize=(5.2 * len(datasets) + 2.5, 4.2), squeeze=False)
    for ax, dataset in zip(axes[0], datasets):
        part = data[data.dataset == dataset]
        sns.lineplot(data=part, x="N", y="systems_per_s", hue=hue, hue_order=[h for h in hues if h in set(part[hue])],
                     style="order", palette=colors, markers=True, dashes=True, ax=ax)
        ax.set(xscale="log", yscale="log", xlabel="systems N", ylabel="systems solved per second", title=dataset)
        ax.set_xticks(sorted(set(part.N)), [f"{n:,}" for n in sorted(set(part.N))])
        ax.xaxis.set_minor_locator(NullLocator())
        ax.get_legend().remove()
    handles, labels = axes[0][-1].get_legend_handles_labels()
    for ax in axes[0][:-1]:  # every variant and order of every panel in the one legend
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
    axes[0][-1].legend(handles, labels, loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False, fontsize=8)
    fig.suptitle(title)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path


def scaling_studies(pct: pd.DataFrame, rows: pd.DataFrame, spd: pd.DataFrame, fig_dir: Path,
                    colors: dict) -> list[StudyTable]:
    """The BCSR block-size sweep and the GMRES throughput studies that have rows, with their figures.
    ``pct``: ``with_basis`` % of peak; ``rows``: the compared latest rows; ``spd``: per-case speedups."""
    out = []
    sweep = block_sweep_table(pct, spd)
    if len(sweep):
        # One footprint per system: the largest, beyond the caches.
        sweep = sweep[sweep["size"] == sweep.groupby(SYSTEM)["size"].transform("max")].reset_index(drop=True)
        study = StudyTable("bcsr_block_sweep", "BCSR throughput against block size",
                      "The block-size sweep (equal bytes of block values at every bs, the paper [001]'s "
                      "\"variable block sizes\" figures): % of peak per variant, and each portable variant's speedup "
                      "over the fastest vendor variant at the same bs.", sweep)
        for (machine, device), group in sweep.groupby(SYSTEM):
            study.figures[(machine, device, BCSR)] = _block_sweep_figure(
                group, fig_dir / f"{slug(machine, device, BCSR)}-block-sweep.png", colors,
                f"{machine} {device}: BCSR SpMV against block size, {group['size'].iloc[0]} MiB of blocks")
        out.append(study)
    throughput = gmres_table(rows, spd)
    if len(throughput):
        study = StudyTable("gmres_throughput", "Batched GMRES throughput against N",
                      "Systems solved per second against the number of systems N (the paper [004]'s throughput "
                      "figures), per variant and order; speedup over the fastest vendor variant at the same N.",
                      throughput)
        for (machine, device), group in throughput.groupby(SYSTEM):
            study.figures[(machine, device, GMRES)] = _gmres_figure(
                group, fig_dir / f"{slug(machine, device, GMRES)}-throughput.png", colors,
                f"{machine} {device}: batched GMRES throughput")
        out.append(study)
    return out

