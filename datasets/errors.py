"""The project's error base (every message meant for the user, on one line) and the errors the
dataset layer raises: each names the file (and line) or the dataset at fault. The base lives in the
lowest layer so that every other layer can raise it."""

from __future__ import annotations

from pathlib import Path


class PortabenchError(Exception):
    """An error with a message meant for the user (the CLI prints it on one line)."""


class UnknownNameError(PortabenchError, KeyError):
    """An unknown kernel, variant or case."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class DatasetError(PortabenchError, ValueError):
    """Bad input data or a bad dataset request, explained in one line."""


class MalformedFileError(DatasetError):
    """A file that cannot be parsed: the message starts with ``path:line:``."""

    def __init__(self, path: str | Path, message: str, line: int | None = None) -> None:
        self.path = str(path)
        self.line = line
        self.reason = message  # without the location: lets a caller name another copy of the file
        where = f"{self.path}:{line}" if line is not None else self.path
        super().__init__(f"{where}: {message}")


def gzip_failure(path: str | Path, exc: Exception) -> MalformedFileError:
    """The one-line error for a ``.gz`` file that gzip could not read (``exc``: what gzip or zlib raised)."""
    try:
        with open(path, "rb") as f:
            magic = f.read(2)
    except OSError as err:
        return MalformedFileError(path, f"cannot be read ({err.strerror or err})")
    if magic != b"\x1f\x8b":
        return MalformedFileError(path, "not gzip-compressed, although its name ends in .gz: "
                                        "if it is plain text, rename it without .gz")
    if isinstance(exc, EOFError):  # gzip's "Compressed file ended before the end-of-stream marker"
        return MalformedFileError(path, "truncated gzip file: the compressed data end before gzip's end-of-stream "
                                        "marker (an interrupted download or copy?): fetch or copy it again")
    return MalformedFileError(path, f"corrupt gzip file ({exc}): fetch or copy it again")


class DatasetUnavailableError(DatasetError):
    """A real dataset that is neither cached nor downloadable from here."""


class DatasetWarning(UserWarning):
    """Input that was accepted by a convention or a guess the user should know about.

    The message is one line that starts with the file (and line) where there is one.
    """


class IndexBaseWarning(DatasetWarning):
    """A headerless tensor file whose modes were given different index bases (0 in some, 1 in others)."""


class PatternMatrixWarning(DatasetWarning):
    """A pattern-only Matrix Market file: every stored entry was given the value 1."""


class BlockPaddingWarning(DatasetWarning):
    """A matrix whose size is not a multiple of the block size: padded with empty rows and columns."""
