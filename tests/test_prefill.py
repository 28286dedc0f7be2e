"""The run's inputs and oracles, built before asv starts (``harness/commands/prefill.py``): which
problems, once each; that a built problem is what a benchmark process then reads instead of
computing; that a failing build is left to the benchmark and the others still happen."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from portabench.implementations import get_kernel
from portabench.harness.commands.prefill import prefill
from portabench.harness.plan import Job, RunPlan
from portabench.implementations.verification import oracle_key, stored_reference


def test_the_main_jobs_problems_once_each_and_only_where_an_oracle_is_kept() -> None:
    jobs = RunPlan.build(["cpu"]).jobs()
    keys = [(j.kernel, j.case, j.size, j.options) for j in jobs]
    assert len(keys) == len(set(keys))
    kernels = {j.kernel for j in jobs}
    assert kernels == {k for k in ("stream", "batched_spmv", "gmres", "mttkrp", "phi", "pi", "bcsr", "cpapr_mu",
                                   "cpapr_pdnr") if get_kernel(k).oracle_stored}
    assert "stream" not in kernels and "pi" not in kernels  # nothing on disk to build ahead
    mttkrp = sorted(j.options for j in jobs if j.kernel == "mttkrp")
    main = get_kernel("mttkrp").studies("cpu")[0]
    assert len(mttkrp) == len(main.cases) * len(main.sizes) * len(main.options["mode"])


def test_the_bench_expression_and_the_sizes_choose_the_problems() -> None:
    before = dict(os.environ)
    jobs = RunPlan.build(["cpu"], sizes={"mttkrp": (3000, 5000)}, bench=r"Mttkrp").jobs()
    assert {j.kernel for j in jobs} == {"mttkrp"}
    assert {j.size for j in jobs} == {3000, 5000}
    assert dict(os.environ) == before  # sizes travel in the plan, never through the environment


def test_a_built_problem_is_read_back_not_computed_and_a_bad_one_is_left_to_the_benchmark(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = {**os.environ, "PORTABENCH_DATA": str(tmp_path / "data")}
    monkeypatch.setenv("PORTABENCH_DATA", env["PORTABENCH_DATA"])
    good = [Job("mttkrp", "nell-2", 4000, (("mode", str(m)), ("rank", "4"))) for m in range(3)]
    bad = Job("mttkrp", "nell-2", 4000, (("mode", "7"), ("rank", "4")))  # nell-2 has three modes
    done: list[int] = []
    with open(tmp_path / "log", "w") as log:
        summary = prefill([*good, bad], env, log, tmp_path / "numba", workers=2, progress=done.append)
    text = (tmp_path / "log").read_text()
    assert (summary.jobs, summary.failed, sum(done)) == (4, 1, 4), text
    assert re.search(r"mttkrp nell-2 4000 mode=7 rank=4 failed", text) and "built in" in text

    kernel = get_kernel("mttkrp")
    for job in good:
        options = dict(job.options)
        problem = kernel.problem(job.case, job.size, 0, **options)
        key = oracle_key(job.case, job.size, 0, options)
        monkeypatch.setattr(type(kernel), "oracle", lambda self, p: pytest.fail("the oracle ran again"))
        reference = stored_reference(kernel, problem, key)
        monkeypatch.undo()
        monkeypatch.setenv("PORTABENCH_DATA", env["PORTABENCH_DATA"])
        assert reference.shape == kernel.oracle(problem).shape
        assert float(abs(reference - kernel.oracle(problem)).max()) == 0.0  # the seeded problem's own answer
