"""Errors the dataset layer raises: each names the file (and line) or the dataset at fault."""

from __future__ import annotations

from pathlib import Path

from portabench.implementations.model import PortabenchError


class DatasetError(PortabenchError, ValueError):
    """Bad input data or a bad dataset request, explained in one line."""


class MalformedFileError(DatasetError):
    """A file that cannot be parsed: the message starts with ``path:line:``."""

    def __init__(self, path: str | Path, message: str, line: int | None = None) -> None:
        self.path = str(path)
        self.line = line
        where = f"{self.path}:{line}" if line is not None else self.path
        super().__init__(f"{where}: {message}")


class DatasetUnavailableError(DatasetError):
    """A real dataset that is neither cached nor downloadable from here."""
