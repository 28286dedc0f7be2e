"""The ``portabench`` command: verify, its saved arrays and its quick default, list, peaks, and one-line errors."""

import json
from pathlib import Path

import numpy as np
import pytest

from portabench.implementations import get_kernel, list_kernels, list_variants
from portabench.harness.commands.cli import FULL_VERIFY_TIME, build_parser, main
from portabench.implementations.stream.definition import OPS
from portabench.implementations.stream.numba_prange import StreamNumbaPrange
from portabench.reference.stream import stream_oracle

CPU_VARIANTS = [v.name for v in list_variants("stream", device="cpu")]


def _one_line_error(capsys: pytest.CaptureFixture, *needles: str) -> str:
    err = capsys.readouterr().err.strip()
    assert err.startswith("portabench: error:") and "\n" not in err and "Traceback" not in err, err
    for needle in needles:
        assert needle in err, err
    return err


def test_verify_saves_everything_needed_to_reproduce(tmp_path: Path, capsys, fresh_seed) -> None:
    n = 4097
    code = main(["verify", "--kernel", "stream", "--size", str(n), "--seed", str(fresh_seed),
                 "--save", str(tmp_path), "--quiet"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert f"seed {fresh_seed}" in out and "FAIL" not in out
    for op, spec in OPS.items():
        folder = tmp_path / "stream" / op
        with np.load(folder / "inputs.npz") as saved:
            inputs = {k: saved[k] for k in saved.files}
        # Everything the variant is handed: what it reads, and the output array it overwrites.
        assert set(inputs) == set(spec.reads) | ({spec.writes} - {None})
        assert all(inputs[k].shape == (n,) and np.unique(inputs[k]).size > n // 2 for k in spec.reads)  # random
        if spec.writes not in (None, *spec.reads):
            assert np.isnan(inputs[spec.writes]).all()  # poisoned: a variant that writes nothing fails
        problem = get_kernel("stream").problem(op, n, seed=fresh_seed)
        # The saved inputs are the ones the seed generates, and the saved reference is the oracle of them.
        for k, v in problem.inputs().items():
            np.testing.assert_array_equal(inputs[k], v)
        reference = np.load(folder / "reference.npy")
        np.testing.assert_allclose(reference, stream_oracle(op, inputs, problem.scalar), rtol=1e-15)
        for name in CPU_VARIANTS:
            np.testing.assert_allclose(np.load(folder / f"{name}.npy"), reference, rtol=1e-10)
        assert not any(folder.glob("cupy-*.npy")) or all(v.unavailable() is None
                                                        for v in list_variants("stream", device="gpu"))


def test_verify_fails_with_exit_1_on_a_wrong_answer(monkeypatch, tmp_path: Path, capsys, fresh_seed) -> None:
    def off_by_one_ulp_too_many(self, op, arrays, scalar):
        call = original(self, op, arrays, scalar)

        def wrong():
            result = call()
            if op == "triad":
                arrays["a"][::2] *= 1 + 1e-9
            return result

        return wrong

    original = StreamNumbaPrange.bind
    monkeypatch.setattr(StreamNumbaPrange, "bind", off_by_one_ulp_too_many)
    code = main(["verify", "--kernel", "stream", "--size", "1000", "--seed", str(fresh_seed),
                 "--variant", "numba-prange", "--save", str(tmp_path), "--quiet"])
    captured = capsys.readouterr()
    assert code == 1
    lines = {line.split()[0]: line for line in captured.out.splitlines() if line.split() and line.split()[0] in OPS}
    assert lines["triad"].rstrip().endswith("FAIL") and lines["copy"].rstrip().endswith("pass")
    assert "1 variant run(s) FAILED" in captured.err
    # The wrong output is saved next to the reference, so the failure can be studied.
    wrong = np.load(tmp_path / "stream" / "triad" / "numba-prange.npy")
    assert not np.allclose(wrong, np.load(tmp_path / "stream" / "triad" / "reference.npy"), rtol=1e-12, atol=0)


def test_verify_reports_unavailable_variants_as_skipped(capsys) -> None:
    gpu = [v for v in list_variants("stream", device="gpu") if v.unavailable()]
    if not gpu:
        pytest.skip("every GPU variant can run here")
    assert main(["verify", "--kernel", "stream", "--size", "64", "--case", "copy", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert all(f"{v.name}" in out for v in gpu) and "skipped: CuPy" in out


@pytest.mark.parametrize(
    ("argv", "needles"),
    [
        (["verify", "--kernel", "nope"], ["nope", "stream"]),
        (["verify", "--kernel", "stream", "--variant", "fortran"], ["fortran", "numba-prange"]),
        (["verify", "--kernel", "stream", "--case", "axpby"], ["axpby", "triad"]),
        (["verify", "--kernel", "stream", "--size", "0"], ["size"]),
        (["list", "--kernel", "nope"], ["nope"]),
        (["peaks", "--peak-bandwidth", "-3"], ["--peak-bandwidth"]),
    ],
)
def test_bad_requests_are_one_line_errors(argv: list[str], needles: list[str], capsys) -> None:
    assert main(argv) == 2
    _one_line_error(capsys, *needles)


def test_report_without_results_is_a_one_line_error(tmp_path: Path, capsys) -> None:
    assert main(["report", "--results", str(tmp_path / "none"), "--out", str(tmp_path / "out")]) == 2
    _one_line_error(capsys, "portabench run")


def test_malformed_peaks_file_is_a_one_line_error(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "peaks.toml"
    bad.write_text("[cpu]\npeak_bandwidth_gbs = 'fast'\n")
    assert main(["peaks", "--peaks-file", str(bad)]) == 2
    _one_line_error(capsys, str(bad))


def test_list_names_every_variant_and_why_it_cannot_run(capsys) -> None:
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    for v in list_variants("stream"):
        assert v.name in out
        if v.unavailable():
            assert v.unavailable()[:30] in out


def test_peaks_json_carries_the_user_peaks(capsys) -> None:
    assert main(["peaks", "--json", "--peak-bandwidth", "153.6", "--peak-flops", "1164.8"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["system"]["cpu"]["peak_bandwidth_gbs"] == 153.6
    assert record["system"]["cpu"]["peak_fp64_gflops"] == 1164.8


def test_verify_says_what_its_error_column_measures(capsys) -> None:
    assert main(["verify", "--kernel", "mttkrp", "--case", "uber", "--size", "2000", "--mode", "1", "--quiet"]) == 0
    out = capsys.readouterr().out
    header = next(line for line in out.splitlines() if line.startswith("case"))
    assert "error" in header and "max rel error" not in header
    assert "error: max |out - oracle| over the componentwise error bound (against the float64 oracle)" in out


# One budget for every kernel's default ``verify`` set, in its work model: a few seconds of any variant on two
# cores. It keeps a default from growing back into minutes (the times themselves are measured: README.md).
VERIFY_BYTES, VERIFY_FLOPS = 4e9, 2e9


@pytest.mark.parametrize("name", list_kernels())
def test_verify_default_is_a_quick_check_and_full_every_case(name: str) -> None:
    kernel = get_kernel(name)
    quick, full = kernel.verify_set(), kernel.verify_set(full=True)
    assert full == {case: kernel.verify_size for case in kernel.cases}
    assert quick == (kernel.quick_verify or full) and set(quick) <= set(kernel.cases)
    problems = kernel.verify_set_problems(quick, 0, {})
    moved = flops = 0.0
    for problem in problems:
        mode = {"mode": str(problem.mode)} if hasattr(problem, "mode") else {}
        work = kernel.work(problem.case, problem.size, **mode)
        moved, flops = moved + work.bytes, flops + work.flops
    assert 0 < moved <= VERIFY_BYTES and 0 < flops <= VERIFY_FLOPS, (moved, flops)
    # Every variant still runs, somewhere in the default set.
    for variant in kernel.variants:
        assert any(kernel.verify_skips(variant, p) is None for p in problems), variant.name
    # Given cases and sizes win over the quick set's; --full is the full set.
    case = kernel.cases[-1]
    assert kernel.verify_set([case]) == {case: (kernel.quick_verify or {}).get(case, kernel.verify_size)}
    assert kernel.verify_set([case], 7, full=True) == kernel.verify_set([case], 7) == {case: 7}


def test_full_verify_time_is_stated_where_the_default_is_quick(capsys) -> None:
    assert set(FULL_VERIFY_TIME) == {n for n in list_kernels() if get_kernel(n).quick_verify is not None}
    with pytest.raises(SystemExit):
        main(["verify", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert all(f"{name} {took}" in help_text for name, took in FULL_VERIFY_TIME.items())


def test_verify_quick_check_leaves_slow_reference_points_to_full(capsys, fresh_seed) -> None:
    kernel = get_kernel("cpapr_pdnr")
    pyttb, size = kernel.variant("pyttb"), kernel.variant("pyttb").max_size + 1000
    # The one variant asked for is left to --full: nothing ran, which is said in one line (exit 2).
    assert main(["verify", "--kernel", "cpapr_pdnr", "--case", "nell-2", "--size", str(size), "--variant", "pyttb",
                 "--seed", str(fresh_seed), "--quiet"]) == 2
    captured = capsys.readouterr()
    assert (f"a quick check; --full checks every case at {kernel.verify_size} nonzeros with every variant, "
            f"{FULL_VERIFY_TIME['cpapr_pdnr']}") in captured.out
    row = next(line for line in captured.out.splitlines() if line.startswith("nell-2"))
    assert f"skipped: a comparison point, up to {pyttb.max_size} nonzeros in the quick check, {size} here" in row
    assert captured.err.startswith("portabench: error: no variant ran: pyttb: a comparison point")
    assert build_parser().parse_args(["verify", "--kernel", "cpapr_pdnr", "--full"]).full
