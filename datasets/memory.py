"""How much host memory a dataset may take: readers refuse what cannot fit before allocating it."""

from __future__ import annotations

import re
from pathlib import Path


def available_host_memory_bytes(meminfo: str | Path = "/proc/meminfo") -> int | None:
    """MemAvailable from /proc/meminfo (what can be allocated without swapping), or None."""
    try:
        text = Path(meminfo).read_text()
    except OSError:
        return None
    match = re.search(r"^MemAvailable:\s+(\d+) kB", text or "", re.MULTILINE)
    return int(match.group(1)) * 1024 if match else None
