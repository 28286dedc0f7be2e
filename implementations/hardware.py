"""Hardware detection and theoretical peaks: what this machine is, and how fast it could go.

Peaks come, highest precedence first, from the user (``load_user_peaks`` or command-line values),
from GPU device attributes (memory clock x bus width; SMs x FP64 units x clock), and from the
known-systems table ``systems.csv`` (matched on the CPU model string or GPU name). A CPU's bandwidth is
never guessed from its ISA: an unknown CPU gets None, and ``peak_source`` says how to give the peaks.

``detect_system()`` returns the record stored next to each machine's asv results (keys are stable):

- ``schema`` (1), ``hostname``, ``os`` (``platform.platform()``), ``gpus_note`` (why ``gpus`` is empty, or None)
- ``cpu``: the ``CpuInfo`` fields (model, vendor, arch, physical_cores, sockets, logical_cpus, isa_flags,
  isa_summary, nominal_ghz, llc_bytes, hypervisor) plus peak_bandwidth_gbs, peak_fp64_gflops, peak_source
- ``gpus``: one per device, the ``GpuInfo`` fields (index, name, vendor, arch, sms, l2_bytes, memory_bytes,
  clock_khz, memory_clock_khz, bus_width_bits, datasheet, datasheet_bandwidth_gbs, datasheet_fp64_gflops)
  plus the same three peak keys. Peaks are float GB/s and GFLOP/s, or None when unknown.
"""
from __future__ import annotations

import dataclasses
import math
import os
import platform
import re
import socket
from pathlib import Path

from portabench.reference.systems import PEAK_KEYS, match_system

from .model import PortabenchError

SYSFS_CPU = "/sys/devices/system/cpu"
ISA_FLAGS = ("sse4_2", "avx", "avx2", "fma", "avx512f", "asimd", "sve")
HOW_TO = "give --peak-bandwidth/--peak-flops or a peaks file"
_X86_VENDORS = {"GenuineIntel": "Intel", "AuthenticAMD": "AMD", "HygonGenuine": "Hygon"}
# ARM /proc/cpuinfo has no model name: (implementer, part) -> (vendor, model), as lscpu decodes them.
_ARM_PARTS = {("0x46", "0x001"): ("Fujitsu", "A64FX"), ("0x41", "0xd0c"): ("ARM", "Neoverse-N1"),
              ("0x41", "0xd40"): ("ARM", "Neoverse-V1"), ("0x41", "0xd4f"): ("ARM", "Neoverse-V2")}
# FP64 FMA units per SM (NVIDIA compute capability) or per CU (AMD gfx arch); HIP reports
# major.minor 9.0 for several gfx archs, so AMD parts are keyed by arch name.
_FP64_UNITS = {"3.5": 64, "3.7": 64, "5.0": 4, "5.2": 4, "6.0": 32, "6.1": 4, "7.0": 32, "7.5": 2,
               "8.0": 32, "8.6": 2, "8.9": 2, "9.0": 64, "12.x": 2,
               "gfx900": 4, "gfx906": 32, "gfx908": 32, "gfx90a": 64, "gfx942": 64}


def cpu_last_level_cache_bytes() -> int:
    """Size of the largest CPU cache level in bytes (32 MiB if it cannot be read)."""
    return read_llc_bytes(SYSFS_CPU) or 32 * 1024**2


# ---------------------------------------------------------------- CPU

@dataclasses.dataclass
class CpuInfo:
    """The host CPU as detected; ``llc_bytes`` is one cache instance (one CCX's L3 on AMD)."""
    model: str
    vendor: str
    arch: str
    physical_cores: int
    sockets: int
    logical_cpus: int
    isa_flags: list[str]
    isa_summary: str
    nominal_ghz: float | None
    llc_bytes: int | None
    hypervisor: bool


def parse_cpuinfo(text: str) -> dict:
    """Model, vendor, flags and (x86 only) sockets/cores/logical counts from /proc/cpuinfo text."""
    blocks = [dict((k.strip(), v.strip()) for k, sep, v in (ln.partition(":") for ln in blk.splitlines()) if sep)
              for blk in re.split(r"\n\s*\n", text)]
    procs = [b for b in blocks if "processor" in b] or [{}]
    first = procs[0]
    vendor = _X86_VENDORS.get(first.get("vendor_id", ""), first.get("vendor_id", ""))
    model = first.get("model name") or first.get("cpu", "")  # POWER names the chip under "cpu"
    if not model and "CPU implementer" in first:
        vendor, model = _ARM_PARTS.get((first["CPU implementer"], first.get("CPU part")), ("ARM", ""))
    if model.startswith("POWER"):
        vendor = "IBM"
    ids = [(b.get("physical id"), b.get("core id")) for b in procs]
    has_topo = all(p is not None and c is not None for p, c in ids)
    return {"model": model, "vendor": vendor,
            "flags": set((first.get("flags") or first.get("Features") or "").split()),
            "sockets": len({p for p, _ in ids}) if has_topo else None,
            "cores": len(set(ids)) if has_topo else None,
            "logical": len(procs) if first else None}


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def read_topology(sysfs_cpu: str | Path = SYSFS_CPU) -> tuple[int, int, int] | None:
    """(sockets, physical cores, logical CPUs) from sysfs ``cpuN/topology``, or None if unreadable."""
    ids = []
    for cpu in Path(sysfs_cpu).glob("cpu[0-9]*"):
        pkg, core = _read(cpu / "topology/physical_package_id"), _read(cpu / "topology/core_id")
        if pkg is not None and core is not None:
            ids.append((pkg, core))
    return (len({p for p, _ in ids}), len(set(ids)), len(ids)) if ids else None


def read_llc_bytes(sysfs_cpu: str | Path = SYSFS_CPU) -> int | None:
    """Largest cache size listed under ``cpu0/cache/index*/size`` in bytes, or None."""
    sizes = []
    for f in Path(sysfs_cpu).glob("cpu0/cache/index*/size"):
        txt = _read(f) or ""
        m = re.fullmatch(r"(\d+)\s*([KMG]?)", txt)
        if m:
            sizes.append(int(m[1]) * {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3}[m[2]])
    return max(sizes, default=None)


def isa_summary(flags: set[str] | list[str]) -> str:
    """Widest SIMD level in ``flags``, e.g. "AVX-512 + FMA"."""
    fma = " + FMA" if "fma" in flags else ""
    for flag, label in (("avx512f", "AVX-512"), ("avx2", "AVX2"), ("avx", "AVX")):
        if flag in flags:
            return label + fma
    for flag, label in (("sve", "SVE"), ("asimd", "NEON"), ("sse4_2", "SSE4.2")):
        if flag in flags:
            return label
    return "unknown"


def detect_cpu(cpuinfo_text: str | None = None, sysfs_cpu: str | Path = SYSFS_CPU) -> CpuInfo:
    """The host CPU from /proc/cpuinfo (or ``cpuinfo_text``) and sysfs (or a fixture tree)."""
    if cpuinfo_text is None:
        cpuinfo_text = _read(Path("/proc/cpuinfo")) or ""  # empty off Linux
    info = parse_cpuinfo(cpuinfo_text)
    # sysfs topology works on every Linux arch; x86 cpuinfo ids are the fallback.
    sockets, cores, logical = read_topology(sysfs_cpu) or (info["sockets"], info["cores"], info["logical"])
    logical = logical or os.cpu_count() or 1
    model = info["model"] or platform.processor() or "unknown"
    ghz = re.search(r"@\s*([\d.]+)\s*GHz", model)  # Intel puts the nominal clock in the name
    base_khz = _read(Path(sysfs_cpu) / "cpu0/cpufreq/base_frequency")
    nominal = float(ghz[1]) if ghz else (int(base_khz) / 1e6 if base_khz and base_khz.isdigit() else None)
    return CpuInfo(model=model, vendor=info["vendor"] or "unknown", arch=platform.machine(),
                   physical_cores=cores or logical, sockets=sockets or 1, logical_cpus=logical,
                   isa_flags=[f for f in ISA_FLAGS if f in info["flags"]],
                   isa_summary=isa_summary(info["flags"]), nominal_ghz=nominal,
                   llc_bytes=read_llc_bytes(sysfs_cpu), hypervisor="hypervisor" in info["flags"])


# ---------------------------------------------------------------- user peaks

# What one node's theoretical peaks can plausibly be: a value outside (a typo, an overflow, inf) would be
# stored in the run's record and make every % of peak 0 or a figure hundreds of digits long.
PEAK_RANGES: dict[str, tuple[float, float, str]] = {"peak_bandwidth_gbs": (0.1, 1e6, "GB/s"),
                                                    "peak_fp64_gflops": (0.1, 1e7, "GFLOP/s")}


def peak_problem(key: str, value: object) -> str | None:
    """Why ``value`` is no plausible ``key`` (a PEAK_KEYS name) of one node, or None: the one rule for the
    command-line peaks and the peaks file."""
    low, high, unit = PEAK_RANGES[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (math.isfinite(value)
                                                                              and low <= value <= high):
        return f"must be a number from {low:g} to {high:g} {unit} (one node's plausible range), got {value!r}"
    return None


def load_user_peaks(path: str | Path) -> dict:
    """Peaks from a TOML file with ``[cpu]`` and/or ``[gpu]`` tables holding both PEAK_KEYS.

    Returns ``{"source": "peaks file PATH", "cpu": {...}, "gpu": {...}}`` (tables as given);
    any problem raises a one-line PortabenchError naming the file.
    """
    def bad(problem: str) -> PortabenchError:
        return PortabenchError(f"peaks file '{path}': {problem}")

    try:
        import tomllib
    except ImportError:  # Python 3.10
        try:
            import tomli as tomllib
        except ImportError:
            raise bad("reading TOML needs Python 3.11+ or the tomli package") from None
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise bad(f"cannot read it ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        raise bad(f"not UTF-8 text (byte {exc.object[exc.start]:#04x} at offset {exc.start}): save it as UTF-8") from None
    except tomllib.TOMLDecodeError as exc:
        raise bad(f"not valid TOML ({exc})") from None
    if set(data) - {"cpu", "gpu"} or not data:
        raise bad(f"expected [cpu] and/or [gpu] tables, found {sorted(data) or 'none'}")
    out: dict = {"source": f"peaks file {path}"}
    for kind, table in data.items():
        if not isinstance(table, dict):
            raise bad(f"'{kind}' must be a table [{kind}]")
        if extra := set(table) - set(PEAK_KEYS):
            raise bad(f"[{kind}] has unknown keys {sorted(extra)} (expected {', '.join(PEAK_KEYS)})")
        for key in PEAK_KEYS:
            if key not in table:
                raise bad(f"[{kind}] is missing {key}")
            problem = peak_problem(key, table[key])
            if problem:
                raise bad(f"[{kind}] {key} {problem}")
        out[kind] = {k: float(table[k]) for k in PEAK_KEYS}
    return out


def _resolve(found: dict, found_src: str | None, user: dict | None, user_src: str, how_to: str) -> dict:
    """Merge ``found`` peaks with user-given ones (which win, key by key) and say where each came from."""
    given = [k for k in PEAK_KEYS if (user or {}).get(k) is not None]
    peaks = {k: float(user[k]) if k in given else found.get(k) for k in PEAK_KEYS}
    parts = [user_src + ("" if len(given) == len(PEAK_KEYS) else f" ({', '.join(given)})")] if given else []
    if found_src and len(given) < len(PEAK_KEYS):
        parts.append(found_src)
    if any(v is None for v in peaks.values()):
        parts.append(how_to if not found_src else f"missing peaks: {HOW_TO}")
    return {**peaks, "peak_source": "; ".join(parts)}


def cpu_peaks(cpu: CpuInfo, user: dict | None = None, user_src: str = "user-supplied") -> dict:
    """The CPU's PEAK_KEYS and ``peak_source``: user values, else the table row scaled to ``cpu.sockets``.

    Table rows hold the peaks of ``sockets`` sockets; we scale linearly, since bandwidth and FLOP/s
    both grow with socket count on these systems.
    """
    row, found, src = match_system("cpu", cpu.model), {}, None
    if row:
        scale = cpu.sockets / row["sockets"]
        found = {k: None if row[k] is None else round(row[k] * scale, 1) for k in PEAK_KEYS}
        src = f"systems.csv: {row['name']}"
        if scale != 1:
            src += f" ({row['sockets']} sockets in the table, scaled to {cpu.sockets})"
        if cpu.hypervisor:
            src += "; virtual machine: the host sockets' peak, not this VM's share"
    return _resolve(found, src, user, user_src, f"unknown CPU {cpu.model!r}: {HOW_TO}")


# ---------------------------------------------------------------- GPU

def dram_bandwidth_gbs(memory_clock_khz: float, bus_width_bits: int) -> float:
    """Theoretical DRAM bandwidth in GB/s: 2 (double data rate) x clock x bus width / 8.

    CUDA and HIP report HBM clocks such that this formula gives the datasheet figure
    (H100 80GB HBM3: 2619000 kHz x 5120 bit -> 3352.32 GB/s, see reference/NOTES.md).
    """
    return 2 * memory_clock_khz * 1e3 * bus_width_bits / 8 / 1e9


def fp64_peak_gflops(sms: int | None, clock_khz: float | None,
                     compute_capability: str | tuple[int, int]) -> float | None:
    """FP64 peak in GFLOP/s: SMs x FP64 FMA units per SM x 2 flop x clock; None for an unknown arch.

    ``compute_capability`` is "major.minor" (or a tuple) for NVIDIA, a gfx name ("gfx90a") for AMD.
    """
    cc = ".".join(map(str, compute_capability)) if isinstance(compute_capability, tuple) else compute_capability
    units = _FP64_UNITS.get(cc) or _FP64_UNITS.get(cc.split(".")[0] + ".x")
    if not (units and sms and clock_khz):
        return None
    return sms * units * 2 * clock_khz * 1e3 / 1e9


@dataclasses.dataclass
class GpuInfo:
    """One GPU as CuPy reports it; unknown attributes are None."""
    index: int
    name: str
    vendor: str
    arch: str
    sms: int | None
    l2_bytes: int | None
    memory_bytes: int | None
    clock_khz: int | None
    memory_clock_khz: int | None
    bus_width_bits: int | None
    datasheet: str | None
    datasheet_bandwidth_gbs: float | None
    datasheet_fp64_gflops: float | None


def gpu_info_from(index: int, props: dict, attrs: dict, hip: bool = False) -> GpuInfo:
    """A GpuInfo from ``getDeviceProperties`` and ``Device.attributes`` dicts (attributes preferred:
    CUDA 13 dropped the clock fields from the properties)."""
    def pick(attr: str, prop: str) -> int | None:
        value = attrs.get(attr, props.get(prop))
        return int(value) if value else None

    def text(value: object) -> str:
        return value.decode(errors="replace") if isinstance(value, bytes) else str(value or "")

    name = text(props.get("name")).strip() or f"GPU {index}"
    arch = text(props.get("gcnArchName")).split(":")[0] if hip else f"{props.get('major')}.{props.get('minor')}"
    row = match_system("gpu", name)
    dies = row["sockets"] if row else 1  # a K80 row covers the board's two dies; a device is one
    sheet = {k: row[k] / dies if row and row[k] else None for k in PEAK_KEYS}
    return GpuInfo(index=index, name=name, vendor="AMD" if hip else "NVIDIA", arch=arch,
                   sms=pick("MultiProcessorCount", "multiProcessorCount"),
                   l2_bytes=pick("L2CacheSize", "l2CacheSize"), memory_bytes=pick("", "totalGlobalMem"),
                   clock_khz=pick("ClockRate", "clockRate"),
                   memory_clock_khz=pick("MemoryClockRate", "memoryClockRate"),
                   bus_width_bits=pick("GlobalMemoryBusWidth", "memoryBusWidth"),
                   datasheet=row["name"] if row else None, datasheet_bandwidth_gbs=sheet["peak_bandwidth_gbs"],
                   datasheet_fp64_gflops=sheet["peak_fp64_gflops"])


def detect_gpus() -> list[GpuInfo]:
    """Every GPU CuPy can see (CUDA or ROCm); empty where the CuPy backend has no GPU."""
    from .backends import CUPY
    from .gpu import cupy
    if CUPY.unavailable("gpu"):
        return []
    cp = cupy()
    runtime = cp.cuda.runtime
    gpus, hip = [], bool(getattr(runtime, "is_hip", False))
    for i in range(runtime.getDeviceCount()):
        try:
            attrs = dict(cp.cuda.Device(i).attributes)
        except Exception:  # some HIP builds cannot query every attribute
            attrs = {}
        gpus.append(gpu_info_from(i, runtime.getDeviceProperties(i), attrs, hip))
    return gpus


def gpu_peaks(gpu: GpuInfo, user: dict | None = None, user_src: str = "user-supplied") -> dict:
    """The GPU's PEAK_KEYS and ``peak_source``: user values, else device attributes, else the table."""
    attr = {"peak_bandwidth_gbs": dram_bandwidth_gbs(gpu.memory_clock_khz, gpu.bus_width_bits)
            if gpu.memory_clock_khz and gpu.bus_width_bits else None,
            "peak_fp64_gflops": fp64_peak_gflops(gpu.sms, gpu.clock_khz, gpu.arch)}
    table = {"peak_bandwidth_gbs": gpu.datasheet_bandwidth_gbs, "peak_fp64_gflops": gpu.datasheet_fp64_gflops}
    found = {k: attr[k] if attr[k] is not None else table[k] for k in PEAK_KEYS}
    sources = ["device attributes"] if any(v is not None for v in attr.values()) else []
    if gpu.datasheet:
        used = any(attr[k] is None and table[k] is not None for k in PEAK_KEYS)
        sources.append(f"systems.csv: {gpu.datasheet}" if used else f"datasheet {gpu.datasheet} as cross-check")
    return _resolve(found, " + ".join(sources) or None, user, user_src, f"unknown GPU {gpu.name!r}: {HOW_TO}")


# ---------------------------------------------------------------- the record

def detect_system(user_peaks: dict | None = None) -> dict:
    """The JSON-serialisable record described in the module docstring.

    ``user_peaks`` is ``load_user_peaks``' result or the same shape built from the command line;
    its ``cpu``/``gpu`` tables may hold one key or both and override the detected peaks key by key.
    """
    from .backends import device_unavailable
    user = user_peaks or {}
    src = user.get("source", "user-supplied")
    cpu = detect_cpu()
    gpus = detect_gpus()
    return {"schema": 1, "hostname": socket.gethostname(), "os": platform.platform(),
            "cpu": {**dataclasses.asdict(cpu), **cpu_peaks(cpu, user.get("cpu"), src)},
            "gpus": [{**dataclasses.asdict(g), **gpu_peaks(g, user.get("gpu"), src)} for g in gpus],
            "gpus_note": None if gpus else (device_unavailable("gpu") or "no GPU found")}


def _size(n: int | None) -> str:
    if not n:
        return "?"
    return f"{n / 1024**3:.0f} GiB" if n >= 1024**3 else f"{n / 1024**2:.0f} MiB"


def _num(x: float | None, unit: str) -> str:
    return "unknown" if x is None else f"{x:.1f} {unit}"


def _measured_line(best: float | None, peak: float | None) -> list[str]:
    if best is None:
        return []
    share = f" ({100 * best / peak:.1f} % of theoretical)" if peak else " (theoretical unknown)"
    return [f"  measured STREAM best: {best:.1f} GB/s{share}"]


def format_system(record: dict, measured: dict[str, float] | None = None) -> str:
    """Human-readable text of a ``detect_system`` record; ``measured`` maps "cpu", "gpu" (the first
    GPU) or "gpuN" to the best measured STREAM GB/s."""
    measured = measured or {}
    cpu = record["cpu"]
    lines = [f"System: {record['hostname']} ({record['os']})",
             f"CPU: {cpu['model']}, {cpu['physical_cores']} cores x {cpu['sockets']} socket(s) "
             f"({cpu['logical_cpus']} logical), {cpu['isa_summary']}, LLC {_size(cpu['llc_bytes'])}"
             + (", virtual machine" if cpu.get("hypervisor") else ""),
             f"  theoretical: {_num(cpu['peak_bandwidth_gbs'], 'GB/s')}, "
             f"FP64 {_num(cpu['peak_fp64_gflops'], 'GFLOP/s')}",
             f"  source: {cpu['peak_source']}"]
    lines += _measured_line(measured.get("cpu"), cpu["peak_bandwidth_gbs"])
    for g in record["gpus"]:
        mem = (f"{g['memory_clock_khz'] / 1e3:.0f} MHz x {g['bus_width_bits']} bit"
               if g["memory_clock_khz"] and g["bus_width_bits"] else "memory clock unknown")
        clock = f" at {g['clock_khz'] / 1e6:.2f} GHz" if g["clock_khz"] else ""
        lines += [f"GPU {g['index']}: {g['name']} ({g['vendor']} {g['arch']}), {g['sms'] or '?'} SMs{clock}, "
                  f"L2 {_size(g['l2_bytes'])}, memory {_size(g['memory_bytes'])}",
                  f"  theoretical: {mem} -> {_num(g['peak_bandwidth_gbs'], 'GB/s')}, "
                  f"FP64 {_num(g['peak_fp64_gflops'], 'GFLOP/s')}",
                  f"  source: {g['peak_source']}"]
        if g["datasheet"]:
            lines.append(f"  datasheet ({g['datasheet']}): {_num(g['datasheet_bandwidth_gbs'], 'GB/s')}, "
                         f"FP64 {_num(g['datasheet_fp64_gflops'], 'GFLOP/s')}")
        best = measured.get(f"gpu{g['index']}", measured.get("gpu") if g["index"] == 0 else None)
        lines += _measured_line(best, g["peak_bandwidth_gbs"])
    if not record["gpus"]:
        lines.append(f"GPU: none ({record.get('gpus_note') or 'not detected'})")
    return "\n".join(lines)
