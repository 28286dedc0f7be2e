"""``build_report``: results directory in, report directory (tables, figures, index.html) out."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from . import html
from .figures import cross_figures, palette, system_figures
from .metrics import largest_size, latest, percent_of_peak, preparation, speedup, summary, with_basis
from .results import COLUMNS, load_results, measured_peaks_by_machine
from .studies import studies


@dataclass
class ReportSummary:
    """What ``build_report`` did: rows used, machines, what it skipped and why, files written."""

    n_rows: int
    n_skipped: int
    machines: list[str]
    problems: list[str]
    paths: list[Path] = field(default_factory=list)

    @property
    def index(self) -> Path:
        return next(p for p in self.paths if p.name == "index.html")


def build_report(results_dir: Path, out_dir: Path) -> ReportSummary:
    """Write the report of every machine in the asv ``results_dir`` into ``out_dir``.

    Raises ``PortabenchError`` (one line) when there is no results directory or nothing in it;
    every unusable file or row is skipped and listed in ``problems`` instead.
    """
    loaded = load_results(Path(results_dir))
    out_dir, table = Path(out_dir), loaded.table
    fig_dir = out_dir / "figures"
    fig_dir.mkdir(parents=True, exist_ok=True)
    paths: list[Path] = []

    def write(name: str, text: str) -> None:
        (out_dir / name).write_text(text)
        paths.append(out_dir / name)

    rows = latest(table)
    # Sweeps of a variant's settings (e.g. GMRES group sizes) stay in tidy.csv, out of the comparisons.
    # Preparation times (sorting, scatter matrices) are shown as multiples of a run, not as rates.
    compared = rows[(rows.settings.fillna("") == "") & (rows.measure == "kernel")]
    pct, spd, prep = percent_of_peak(compared), speedup(compared), preparation(rows)
    write("tidy.csv", table[COLUMNS].to_csv(index=False))
    for name, frame in (("percent_of_peak", pct), ("speedup", spd), ("preparation", prep)):
        write(f"{name}.csv", frame.to_csv(index=False))
        write(f"{name}.md", frame.to_markdown(index=False, floatfmt=".4g") + "\n")
    write("problems.txt", "".join(p + "\n" for p in loaded.problems))

    # Figures show one size per (machine, device, kernel): the largest, beyond the caches.
    colors = palette(table)
    shown_pct, shown_spd = with_basis(largest_size(pct)), largest_size(spd)
    system_figs = system_figures(shown_pct, shown_spd, fig_dir, colors)
    cross_figs = cross_figures(shown_pct, shown_spd, fig_dir, colors)
    paths += [p for ps in [*system_figs.values(), *cross_figs.values()] for p in ps]
    extra = studies(rows, fig_dir, colors)
    for study in extra:
        write(f"{study.name}.csv", study.table.to_csv(index=False))
        write(f"{study.name}.md", study.table.to_markdown(index=False, floatfmt=".4g") + "\n")
        paths += [p for ps in study.figures.values() for p in ps]

    commits = rows.sort_values("date").groupby("machine")[["commit", "date"]].last()
    latest_commit = {m: (c, pd.Timestamp(d).strftime("%Y-%m-%d %H:%M UTC")) for m, (c, d) in commits.iterrows()}
    write("index.html", html.page(
        out_dir, len(table), summary(pct, spd), pct, spd, prep, latest_commit, loaded.systems,
        measured_peaks_by_machine(table),
        system_figs, cross_figs, extra, loaded.problems,
        ["tidy.csv", "percent_of_peak.csv", "percent_of_peak.md", "speedup.csv", "speedup.md", "preparation.csv",
         "preparation.md", *(f"{s.name}.{ext}" for s in extra for ext in ("csv", "md")), "problems.txt"]))
    return ReportSummary(len(table), loaded.n_skipped, sorted(set(table.machine)), loaded.problems, paths)
