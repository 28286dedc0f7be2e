"""The documentation's shape: each kernel README is a page a user reads in two minutes, and the code's
docstrings and comments say what and why, with no measured figures and no commit hashes (those belong
in the kernel's EXPERIMENTS.md, with their machine, commit and date)."""

from __future__ import annotations

import ast
import io
import re
import sys
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README_MAX_LINES = 150
# The packages whose .py files are checked (tests/ may plant hashes and timings on purpose).
CODE_DIRS = ("implementations", "suite", "reports", "datasets", "reference")

# A commit hash: a whole word of 7 to 40 lowercase hex digits with at least one digit and one letter.
# Not one: a `0x` literal (the word then starts with "x"), a SHA-256 (64 digits: longer than any commit
# name), and a data checksum named as one on its line (`sha256=`, `sha1`, `md5`, `checksum`: dataset
# registries pin their files' digests).
HASH = re.compile(r"(?<![0-9A-Za-z_])(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}(?![0-9A-Za-z_])")
CHECKSUM_LINE = re.compile(r"sha256|sha1|md5|checksum|digest", re.IGNORECASE)
# A measured figure in prose: a number with a unit of time or of rate, or a number of times / percent
# faster or slower. Only comments, docstrings and the `//` comments of embedded CUDA sources are read:
# format strings and units in code (f"{t:.1f} ms", "GB/s" column names) are code, not claims.
TIMING = re.compile(
    r"(?<![\d.])\d+(?:\.\d+)?"
    r"(?:\s?(?:ms|us|µs|ns)\b|\s?(?:[KMGT]B/s|[GT]FLOP/s)|x (?:faster|slower)\b|\s?% (?:faster|slower)\b)")
# A figure that is a specification, not a measurement, says so on its line or the line before: a
# datasheet's bandwidth, a clock's tick.
SPECIFIED_LINE = re.compile(r"datasheet|ticks?[\s#]+of", re.IGNORECASE)


def hash_offences(text: str) -> list[tuple[int, str]]:
    """(line number, word) of each commit hash in ``text``."""
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        if CHECKSUM_LINE.search(line):
            continue
        found += [(number, m.group(0)) for m in HASH.finditer(line)]
    return found


def _prose(source: str) -> list[tuple[int, str]]:
    """(line number, text) of every comment, docstring line and ``//`` comment inside a string."""
    docstrings: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                docstrings.add(first.lineno)
    lines: list[tuple[int, str]] = []
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            lines.append((tok.start[0], tok.string))
        elif tok.type == tokenize.STRING:
            for offset, line in enumerate(tok.string.splitlines()):
                if tok.start[0] in docstrings:
                    lines.append((tok.start[0] + offset, line))
                elif "//" in line:
                    lines.append((tok.start[0] + offset, line[line.index("//"):]))
    return lines


def timing_offences(source: str) -> list[tuple[int, str]]:
    """(line number, match) of each measured figure in the comments and docstrings of ``source``."""
    prose = _prose(source)
    found = []
    for i, (number, line) in enumerate(prose):
        before = prose[i - 1][1] if i and prose[i - 1][0] == number - 1 else ""
        if not SPECIFIED_LINE.search(before + " " + line):
            found += [(number, m.group(0)) for m in TIMING.finditer(line)]
    return found


def _code_files() -> list[Path]:
    return sorted(p for d in CODE_DIRS for p in (ROOT / d).rglob("*.py"))


def _report(offences: dict[str, list[tuple[int, str]]]) -> str:
    return "\n".join(f"{rel}:{n}: {what}" for rel, found in sorted(offences.items()) for n, what in found)


def test_kernel_readmes_are_short():
    readmes = sorted(ROOT.glob("implementations/*/README.md"))
    assert readmes
    long = {r.relative_to(ROOT).as_posix(): len(r.read_text().splitlines()) for r in readmes}
    long = {r: n for r, n in long.items() if n > README_MAX_LINES}
    assert not long, f"kernel READMEs over {README_MAX_LINES} lines (move the log to EXPERIMENTS.md): {long}"


def test_kernel_readmes_link_their_experiments():
    for readme in ROOT.glob("implementations/*/README.md"):
        if (readme.parent / "EXPERIMENTS.md").exists():
            assert "EXPERIMENTS.md" in readme.read_text(), readme


def _offences(find) -> dict[str, list[tuple[int, str]]]:
    """What ``find`` flags in each code file, by the file's path from the repository's root."""
    found = {path.relative_to(ROOT).as_posix(): find(path.read_text()) for path in _code_files()}
    return {rel: hits for rel, hits in found.items() if hits}


def test_no_commit_hash_in_code():
    offences = _offences(hash_offences)
    assert not offences, "commit hashes in code (move the fact to EXPERIMENTS.md):\n" + _report(offences)


def test_no_measured_timing_in_docstrings_or_comments():
    offences = _offences(timing_offences)
    assert not offences, "measured figures in docstrings or comments (move them to EXPERIMENTS.md):\n" + _report(offences)


@pytest.mark.parametrize("text, hashes", [
    ("# fixed at commit e218ce2 (2026-11-27)", ["e218ce2"]),
    ('"""Until 2df9f459a0 the arrays were larger."""', ["2df9f459a0"]),
    ("MASK = 0xffff00ff1  # a literal", []),
    ("deadbeef = 1  # hex letters, no digit", []),
    ("N = 1234567  # digits only", []),
    ('sha256="' + "ab12" * 16 + '"', []),
    ('    "nell-2": Entry(url, "' + "0f1e2d3c" * 8 + '"),', []),
    ('md5 = "0123456789abcdef0123456789abcdef"', []),
])
def test_the_hash_rule(text, hashes):
    assert [word for _, word in hash_offences(text)] == hashes


@pytest.mark.parametrize("source, figures", [
    ('"""Runs in 1.61 ms on one GPU."""\n', ["1.61 ms"]),
    ("x = 1  # 2.5 TB/s at bs 8\n", ["2.5 TB/s"]),
    ("def f():\n    \"\"\"Made the walk 2x slower.\"\"\"\n", ["2x slower"]),
    ("# 5-10 % faster at R = 16\n", ["10 % faster"]),
    ('SOURCE = r"""\n// 1-3 % faster there\nint x;\n"""\n', ["3 % faster"]),
    ('line = f"{seconds * 1e3:.1f} ms"  # format strings are code\n', []),
    ('HEADER = ["GB/s", "% of peak"]\n', []),
    ('x = "took 3 ms"  # a plain string in code is not prose\n', []),
    ("# /proc/stat counts in ticks\n# of 10 ms\n", []),
    ('"""The datasheet figure: 2619000 kHz x 5120 bit -> 3352.32 GB/s."""\n', []),
])
def test_the_timing_rule(source, figures):
    assert [what for _, what in timing_offences(source)] == figures


def test_a_planted_hash_fails(tmp_path, monkeypatch):
    """The checks over the tree do fail: a hash and a timing planted in a copy of one package."""
    (tmp_path / "implementations").mkdir()
    (tmp_path / "implementations" / "planted.py").write_text('"""Fixed at a1b2c3d, 3.2 ms on the H100."""\n')
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    with pytest.raises(AssertionError, match="planted.py:1: a1b2c3d"):
        test_no_commit_hash_in_code()
    with pytest.raises(AssertionError, match="planted.py:1: 3.2 ms"):
        test_no_measured_timing_in_docstrings_or_comments()
