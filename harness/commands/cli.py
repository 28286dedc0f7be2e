"""The ``portabench`` command: run, report, compare, noise, check, scale, peaks, verify, datasets, list.

Every user-facing error is one line on stderr and a non-zero exit, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import sys
import time
import warnings
from pathlib import Path
from typing import Callable, Sequence

from tabulate import tabulate

from portabench.datasets.paths import check_writable
from portabench.datasets.random import check_seed
from portabench.harness.statistics import DEFAULT_ALPHA

from portabench.implementations import get_kernel, list_kernels
from portabench.implementations.model import LEGACY_SIZES, Kernel, PortabenchError
from portabench.harness.plan import RunPlan
from .tracking import CHECK_ROUNDS, NOISE_ROUNDS, WHEELHOUSE

DEFAULT_RESULTS = Path("results")
DEFAULT_REPORT = Path("report")


def _peaks_args(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("theoretical peaks of an unknown CPU (GPUs are read from the device)")
    group.add_argument("--peak-bandwidth", type=float, metavar="GB/s", help="CPU theoretical memory bandwidth")
    group.add_argument("--peak-flops", type=float, metavar="GFLOP/s", help="CPU theoretical FP64 peak")
    group.add_argument("--peaks-file", type=Path, metavar="TOML", help="peaks file with [cpu] and/or [gpu] tables")


def _verdict_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--factor", type=float, default=1.0,
                   help="also a smallest time ratio worth flagging beside the noise (default: none)")
    p.add_argument("--alpha", type=float, default=None,
                   help=f"false-alarm rate of each pair's test over rounds (default {DEFAULT_ALPHA})")
    p.add_argument("--all", action="store_true", help="also list the unchanged benchmarks")


def _user_peaks(args: argparse.Namespace) -> dict | None:
    from portabench.implementations import hardware

    peaks: dict = hardware.load_user_peaks(args.peaks_file) if args.peaks_file else {}
    cpu = dict(peaks.get("cpu", {}))
    for flag, key, value in (("--peak-bandwidth", "peak_bandwidth_gbs", args.peak_bandwidth),
                             ("--peak-flops", "peak_fp64_gflops", args.peak_flops)):
        if value is not None:
            problem = hardware.peak_problem(key, value)
            if problem:
                raise PortabenchError(f"{flag} {problem}")
            cpu[key] = value
    if cpu:
        peaks["cpu"] = cpu
    return peaks or None


def cmd_list(args: argparse.Namespace) -> int:
    if args.studies:
        return _list_studies(args.kernel)
    rows = []
    for name in [args.kernel] if args.kernel else list_kernels():
        kernel = get_kernel(name)
        for v in kernel.variants:
            reason = v.unavailable()
            rows.append([name, v.name, v.family, ", ".join(v.devices()),
                         "yes" if reason is None else f"no: {reason}", v.description])
    print(tabulate(rows, headers=["kernel", "variant", "family", "device", "available", "what"]))
    return 0


def _list_studies(only: str | None) -> int:
    """What ``portabench run`` can run: each kernel's main comparison and studies, per device."""
    from portabench.harness.machine.record import detect_devices

    rows = []
    plan = RunPlan.build(detect_devices())
    for name in [get_kernel(only).name] if only else list_kernels():
        kernel = get_kernel(name)
        for s in plan.studies_of(name):
            rows.append([s.name, name, s.device, s.class_name, s.combinations,
                         f"{', '.join(map(str, s.sizes))} {kernel.size_unit}", s.title])
    print(tabulate(rows, headers=["study", "kernel", "device", "asv class", "combinations", "sizes", "what"]))
    print("\n`portabench run` runs every main study; `--studies NAME[,NAME]|all` adds others "
          "(and `inputs`: the dataset readers and generators).")
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from portabench.implementations.verification import verify_kernel

    kernel = get_kernel(args.kernel)
    for case in args.case or []:
        kernel.check_case(case)
    for name in args.variant or []:
        kernel.variant(name)
    files = {kind: path for kind, path in (("matrices", args.matrices), ("tensor", args.tensor), ("matrix", args.matrix))
             if path is not None}
    if files and args.size is not None:
        raise PortabenchError(f"--size sets the size of generated inputs; the --{next(iter(files))} file has its own: "
                              "drop --size")
    if args.size is not None:  # the sizes `run --size` takes, through the same check
        kernel.checked_sizes((args.size,), f"--size {args.size}")
    pairs = []
    for name in ("rank", "mode"):
        if getattr(args, name) is not None:
            if name not in kernel.options:
                raise PortabenchError(f"--{name}: kernel {kernel.name} has no {name}")
            pairs.append(f"{name}={getattr(args, name)}")
    given = _given_options(kernel, pairs + list(args.option or []))
    options = kernel.problem_options(given)
    seed = check_seed(args.seed) if args.seed is not None else secrets.randbits(32)
    if args.save is not None:
        check_writable(args.save, "--save")
    variants = args.variant or [v.name for v in kernel.variants]
    chosen = kernel.verify_set(args.case, args.size, args.full)  # case -> size: the quick check unless --full
    cases, size = list(chosen), max(chosen.values())  # verify_kernel's; the problems below carry each case's size
    if len(files) > 1:
        raise PortabenchError(f"give one input file, not {' and '.join('--' + k for k in files)}")
    if args.rhs is not None and "matrices" not in files:
        raise PortabenchError("--rhs goes with --matrices")
    if args.block_size is not None and "matrix" not in files:
        raise PortabenchError("--block-size goes with --matrix")
    if files:
        (kind, path), = files.items()
        if kernel.file_kind != kind:
            takes = f"takes --{kernel.file_kind}" if kernel.file_kind else "takes no input file"
            raise PortabenchError(f"--{kind}: kernel {kernel.name} {takes}")
        problems = kernel.problems_from_file(path, seed, given, rhs=args.rhs, block_size=args.block_size)
        print(f"verify {kernel.name}: {path} ({problems[0].size} {kernel.size_unit}), seed {seed}"
              f"{_options_that_ran(kernel, problems)}")
    else:
        problems = kernel.verify_set_problems(chosen, seed, given)
        print(f"verify {kernel.name}: {_verify_set_text(kernel, chosen, args.full)}, seed {seed}"
              f"{_options_that_ran(kernel, problems)} "
              f"(rerun with --seed {seed} to reproduce)")
    rows = []
    runs = len(variants) * len(problems)
    with tqdm(total=runs, desc="verify", unit="run", file=sys.stderr, disable=args.quiet) as bar:
        for row in verify_kernel(kernel, size, seed, variants, cases, args.save, options, problems, args.full):
            rows.append(row)
            bar.update()
    table = [
        [r.case, r.variant, r.device, r.family,
         "" if r.max_rel_error is None else f"{r.max_rel_error:.2e}",
         "" if r.tolerance is None else f"{r.tolerance:.0e}", r.status]
        for r in rows
    ]
    print(tabulate(table, headers=["case", "variant", "device", "family", "error", "tolerance", "status"]))
    for measure in dict.fromkeys(r.measure for r in rows if r.measure):
        print(f"error: {measure} (against the float64 oracle)")
    if args.save:
        print(f"inputs, reference and outputs saved under {args.save / kernel.name}")
    failed = [r for r in rows if r.failed]
    if failed:
        print(f"{len(failed)} variant run(s) FAILED", file=sys.stderr)
        return 1
    if rows and all(r.status.startswith("skipped") for r in rows):
        raise PortabenchError(f"no variant ran: {_skip_reasons(rows)}")
    return 0


def _skip_reasons(rows: list) -> str:
    """Why the variants skipped, each reason once with the variants it stopped: "a, b: reason; c: other"."""
    by_reason: dict[str, list[str]] = {}
    for r in rows:
        names = by_reason.setdefault(r.status.removeprefix("skipped: "), [])
        if r.variant not in names:
            names.append(r.variant)
    return "; ".join(f"{', '.join(names)}: {reason}" for reason, names in by_reason.items())


def _options_that_ran(kernel, problems: list) -> str:
    """The problem options verify checked, as ", rank=16, mode=0,1,2": the values each option took."""
    ran = []
    for name in kernel.options:
        values = [str(getattr(p, name)) for p in problems if hasattr(p, name)]
        if values:
            ran.append(f"{name}={','.join(dict.fromkeys(values))}")
    return "".join(f", {text}" for text in ran)


# What ``verify`` and its help tell a user to expect of ``verify --full``, as an order of magnitude (the time
# depends on the machine), for the kernels whose default is a quick check (``Kernel.quick_verify``); every other
# kernel's default is already its full set.
FULL_VERIFY_TIME = {"cpapr_mu": "about a minute", "cpapr_pdnr": "several minutes"}


def _verify_set_text(kernel: Kernel, chosen: dict[str, int], full: bool) -> str:
    """The sizes ``verify`` checks (one, or each case's), and what ``--full`` adds to a quick check."""
    sizes = set(chosen.values())
    text = (f"size {sizes.pop()}" if len(sizes) == 1 else
            ", ".join(f"{case} at {size}" for case, size in chosen.items()) + f" {kernel.size_unit}")
    if full or kernel.quick_verify is None:
        return text
    took = FULL_VERIFY_TIME.get(kernel.name)
    return (f"{text} (a quick check; --full checks every case at {kernel.verify_size} {kernel.size_unit} with every "
            f"variant{f', {took}' if took else ''})")


def _given_options(kernel, pairs: list[str]) -> dict[str, str]:
    """The options named on the command line (NAME=VALUE pairs), checked against the kernel's; one named
    twice with different values is refused (it would be last-wins, and the output would not say which)."""
    options: dict[str, str] = {}
    known = ", ".join(f"{k}={'|'.join(v)}" for k, v in kernel.options.items()) or "none"
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep:
            raise PortabenchError(f"--option {pair!r}: expected NAME=VALUE; {kernel.name}'s options: {known}")
        if name not in kernel.options:
            raise PortabenchError(f"--option {pair!r}: unknown option {name}; {kernel.name}'s options: {known}")
        if name in options and options[name] != value:
            raise PortabenchError(f"{name} given twice with different values ({options[name]} and {value}): give one")
        options[name] = value
    return options


def cmd_peaks(args: argparse.Namespace) -> int:
    from portabench.implementations import hardware

    record = hardware.detect_system(_user_peaks(args))
    measured: dict[str, float] = {}
    if args.measure:
        from portabench.harness.machine.peaks import measure_stream_peaks

        measured = measure_stream_peaks()
    elif args.results and args.machine:
        from portabench.reports import measured_peaks

        measured = measured_peaks(args.results, args.machine)
    if args.json:
        print(json.dumps({"system": record, "measured_gbs": measured}, indent=2))
    else:
        print(hardware.format_system(record, measured or None))
    return 0


def run_sizes(args: argparse.Namespace) -> dict[str, tuple[int, ...]]:
    """Kernel -> sizes from ``--size`` and the older per-input flags (``LEGACY_SIZES``; ``--size`` wins where
    both name a kernel), each checked by its kernel."""
    from .selection import parse_size_flags

    pairs = [f"{kernel}={value}" for legacy in LEGACY_SIZES
             if (value := getattr(args, legacy.dest)) is not None for kernel in legacy.kernels]
    return parse_size_flags(pairs + list(args.size or []))


def plan_from_args(args: argparse.Namespace, smoke: bool = False) -> RunPlan:
    """The run's plan from its selection flags (``_selection_args``), everything checked before asv starts."""
    from .selection import parse_studies, plan_of

    return plan_of(args.device, run_sizes(args), parse_studies(args.studies), args.bench, smoke=smoke)


def cmd_run(args: argparse.Namespace) -> int:
    from .asv_process import sigterm_as_interrupt

    with sigterm_as_interrupt():  # a SIGTERM stops and cleans up as Ctrl-C does
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    from .asv_config import results_dir
    from .runner import duration, run_benchmarks

    started = time.time()
    plan = plan_from_args(args, smoke=args.smoke)
    report = not (args.no_report or args.smoke)
    if report:
        check_writable(args.report_dir, "--report-dir")
    peaks = _user_peaks(args)
    summary = run_benchmarks(args.machine, plan, quick=args.quick, user_peaks=peaks, verbose=args.verbose,
                             rounds=args.rounds, smoke=args.smoke)
    if summary.smoke is not None:
        print(summary.smoke.describe())
        print(f"portabench: smoke run in {duration(time.time() - started)}, nothing recorded; "
              f"asv's output in {summary.log}")
        return 0 if summary.smoke.ok and summary.status == 0 else 2
    if report:
        report = _report(results_dir(), args.report_dir)
        print(_headline(report, summary.machine))
    print(f"portabench: {summary.describe()}; {duration(time.time() - started)} in all")
    if summary.contended():
        print(f"portabench: warning: {summary.contended()}", file=sys.stderr)
    return summary.status


def _headline(report, machine: str) -> str:
    """The run's result in one table, as the report's index defines it: per kernel and device, over the same
    cases, the best portable variant's % of peak, the fastest vendor variant, its geomean speedup over it and
    its worst case's speedup (and the worst case when each case takes its fastest portable variant, where
    that is better); then where the report is."""
    from portabench.reports.metrics import PORTABLE_PCT, SPEEDUP, WORST_CASE, WORST_SPEEDUP, best_per_case

    rows = report.headline[report.headline.machine == machine]
    pct = rows[PORTABLE_PCT].map(lambda v: f"{v:.3g}")
    if "rows in cache" in rows:  # no % of peak where every case fits in the caches
        pct = pct.where(~((rows["rows in cache"] > 0) & rows[PORTABLE_PCT].isna()), "in cache")
    worst = []
    for _, r in rows.iterrows():
        cell = f"{r[WORST_SPEEDUP]:.3g} {r[WORST_CASE]}" if r[WORST_SPEEDUP] == r[WORST_SPEEDUP] else ""
        best = best_per_case(r)
        if best is not None and f"{best[0]:.3g}" != f"{r[WORST_SPEEDUP]:.3g}":
            cell += f" (best portable per case: {best[0]:.3g}{'' if best[1] == r[WORST_CASE] else ' ' + best[1]})"
        worst.append(cell)
    columns = ["kernel", "device", "portable variant", PORTABLE_PCT, "fastest vendor variant", SPEEDUP, WORST_SPEEDUP]
    shown = rows.assign(**{PORTABLE_PCT: pct, WORST_SPEEDUP: worst}).reindex(columns=columns)
    table = tabulate(shown, headers=["kernel", "device", "portable variant", "% of peak (geomean)", "fastest vendor",
                                     "speedup (geomean)", "worst case"], showindex=False, floatfmt=".3g")
    return (f"{table}\n(each row over the same cases: the largest size beyond the caches; speedup > 1: portable "
            f"faster; the index of the report says more)\nreport: {report.index}")


def _report(results: Path, out: Path, asv_html: Path | None = None):
    from portabench.reports import build_report

    from .asv_config import asv_html_dir

    check_writable(out, "the report folder")
    summary = build_report(results, out, asv_html if asv_html is not None else asv_html_dir())
    if summary.problems:  # every one is listed on the pages and in problems.txt
        print(f"report: {len(summary.problems)} result file(s) or benchmark(s) skipped, each with the reason, "
              f"in {out / 'problems.txt'}", file=sys.stderr)
    print(f"report: {summary.n_rows} results from {len(summary.machines)} machine(s) -> {out / 'index.html'} "
          f"and {len(summary.pages)} system page(s)")
    return summary


def cmd_report(args: argparse.Namespace) -> int:
    _report(args.results, args.out, args.asv_html)
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from portabench.harness.commands.compare import Side, compare, format_comparison

    baseline, contender = Side(args.baseline, args.baseline_commit), Side(args.contender, args.contender_commit)
    thresholds = {k: v for k, v in (("factor", args.factor), ("alpha", args.alpha)) if v is not None}
    result = compare(baseline, contender, args.machine, **thresholds)
    for problem in result.problems:
        print(f"note: {problem}", file=sys.stderr)
    print(format_comparison(result, baseline, contender, args.all))
    return 1 if result.regressed else 0


def cmd_noise(args: argparse.Namespace) -> int:
    from .asv_process import sigterm_as_interrupt
    from .tracking import measure_noise

    with sigterm_as_interrupt():
        summary = measure_noise(args.machine, plan_from_args(args), rounds=args.rounds, verbose=args.verbose,
                                fresh=args.fresh)
    print(summary.describe())
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    from .asv_process import sigterm_as_interrupt
    from .runner import duration
    from .tracking import check_commits

    with sigterm_as_interrupt():
        summary = check_commits(args.baseline, args.contender, plan_from_args(args), args.machine, rounds=args.rounds,
                                wheelhouse=None if args.installed else args.wheelhouse, alpha=args.alpha,
                                factor=args.factor, verbose=args.verbose, show_all=args.all)
    print(summary.text)
    print(f"portabench: check in {duration(summary.wall_s)}")
    return 1 if summary.regressed else 0


def cmd_scale(args: argparse.Namespace) -> int:
    from portabench.harness.machine.record import detect_devices

    from .scale import QUICK_SAMPLES, SAMPLES, scale, split_kernels
    from .selection import parse_size_flags

    device = args.device or ("gpu" if "gpu" in detect_devices() else "cpu")
    samples = args.samples if args.samples is not None else (QUICK_SAMPLES if args.quick else SAMPLES)
    if samples < 1:
        raise PortabenchError(f"--samples must be at least 1, got {samples}")
    kernels = [get_kernel(k).name for k in (args.kernel or split_kernels())]
    try:
        return scale(kernels, device, args.machine, parse_size_flags(args.size or []), samples, args.variant, args.case,
                 args.results)
    except PortabenchError as exc:  # one rank's error ends the job, which would otherwise hang
        from portabench.harness.distributed.ranks import abort_job

        print(f"portabench: error: {exc}", file=sys.stderr, flush=True)
        abort_job(2)
        return 2


def _selection_args(p: argparse.ArgumentParser) -> None:
    """What a run selects: the main comparisons, studies, a benchmark expression, sizes, devices."""
    p.add_argument("--machine", help="machine name for the results (default: the host name)")
    p.add_argument("--studies", metavar="NAME[,NAME]|all",
                   help="studies to run beside the main comparisons (`portabench list --studies` names them)")
    p.add_argument("--bench", "-b", metavar="REGEX",
                   help="only benchmarks matching REGEX (asv -b); without --studies, any declared benchmark")
    p.add_argument("--size", action="append", metavar="KERNEL=N[,N]",
                   help="a kernel's sizes instead of its defaults, in its unit (`portabench list` says which); repeatable")
    p.add_argument("--device", type=lambda s: [d.strip() for d in s.split(",")], metavar="cpu|gpu|cpu,gpu",
                   help="only these devices (default: every device present)")
    p.set_defaults(**{legacy.dest: None for legacy in LEGACY_SIZES})  # ``run`` alone takes them as flags
    p.add_argument("--verbose", "-v", action="store_true", help="show asv's output instead of a progress bar")


class _Later:
    """A part of a help text made only when the help is shown (argparse fills ``%(name)s`` from the action's
    attributes then): a list that imports every kernel, which building the parser must not."""

    def __init__(self, text: Callable[[], str]) -> None:
        self._text = text

    def __str__(self) -> str:
        return self._text()


def _split_kernels_text() -> str:
    from .scale import split_kernels

    return ", ".join(split_kernels())


def _add_run(sub) -> None:
    p = sub.add_parser("run", help="benchmark this machine through asv, record its peaks, then report")
    _selection_args(p)
    p.add_argument("--report-dir", type=Path, default=DEFAULT_REPORT, help="where the report goes (default: report/)")
    p.add_argument("--no-report", action="store_true", help="only benchmark")
    for legacy in LEGACY_SIZES:
        p.add_argument(legacy.flag, metavar=legacy.metavar,
                       help="alias of " + " ".join(f"--size {kernel}={legacy.metavar}" for kernel in legacy.kernels))
    p.add_argument("--quick", action="store_true", help="3 samples per benchmark instead of 7-20")
    p.add_argument("--smoke", action="store_true",
                   help="every main combination through asv's whole path at a small size, one sample each, "
                        "recording nothing; exit 2 on any failure")
    p.add_argument("--rounds", type=int, default=1, metavar="N",
                   help="N processes per combination, asv going through all of them once per round, so that "
                        "variants interleave (a busy machine; default 1)")
    _peaks_args(p)
    p.set_defaults(func=cmd_run)


def _add_report_and_compare(sub) -> None:
    p = sub.add_parser("report", help="turn asv results of every machine into the report")
    p.add_argument("--results", type=Path, default=DEFAULT_RESULTS, help="asv results directory (default: results/)")
    p.add_argument("--out", type=Path, default=DEFAULT_REPORT, help="output directory (default: report/)")
    p.add_argument("--asv-html", type=Path, metavar="PATH",
                   help="asv publish's output to link for the history (default: asv.conf.json's html_dir)")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("compare", help="compare two asv result sets; exit 1 on a regression beyond the runs' noise")
    p.add_argument("baseline", type=Path, help="results directory of the baseline (asv's layout)")
    p.add_argument("contender", type=Path, help="results directory of the contender (may be the same directory)")
    p.add_argument("--baseline-commit", metavar="PREFIX", help="the baseline's commit (default: each benchmark's latest)")
    p.add_argument("--contender-commit", metavar="PREFIX", help="the contender's commit (default: each benchmark's latest)")
    p.add_argument("--machine", help="only this machine (default: every machine on both sides)")
    _verdict_args(p)
    p.set_defaults(func=cmd_compare)


def _add_noise_and_check(sub) -> None:
    p = sub.add_parser("noise", help="measure this machine's noise floors: the checked-out commit as an A/A of "
                                     "interleaved rounds, recorded beside its results")
    _selection_args(p)
    p.add_argument("--rounds", type=int, default=NOISE_ROUNDS, metavar="N",
                   help=f"rounds of each half of the A/A (default {NOISE_ROUNDS}: {2 * NOISE_ROUNDS} processes a combination)")
    p.add_argument("--fresh", action="store_true", help="start the machine's noise record anew (a changed machine)")
    p.set_defaults(func=cmd_noise)

    p = sub.add_parser("check", help="two commits' rounds interleaved on this machine, each commit installed "
                                     "offline from a wheelhouse; exit 1 on a regression")
    p.add_argument("baseline", help="the baseline commit (a hash, a branch, HEAD~1)")
    p.add_argument("contender", help="the contender commit")
    _selection_args(p)
    p.add_argument("--rounds", type=int, default=CHECK_ROUNDS, metavar="N", help=f"rounds a side (default {CHECK_ROUNDS})")
    p.add_argument("--wheelhouse", type=Path, default=WHEELHOUSE,
                   help=f"wheels of the dependencies (default {WHEELHOUSE}; built once where missing)")
    p.add_argument("--installed", action="store_true",
                   help="no wheelhouse: both commits on this Python and the dependencies installed here, each "
                        "commit's own package laid out apart (a machine without a package index, e.g. a GPU node; "
                        "the two commits must need the same dependencies)")
    _verdict_args(p)
    p.set_defaults(func=cmd_check)


def _add_scale_and_peaks(sub) -> None:
    p = sub.add_parser("scale", help="the kernels split across the devices of an MPI job, one rank per device "
                                     "(launch it with mpirun, mpiexec or srun); results beside asv's")
    kernel = p.add_argument("--kernel", action="append",
                            help="only this kernel (repeatable; default: every kernel split across devices: "
                                 "%(split_kernels)s)")
    kernel.split_kernels = _Later(_split_kernels_text)
    p.add_argument("--device", choices=("cpu", "gpu"), help="the ranks' device (default: gpu where one is present)")
    p.add_argument("--machine", help="machine name for the results, e.g. h200-x4 or cluster-2nodes (default: the host name)")
    p.add_argument("--size", action="append", metavar="KERNEL=N[,N]", help="a kernel's sizes instead of its defaults")
    p.add_argument("--variant", action="append", help="only this variant (repeatable)")
    p.add_argument("--case", action="append", help="only this case (repeatable)")
    p.add_argument("--quick", action="store_true", help="3 samples per combination instead of 10")
    p.add_argument("--samples", type=int, help="samples per combination")
    p.add_argument("--results", type=Path, help="results directory (default: asv.conf.json's, results/)")
    p.set_defaults(func=cmd_scale)

    p = sub.add_parser("peaks", help="print this system and its theoretical and measured peaks")
    p.add_argument("--measure", action="store_true", help="measure STREAM bandwidth now (the report's rule: best median of any operation and variant)")
    p.add_argument("--results", type=Path, default=DEFAULT_RESULTS, help="results to read the measured peak from")
    p.add_argument("--machine", help="machine name in --results whose measured peak to show")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    _peaks_args(p)
    p.set_defaults(func=cmd_peaks)


def _add_verify(sub) -> None:
    p = sub.add_parser("verify", help="check every available variant against the float64 oracle")
    p.add_argument("--kernel", required=True, help=f"one of: {', '.join(list_kernels())}")
    p.add_argument("--variant", action="append", help="only this variant (repeatable)")
    p.add_argument("--case", action="append", help="only this case, e.g. a STREAM op (repeatable)")
    p.add_argument("--size", type=int, help="problem size: elements, systems, ... (default: the kernel's)")
    p.add_argument("--option", action="append", metavar="NAME=VALUE",
                   help="a kernel option, e.g. layout=entry-major (batched_spmv) or order=sorted (gmres)")
    p.add_argument("--matrices", type=Path, metavar="PATH", help="batched kernels: Kokkos Kernels batched CRS matrices")
    p.add_argument("--rhs", type=Path, metavar="PATH", help="with --matrices: its right-hand sides (default: the B sibling)")
    p.add_argument("--tensor", type=Path, metavar="PATH", help="tensor kernels: a .tns tensor file instead of the stand-ins")
    p.add_argument("--matrix", type=Path, metavar="PATH",
                   help="bcsr: a Matrix Market file (.mtx, .mtx.gz, SuiteSparse .tar.gz) instead of the stand-ins")
    p.add_argument("--block-size", metavar="BS", help="with --matrix: the dense block size, 2 to 32")
    p.add_argument("--rank", help="tensor kernels: the rank R (default 16); same as --option rank=R")
    p.add_argument("--mode", help="tensor kernels: only this mode (default: every mode); same as --option mode=M")
    p.add_argument("--seed", type=int, help="input seed (default: fresh, printed)")
    p.add_argument("--full", action="store_true",
                   help="the thorough check instead of the quick default (under a minute): every case at the "
                        "kernel's full verify size, slow comparison points (pyttb) at every size; "
                        + ", ".join(f"{k} {v}" for k, v in FULL_VERIFY_TIME.items())
                        + " (the other kernels' default is already their full set)")
    p.add_argument("--save", type=Path, metavar="DIR", help="write inputs, reference and every output as .npy/.npz")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_verify)


def _add_list(sub) -> None:
    p = sub.add_parser("list", help="list kernels and variants, and whether each can run here")
    p.add_argument("--kernel", help="only this kernel")
    p.add_argument("--studies", action="store_true", help="list the main comparisons and studies instead")
    p.set_defaults(func=cmd_list)


def build_parser() -> argparse.ArgumentParser:
    """The ``portabench`` parser: its subcommands in the order ``--help`` lists them."""
    from portabench.datasets.cli import add_parser as add_datasets_parser

    parser = argparse.ArgumentParser(prog="portabench", description="Portable vs vendor kernel benchmarks (asv).")
    sub = parser.add_subparsers(dest="command", required=True)
    for add in (_add_run, _add_report_and_compare, _add_noise_and_check, _add_scale_and_peaks, _add_verify,
                add_datasets_parser, _add_list):
        add(sub)
    return parser


def _one_line_warnings(default=warnings.formatwarning):
    """The datasets' warnings (a file's padding, index base, ...) as one line, like errors."""
    from portabench.datasets.errors import DatasetWarning

    def format_warning(message, category, filename, lineno, line=None) -> str:
        if issubclass(category, DatasetWarning):
            return f"portabench: warning: {message}\n"
        return default(message, category, filename, lineno, line)
    return format_warning


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    default_format, warnings.formatwarning = warnings.formatwarning, _one_line_warnings()
    try:
        return args.func(args)
    except PortabenchError as exc:
        print(f"portabench: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:
        from .asv_process import Terminated

        terminated = isinstance(exc, Terminated)
        print(f"portabench: {'terminated' if terminated else 'interrupted'}", file=sys.stderr)
        return 143 if terminated else 130
    except BrokenPipeError:
        os._exit(0)
    finally:
        warnings.formatwarning = default_format


if __name__ == "__main__":
    sys.exit(main())
