"""Throughput against one parameter of the problem, per system, each a table (CSV beside it) and a figure:
the studies each kernel declares (``Kernel.sweeps``, one ``Sweep`` each). Two kinds:

- a study whose cases sweep the parameter (BCSR's block-size sweep, the paper [001]'s "variable block
  sizes" figures, equal bytes of block values at every block size): % of peak (or GB/s, where no peak is
  known) per variant against the parameter, and each portable variant's speedup over the fastest vendor
  one; its rows stay out of the kernel's own figures and geomeans (``is_sweep``);
- the size swept (batched GMRES against the batch size N, the paper [004]'s throughput figures): the
  size's unit per second per variant, for each case and problem option, with the speedup over the
  fastest vendor variant.

Not the runs split across devices (``portabench scale``): ``devices`` draws those.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import matplotlib.pyplot as plt
from matplotlib.ticker import NullLocator
import pandas as pd
import seaborn as sns

from portabench.implementations import Kernel, PortabenchError, get_kernel
from portabench.implementations.model import Sweep

from .figures import deferrable, slug, variant_label
from .metrics import SYSTEM
from .studies import StudyTable

SPEEDUP_KEYS = SYSTEM + ["kernel", "case", "size", "variant"]
SPEEDUP_LABEL = "speedup over fastest vendor (>1: portable faster)"


def declared(kernels: Iterable[str]) -> list[tuple[Kernel, Sweep]]:
    """Every (kernel, sweep) that the kernels named declare: the sweeps over cases first, then over sizes."""
    found = []
    for name in sorted(set(kernels)):
        try:
            found += [(get_kernel(name), sweep) for sweep in get_kernel(name).sweeps]
        except PortabenchError:  # a kernel this version does not know declares nothing
            continue
    return sorted(found, key=lambda pair: pair[1].study is None)


def is_sweep(rows: pd.DataFrame) -> pd.Series:
    """Which rows are of a study whose cases sweep one parameter (shown in its own figure, not with the
    kernel's other cases)."""
    studies = {(kernel.name, sweep.study) for kernel, sweep in declared(rows.kernel) if sweep.study is not None}
    return pd.Series([(k, s) in studies for k, s in zip(rows.kernel, rows.study)], index=rows.index, dtype=bool)


def case_sweep_table(kernel: Kernel, sweep: Sweep, pct: pd.DataFrame, spd: pd.DataFrame) -> pd.DataFrame:
    """Per system, size, variant and value of ``sweep.axis``: GB/s, % of peak and (portable) speedup over the
    fastest vendor variant. ``pct`` has ``with_basis`` columns; ``spd`` is ``metrics.speedup``'s per-case table."""
    rows = pct[(pct.kernel == kernel.name) & (pct.study == sweep.study)]
    values = [kernel.sweep_value(case.split(" (")[0]) for case in rows.case]  # a case may carry its options
    rows = rows.assign(**{sweep.axis: pd.Series(values, index=rows.index, dtype="int64")})
    ratios = spd[(spd.kernel == kernel.name) & spd.case.isin(set(rows.case))][SPEEDUP_KEYS + ["fastest_vendor", "speedup"]]
    out = rows.merge(ratios, on=SPEEDUP_KEYS, how="left")
    columns = SYSTEM + ["kernel", "size", sweep.axis, "variant", "family", "gbs", "pct", "basis", "fastest_vendor",
                        "speedup"]
    return out.sort_values(SYSTEM + ["size", "family", "variant", sweep.axis])[columns].reset_index(drop=True)


def rate_column(kernel: Kernel) -> str:
    """The column of a size sweep's throughput: the size's unit per second ("systems_per_s")."""
    return f"{kernel.size_unit.replace(' ', '_')}_per_s"


def _option(options: pd.Series, name: str) -> pd.Series:
    """Each row's value of the problem option ``name`` in its label ("order=sorted"); "" where not labelled."""
    def value(label: str) -> str:
        return next((v for k, _, v in (part.partition("=") for part in label.split(", ")) if k == name), "")
    return options.fillna("").astype(str).map(value)


def size_sweep_table(kernel: Kernel, rows: pd.DataFrame, spd: pd.DataFrame) -> pd.DataFrame:
    """Per system, case, problem option, size and variant: time, the size's unit per second and the speedup over
    the fastest vendor variant. The size column is named as the kernel's size parameter (GMRES: ``N``)."""
    g = rows[rows.kernel == kernel.name]
    rate, options, size = rate_column(kernel), list(kernel.options), kernel.size_param
    g = g.assign(**{rate: g["size"] / g.time_s}, **{name: _option(g.options, name) for name in options})
    ratios = spd[(spd.kernel == kernel.name) & (spd.case != "geomean")][SPEEDUP_KEYS + ["fastest_vendor", "speedup"]]
    out = g.merge(ratios, on=SPEEDUP_KEYS, how="left").rename(columns={"size": size})
    columns = SYSTEM + ["kernel", "dataset", *options, size, "variant", "family", "time_s", rate, "fastest_vendor",
                        "speedup"]
    return out.sort_values(SYSTEM + ["dataset", *options, "family", "variant", size])[columns].reset_index(drop=True)


@deferrable
def _case_sweep_figure(table: pd.DataFrame, path: Path, colors: dict, title: str, axis: str, label: str) -> Path:
    data = table.assign(hue=variant_label(table))
    hues = [h for h in colors if h in set(data.hue)]
    fig, (left, right) = plt.subplots(1, 2, figsize=(12.5, 4.4))
    theoretical = (data.basis == "theoretical").all()
    y, ylabel = ("pct", "% of theoretical peak") if theoretical else ("gbs", "GB/s (no theoretical peak known)")
    sns.lineplot(data=data, x=axis, y=y, hue="hue", hue_order=hues, palette=colors, marker="o", ax=left)
    handles, labels = left.get_legend_handles_labels()  # every variant: the one legend, right of both panels
    left.get_legend().remove()
    portable = data[data.speedup.notna()]
    if len(portable):
        sns.lineplot(data=portable, x=axis, y="speedup", hue="hue", palette=colors, marker="o", ax=right,
                     legend=False)
        right.axhline(1.0, color="black", linewidth=1, linestyle="--")
    else:
        right.text(0.5, 0.5, "no vendor variant to compare with", ha="center", va="center", transform=right.transAxes)
    ticks = sorted(set(data[axis]))
    for ax, ylab in ((left, ylabel), (right, SPEEDUP_LABEL)):
        ax.set_xscale("log", base=2)
        ax.set_xticks(ticks, [str(t) for t in ticks])
        ax.minorticks_off()
        ax.set(xlabel=label, ylabel=ylab)
        ax.set_ylim(bottom=0)
    right.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False, fontsize=8)
    fig.suptitle(title)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path


@deferrable
def _size_sweep_figure(table: pd.DataFrame, path: Path, colors: dict, title: str, size: str, rate: str,
                       unit: str, style: str | None) -> Path:
    hue = "variant (family)"  # the legend's heading
    data = table.assign(**{hue: variant_label(table)})
    hues = [h for h in colors if h in set(data[hue])]
    datasets = list(dict.fromkeys(data.dataset))
    fig, axes = plt.subplots(1, len(datasets), figsize=(5.2 * len(datasets) + 2.5, 4.2), squeeze=False)
    for ax, dataset in zip(axes[0], datasets):
        part = data[data.dataset == dataset]
        sns.lineplot(data=part, x=size, y=rate, hue=hue, hue_order=[h for h in hues if h in set(part[hue])],
                     style=style, palette=colors, markers=True, dashes=True, ax=ax)
        ax.set(xscale="log", yscale="log", xlabel=f"{unit} {size}", ylabel=f"{unit} per second", title=dataset)
        ax.set_xticks(sorted(set(part[size])), [f"{n:,}" for n in sorted(set(part[size]))])
        ax.xaxis.set_minor_locator(NullLocator())
        ax.get_legend().remove()
    handles, labels = axes[0][-1].get_legend_handles_labels()
    for ax in axes[0][:-1]:  # every variant and option of every panel in the one legend
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
    axes[0][-1].legend(handles, labels, loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False, fontsize=8)
    fig.suptitle(title)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path


def sweep_studies(pct: pd.DataFrame, rows: pd.DataFrame, spd: pd.DataFrame, fig_dir: Path,
                  colors: dict) -> list[StudyTable]:
    """Every declared sweep (``Kernel.sweeps``) of the kernels in ``rows`` that has rows, with its figures.
    ``pct``: ``with_basis`` % of peak; ``rows``: the compared latest rows; ``spd``: per-case speedups."""
    out = []
    for kernel, sweep in declared(set(rows.kernel) | set(pct.kernel)):
        if sweep.study is not None:
            table = case_sweep_table(kernel, sweep, pct, spd)
            # One footprint per system: the largest, beyond the caches.
            table = table[table["size"] == table.groupby(SYSTEM)["size"].transform("max")].reset_index(drop=True)
        else:
            table = size_sweep_table(kernel, rows, spd)
        if not len(table):
            continue
        study = StudyTable(sweep.name, sweep.title, sweep.intro, table)
        for (machine, device), group in table.groupby(SYSTEM):
            path = fig_dir / f"{slug(machine, device, kernel.name)}-{sweep.figure}.png"
            title = f"{machine} {device}: {sweep.title}"
            if sweep.study is not None:
                study.figures[(machine, device, kernel.name)] = _case_sweep_figure(
                    group, path, colors, f"{title}, {group['size'].iloc[0]} {kernel.size_unit}", sweep.axis,
                    sweep.label or sweep.axis.replace("_", " "))
            else:
                options = list(kernel.options)
                study.figures[(machine, device, kernel.name)] = _size_sweep_figure(
                    group, path, colors, title, kernel.size_param, rate_column(kernel), kernel.size_unit,
                    options[0] if options else None)
        out.append(study)
    return out
