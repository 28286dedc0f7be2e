"""The documentation's shape: each kernel README is a page a user reads in two minutes, and the code's
docstrings and comments say what and why, with no measured figures and no commit hashes (those belong
in the kernel's EXPERIMENTS.md, with their machine, commit and date), and name only what exists."""

from __future__ import annotations

import ast
import builtins
import io
import re
import sys
import tokenize
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README_MAX_LINES = 150
# The packages whose .py files are checked (tests/ may plant hashes and timings on purpose).
CODE_DIRS = ("harness", "implementations", "suite", "reports", "datasets", "reference")

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


def _prose(source: str, cuda_comments: bool = True) -> list[tuple[int, str]]:
    """(line number, text) of every comment, docstring line and (``cuda_comments``) ``//`` comment inside a
    string."""
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
                elif cuda_comments and "//" in line:
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


# -- the prose names what exists ----------------------------------------------------------------------
# The code's prose names what exists: a docstring or comment of the product code that names, in double
# backquotes (``metrics.latest``) or as a call (``latest()``, latest()), a function, class or constant that is
# defined nowhere in the repository has gone stale (a rename, a move, a removal); and one that names a
# statistical test portabench does not use (``compare`` once used Mann-Whitney) says what the code no longer
# does.
#
# Only names that look like code are checked: dotted names and calls, by their last component, against every
# name the repository's Python defines (functions, classes, assignments, attributes, arguments, imports,
# modules, folders) plus Python's builtins; a Python file named (``sorting.py``) must be one of the
# repository's. A bare word in double backquotes (a column, a JSON key, an option) is not checked. External
# names are allowed by ``EXTERNAL``, each with its reason, and the standard library's by their module.

# Where names are defined: the product code and the tests.
DEFINING_DIRS = (*CODE_DIRS, "tests")

# References to names outside the repository, by their start (a module's alias and a dot) or whole.
EXTERNAL = {
    "np.": "NumPy's functions (np.add.reduceat, np.savez, ...)",
    "numpy.": "NumPy's functions, spelt out",
    "scipy.": "SciPy's functions (scipy.io.mmread, scipy.stats.ttest_ind, ...)",
    "cupy.": "CuPy's functions (cupy.copyto, ...)",
    "cupyx.": "CuPy's extras (cupyx.scatter_add)",
    "numba.": "Numba's functions (numba.get_num_threads)",
    "cp.async": "the PTX instruction (sm_80 and later) a kernel's copies use, not Python",
    "Device.attributes": "CuPy's cupy.cuda.Device.attributes, read by the machine record",
}
# asv's benchmark names: a study's class and its ``time_<kernel>`` method are made by suite/classes.py from the
# kernel's declaration (``Kernel.studies``), so no source defines them by name.
GENERATED = re.compile(r"time_\w+$")
# A data or configuration file's name is no code reference: ``uber.tns.gz``, ``pyproject.toml``.
FILE_SUFFIXES = {"toml", "json", "gz", "npz", "npy", "tns", "mtx", "md", "txt", "csv", "png", "html", "cfg"}

# Statistical tests portabench does not use: named in the product code's prose, they describe code that is gone.
UNUSED_TESTS = re.compile(r"mann[- ]?whitney|wilcoxon|kolmogorov|smirnov|welch|kruskal", re.IGNORECASE)

QUOTED = re.compile(r"``([^`]+)``")
CALL = re.compile(r"(?<![\w.])([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)\(\)")
DOTTED = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+$")


def _files(dirs: tuple[str, ...], root: Path | None = None) -> list[Path]:
    root = root or ROOT
    return sorted(p for d in dirs for p in (root / d).rglob("*.py") if "__pycache__" not in p.parts)


@dataclass(frozen=True)
class Known:
    names: set[str]  # every name defined: functions, classes, assignments, ..., modules, folders, builtins
    files: set[str]  # the Python files' names: "sorting.py"
    modules: set[str]  # their modules' and folders' names


def known(paths: list[Path]) -> Known:
    """What the sources in ``paths`` define."""
    modules = {part for path in paths for part in path.relative_to(ROOT).with_suffix("").parts}
    return Known(defined_names(paths) | modules, {path.name for path in paths}, modules)


def defined_names(paths: list[Path]) -> set[str]:
    """Every name the sources in ``paths`` define, and the builtins."""
    names = set(dir(builtins))
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                names.add(node.attr)
            elif isinstance(node, ast.arg):
                names.add(node.arg)
            elif isinstance(node, ast.alias):
                names.update(node.name.split("."))
                if node.asname:
                    names.add(node.asname)
    return names


def references(line: str) -> list[str]:
    """The dotted names and calls a line of prose names: ``a.b``, ``f()``, f() and a.b()."""
    found = []
    for m in QUOTED.finditer(line):
        text = m.group(1).strip()
        name = text.removesuffix("()")
        if DOTTED.match(name) or (text.endswith("()") and re.fullmatch(r"[A-Za-z_]\w*", name)):
            found.append(name)
    found += [m.group(1) for m in CALL.finditer(QUOTED.sub(" ", line))]
    return found


def _allowed(name: str, defined: Known) -> bool:
    first, last = name.split(".", 1)[0], name.rsplit(".", 1)[-1]
    if last == "py":
        return name.rsplit(".", 2)[-2] + ".py" in defined.files
    # The standard library's (``time.perf_counter``), unless a module of ours has the name (``statistics``).
    stdlib = first in sys.stdlib_module_names and first not in defined.modules and "." in name
    return (last in defined.names or last in FILE_SUFFIXES or GENERATED.match(last) is not None or stdlib
            or any(name == e or (e.endswith(".") and name.startswith(e)) for e in EXTERNAL))


def stale_references(source: str, defined: Known) -> list[tuple[int, str]]:
    """(line number, name) of each name in ``source``'s prose that is defined nowhere."""
    return [(n, name) for n, line in _prose(source, cuda_comments=False) for name in references(line) if not _allowed(name, defined)]


def unused_tests(source: str) -> list[tuple[int, str]]:
    """(line number, words) of each statistical test portabench does not use named in ``source``'s prose."""
    return [(n, m.group(0)) for n, line in _prose(source, cuda_comments=False) for m in UNUSED_TESTS.finditer(line)]


def _offences(find) -> dict[str, list[tuple[int, str]]]:
    found = {p.relative_to(ROOT).as_posix(): find(p.read_text(encoding="utf-8")) for p in _files(CODE_DIRS)}
    return {rel: hits for rel, hits in found.items() if hits}


def _report(offences: dict[str, list[tuple[int, str]]]) -> str:
    return "\n".join(f"{rel}:{n}: {what}" for rel, hits in sorted(offences.items()) for n, what in hits)


def test_prose_names_only_what_exists() -> None:
    defined = known(_files(DEFINING_DIRS))
    offences = _offences(lambda source: stale_references(source, defined))
    assert not offences, ("docstrings or comments name what is defined nowhere (renamed, moved, removed? an "
                          "external name goes into EXTERNAL with its reason):\n" + _report(offences))


def test_prose_names_no_statistical_test_we_do_not_use() -> None:
    offences = _offences(unused_tests)
    assert not offences, ("docstrings or comments name a statistical test portabench does not use "
                          "(harness/statistics.py says which it does):\n" + _report(offences))


@pytest.mark.parametrize("line, names", [
    ("rows paired as ``metrics.latest`` keeps them", ["metrics.latest"]),
    ("see ``latest()`` and changes() and ``Noise.floor()``", ["latest", "Noise.floor", "changes"]),
    ("a column (``noise_floor_pct``), an option (``--rounds``), a file (``results/<m>/x.noise``)", []),
    ("``number = 1``; a call with arguments f(x) is prose", []),
])
def test_what_counts_as_a_reference(line: str, names: list[str]) -> None:
    assert references(line) == names


@pytest.mark.parametrize("source, stale", [
    ('"""Pairs rows as ``metrics.latest`` keeps them, judged by ``verdict()``."""\n', []),
    ('"""Pairs rows as ``metrics.newest`` keeps them."""\n', ["metrics.newest"]),
    ("x = 1  # see gone_helper() for why\n", ["gone_helper"]),
    ('"""NumPy\'s ``np.add.reduceat``, the file ``bcsr.py``, asv\'s ``stream.StreamCPU.time_stream``."""\n', []),
    ('"""The verdicts of ``rounds.py`` (moved), timed by ``time.perf_counter``."""\n', ["rounds.py"]),
    ('"""Its median, not ``statistics.median``: ours is harness/statistics.py."""\n', ["statistics.median"]),
    ('SOURCE = r"""\n// wait_for_copies() waits\n"""\n', []),  # CUDA's, in a string: not Python prose
    ('x = "see gone_helper()"  # a string in code is not prose\n', []),
])
def test_the_stale_reference_rule(source: str, stale: list[str]) -> None:
    here = known([Path(__file__)])
    defined = Known(here.names | {"metrics", "latest", "verdict"}, {"bcsr.py"}, {"statistics"})
    assert [name for _, name in stale_references(source, defined)] == stale


def test_a_planted_stale_reference_and_test_fail(tmp_path: Path, monkeypatch) -> None:
    """The checks over the tree do fail: a stale name and Mann-Whitney planted in a copy of one package."""
    (tmp_path / "reports").mkdir()
    (tmp_path / "reports" / "planted.py").write_text(
        '"""Rows paired by ``changes.SERIES_KEYS_GONE``; a Mann-Whitney test over samples."""\n')
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    with pytest.raises(AssertionError, match=r"planted.py:1: changes.SERIES_KEYS_GONE"):
        test_prose_names_only_what_exists()
    with pytest.raises(AssertionError, match=r"planted.py:1: Mann-Whitney"):
        test_prose_names_no_statistical_test_we_do_not_use()
