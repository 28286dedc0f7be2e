"""Paths the user gives: an input file (not a folder, not missing) and a folder to write into (one
that can be written, checked without creating it: a command that fails leaves no empty folder)."""

from __future__ import annotations

import tempfile
from pathlib import Path

from .errors import DatasetError, PortabenchError


def check_input_file(path: str | Path, what: str = "") -> Path:
    """``path`` if it is a file, else a one-line error naming it: missing, or a folder (``what``: the
    flag or kind of file, to say what belongs there)."""
    path = Path(path)
    if path.is_dir():
        raise DatasetError(f"{path}: is a folder, not a file{': give ' + what if what else ''}")
    if not path.is_file():
        raise DatasetError(f"{path}: no such file" + (f" ({what})" if what else ""))
    return path


def check_writable(folder: str | Path, what: str) -> Path:
    """``folder`` if this process can write there, else a one-line error; a missing folder is not
    created (whoever writes creates it), only its nearest existing parent is checked."""
    folder = Path(folder)
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise PortabenchError(f"{what} {folder} cannot be written: {existing} is a file, not a folder")
    try:
        with tempfile.NamedTemporaryFile(dir=existing, prefix=".portabench-probe-"):
            pass
    except OSError as exc:
        raise PortabenchError(f"{what} {folder} cannot be written: {exc.strerror or exc}") from None
    return folder
