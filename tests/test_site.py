"""The report site from several machines' results and the papers' published figures."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from portabench.implementations import PortabenchError, list_kernels
from portabench.reference.published import QUANTITIES, load_published
from portabench.reports import build_report
from test_reports import CPU_BENCH, CPU_TIMES, N_CPU, asv_entry, parse_site, write_results

REPO = Path(__file__).resolve().parents[1]
MACHINES = ("cpu-2core", "h100")


# ---------- many machines: one results directory, one report ----------

@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object]:
    """The README's recipe: each machine's results/<machine>/ copied into one results directory."""
    root = tmp_path_factory.mktemp("merged") / "results"
    for machine in MACHINES:
        shutil.copytree(REPO / "results" / machine, root / machine)
    asv_html = root.parent / "html"  # what `asv publish` would have written
    asv_html.mkdir()
    (asv_html / "index.html").write_text("<!DOCTYPE html><title>asv</title>")
    out = root.parent / "report"
    return out, build_report(root, out, asv_html=asv_html)


def test_every_machine_has_its_page_and_a_column_on_the_index(site) -> None:
    out, summary = site
    assert summary.machines == list(MACHINES)
    pages = parse_site(out)  # well formed, every src and href to a file that exists, nothing remote
    assert set(pages) == {"index.html", *(f"system-{m}.html" for m in MACHINES)}
    index = (out / "index.html").read_text()
    for machine in MACHINES:
        assert f'href="system-{machine}.html"' in index
        page = (out / f"system-{machine}.html").read_text()
        assert f"<h1>{machine}</h1>" in page and 'href="index.html"' in page
    # The index table has a column group per system: the H100 holds two (its CPU and its GPU).
    assert index.count("<th colspan=4>") == 3 and "geomean over kernels" in index


def test_every_figure_has_its_numbers_beside_it(site) -> None:
    out, _ = site
    for name, page in parse_site(out).items():
        images = [r for r in page.refs if r.endswith(".png")]
        tables = {r for r in page.refs if r.startswith("figures/") and r.endswith(".csv")}
        assert images or name == "index.html"
        for image in images:
            assert image[:-4] + ".csv" in tables, (name, image)
            assert len(pd.read_csv(out / (image[:-4] + ".csv"))) > 0
    # The H100's Φ has its roofline; the 2-core VM's its pressure points and launch policies.
    assert {"figures/h100-gpu-phi-roofline.png", "figures/h100-gpu-gmres-throughput.png"} <= set(
        parse_site(out)["system-h100.html"].refs)
    assert {"figures/cpu-2core-cpu-phi-pressure.png", "figures/cpu-2core-cpu-phi-launch.png"} <= set(
        parse_site(out)["system-cpu-2core.html"].refs)


def test_pages_link_asv_publish_relative_to_themselves(site, tmp_path: Path) -> None:
    out, _ = site
    for name in ("index.html", "system-h100.html"):
        assert '<a href="../html/index.html">asv publish pages</a>' in (out / name).read_text()
    # Without asv publish's output: said so, and no dead link.
    root = tmp_path / "results"
    write_results(root / "cpu-box", "a" * 40, 1_800_000_000_000, {CPU_BENCH: asv_entry(CPU_TIMES, N_CPU)})
    build_report(root, tmp_path / "out", asv_html=tmp_path / "nowhere")
    text = (tmp_path / "out" / "index.html").read_text()
    assert "no asv publish pages at" in text and "run `asv publish`" in text and "asv publish pages</a>" not in text


def test_published_figures_stand_beside_the_suites(site) -> None:
    out, _ = site
    beside = pd.read_csv(out / "published_beside.csv")
    stream = beside[(beside.quantity == "pct_peak_mean") & (beside.machine == "h100") & (beside.system_device == "gpu")]
    assert len(stream) == 1 and stream.paper.iloc[0] == "50 %" and "% of theoretical peak" in stream.suite.iloc[0]
    # The suite's number: the mean over copy, scale, add and triad of the raw kernels' % of peak.
    pct = pd.read_csv(out / "percent_of_peak.csv")
    raw = pct[(pct.machine == "h100") & (pct.variant == "cupy-rawkernel") & pct.case.isin(["copy", "scale", "add", "triad"])]
    assert stream.suite_value.iloc[0] == pytest.approx(raw.pct_peak.mean())
    launch = beside[(beside.quantity == "launch_speedup_mean") & (beside.machine == "cpu-2core")]
    policies = pd.read_csv(out / "launch_policies.csv")
    policies = policies[(policies.machine == "cpu-2core") & (policies.kernel == "phi")]
    assert launch.paper.tolist() == ["2.25×"] and len(policies) > 1
    assert launch.suite_value.iloc[0] == pytest.approx(float(np.exp(np.log(policies.speedup).mean())))
    assert "Kokkos achieves on average approximately 50%" in (out / "index.html").read_text()


# ---------- the papers' published figures ----------

def test_every_published_number_is_in_its_quote() -> None:
    """No number without the sentence it comes from: a guard against figures nobody published."""
    # "the team approach can double the achieved throughput"; "up to 80% on CPUs": a speedup of 1.8
    words = {2.0: "double", 1.8: "up to 80%"}
    rows = load_published()
    assert set(rows.quantity) <= set(QUANTITIES) and len(rows) >= 20
    for row in rows.itertuples():
        assert re.match(r"00[0-4] ", row.source), row.source
        for number in (row.value, row.low, row.high):
            if number == number:
                stated = re.findall(r"\d+(?:\.\d+)?", row.quote)
                assert any(float(s) == number for s in stated) or words.get(number, "@") in row.quote, (number, row.quote)


@pytest.mark.parametrize("change, needle", [
    (("quantity", "speedup_mean"), "unknown quantity"),
    (("quote", ""), "empty quote"),
    (("low", "3"), "low 3.0 above high"),
    (("kernel", "spmv"), "unknown kernel"),
])
def test_a_bad_published_row_is_a_one_line_error(tmp_path: Path, change: tuple[str, str], needle: str) -> None:
    rows = pd.read_csv(REPO / "reference" / "published.csv", dtype=str, keep_default_na=False)
    column, value = change
    rows.loc[4, column] = value
    if column == "low":
        rows.loc[4, "high"] = "2"
    path = tmp_path / "published.csv"
    rows.to_csv(path, index=False)
    with pytest.raises(PortabenchError, match=needle) as err:
        load_published(path, kernels=list_kernels())
    assert f"{path}:6:" in str(err.value) and "\n" not in str(err.value)
