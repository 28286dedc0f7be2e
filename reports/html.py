"""The report's pages: ``index.html`` (every system side by side) and one page per system, each
self-contained (inline CSS, relative links to figures and CSV files, no JavaScript, no network)."""

from __future__ import annotations

import math
from html import escape
from pathlib import Path
from typing import Any

import pandas as pd

from portabench.harness.statistics import CONTENDED
from portabench.implementations import list_kernels
from portabench.implementations.model import IN_CACHE_FACTOR

from .figures import MEASURED_MARK
from .metrics import PORTABLE_PCT, SPEEDUP, VENDOR_PCT, WORST_CASE, WORST_SPEEDUP, best_per_case, geomean
from .panels import Numbers, Panel
from .results import CACHE_NAMES, SPREAD_IQR_PCT

CSS = """body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}
table{border-collapse:collapse;margin:.4em 0 1em}th,td{border:1px solid #ccc;padding:2px 6px;text-align:left}
th{background:#f2f2f2}td.n{text-align:right}.row{display:flex;flex-wrap:wrap;gap:1.5em;align-items:flex-start}
img{max-width:100%;border:1px solid #eee}section{border-top:2px solid #888;margin-top:2em}
.problems li{font-family:monospace;font-size:12px}.panel{margin:1.2em 0 2em}
nav a{margin-right:.8em}td q{font-style:italic;color:#555}.note{color:#555}"""


# Rates from the median sample; "best" from the fastest (STREAM's convention).
HEADERS = {"gbs": "GB/s (median)", "pct_peak": "% theoretical", "pct_peak_best": "% theoretical (best)",
           "pct_measured_peak": "% measured", "gbs_counted": "GB/s (counted re-reads)",
           "pct_peak_counted": "% theoretical (counted re-reads)", "pct": "% of peak", "t_fastest_vendor_s": "t vendor (s)",
           "t_portable_s": "t portable (s)", "fastest_vendor": "fastest vendor", "time_s": "t (s)",
           "systems_per_s": "systems / s", "block_size": "bs", "t_preparation_s": "t preparation (s)",
           "t_kernel_s": "t kernel (s)", "preparation_in_runs": "runs of the kernel", "noisy": "noisy",
           "in_cache": "in cache", "t_before_s": "t before (s)", "t_after_s": "t after (s)",
           "change_pct": "change %", "p_value": "p (t-test)", "noise_floor_pct": "detects changes ≥ % (this machine)",
           "aggregate_gbs": "GB/s, devices together (median)", "aggregate_peak_gbs": "peak GB/s, devices together",
           "efficiency": "parallel efficiency", "problem_size": "whole problem"}
IDENTITY = ["machine", "device", "kernel"]  # where one value throughout, the panel's title says it
MEASURED = MEASURED_MARK.strip()
NOISY_MARK = "⚠ noisy"  # in a table's noisy column, on the pages and in the Markdown tables


IN_CACHE_MARK = "▣ in cache"  # in a table's in_cache column: no % of peak for that row


def with_noisy_marks(frame: pd.DataFrame) -> pd.DataFrame:
    """The ``noisy`` and ``in_cache`` columns as visible marks (blank where the samples were tight, or
    the working set beyond the caches)."""
    for column, mark in (("noisy", NOISY_MARK), ("in_cache", IN_CACHE_MARK)):
        if column in frame.columns:
            frame = frame.assign(**{column: frame[column].map(lambda n, mark=mark: mark if n == 1 else "")})
    return frame


def _fmt(value: Any) -> tuple[str, bool]:
    """Display text of a cell, and whether it is a number (right-aligned)."""
    if isinstance(value, bool) or value is None:
        return ("" if value is None else str(value)), False
    if isinstance(value, float):
        return ("–" if math.isnan(value) else f"{value:.4g}"), True
    if isinstance(value, int):
        return str(value), True
    if isinstance(value, list):
        return "; ".join(_fmt(v)[0] for v in value), False
    if isinstance(value, dict):
        shown = {k: v for k, v in value.items() if v is not None}
        return ", ".join(f"{k}={_fmt(v)[0]}" for k, v in shown.items()) or "(none set)", False
    return str(value), False


def table(frame: pd.DataFrame) -> str:
    """An escaped HTML table of a DataFrame (no index)."""
    head = "".join(f"<th>{escape(str(c))}</th>" for c in frame.columns)
    body = []
    for row in frame.itertuples(index=False):
        cells = [_fmt(v.item() if hasattr(v, "item") else v) for v in row]
        body.append("<tr>" + "".join(f'<td{" class=n" if num else ""}>{escape(text)}</td>' for text, num in cells) + "</tr>")
    return f"<table><tr>{head}</tr>{''.join(body)}</table>"


def _kv(title: str, record: dict[str, Any]) -> str:
    rows = pd.DataFrame({"key": list(record), "value": [_fmt(v)[0] for v in record.values()]})
    return f"<div><h4>{escape(title)}</h4>{table(rows)}</div>"


def _system(record: dict[str, Any], measured: dict[str, float]) -> str:
    """Everything the machine's record holds, shown as it is (keys differ between versions)."""
    parts = []
    if record:
        general = {k: v for k, v in record.items() if k not in ("cpu", "gpus", "threads", "software")}
        parts.append(_kv("system", general))
        if isinstance(record.get("cpu"), dict):
            parts.append(_kv("CPU", record["cpu"]))
        for i, gpu in enumerate(g for g in record.get("gpus") or [] if isinstance(g, dict)):
            parts.append(_kv(f"GPU {gpu.get('index', i)}", gpu))
    measured_rows = {f"{d} (GB/s: best STREAM median of any run)": v for d, v in measured.items()}
    parts.append(_kv("measured peak", measured_rows or {"none": "no STREAM results"}))
    for key, title in (("threads", "thread settings"), ("software", "software versions")):
        if isinstance(record.get(key), dict):
            parts.append(_kv(title, record[key]))
    missing = "" if record else ("<p><b>No system record</b> (portabench.system missing or unreadable): "
                                 "no theoretical peaks; % of measured peak is shown instead.</p>")
    return missing + f'<div class="row">{"".join(parts)}</div>'


def _head(title: str) -> str:
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>'
            f"<style>{CSS}</style></head><body><main>")


def _link(href: str, text: str) -> str:
    return f'<a href="{escape(href)}">{escape(text)}</a>'


def _asv(asv_link: str | None, asv_note: str) -> str:
    if asv_link is None:
        return f'<p class="note">History across commits: {escape(asv_note)}</p>'
    return f"<p>History across commits: {_link(asv_link, 'asv publish pages')} ({escape(asv_note)}).</p>"


def _published(rows: pd.DataFrame, with_system: bool) -> str:
    """The papers' figures and, beside each, the suite's number for the same quantity on each system
    (one figure's rows share its cells)."""
    if rows.empty:
        return ""
    out = ["<h4>Published figures beside this suite</h4><table><tr><th>what</th><th>paper</th>"
           "<th>where and what the paper measured</th>", "<th>system</th>" if with_system else "",
           "<th>this suite</th></tr>"]
    keys = ["kernel", "device", "quantity", "detail", "paper", "source", "context"]  # one published figure
    for _, group in rows.groupby(keys, sort=False, dropna=False):
        first = group.iloc[0]
        what = first.quantity.replace("_", " ") + (f" ({first.detail.replace('|', ', ')})" if first.detail else "")
        span = f" rowspan={len(group)}" if len(group) > 1 else ""
        for i, r in enumerate(group.itertuples(index=False)):
            published = (f"<td{span}>{escape(what)}</td><td class=n{span}>{escape(r.paper)}</td><td{span}>"
                         f"{escape(r.context)}; {escape(r.source)}: <q>{escape(r.quote)}</q></td>") if i == 0 else ""
            system = f"{r.machine} {r.system_device}".strip() or "–"
            out.append(f"<tr>{published}" + (f"<td>{escape(system)}</td>" if with_system else "")
                       + f"<td>{escape(r.suite)}</td></tr>")
    out.append("</table>")
    return "".join(out)


def with_unit_in_header(frame: pd.DataFrame) -> pd.DataFrame:
    """One size unit throughout (a kernel's table): said in the size column's header, "size (nonzeros)",
    instead of in a column of its own; several (a table of kernels) keep their ``size_unit`` column."""
    if "size_unit" not in frame.columns or frame.size_unit.nunique() != 1:
        return frame
    at = frame.columns.get_loc("size_unit")
    size = frame.columns[at - 1]  # with_size_unit puts the unit right after the size ("size", or GMRES' "N")
    unit = frame.size_unit.iloc[0]
    return frame.drop(columns="size_unit").rename(columns={size: f"{HEADERS.get(size, size)} ({unit})"})


def _numbers(n: Numbers, out_dir: Path) -> str:
    said = [c for c in IDENTITY if c in n.frame.columns and n.frame[c].nunique() <= 1]
    shown = with_noisy_marks(with_unit_in_header(n.frame.drop(columns=said))).rename(columns=HEADERS)
    return (f"<div><h4>{escape(n.caption)} ({_link(n.csv.relative_to(out_dir).as_posix(), 'CSV')})</h4>"
            f"{table(shown)}</div>")


def panel(p: Panel, out_dir: Path) -> str:
    """One block: each figure with its numbers beside it (a table, and a link to their CSV), then the
    tables without a figure, then the published figures measuring the same thing."""
    rows = []
    for i, image in enumerate(p.images):
        numbers = _numbers(p.numbers[i], out_dir) if i < len(p.numbers) else ""
        rows.append(f'<div class="row"><div><img src="{escape(image.relative_to(out_dir).as_posix())}" '
                    f'alt="{escape(image.stem)}"></div>{numbers}</div>')
    rest = "".join(_numbers(n, out_dir) for n in p.numbers[len(p.images):])
    return (f'<div class="panel" id="{escape(p.anchor)}"><h3>{escape(p.title)}</h3>'
            + (f"<p>{escape(p.intro)}</p>" if p.intro else "") + "".join(rows)
            + (f'<div class="row">{rest}</div>' if rest else "") + f"{_published(p.published, False)}</div>")


def _problems(problems: list[str]) -> str:
    items = "".join(f"<li>{escape(p)}</li>" for p in problems)
    return ('<section id="problems"><h2>Problems (skipped)</h2>'
            + (f'<ul class="problems">{items}</ul>' if problems else "<p>none</p>") + "</section>")


def _cell(value: Any, mark: str = "", title: str = "", small: str = "") -> str:
    """A number's cell: its text, a mark after it, a tooltip and a small note; empty where it is NaN."""
    if not (isinstance(value, (int, float)) and value == value):
        return "<td></td>"
    tip = f' title="{escape(title)}"' if title else ""
    note = f"<br><small>{escape(small)}</small>" if small else ""
    return f"<td class=n{tip}>{escape(_fmt(float(value))[0])}{mark}{note}</td>"


def systems_table(summary: pd.DataFrame, pages: dict[str, str]) -> str:
    """Kernels x systems: portable and vendor % of peak, the geomean speedup and the worst case's speedup, all
    over the same cases, with a last row of each system's geometric mean over kernels. ``summary`` is
    ``metrics.summary``'s long table."""
    systems = sorted(set(zip(summary.machine, summary.device)))
    head1 = "".join(f'<th colspan=4>{_link(pages[m], m)} {escape(d)}</th>' for m, d in systems)
    head2 = "<th>portable %</th><th>vendor %</th><th>speedup</th><th>worst</th>" * len(systems)
    kernels = [k for k in list_kernels() if k in set(summary.kernel)]
    body = []
    for kernel in kernels:
        cells = []
        for machine, device in systems:
            r = summary[(summary.kernel == kernel) & (summary.machine == machine) & (summary.device == device)]
            if r.empty:
                cells.append("<td></td>" * 4)
                continue
            r = r.iloc[0]
            mark = MEASURED if r["peak basis"] == "measured" else ""
            over = (f"{r['portable variant']}, over {_fmt(r['cases'])[0]} case(s)"
                    if isinstance(r["portable variant"], str) else "")
            vendor = f"the fastest vendor variant per case (mostly {r['fastest vendor variant']})"
            worst = str(r[WORST_CASE])
            if (best := best_per_case(r)) is not None:
                worst += f"; best portable per case: {_fmt(best[0])[0]}, {best[1]}"
            cells += [_cell(r[PORTABLE_PCT], mark, over), _cell(r[VENDOR_PCT], mark, vendor),
                      _cell(r[SPEEDUP], "", f"{over}, over {vendor}"), _cell(r[WORST_SPEEDUP], "", over, worst)]
        body.append(f"<tr><th>{escape(kernel)}</th>{''.join(cells)}</tr>")
    geo = []
    for machine, device in systems:
        s = summary[(summary.machine == machine) & (summary.device == device)][SPEEDUP].dropna()
        geo.append(f"<td></td><td></td>{_cell(geomean(s)) if len(s) else '<td></td>'}<td></td>")
    body.append(f"<tr><th>geomean over kernels</th>{''.join(geo)}</tr>")
    return (f"<table><tr><th rowspan=2>kernel</th>{head1}</tr><tr>{head2}</tr>{''.join(body)}</table>"
            '<p class="note">Per kernel and system, over the same cases: those at the kernel\'s largest size beyond '
            "the caches (all of them where every case is in cache, with no % of peak then). "
            "<b>portable %</b>: the geometric mean over these cases of the % of peak of one portable variant, the "
            "one with the highest geomean speedup (among those that ran the most cases; its name in the tooltip). "
            "<b>vendor %</b>: the geometric mean over the same cases of the fastest vendor variant's % of peak in "
            "each case. <b>speedup</b>: the geometric mean over the same cases of that portable variant's speedup "
            "over the fastest vendor variant in each case (&gt;1: portable faster), so speedup = portable % / "
            "vendor %. <b>worst</b>: its smallest speedup among these cases, and which case; where another portable "
            "variant is faster in some case, also the smallest speedup when each case takes its fastest portable "
            "variant. "
            f"{MEASURED}: % of the measured peak (the best median STREAM rate of any of the machine's runs), "
            "the theoretical one being unknown.</p>")


def index_page(out_dir: Path, n_rows: int, summary: pd.DataFrame, pages: dict[str, str],
               latest: dict[str, tuple[str, str]], cross: list[Panel], beside: pd.DataFrame,
               asv_link: str | None, asv_note: str, problems: list[str], links: list[str]) -> str:
    """The site's front page: every system side by side. ``pages`` maps machine -> its page's file name."""
    data = " · ".join(_link(name, name) for name in links)
    systems = "".join(f"<li>{_link(page, machine)}: latest commit {escape(latest.get(machine, ('', ''))[0][:8])} "
                      f"({escape(latest.get(machine, ('', ''))[1])})</li>" for machine, page in pages.items())
    return "\n".join([
        _head("portabench report"), "<h1>portabench report: portable vs vendor</h1>",
        f"<p>{n_rows} timed results from {len(pages)} machine(s); figures and tables use, per machine, each "
        f"benchmark's latest commit at each size and the largest size per kernel. Data: {data}</p>",
        _asv(asv_link, asv_note), f"<h2>Systems</h2><ul>{systems}</ul>",
        '<section id="summary"><h2>Across systems</h2>', systems_table(summary, pages), "</section>",
        '<section id="kernels"><h2>Each kernel on every system</h2>', *(panel(p, out_dir) for p in cross), "</section>",
        '<section id="published"><h2>Published figures</h2><p>Numbers the papers state (<code>reference/published.csv'
        "</code>, with their sources), beside this suite's number for the same quantity on each system where it "
        "measures the same thing.</p>", _published(beside, True), "</section>",
        _problems(problems), "</main></body></html>\n"])


def _noise(noisy: tuple[int, int]) -> str:
    n_noisy, n_rows = noisy
    return (f'<p class="note">{n_noisy} of {n_rows} results noisy: their samples\' interquartile range is above '
            f"{SPREAD_IQR_PCT:g} % of their median, or other processes took {100 * CONTENDED:.0f} % or more of the "
            f"CPU while they ran (marked {NOISY_MARK} in the tables; a speedup is noisy when either of its times "
            "is).</p>")


def _in_cache(in_cache: dict[str, tuple[int, int, float]]) -> str:
    """One line per device: how many results are in cache, under which cache size."""
    lines = []
    for device, (n_cached, n_rows, size) in sorted(in_cache.items()):
        cache = CACHE_NAMES.get(device, "cache")
        if size == size:
            limit = f"{IN_CACHE_FACTOR}x its {cache} of {size / 2**20:.4g} MiB"
            lines.append(f'<p class="note">{device}: {n_cached} of {n_rows} results in cache: their working set (the '
                         f"work model's compulsory bytes) is below {limit}, so their GB/s may be cache bandwidth; they "
                         f"have no % of peak (marked {IN_CACHE_MARK} in the tables), their times and speedups "
                         "stand.</p>")
        else:
            lines.append(f'<p class="note">{device}: {cache} size unknown (not in the system record): no result is '
                         "marked in cache, though some may be.</p>")
    return "".join(lines)


def system_page(out_dir: Path, machine: str, record: dict[str, Any], measured: dict[str, float],
                latest: tuple[str, str], panels: list[Panel], asv_link: str | None, asv_note: str,
                problems: list[str], noisy: tuple[int, int] = (0, 0),
                in_cache: dict[str, tuple[int, int, float]] | None = None) -> str:
    """One machine's page: every panel of its results, then its record (peaks, software, threads).
    ``noisy``: how many of the machine's results (latest commit) were noisy, of how many; ``in_cache``:
    per device, how many were in cache, of how many, and the cache's bytes (NaN: unknown)."""
    contents = "".join(_link(f"#{p.anchor}", p.title) for p in panels) + _link("#system", "System")
    return "\n".join([
        _head(f"portabench: {machine}"), f"<nav>{_link('index.html', '← all systems')}</nav>",
        f"<h1>{escape(machine)}</h1>", f"<p>latest commit {escape(latest[0][:8])} ({escape(latest[1])})</p>",
        _noise(noisy), _in_cache(in_cache or {}), _asv(asv_link, asv_note), f"<nav>{contents}</nav>",
        '<section id="results"><h2>Results</h2>', *(panel(p, out_dir) for p in panels), "</section>",
        '<section id="system"><h2>System</h2>', _system(record, measured), "</section>",
        _problems(problems), "</main></body></html>\n"])
