"""portabench's statistics: verdicts over rounds (``compare``, ``check``, ``noise``) and the tests behind the
report's change points across commits (reports/changes.py), with the thresholds of both.

**Rounds: the process, not the sample, is the unit of replication.** The samples of one benchmark process
are not independent replicates of a measurement: what moves a time between runs on one machine (memory
placement, clocks, neighbours, the page cache) is fixed for a process and changes between processes and
time windows. So a side of a comparison is summarised by its **rounds** (asv's ``rounds``: one process per
combination and round, the rounds of all combinations taken in turn), each round by the median of its
samples, and the model is

    log(round median) = the side's level + a round's effect ~ N(0, sigma^2),

with sigma the spread between rounds of that benchmark on that machine. A change is the difference of
the two sides' mean log round medians; it is called a regression or an improvement when it exceeds
the comparison's **threshold**, t(1 - alpha/2, df) * sigma * sqrt(1/n_a + 1/n_b) (``t_test``: Student's
two-sided t-test at false-alarm rate ``alpha`` with ``n_a`` and ``n_b`` rounds): nothing smaller is ever
called a change. A benchmark's **noise floor** on a machine is the smallest change such a comparison finds
nine times in ten, (t(1 - alpha/2, df) + t(0.9, df)) * sigma * sqrt(...): "detects changes of X %
or more".

sigma comes from the comparison's own rounds (their spread within each side, ``spread``) and from what this
machine has shown before (``NoiseRecord``: the pooled spread of earlier rounds of the same code,
``portabench noise`` and every two-commit check adding to it). A comparison gets no verdict (``DISTURBED``)
where other processes took ``CONTENDED`` of the CPU during a round, or where its rounds spread far beyond
the machine's record (``VARIANCE_DIFFERS``: an F-test); one with a single round per side and no record
cannot be judged (``UNJUDGED``).

**Commits: a series of medians, one per commit** (reports/changes.py finds its steps with ruptures). The
same ``t_test`` judges each step, on the log medians of the commits on its two sides, with no record to pool
and no floor on sigma; the penalty of the search scales with ``series_noise``, a spread robust to the steps
it is looking for.

Three things were once all called "noisy"; each has its own name:

- a row whose *samples spread*: their interquartile range is above 10 % of their median (reports/results.py;
  the report's ``tidy.csv`` keeps the column name ``noisy``, set for such a row and for a contended one);
- ``CONTENDED``: other processes took this share of the CPU during a round (``portabench run`` warns;
  ``compare`` and ``check`` give no verdict);
- ``VARIANCE_DIFFERS``: the F-test found a comparison's rounds more spread than the machine's record.

A pair with no verdict for either of the last two is ``DISTURBED``, which ``compare``'s and ``check``'s
tables and counts still write "noisy", the word their readers and scripts know; ``Verdict.cause`` says
which.
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

# The columns that name one benchmark row of the tidy table across commits and result sets: ``compare``
# pairs its two sides' rows by them, the report's change points follow a series of them across commits,
# ``metrics.latest`` keeps one row of each (a machine's ``NoiseRecord`` is keyed by the last two).
ROW_KEY = ["machine", "benchmark", "params"]

# --- thresholds of the verdicts over rounds ---
CHECK_ROUNDS = 3  # rounds a side of a two-commit check, the design the noise floors are quoted for
DEFAULT_ALPHA = 0.005  # per pair: a main job of about a hundred pairs raises a false alarm in one check of two
VARIANCE_ALPHA = 0.001  # the F-test that calls a comparison's rounds more spread than the machine's record
POWER = 0.9  # a noise floor is the change found nine times in ten
MIN_SIGMA = 1e-3  # 0.1 % between rounds: below a clock's resolution, a spread of zero is not a measurement
# Others' share of the CPU during a round's process from which its times are called contended: one busy
# neighbour on a 2-core machine is 0.5; a quiet one reads a few hundredths (the runner's own bookkeeping).
CONTENDED = 0.15

# --- thresholds of the change points across commits (reports/changes.py) ---
# A series needs this many commits before any of its steps is believed: with fewer, the t-test on
# either side has (almost) no degrees of freedom.
MIN_COMMITS = 4
# Steps smaller than this relative change are not listed, however significant: a very steady GPU
# series makes 1 % steps significant, and they are not worth a look.
MIN_STEP = 0.05
# The t-test's threshold on each step: Hunter's, and Apache Otava's default.
STEP_ALPHA = 0.001

NOISE_FILE = "portabench.noise"  # beside a machine's results, as portabench.system
# In an asv results file, written by ``portabench run``: benchmark -> combination (``combo_key``) -> the
# samples of each round, in order (asv pools the rounds' samples into one list).
ROUNDS_KEY = "portabench_rounds"
# Beside it: benchmark -> combination -> the share of the CPU other processes took during each round.
CONTENTION_KEY = "portabench_contention"

# A verdict's status.
REGRESSION, IMPROVEMENT, UNCHANGED, UNJUDGED = "regression", "improvement", "unchanged", "unjudged"
# No verdict: the run was disturbed (``Verdict.cause`` says how). compare's and check's tables and counts
# write it "noisy", the word their readers and scripts know.
DISTURBED = "noisy"
# How a run was disturbed: other processes took ``CONTENDED`` of the CPU or more during a round, or its
# rounds spread far beyond the machine's record (the F-test at ``VARIANCE_ALPHA``).
CONTENTION, VARIANCE_DIFFERS = "contended", "unequal spread"


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


# The two noise estimates, one for each kind of data. ``spread`` knows which values are of one code (the
# rounds of a side, the halves of an A/A): their sum of squares about each group's mean. A series of
# commits does not (its steps are what is sought), so ``series_noise`` estimates its spread from the
# differences of successive commits, which a few steps barely move.

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


def series_noise(log_times: np.ndarray) -> float:
    """A series' noise, a standard deviation of its log times from the median absolute difference of
    successive commits: steps between a few commits barely move it."""
    return float(np.median(np.abs(np.diff(log_times))) / (math.sqrt(2) * stats.norm.ppf(0.75)))


@dataclass(frozen=True)
class Noise:
    """A benchmark's spread between rounds on one machine: a sum of squares of log round medians and
    its degrees of freedom, pooled over every group of rounds of one code measured there."""

    ss: float
    df: int

    @property
    def sigma(self) -> float:
        return self.sd()

    def sd(self, min_sigma: float = MIN_SIGMA) -> float:
        """The standard deviation, at least ``min_sigma`` (NaN without a degree of freedom)."""
        return max(math.sqrt(self.ss / self.df), min_sigma) if self.df > 0 else math.nan

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
class TTest:
    change: float  # the second group's mean log time minus the first's
    se: float  # its standard error
    noise: Noise  # the spread it was judged against (both groups', and the prior's)
    p: float  # two-sided; NaN where both groups are one constant


def t_test(first: Sequence[float], second: Sequence[float], prior: Noise | None = None,
           min_sigma: float = MIN_SIGMA) -> TTest:
    """Student's two-sample t-test of the mean log of two groups of times, their variance pooled within
    both groups and with ``prior`` (earlier groups of the same code, taken to share it), the standard
    deviation at least ``min_sigma``.

    Rounds (``verdict``) pool the machine's record and floor sigma at ``MIN_SIGMA``, a clock's resolution.
    The steps of a series of commits (reports/changes.py) are judged on their own sides alone with no floor
    (``min_sigma=0``), as ``scipy.stats.ttest_ind`` judged them: a step must exceed ``MIN_STEP`` besides."""
    ya, yb = np.log(np.asarray(first, dtype=float)), np.log(np.asarray(second, dtype=float))
    now = Noise(*spread([first, second]))
    pooled = now if prior is None else prior.plus(now)
    se = pooled.sd(min_sigma) * math.sqrt(1 / len(ya) + 1 / len(yb))
    d = float(yb.mean() - ya.mean())
    with np.errstate(divide="ignore", invalid="ignore"):  # sigma 0: t is infinite, or NaN for 0 / 0
        p = float(2 * stats.t.sf(np.divide(abs(d), se), pooled.df))
    return TTest(d, se, pooled, p)


def f_test(now: Noise, record: Noise) -> float:
    """The p-value of the one-sided F-test that ``now`` spreads no more than ``record`` (both with a degree
    of freedom): small where a comparison's rounds spread beyond what the machine has shown."""
    return float(stats.f.sf((now.ss / now.df) / (record.sigma ** 2), now.df, record.df))


@dataclass(frozen=True)
class Verdict:
    status: str
    ratio: float  # contender's level over the baseline's (geometric mean of round medians)
    threshold: float  # relative change beyond which this comparison calls a change (NaN: it cannot judge)
    p: float
    evidence: str  # in words, for the table
    cause: str = ""  # DISTURBED's: CONTENTION or VARIANCE_DIFFERS


def verdict(base: Sequence[float], cont: Sequence[float], record: Noise | None = None,
            alpha: float = DEFAULT_ALPHA, factor: float = 1.0, contention: float = math.nan) -> Verdict:
    """The verdict on two sides' round medians (seconds), with the machine's ``record`` of this
    benchmark's noise where there is one; ``factor``: a smallest ratio worth calling a change besides;
    ``contention``: the largest share of the CPU other processes took during a round of either side."""
    ya, yb = np.log(np.asarray(base, dtype=float)), np.log(np.asarray(cont, dtype=float))
    na, nb = len(ya), len(yb)
    ratio = float(math.exp(yb.mean() - ya.mean()))
    if contention >= CONTENDED:
        return Verdict(DISTURBED, ratio, math.nan, math.nan,
                       f"other processes took {contention:.0%} of the CPU during a round: contended run, no verdict",
                       CONTENTION)
    now = Noise(*spread([base, cont]))
    rounds = f"{na}+{nb} rounds"
    prior = record if record is not None and record.df > 0 else None
    if prior is not None:
        if now.df >= 2:
            p_f = f_test(now, prior)
            if p_f < VARIANCE_ALPHA:
                return Verdict(DISTURBED, ratio, math.nan, math.nan,
                               f"rounds spread {math.sqrt(now.ss / now.df):.2%}, this machine's record "
                               f"{prior.sigma:.2%} (F-test p={p_f:.1g}): unequal spread, disturbed run, no verdict",
                               VARIANCE_DIFFERS)
        where = f"(record df {prior.df} + {now.df})"
    elif now.df >= 1:
        where = "(no record on this machine)"
    else:
        return Verdict(UNJUDGED, ratio, math.nan, math.nan,
                       f"{rounds} and no noise record for this machine: run `portabench noise` (or more rounds)")
    test = t_test(base, cont, prior)
    threshold = math.expm1(critical(test.noise.df, alpha) * test.se)
    moved = abs(test.change) > math.log1p(threshold) and not (1 / factor < ratio < factor)
    status = (REGRESSION if test.change > 0 else IMPROVEMENT) if moved else UNCHANGED
    return Verdict(status, ratio, threshold, test.p, f"p={test.p:.2g}, threshold {threshold:.1%}; {rounds}, "
                   f"spread {test.noise.sigma:.2%} {where}")


@dataclass
class NoiseRecord:
    """A machine's noise per benchmark (``results/<machine>/portabench.noise``): keys are
    ``"<benchmark> <params>"``, a row of that machine (``ROW_KEY``) as the tidy table names it."""

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
