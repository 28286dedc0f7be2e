"""How much host memory a dataset may take: readers and generators refuse what cannot fit before
allocating it (``check_fits``), naming what was asked for, the bytes it needs and those available."""

from __future__ import annotations

import re
from pathlib import Path

from .errors import DatasetError

_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "ZiB", "YiB")


def available_host_memory_bytes(meminfo: str | Path = "/proc/meminfo") -> int | None:
    """MemAvailable from /proc/meminfo (what can be allocated without swapping), or None."""
    try:
        text = Path(meminfo).read_text()
    except OSError:
        return None
    match = re.search(r"^MemAvailable:\s+(\d+) kB", text or "", re.MULTILINE)
    return int(match.group(1)) * 1024 if match else None


def format_bytes(n: float) -> str:
    """``n`` bytes in the largest binary unit that keeps the number at least 1: "22.0 PiB"."""
    value, unit = float(n), 0
    while value >= 1024 and unit < len(_UNITS) - 1:
        value, unit = value / 1024, unit + 1
    return f"{value:.1f} {_UNITS[unit]}" if unit else f"{int(value)} B"


def check_fits(need: float, what: str, hint: str) -> None:
    """Refuse ``what`` (e.g. "nips@1e+09: the stand-in") when its ``need`` bytes exceed the available host
    memory, saying how to ask for less (``hint``); nothing is refused where the available memory is unknown."""
    available = available_host_memory_bytes()
    if available is not None and need > available:
        raise DatasetError(f"{what} needs {format_bytes(need)} of host memory, {format_bytes(available)} is available: "
                           f"{hint}")
