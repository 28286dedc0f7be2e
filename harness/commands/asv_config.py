"""The suite's asv configuration (``asv.conf.json``): found, read and its folders resolved, for the
runner and for the report command (which hands the report its folders)."""

from __future__ import annotations

from pathlib import Path

from portabench.implementations.model import PortabenchError

CONFIG = "asv.conf.json"


def find_config(start: Path | None = None) -> Path:
    """The suite's asv.conf.json: in the working directory or a parent, else beside the sources."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / CONFIG).is_file() and (folder / "suite").is_dir():
            return folder / CONFIG
    source_root = Path(__file__).resolve().parents[2]  # an editable install's checkout
    if (source_root / CONFIG).is_file():
        return source_root / CONFIG
    raise PortabenchError(f"no {CONFIG} found: run from the portabench checkout (git clone, then pip install -e .)")


def read_config(config: Path | None = None) -> dict:
    """asv.conf.json as a dict (it may hold comments)."""
    import json5  # asv's own dependency

    path = config or find_config()
    try:
        return json5.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise PortabenchError(f"{path}: unreadable asv configuration ({exc})") from None


def config_dir(key: str, default: str, config: Path | None = None) -> Path:
    """A folder named in asv.conf.json (``results_dir``, ``html_dir``), resolved beside it."""
    path = config or find_config()
    return (path.parent / read_config(path).get(key, default)).resolve()


def asv_html_dir() -> Path | None:
    """``asv publish``'s output folder as the suite's asv.conf.json names it (``html_dir``); None outside a checkout."""
    try:
        return config_dir("html_dir", "html")
    except PortabenchError:
        return None


def results_dir() -> Path:
    """The asv results directory of the suite's configuration."""
    return config_dir("results_dir", "results")
