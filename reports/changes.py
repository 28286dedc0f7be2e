"""Change points across commits: where a benchmark's median time stepped, when, by how much and which way.

A series is one benchmark row of one machine (``ROW_KEY``: machine, benchmark and parameters, the
identity ``metrics.latest`` and ``compare`` pair rows by): its median time at each commit that ran it,
commits in date order. ruptures' PELT (the exact segmentation minimising a cost plus a penalty per step),
on the log of the times with a least-squares cost and the BIC penalty scaled by the series' own noise
(``series_noise``), proposes the steps. A step stands where Student's t-test of the log times on its two
sides (from the step before it to the step after it; ``t_test``) gives p <= ``STEP_ALPHA`` (Hunter's test
and Apache Otava's default threshold) and the median after differs from the median before by at least
max(the row's noise floor, ``MIN_STEP``). The tests and thresholds are harness/statistics.py's, which
judges ``compare``'s and ``check``'s rounds too; this module finds, tabulates and draws the steps.
Where one fails, the failing step whose removal raises the least-squares cost least is merged away and the
others are tested again on their wider sides, until every one stands.

Why ruptures: a maintained library made for offline change point detection, with wheels for every Python
this suite supports and NumPy and SciPy as its only dependencies. Apache Otava (Hunter's e-divisive and
t-test) pins NumPy and SciPy below the versions this suite measures as vendor libraries and brings
cloud-database and chat clients; MongoDB's signal-processing-algorithms requires NumPy 1 and, in its last
release, Python 3.11 only, with no wheel for either. ruptures has no significance test of its own, hence
the t-test on the steps it finds.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import ruptures
from matplotlib.lines import Line2D
from matplotlib.ticker import FixedLocator, NullLocator

from portabench.harness.statistics import MIN_COMMITS, MIN_STEP, ROW_KEY, STEP_ALPHA, series_noise, t_test
from portabench.implementations.model import MAIN

from .figures import deferrable, slug, variant_label
from .metrics import SYSTEM, case_rank
from .results import KERNEL_MEASURE

ROW_COLUMNS = ["machine", "device", "kernel", "study", "case", "size", "size_unit", "variant", "settings", "measure"]
SLOWER, FASTER = "slower", "faster"
DIRECTION_COLORS = {SLOWER: "#d62728", FASTER: "#2ca02c"}
DIRECTION_MARKERS = {SLOWER: "^", FASTER: "v"}
SHORT = 8  # hex digits of a commit hash shown
CHANGE_COLUMNS = [*ROW_COLUMNS, "before", "before_date", "after", "after_date", "t_before_s", "t_after_s", "ratio",
                  "change_pct", "direction", "p_value", "min_step_pct", "commits", "benchmark", "params"]
# The figure's x axis labels at most this many commits (every k-th beyond).
MAX_TICKS = 14


@dataclass(frozen=True)
class Step:
    """A change point of one series: ``at`` is the index of the first commit after the step; ``before`` and
    ``after`` the median times of its two sides (from the step before it, to the step after it)."""

    at: int
    before: float
    after: float
    p_value: float

    @property
    def ratio(self) -> float:
        """After over before: > 1 is slower."""
        return self.after / self.before


def steps(times: Sequence[float], min_step: float = MIN_STEP, alpha: float = STEP_ALPHA) -> list[Step]:
    """The steps of one series of median times in commit order that pass the t-test at ``alpha`` and
    change the median time by at least ``min_step`` (0.05: 5 %); none for fewer than ``MIN_COMMITS``."""
    times = np.asarray(times, dtype=float)
    n = len(times)
    if n < MIN_COMMITS or not (times > 0).all():
        return []
    y = np.log(times)
    # BIC for a change in mean under Gaussian noise: 2 ln n per step, in units of the noise's variance.
    penalty = 2 * math.log(n) * series_noise(y) ** 2
    cuts = ruptures.Pelt(model="l2", min_size=1, jump=1).fit(y).predict(pen=penalty)[:-1]
    cost = ruptures.costs.CostL2().fit(y)
    while cuts:
        edges = [0, *cuts, n]
        found = [_step(times, edges[i], edges[i + 1], edges[i + 2]) for i in range(len(cuts))]
        failing = [i for i, s in enumerate(found)
                   if not (s.p_value <= alpha and abs(s.ratio - 1) >= min_step)]
        if not failing:
            return found
        # Merge where it costs the least: a failing step between two one-commit sides may be the real one,
        # failing only for want of degrees of freedom until its neighbours' spurious steps are gone.
        gain = {i: cost.error(edges[i], edges[i + 2]) - cost.error(edges[i], edges[i + 1])
                - cost.error(edges[i + 1], edges[i + 2]) for i in failing}
        cuts.pop(min(gain, key=gain.get))
    return []


def _step(times: np.ndarray, lo: int, at: int, hi: int) -> Step:
    before, after = float(np.median(times[lo:at])), float(np.median(times[at:hi]))
    if hi - lo < 3:  # no degree of freedom left for the test
        return Step(at, before, after, 1.0)
    p = t_test(times[lo:at], times[at:hi], min_sigma=0.0).p
    return Step(at, before, after, p if p == p else 1.0)  # NaN: two identical constant sides


def series(table: pd.DataFrame) -> pd.DataFrame:
    """The tidy table's rows in commit order (by date) per series, one per commit (two asv environments
    of one commit: the first, as ``metrics.latest`` keeps)."""
    rows = table.sort_values(["date", "commit"], kind="stable").drop_duplicates(ROW_KEY + ["commit"])
    return rows.reset_index(drop=True)


def changes(table: pd.DataFrame, min_step: float = MIN_STEP, alpha: float = STEP_ALPHA) -> pd.DataFrame:
    """Every step of every series of a tidy table, a row each (``CHANGE_COLUMNS``): the last commit before
    it and the first after it (short hashes, dates), the two sides' median times, their ratio, the change in
    %, its direction and the t-test's p-value. A step must exceed max(the machine's noise floor for the
    series (``noise_floor_pct``, where measured), ``min_step``)."""
    out = []
    for key, rows in series(table).groupby(ROW_KEY, sort=False):
        if len(rows) < MIN_COMMITS:
            continue
        floor = rows.noise_floor_pct.iloc[-1] / 100 if "noise_floor_pct" in rows else math.nan
        threshold = max(min_step, floor if floor == floor else 0.0)
        first = rows.iloc[0]
        for step in steps(rows.time_s.to_numpy(), threshold, alpha):
            before, after = rows.iloc[step.at - 1], rows.iloc[step.at]
            out.append({
                **{c: first[c] for c in ROW_COLUMNS}, "before": before.commit[:SHORT], "before_date": _day(before.date),
                "after": after.commit[:SHORT], "after_date": _day(after.date),
                "t_before_s": step.before, "t_after_s": step.after,
                "ratio": step.ratio, "change_pct": 100 * (step.ratio - 1),
                "direction": SLOWER if step.ratio > 1 else FASTER, "p_value": step.p_value,
                "min_step_pct": 100 * threshold, "commits": len(rows), "benchmark": key[1], "params": key[2]})
    frame = pd.DataFrame(out, columns=CHANGE_COLUMNS)
    frame = frame.assign(_rank=case_rank(frame)).sort_values(["machine", "device", "kernel", "study", "_rank", "case",
                                                               "variant", "after_date"])
    return frame.drop(columns="_rank").reset_index(drop=True)


def _day(date: pd.Timestamp) -> str:
    return pd.Timestamp(date).strftime("%Y-%m-%d %H:%M")


def history(table: pd.DataFrame, shown: pd.DataFrame) -> pd.DataFrame:
    """The points of the history figures: each main-comparison row (kernel times at the variant's default
    settings) at the size ``shown`` per (machine, device, kernel) that ran at two commits or more, at each of
    them, with its time relative to its latest commit's (``relative``) and the commit's place on the kernel's
    axis (``position``: its commits in date order)."""
    main = table[(table.study == MAIN) & (table.measure == KERNEL_MEASURE) & (table.settings.fillna("") == "")]
    rows = series(main.merge(shown[SYSTEM + ["kernel", "size"]].drop_duplicates(), on=SYSTEM + ["kernel", "size"]))
    rows = rows[rows.groupby(ROW_KEY).commit.transform("size") >= 2]  # one commit draws no line
    rows = rows.assign(relative=rows.time_s / rows.groupby(ROW_KEY).time_s.transform("last"),
                       short=rows.commit.str[:SHORT])
    order = rows.drop_duplicates(SYSTEM + ["kernel", "commit"])  # already in date order
    order = order.assign(position=order.groupby(SYSTEM + ["kernel"]).cumcount())
    rows = rows.merge(order[SYSTEM + ["kernel", "commit", "position"]], on=SYSTEM + ["kernel", "commit"])
    return rows.assign(_rank=case_rank(rows)).sort_values(SYSTEM + ["kernel", "_rank", "case", "variant", "position"]
                                                          ).drop(columns="_rank").reset_index(drop=True)


def history_table(points: pd.DataFrame) -> pd.DataFrame:
    """One kernel's history as its figure draws it: a row per (case, variant), a column per commit (short
    hash, in date order) holding the time relative to the row's latest commit."""
    commits = points.drop_duplicates("position").sort_values("position").short.tolist()
    wide = points.pivot_table(index=["case", "variant"], columns="short", values="relative", sort=False)
    return wide.reindex(columns=commits).reset_index().rename_axis(columns=None)


def history_figures(points: pd.DataFrame, found: pd.DataFrame, fig_dir: Path,
                    colors: dict) -> dict[tuple[str, str, str], Path]:
    """Per (machine, device, kernel) with ``points`` (``history``): its history figure, the steps in ``found``
    (``changes``) of the rows drawn marked at the first commit after each."""
    figures = {}
    keyed = found.assign(short=found.after)
    for (machine, device, kernel), rows in points.groupby(SYSTEM + ["kernel"], sort=True):
        marks = rows.merge(keyed[ROW_KEY + ["short", "direction"]], on=ROW_KEY + ["short"])
        first = rows.iloc[0]
        title = (f"{machine} {device}: {kernel}, size {first['size']} {first['size_unit']}: "
                 "median time relative to each row's latest commit")
        figures[(machine, device, kernel)] = history_figure(
            rows[["case", "variant", "family", "position", "short", "relative"]],
            marks[["case", "position", "relative", "direction"]],
            fig_dir / f"{slug(machine, device, kernel)}-history.png", colors, title)
    return figures


# Ticks of a ratio axis: the finer set where few of them fall in its range, else the coarser one.
FINE_TICKS = (0.1, 0.2, 0.3, 0.5, 0.7, 0.8, 0.9, 1, 1.1, 1.25, 1.5, 2, 3, 5, 10)
COARSE_TICKS = (0.001, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100, 1000)


def _limits(relative: pd.Series) -> tuple[float, float]:
    """The ratio axis' range: the data's, with a margin, and at least 0.9 to 1.1 so a flat line looks flat."""
    low, high = float(relative.min()), float(relative.max())
    span = math.log(high / low) if low > 0 else 0.0
    return min(0.9, low * math.exp(-0.08 * span)), max(1.1, high * math.exp(0.08 * span))


def _ratio_ticks(low: float, high: float) -> list[float]:
    fine = [t for t in FINE_TICKS if low <= t <= high]
    return fine if len(fine) <= 8 else [t for t in COARSE_TICKS if low <= t <= high]


@deferrable
def history_figure(rows: pd.DataFrame, marks: pd.DataFrame, path: Path, colors: dict, title: str) -> Path:
    """One small plot per case, a line per variant (its colour in every figure) over the commits in date
    order, on a log scale; each step marked where it lands, by direction."""
    cases = list(dict.fromkeys(rows.case))
    wrap = min(3, len(cases))
    height = -(-len(cases) // wrap)
    fig, axes = plt.subplots(height, wrap, figsize=(4.4 * wrap, 2.9 * height + 0.6), sharex=True, sharey=True,
                             squeeze=False)
    commits = rows.drop_duplicates("position").sort_values("position").short.tolist()
    every = -(-len(commits) // MAX_TICKS)
    labelled = rows.assign(hue=variant_label(rows))
    for ax, case in zip(axes.flat, cases):
        for label in [h for h in colors if h in set(labelled.hue)]:
            line = labelled[(labelled.case == case) & (labelled.hue == label)]
            if len(line):
                ax.plot(line.position, line.relative, marker=".", markersize=4, linewidth=1.2, color=colors[label])
        for direction, steps_ in marks[marks.case == case].groupby("direction"):
            ax.scatter(steps_.position, steps_.relative, s=70, marker=DIRECTION_MARKERS[direction],
                       color=DIRECTION_COLORS[direction], edgecolors="black", linewidths=0.6, zorder=3)
        ax.axhline(1.0, color="grey", linewidth=0.6, linestyle=":")
        ax.set_title(case, fontsize=9)
        ax.set_yscale("log")
        ax.xaxis.set_major_locator(FixedLocator(range(0, len(commits), every)))
        ax.set_xticklabels(commits[::every], rotation=90, fontsize=7, family="monospace")
        ax.grid(axis="y", linewidth=0.3)
    for i, ax in enumerate(axes.flat):
        ax.set_visible(i < len(cases))
        if i < len(cases) and i + wrap >= len(cases):  # the lowest plot of its column: its commits named
            ax.tick_params(axis="x", labelbottom=True)
    low, high = _limits(rows.relative)
    for ax in axes.flat:  # shared: one call sets every plot's
        ax.set_ylim(low, high)
        ax.yaxis.set_major_locator(FixedLocator(_ratio_ticks(low, high)))
        ax.yaxis.set_minor_locator(NullLocator())
        ax.yaxis.set_major_formatter(plt.FuncFormatter(lambda v, _: f"{v:.3g}"))
    for ax in axes[:, 0]:
        ax.set_ylabel("t / t(latest)", fontsize=8)
    shown = [h for h in colors if h in set(labelled.hue)]
    handles = [Line2D([], [], color=colors[h], marker=".", label=h) for h in shown]
    handles += [Line2D([], [], linestyle="", marker=DIRECTION_MARKERS[d], markerfacecolor=c, markeredgecolor="black",
                       markersize=8, label=f"step {d}") for d, c in DIRECTION_COLORS.items()]
    fig.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 0.95), frameon=False, fontsize=8)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.35 / fig.get_figheight()))  # room for the title
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path
