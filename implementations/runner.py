"""``portabench run``: one asv run of this machine and its system record (the CLI then reports).

asv pitfalls handled here (FIELD-NOTES): an existing environment saves results only
with ``--set-commit-hash``; ``spawn`` keeps CUDA and Numba's OpenMP layer working;
``--record-samples`` keeps every sample so the report can use the best one.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

from .model import PortabenchError
from .runinfo import system_record, write_system_record
from .batched_inputs import SIZE_ENV as BATCHED_SIZE_ENV
from .tensor_inputs import SIZE_ENV as TENSOR_SIZE_ENV
from .stream.definition import SIZE_ENV as STREAM_SIZE_ENV
from .bcsr.definition import SIZE_ENV as BCSR_SIZE_ENV

CONFIG = "asv.conf.json"


def find_config(start: Path | None = None) -> Path:
    """The suite's asv.conf.json: in the working directory or a parent, else beside the sources."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / CONFIG).is_file() and (folder / "suite").is_dir():
            return folder / CONFIG
    source_root = Path(__file__).resolve().parents[1]  # an editable install's checkout
    if (source_root / CONFIG).is_file():
        return source_root / CONFIG
    raise PortabenchError(f"no {CONFIG} found: run from the portabench checkout (git clone, then pip install -e .)")


def machine_name(name: str | None) -> str:
    name = name or socket.gethostname().split(".")[0] or "machine"
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name):
        raise PortabenchError(f"machine name {name!r}: use letters, digits, '.', '_' and '-'")
    return name


def _git_head(repo: Path) -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        raise PortabenchError(f"{repo} is not a git checkout with a commit (asv records results per commit): {exc}") from None
    return out.stdout.strip()


def _results_dir(config: Path) -> Path:
    import json5  # asv's own dependency; asv.conf.json may hold comments

    conf = json5.loads(config.read_text())
    return (config.parent / conf.get("results_dir", "results")).resolve()


def results_dir() -> Path:
    """The asv results directory of the suite's configuration."""
    return _results_dir(find_config())


def run_benchmarks(
    machine: str | None,
    bench: str | None = None,
    stream_n: str | None = None,
    batched_n: str | None = None,
    tensor_nnz: str | None = None,
    bcsr_mib: str | None = None,
    quick: bool = False,
    user_peaks: dict | None = None,
) -> int:
    """Run asv on this machine and record its system; returns asv's exit status (2: some benchmark failed)."""
    config = find_config()
    repo = config.parent
    machine = machine_name(machine)
    commit = _git_head(repo)
    results = _results_dir(config)
    asv = [sys.executable, "-m", "asv"]
    if shutil.which("git") is None:
        raise PortabenchError("git is not on PATH: asv needs it")

    env = dict(os.environ)
    if stream_n:
        env[STREAM_SIZE_ENV] = stream_n
    if batched_n:
        env[BATCHED_SIZE_ENV] = batched_n
    if tensor_nnz:
        env[TENSOR_SIZE_ENV] = tensor_nnz
    if bcsr_mib:
        env[BCSR_SIZE_ENV] = bcsr_mib
    # Keep MKL's OpenMP runtime from fighting Numba's (FIELD-NOTES).
    env.setdefault("MKL_THREADING_LAYER", "GNU")

    record = system_record(machine, user_peaks)
    subprocess.run([*asv, "machine", "--yes", "--machine", machine, "--config", str(config)],
                   cwd=repo, env=env, check=True, stdout=subprocess.DEVNULL)
    command = [
        *asv, "run", "--config", str(config), "--python=same", "--set-commit-hash", commit,
        "--machine", machine, "--record-samples", "--launch-method", "spawn", "--show-stderr",
    ]
    if bench:
        command += ["--bench", bench]
    if quick:
        # asv's own --quick saves nothing; fewer samples keep the results.
        command += ["--attribute", "repeat=3", "--attribute", "rounds=1"]
    print(f"portabench: {' '.join(command[2:])}", flush=True)
    status = subprocess.run(command, cwd=repo, env=env).returncode
    path = write_system_record(results, record)
    print(f"portabench: system record -> {path}")
    if status not in (0, 2):
        raise PortabenchError(f"asv run failed with exit status {status}")
    if status == 2:
        print("portabench: some benchmarks failed (wrong answer or error): they recorded no time", file=sys.stderr)
    return status
