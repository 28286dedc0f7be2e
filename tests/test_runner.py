"""``portabench run``: what it selects (every kernel's main comparison, studies on request), its
size flags, everything it checks before asv starts, and what it leaves behind (only its own
machine's folder; nothing after an interrupt)."""

from __future__ import annotations

import collections
import itertools
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest

from portabench.implementations import get_kernel, list_kernels
from portabench.harness.commands.cli import main
from portabench.implementations.model import MAIN
from portabench.harness.commands.asv_process import _descendants
from portabench.harness.commands.selection import parse_size_flags, parse_studies
from portabench.harness.plan import INPUTS_STUDY, RunPlan, study_names
from test_cli import _one_line_error

REPO = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "portabench.harness.commands.cli"]


def _cmdline(pid: int) -> str:
    """A process's command line; empty once it has exited (asv's forks come and go)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_text()
    except OSError:
        return ""


def selection(studies: list[str], devices: list[str], bench: str | None) -> str:
    """The asv expression of a run's plan."""
    return RunPlan.build(devices, studies=studies, bench=bench).selection()


def _names(pattern: str) -> list[str]:
    """Every declared benchmark class of both devices that ``pattern`` (asv -b) selects."""
    names = [f"{k}.{s.class_name}.time_x" for k in list_kernels() for d in ("cpu", "gpu")
             for s in get_kernel(k).studies(d)]
    return [n for n in names + ["dataset_io.TensorTextReader.time_read"] if re.search(pattern, n)]


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_the_default_run_is_every_kernels_main_comparison(device: str) -> None:
    chosen = _names(selection([], [device], None))
    for kernel in list_kernels():
        studies = get_kernel(kernel).studies(device)
        main_study = studies[0]
        assert main_study.name == MAIN and main_study.device == device
        assert f"{kernel}.{main_study.class_name}.time_x" in chosen
        # a main comparison pairs portable with vendor variants
        families = {get_kernel(kernel).variant(v).family for v in main_study.variants}
        assert families == {"portable", "vendor"}, (kernel, device, main_study.variants)
    assert all(n.split(".")[1].endswith(device.upper()) for n in chosen)
    assert len(chosen) == len(list_kernels())  # nothing but the main comparisons


def test_studies_are_added_by_name_and_all_adds_every_one() -> None:
    every = set(_names(selection(parse_studies("all"), ["cpu", "gpu"], None)))
    declared = {f"{k}.{s.class_name}.time_x" for k in list_kernels() for d in ("cpu", "gpu")
                for s in get_kernel(k).studies(d)}
    assert declared <= every and "dataset_io.TensorTextReader.time_read" in every
    rank = set(_names(selection(["rank"], ["cpu"], None)))
    assert "mttkrp.MttkrpRankCPU.time_x" in rank and "phi.PhiPressureCPU.time_x" not in rank
    assert INPUTS_STUDY in study_names() and "pressure" in study_names()
    # --bench alone picks among every declared benchmark; with --studies, among those selected
    assert _names(selection([], ["gpu"], "Launch")) == ["mttkrp.MttkrpLaunchGPU.time_x", "phi.PhiLaunchGPU.time_x"]
    assert _names(selection(["pressure"], ["cpu"], "Mttkrp")) == ["mttkrp.MttkrpCPU.time_x"]


def test_no_combination_runs_in_two_studies() -> None:
    """A (case, size, options, variant, settings) of one kernel, device and measure belongs to one class."""
    for kernel in list_kernels():
        k = get_kernel(kernel)
        for device in ("cpu", "gpu"):
            seen: dict[tuple, str] = {}
            for s in k.studies(device):
                for case in s.cases:
                    for size in s.sizes:
                        key_options = [tuple(sorted(zip(s.options, values)))
                                       for values in _product(s.options.values())]
                        for options in key_options:
                            if k.unsupported(case, size, dict(options)) is not None:
                                continue
                            for variant in s.variants:
                                for settings in _product(s.settings.values()):
                                    key = (s.measure, case, size, options, variant, settings)
                                    assert key not in seen, (kernel, device, key, seen.get(key), s.class_name)
                                    seen[key] = s.class_name


def _product(lists) -> list[tuple]:
    import itertools

    return list(itertools.product(*lists))


def test_size_flags_and_their_aliases_agree(capsys) -> None:
    from portabench.harness.commands.cli import build_parser, run_sizes

    new = run_sizes(build_parser().parse_args(
        ["run", "--size", "stream=65536,1e6", "--size", "mttkrp=20000", "--size", "phi=20000", "--size", "pi=20000",
         "--size", "batched_spmv=1024", "--size", "gmres=1024", "--size", "bcsr=2"]))
    old = run_sizes(build_parser().parse_args(
        ["run", "--stream-n", "65536,1000000", "--tensor-nnz", "20000", "--batched-n", "1024", "--bcsr-mib", "2"]))
    assert new == old == {"stream": (65536, 1_000_000), "mttkrp": (20000,), "phi": (20000,), "pi": (20000,),
                          "batched_spmv": (1024,), "gmres": (1024,), "bcsr": (2,)}
    # --size wins over an alias naming the same kernel
    both = run_sizes(build_parser().parse_args(["run", "--tensor-nnz", "5000", "--size", "phi=7000"]))
    assert both["phi"] == (7000,) and both["mttkrp"] == (5000,)


def test_a_plain_asv_run_reads_a_kernels_sizes_from_its_own_variable_then_the_old_one(monkeypatch) -> None:
    from suite.classes import environment_sizes

    kernel = get_kernel("mttkrp")
    monkeypatch.delenv(kernel.size_env, raising=False)
    assert environment_sizes(kernel) is None and kernel.benchmark_sizes("cpu") == [kernel.default_size("cpu")]
    monkeypatch.setenv("PORTABENCH_TENSOR_NNZ", "30000")
    assert environment_sizes(kernel) == (30000,)
    monkeypatch.setenv(kernel.size_env, "40000,50000")
    assert environment_sizes(kernel) == (40000, 50000)
    assert parse_size_flags(["mttkrp=40000,50000"]) == {"mttkrp": (40000, 50000)}
    # what the run plan gives reaches the kernel's studies as ints, whatever the environment says
    plan = RunPlan.build(["cpu"], sizes=parse_size_flags(["mttkrp=60000"]))
    assert plan.kernel("mttkrp").benchmark_sizes("cpu") == [60000]
    assert {s.sizes for s in plan.studies_of("mttkrp") if s.name == MAIN} == {(60000,)}
    assert RunPlan.from_json(plan.to_json()) == plan


@pytest.mark.parametrize("argv, needles", [
    (["run", "--stream-n", "abc"], ["--size stream", "'abc'", "elements per array"]),
    (["run", "--stream-n", "-5"], ["--size stream", "positive"]),
    (["run", "--stream-n", "0"], ["--size stream", "positive"]),
    (["run", "--tensor-nnz", "abc"], ["--size mttkrp", "nonzeros"]),
    (["run", "--batched-n", "2.5"], ["--size batched_spmv", "systems"]),
    (["run", "--size", "bcsr=0"], ["--size bcsr", "MiB of block values"]),
    (["run", "--size", "nope=5"], ["unknown kernel 'nope'"]),
    (["run", "--size", "stream"], ["KERNEL=N"]),
    (["run", "--bench", "("], ["--bench '('", "not a regular expression"]),
    (["run", "--studies", "pressure,nope"], ["unknown nope", "known:"]),
    (["verify", "--kernel", "stream", "--seed", "-1"], ["--seed", "0.."]),
])
def test_bad_run_and_verify_requests_are_one_line_errors_before_anything_runs(argv, needles, capsys) -> None:
    before = set(os.listdir(REPO / "results"))
    assert main(argv) == 2
    _one_line_error(capsys, *needles)
    assert set(os.listdir(REPO / "results")) == before  # no machine folder left behind


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
@pytest.mark.parametrize("argv", [["report", "--results", str(REPO / "results"), "--out", "{dir}/report"],
                                  ["verify", "--kernel", "stream", "--size", "1000", "--save", "{dir}/saved"]])
def test_an_unwritable_output_folder_is_a_one_line_error(argv, tmp_path: Path, capsys) -> None:
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    assert main([a.format(dir=locked) for a in argv]) == 2
    _one_line_error(capsys, "cannot be written", str(locked))


@pytest.mark.parametrize("argv", [["report", "--results", str(REPO / "results"), "--out", "{file}/report"],
                                  ["verify", "--kernel", "stream", "--size", "1000", "--save", "{file}/saved"]])
def test_an_output_folder_under_a_file_is_a_one_line_error(argv, tmp_path: Path, capsys) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    assert main([a.format(file=blocker) for a in argv]) == 2
    _one_line_error(capsys, "cannot be written", str(blocker))


def _tracked_changes() -> set[str]:
    out = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO, capture_output=True,
                         text=True, check=True).stdout
    return set(out.splitlines())


def _git_identity() -> dict[str, str]:
    env = dict(os.environ)
    for key, value in (("GIT_AUTHOR_NAME", "pytest"), ("GIT_AUTHOR_EMAIL", "pytest@portabench.invalid")):
        env.setdefault(key, value)
    return env


def test_a_run_writes_only_its_machines_folder_and_says_where_the_time_went() -> None:
    machine = "pytest-run"
    shutil.rmtree(REPO / "results" / machine, ignore_errors=True)
    before = _tracked_changes()
    try:
        done = subprocess.run([*CLI, "run", "--machine", machine, "--device", "cpu", "--size", "stream=65536",
                               "--bench", r"stream\.StreamCPU", "--quick", "--no-report"],
                              cwd=REPO, capture_output=True, text=True, env=_git_identity(), timeout=600)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "Traceback" not in done.stderr
        assert re.search(r"12 parameter combinations in .*timed, .*overhead \(median [0-9.]+ s per combination\)",
                         done.stdout), done.stdout
        folder = REPO / "results" / machine
        results = [f for f in folder.glob("*.json") if f.name not in ("machine.json", "benchmarks.json")]
        assert len(results) == 1 and (folder / "portabench.system").is_file()
        names = json.loads((folder / "benchmarks.json").read_text())
        assert names["stream.StreamCPU.time_stream"]["param_names"] == ["op", "n", "variant"]
        # What the code that ran moved and computed, and each variant's family, recorded per combination for
        # the report (not recomputed by a later version's work model).
        from portabench.harness.machine.record import WORK_KEY
        from portabench.implementations import get_kernel

        work = json.loads(results[0].read_text())[WORK_KEY]["stream.StreamCPU.time_stream"]
        assert len(work) == 12
        kernel = get_kernel("stream")
        for combo, recorded in work.items():
            op, n, variant = (x.strip("'") for x in json.loads(combo))
            assert recorded["bytes"] == kernel.work(op, int(n)).bytes > 0
            assert recorded["family"] == kernel.variant(variant).family
        assert _tracked_changes() == before  # results/benchmarks.json and other machines untouched
    finally:
        shutil.rmtree(REPO / "results" / machine, ignore_errors=True)


def test_rounds_run_each_combination_in_several_processes() -> None:
    machine = "pytest-rounds"
    shutil.rmtree(REPO / "results" / machine, ignore_errors=True)
    try:
        done = subprocess.run([*CLI, "run", "--machine", machine, "--device", "cpu", "--size", "stream=65536",
                               "--bench", r"stream\.StreamCPU", "--rounds", "2", "--no-report"],
                              cwd=REPO, capture_output=True, text=True, env=_git_identity(), timeout=600)
        assert done.returncode == 0, done.stdout + done.stderr
        assert re.search(r"12 parameter combinations \(24 processes\) in ", done.stdout), done.stdout
        events = Path(re.search(r"asv's output in (\S+)\.log", done.stdout).group(1) + ".events.jsonl")
        starts = [json.loads(line) for line in events.read_text().splitlines()]
        first_of_each = {(e["pid"], tuple(e["params"])) for e in starts if e["event"] == "ready"}
        per_combination = collections.Counter(params for _, params in first_of_each)
        assert len(per_combination) == 12 and set(per_combination.values()) == {2}  # two processes each
        # Each round takes a known number of samples, and the results say so: compare's replicates.
        from portabench.harness.commands.results_merge import ROUND_SAMPLES
        from portabench.reports.results import load_results

        rows = load_results(REPO / "results").table
        mine = rows[rows.machine == machine]
        assert len(mine) == 12 and set(mine.round_counts) == {(ROUND_SAMPLES, ROUND_SAMPLES)}
        assert set(mine.samples.map(len)) == {2 * ROUND_SAMPLES}
    finally:
        shutil.rmtree(REPO / "results" / machine, ignore_errors=True)
    for bad in ("0", "2 --quick"):
        done = subprocess.run([*CLI, "run", "--machine", machine, "--rounds", *bad.split()],
                              cwd=REPO, capture_output=True, text=True, env=_git_identity(), timeout=600)
        assert done.returncode != 0 and "--rounds must be a whole number >= 1" in done.stderr, done.stderr
        assert "Traceback" not in done.stderr


def test_a_run_builds_its_problems_before_asv_starts() -> None:
    machine = "pytest-prefill"
    shutil.rmtree(REPO / "results" / machine, ignore_errors=True)
    try:
        done = subprocess.run([*CLI, "run", "--machine", machine, "--device", "cpu", "--size", "gmres=64",
                               "--bench", r"gmres\.GmresCPU", "--quick", "--no-report"],
                              cwd=REPO, capture_output=True, text=True, env=_git_identity(), timeout=600)
        assert done.returncode == 0, done.stdout + done.stderr
        assert re.search(r"first, inputs and oracles of 2 problems in [0-9.]+ s \(\d+ at a time\)", done.stdout), done.stdout
        log = Path(re.search(r"asv's output in (\S+\.log)", done.stdout).group(1)).read_text()
        assert log.index("prefill: gmres") < log.index("gmres.GmresCPU")  # built before asv ran a benchmark
    finally:
        shutil.rmtree(REPO / "results" / machine, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").is_file() and " Z " not in Path(f"/proc/{pid}/stat").read_text()


def _scratch_folders(machine: str) -> list[Path]:
    return [p for p in (REPO / ".asv" / "runs").glob(f"{machine}-*") if p.is_dir()]


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="follows processes through /proc")
@pytest.mark.parametrize("phase, bench, size, marker, stop", [
    ("asv", r"stream\.StreamCPU", "stream=65536", "benchmark.py", signal.SIGINT),
    # a stand-in of 3 M nonzeros takes seconds to build in a fresh dataset cache
    ("prefill", r"mttkrp\.MttkrpCPU", "mttkrp=3000000", "portabench.harness.commands.prefill", signal.SIGINT),
    # asv's forkserver, whose socket folder asv makes in $TMPDIR, then benchmarks from it
    ("forkserver", r"stream\.StreamCPU", "stream=65536", "run_server", signal.SIGINT),
    ("forkserver", r"stream\.StreamCPU", "stream=65536", "run_server", signal.SIGTERM),  # as Ctrl-C, exit 143
])
def test_an_interrupted_run_leaves_no_process_and_no_machine_folder(phase: str, bench: str, size: str, marker: str,
                                                                     stop: signal.Signals, tmp_path: Path,
                                                                     request: pytest.FixtureRequest) -> None:
    """Nothing is left: no process, machine folder, scratch folder, nor asv's forkserver folder in $TMPDIR."""
    machine = f"pytest-interrupt-{phase}-{stop.name.lower()}"
    shutil.rmtree(REPO / "results" / machine, ignore_errors=True)
    for folder in _scratch_folders(machine):
        shutil.rmtree(folder)
    temporary = Path(tempfile.mkdtemp(prefix="pbt-"))  # short: asv's forkserver socket path must stay under 108 bytes
    request.addfinalizer(lambda: shutil.rmtree(temporary, ignore_errors=True))
    run = subprocess.Popen([*CLI, "run", "--machine", machine, "--device", "cpu", "--size", size,
                            "--bench", bench, "--no-report"],
                           cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           env={**_git_identity(), "PORTABENCH_DATA": str(tmp_path / "data"), "TMPDIR": str(temporary)},
                           # A shell's background job starts with SIGINT ignored, and Python then installs no
                           # KeyboardInterrupt: the run gets the default disposition, as from a terminal.
                           preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline, started = time.time() + 120, []
    while time.time() < deadline and not started:  # wait for the phase's first process
        time.sleep(0.2)
        started = [p for p in _descendants(run.pid) if marker in _cmdline(p)
                   and (phase != "asv" or "run" in _cmdline(p))] if _alive(run.pid) else []
    if phase == "forkserver":
        time.sleep(1.0)  # into the benchmarks
    assert started, f"no {phase} process started"
    tree = _descendants(run.pid)
    run.send_signal(stop)
    out, err = run.communicate(timeout=20)
    code, line = (130, "portabench: interrupted") if stop == signal.SIGINT else (143, "portabench: terminated")
    assert run.returncode == code, out + err
    assert err.strip().splitlines()[-1] == line and "Traceback" not in err, err
    time.sleep(0.5)
    assert not [p for p in tree if _alive(p)], "processes left running"
    assert not (REPO / "results" / machine).exists()
    assert not _scratch_folders(machine)
    assert not list(temporary.rglob("asv-forkserver-*")), list(temporary.rglob("*"))


SUITE_IMPORT_STATE = """
import importlib, os, pkgutil, sys
sys.path.insert(0, {repo!r})
import suite
for module in pkgutil.iter_modules(suite.__path__):
    importlib.import_module("suite." + module.name)
import numba.np.ufunc.parallel as parallel
libraries = {{line.rsplit("/", 1)[-1] for line in open("/proc/self/maps") if "/" in line}}
print(sorted(name for name in libraries if "gomp" in name or "iomp" in name or "mkl" in name or "libcuda." in name))
print(parallel._is_initialized)
try:
    import cupy
except ImportError:
    print("no cupy")
else:  # the property itself: CUDA works in a fork of this process (a GPU's count: 1 or more)
    pid = os.fork()
    if pid == 0:
        try:
            os._exit(0 if cupy.cuda.runtime.getDeviceCount() >= 1 else 1)
        except Exception:
            os._exit(1)
    print("cuda in a fork:", "works" if os.waitpid(pid, 0)[1] == 0 else "fails")
"""


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="reads /proc (Linux)")
@pytest.mark.parametrize("devices", ["cpu", "cpu,gpu"])
def test_importing_the_suite_starts_no_openmp_mkl_or_cuda(devices: str, fresh_interpreter) -> None:
    """asv's forkserver forks every benchmark from the process that imported the suite and built its
    grids: an OpenMP runtime (MKL's, Numba's) or a CUDA context started there breaks the children
    (a Numba parallel region hangs), so building the grids may look at files but load none of them."""
    from portabench.harness.commands.asv_process import launch_method

    assert launch_method() == "forkserver"
    result = fresh_interpreter(SUITE_IMPORT_STATE.format(repo=str(REPO)), PORTABENCH_DEVICES=devices)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[:2] == ["[]", "False"], result.stdout


@pytest.mark.gpu
def test_cuda_works_in_a_fork_of_the_process_that_imported_the_suite(fresh_interpreter) -> None:
    """The GPU half of the above: nothing in building the GPU grids (a size read from the device,
    say) starts CUDA, which a forked child cannot then use (cudaErrorInitializationError)."""
    result = fresh_interpreter(SUITE_IMPORT_STATE.format(repo=str(REPO)), PORTABENCH_DEVICES="cpu,gpu")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[2] == "cuda in a fork: works", result.stdout


def test_runs_of_one_commit_keep_each_others_results(tmp_path: Path) -> None:
    """asv rewrites a commit's results file with only what it ran; the runner keeps the rest."""
    from portabench.harness.commands.results_merge import merge_earlier_results

    columns = ["result", "params"]
    earlier, new = tmp_path / "earlier.json", tmp_path / "new.json"
    earlier.write_text(json.dumps({"result_columns": columns, "results": {"a.A.time_a": [[1.0], [["'x'"]]],
                                                                           "b.B.time_b": [[2.0], [["'y'"]]]}}))
    new.write_text(json.dumps({"result_columns": columns, "results": {"b.B.time_b": [[3.0], [["'y'"]]]}}))
    merge_earlier_results(new, earlier)
    assert json.loads(new.read_text())["results"] == {"a.A.time_a": [[1.0], [["'x'"]]], "b.B.time_b": [[3.0], [["'y'"]]]}


def _stream_entry(times: dict[tuple[str, str, str], float], version: str = "v1") -> list:
    """An asv entry of StreamCPU over the grid the keys span (op, variant, n); keys not given: NaN."""
    grid = [sorted({k[i] for k in times}) for i in range(3)]
    combos = list(itertools.product(*grid))
    result = [times.get(c, math.nan) for c in combos]
    samples = [[t, t * 1.1, t * 0.9] if t == t else None for t in result]
    return [result, [[repr(v) for v in g] for g in grid], version, 1795324023489, 9.9, None, None,
            [t * 0.95 if t == t else None for t in result], None, None, None, samples]


@pytest.mark.parametrize("overlap", ["sizes", "sizes and variants"])
def test_a_second_size_of_a_benchmark_at_one_commit_adds_to_the_first(tmp_path: Path, overlap: str) -> None:
    """Two runs of one benchmark at one commit with different ``--size``: both sizes stay, the later
    run's values win where both ran, and combinations neither ran read as skipped (NaN), not failed."""
    from portabench.harness.commands.results_merge import merge_earlier_results
    from portabench.reports import load_results
    from test_reports import ASV_COLUMNS, write_results

    rng = np.random.default_rng()
    bench = "stream.StreamCPU.time_stream"
    first_variants = ["numpy"] if overlap == "sizes and variants" else ["numba-prange", "numpy"]
    earlier_times = {(op, v, n): float(rng.uniform(1e-3, 2e-3)) for op in ("copy", "triad")
                     for v in first_variants for n in ("1000", "2000")}
    later_times = {(op, v, n): float(rng.uniform(3e-3, 4e-3)) for op in ("copy", "triad")
                   for v in ("numba-prange",) + (() if overlap == "sizes and variants" else ("numpy",))
                   for n in ("2000", "8000")}
    machine = tmp_path / "results" / "box"
    earlier = write_results(tmp_path / "earlier" / "box", "e" * 40, 1_800_000_000_000,
                            {bench: _stream_entry(earlier_times), "other.Other.time_x": [[1.0], [["'x'"]]]})
    later = write_results(machine, "e" * 40, 1_800_000_000_000, {bench: _stream_entry(later_times)})

    assert merge_earlier_results(later, earlier) == [bench]

    data = json.loads(later.read_text())
    assert data["result_columns"] == ASV_COLUMNS
    assert data["results"]["other.Other.time_x"] == [[1.0], [["'x'"]]]
    entry = dict(zip(ASV_COLUMNS, data["results"][bench]))
    combos = list(itertools.product(*entry["params"]))
    assert sorted(entry["params"][2]) == ["'1000'", "'2000'", "'8000'"]
    expected = {**earlier_times, **later_times}
    for i, combo in enumerate(combos):
        key = tuple(v.strip("'") for v in combo)
        if key in expected:
            assert entry["result"][i] == expected[key]
            assert entry["samples"][i] == pytest.approx([expected[key], expected[key] * 1.1, expected[key] * 0.9])
        else:
            assert math.isnan(entry["result"][i]) and entry["samples"][i] is None
    (tmp_path / "results" / "benchmarks.json").write_text(json.dumps(
        {bench: {"param_names": ["op", "variant", "n"], "type": "time", "unit": "seconds"}, "version": 2}))
    loaded = load_results(tmp_path / "results")
    table = loaded.table[loaded.table.benchmark == bench]
    assert len(table) == len(expected)
    assert not [p for p in loaded.problems if "failed" in p]
    assert dict(zip(zip(table.case, table.variant, table["size"].astype(str)), table.time_s)) == expected


def test_results_of_another_benchmark_version_are_not_joined(tmp_path: Path) -> None:
    from portabench.harness.commands.results_merge import merge_earlier_results

    earlier, later = tmp_path / "earlier.json", tmp_path / "later.json"
    columns = ["result", "params", "version"]
    earlier.write_text(json.dumps({"result_columns": columns, "results": {"a.A.time_a": [[1.0], [["'1000'"]], "v1"]}}))
    later.write_text(json.dumps({"result_columns": columns, "results": {"a.A.time_a": [[2.0], [["'2000'"]], "v2"]}}))
    assert merge_earlier_results(later, earlier) == []
    assert json.loads(later.read_text())["results"] == {"a.A.time_a": [[2.0], [["'2000'"]], "v2"]}


def test_gpu_classes_warm_up_before_their_samples_and_cpu_classes_do_not(monkeypatch: pytest.MonkeyPatch) -> None:
    """A GPU left idle while a benchmark process prepares runs its first samples slower (suite/classes.py)."""
    monkeypatch.syspath_prepend(str(REPO))
    from suite.classes import GPU_WARMUP_S, asv_class

    kernel = get_kernel("stream")
    warmups = {device: asv_class(kernel, kernel.studies(device)[0]).warmup_time for device in ("cpu", "gpu")}
    assert warmups == {"cpu": 0.0, "gpu": GPU_WARMUP_S} and GPU_WARMUP_S > 0


def test_gpu_kernel_classes_run_the_kernel_once_untimed_before_each_sample(monkeypatch: pytest.MonkeyPatch) -> None:
    """A GPU idle between asv's samples runs the next kernel slower (suite/classes.py): ``setup`` ends
    with one untimed run on the GPU, and none on the CPU or before a preparation's samples."""
    monkeypatch.syspath_prepend(str(REPO))
    import suite.classes as classes

    runs: list[str] = []

    class Counting:
        def run(self) -> None:
            runs.append("run")

    monkeypatch.setattr(classes, "prepared", lambda *args, **kwargs: Counting())
    for name, device, method, expected in (("stream", "cpu", "time_stream", 0), ("stream", "gpu", "time_stream", 1),
                                           ("mttkrp", "gpu", "time_preparation", 0)):
        kernel = get_kernel(name)
        study = next(s for s in kernel.studies(device) if method in s.method_names(name))
        cls = classes.asv_class(kernel, study)
        runs.clear()
        cls().setup(*[values[0] for values in cls.params])
        assert len(runs) == expected, (name, device, study.name)


def test_a_gpu_sample_is_the_mean_of_runs_launched_back_to_back(monkeypatch: pytest.MonkeyPatch) -> None:
    """asv times a GPU kernel class's sample as several launches and one wait, and its clock divides
    by their number (suite/classes.py): here through asv's own timing loop, on a clock that only the
    fake variant moves, so every sample must read exactly one launch's time."""
    monkeypatch.syspath_prepend(str(REPO))
    from asv_runner.benchmarks.time import TimeBenchmark

    import suite.classes as classes

    clock = [1000.0]
    events: list[str] = []

    class Launching:
        def run(self) -> None:  # the untimed run before each sample: 1.2 ms, so 8 launches a sample
            events.append("run")
            clock[0] += 1.2e-3

        def launch(self) -> None:
            events.append("launch")
            clock[0] += 100e-6

        def synchronize(self) -> None:
            events.append("synchronize")

    monkeypatch.setattr(classes, "prepared", lambda *args, **kwargs: Launching())
    monkeypatch.setattr(classes.time, "perf_counter", lambda: clock[0])
    kernel = get_kernel("stream")
    cls = classes.asv_class(kernel, next(s for s in kernel.studies("gpu") if s.name == MAIN))
    instance = cls()
    func = getattr(instance, "time_stream")
    benchmark = TimeBenchmark("stream.StreamGPU.time_stream", func, [func, instance])
    benchmark.set_param_idx(0)
    assert benchmark.do_setup() in (None, False)
    result = benchmark.do_run()
    assert instance.launches == classes.launches_per_sample(1.2e-3) == 8
    assert len(result["samples"]) >= 7 and result["samples"] == pytest.approx([100e-6] * len(result["samples"]))
    one_sample = ["run"] + ["launch"] * 8 + ["synchronize"]
    assert events[-len(one_sample):] == one_sample


@pytest.mark.parametrize("run_s, launches", [(1e-6, 10), (1.45e-3, 6), (4e-3, 2), (20e-3, 1), (0.0, 10)])
def test_a_gpu_sample_takes_runs_filling_about_ten_milliseconds(run_s: float, launches: int,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(REPO))
    from suite.classes import launches_per_sample

    assert launches_per_sample(run_s) == launches


def test_a_cpu_sample_is_one_run_on_the_wall_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(REPO))
    import suite.classes as classes

    kernel = get_kernel("stream")
    cls = classes.asv_class(kernel, next(s for s in kernel.studies("cpu") if s.name == MAIN))
    assert not hasattr(cls, "timer") and cls.launches == 1 and not cls.run_before_sample


def test_a_launch_makes_the_variants_call_without_waiting_and_a_solvers_own_run_whole() -> None:
    """What a GPU sample launches back to back: a bound variant's call, or the ``run`` of a variant
    that defines its own (the solvers), which waits as ``run`` does."""
    from portabench.implementations.model import BoundVariant

    events: list[str] = []

    class Bound(BoundVariant):
        def prepare(self, problem: object) -> None:
            self._call = lambda: events.append("call") or len(events)

        def synchronize(self) -> None:
            events.append("wait")

        def output(self) -> np.ndarray:
            return np.array([float(self._result)])

    class Solver(Bound):
        def run(self) -> None:
            events.append("solve")

    bound = Bound()
    bound.prepare(None)
    bound.launch()
    assert events == ["call"] and bound.output()[0] == 1.0
    bound.run()
    assert events == ["call", "call", "wait"]
    events.clear()
    solver = Solver()
    solver.prepare(None)
    solver.launch()
    assert events == ["solve"]


# --- any checkout; a smoke run --------------------------------------------------------------------

@pytest.mark.parametrize("checkout", [["checkout", "-q", "--detach"], ["checkout", "-q", "-b", "master"]],
                         ids=["detached-head", "master-branch"])
def test_a_run_works_on_a_checkout_without_a_main_branch(checkout: list[str], tmp_path: Path) -> None:
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", "--shared", str(REPO), str(clone)], check=True)
    subprocess.run(["git", *checkout], cwd=clone, check=True)
    subprocess.run(["git", "branch", "-q", "-D", "main"], cwd=clone, check=True)  # origin/main stays: not "main"
    done = subprocess.run([*CLI, "run", "--smoke", "--device", "cpu", "--bench", r"stream\.StreamCPU"], cwd=clone,
                          capture_output=True, text=True, env=_git_identity(), timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "smoke: 12 combinations through asv's path: 12 passed, 0 skipped, 0 failed" in done.stdout, done.stdout


@pytest.mark.parametrize("repository, needles", [
    ("none", ["not a git repository", "git clone"]),
    ("no commit", ["git add -A && git commit"]),
])
def test_a_checkout_asv_cannot_use_gets_one_line_saying_what_to_do(repository: str, needles: list[str],
                                                                   tmp_path: Path) -> None:
    folder = tmp_path / "checkout"
    shutil.copytree(REPO / "suite", folder / "suite")
    shutil.copy(REPO / "asv.conf.json", folder)
    if repository == "no commit":
        subprocess.run(["git", "init", "-q"], cwd=folder, check=True)
    done = subprocess.run([*CLI, "run", "--smoke"], cwd=folder, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "GIT_CEILING_DIRECTORIES": str(tmp_path)})
    err = done.stderr.strip()
    assert done.returncode == 2 and err.startswith("portabench: error:") and "\n" not in err, err
    assert all(needle in err for needle in needles), err


def test_a_smoke_run_takes_every_combination_once_and_records_nothing() -> None:
    machine = "pytest-smoke"
    folder = REPO / "results" / machine
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    earlier = folder / "deadbeef-existing-py.json"  # an earlier run's failures: not this run's
    earlier.write_text(json.dumps({"version": 2, "commit_hash": "deadbeef", "result_columns": ["result", "params"],
                                   "results": {"stream.StreamCPU.time_stream": [[None], [["'copy'"]]]}}))
    before = _tracked_changes()
    try:
        done = subprocess.run([*CLI, "run", "--smoke", "--machine", machine, "--device", "cpu",
                               "--bench", r"stream\.StreamCPU|pi\.PiCPU"], cwd=REPO, capture_output=True, text=True,
                              env=_git_identity(), timeout=600)
        assert done.returncode == 0, done.stdout + done.stderr
        assert [f.name for f in folder.iterdir()] == [earlier.name] and _tracked_changes() == before
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    total = get_kernel("stream").studies("cpu")[0].combinations + get_kernel("pi").studies("cpu")[0].combinations
    assert f"smoke: {total} combinations through asv's path: {total} passed, 0 skipped, 0 failed" in done.stdout
    events = Path(re.search(r"asv's output in (\S+)\.log", done.stdout).group(1) + ".events.jsonl")
    ready = [json.loads(line) for line in events.read_text().splitlines() if '"ready"' in line]
    assert len(ready) == total  # one process per combination, one sample each
    sizes = {(e["benchmark"].split(".")[0], e["params"][1]) for e in ready}
    assert sizes == {("stream", str(get_kernel("stream").verify_size)), ("pi", str(get_kernel("pi").verify_size))}


@pytest.mark.parametrize("flags", [["--size", "stream=4096"], ["--studies", "variants"], ["--quick"],
                                   ["--rounds", "2"]])
def test_a_smoke_run_takes_no_sizes_studies_or_sample_counts(flags: list[str], capsys) -> None:
    assert main(["run", "--smoke", *flags]) == 2
    _one_line_error(capsys, "--smoke")


SMOKE_LOG = """\
[ 50.00%] ···· For parameters: 'dot', '1048576', 'numpy'
              asv: skipped: NotImplementedError('stream/numpy: no dot here')

[100.00%] ··· stream.StreamCPU.time_stream                                failed
[100.00%] ··· ========= ======================== =================
              For parameters: 'triad', '1048576', 'numba-prange'
              Traceback (most recent call last):
                File "asv_runner/run.py", line 73, in _run
                  result = benchmark.do_run()
              KeyError: 'x'

              During handling of the above exception, another exception occurred:

              Traceback (most recent call last):
                File "implementations/stream/variant.py", line 57, in launch
                  raise TypeError("launch() missing 4 required positional arguments")
              TypeError: launch() missing 4 required positional arguments
              asv: benchmark failed (exit status 1)
[100.00%] ···· For parameters: 'copy', '1048576', 'numpy'
               Traceback (most recent call last):
                 File "suite/classes.py", line 119, in setup
               portabench.implementations.model.WrongAnswerError: stream/numpy on copy: max relative error 1 > 1e-15
"""


def test_a_smoke_run_names_each_failure_with_its_exception(tmp_path: Path) -> None:
    from portabench.harness.commands.results_merge import smoke_outcome

    folder = tmp_path / "machine"
    folder.mkdir()
    params = [["'copy'", "'dot'", "'triad'"], ["'1048576'"], ["'numba-prange'", "'numpy'"]]
    (folder / "c0ffee00-existing.json").write_text(json.dumps({
        "version": 2, "result_columns": ["result", "params"],
        "results": {"stream.StreamCPU.time_stream": [[1e-3, None, 2e-3, math.nan, None, math.nan], params]}}))
    log = tmp_path / "asv.log"
    log.write_text(SMOKE_LOG)
    outcome = smoke_outcome(folder, log)
    assert (outcome.passed, outcome.ok) == (2, False)
    assert outcome.skipped == {"stream/numpy: no dot here": 1, "no reason given": 1}
    assert outcome.failed == [
        ("stream.StreamCPU.time_stream('copy', '1048576', 'numpy')",
         "portabench.implementations.model.WrongAnswerError: stream/numpy on copy: max relative error 1 > 1e-15"),
        ("stream.StreamCPU.time_stream('triad', '1048576', 'numba-prange')",
         "TypeError: launch() missing 4 required positional arguments")]
    assert "FAILED stream.StreamCPU.time_stream('triad'" in outcome.describe()


def test_on_a_busy_machine_openmp_threads_wait_passively_and_the_run_says_so(monkeypatch) -> None:
    from portabench.harness.commands import asv_process as runner

    monkeypatch.setattr(runner, "busy_share", lambda seconds=1.0: 0.5)
    env, record = {}, {"threads": {"environment": {}}}
    said = runner.wait_passively_if_busy(env, record)
    assert env["OMP_WAIT_POLICY"] == "passive" and record["threads"]["environment"]["OMP_WAIT_POLICY"] == "passive"
    assert "took 50% of the CPU" in said and "passively" in said
    given = {"OMP_WAIT_POLICY": "active"}
    assert "as set" in runner.wait_passively_if_busy(given) and given["OMP_WAIT_POLICY"] == "active"
    monkeypatch.setattr(runner, "busy_share", lambda seconds=1.0: 0.01)
    quiet: dict = {}
    assert runner.wait_passively_if_busy(quiet) == "" and quiet == {}


def test_a_processs_neighbours_share_of_the_cpu_is_what_others_took() -> None:
    from portabench.harness.machine.record import others_share

    first = {"busy": 100.0, "steal": 1.0, "own": 10.0}
    last = {"busy": 103.0, "steal": 1.5, "own": 11.0}  # 3 CPU-s busy, 1 of them this process's, 0.5 stolen
    assert others_share(first, last, wall_s=2.0, cpus=2) == pytest.approx((3 - 1 + 0.5) / 4)
    assert math.isnan(others_share({}, last, 2.0, 2))


def test_the_runs_own_processes_are_no_neighbours() -> None:
    from portabench.harness.machine.record import others_share

    first = {"busy": 100.0, "steal": 1.0, "own": 10.0, "run": 50.0}
    last = {"busy": 103.0, "steal": 1.5, "own": 11.0, "run": 52.5}  # the run's tree: this process and its harness
    assert others_share(first, last, wall_s=2.0, cpus=2) == pytest.approx((3 - 2.5 + 0.5) / 4)
    del first["run"]  # a reading without the tree: every process but this one
    assert others_share(first, last, wall_s=2.0, cpus=2) == pytest.approx((3 - 1 + 0.5) / 4)


def test_a_cpu_sets_neighbours_are_those_on_its_cpus(tmp_path) -> None:
    from portabench.harness.machine.record import _proc_stat_lines

    stat = tmp_path / "stat"
    stat.write_text("cpu  40 0 4 100 0 0 0 2 0 0\n"
                    "cpu0 10 0 1 25 0 0 0 0 0 0\ncpu1 20 0 2 25 0 0 0 2 0 0\n"
                    "cpu2 5 0 1 25 0 0 0 0 0 0\ncpu3 5 0 0 25 0 0 0 0 0 0\nintr 1 2 3\n")
    assert _proc_stat_lines([0, 1, 2, 3], str(stat)) == [[40, 0, 4, 100, 0, 0, 0, 2, 0, 0]]  # the whole machine
    busy = [sum(r[:3]) for r in _proc_stat_lines([1, 3], str(stat))]  # a CPU set: its own CPUs' lines only
    assert busy == [22, 5]


def test_a_process_tree_counts_its_childrens_cpu_time() -> None:
    import os
    import subprocess
    import sys

    from portabench.harness.machine.record import tree_seconds

    before = tree_seconds(os.getpid())
    if before != before:
        pytest.skip("no /proc here")
    child = subprocess.Popen([sys.executable, "-c", "import time\nt = time.process_time()\n"
                              "while time.process_time() - t < 0.4: pass\ninput()"], stdin=subprocess.PIPE)
    try:
        deadline = time.time() + 20
        while tree_seconds(os.getpid()) - before < 0.3 and time.time() < deadline:  # the child, still running
            time.sleep(0.05)
        assert tree_seconds(os.getpid()) - before >= 0.3
    finally:
        child.communicate(b"\n")
    assert tree_seconds(os.getpid()) - before >= 0.4  # reaped: in this process's children's time


def test_a_processs_contention_is_read_over_its_whole_life_from_the_runners_trace() -> None:
    from portabench.harness.commands.asv_process import contention_of
    from portabench.harness.machine.record import run_cpus

    cpus = len(run_cpus())
    # The machine's busy CPU seconds grow at 1.5 CPUs: the process itself (0.5 CPU-s over its 1 s life) and
    # others (1 CPU): a share of 1 / cpus, whatever the 10 ms ticks of a short sample would say.
    trace = [(t, {"busy": 1.5 * t, "steal": 0.0, "own": 0.0}) for t in np.arange(0.0, 3.01, 0.5)]
    lives = [{"key": ("stream.StreamCPU", ("'copy'",)), "start": 1.2, "end": 2.2, "own": 0.5},
             {"key": ("stream.StreamCPU", ("'copy'",)), "start": 2.5, "end": 3.5, "own": 0.5}]  # beyond the trace
    shares = contention_of(lives, trace)
    assert shares == {("stream.StreamCPU", ("'copy'",)): [pytest.approx(1.0 / cpus)]}
