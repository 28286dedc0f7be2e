"""Verdicts over rounds: the process, not the sample, is the unit of replication.

The samples of one benchmark process are not independent replicates of a measurement: what moves a
time between runs on one machine (memory placement, clocks, neighbours, the page cache) is fixed for
a process and changes between processes and time windows. So a side of a comparison is summarised by
its **rounds** (asv's ``rounds``: one process per combination and round, the rounds of all
combinations taken in turn), each round by the median of its samples, and the model is

    log(round median) = the side's level + a round's effect ~ N(0, sigma^2),

with sigma the spread between rounds of that benchmark on that machine. A change is the difference of
the two sides' mean log round medians; it is called a regression or an improvement when it exceeds
the comparison's **threshold**, t(1 - alpha/2, df) * sigma * sqrt(1/n_a + 1/n_b) (a two-sided t-test
at false-alarm rate ``alpha`` with ``n_a`` and ``n_b`` rounds): nothing smaller is ever called a
change. A benchmark's **noise floor** on a machine is the smallest change such a comparison finds
nine times in ten, (t(1 - alpha/2, df) + t(0.9, df)) * sigma * sqrt(...): "detects changes of X %
or more".

sigma comes from the comparison's own rounds (their spread within each side) and from what this
machine has shown before (``NoiseRecord``: the pooled spread of earlier rounds of the same code,
``portabench noise`` and every two-commit check adding to it). A comparison whose rounds spread far
beyond the machine's record (an F-test) was disturbed (a neighbour, a contended CPU) and gets no
verdict; one with a single round per side and no record cannot be judged.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np
from scipy import stats

from portabench.implementations import PortabenchError

CHECK_ROUNDS = 3  # rounds a side of a two-commit check, the design the noise floors are quoted for
DEFAULT_ALPHA = 0.005  # per pair: a main job of about a hundred pairs raises a false alarm in one check of two
CONTENTION_ALPHA = 0.001  # the F-test that calls a comparison's rounds more spread than the machine's record
POWER = 0.9  # a noise floor is the change found nine times in ten
MIN_SIGMA = 1e-3  # 0.1 % between rounds: below a clock's resolution, a spread of zero is not a measurement
# Others' share of the CPU during a round's process from which its times are called contended: one busy
# neighbour on a 2-core machine is 0.5; a quiet one reads a few hundredths (the runner's own bookkeeping).
CONTENDED = 0.15
NOISE_FILE = "portabench.noise"  # beside a machine's results, as portabench.system
# In an asv results file, written by ``portabench run``: benchmark -> combination (``combo_key``) -> the
# samples of each round, in order (asv pools the rounds' samples into one list).
ROUNDS_KEY = "portabench_rounds"
# Beside it: benchmark -> combination -> the share of the CPU other processes took during each round.
CONTENTION_KEY = "portabench_contention"

REGRESSION, IMPROVEMENT, UNCHANGED = "regression", "improvement", "unchanged"
NOISY, UNJUDGED = "noisy", "unjudged"


def combo_key(combo: Sequence[str]) -> str:
    """One parameter combination as asv stores its values (``["'copy'", "'1048576'"]``), as a key."""
    return json.dumps(list(combo))


def round_medians(samples: Sequence[float], counts: Sequence[int] | None) -> list[float]:
    """The median of each round's samples; ``counts``: the samples of each round in order (None: all
    samples are one round, as in a run of one process per combination)."""
    values = np.asarray(samples, dtype=float)
    counts = list(counts) if counts else [len(values)]
    if sum(counts) != len(values) or not all(c > 0 for c in counts):
        counts = [len(values)]
    bounds = np.cumsum([0, *counts])
    return [float(np.median(values[a:b])) for a, b in zip(bounds[:-1], bounds[1:]) if b > a]


def spread(levels: Iterable[Sequence[float]]) -> tuple[float, int]:
    """Sum of squares of log round medians about each group's mean, and its degrees of freedom:
    the between-round spread of groups of rounds of the same code."""
    ss, df = 0.0, 0
    for group in levels:
        y = np.log(np.asarray(group, dtype=float))
        if len(y) > 1:
            ss += float(((y - y.mean()) ** 2).sum())
            df += len(y) - 1
    return ss, df


@dataclass(frozen=True)
class Noise:
    """A benchmark's spread between rounds on one machine: a sum of squares of log round medians and
    its degrees of freedom, pooled over every group of rounds of one code measured there."""

    ss: float
    df: int

    @property
    def sigma(self) -> float:
        return max(math.sqrt(self.ss / self.df), MIN_SIGMA) if self.df > 0 else math.nan

    def floor(self, rounds_a: int, rounds_b: int, alpha: float = DEFAULT_ALPHA) -> float:
        """The noise floor: the smallest relative change (0.1: 10 %) that a comparison of ``rounds_a`` and
        ``rounds_b`` rounds with this spread calls a change at ``alpha`` with probability ``POWER``."""
        if self.df < 1:
            return math.nan
        reach = critical(self.df, alpha) + float(stats.t.ppf(POWER, self.df))
        return math.expm1(reach * self.sigma * math.sqrt(1 / rounds_a + 1 / rounds_b))

    def plus(self, other: "Noise") -> "Noise":
        return Noise(self.ss + other.ss, self.df + other.df)


def critical(df: int, alpha: float) -> float:
    return float(stats.t.ppf(1 - alpha / 2, df))


@dataclass(frozen=True)
class Verdict:
    status: str
    ratio: float  # contender's level over the baseline's (geometric mean of round medians)
    threshold: float  # relative change beyond which this comparison calls a change (NaN: it cannot judge)
    p: float
    evidence: str  # in words, for the table


def verdict(base: Sequence[float], cont: Sequence[float], record: Noise | None = None,
            alpha: float = DEFAULT_ALPHA, factor: float = 1.0, contention: float = math.nan) -> Verdict:
    """The verdict on two sides' round medians (seconds), with the machine's ``record`` of this
    benchmark's noise where there is one; ``factor``: a smallest ratio worth calling a change besides;
    ``contention``: the largest share of the CPU other processes took during a round of either side."""
    ya, yb = np.log(np.asarray(base, dtype=float)), np.log(np.asarray(cont, dtype=float))
    na, nb = len(ya), len(yb)
    ratio = float(math.exp(yb.mean() - ya.mean()))
    if contention >= CONTENDED:
        return Verdict(NOISY, ratio, math.nan, math.nan,
                       f"other processes took {contention:.0%} of the CPU during a round: contended run, no verdict")
    now = Noise(*spread([base, cont]))
    rounds = f"{na}+{nb} rounds"
    if record is not None and record.df > 0:
        if now.df >= 2:
            f = (now.ss / now.df) / (record.sigma ** 2)
            p_f = float(stats.f.sf(f, now.df, record.df))
            if p_f < CONTENTION_ALPHA:
                return Verdict(NOISY, ratio, math.nan, math.nan,
                               f"rounds spread {math.sqrt(now.ss / now.df):.2%}, this machine's record "
                               f"{record.sigma:.2%} (F-test p={p_f:.1g}): disturbed run, no verdict")
        pooled = record.plus(now)
        where = f"{rounds}, spread {pooled.sigma:.2%} (record df {record.df} + {now.df})"
    elif now.df >= 1:
        pooled = now
        where = f"{rounds}, spread {pooled.sigma:.2%} (no record on this machine)"
    else:
        return Verdict(UNJUDGED, ratio, math.nan, math.nan,
                       f"{rounds} and no noise record for this machine: run `portabench noise` (or more rounds)")
    se = pooled.sigma * math.sqrt(1 / na + 1 / nb)
    d = float(yb.mean() - ya.mean())
    p = float(2 * stats.t.sf(abs(d) / se, pooled.df))
    threshold = math.expm1(critical(pooled.df, alpha) * se)
    moved = abs(d) > math.log1p(threshold) and not (1 / factor < ratio < factor)
    status = (REGRESSION if d > 0 else IMPROVEMENT) if moved else UNCHANGED
    return Verdict(status, ratio, threshold, p, f"p={p:.2g}, threshold {threshold:.1%}; {where}")


@dataclass
class NoiseRecord:
    """A machine's noise per benchmark (``results/<machine>/portabench.noise``): keys are
    ``"<benchmark> <params>"`` as the tidy table names a row (``benchmark``, ``params``)."""

    benchmarks: dict[str, Noise] = field(default_factory=dict)
    sources: list[str] = field(default_factory=list)  # what added to it: "noise <commit> 2x3 rounds, <date>", ...

    @staticmethod
    def key(benchmark: str, params: str) -> str:
        return f"{benchmark} {params}"

    def get(self, benchmark: str, params: str) -> Noise | None:
        return self.benchmarks.get(self.key(benchmark, params))

    def add(self, benchmark: str, params: str, noise: Noise) -> None:
        if noise.df > 0:
            key = self.key(benchmark, params)
            self.benchmarks[key] = self.benchmarks[key].plus(noise) if key in self.benchmarks else noise

    def floor_pct(self, benchmark: str, params: str) -> float:
        """The change this machine detects on the benchmark in a check of ``CHECK_ROUNDS`` rounds a side at
        ``DEFAULT_ALPHA``, in %."""
        noise = self.get(benchmark, params)
        return 100 * noise.floor(CHECK_ROUNDS, CHECK_ROUNDS) if noise else math.nan

    @classmethod
    def load(cls, machine_dir: Path) -> "NoiseRecord | None":
        path = Path(machine_dir) / NOISE_FILE
        if not path.exists():
            return None
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            benchmarks = {k: Noise(float(v["ss"]), int(v["df"])) for k, v in data["benchmarks"].items()}
            return cls(benchmarks, list(data.get("sources", [])))
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise PortabenchError(f"{path}: not a noise record ({exc!r}); delete it and run `portabench noise`") from None

    def save(self, machine_dir: Path) -> Path:
        path = Path(machine_dir) / NOISE_FILE
        data = {"schema": 1, "sources": self.sources,
                "benchmarks": {k: {"ss": v.ss, "df": v.df} for k, v in sorted(self.benchmarks.items())}}
        path.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
        return path
