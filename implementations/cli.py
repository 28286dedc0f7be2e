"""The ``portabench`` command: run, report, compare, peaks, verify, datasets, list.

Every user-facing error is one line on stderr and a non-zero exit, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import sys
from pathlib import Path
from typing import Sequence

from tabulate import tabulate

from . import get_kernel, list_kernels
from .model import PortabenchError

DEFAULT_RESULTS = Path("results")
DEFAULT_REPORT = Path("report")


def _peaks_args(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("theoretical peaks of an unknown CPU (GPUs are read from the device)")
    group.add_argument("--peak-bandwidth", type=float, metavar="GB/s", help="CPU theoretical memory bandwidth")
    group.add_argument("--peak-flops", type=float, metavar="GFLOP/s", help="CPU theoretical FP64 peak")
    group.add_argument("--peaks-file", type=Path, metavar="TOML", help="peaks file with [cpu] and/or [gpu] tables")


def _user_peaks(args: argparse.Namespace) -> dict | None:
    from portabench.reference import hardware

    peaks: dict = hardware.load_user_peaks(args.peaks_file) if args.peaks_file else {}
    cpu = dict(peaks.get("cpu", {}))
    for key, value in (("peak_bandwidth_gbs", args.peak_bandwidth), ("peak_fp64_gflops", args.peak_flops)):
        if value is not None:
            if not value > 0:
                raise PortabenchError(f"--{'peak-bandwidth' if 'bandwidth' in key else 'peak-flops'} must be positive, got {value}")
            cpu[key] = value
    if cpu:
        peaks["cpu"] = cpu
    return peaks or None


def cmd_list(args: argparse.Namespace) -> int:
    rows = []
    for name in [args.kernel] if args.kernel else list_kernels():
        kernel = get_kernel(name)
        for v in kernel.variants:
            reason = v.unavailable()
            rows.append([name, v.name, v.family, v.device, "yes" if reason is None else f"no: {reason}", v.description])
    print(tabulate(rows, headers=["kernel", "variant", "family", "device", "available", "what"]))
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from .verification import verify_kernel

    kernel = get_kernel(args.kernel)
    for case in args.case or []:
        kernel.check_case(case)
    for name in args.variant or []:
        kernel.variant(name)
    size = args.size if args.size is not None else kernel.verify_size
    if size < 1:
        raise PortabenchError(f"--size must be a positive problem size, got {size}")
    pairs = list(args.option or [])
    for name in ("rank", "mode"):
        if getattr(args, name) is not None:
            if name not in kernel.options:
                raise PortabenchError(f"--{name}: kernel {kernel.name} has no {name}")
            pairs.append(f"{name}={getattr(args, name)}")
    given = _given_options(kernel, pairs)
    options = kernel.problem_options(given)
    seed = args.seed if args.seed is not None else secrets.randbits(32)
    variants = args.variant or [v.name for v in kernel.variants]
    cases = args.case or list(kernel.cases)
    problems = None
    if args.matrices is not None:
        problems = [_problem_from_files(kernel, args.matrices, args.rhs, seed, options)]
        print(f"verify {kernel.name}: {args.matrices} ({problems[0].size} systems), seed {seed}")
    elif args.tensor is not None:
        problems = _problems_from_tensor(kernel, args.tensor, seed, given)
        print(f"verify {kernel.name}: {args.tensor} ({problems[0].size} nonzeros), seed {seed}")
    elif args.matrix is not None:
        problems = [_problem_from_matrix(kernel, args.matrix, args.block_size, seed)]
        m = problems[0].matrix
        print(f"verify {kernel.name}: {args.matrix} (n={m.n}, bs={m.bs}, {m.nnzb} blocks), seed {seed}")
    else:
        if args.rhs is not None:
            raise PortabenchError("--rhs goes with --matrices")
        if args.block_size is not None:
            raise PortabenchError("--block-size goes with --matrix")
        problems = kernel.verify_problems(cases, size, seed, given)
        print(f"verify {kernel.name}: size {size}, seed {seed} (rerun with --seed {seed} to reproduce)")
    rows = []
    runs = len(variants) * len(problems)
    with tqdm(total=runs, desc="verify", unit="run", file=sys.stderr, disable=args.quiet) as bar:
        for row in verify_kernel(kernel, size, seed, variants, cases, args.save, options, problems):
            rows.append(row)
            bar.update()
    table = [
        [r.case, r.variant, r.device, r.family,
         "" if r.max_rel_error is None else f"{r.max_rel_error:.2e}",
         "" if r.tolerance is None else f"{r.tolerance:.0e}", r.status]
        for r in rows
    ]
    print(tabulate(table, headers=["case", "variant", "device", "family", "max rel error", "tolerance", "status"]))
    if args.save:
        print(f"inputs, reference and outputs saved under {args.save / kernel.name}")
    failed = [r for r in rows if r.failed]
    if failed:
        print(f"{len(failed)} variant run(s) FAILED", file=sys.stderr)
        return 1
    if all(r.status.startswith("skipped") for r in rows):
        print("no variant could run here", file=sys.stderr)
    return 0


def _given_options(kernel, pairs: list[str]) -> dict[str, str]:
    """The options named on the command line (NAME=VALUE pairs), checked against the kernel's."""
    options = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or name not in kernel.options:
            known = ", ".join(f"{k}={'|'.join(v)}" for k, v in kernel.options.items()) or "none"
            raise PortabenchError(f"--option {pair!r}: expected NAME=VALUE; {kernel.name}'s options: {known}")
        options[name] = value
    return options


def _problems_from_tensor(kernel, path: Path, seed: int, options: dict[str, str]) -> list:
    """A tensor kernel's problems on a .tns file: every mode unless ``options`` names one."""
    from portabench.datasets.tensors.tns import read_tns

    if not hasattr(kernel, "problem_from_tensor"):
        raise PortabenchError(f"--tensor: kernel {kernel.name} does not take a tensor")
    return kernel.verify_problems([], 0, seed, options, tensor=read_tns(path))


def _problem_from_matrix(kernel, path: Path, block_size: str | None, seed: int):
    """A block-sparse kernel's problem on a Matrix Market file, cut into blocks of ``block_size``."""
    from portabench.datasets.matrices import read_mtx

    if not hasattr(kernel, "problem_from_matrix"):
        raise PortabenchError(f"--matrix: kernel {kernel.name} does not take a matrix")
    if block_size is None:
        raise PortabenchError("--matrix needs --block-size BS (the dense block size)")
    return kernel.problem_from_matrix(read_mtx(path), seed, block_size=block_size)


def _problem_from_files(kernel, matrices: Path, rhs: Path | None, seed: int, options: dict[str, str]):
    """A batched kernel's problem on Kokkos Kernels' batched CRS files."""
    from portabench.datasets.batched import read_kokkos

    if not hasattr(kernel, "problem_from_systems"):
        raise PortabenchError(f"--matrices: kernel {kernel.name} does not take batched systems")
    return kernel.problem_from_systems(read_kokkos(matrices, rhs), seed, **options)


def cmd_peaks(args: argparse.Namespace) -> int:
    from portabench.reference import hardware

    record = hardware.detect_system(_user_peaks(args))
    measured: dict[str, float] = {}
    if args.measure:
        from .measure import measure_stream_peaks

        measured = measure_stream_peaks()
    elif args.results and args.machine:
        from portabench.reports import measured_peaks

        measured = measured_peaks(args.results, args.machine)
    if args.json:
        print(json.dumps({"system": record, "measured_gbs": measured}, indent=2))
    else:
        print(hardware.format_system(record, measured or None))
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from .runner import results_dir, run_benchmarks

    status = run_benchmarks(
        machine=args.machine,
        bench=args.bench,
        stream_n=args.stream_n,
        batched_n=args.batched_n,
        tensor_nnz=args.tensor_nnz,
        bcsr_mib=args.bcsr_mib,
        quick=args.quick,
        user_peaks=_user_peaks(args),
    )
    if not args.no_report:
        _report(results_dir(), args.report_dir)
    return status


def _report(results: Path, out: Path, asv_html: Path | None = None) -> None:
    from portabench.reports import build_report

    summary = build_report(results, out, asv_html)
    for problem in summary.problems:
        print(f"skipped: {problem}", file=sys.stderr)
    print(f"report: {summary.n_rows} results from {len(summary.machines)} machine(s) -> {out / 'index.html'} "
          f"and {len(summary.pages)} system page(s)")


def cmd_report(args: argparse.Namespace) -> int:
    _report(args.results, args.out, args.asv_html)
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from portabench.reports.compare import Side, compare, format_comparison

    baseline, contender = Side(args.baseline, args.baseline_commit), Side(args.contender, args.contender_commit)
    thresholds = {k: v for k, v in (("factor", args.factor), ("alpha", args.alpha)) if v is not None}
    result = compare(baseline, contender, args.machine, **thresholds)
    for problem in result.problems:
        print(f"note: {problem}", file=sys.stderr)
    print(format_comparison(result, baseline, contender, args.all))
    return 1 if result.regressed else 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="portabench", description="Portable vs vendor kernel benchmarks (asv).")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("run", help="benchmark this machine through asv, record its peaks, then report")
    p.add_argument("--machine", help="machine name for the results (default: the host name)")
    p.add_argument("--report-dir", type=Path, default=DEFAULT_REPORT, help="where the report goes (default: report/)")
    p.add_argument("--no-report", action="store_true", help="only benchmark")
    p.add_argument("--bench", "-b", metavar="REGEX", help="only benchmarks matching REGEX (asv -b)")
    p.add_argument("--stream-n", metavar="N[,N]", help="STREAM elements per array instead of the default (4x cache)")
    p.add_argument("--batched-n", metavar="N[,N]",
                   help="systems for batched SpMV and GMRES instead of the defaults (CPU 1024,10240; GPU 1024,51200)")
    p.add_argument("--tensor-nnz", metavar="NNZ[,NNZ]",
                   help="tensor kernels: nonzeros of each stand-in instead of the default (4 M on CPU, 76.9 M on GPU)")
    p.add_argument("--bcsr-mib", metavar="MIB[,MIB]",
                   help="bcsr: MiB of block values per matrix instead of the default (64 on CPU; 600 on GPU: "
                        "every stand-in at its real size)")
    p.add_argument("--quick", action="store_true", help="3 samples per benchmark instead of 10-40: a smoke test")
    _peaks_args(p)
    p.set_defaults(func=cmd_run)

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
    p.add_argument("--factor", type=float, help="smallest time ratio worth flagging (default: asv's, 1.1)")
    p.add_argument("--alpha", type=float,
                   help="significance level of the samples' Mann-Whitney U test (default: asv's, 0.002)")
    p.add_argument("--all", action="store_true", help="also list the unchanged benchmarks")
    p.set_defaults(func=cmd_compare)

    p = sub.add_parser("peaks", help="print this system and its theoretical and measured peaks")
    p.add_argument("--measure", action="store_true", help="measure STREAM bandwidth now (best copy/triad)")
    p.add_argument("--results", type=Path, default=DEFAULT_RESULTS, help="results to read the measured peak from")
    p.add_argument("--machine", help="machine name in --results whose measured peak to show")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    _peaks_args(p)
    p.set_defaults(func=cmd_peaks)

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
    p.add_argument("--save", type=Path, metavar="DIR", help="write inputs, reference and every output as .npy/.npz")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_verify)

    from portabench.datasets.cli import add_parser as add_datasets_parser

    add_datasets_parser(sub)

    p = sub.add_parser("list", help="list kernels and variants, and whether each can run here")
    p.add_argument("--kernel", help="only this kernel")
    p.set_defaults(func=cmd_list)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except PortabenchError as exc:
        print(f"portabench: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("portabench: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
