"""Regression tracking's two commands that run benchmarks: a machine's noise record (``portabench noise``)
and the two-commit check (``portabench check``), both over rounds, their statistics harness/statistics.py's
and their verdicts compare.py's (``compare``, the judge of two result sets).

``noise`` runs the selected benchmarks of the checked-out commit in 2 x N rounds, asv taking every
combination once per round, so that the rounds of the two halves (odd and even) interleave in time:
an A/A comparison of the same code. It records the results as ``run`` does, says how many pairs its
own A/A calls a change (the false alarms of a check on this machine), and adds each benchmark's
spread between rounds to ``results/<machine>/portabench.noise``, where ``compare``, ``check`` and the
report read the noise floors.

``check BASELINE CONTENDER`` installs both commits, each into a virtualenv of its own built offline
from a wheelhouse (``.asv/wheelhouse``), and runs their rounds in turn (ABBA...: a drift falls on
both), each round one ``asv run`` of the commit's own suite (a worktree of it) that appends its
samples; ``compare`` judges them, pooling each side's spread between rounds with the machine's record.
Every pair that was not disturbed (``DISTURBED``: contended, or an unequal spread) adds its rounds' spread
to the record (the same code within a side).
Its worktrees, asv environments and results stay under the git-ignored ``.asv/``. Where there is
no wheelhouse and no package index (a GPU node), ``--installed`` runs both commits on this Python
and the dependencies installed here: each commit's own package is laid out (no build, no
dependencies) in ``.asv/sides/<commit>``, first on its rounds' path.
"""

from __future__ import annotations

import datetime
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from portabench.harness.statistics import CHECK_ROUNDS, CONTENDED, DEFAULT_ALPHA, NoiseRecord

from portabench.implementations import get_kernel
from portabench.harness.machine.record import RUN_LOG_ENV
from portabench.implementations.model import PortabenchError
from portabench.harness.plan import RunPlan

from .asv_config import config_dir, find_config, read_config
from .asv_process import (benchmark_environment, contention_of, git_head, launch_method, process_lives, run_lock,
                          run_with_progress, scratch_folder, wait_passively_if_busy)
from .prefill import prefill_plan
from .results_merge import ROUND_SAMPLES, result_files
from .runner import run_benchmarks
from .selection import machine_name

NOISE_ROUNDS = 3  # rounds a half of ``portabench noise``'s A/A: 6 processes a combination
WHEELHOUSE = Path(".asv") / "wheelhouse"


def resolve_commit(repo: Path, name: str) -> str:
    """The full hash of ``name`` (a hash, a branch, ``HEAD~1``), else a one-line error."""
    done = subprocess.run(["git", "rev-parse", "--verify", "--quiet", f"{name}^{{commit}}"], cwd=repo,
                          capture_output=True, text=True)
    if done.returncode or not done.stdout.strip():
        raise PortabenchError(f"{name!r} is no commit of {repo} (a hash, a branch or HEAD~N)")
    return done.stdout.strip()


def _rows_of(results: Path, machine: str, commit: str) -> pd.DataFrame:
    """The tidy rows of ``machine``'s results at ``commit``."""
    from portabench.reports.results import load_results

    rows = load_results(results).table
    return rows[(rows.machine == machine) & (rows.commit == commit)].reset_index(drop=True)


# --- noise ------------------------------------------------------------------------------------------


@dataclass
class NoiseSummary:
    machine: str
    commit: str
    rounds: int  # a half
    pairs: int
    flagged: int
    contended: int  # pairs with a round others took CONTENDED of the CPU in: no verdict, not in the record
    alpha: float
    floors: pd.DataFrame  # kernel, device, benchmarks, median and worst floor (%)
    path: Path

    def describe(self) -> str:
        from tabulate import tabulate

        lines = [f"noise: {self.machine} at {self.commit[:8]}, {self.rounds}+{self.rounds} interleaved rounds of "
                 f"{self.pairs} benchmarks",
                 f"A/A: {self.flagged} of {self.pairs - self.contended} pairs called a change at alpha {self.alpha:g} "
                 f"(expected {self.alpha * (self.pairs - self.contended):.1f}); {self.contended} contended (other "
                 f"processes took {CONTENDED:.0%} of the CPU or more in a round): no verdict, kept out of the record",
                 f"noise floors: the change a check of {CHECK_ROUNDS} rounds a side finds nine times in ten"]
        lines.append(tabulate(self.floors, headers="keys", showindex=False, floatfmt=".3g"))
        lines.append(f"record: {self.path}")
        return "\n".join(lines)


def measure_noise(machine: str | None, plan: RunPlan, rounds: int = NOISE_ROUNDS, verbose: bool = False,
                  fresh: bool = False) -> NoiseSummary:
    """The A/A of the checked-out commit over ``plan`` in 2 x ``rounds`` rounds, recorded, and the machine's
    noise record."""
    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 2:
        raise PortabenchError(f"--rounds must be a whole number >= 2 (rounds a half of the A/A), got {rounds}")
    config = find_config()
    machine = machine_name(machine)
    commit = git_head(config.parent)  # the run's: a commit made meanwhile is not what ran
    summary = run_benchmarks(machine, plan, verbose=verbose, rounds=2 * rounds)
    results = config_dir("results_dir", "results", config)
    rows = _rows_of(results, machine, commit)
    rows = rows[rows.round_counts.map(len) == 2 * rounds]
    if rows.empty:
        raise PortabenchError(f"no benchmark of {machine} at {commit[:8]} ran {2 * rounds} whole rounds: "
                              f"see {summary.log}")
    record = (None if fresh else NoiseRecord.load(results / machine)) or NoiseRecord()
    flagged, contended, floors = judge_aa(rows, record)
    record.sources.append(f"noise {commit[:8]} {rounds}+{rounds} rounds {datetime.date.today()}")
    path = record.save(results / machine)
    return NoiseSummary(machine, commit, rounds, len(rows), flagged, contended, DEFAULT_ALPHA, floors, path)


def judge_aa(rows: pd.DataFrame, record: NoiseRecord) -> tuple[int, int, pd.DataFrame]:
    """An A/A's verdicts over ``rows`` (tidy rows of one commit, rounds alternately of either half), each
    uncontended row's spread added to ``record``: how many pairs were called a change, how many were
    contended (no verdict, not recorded: the spread of others' load is not the machine's noise), and the
    floors per kernel and device."""
    from portabench.harness.statistics import IMPROVEMENT, REGRESSION, Noise, round_medians, spread, verdict

    flagged, contended, floors = 0, 0, []
    for r in rows.itertuples(index=False):
        medians = round_medians(r.samples, r.round_counts)
        halves = medians[0::2], medians[1::2]  # asv took round k of every combination before round k + 1
        flagged += verdict(*halves, alpha=DEFAULT_ALPHA, contention=r.contention).status in (REGRESSION, IMPROVEMENT)
        if r.contention >= CONTENDED:
            contended += 1
            continue
        record.add(r.benchmark, r.params, Noise(*spread(halves)))
        floors.append((r.kernel, r.device, record.floor_pct(r.benchmark, r.params)))
    table = pd.DataFrame(floors, columns=["kernel", "device", "floor"]).groupby(["kernel", "device"]).floor.agg(
        benchmarks="count", **{"median floor %": "median", "worst floor %": "max"}).reset_index()
    return flagged, contended, table


# --- check ------------------------------------------------------------------------------------------


def _wheel_name(name: str) -> str:
    """A distribution's name as wheel files spell it (PEP 427: runs of -_. as one underscore, lower case)."""
    return re.sub(r"[-_.]+", "_", name).lower()


def _dependencies(tree: Path) -> list[str]:
    """The distribution names a checkout's ``pyproject.toml`` depends on (none where it cannot be read)."""
    import tomllib

    try:
        project = tomllib.loads((tree / "pyproject.toml").read_text())["project"]
    except (OSError, ValueError, KeyError):
        return []
    return [m.group(0) for r in project.get("dependencies", []) if (m := re.match(r"[A-Za-z0-9._-]+", r))]


def wheelhouse_ready(repo: Path, wheelhouse: Path, trees: list[Path]) -> Path:
    """The wheelhouse the commits install from, with a wheel of every dependency of each checkout in
    ``trees``: what is missing is built once from the package index; offline, a one-line error names it."""
    wheelhouse = (repo / wheelhouse).resolve() if not wheelhouse.is_absolute() else wheelhouse
    have = {_wheel_name(w.name.split("-")[0]) for w in wheelhouse.glob("*.whl")}
    missing = list(dict.fromkeys(d for t in trees for d in _dependencies(t) if _wheel_name(d) not in have))
    if not missing:
        return wheelhouse
    print(f"portabench: adding {', '.join(missing)} to the wheelhouse {wheelhouse} (needs the package index; later "
          "checks run offline)", flush=True)
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--find-links", str(wheelhouse),
                           "--wheel-dir", str(wheelhouse), *missing, "wheel"], cwd=repo, capture_output=True, text=True)
    have = {_wheel_name(w.name.split("-")[0]) for w in wheelhouse.glob("*.whl")}
    still = [d for d in missing if _wheel_name(d) not in have]
    if done.returncode or still:
        said = (done.stderr.strip().splitlines() or ["no error given"])[-1]
        raise PortabenchError(f"the wheelhouse {wheelhouse} lacks {', '.join(still or missing)} and pip could not add "
                              f"them ({said}): where there is a package index, run pip wheel --wheel-dir {wheelhouse} "
                              f"{' '.join(still or missing)} and copy the wheels here")
    return wheelhouse


def _tree(repo: Path, commit: str) -> Path:
    return repo / ".asv" / "trees" / commit[:12]


def _worktree(repo: Path, commit: str) -> Path:
    """A checkout of ``commit`` under .asv/trees/: its own suite and project files."""
    tree = _tree(repo, commit)
    if not (tree / "suite").is_dir():
        shutil.rmtree(tree, ignore_errors=True)
        subprocess.run(["git", "worktree", "prune"], cwd=repo, capture_output=True)
        done = subprocess.run(["git", "worktree", "add", "--force", "--detach", str(tree), commit], cwd=repo,
                              capture_output=True, text=True)
        if done.returncode or not (tree / "suite").is_dir():
            raise PortabenchError(f"commit {commit[:8]} has no benchmark suite (suite/) to check out: "
                                  f"{done.stderr.strip() or 'no suite/ folder'}")
    return tree


def _side_config(repo: Path, folder: Path, wheelhouse: Path | None, commit: str) -> Path:
    """asv's configuration of one side of a check: the commit's own suite (a worktree of it), the commit
    built into a wheel and installed into a virtualenv of its own (kept under .asv/env/ for the next
    check), offline, from the wheelhouse; without one (``--installed``), this Python as it is, the
    commit's package on the path of its rounds (``_side_package``)."""
    tree = _worktree(repo, commit)
    conf = read_config()
    conf.update(repo=str(repo), branches=[commit], benchmark_dir=str(tree / "suite"), results_dir=str(folder),
                html_dir=str(folder / "html"))
    if wheelhouse is None:
        conf.update(environment_type="existing")  # run with --python=same
    else:
        conf.update(
            environment_type="virtualenv", env_dir=str(repo / ".asv" / "env" / commit[:12]),
            build_command=["python -m pip wheel --no-deps --no-build-isolation --no-index -w {build_cache_dir} {build_dir}"],
            install_command=[f"in-dir={{env_dir}} python -m pip install --no-index --find-links {wheelhouse} {{wheel_file}}"])
    conf.pop("matrix", None)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "asv.conf.json"
    path.write_text(json.dumps(conf, indent=2))
    return path


def _side_package(repo: Path, commit: str) -> Path:
    """A folder holding ``commit``'s own ``portabench`` package, laid out from the checkout of it as its
    ``pyproject.toml`` maps the packages (pure Python: no build, no build backend, nothing to fetch),
    without dependencies (this Python provides them); kept under .asv/sides/ for the next check. asv
    puts it first on the path of the benchmark processes (``ASV_PYTHONPATH``), ahead of the checkout's
    own install."""
    import tomllib

    side = repo / ".asv" / "sides" / commit[:12]
    if (side / "portabench").is_dir():
        return side
    tree = _worktree(repo, commit)
    try:
        mapping = tomllib.loads((tree / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    except (OSError, ValueError, KeyError):
        mapping = {}
    if not mapping or not all((tree / folder).is_dir() for folder in mapping.values()):
        raise PortabenchError(f"commit {commit[:8]} maps no package folders in its pyproject.toml "
                              "([tool.setuptools] package-dir): --installed cannot lay it out; use the wheelhouse")
    partial = side.with_name(side.name + ".partial")  # renamed when whole: an interrupted copy is no side
    shutil.rmtree(partial, ignore_errors=True)
    for package, folder in mapping.items():
        shutil.copytree(tree / folder, partial.joinpath(*package.split(".")),
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    shutil.rmtree(side, ignore_errors=True)
    partial.rename(side)
    return side


def _samples_so_far(folder: Path, machine: str) -> dict[str, dict[str, int]]:
    """Benchmark -> combination (``combo_key``) -> samples recorded so far in a side's results ``folder``."""
    from portabench.harness.statistics import combo_key

    out: dict[str, dict[str, int]] = {}
    for path in result_files(folder / machine):
        data = json.loads(path.read_text())
        columns = data.get("result_columns") or []
        for name, entry in (data.get("results") or {}).items():
            col = dict(zip(columns, entry))
            for combo, values in zip(itertools.product(*(col.get("params") or [])), col.get("samples") or []):
                out.setdefault(name, {})[combo_key(combo)] = len(values) if isinstance(values, list) else 0
    return out


@dataclass
class CheckSummary:
    text: str
    regressed: bool
    wall_s: float


def check_commits(baseline: str, contender: str, plan: RunPlan, machine: str | None = None,
                  rounds: int = CHECK_ROUNDS, wheelhouse: Path | None = WHEELHOUSE, alpha: float | None = None, factor: float = 1.0,
                  verbose: bool = False, show_all: bool = False) -> CheckSummary:
    """Both commits installed, their rounds interleaved in one time window (ABBA...: a drift falls on both),
    the verdicts, and the machine's noise record grown by each side's spread between rounds."""
    from portabench.harness.commands.compare import Side, compare, format_comparison
    from portabench.harness.statistics import DISTURBED, Noise, round_medians, spread

    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1:
        raise PortabenchError(f"--rounds must be a whole number >= 1 (rounds a side), got {rounds}")
    started = time.time()
    config = find_config()
    repo = config.parent
    machine = machine_name(machine)
    # Side folders of one length: their paths reach the benchmark processes' environment (the event log's),
    # whose size moves a process's stack; the two sides see environments of one size.
    sides = {"side-a": resolve_commit(repo, baseline), "side-b": resolve_commit(repo, contender)}
    base, cont = sides["side-a"], sides["side-b"]
    results = config_dir("results_dir", "results", config)
    record = NoiseRecord.load(results / machine)
    with run_lock(repo):
        scratch, log_path, events = scratch_folder(repo, f"check-{machine}")
        print(f"portabench: checking {cont[:8]} against {base[:8]} on {machine} ({', '.join(plan.devices)}), {rounds} "
              f"rounds a side, interleaved; asv's output in {log_path}", flush=True)
        try:
            env = {**benchmark_environment(plan, events), **older_suite_environment(plan)}
            wheels = None
            if wheelhouse is not None:
                wheels = wheelhouse_ready(repo, Path(wheelhouse), [_worktree(repo, c) for c in set(sides.values())])
                env.update(PIP_NO_INDEX="1", PIP_FIND_LINKS=str(wheels))  # asv's own pip calls take only these
            busy = wait_passively_if_busy(env)
            if busy:
                print(f"portabench: warning: {busy}", file=sys.stderr, flush=True)
            with open(log_path, "w") as log:
                _interleave(repo, machine, sides, rounds, plan, wheels, env, log, scratch, verbose)
            result = compare(Side(scratch / "side-a", base), Side(scratch / "side-b", cont), machine,
                             factor=factor, alpha=alpha or DEFAULT_ALPHA, records={machine: record} if record else {})
            text = format_comparison(result, Side(Path("baseline"), base[:8]), Side(Path("contender"), cont[:8]),
                                     show_all)
            # Each side's rounds are rounds of one code: their spread adds to the machine's record.
            grown, added = record or NoiseRecord(), 0
            for r in result.table.itertuples(index=False):
                if r.status != DISTURBED:
                    noise = Noise(*spread([round_medians(r.samples_base, r.round_counts_base),
                                           round_medians(r.samples_cont, r.round_counts_cont)]))
                    added += noise.df > 0
                    grown.add(r.benchmark, r.params, noise)
            if added:
                grown.sources.append(f"check {base[:8]}..{cont[:8]} {rounds}+{rounds} rounds {datetime.date.today()}")
                (results / machine).mkdir(parents=True, exist_ok=True)
                text += f"\nnoise record: {added} benchmarks' spread added -> {grown.save(results / machine)}"
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
            for commit in set(sides.values()):  # the worktrees go (cheap to make again); the environments stay
                subprocess.run(["git", "worktree", "remove", "--force", str(_tree(repo, commit))], cwd=repo,
                               capture_output=True)
    return CheckSummary(text, result.regressed, time.time() - started)


def older_suite_environment(plan: RunPlan) -> dict[str, str]:
    """The plan as a suite that predates ``$PORTABENCH_PLAN`` reads it (a side of a check may be such a
    commit): each sized kernel's ``$PORTABENCH_SIZE_<KERNEL>`` and the devices in ``$PORTABENCH_DEVICES``.
    Today's suite reads these only where no plan is given."""
    env = {get_kernel(kernel).size_env: ",".join(map(str, sizes)) for kernel, sizes in plan.sizes}
    env["PORTABENCH_DEVICES"] = ",".join(plan.devices)  # suite/classes.py's DEVICES_ENV
    return env


def _interleave(repo: Path, machine: str, sides: dict[str, str], rounds: int, plan: RunPlan, wheels: Path | None, env: dict,
                log, scratch: Path, verbose: bool) -> None:
    """The sides' rounds in turn (ABBA...), each one ``asv run`` appending its samples to the side's results
    under ``scratch/<side>``; then each results file says which samples each round took and what share of
    the CPU others took meanwhile, as ``portabench run`` writes them."""
    from portabench.harness.statistics import CONTENTION_KEY, ROUNDS_KEY

    asv = [sys.executable, "-m", "asv"]
    configs = {side: _side_config(repo, scratch / side, wheels, commit) for side, commit in sides.items()}
    # Without a wheelhouse each side runs on this Python (--python=same), its own package first on the path.
    packages = {} if wheels is not None else {side: _side_package(repo, commit) for side, commit in sides.items()}
    counts: dict[str, dict[str, dict[str, list[int]]]] = {side: {} for side in sides}  # bench -> combo -> rounds
    shares: dict[str, dict[tuple, list[float]]] = {side: {} for side in sides}
    subprocess.run([*asv, "machine", "--yes", "--machine", machine, "--config", str(configs["side-a"])],
                   cwd=repo, env=env, check=True, stdout=log, stderr=subprocess.STDOUT)
    prefill_plan(plan, env, log, scratch, verbose)
    chosen = plan.selection()
    for r in range(rounds):
        for side in list(sides) if r % 2 == 0 else list(sides)[::-1]:
            commit, folder = sides[side], scratch / side
            round_events = folder / f"events-{r}.jsonl"
            env[RUN_LOG_ENV] = str(round_events)
            side_env = dict(env)
            which = [f"{commit}^!"]
            if side in packages:
                side_env["ASV_PYTHONPATH"] = os.pathsep.join(filter(None, [str(packages[side]), env.get("PYTHONPATH")]))
                which = ["--python=same", "--set-commit-hash", commit]
            command = [*asv, "run", "--config", str(configs[side]), "--machine", machine, "--record-samples",
                       "--append-samples", "--attribute", "rounds=1", "--attribute", f"repeat={ROUND_SAMPLES}",
                       "--launch-method", launch_method(), "--show-stderr", "--bench", chosen, *which]
            log.write(f"round {r + 1}/{rounds} of {side} ({commit[:8]}): {' '.join(command)}\n")
            log.flush()
            before = _samples_so_far(folder, machine)
            trace: list[tuple[float, dict]] = []
            status = run_with_progress(command, repo, side_env, log, folder, round_events, verbose, trace=trace)
            if status not in (0, 2):
                raise PortabenchError(f"asv run of {commit[:8]} failed (exit status {status}): see {log.name}")
            for name, combos in _samples_so_far(folder, machine).items():
                for key, n in combos.items():
                    taken = n - before.get(name, {}).get(key, 0)
                    if taken > 0:
                        counts[side].setdefault(name, {}).setdefault(key, []).append(taken)
            for key, values in contention_of(process_lives(round_events), trace).items():
                shares[side].setdefault(key, []).extend(values)
    for side in sides:
        others = {name: {key: shares[side][(name.rsplit(".", 1)[0], tuple(json.loads(key)))] for key in combos
                         if (name.rsplit(".", 1)[0], tuple(json.loads(key))) in shares[side]}
                  for name, combos in counts[side].items()}
        for path in result_files(scratch / side / machine):
            data = json.loads(path.read_text())
            data[ROUNDS_KEY], data[CONTENTION_KEY] = counts[side], others
            path.write_text(json.dumps(data))
