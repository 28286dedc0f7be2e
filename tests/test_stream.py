"""Every STREAM variant against the float64 oracle on fresh random inputs."""

import numpy as np
import pytest

from portabench.implementations import PortabenchError, WrongAnswerError, get_kernel, list_variants
from portabench.implementations.stream.definition import OPS, StreamProblem
from portabench.implementations.stream.numpy import NumpyUfunc
from portabench.implementations.verification import VariantUnavailable, prepare_verified, run_once
from portabench.datasets import memory
from portabench.implementations import hardware
from portabench.reference.stream import stream_oracle

KERNEL = get_kernel("stream")
VARIANTS = [v.name for v in list_variants("stream")]
# Odd sizes exercise tails (and the GPU's scalar path); 2^20 the vector path.
SIZES = [1, 7, 4097, 1 << 20]


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("op", list(OPS))
@pytest.mark.parametrize("n", SIZES)
def test_variant_matches_oracle(variant, op, n, fresh_seed):
    cls = KERNEL.variant(variant)
    if cls.unavailable():
        pytest.skip(cls.unavailable())
    problem = KERNEL.problem(op, n, seed=fresh_seed)
    result = run_once(KERNEL, variant, problem)
    assert result.check.passed, (variant, op, n, fresh_seed, result.check)
    # The output really is the operation, not a copy of an input.
    if op != "copy" and OPS[op].writes is not None and n > 1:
        for name in OPS[op].reads:
            if name != OPS[op].writes:
                assert not np.allclose(result.output, problem.inputs()[name])


@pytest.mark.usefixtures("cupy_gpu")
@pytest.mark.parametrize(
    "config",
    [dict(threads_per_block=32, blocks_per_sm=1, vector_width=2, unroll=4, dot_blocks_per_sm=1, streaming=True),
     dict(threads_per_block=1024, vector_width=1, unroll=2, dot_blocks_per_sm=16),
     dict(threads_per_block=96, blocks_per_sm=2, vector_width=2, unroll=1, dot_blocks_per_sm=3)],
    ids=["grid-stride-unroll4", "scalar-unroll2", "grid-stride"],
)
@pytest.mark.parametrize("n", [9, 4098, 300_002])
def test_rawkernel_launch_configurations(config, n, fresh_seed):
    """Every loop shape of the raw kernels (grid-stride, unrolled tiles, tails) is right."""
    from portabench.implementations.stream.cupy_rawkernel import CupyRawKernel

    if CupyRawKernel.unavailable():
        pytest.skip(CupyRawKernel.unavailable())
    for op in OPS:
        problem = KERNEL.problem(op, n, seed=fresh_seed)
        result = run_once(KERNEL, CupyRawKernel(**config), problem)
        assert result.check.passed, (config, op, n, fresh_seed, result.check)


@pytest.mark.parametrize("variant", VARIANTS)
def test_repeated_runs_stay_correct(variant, fresh_seed):
    """Timing repeats run(): idempotent ops must give the same answer every time."""
    cls = KERNEL.variant(variant)
    if cls.unavailable():
        pytest.skip(cls.unavailable())
    for op in ("copy", "triad", "dot"):
        problem = KERNEL.problem(op, 10_001, seed=fresh_seed)
        result = run_once(KERNEL, variant, problem)
        for _ in range(3):
            result.variant.run()
        assert KERNEL.check(problem, result.variant.output(), result.reference).passed


def test_inputs_are_random_and_output_is_poisoned(fresh_seed):
    problem = KERNEL.problem("triad", 1000, seed=fresh_seed)
    x = problem.inputs()
    assert set(x) == {"a", "b", "c"}
    assert np.isnan(x["a"]).all()  # triad writes a
    for name in "bc":
        assert np.unique(x[name]).size > 990 and (x[name] >= 1).all() and (x[name] < 2).all()
    assert not np.array_equal(x["b"], KERNEL.problem("triad", 1000, seed=fresh_seed + 1).inputs()["b"])


def test_oracle_on_hand_values():
    x = {"a": np.array([1.0, 2.0]), "b": np.array([3.0, 5.0]), "c": np.array([7.0, 11.0])}
    assert np.allclose(stream_oracle("triad", x, 0.5), [6.5, 10.5])
    assert np.allclose(stream_oracle("nstream", x, 0.5), [7.5, 12.5])
    assert stream_oracle("dot", x, 0.5) == pytest.approx(13.0)


class _DropsLastElement(NumpyUfunc):
    """A broken variant: copy misses the final element (left as the NaN poison)."""

    name = "numpy"

    def bind(self, op, x, s):
        return lambda: np.copyto(x["c"][:-1], x["a"][:-1])


class _SumsOneShort(NumpyUfunc):
    name = "numpy"

    def bind(self, op, x, s):
        return lambda: np.dot(x["a"][:-1], x["b"][:-1])


@pytest.mark.parametrize("broken, op", [(_DropsLastElement, "copy"), (_SumsOneShort, "dot")])
def test_wrong_answers_are_caught(monkeypatch, broken, op, fresh_seed):
    monkeypatch.setitem(KERNEL._variants, "numpy", broken)
    problem = KERNEL.problem(op, 1 << 16, seed=fresh_seed)
    assert not run_once(KERNEL, "numpy", problem).check.passed
    with pytest.raises(WrongAnswerError):
        prepare_verified(KERNEL, "numpy", op, 1 << 16, seed=fresh_seed)


def test_work_model_matches_babelstream_weights():
    n = 1000
    weights = {"copy": 2, "scale": 2, "add": 3, "triad": 3, "dot": 2, "nstream": 4}
    flops = {"copy": 0, "scale": 1, "add": 1, "triad": 2, "dot": 2, "nstream": 3}
    for op in OPS:
        work = KERNEL.work(op, n)
        assert work.bytes == weights[op] * 8 * n
        assert work.flops == flops[op] * n


def test_default_cpu_size_is_beyond_the_last_level_cache():
    n = KERNEL.default_size("cpu")
    assert 4 * hardware.cpu_last_level_cache_bytes() <= n * 8 < 4 * hardware.cpu_last_level_cache_bytes() + 8 * 2**20
    assert n % 2**20 == 0


def test_default_cpu_sizes_follow_the_one_in_cache_rule(monkeypatch):
    """STREAM's and BCSR's CPU defaults are beyond the last-level cache by ``model.IN_CACHE_FACTOR``, the rule the
    report marks results in cache by: changing it there moves both."""
    from portabench.implementations import model
    from portabench.implementations.bcsr import definition as bcsr

    llc = hardware.cpu_last_level_cache_bytes()
    n = KERNEL.default_size("cpu")
    assert not model.in_cache(n * 8, llc) and model.in_cache(model.beyond_cache_bytes(llc) - 1, llc)
    assert bcsr.cpu_default_mib(32 * 2**20) == 4 * 32
    monkeypatch.setattr(model, "IN_CACHE_FACTOR", 2 * model.IN_CACHE_FACTOR)
    assert KERNEL.default_size("cpu") * 8 >= 8 * llc and KERNEL.default_size("cpu") > n
    assert bcsr.cpu_default_mib(32 * 2**20) == 8 * 32


def test_peaks_measure_takes_the_reports_rule(monkeypatch):
    """`portabench peaks --measure`: the median of ``REPEATS`` runs of every operation of every available
    variant, the best of them per device: ``peaks.measured_peaks``, the function the report rates by."""
    from portabench.harness.machine import peaks

    monkeypatch.setattr(KERNEL, "default_size", lambda device: 1 << 16)
    seen = []
    rule = peaks.measured_peaks
    monkeypatch.setattr(peaks, "measured_peaks", lambda rates, by: seen.append(rates) or rule(rates, by))
    measured = peaks.measure_stream_peaks()
    (rates,) = seen
    available = [v for v in list_variants("stream", device="cpu") if v.unavailable() is None]
    cpu = rates[rates.device == "cpu"]
    assert len(cpu) == len(OPS) * len(available) and not cpu.in_cache.any()
    assert measured["cpu"] == pytest.approx(cpu.gbs.max()) and set(measured) == set(rates.device)


def test_size_override(monkeypatch):
    from suite.classes import environment_sizes

    assert KERNEL.at_sizes((1024, 4096)).benchmark_sizes("cpu") == [1024, 4096]
    monkeypatch.setenv("PORTABENCH_STREAM_N", "1024,4096")  # a plain asv run's older variable
    assert environment_sizes(KERNEL) == (1024, 4096)
    monkeypatch.setenv("PORTABENCH_STREAM_N", "lots")
    with pytest.raises(Exception, match="PORTABENCH_STREAM_N"):
        environment_sizes(KERNEL)


def test_gpu_variants_say_why_they_are_unavailable():
    for cls in list_variants("stream", device="gpu"):
        reason = cls.unavailable()
        if reason is not None:
            assert "CuPy" in reason or "GPU" in reason
            with pytest.raises(VariantUnavailable, match=cls.name):
                run_once(KERNEL, cls.name, KERNEL.problem("copy", 8))


def test_bad_problem_requests():
    with pytest.raises(KeyError, match="unknown case"):
        KERNEL.problem("memset", 10)
    with pytest.raises(Exception, match="positive"):
        KERNEL.problem("copy", 0)
    with pytest.raises(KeyError, match="unknown variant"):
        KERNEL.variant("fortran")
    assert isinstance(KERNEL.problem("copy", 4), StreamProblem)


def test_too_little_host_memory_is_a_clear_error(monkeypatch, tmp_path, capsys):
    from portabench.harness.commands.cli import main

    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       16000000 kB\nMemAvailable:    1000 kB\n")
    assert memory.available_host_memory_bytes(meminfo) == 1000 * 1024
    assert memory.available_host_memory_bytes(tmp_path / "missing") is None
    monkeypatch.setattr(memory, "available_host_memory_bytes", lambda: 1000 * 1024)
    with pytest.raises(PortabenchError, match=r"needs 0\.0 GiB of host memory.*smaller size"):
        KERNEL.problem("triad", 100_000).inputs()  # 8 arrays x 0.8 MB > 1 MB
    KERNEL.problem("triad", 1_000).inputs()  # small problems still fit
    assert main(["verify", "--kernel", "stream", "--size", "100000", "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("portabench: error: STREAM") and "host memory" in err
