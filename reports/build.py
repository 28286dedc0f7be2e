"""``build_report``: results directory in, report site (tables, figures, index.html, a page per system) out."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from portabench.implementations import PortabenchError, list_kernels
from portabench.reference.published import load_published

from . import html
from .changes import changes, history, history_figures
from .devices import devices_studies, is_across_devices
from .figures import cross_figures, drawn_together, palette, slug, system_figures
from .metrics import largest_size, latest, percent_of_peak, preparation, speedup, summary, with_basis, with_size_unit
from .panels import cross_panels, system_panels
from .published import SuiteNumbers, beside
from .results import COLUMNS, Loaded, load_results, measured_peaks_by_machine
from .studies import StudyTable, studies
from .sweeps import is_sweep, sweep_studies


@dataclass
class ReportSummary:
    """What ``build_report`` did: rows used, machines, what it skipped and why, files written."""

    n_rows: int
    n_skipped: int
    machines: list[str]
    problems: list[str]
    paths: list[Path] = field(default_factory=list)
    pages: dict[str, Path] = field(default_factory=dict)  # machine -> its page
    headline: pd.DataFrame = field(default_factory=pd.DataFrame)  # summary.csv: a row per (kernel, system)

    @property
    def index(self) -> Path:
        return next(p for p in self.paths if p.name == "index.html")


def _asv_link(asv_html: Path | None, page_dir: Path) -> tuple[str | None, str]:
    """A relative link to asv publish's index.html, or None and why there is none."""
    if asv_html is None:
        return None, "no asv publish folder given (none found in asv.conf.json), so no asv publish pages to link"
    index = Path(asv_html) / "index.html"
    if not index.is_file():
        return None, f"no asv publish pages at {asv_html}: run `asv publish`, then this report again"
    rel = Path(os.path.relpath(index.resolve(), page_dir.resolve())).as_posix()
    # Unlike this report, asv 0.6's pages need the network (jQuery and flot come from CDNs) and read
    # their JSON with JavaScript, which browsers refuse from file://: `asv preview` serves them.
    return rel, (f"{asv_html}: asv's own pages load jQuery and flot from CDNs, so they need the network, "
                 "and are best served by `asv preview`")


def noisy_count(rows: pd.DataFrame) -> tuple[int, int]:
    """(noisy rows, rows) of a tidy table's rows."""
    return int(rows.noisy.fillna(False).astype(bool).sum()), len(rows)


def in_cache_count(rows: pd.DataFrame) -> dict[str, tuple[int, int, float]]:
    """Per device: (rows in cache, rows, the cache's bytes or NaN) of a tidy table's rows."""
    return {str(device): (int(group.in_cache.fillna(False).astype(bool).sum()), len(group),
                          float(group.cache_bytes.iloc[0]))
            for device, group in rows.groupby("device")}


def _machine_of(problem: str) -> str:
    """The machine folder a problem line names (its path comes first: results/<machine>/<file>: ...)."""
    return Path(problem.split(": ", 1)[0]).parent.name


@dataclass
class _Writer:
    """Writes the report's files into ``out_dir``, keeping their paths in the order written."""

    out_dir: Path
    paths: list[Path] = field(default_factory=list)

    def write(self, path: Path, text: str) -> None:
        path.write_text(text)
        self.paths.append(path)

    def table(self, name: str, frame: pd.DataFrame) -> None:
        """``name``.csv and ``name``.md of ``frame``."""
        self.write(self.out_dir / f"{name}.csv", frame.to_csv(index=False))
        self.write(self.out_dir / f"{name}.md",
                   html.with_noisy_marks(frame).to_markdown(index=False, floatfmt=".4g") + "\n")


@dataclass
class _Tables:
    """The tables the report derives from the tidy table's latest rows."""

    rows: pd.DataFrame  # the latest rows (``metrics.latest``)
    single: pd.DataFrame  # of them, the runs on one device
    compared: pd.DataFrame  # of those, kernel times at the variants' default settings
    pct: pd.DataFrame  # % of peak of ``compared``
    spd: pd.DataFrame  # speedups of ``compared`` less the sweeps over cases
    prep: pd.DataFrame  # preparation times


def _tables(table: pd.DataFrame) -> _Tables:
    rows = latest(table)
    # Runs split across devices (portabench scale) have their own table and figures, rated against the
    # devices' peak together: out of every single-device table, figure and study.
    single = rows[~is_across_devices(rows)]
    # Sweeps of a variant's settings (e.g. GMRES group sizes) stay in tidy.csv, out of the comparisons.
    # Preparation times (sorting, scatter matrices) are shown as multiples of a run, not as rates.
    compared = single[(single.settings.fillna("") == "") & (single.measure == "kernel")]
    # A study over a kernel's cases (``Kernel.sweeps``) has its own figure; the kernel's figures and
    # geomeans are its other cases.
    headline = compared[~is_sweep(compared)]
    return _Tables(rows, single, compared, percent_of_peak(compared), speedup(headline), preparation(single))


@dataclass
class _Figures:
    """What the report drew, for its pages."""

    kernels: dict[tuple, dict[str, Path]]
    cross: dict[str, list[Path]]
    histories: dict[tuple, Path]
    points: pd.DataFrame
    found: pd.DataFrame
    studies: list[StudyTable]
    fig_dir: Path


def build_report(results_dir: Path, out_dir: Path, asv_html: Path | None = None) -> ReportSummary:
    """Write the report of every machine in the asv ``results_dir`` into ``out_dir``: ``index.html``
    (every system side by side), ``system-<machine>.html`` per machine, figures with their numbers as
    CSV in ``figures/``, and the whole tables as CSV and Markdown. ``asv_html``: asv publish's output,
    linked from every page (None: no link; ``portabench report`` passes asv.conf.json's ``html_dir``).

    Raises ``PortabenchError`` (one line) when there is no results directory or nothing in it;
    every unusable file or row is skipped and listed in ``problems`` instead.
    """
    loaded = load_results(Path(results_dir))
    out_dir, table = Path(out_dir), loaded.table
    fig_dir = out_dir / "figures"
    fig_dir.mkdir(parents=True, exist_ok=True)
    out = _Writer(out_dir)
    t = _tables(table)
    out.write(out_dir / "tidy.csv", table[COLUMNS].to_csv(index=False))
    for name, frame in (("percent_of_peak", t.pct), ("speedup", t.spd), ("preparation", t.prep)):
        out.table(name, frame)
    out.write(out_dir / "problems.txt", "".join(p + "\n" for p in loaded.problems))

    # Figures show one size per (machine, device, kernel): the largest, beyond the caches.
    colors = palette(table)
    shown_pct, shown_spd = with_basis(largest_size(t.pct[~is_sweep(t.pct)])), largest_size(t.spd)
    # Steps across commits of every benchmark row; the history figures show the kernels' main rows at the size shown.
    found, points = changes(table), history(table, shown_pct)
    out.table("changes", found)
    with drawn_together():
        history_figs = history_figures(points, found, fig_dir, colors)
        kernel_figs = system_figures(shown_pct, shown_spd, fig_dir, colors)
        cross_figs = cross_figures(shown_pct, shown_spd, fig_dir, colors)
        extra = (studies(t.single, fig_dir, colors) + sweep_studies(with_basis(t.pct), t.compared, speedup(t.compared),
                                                                    fig_dir, colors)
                 + devices_studies(t.rows, fig_dir, colors))
    for study in extra:
        study.table = with_size_unit(study.table)  # studies keep their own columns: the unit is added here
        out.table(study.name, study.table)
    out.paths += [p for ps in kernel_figs.values() for p in ps.values()] + list(history_figs.values())
    out.paths += [p for ps in cross_figs.values() for p in ps] + [p for s in extra for p in s.figures.values()]

    measured = measured_peaks_by_machine(table)
    matched = beside(load_published(kernels=list_kernels()),
                     SuiteNumbers(shown_pct, shown_spd, t.compared, {s.name: s.table for s in extra}, measured))
    overview = summary(t.pct[~is_sweep(t.pct)], t.spd)
    out.table("summary", overview)
    out.table("published_beside", matched.drop(columns="panel"))
    figures = _Figures(kernel_figs, cross_figs, history_figs, points, found, extra, fig_dir)
    pages = _pages(out, loaded, t, shown_pct, shown_spd, figures, matched, measured, overview, asv_html)
    return ReportSummary(len(table), loaded.n_skipped, sorted(set(table.machine)), loaded.problems, out.paths,
                         pages, overview)


def _pages(out: _Writer, loaded: Loaded, t: _Tables, shown_pct: pd.DataFrame, shown_spd: pd.DataFrame,
           figures: _Figures, matched: pd.DataFrame, measured: dict[str, dict[str, float]], overview: pd.DataFrame,
           asv_html: Path | None) -> dict[str, Path]:
    """Write the panels' numbers, a page per machine and the index page; machine -> its page."""
    out_dir, rows, extra = out.out_dir, t.rows, figures.studies
    machines = sorted(loaded.systems)
    pages = {m: f"system-{slug(m)}.html" for m in machines}
    commits = rows.sort_values("date").groupby("machine")[["commit", "date"]].last()
    latest_commit = {m: (c, pd.Timestamp(d).strftime("%Y-%m-%d %H:%M UTC")) for m, (c, d) in commits.iterrows()}
    asv_link, asv_note = _asv_link(asv_html, out_dir)
    cross = cross_panels(figures.cross, shown_pct, shown_spd)
    per_machine = {m: system_panels(m, shown_pct, shown_spd, t.prep, figures.kernels, extra, matched, figures.fig_dir,
                                    figures.histories, figures.points, figures.found) for m in machines}
    for panel in [*cross, *(p for ps in per_machine.values() for p in ps)]:
        for numbers in panel.numbers:
            out.write(numbers.csv, numbers.frame.to_csv(index=False))
    for machine, panels in per_machine.items():
        out.write(out_dir / pages[machine], html.system_page(
            out_dir, machine, loaded.systems[machine], measured.get(machine, {}), latest_commit.get(machine, ("", "")),
            panels, asv_link, asv_note, [p for p in loaded.problems if _machine_of(p) == machine],
            noisy_count(rows[rows.machine == machine]), in_cache_count(rows[rows.machine == machine])))
    data = ["tidy.csv", "summary.csv", "percent_of_peak.csv", "speedup.csv", "preparation.csv", "changes.csv",
            *(f"{s.name}.csv" for s in extra), "published_beside.csv", "problems.txt"]
    out.write(out_dir / "index.html", html.index_page(
        out_dir, len(loaded.table), overview, pages, latest_commit, cross, matched, asv_link, asv_note,
        loaded.problems, data))
    return {m: out_dir / page for m, page in pages.items()}
