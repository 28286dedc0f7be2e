"""Hardware detection and theoretical peaks (placeholder being completed)."""
from __future__ import annotations
import os


def cpu_last_level_cache_bytes() -> int:
    """Size of the largest CPU cache level in bytes (32 MiB if it cannot be read)."""
    best = 0
    base = "/sys/devices/system/cpu/cpu0/cache"
    try:
        for entry in os.listdir(base):
            path = os.path.join(base, entry, "size")
            if os.path.exists(path):
                txt = open(path).read().strip()
                mult = {"K": 1024, "M": 1024**2, "G": 1024**3}.get(txt[-1], 1)
                best = max(best, int(txt.rstrip("KMG")) * mult)
    except OSError:
        pass
    return best or 32 * 1024**2


def gpu_memory_info() -> tuple[int, int] | None:
    """(L2 bytes, free device memory bytes) of the current GPU, or None without one."""
    from portabench.implementations.gpu import cupy, cupy_unavailable
    if cupy_unavailable():
        return None
    cp = cupy()
    dev = cp.cuda.Device()
    free, _total = dev.mem_info
    return int(dev.attributes["L2CacheSize"]), int(free)
