"""The report page: one self-contained HTML file (inline CSS, relative figure and CSV links, no JS)."""

from __future__ import annotations

import math
from html import escape
from pathlib import Path
from typing import Any

import pandas as pd

from .figures import slug
from .studies import Study

CSS = """body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}
table{border-collapse:collapse;margin:.4em 0 1em}th,td{border:1px solid #ccc;padding:2px 6px;text-align:left}
th{background:#f2f2f2}td.n{text-align:right}.row{display:flex;flex-wrap:wrap;gap:1.5em;align-items:flex-start}
img{max-width:100%;border:1px solid #eee}section{border-top:2px solid #888;margin-top:2em}
.problems li{font-family:monospace;font-size:12px}"""


# Rates from the median sample; "best" from the fastest (STREAM's convention).
_PCT_HEADERS = {"gbs": "GB/s (median)", "pct_peak": "% theoretical", "pct_peak_best": "% theoretical (best)",
                "pct_measured_peak": "% measured", "gbs_counted": "GB/s (counted re-reads)",
                "pct_peak_counted": "% theoretical (counted re-reads)"}


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
    measured_rows = {f"{d} (best STREAM GB/s)": v for d, v in measured.items()}
    parts.append(_kv("measured peak", measured_rows or {"none": "no STREAM results"}))
    for key, title in (("threads", "thread settings"), ("software", "software versions")):
        if isinstance(record.get(key), dict):
            parts.append(_kv(title, record[key]))
    missing = "" if record else ("<p><b>No system record</b> (portabench.system missing or unreadable): "
                                 "no theoretical peaks; % of measured peak is shown instead.</p>")
    return missing + f'<div class="row">{"".join(parts)}</div>'


def _of(frame: pd.DataFrame, machine: str, device: str, kernel: str) -> pd.DataFrame:
    return frame[(frame.machine == machine) & (frame.device == device) & (frame.kernel == kernel)]


def _img(path: Path, out_dir: Path) -> str:
    rel = path.relative_to(out_dir).as_posix()
    return f'<div><img src="{escape(rel)}" alt="{escape(path.stem)}"></div>'


def page(out_dir: Path, n_rows: int, summary: pd.DataFrame, pct: pd.DataFrame, spd: pd.DataFrame,
         prep: pd.DataFrame, latest: dict[str, tuple[str, str]], systems: dict[str, dict[str, Any]],
         measured: dict[str, dict[str, float]], system_figs: dict[tuple, list[Path]],
         cross_figs: dict[str, list[Path]], studies: list[Study], problems: list[str], links: list[str]) -> str:
    """The whole page as a string; ``latest`` maps machine -> (commit, date) used for the figures."""
    csv = " · ".join(f'<a href="{escape(name)}">{escape(name)}</a>' for name in links)
    out = [f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>portabench report</title>"
           f"<style>{CSS}</style></head><body><main>",
           "<h1>portabench report: portable vs vendor</h1>",
           f"<p>{n_rows} timed results from {len(systems)} machine(s); figures and tables use, per machine, "
           f"each benchmark's latest commit and the largest size per kernel. Data: {csv}</p>",
           '<section id="summary"><h2>Across systems</h2>',
           "<p>Best % of peak over cases and variants of each family (of theoretical peak where known, "
           "else of the measured STREAM peak); geomean speedup of the best portable variant over the "
           "fastest vendor variant (&gt;1: portable faster).</p>", table(summary),
           '<div class="row">', *(_img(p, out_dir) for paths in cross_figs.values() for p in paths), "</div></section>"]
    for machine, record in systems.items():
        commit, date = latest.get(machine, ("", ""))
        out += [f'<section id="{escape(slug("m", machine))}"><h2>{escape(machine)}</h2>',
                f"<p>latest commit {escape(commit[:8])} ({escape(date)})</p>",
                "<h3>System</h3>", _system(record, measured.get(machine, {}))]
        for (m, device, kernel), paths in system_figs.items():
            if m != machine:
                continue
            p = _of(pct, m, device, kernel)[["case", "size", "variant", "family", "gbs", "pct_peak",
                                                "pct_peak_best", "pct_measured_peak", "gbs_counted", "pct_peak_counted"]]
            p = p.dropna(axis=1, how="all")  # the counted-re-reads model exists for some kernels only
            s = _of(spd, m, device, kernel)[["case", "size", "variant", "reference", "speedup"]]
            r = _of(prep, m, device, kernel)[["case", "size", "variant", "t_preparation_s", "t_kernel_s",
                                              "preparation_in_runs"]]
            out += [f"<h3>{escape(kernel)} on {escape(device)}</h3>", '<div class="row">',
                    *(_img(path, out_dir) for path in paths),
                    f"<div>{table(p.rename(columns=_PCT_HEADERS))}"
                    f"{table(s) if len(s) else '<p>no vendor/portable pair: no speedup</p>'}"
                    f"{'<h4>Preparation, in runs of the kernel</h4>' + table(r) if len(r) else ''}</div></div>"]
        for study in studies:
            for (m, device), paths in study.figures.items():
                if m != machine:
                    continue
                t = study.table[(study.table.machine == m) & (study.table.device == device)]
                t = t.drop(columns=[c for c in ("machine", "device") if c in t.columns]).dropna(axis=1, how="all")
                out += [f"<h3>{escape(study.title)} on {escape(device)}</h3><p>{escape(study.intro)} "
                        f'Numbers: <a href="{escape(study.name)}.csv">{escape(study.name)}.csv</a>.</p>',
                        '<div class="row">', *(_img(path, out_dir) for path in paths), f"<div>{table(t)}</div></div>"]
        out.append("</section>")
    items = "".join(f"<li>{escape(p)}</li>" for p in problems)
    out += ['<section id="problems"><h2>Problems (skipped)</h2>',
            f'<ul class="problems">{items}</ul>' if problems else "<p>none</p>",
            "</section></main></body></html>\n"]
    return "\n".join(out)

