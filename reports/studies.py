"""Studies beyond % of peak and speedup, each a table (CSV beside it) and a figure per system:

- pressure points (the paper [000]'s Figures 5-7): each perturbed variant's speedup over the
  same variant unperturbed, per case, with geometric means;
- launch policies (its Experiments 3-6): per case and variant, the best policy against the
  kernel's default one (``Kernel.default_launch_policy``);
- settings sweeps (GMRES group sizes, the MTTKRP GPU kernel's launch settings): every swept
  setting against the fastest of its sweep;
- roofline (its Figures 3-4), of the kernels that have one (``Kernel.has_roofline``): each
  variant's GFLOP/s against its arithmetic intensity under the kernel's two byte counts, below
  the system's roofs (theoretical peaks and the measured STREAM bandwidth).

Each kernel declares what it has (``Kernel``): the code here names no kernel.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from portabench.implementations import PortabenchError, get_kernel

from .figures import bar_chart, deferrable, slug
from .metrics import SYSTEM, case_rank, geomean, largest_size

PERTURBATION, POLICY = "perturbation=", "policy="


@dataclass
class StudyTable:
    """One study's table (written as ``name``.csv and .md) and its figure per (machine, device, kernel)."""

    name: str
    title: str
    intro: str
    table: pd.DataFrame
    figures: dict[tuple[str, str, str], Path] = field(default_factory=dict)


def _setting(rows: pd.DataFrame, prefix: str) -> pd.DataFrame:
    """Rows whose settings are one ``prefix``VALUE, with VALUE in column ``value``."""
    settings = rows.settings.fillna("")
    picked = rows[settings.str.startswith(prefix) & ~settings.str.contains(",")]
    return picked.assign(value=picked.settings.str[len(prefix):])


def _plain(rows: pd.DataFrame) -> pd.DataFrame:
    """Kernel rows at the variant's default settings (those the comparisons use)."""
    return rows[(rows.settings.fillna("") == "") & (rows.measure == "kernel")]


def pressure_points(rows: pd.DataFrame) -> pd.DataFrame:
    """t(unperturbed) / t(perturbed) per (system, kernel, case, size, variant, perturbation), and geomeans."""
    keys = SYSTEM + ["kernel", "case", "size", "variant"]
    plain = _plain(rows)[keys + ["time_s"]]
    perturbed = _setting(rows, PERTURBATION)[keys + ["value", "time_s"]].rename(
        columns={"value": "perturbation", "time_s": "t_perturbed_s"})
    both = perturbed.merge(plain.rename(columns={"time_s": "t_unperturbed_s"}), on=keys)
    both["speedup"] = both.t_unperturbed_s / both.t_perturbed_s
    group = SYSTEM + ["kernel", "size", "variant", "perturbation"]
    geo = both.groupby(group).speedup.agg(geomean).reset_index().assign(case="geomean")
    out = pd.concat([both, geo], ignore_index=True)
    out = out.assign(_rank=case_rank(out)).sort_values(group + ["_rank", "case"])
    return out[keys + ["perturbation", "t_unperturbed_s", "t_perturbed_s", "speedup"]].reset_index(drop=True)


def _default_policy(kernel: str, device: str) -> str:
    """The kernel's default launch policy on ``device`` (``Kernel.default_launch_policy``); "" where none."""
    try:
        return get_kernel(kernel).default_launch_policy(device) or ""
    except PortabenchError:
        return ""


def _has_roofline(kernel: str) -> bool:
    try:
        return get_kernel(kernel).has_roofline
    except PortabenchError:
        return False


def launch_policies(rows: pd.DataFrame) -> pd.DataFrame:
    """Per (system, kernel, case, size, variant): the default policy's time, the best policy and its speedup."""
    keys = SYSTEM + ["kernel", "case", "size", "variant"]
    swept = _setting(rows, POLICY)
    out = []
    for key, group in swept.groupby(keys, sort=False):
        policy = _default_policy(key[2], key[1])
        default = group[group.value == policy]
        best = group.loc[group.time_s.idxmin()]
        t_default = float(default.time_s.iloc[0]) if len(default) else np.nan
        out.append(dict(zip(keys, key), default_policy=policy,
                        t_default_s=t_default, best_policy=best.value, t_best_s=float(best.time_s),
                        speedup=t_default / float(best.time_s), n_policies=len(group)))
    frame = pd.DataFrame(out, columns=keys + ["default_policy", "t_default_s", "best_policy", "t_best_s",
                                              "speedup", "n_policies"])
    return frame.assign(_rank=case_rank(frame)).sort_values(keys[:3] + ["variant", "_rank"]).drop(columns="_rank")


def settings_sweeps(rows: pd.DataFrame) -> pd.DataFrame:
    """Per (system, kernel, case, size, variant) swept over settings other than a policy or a
    perturbation: each setting's time and % of peak, and t(fastest of the sweep) / t, a ratio within
    one benchmark's run. ``t_default_s`` is the same variant at its default settings, from the
    comparisons (which may come from another commit), or NaN."""
    keys = SYSTEM + ["kernel", "case", "size", "variant"]
    settings = rows.settings.fillna("")
    swept = rows[(rows.measure == "kernel") & (settings != "") & ~settings.str.startswith((PERTURBATION, POLICY))]
    default = _plain(rows)[keys + ["time_s"]].rename(columns={"time_s": "t_default_s"})
    out = swept.merge(default.drop_duplicates(keys), on=keys, how="left")
    out["relative_speed"] = out.groupby(keys).time_s.transform("min") / out.time_s
    columns = keys + ["settings", "time_s", "pct_peak", "relative_speed", "t_default_s"]
    out = out.assign(_rank=case_rank(out)).sort_values(keys[:3] + ["variant", "_rank", "size"], kind="stable")
    return out.reindex(columns=columns).reset_index(drop=True)


def roofline_points(rows: pd.DataFrame) -> pd.DataFrame:
    """GFLOP/s and intensity (flops per byte) under both byte counts, per unperturbed run of the kernels with a
    roofline (``Kernel.has_roofline``)."""
    picked = _plain(rows)
    picked = picked[picked.kernel.map(_has_roofline).astype(bool)]
    picked = largest_size(picked)
    return picked.assign(intensity=picked.flops / picked.bytes, intensity_counted=picked.flops / picked.bytes_counted)[
        SYSTEM + ["kernel", "case", "size", "variant", "family", "gflops", "intensity", "intensity_counted",
                  "peak_gflops", "peak_gbs", "measured_peak_gbs"]].reset_index(drop=True)


@deferrable
def _roofline_figure(points: pd.DataFrame, path: Path, colors: dict, title: str) -> Path:
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    first = points.iloc[0]
    grid = np.logspace(-3, 2, 200)
    for bandwidth, style, label in ((first.peak_gbs, "-", "theoretical bandwidth"),
                                    (first.measured_peak_gbs, "--", "measured STREAM bandwidth")):
        if bandwidth > 0:
            roof = grid * bandwidth if not first.peak_gflops > 0 else np.minimum(grid * bandwidth, first.peak_gflops)
            ax.plot(grid, roof, style, color="black", linewidth=1, label=f"{label} ({bandwidth:.4g} GB/s)")
    if first.peak_gflops > 0:
        ax.axhline(first.peak_gflops, color="grey", linewidth=0.8, label=f"FP64 peak ({first.peak_gflops:.4g} GFLOP/s)")
    for (variant, family), group in points.groupby(["variant", "family"], sort=True):
        color = colors.get(f"{variant} ({family})", "C0")
        ax.scatter(group.intensity, group.gflops, color=color, marker="o", s=22, label=f"{variant}: compulsory bytes")
        ax.scatter(group.intensity_counted, group.gflops, color=color, marker="x", s=22, label=f"{variant}: counted (Q)")
    ax.set(xscale="log", yscale="log", xlabel="arithmetic intensity (flop/byte)", ylabel="GFLOP/s", title=title)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False, fontsize=7)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path


def studies(rows: pd.DataFrame, fig_dir: Path, colors: dict) -> list[StudyTable]:
    """Every study with rows in ``rows`` (the latest results), its tables and figures."""
    out = []
    pressure = pressure_points(rows)
    if len(pressure):
        study = StudyTable("pressure_points", "Pressure points",
                      "Speedup of a deliberately perturbed portable variant over the same variant unperturbed "
                      "(no-atomics: plain adds; reuse: every B and Π read from row 0; both). An upper bound on "
                      "what removing that cost could buy; perturbed runs are wrong by design and appear nowhere else.",
                      pressure)
        for (machine, device, kernel), group in pressure.groupby(SYSTEM + ["kernel"]):
            data = group.assign(hue=group.variant + ": " + group.perturbation)
            hues = {h: c for h, c in zip(sorted(set(data.hue)), plt.get_cmap("tab10").colors * 3)}
            study.figures[(machine, device, kernel)] = bar_chart(
                data, "case", "speedup", "speedup over unperturbed (>1: the resource costs time)",
                f"{machine} {device}: {kernel} pressure points", fig_dir / f"{slug(machine, device, kernel)}-pressure.png",
                hues, line=1.0)
        out.append(study)
    launch = launch_policies(rows)
    if len(launch):
        study = StudyTable("launch_policies", "Launch policies",
                      "Per case and portable variant, the fastest launch policy (t: threads per block on GPUs, "
                      "threads on CPUs, 0 = all; v: nonzeros per thread, 0 = the variant's rule; b: blocks) "
                      "against the default policy: speedup = t(default) / t(best).", launch)
        for (machine, device, kernel), group in launch.groupby(SYSTEM + ["kernel"]):
            data = group.assign(hue=group.variant)
            hues = {h: c for h, c in zip(sorted(set(data.hue)), plt.get_cmap("tab10").colors)}
            study.figures[(machine, device, kernel)] = bar_chart(
                data, "case", "speedup", "best policy / default policy", f"{machine} {device}: {kernel} launch policies",
                fig_dir / f"{slug(machine, device, kernel)}-launch.png", hues, line=1.0)
        out.append(study)
    sweeps = settings_sweeps(rows)
    if len(sweeps):
        study = StudyTable("settings_sweeps", "Settings sweeps",
                      "A variant's own settings swept on one case (GMRES: systems per group m; MTTKRP's "
                      "segmented GPU kernel: nonzeros per warp and the staged factor): each setting's speed "
                      "relative to the fastest setting of the same sweep (1 = fastest); t_default_s is the "
                      "variant at its default settings in the comparisons.", sweeps)
        for (machine, device, kernel), group in sweeps.groupby(SYSTEM + ["kernel"]):
            data = group.assign(hue=group.variant + ": " + group.settings)
            hues = {h: c for h, c in zip(dict.fromkeys(data.hue), plt.get_cmap("tab20").colors * 3)}
            study.figures[(machine, device, kernel)] = bar_chart(
                data, "case", "relative_speed", "t(fastest setting) / t (1 = fastest)",
                f"{machine} {device}: {kernel} settings", fig_dir / f"{slug(machine, device, kernel)}-settings.png",
                hues, line=1.0)
        out.append(study)
    points = roofline_points(rows)
    if len(points):
        study = StudyTable("roofline", "Roofline",
                      "Each unperturbed variant and case: GFLOP/s against flops per byte under the compulsory "
                      "bytes (circles) and under the paper's Q, which counts re-reads that caches serve (crosses).",
                      points)
        for (machine, device, kernel), group in points.groupby(SYSTEM + ["kernel"]):
            study.figures[(machine, device, kernel)] = _roofline_figure(
                group, fig_dir / f"{slug(machine, device, kernel)}-roofline.png", colors,
                f"{machine} {device}: {kernel} roofline")
        out.append(study)
    return out
