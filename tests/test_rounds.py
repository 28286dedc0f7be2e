"""The round-based verdicts (harness/statistics.py) on synthetic timings of known truth: each round (a
process) draws its own level, its samples scatter around it (with the odd slow outlier), and a side is
its rounds. Identical code must be called a change at most at the chosen false-alarm rate; a 15 %
step must be found; a disturbed run gets no verdict, and one round a side without a record cannot be
judged. The samples-as-replicates test this replaces is shown to fail the same data."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import mannwhitneyu

from portabench.harness.statistics import (CONTENTION, DEFAULT_ALPHA, DISTURBED, IMPROVEMENT, REGRESSION, UNCHANGED,
                                           UNJUDGED, VARIANCE_DIFFERS, Noise, NoiseRecord, critical, round_medians,
                                           spread, verdict)

BETWEEN, WITHIN = 0.04, 0.03  # sd of a round's log level, and of a sample's log time within a round


def _side(rng: np.random.Generator, rounds: int, level: float = 1e-3, samples: int = 7,
          between: float = BETWEEN) -> list[list[float]]:
    """Rounds of samples: a process-level random effect plus sample noise and rare 3x outliers."""
    out = []
    for _ in range(rounds):
        mean = level * math.exp(rng.normal(0, between))
        times = mean * np.exp(rng.normal(0, WITHIN, samples))
        times[rng.random(samples) < 0.05] *= 3
        out.append(times.tolist())
    return out


def _medians(side: list[list[float]]) -> list[float]:
    flat = [t for r in side for t in r]
    return round_medians(flat, [len(r) for r in side])


def _record(rng: np.random.Generator, rounds: int = 3) -> Noise:
    """What ``portabench noise`` records: an A/A of the same model, two sides of ``rounds`` rounds."""
    return Noise(*spread([_medians(_side(rng, rounds)), _medians(_side(rng, rounds))]))


def test_round_medians_split_the_samples_by_round(fresh_seed: int) -> None:
    rng = np.random.default_rng(fresh_seed)
    side = _side(rng, 3)
    flat = [t for r in side for t in r]
    assert _medians(side) == [float(np.median(r)) for r in side]
    assert round_medians(flat, None) == [float(np.median(flat))]  # no rounds known: one
    assert round_medians(flat, [5, 5]) == [float(np.median(flat))]  # counts that do not add up: one


@pytest.mark.parametrize("rounds, with_record", [(2, True), (3, True), (3, False)])
def test_identical_code_is_called_a_change_at_most_at_the_false_alarm_rate(fresh_seed: int, rounds: int,
                                                                         with_record: bool) -> None:
    rng = np.random.default_rng(fresh_seed)
    alpha, pairs = 0.01, 3000
    flagged = 0
    for _ in range(pairs):
        record = _record(rng) if with_record else None
        v = verdict(_medians(_side(rng, rounds)), _medians(_side(rng, rounds)), record, alpha=alpha)
        flagged += v.status in (REGRESSION, IMPROVEMENT)
    expected = alpha * pairs
    assert flagged <= expected + 4 * math.sqrt(expected), flagged  # 4 sd above the rate alpha allows


def test_the_same_data_fools_a_test_over_samples(fresh_seed: int) -> None:
    """Mann-Whitney over the samples of one process a side (the old ``compare``) cries wolf on
    identical code: its replicates are not independent."""
    rng = np.random.default_rng(fresh_seed)
    flagged = 0
    for _ in range(300):
        a, b = _side(rng, 1, samples=20), _side(rng, 1, samples=20)
        flagged += mannwhitneyu(a[0], b[0]).pvalue < 0.01
    assert flagged > 0.2 * 300


@pytest.mark.parametrize("rounds, between", [(2, 0.01), (3, 0.02)])
def test_a_15_percent_step_is_found_wherever_the_floor_is_below_it(fresh_seed: int, rounds: int,
                                                                  between: float) -> None:
    rng = np.random.default_rng(fresh_seed)
    found, judged = 0, 0
    for _ in range(300):
        record = Noise(*spread([_medians(_side(rng, 6, between=between)) for _ in range(2)]))
        base, slower = _side(rng, rounds, between=between), _side(rng, rounds, level=1.15e-3, between=between)
        v = verdict(_medians(base), _medians(slower), record)
        assert v.status != IMPROVEMENT
        if record.floor(rounds, rounds) < 0.15:  # the machine's noise floor for this check
            judged += 1
            found += v.status == REGRESSION
    assert judged >= 250  # a quiet machine's floors are below the step
    assert found >= 0.9 * judged, (found, judged)


def test_a_step_below_the_threshold_is_not_a_change_and_the_threshold_says_so(fresh_seed: int) -> None:
    """Over many trials (a single draw can hold a round of outliers that the F-test rightly calls disturbed)."""
    rng = np.random.default_rng(fresh_seed)
    unchanged = 0
    for _ in range(200):
        record = _record(rng)
        base = _medians(_side(rng, 3))
        nudged = [m * 1.002 for m in base]  # 0.2 %: far below any floor of this spread
        v = verdict(base, nudged, record)
        assert v.status in (UNCHANGED, DISTURBED), v
        if v.status == UNCHANGED:
            unchanged += 1
            pooled = record.plus(Noise(*spread([base, nudged])))
            expected = math.expm1(critical(pooled.df, DEFAULT_ALPHA) * pooled.sigma * math.sqrt(2 / 3))
            assert v.threshold == pytest.approx(expected) and v.threshold > 0.002
            assert f"threshold {v.threshold:.1%}" in v.evidence
    assert unchanged >= 190, unchanged


def test_a_disturbed_run_gets_no_verdict(fresh_seed: int) -> None:
    rng = np.random.default_rng(fresh_seed)
    noisy = 0
    for _ in range(200):
        record = _record(rng, rounds=6)
        base = _medians(_side(rng, 3, between=0.5))  # a neighbour: rounds 0.5 apart in log
        cont = _medians(_side(rng, 3, between=0.5))
        noisy += verdict(base, cont, record).status == DISTURBED
    assert noisy >= 0.8 * 200, noisy
    base, cont = _medians(_side(rng, 3)), _medians(_side(rng, 3, level=2e-3))
    said = verdict(base, cont, _record(rng, rounds=6), contention=0.3)  # a neighbour measured, whatever the spread
    assert said.status == DISTURBED and "took 30% of the CPU" in said.evidence


def test_a_disturbed_verdict_says_how() -> None:
    """Contention and an unequal spread (the F-test) are two causes of one status, told apart by ``cause``."""
    record = Noise(0.01 ** 2 * 10, 10)  # rounds 1 % apart
    spread_out = verdict([1e-3, 2e-3, 4e-3], [1e-3, 2.5e-3, 5e-3], record)  # rounds 2x apart
    assert (spread_out.status, spread_out.cause) == (DISTURBED, VARIANCE_DIFFERS) and "F-test" in spread_out.evidence
    contended = verdict([1e-3, 1.01e-3], [1e-3, 1.01e-3], record, contention=0.5)
    assert (contended.status, contended.cause) == (DISTURBED, CONTENTION)
    assert verdict([1e-3, 1.01e-3], [1e-3, 1.01e-3], record).cause == ""


def test_one_round_a_side_needs_the_machines_record(fresh_seed: int) -> None:
    """Over many trials: a record that happens to hold a round of outliers (one in a few hundred here)
    is rightly too wide to call even a 2x step from one round a side."""
    rng = np.random.default_rng(fresh_seed)
    found = 0
    for _ in range(200):
        base, slower = _medians(_side(rng, 1)), _medians(_side(rng, 1, level=2e-3))
        assert verdict(base, slower).status == UNJUDGED
        found += verdict(base, slower, _record(rng, rounds=4)).status == REGRESSION
    assert found >= 0.95 * 200, found


def test_a_noise_record_pools_and_round_trips(tmp_path, fresh_seed: int) -> None:
    rng = np.random.default_rng(fresh_seed)
    record = NoiseRecord()
    first, second = _record(rng), _record(rng)
    record.add("stream.StreamCPU.time_stream", '{"op":"copy"}', first)
    record.add("stream.StreamCPU.time_stream", '{"op":"copy"}', second)
    record.add("stream.StreamCPU.time_stream", '{"op":"dot"}', Noise(0.0, 0))  # nothing measured: not added
    noise = record.get("stream.StreamCPU.time_stream", '{"op":"copy"}')
    assert noise == first.plus(second) and noise.df == first.df + second.df
    assert record.get("stream.StreamCPU.time_stream", '{"op":"dot"}') is None
    again = NoiseRecord.load(record.save(tmp_path).parent)
    assert again == record
    assert 0 < again.floor_pct("stream.StreamCPU.time_stream", '{"op":"copy"}') < 100
