"""Regression tracking end to end: ``portabench noise`` (an A/A of interleaved rounds, recorded beside
the results) and ``portabench check`` (two commits, each installed offline into a virtualenv of its
own from the wheelhouse, or laid out apart for this Python with ``--installed``, their rounds
interleaved). Tiny sizes and one benchmark: the path, not the statistics, which tests/test_rounds.py
checks on data of known truth."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from portabench.harness.commands.tracking import _side_config, _side_package
from portabench.harness.statistics import NOISE_FILE, NoiseRecord

REPO = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "portabench.harness.commands.cli"]
WHEELHOUSE = Path(os.environ.get("PORTABENCH_WHEELHOUSE", REPO / ".asv" / "wheelhouse"))
STREAM = ["--device", "cpu", "--bench", r"stream\.StreamCPU", "--size", "stream=200000"]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    for key, value in (("GIT_AUTHOR_NAME", "pytest"), ("GIT_AUTHOR_EMAIL", "pytest@portabench.invalid")):
        env.setdefault(key, value)
    return env


def test_noise_records_each_benchmarks_spread_and_its_own_false_alarms() -> None:
    machine = "pytest-noise"
    folder = REPO / "results" / machine
    shutil.rmtree(folder, ignore_errors=True)
    try:
        done = subprocess.run([*CLI, "noise", "--machine", machine, "--rounds", "2", *STREAM], cwd=REPO,
                              capture_output=True, text=True, env=_env(), timeout=600)
        assert done.returncode == 0, done.stdout + done.stderr
        judged = re.search(r"A/A: \d+ of (\d+) pairs called a change at alpha .*; (\d+) contended", done.stdout)
        assert judged and int(judged[1]) + int(judged[2]) == 12, done.stdout
        record = NoiseRecord.load(folder)
        assert record is not None and len(record.benchmarks) == int(judged[1])  # contended pairs left out
        assert {noise.df for noise in record.benchmarks.values()} == {2}  # 2 + 2 rounds, one level a half
        assert (folder / NOISE_FILE).is_file() and any(folder.glob("*-existing-*.json"))  # the run is recorded
        again = subprocess.run([*CLI, "noise", "--machine", machine, "--rounds", "2", *STREAM], cwd=REPO,
                               capture_output=True, text=True, env=_env(), timeout=600)
        assert again.returncode == 0, again.stdout + again.stderr
        assert max(noise.df for noise in NoiseRecord.load(folder).benchmarks.values()) == 4  # kept and grown
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_a_contended_pair_gets_no_verdict_and_stays_out_of_the_noise_record() -> None:
    import numpy as np
    import pandas as pd

    from portabench.harness.commands.tracking import judge_aa

    rng = np.random.default_rng(int.from_bytes(os.urandom(4), "little"))
    rows = pd.DataFrame([{"benchmark": "stream.StreamCPU.time_stream", "params": f'{{"op":"{op}"}}', "kernel": "stream",
                          "device": "cpu", "samples": tuple(rng.normal(1.0, 0.01, 28)), "round_counts": (7,) * 4,
                          "contention": share} for op, share in (("triad", 0.02), ("dot", 0.6), ("copy", float("nan")))])
    record = NoiseRecord()
    flagged, contended, floors = judge_aa(rows, record)
    assert contended == 1 and flagged == 0
    assert set(record.benchmarks) == {'stream.StreamCPU.time_stream {"op":"triad"}', 'stream.StreamCPU.time_stream {"op":"copy"}'}
    assert floors.benchmarks.sum() == 2


def test_noise_takes_at_least_two_rounds_a_half(capsys) -> None:
    from portabench.harness.commands.cli import main

    assert main(["noise", "--rounds", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("portabench: error:") and "--rounds must be a whole number >= 2" in err


def test_a_check_side_builds_its_commit_offline_into_a_virtualenv_of_its_own(tmp_path: Path) -> None:
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    wheels = tmp_path / "wheels"
    try:
        conf = json.loads(_side_config(REPO, tmp_path / "side", wheels, head).read_text())
        tree = Path(conf["benchmark_dir"]).parent
        assert conf["environment_type"] == "virtualenv" and conf["branches"] == [head]
        assert Path(conf["benchmark_dir"]) == tree / "suite" and (tree / "suite" / "classes.py").is_file()
        assert subprocess.run(["git", "rev-parse", "HEAD"], cwd=tree, capture_output=True, text=True).stdout.strip() == head
        assert Path(conf["env_dir"]).is_relative_to(REPO / ".asv") and Path(conf["results_dir"]) == tmp_path / "side"
        for command in conf["build_command"] + conf["install_command"]:
            assert "--no-index" in command  # offline
        assert f"--find-links {wheels}" in " ".join(conf["install_command"])
        for path in (".asv/env/x/bin/python", ".asv/trees/x/suite/classes.py", ".asv/wheelhouse/x.whl"):
            assert subprocess.run(["git", "check-ignore", "-q", path], cwd=REPO).returncode == 0, path
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(REPO / ".asv" / "trees" / head[:12])], cwd=REPO,
                       capture_output=True)


def test_a_check_names_a_commit_that_is_none(capsys) -> None:
    from portabench.harness.commands.cli import main

    assert main(["check", "HEAD", "no-such-commit-here"]) == 2
    assert "'no-such-commit-here' is no commit" in capsys.readouterr().err


@pytest.mark.parametrize("how", [
    pytest.param([], id="wheelhouse", marks=pytest.mark.skipif(
        not any(WHEELHOUSE.glob("numpy-*.whl")),
        reason=f"no wheelhouse at {WHEELHOUSE} (README, Regression tracking: pip wheel ...)")),
    pytest.param(["--installed", "--wheelhouse", "/nonexistent"], id="installed")])
def test_check_between_two_commits_offline(how: list[str]) -> None:
    """The README's one command on one tiny benchmark, HEAD~1 against HEAD, without a network where the
    test can take it away: each commit in its own virtualenv from the wheelhouse, or (``--installed``)
    both on this Python."""
    machine = "pytest-check"
    folder = REPO / "results" / machine
    shutil.rmtree(folder, ignore_errors=True)
    offline = ["unshare", "-n"] if shutil.which("unshare") and subprocess.run(
        ["unshare", "-n", "true"], capture_output=True).returncode == 0 else []
    try:
        done = subprocess.run([*offline, *CLI, "check", "HEAD~1", "HEAD", *how, "--machine", machine, "--rounds", "2",
                               "--all", *STREAM], cwd=REPO, capture_output=True, text=True, env=_env(), timeout=1500)
        assert done.returncode in (0, 1), done.stdout[-3000:] + done.stderr[-3000:]  # 1: a regression
        assert "12 paired:" in done.stdout and "Traceback" not in done.stderr, done.stdout + done.stderr
        judged = [line for line in done.stdout.splitlines() if "2+2 rounds" in line or "no verdict" in line]
        assert len(judged) == 12, done.stdout
        assert not list((REPO / ".asv" / "trees").glob("*/suite"))  # the worktrees went
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_an_installed_side_is_its_commits_own_package_first_on_the_path() -> None:
    """--installed: HEAD~1's package, laid out without dependencies, shadows the checkout's own install for
    the processes given it on their path, as asv's benchmark processes are (ASV_PYTHONPATH)."""
    base = subprocess.run(["git", "rev-parse", "HEAD~1"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    side = _side_package(REPO, base)
    try:
        # The tracking module where the commit has it: harness/commands/ now, implementations/commands/ before.
        folder = next(f for f in ("harness", "implementations") if subprocess.run(
            ["git", "cat-file", "-e", f"{base}:{f}/commands/tracking.py"], cwd=REPO, capture_output=True).returncode == 0)
        module = f"portabench/{folder}/commands/tracking.py"
        shown = subprocess.run(["git", "show", f"{base}:{module.replace('portabench/', '')}"], cwd=REPO,
                               capture_output=True, text=True).stdout
        assert (side / module).read_text() == shown  # the commit's code, not the checkout's
        probe = f"import portabench.{folder}.commands.tracking as m; print(m.__file__)"
        where = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                               env={**os.environ, "PYTHONPATH": str(side)}).stdout.strip()
        assert Path(where) == side / module
        assert not list(side.glob("numpy*")) and not list(side.glob("scipy*"))  # no dependencies of its own
        conf = json.loads(_side_config(REPO, side.parent / "conf", None, base).read_text())
        assert conf["environment_type"] == "existing" and "install_command" not in conf
    finally:
        shutil.rmtree(side.parent, ignore_errors=True)
        subprocess.run(["git", "worktree", "remove", "--force", str(REPO / ".asv" / "trees" / base[:12])], cwd=REPO,
                       capture_output=True)


def test_a_wheelhouse_missing_a_dependency_is_completed_or_named(tmp_path: Path) -> None:
    from portabench.datasets.errors import PortabenchError
    from portabench.harness.commands.tracking import wheelhouse_ready

    wheels, tree = tmp_path / "wheels", tmp_path / "tree"
    wheels.mkdir()
    tree.mkdir()
    (wheels / "numpy-2.0.0-cp311-cp311-manylinux_2_17_x86_64.whl").write_bytes(b"")
    (tree / "pyproject.toml").write_text('[project]\nname = "x"\ndependencies = ["NumPy>=1.24", "no_such.package-here>=1"]\n')
    with pytest.raises(PortabenchError) as err:
        wheelhouse_ready(tmp_path, wheels, [tree])
    assert "lacks no_such.package-here" in str(err.value) and "\n" not in str(err.value)
    (tree / "pyproject.toml").write_text('[project]\nname = "x"\ndependencies = ["numpy"]\n')
    assert wheelhouse_ready(tmp_path, wheels, [tree]) == wheels  # nothing missing: nothing fetched
