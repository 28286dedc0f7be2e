"""Hardware detection and theoretical peaks, without a GPU: formulas, fixtures, the table, peaks files."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from portabench.implementations.gpu import cupy_unavailable
from portabench.implementations.model import PortabenchError
from portabench.implementations import hardware as hw
from portabench.reference.systems import load_systems, match_system

E5_MODEL = "Intel(R) Xeon(R) CPU E5-2690 v4 @ 2.60GHz"


def cpuinfo(model: str, vendor: str, flags: str, sockets: int, cores: int, threads: int) -> str:
    """A /proc/cpuinfo text in the x86 layout: one block per logical CPU."""
    blocks, n = [], 0
    for s in range(sockets):
        for t in range(threads):
            for c in range(cores):
                blocks.append(f"processor\t: {n}\nvendor_id\t: {vendor}\nmodel name\t: {model}\n"
                              f"physical id\t: {s}\nsiblings\t: {cores * threads}\ncore id\t\t: {c}\n"
                              f"cpu cores\t: {cores}\nflags\t\t: {flags}\n")
                n += 1
    return "\n".join(blocks)


INTEL = cpuinfo(E5_MODEL, "GenuineIntel", "fpu sse sse2 sse4_1 sse4_2 avx fma avx2 bmi2", 2, 3, 2)
AMD = cpuinfo("AMD EPYC 9654 96-Core Processor", "AuthenticAMD",
              "fpu sse4_2 avx fma avx2 avx512f avx512dq hypervisor", 1, 2, 2)
A64FX = "\n".join(f"processor\t: {i}\nBogoMIPS\t: 200.00\nFeatures\t: fp asimd sve\n"
                  f"CPU implementer\t: 0x46\nCPU architecture: 8\nCPU part\t: 0x001\n" for i in range(4))


def sysfs(root: Path, ids: list[tuple[int, int]], llc: str | None = None) -> Path:
    """A fake /sys/devices/system/cpu: cpuN/topology for each (package, core), cpu0's L3 size."""
    for n, (pkg, core) in enumerate(ids):
        topo = root / f"cpu{n}" / "topology"
        topo.mkdir(parents=True)
        (topo / "physical_package_id").write_text(f"{pkg}\n")
        (topo / "core_id").write_text(f"{core}\n")
    for index, size in (("index0", "32K"), ("index2", "1024K"), ("index3", llc)):
        if size:
            (root / "cpu0/cache" / index).mkdir(parents=True)
            (root / "cpu0/cache" / index / "size").write_text(size + "\n")
    return root


H100_PROPS = {"name": b"NVIDIA H100 80GB HBM3", "major": 9, "minor": 0, "multiProcessorCount": 132,
              "l2CacheSize": 52428800, "totalGlobalMem": 85031714816}  # CUDA 13: no clock fields
H100_ATTRS = {"MemoryClockRate": 2619000, "GlobalMemoryBusWidth": 5120, "ClockRate": 1980000,
              "MultiProcessorCount": 132, "L2CacheSize": 52428800}


# ---------------------------------------------------------------- formulas

def test_dram_bandwidth_h100() -> None:
    assert hw.dram_bandwidth_gbs(2619000, 5120) == pytest.approx(3352.32)
    assert hw.dram_bandwidth_gbs(1000000, 4096) == pytest.approx(1024.0)  # MI50 HBM2


def test_fp64_peak_by_architecture() -> None:
    h100 = hw.fp64_peak_gflops(132, 1980000, "9.0")
    assert h100 == pytest.approx(33454.08) and round(h100 / 1000, 2) == 33.45
    assert hw.fp64_peak_gflops(132, 1980000, (9, 0)) == h100
    assert hw.fp64_peak_gflops(80, 1530000, "7.0") == pytest.approx(7833.6)  # V100 SXM2
    assert hw.fp64_peak_gflops(13, 875000, "3.7") == pytest.approx(1456.0)  # one K80 die
    assert hw.fp64_peak_gflops(82, 1695000, "8.6") == pytest.approx(555.96)  # consumer: 2 units/SM
    assert hw.fp64_peak_gflops(170, 2400000, "12.0") == pytest.approx(1632.0)
    assert hw.fp64_peak_gflops(60, 1725000, "gfx906") == pytest.approx(6624.0)  # MI50
    assert hw.fp64_peak_gflops(132, 1980000, "1.0") is None
    assert hw.fp64_peak_gflops(132, None, "9.0") is None


# ---------------------------------------------------------------- table

def test_table_e5_2690_v4_row() -> None:
    row = match_system("cpu", E5_MODEL)
    assert row is not None and row["name"] == "Intel Xeon E5-2690 v4"
    assert (row["peak_bandwidth_gbs"], row["peak_fp64_gflops"], row["sockets"]) == (153.6, 1164.8, 2)
    assert row["peak_fp64_gflops"] == pytest.approx(2.6 * 14 * 16 * 2)
    assert "paper [000]" in row["source"]


def test_table_matching_is_specific() -> None:
    assert match_system("cpu", "AMD EPYC") is None
    assert match_system("gpu", E5_MODEL) is None
    assert match_system("cpu", "AMD EPYC 7452 32-Core Processor")["peak_bandwidth_gbs"] == 409.6
    assert match_system("cpu", "POWER9, altivec supported")["name"].startswith("IBM POWER9")
    assert match_system("gpu", "NVIDIA H100 PCIe")["name"] == "NVIDIA H100 PCIe"
    assert match_system("gpu", "NVIDIA H100 80GB HBM3")["peak_bandwidth_gbs"] == 3352
    assert match_system("gpu", "NVIDIA A100 80GB PCIe")["peak_bandwidth_gbs"] == 1935
    assert match_system("gpu", "NVIDIA A100-SXM4-80GB")["peak_bandwidth_gbs"] == 2039
    assert match_system("gpu", "Tesla V100S-PCIE-32GB")["name"] == "NVIDIA V100S PCIe"
    assert match_system("gpu", "NVIDIA GH200 480GB") is None  # not an H200


def test_table_rows_are_well_formed() -> None:
    rows = load_systems()
    assert {r["kind"] for r in rows} == {"cpu", "gpu"} and len(rows) >= 17
    for r in rows:
        re.compile(r["match"])
        assert r["source"] and r["sockets"] >= 1 and r["peak_bandwidth_gbs"] > 0
        assert r["peak_fp64_gflops"] is None or r["peak_fp64_gflops"] > 0


# ---------------------------------------------------------------- CPU

def test_intel_dual_socket_from_cpuinfo(tmp_path: Path) -> None:
    cpu = hw.detect_cpu(INTEL, sysfs_cpu=tmp_path)  # empty sysfs: topology from cpuinfo ids
    assert (cpu.vendor, cpu.sockets, cpu.physical_cores, cpu.logical_cpus) == ("Intel", 2, 6, 12)
    assert cpu.isa_flags == ["sse4_2", "avx", "avx2", "fma"] and cpu.isa_summary == "AVX2 + FMA"
    assert cpu.nominal_ghz == 2.6 and cpu.llc_bytes is None and not cpu.hypervisor
    peaks = hw.cpu_peaks(cpu)
    assert (peaks["peak_bandwidth_gbs"], peaks["peak_fp64_gflops"]) == (153.6, 1164.8)
    assert peaks["peak_source"] == "systems.csv: Intel Xeon E5-2690 v4"


def test_one_socket_scales_the_table_row(tmp_path: Path) -> None:
    cpu = hw.detect_cpu(INTEL, sysfs_cpu=sysfs(tmp_path, [(0, 0), (0, 1), (0, 0), (0, 1)], "35840K"))
    assert (cpu.sockets, cpu.physical_cores, cpu.logical_cpus, cpu.llc_bytes) == (1, 2, 4, 35 * 1024**2)
    peaks = hw.cpu_peaks(cpu)
    assert (peaks["peak_bandwidth_gbs"], peaks["peak_fp64_gflops"]) == (76.8, 582.4)
    assert "scaled to 1" in peaks["peak_source"]


def test_amd_avx512_unknown_model(tmp_path: Path) -> None:
    cpu = hw.detect_cpu(AMD, sysfs_cpu=sysfs(tmp_path, [(0, 0), (0, 1), (0, 0), (0, 1)], "32768K"))
    assert (cpu.vendor, cpu.sockets, cpu.physical_cores, cpu.logical_cpus) == ("AMD", 1, 2, 4)
    assert cpu.isa_summary == "AVX-512 + FMA" and "avx512f" in cpu.isa_flags and cpu.hypervisor
    assert cpu.llc_bytes == 32 * 1024**2 and cpu.nominal_ghz is None
    peaks = hw.cpu_peaks(cpu)  # an AVX-512 CPU still gets no guessed peaks
    assert peaks["peak_bandwidth_gbs"] is None and peaks["peak_fp64_gflops"] is None
    assert "unknown CPU 'AMD EPYC 9654 96-Core Processor'" in peaks["peak_source"]


def test_bare_amd_epyc_gets_how_to_message(tmp_path: Path) -> None:
    cpu = hw.detect_cpu(AMD.replace("AMD EPYC 9654 96-Core Processor", "AMD EPYC"), sysfs_cpu=tmp_path)
    assert hw.cpu_peaks(cpu) == {"peak_bandwidth_gbs": None, "peak_fp64_gflops": None, "peak_source":
                                 "unknown CPU 'AMD EPYC': give --peak-bandwidth/--peak-flops or a peaks file"}


def test_arm_a64fx_from_implementer_and_sysfs(tmp_path: Path) -> None:
    cpu = hw.detect_cpu(A64FX, sysfs_cpu=sysfs(tmp_path, [(0, 0), (0, 1), (0, 2), (0, 3)]))
    assert (cpu.model, cpu.vendor, cpu.isa_summary, cpu.physical_cores) == ("A64FX", "Fujitsu", "SVE", 4)
    assert hw.cpu_peaks(cpu)["peak_bandwidth_gbs"] == 1024.0


# ---------------------------------------------------------------- user peaks

def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "peaks.toml"
    path.write_text(text)
    return path


def test_user_peaks_file_overrides(tmp_path: Path) -> None:
    path = write(tmp_path, "[cpu]\npeak_bandwidth_gbs = 460.8\npeak_fp64_gflops = 5000\n"
                           "[gpu]\npeak_bandwidth_gbs = 3000.0\npeak_fp64_gflops = 30000.0\n")
    peaks = hw.load_user_peaks(path)
    assert peaks["cpu"] == {"peak_bandwidth_gbs": 460.8, "peak_fp64_gflops": 5000.0}
    assert peaks["gpu"]["peak_bandwidth_gbs"] == 3000.0 and str(path) in peaks["source"]
    cpu = hw.detect_cpu(AMD, sysfs_cpu=tmp_path)
    got = hw.cpu_peaks(cpu, peaks["cpu"], peaks["source"])
    assert (got["peak_bandwidth_gbs"], got["peak_source"]) == (460.8, f"peaks file {path}")


def test_partial_user_peak_keeps_the_table_for_the_rest(tmp_path: Path) -> None:
    cpu = hw.detect_cpu(INTEL, sysfs_cpu=tmp_path)
    got = hw.cpu_peaks(cpu, {"peak_bandwidth_gbs": 140.0}, "command line")
    assert (got["peak_bandwidth_gbs"], got["peak_fp64_gflops"]) == (140.0, 1164.8)
    assert got["peak_source"] == "command line (peak_bandwidth_gbs); systems.csv: Intel Xeon E5-2690 v4"


@pytest.mark.parametrize("text, problem", [
    ("[cpu]\npeak_bandwidth_gbs = 100.0\n", "[cpu] is missing peak_fp64_gflops"),
    ("[cpu]\npeak_bandwidth_gbs = -1.0\npeak_fp64_gflops = 10\n", "[cpu] peak_bandwidth_gbs must be a number from 0.1 to 1e+06 GB/s"),
    ("[gpu]\npeak_bandwidth_gbs = 'fast'\npeak_fp64_gflops = 10\n", "[gpu] peak_bandwidth_gbs must be a number"),
    ("[gpu]\npeak_bandwidth_gbs = true\npeak_fp64_gflops = 10\n", "must be a number"),
    ("[cpu]\npeak_bandwidth_gb = 1\npeak_fp64_gflops = 1\n", "unknown keys ['peak_bandwidth_gb']"),
    ("[tpu]\npeak_bandwidth_gbs = 1\n", "expected [cpu] and/or [gpu]"),
    ("[cpu\n", "not valid TOML"),
])
def test_bad_peaks_file_is_one_line_error(tmp_path: Path, text: str, problem: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(PortabenchError) as err:
        hw.load_user_peaks(path)
    message = str(err.value)
    assert message.startswith(f"peaks file '{path}': ") and problem in message and "\n" not in message


def test_missing_peaks_file(tmp_path: Path) -> None:
    with pytest.raises(PortabenchError, match="cannot read"):
        hw.load_user_peaks(tmp_path / "nope.toml")


# ---------------------------------------------------------------- GPU (fake CuPy dicts)

def test_gpu_peaks_from_attributes_with_datasheet_cross_check() -> None:
    gpu = hw.gpu_info_from(0, H100_PROPS, H100_ATTRS)
    assert (gpu.arch, gpu.sms, gpu.clock_khz, gpu.l2_bytes) == ("9.0", 132, 1980000, 52428800)
    assert (gpu.datasheet_bandwidth_gbs, gpu.datasheet_fp64_gflops) == (3352, 33500)
    peaks = hw.gpu_peaks(gpu)
    assert peaks["peak_bandwidth_gbs"] == pytest.approx(3352.32)
    assert peaks["peak_fp64_gflops"] == pytest.approx(33454.08)
    assert peaks["peak_source"].startswith("device attributes")


def test_gpu_without_clock_attributes_falls_back_to_table() -> None:
    gpu = hw.gpu_info_from(0, H100_PROPS, {})
    peaks = hw.gpu_peaks(gpu)
    assert (peaks["peak_bandwidth_gbs"], peaks["peak_fp64_gflops"]) == (3352, 33500)
    assert "systems.csv: NVIDIA H100 80GB HBM3 SXM" in peaks["peak_source"]


def test_k80_device_is_one_die_and_hip_uses_gfx_arch() -> None:
    k80 = hw.gpu_info_from(1, {"name": b"Tesla K80", "major": 3, "minor": 7}, {})
    assert (k80.datasheet_bandwidth_gbs, k80.datasheet_fp64_gflops) == (240, 1455)
    mi50 = hw.gpu_info_from(0, {"name": b"AMD Instinct MI50", "gcnArchName": b"gfx906:sramecc+:xnack-",
                                "multiProcessorCount": 60, "clockRate": 1725000,
                                "memoryClockRate": 1000000, "memoryBusWidth": 4096}, {}, hip=True)
    peaks = hw.gpu_peaks(mi50)
    assert (mi50.vendor, mi50.arch) == ("AMD", "gfx906")
    assert (peaks["peak_bandwidth_gbs"], peaks["peak_fp64_gflops"]) == pytest.approx((1024.0, 6624.0))
    unknown = hw.gpu_peaks(hw.gpu_info_from(0, {"name": b"Mystery", "gcnArchName": b"gfx1100"}, {}, hip=True))
    assert unknown["peak_bandwidth_gbs"] is None and "unknown GPU 'Mystery'" in unknown["peak_source"]


# ---------------------------------------------------------------- the record and its text

def test_detect_system_on_this_machine() -> None:
    record = hw.detect_system()
    assert json.loads(json.dumps(record)) == record
    assert record["schema"] == 1 and {"hostname", "os", "cpu", "gpus", "gpus_note"} <= set(record)
    cpu = record["cpu"]
    assert cpu["physical_cores"] >= 1 and cpu["logical_cpus"] >= cpu["physical_cores"] and cpu["sockets"] >= 1
    assert cpu["peak_source"] and set(hw.PEAK_KEYS) <= set(cpu)
    if cupy_unavailable():
        assert record["gpus"] == [] and record["gpus_note"] == cupy_unavailable()
    assert hw.cpu_last_level_cache_bytes() > 0
    assert cpu["model"] in hw.format_system(record)


def test_format_system_with_gpu_and_measured(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cpu = hw.detect_cpu(INTEL, sysfs_cpu=tmp_path)
    monkeypatch.setattr(hw, "detect_cpu", lambda: cpu)
    monkeypatch.setattr(hw, "detect_gpus", lambda: [hw.gpu_info_from(0, H100_PROPS, H100_ATTRS)])
    record = hw.detect_system()
    assert json.loads(json.dumps(record)) == record and record["gpus_note"] is None
    text = hw.format_system(record, {"cpu": 120.0, "gpu": 3050.0})
    for expected in (E5_MODEL, "6 cores x 2 socket(s)", "AVX2 + FMA", "153.6 GB/s", "1164.8 GFLOP/s",
                     "78.1 % of theoretical", "NVIDIA H100 80GB HBM3", "132 SMs at 1.98 GHz", "L2 50 MiB",
                     "2619 MHz x 5120 bit -> 3352.3 GB/s", "33454.1 GFLOP/s", "91.0 % of theoretical"):
        assert expected in text, expected
    assert "measured" not in hw.format_system(record)


def test_user_gpu_peaks_override_device_attributes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hw, "detect_gpus", lambda: [hw.gpu_info_from(0, H100_PROPS, H100_ATTRS)])
    user = {"source": "peaks file p.toml", "gpu": {"peak_bandwidth_gbs": 3000.0, "peak_fp64_gflops": 30000.0}}
    gpu = hw.detect_system(user)["gpus"][0]
    assert (gpu["peak_bandwidth_gbs"], gpu["peak_fp64_gflops"], gpu["peak_source"]) == (
        3000.0, 30000.0, "peaks file p.toml")
