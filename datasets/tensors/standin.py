"""Seeded synthetic stand-ins for the FROSTT tensors, with the real tensors' skew.

``generate(name, scale, seed)`` returns a ``SparseTensor`` with the order of the real
tensor, mode sizes in its proportions, ``round(scale * nnz)`` nonzeros (``scale = 1``:
the published dims and nnz exactly), no duplicate coordinates, every index of every mode
used (so dims inferred from the coordinates equal the target), positive count values, and
the same output for the same (name, scale, seed). ``skew_summary(tensor)`` measures what
the model controls.

**What is published and what is assumed.** ``TensorProfile.published`` names the fields
measured on the real tensors; everything else is an assumption, chosen to be plausible:

- dims and nnz: FROSTT (``reference/NOTES.md``), all tensors.
- nonzeros per mode-N fiber (a fiber fixes every index but the last): CV 26 (lbnl), 1.8
  (enron), "~0.5-1" for chicago, nell-2 and uber (we take the band's middle, 0.75), and
  nips has exactly one nonzero per fiber (its year is a function of its paper). The *mean*
  fiber length is not published for any tensor but nips (1): it is assumed per tensor,
  and so are the fiber CVs of vast and delicious.
- slice skew of lbnl (paper [002], TABLE II: nonzeros per slice, mean/min/max/std per mode):
  heavy-hitter share ``h = max / nnz`` and ``CV = std / mean`` per mode. Mode 3's mean is
  printed as 11041.59, a typo for 1041.59 = nnz / 1631 (the other means are nnz / dim, and
  11041.59 x 1631 would exceed nnz ten times). Mode 1: h 0.234, CV 11.2; mode 2: h 0.452,
  CV 30.3; mode 3: h 0.183, CV 10.7; mode 4: h 0.398, CV 29.5; mode 5: flat, no heavy
  hitter (max 13 of 1.7M), CV 0.44.
- slice skew of every other tensor: assumed mild, no heavy hitter, CV 1 for entity-like
  modes (senders, words, users, ...) and 0.5 for calendar-like ones (day, hour, date,
  year), 0.8 for vast's 2-valued event type.

**The model.** Each count vector below (slice sizes of a mode, fiber lengths) is
``base + extras``: every entry gets ``base = 1`` (so every index is used, every fiber is
nonempty) and the remaining total is shared out proportionally to *stratified* lognormal
weights ``exp(sigma z_i)`` at the normal quantiles ``z_i = Phi^-1((i + 1/2) / n)``
(no sampling noise: the shape is fixed, only which index gets which count is random),
capped ("water-filling": the excess above a cap goes to the uncapped entries) and rounded
cumulatively so the integer total is exact. ``sigma`` is found by bisection so that the
vector's CV hits the profile's target **at scale 1** (the published size), and is then kept
at every scale: a smaller stand-in is a smaller sample of the same distribution, so
size-dependent statistics (the longest fiber, the CV of a heavy tail, the CV of slice sizes
over fewer slices) shrink the way they would for a subsample of the real tensor. A mode with
heavy-hitter share ``h`` gets one index (at a random position) holding ``round(h nnz)``
nonzeros; the others are lognormal, capped below it. A published largest slice without a
heavy hitter caps that mode's counts (lbnl mode 5: at most 13, i.e. 6.6 x the mean).

1. Scaling: ``nnz(s) = round(s nnz)``; ``dim(s) = round(dim s^(1/N))`` (proportions and
   density kept), at least ``min(dim, 2)``, at most what keeps ``min(real mean per slice,
   2)`` nonzeros per slice (lbnl's mode 5 has 1.96 per slice; hypersparse modes such as
   delicious' would otherwise need more indices than nonzeros, so at small scales
   delicious' three big modes all end at nnz / 2); fibers ``F = round(nnz(s) / mean fiber
   length)``, raised where needed to cover every non-last index and to fit ``nnz`` into
   fibers of at most ``dim_N`` nonzeros.
2. Slice targets ``T_m`` (nonzeros per index) for every mode, and fiber lengths ``L_f``
   (``sum = nnz``, ``1 <= L_f <= dim_N`` and no longer than the largest slice of any mode).
3. Fiber tuples (indices of modes 1..N-1), in three steps (Numba):

   a. The long fibers (those of length >= the smallest l >= 2 that leaves at most 1/8 of the
      fibers) are placed jointly, longest first: in each mode a slice is drawn with
      probability ~ ``deficit^2`` (its nonzeros still missing, Fenwick trees) among slices
      the fiber fits, and a tuple already taken is redrawn in one mode (a hash set). The
      square sends long fibers to heavy slices (heavy flows at heavy hosts and ports), so
      heavy slices need fewer short fibers: with lbnl's four heavy hitters (23, 45, 18 and
      40 % of nnz) independent draws would put thousands of fibers on the same tuple.
   b. The short fibers are dealt mode by mode onto the remaining deficits: slices (random
      order, each as long as its deficit) and fibers (random order, each as long as its
      length) laid end to end, a fiber going to the slice under its midpoint. Slice sizes
      land on their targets within a fiber length; modes are independent.
   c. Repeated tuples are made distinct by swaps: a repeated fiber trades its index in the
      mode where it sits in the most popular slice with a fiber of about its length (a
      neighbour in length order; the least popular of a few), so every slice keeps its
      nonzeros (exactly, for equal lengths) and heavy hitters of different modes learn to
      avoid each other, as distinct tuples require. Where 64 tries find no swap (a saturated
      corner: chicago's busiest hour x area pairs hold a fiber on every day) the fiber takes
      a free random index: 2.2 k of lbnl's 849 k fibers, 40 k of chicago's 2.67 M at scale 1.
4. Last-mode indices: each fiber draws ``L_f`` *distinct* indices by successive sampling
   without replacement with probability ~ each index's remaining target count (a Fenwick
   tree with the fiber's own picks zeroed; long fibers first, length-1 fibers last), so
   last-mode slice sizes are the targets exactly: lbnl's mode 5 is flat (CV 0.44, not
   Poisson's 0.71). nips: year = g(paper), a random map giving every year a paper.
5. Coverage repair: an index left unused (rare) is swapped in for one occurrence of an index
   used at least twice (shortest fibers first for the fiber modes). An index used nowhere
   else cannot create a duplicate coordinate.
6. Values: counts ``1 + Geometric``, mostly 1s as in FROSTT's count tensors (assumed:
   P(1) = 0.65). Nonzeros come grouped by fiber, fibers in no particular order
   (``SparseTensor.sorted()`` sorts them).

**Fidelity at scale 1** (seed 1): lbnl heavy shares 0.233 / 0.449 / 0.182 / 0.394 (TABLE II:
0.234 / 0.452 / 0.183 / 0.398), slice CVs 11.2 / 30.0 / 10.7 / 29.1 / 0.44 (11.2 / 30.3 /
10.7 / 29.5 / 0.44), mode 5 max 13, fiber CV 26.0; nips one nonzero per fiber. At scale 0.1
lbnl's fiber CV is 17 and its slice CVs 9.3 / 24 / 9.1 / 24 (fewer slices, same shape).

Cost: about O(nnz log dim), Numba; ten million nonzeros take a few seconds.
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numba
import numpy as np
from scipy.special import ndtri

from .. import memory
from ..errors import DatasetError
from .coo import SparseTensor

VALUE_P = 0.65  # values: Geometric(p) on 1, 2, ...: P(1) = 0.65 (assumed)
_SIGMA_MAX = 10.0  # bisection range for lognormal sigmas
_GRID_TOP = 4096  # calibration grid: this many top quantiles exactly ...
_GRID_BULK = 16384  # ... and the rest as this many equal blocks
_POWER = 2  # fibers pick slices with probability ~ (nonzeros still missing) ** _POWER
_SWAP_WINDOW = 16  # dedupe swaps a fiber with one within this many places in length order


@dataclass(frozen=True)
class TensorProfile:
    """What a stand-in reproduces of one FROSTT tensor (``published`` names the measured fields).

    ``heavy_share[m]``: share of nonzeros in mode m's largest slice (0: no heavy hitter);
    ``slice_cv[m]``: CV of nonzeros per slice of mode m (for a functional last mode: CV of
    first-mode indices per last-mode index, e.g. papers per year); ``slice_max[m]``: the
    published largest slice where there is no heavy hitter (0: none); ``mean_fiber_length``
    and ``fiber_cv``: nonzeros per mode-N fiber; ``functional_of``: the mode whose index
    determines the last mode's (nips: year = g(paper)), or None.
    """

    name: str
    dims: tuple[int, ...]
    nnz: int
    mean_fiber_length: float
    fiber_cv: float
    heavy_share: tuple[float, ...]
    slice_cv: tuple[float, ...]
    published: frozenset[str]
    note: str = ""
    functional_of: int | None = None
    slice_max: tuple[int, ...] | None = None

    @property
    def order(self) -> int:
        return len(self.dims)

    def __post_init__(self) -> None:
        n = len(self.dims)
        bad = []
        if n < 2 or min(self.dims) < 1 or self.nnz < 1:
            bad.append("needs order >= 2, positive dims and nnz")
        if len(self.heavy_share) != n or len(self.slice_cv) != n or (
                self.slice_max is not None and len(self.slice_max) != n):
            bad.append(f"heavy_share, slice_cv and slice_max need {n} entries")
        elif not all(0 <= h < 1 for h in self.heavy_share) or min(self.slice_cv) < 0:
            bad.append("heavy shares must be in [0, 1) and CVs >= 0")
        if self.mean_fiber_length < 1 or self.fiber_cv < 0:
            bad.append("mean_fiber_length must be >= 1 and fiber_cv >= 0")
        if self.functional_of is not None and (self.mean_fiber_length != 1 or not 0 <= self.functional_of < n - 1):
            bad.append("a functional last mode needs one nonzero per fiber and a source mode before it")
        if bad:
            raise DatasetError(f"profile {self.name}: " + "; ".join(bad))


def _lbnl_skew() -> tuple[tuple[float, ...], tuple[float, ...], tuple[int, ...]]:
    """Heavy shares and slice CVs of lbnl from TABLE II of paper [002] (mode 3's mean corrected)."""
    nnz = 1_698_825
    table = [  # mean, max, std per mode; min is 1 in every mode
        (1058.46, 397413, 11906.86),
        (404.67, 768321, 12242.96),
        (1041.59, 310733, 11183.01),  # printed 11041.59: a typo for nnz / 1631
        (403.62, 676548, 11906.86),
        (1.96, 13, 0.86),
    ]
    heavy = tuple(mx / nnz if mx > 100 * mean else 0.0 for mean, mx, _ in table)
    return heavy, tuple(std / mean for mean, _, std in table), tuple(mx for _, mx, _ in table)


_LBNL_H, _LBNL_CV, _LBNL_MAX = _lbnl_skew()
_BAND = 0.75  # middle of the published "~0.5-1" fiber CV band (chicago, nell-2, uber)

PROFILES: dict[str, TensorProfile] = {p.name: p for p in [
    TensorProfile(
        "chicago-crime-comm", (6186, 24, 77, 32), 5_330_673, 2.0, _BAND,
        (0, 0, 0, 0), (0.5, 0.5, 1.0, 1.0), frozenset({"dims", "nnz", "fiber_cv"}),
        "day x hour x community area x crime type; fiber CV: middle of the published band"),
    TensorProfile(
        "enron", (6066, 5699, 244268, 1176), 54_202_099, 2.0, 1.8,
        (0, 0, 0, 0), (1.0, 1.0, 1.0, 0.5), frozenset({"dims", "nnz", "fiber_cv"}),
        "sender x receiver x word x date"),
    TensorProfile(
        "lbnl-network", (1605, 4198, 1631, 4209, 868131), 1_698_825, 2.0, 26.0,
        _LBNL_H, _LBNL_CV, frozenset({"dims", "nnz", "fiber_cv", "heavy_share", "slice_cv"}),
        "sender IP x sender port x destination IP x destination port x time; slice skew: paper [002] TABLE II",
        slice_max=_LBNL_MAX),
    TensorProfile(
        "nell-2", (12092, 9184, 28818), 76_879_419, 8.0, _BAND,
        (0, 0, 0), (1.0, 1.0, 1.0), frozenset({"dims", "nnz", "fiber_cv"}),
        "entity x relation x entity; fiber CV: middle of the published band"),
    TensorProfile(
        "nips", (2482, 2862, 14036, 17), 3_101_609, 1.0, 0.0,
        (0, 0, 0, 0), (0.5, 1.0, 1.0, 0.3), frozenset({"dims", "nnz", "mean_fiber_length", "fiber_cv"}),
        "paper x author x word x year; year is a function of paper; slice_cv[3]: papers per year",
        functional_of=0),
    TensorProfile(
        "uber", (183, 24, 1140, 1717), 3_309_490, 4.0, _BAND,
        (0, 0, 0, 0), (0.5, 0.5, 1.0, 1.0), frozenset({"dims", "nnz", "fiber_cv"}),
        "day x hour x latitude x longitude; fiber CV: middle of the published band"),
    TensorProfile(
        "vast-2015-mc1-5d", (165427, 11374, 2, 100, 89), 26_021_945, 1.05, 0.25,
        (0, 0, 0, 0, 0), (1.0, 0.5, 0.8, 1.0, 1.0), frozenset({"dims", "nnz"}),
        "time x visitor x event type x park x park y: a visitor is at one place at a time"),
    TensorProfile(
        "delicious-4d", (532924, 17262471, 2480308, 1443), 140_126_181, 1.1, 0.5,
        (0, 0, 0, 0), (1.0, 1.0, 1.0, 0.5), frozenset({"dims", "nnz"}),
        "user x item x tag x date: a user tags an item with a tag about once"),
]}


# --------------------------------------------------------------------------- count vectors


def _normal_grid(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Normal quantiles at ranks (i + 1/2) / n, ascending, with multiplicities.

    Up to ``_GRID_TOP + _GRID_BULK`` points exactly; beyond, the top ``_GRID_TOP`` exactly
    (they dominate a heavy tail) and the rest as ``_GRID_BULK`` equal blocks.
    """
    if n <= _GRID_TOP + _GRID_BULK:
        return ndtri((np.arange(n) + 0.5) / n), np.ones(n)
    omega = (n - _GRID_TOP) / _GRID_BULK
    bulk = ndtri((np.arange(_GRID_BULK) + 0.5) * omega / n)
    top = ndtri((np.arange(n - _GRID_TOP, n) + 0.5) / n)
    return np.concatenate([bulk, top]), np.concatenate([np.full(_GRID_BULK, omega), np.ones(_GRID_TOP)])


def _waterfill(w: np.ndarray, omega: np.ndarray, total: float, cap: float) -> np.ndarray:
    """Amounts ``min(t w, cap)`` with ``sum(omega * amounts) = total`` (``w`` ascending, > 0)."""
    if total <= 0:
        return np.zeros_like(w)
    weight = float(np.dot(omega, w))
    t = total / weight
    if not math.isfinite(cap) or t * w[-1] <= cap:
        return t * w
    if float(omega.sum()) * cap < total * (1 - 1e-12):
        raise DatasetError("internal: counts cannot fit under their cap")
    wd, od = w[::-1], omega[::-1]  # descending: the top k entries get capped
    capped_mass = np.concatenate([[0.0], np.cumsum(od)])[:-1] * cap
    rest_weight = weight - np.concatenate([[0.0], np.cumsum(od * wd)])[:-1]
    with np.errstate(divide="ignore", invalid="ignore"):
        tk = (total - capped_mass) / rest_weight
    ok = np.flatnonzero((rest_weight > 0) & (tk * wd <= cap))
    k = int(ok[0]) if ok.size else len(w)
    out = np.full_like(w, cap)
    if k < len(w):
        out[: len(w) - k] = tk[k] * w[: len(w) - k]
    return out


def _round_cumulative(amounts: np.ndarray, cap: float) -> np.ndarray:
    """Integers summing to round(sum(amounts)), each the floor or ceiling of its amount; caps kept."""
    out = np.empty(len(amounts), dtype=np.int64)
    capped = amounts >= cap
    out[capped] = int(cap) if capped.any() else 0
    c = np.floor(np.cumsum(amounts[~capped]) + 0.5).astype(np.int64)
    out[~capped] = np.diff(c, prepend=0)
    return out


def _counts(n: int, total: int, sigma: float, cap: int) -> np.ndarray:
    """``n`` integers >= 1, at most ``cap``, summing to ``total``: 1 + lognormal(sigma) shares (ascending)."""
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    if total < n or total > n * cap:
        raise DatasetError(f"internal: {n} counts in [1, {cap}] cannot sum to {total}")
    z = ndtri((np.arange(n) + 0.5) / n)
    w = np.exp(sigma * (z - z[-1]))
    extras = _round_cumulative(_waterfill(w, np.ones(n), float(total - n), float(cap - 1)), float(cap - 1))
    return 1 + extras


def _cv_model(z: np.ndarray, omega: np.ndarray, sigma: float, extras: float, cap: float,
              heavy: int) -> float:
    """CV of ``[heavy] + (1 + rounded lognormal extras)`` on a (weighted) grid, rounding included."""
    a = _waterfill(np.exp(sigma * (z - z[-1])), omega, extras, cap)
    f = np.floor(a)
    r = a - f
    n = float(omega.sum())
    s1 = n + extras + heavy
    s2 = float(np.dot(omega, (1 + f) ** 2 * (1 - r) + (2 + f) ** 2 * r)) + heavy**2
    d = n + (1 if heavy else 0)
    mean = s1 / d
    return math.sqrt(max(s2 / d - mean**2, 0.0)) / mean


def _calibrate(n: int, total: int, cap: int, target_cv: float, heavy: int = 0) -> float:
    """The sigma whose count vector (``heavy`` plus ``n`` counts summing to ``total``) has CV ``target_cv``."""
    if n == 0 or total <= n:
        return 0.0
    z, omega = _normal_grid(n)
    extras, ecap = float(total - n), float(cap - 1)
    lo, hi = 0.0, _SIGMA_MAX
    if _cv_model(z, omega, lo, extras, ecap, heavy) >= target_cv:
        return lo
    if _cv_model(z, omega, hi, extras, ecap, heavy) <= target_cv:
        return hi  # unreachable target: the most skewed shape
    for _ in range(32):
        mid = 0.5 * (lo + hi)
        if _cv_model(z, omega, mid, extras, ecap, heavy) < target_cv:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def _slice_layout(profile: TensorProfile, m: int, dim: int, nnz: int, cap: int) -> tuple[int, int]:
    """(heavy count or 0, cap of the other counts) of mode ``m``'s slice targets at size
    (``dim``, ``nnz``); every count is at most ``cap``. A published largest slice without a
    heavy hitter (lbnl mode 5: 13) caps the counts at the same multiple of the mean."""
    heavy = 0
    if profile.heavy_share[m] > 0 and dim > 1:
        heavy = min(max(int(round(profile.heavy_share[m] * nnz)), 1), cap, nnz - (dim - 1))
        return heavy, min(cap, heavy)
    if profile.slice_max is not None and profile.slice_max[m] > 0:
        ratio = profile.slice_max[m] * profile.dims[m] / profile.nnz  # max / mean at scale 1
        cap = min(cap, max(math.ceil(ratio * nnz / dim - 1e-9), -(-nnz // dim)))
    return heavy, cap


@dataclass(frozen=True)
class _Sigmas:
    fiber: float
    modes: tuple[float, ...]


@lru_cache(maxsize=None)
def _sigmas(profile: TensorProfile) -> _Sigmas:
    """Lognormal sigmas calibrated at scale 1 (the published size), reused at every scale."""
    dims, nnz = profile.dims, profile.nnz
    fibers = min(max(int(round(nnz / profile.mean_fiber_length)), 1), nnz)
    modes = []
    for m, d in enumerate(dims):
        if m == len(dims) - 1 and profile.functional_of is not None:
            # papers per year: dims[src] papers over d years
            modes.append(_calibrate(d, dims[profile.functional_of], dims[profile.functional_of],
                                    profile.slice_cv[m]))
            continue
        cap = fibers if m == len(dims) - 1 else nnz
        heavy, rest_cap = _slice_layout(profile, m, d, nnz, cap)
        n = d - (1 if heavy else 0)
        modes.append(_calibrate(n, nnz - heavy, rest_cap, profile.slice_cv[m], heavy))
    fiber = 0.0
    if profile.functional_of is None:
        fiber = _calibrate(fibers, nnz, dims[-1], profile.fiber_cv)
    return _Sigmas(fiber, tuple(modes))


# --------------------------------------------------------------------------- scaling


@dataclass(frozen=True)
class _Plan:
    dims: tuple[int, ...]
    nnz: int
    fibers: int


def _resolve(profile_or_name: TensorProfile | str) -> TensorProfile:
    if isinstance(profile_or_name, TensorProfile):
        return profile_or_name
    try:
        return PROFILES[profile_or_name]
    except (KeyError, TypeError):
        raise DatasetError(
            f"no stand-in profile {profile_or_name!r}; known: {', '.join(sorted(PROFILES))}") from None


def _plan(profile: TensorProfile, scale: float) -> _Plan:
    if isinstance(scale, bool) or not isinstance(scale, (int, float, np.integer, np.floating)) \
            or not math.isfinite(scale) or scale <= 0:
        raise DatasetError(f"{profile.name}: scale must be a positive number, got {scale!r}")
    n_modes = profile.order
    nnz = int(round(scale * profile.nnz))
    if nnz < 1:
        raise DatasetError(f"{profile.name}@{scale:g}: no nonzeros at this scale")
    dims = []
    for d in profile.dims:
        target = max(int(round(d * scale ** (1.0 / n_modes))), min(d, 2))
        # keep min(real mean per slice, 2) nonzeros per slice
        limit = nnz * d // profile.nnz if profile.nnz < 2 * d else nnz // 2
        dims.append(max(min(target, limit), 1))
    where = f"{profile.name}@{scale:g} ({nnz} nonzeros, dims {tuple(dims)})"
    if min(dims) < min(min(profile.dims), 2):
        raise DatasetError(f"{where}: too few nonzeros to keep {min(min(profile.dims), 2)} indices per mode")
    last = dims[-1]
    fibers = min(max(int(round(nnz / profile.mean_fiber_length)), 1), nnz)
    fibers = max(fibers, *dims[:-1], -(-nnz // last)) if n_modes > 1 else 1
    if profile.functional_of is not None:
        fibers = nnz
    if fibers > nnz:
        raise DatasetError(f"{where}: {fibers} fibers are needed to cover the modes but only {nnz} nonzeros exist")
    cells = math.prod(dims[:-1])
    if n_modes > 1 and cells < 2 * fibers:
        raise DatasetError(f"{where}: {fibers} distinct fibers in only {cells} cells; use a larger scale")
    if profile.functional_of is not None and dims[-1] > dims[profile.functional_of]:
        raise DatasetError(f"{where}: mode {n_modes} is a function of mode {profile.functional_of + 1}"
                           " and cannot have more indices")
    return _Plan(tuple(dims), nnz, fibers)


def scaled_shape(profile_or_name: TensorProfile | str, scale: float) -> tuple[tuple[int, ...], int]:
    """(dims, nnz) of the stand-in at ``scale`` (``scale = 1``: the published ones)."""
    plan = _plan(_resolve(profile_or_name), scale)
    return plan.dims, plan.nnz


# --------------------------------------------------------------------------- Numba kernels


@numba.njit(cache=True)
def _fen_build(tree, off, w):
    """Fenwick tree of ``w`` in ``tree[off + 1 .. off + len(w)]``."""
    d = w.size
    for i in range(1, d + 1):
        tree[off + i] = w[i - 1]
    for i in range(1, d + 1):
        j = i + (i & -i)
        if j <= d:
            tree[off + j] += tree[off + i]


@numba.njit(cache=True)
def _fen_add(tree, off, d, i, delta):
    i += 1
    while i <= d:
        tree[off + i] += delta
        i += i & -i


@numba.njit(cache=True)
def _fen_find(tree, off, d, u):
    """The 0-based index whose cumulative weight range holds ``u`` (0 <= u < total)."""
    pos = 0
    step = 1
    while step * 2 <= d:
        step *= 2
    while step > 0:
        nxt = pos + step
        if nxt <= d and tree[off + nxt] <= u:
            pos = nxt
            u -= tree[off + nxt]
        step //= 2
    return pos


@numba.njit(cache=True)
def _tuple_hash(cand):
    h = np.uint64(0x9E3779B97F4A7C15)
    for v in cand:
        h = (h ^ np.uint64(v)) + np.uint64(0x9E3779B97F4A7C15)
        h = (h ^ (h >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        h = (h ^ (h >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        h = h ^ (h >> np.uint64(31))
    return np.int64(h >> np.uint64(1))


@numba.njit(cache=True)
def _slot(keys, key):
    """The slot of ``key`` (>= 0) in an open-addressing table, or the empty slot where it would go."""
    mask = keys.size - 1
    i = key & mask
    while keys[i] != -1 and keys[i] != key:
        i = (i + 1) & mask
    return i


@numba.njit(cache=True)
def _weight(deficit, power):
    return max(deficit, 0) ** power


@numba.njit(cache=True)
def _draw(tree, off, d, total, deficit, doff, need):
    """A slice drawn by the tree's weights, preferring one whose deficit still fits ``need``."""
    if total <= 0:
        return np.random.randint(0, d)
    best, best_def = 0, -(1 << 62)
    for _ in range(8):
        j = _fen_find(tree, off, d, np.random.randint(0, total))
        if deficit[doff + j] >= need:
            return j
        if deficit[doff + j] > best_def:
            best, best_def = j, deficit[doff + j]
    return best


@numba.njit(cache=True)
def _place(order, lengths, deficit, offsets, power, seed):
    """Distinct fiber tuples for the fibers in ``order`` (longest first): in each mode a slice
    drawn with probability ~ ``deficit ** power`` (nonzeros still missing) among slices the
    fiber fits, the deficits then reduced; a tuple already taken is redrawn in one random
    mode. Rows of fibers not in ``order`` are left unset."""
    np.random.seed(seed)
    nm = offsets.size - 1
    w = np.empty(offsets[nm], np.int64)
    for i in range(w.size):
        w[i] = _weight(deficit[i], power)
    tree = np.zeros(offsets[nm] + nm, np.int64)
    totals = np.zeros(nm, np.int64)
    for m in range(nm):
        _fen_build(tree, offsets[m] + m, w[offsets[m]:offsets[m + 1]])
        totals[m] = w[offsets[m]:offsets[m + 1]].sum()
    size = 16
    while size < 2 * order.size:
        size *= 2
    table = np.full(size, -1, np.int64)
    out = np.empty((lengths.size, nm), np.int64)
    cand = np.empty(nm, np.int64)
    for f in order:
        need = lengths[f]
        for m in range(nm):
            cand[m] = _draw(tree, offsets[m] + m, offsets[m + 1] - offsets[m], totals[m], deficit,
                            offsets[m], need)
        attempt = 0
        while True:
            s = _slot(table, _tuple_hash(cand))
            if table[s] == -1:
                table[s] = _tuple_hash(cand)
                break
            attempt += 1
            m = np.random.randint(0, nm)
            d = offsets[m + 1] - offsets[m]
            if attempt < 64:
                cand[m] = _draw(tree, offsets[m] + m, d, totals[m], deficit, offsets[m], need)
            elif attempt < 64 * (nm + 1):  # a crowded corner: any slice
                cand[m] = np.random.randint(0, d)
            else:  # every one-mode move is taken: at least half of all tuples are free
                for mm in range(nm):
                    cand[mm] = np.random.randint(0, offsets[mm + 1] - offsets[mm])
        for m in range(nm):
            i = offsets[m] + cand[m]
            out[f, m] = cand[m]
            deficit[i] -= need
            delta = _weight(deficit[i], power) - w[i]
            if delta != 0:
                w[i] += delta
                _fen_add(tree, offsets[m] + m, offsets[m + 1] - offsets[m], cand[m], delta)
                totals[m] += delta
    return out


@numba.njit(cache=True)
def _count_add(tkeys, tcount, key, delta):
    """Add ``delta`` to ``key``'s count in an open-addressing table; 1 if a new slot was used."""
    s = _slot(tkeys, key)
    tcount[s] += delta
    if tkeys[s] == -1:
        tkeys[s] = key
        return 1
    return 0


@numba.njit(cache=True)
def _fiber_table(idx):
    """The fibers' tuples in an open-addressing table (tuple hash -> number of fibers with it, at least twice
    the fibers' slots): (its keys, its counts, each fiber's hash, the slots used)."""
    n = idx.shape[0]
    size = 16
    while size < 2 * n:
        size *= 2
    tkeys = np.full(size, -1, np.int64)
    tcount = np.zeros(size, np.int32)
    keys = np.empty(n, np.int64)
    used = 0
    for f in range(n):
        keys[f] = _tuple_hash(idx[f])
        used += _count_add(tkeys, tcount, keys[f], 1)
    return tkeys, tcount, keys, used


@numba.njit(cache=True)
def _index_popularity(idx, dims):
    """The fibers of each mode's indices, at ``offsets[m] + index`` (swaps keep them): (offsets, counts)."""
    n, nm = idx.shape
    offsets = np.zeros(nm + 1, np.int64)
    for m in range(nm):
        offsets[m + 1] = offsets[m] + dims[m]
    pop = np.zeros(offsets[nm], np.int64)
    for f in range(n):
        for m in range(nm):
            pop[offsets[m] + idx[f, m]] += 1
    return offsets, pop


@numba.njit(cache=True)
def _rebuild(tkeys, tcount):
    """The table rebuilt in place without the keys no fiber has any more; the slots used."""
    old_k, old_c = tkeys.copy(), tcount.copy()
    tkeys.fill(-1)
    tcount.fill(0)
    used = 0
    for j in range(tkeys.size):
        if old_c[j] > 0:
            used += _count_add(tkeys, tcount, old_k[j], old_c[j])
    return used


@numba.njit(cache=True)
def _swap_partner(idx, f, r, by_length, pop, offsets, window, cand_f, cand_g):
    """A swap for fiber ``f`` (at ``r`` in ``by_length``): leave the mode where f sits in the most popular
    index (usually), for the least popular of a few fibers of about f's length (heavy meets light). Sets the
    two tuples after the swap in ``cand_f`` (f's, as it is on entry) and ``cand_g``; returns the partner, or
    -1 where none of the fibers drawn can swap."""
    nm = idx.shape[1]
    m = np.random.randint(0, nm)
    if np.random.random() < 0.75:
        for mm in range(nm):
            if pop[offsets[mm] + idx[f, mm]] > pop[offsets[m] + idx[f, m]]:
                m = mm
    lo, hi = max(r - window, 0), min(r + window, by_length.size - 1)
    best = 1 << 62
    g = -1
    for _ in range(4):
        h = by_length[np.random.randint(lo, hi + 1)]
        score = 0
        for mm in range(nm):
            score += pop[offsets[mm] + idx[h, mm]]
        if h != f and idx[h, m] != idx[f, m] and score < best:
            g, best = h, score
    if g < 0:
        return -1
    for mm in range(nm):
        cand_g[mm] = idx[g, mm]
    cand_f[m], cand_g[m] = idx[g, m], idx[f, m]
    return g


@numba.njit(cache=True)
def _move(idx, keys, tkeys, tcount, f, cand, key):
    """Fiber ``f`` to the tuple ``cand`` (hash ``key``), in ``idx`` and the table; 1 if a new slot was used."""
    _count_add(tkeys, tcount, keys[f], -1)
    used = _count_add(tkeys, tcount, key, 1)
    for mm in range(idx.shape[1]):
        idx[f, mm] = cand[mm]
    keys[f] = key
    return used


@numba.njit(cache=True)
def _dedupe(idx, dims, by_length, seed, window, max_tries):
    """Make fiber tuples distinct by moving fibers of ``by_length`` (ascending length): a
    repeated fiber swaps one mode's index with a fiber near it in ``by_length`` (``_swap_partner``),
    so slices keep their nonzeros when the lengths are equal (the usual case). Returns the number of
    fibers given a random free index instead (a last resort, which shifts slice sizes)."""
    np.random.seed(seed)
    nm = idx.shape[1]
    tkeys, tcount, keys, used = _fiber_table(idx)
    offsets, pop = _index_popularity(idx, dims)
    cand_f = np.empty(nm, np.int64)
    cand_g = np.empty(nm, np.int64)
    forced = 0
    for r in range(by_length.size):
        f = by_length[r]
        if tcount[_slot(tkeys, keys[f])] < 2:
            continue
        if used > tkeys.size * 3 // 4:  # rebuild without the keys no fiber has any more
            used = _rebuild(tkeys, tcount)
        moved = False
        for attempt in range(max_tries + 64 * nm + 1000000):
            for mm in range(nm):
                cand_f[mm] = idx[f, mm]
            g, kg = -1, 0
            if attempt < max_tries:
                g = _swap_partner(idx, f, r, by_length, pop, offsets, window, cand_f, cand_g)
                if g < 0:
                    continue
                kg = _tuple_hash(cand_g)
                if tcount[_slot(tkeys, kg)] > 0:
                    continue
            elif attempt < max_tries + 64 * nm:  # a crowded corner: a free index, one mode
                m = np.random.randint(0, nm)
                cand_f[m] = np.random.randint(0, dims[m])
            else:  # every one-mode move is taken: at least half of all tuples are free
                for mm in range(nm):
                    cand_f[mm] = np.random.randint(0, dims[mm])
            kf = _tuple_hash(cand_f)
            if tcount[_slot(tkeys, kf)] > 0 or (g >= 0 and kf == kg):
                continue
            used += _move(idx, keys, tkeys, tcount, f, cand_f, kf)
            if g >= 0:
                used += _move(idx, keys, tkeys, tcount, g, cand_g, kg)
            else:
                forced += 1
            moved = True
            break
        if not moved:
            raise RuntimeError("dedupe found no free fiber tuple")
    return forced


@numba.njit(cache=True)
def _fill_last(first, lengths, counts, seed):
    """Distinct last-mode indices per fiber, drawn without replacement with probability ~ each
    index's remaining count, so every index ends at its count. Fibers ``first`` (the long
    ones, longest first) go first, then the others in storage order, length-1 fibers last."""
    np.random.seed(seed)
    d = counts.size
    n_fib = lengths.size
    starts = np.zeros(n_fib, np.int64)
    for f in range(1, n_fib):
        starts[f] = starts[f - 1] + lengths[f - 1]
    remaining = counts.copy()
    tree = np.zeros(d + 1, np.int64)
    _fen_build(tree, 0, remaining)
    total = remaining.sum()
    stamp = np.full(d, -1, np.int64)
    done = np.zeros(n_fib, np.bool_)
    out = np.empty(lengths.sum(), np.int64)
    for step in range(first.size + 2 * n_fib):
        if step < first.size:
            f = first[step]
        else:
            f = (step - first.size) % n_fib
            if done[f] or (step - first.size < n_fib) == (lengths[f] == 1):
                continue
        done[f] = True
        s, n = starts[f], lengths[f]
        for k in range(n):
            if total > 0:
                j = _fen_find(tree, 0, d, np.random.randint(0, total))
            else:  # nothing left that this fiber lacks: any index it lacks
                j = np.random.randint(0, d)
                while stamp[j] == f:
                    j = np.random.randint(0, d)
            out[s + k] = j
            stamp[j] = f
            if remaining[j] > 0:
                if k == n - 1:  # the fiber's last pick: just use one unit
                    _fen_add(tree, 0, d, j, -1)
                    total -= 1
                else:  # out of the running for the rest of this fiber
                    _fen_add(tree, 0, d, j, -remaining[j])
                    total -= remaining[j]
        for k in range(n - 1):  # put back what the earlier picks left
            j = out[s + k]
            if remaining[j] > 0:
                remaining[j] -= 1
                if remaining[j] > 0:
                    _fen_add(tree, 0, d, j, remaining[j])
                    total += remaining[j]
        j = out[s + n - 1]
        if remaining[j] > 0:
            remaining[j] -= 1
    return out


@numba.njit(cache=True)
def _deal(fibers, lengths, deficit, out, seed):
    """``out[f]``: one mode's slice for each fiber ``f`` of ``fibers``. Slices (random order,
    each as long as its deficit) and fibers (random order, each as long as its length) are
    laid end to end on lines scaled to the same length; a fiber goes to the slice under its
    midpoint, so slice sizes land on their deficits within a fiber length."""
    np.random.seed(seed)
    d = deficit.size
    slices = np.arange(d)
    np.random.shuffle(slices)
    pos = fibers.copy()
    np.random.shuffle(pos)
    total_def = 0
    for i in range(d):
        total_def += max(deficit[i], 0)
    total_len = 0
    for f in pos:
        total_len += lengths[f]
    if total_def == 0 or total_len == 0:
        for f in pos:
            out[f] = np.random.randint(0, d)
        return
    scale = total_def / total_len
    k = 0
    edge = max(deficit[slices[0]], 0)
    run = 0
    for f in pos:
        mid = (run + 0.5 * lengths[f]) * scale
        run += lengths[f]
        while mid >= edge and k < d - 1:
            k += 1
            edge += max(deficit[slices[k]], 0)
        out[f] = slices[k]


@numba.njit(cache=True)
def _expand(idx, lengths, last, coords):
    """COO coordinates: fiber ``f``'s indices repeated ``lengths[f]`` times, then ``last``."""
    nl = idx.shape[1]
    p = 0
    for f in range(lengths.size):
        for _ in range(lengths[f]):
            for m in range(nl):
                coords[p, m] = idx[f, m]
            coords[p, nl] = last[p]
            p += 1


@numba.njit(cache=True)
def _cover(column, dim, candidates, unused):
    """Give each unused index one occurrence, taken from indices used twice or more."""
    counts = np.zeros(dim, np.int64)
    for v in column:
        counts[v] += 1
    k = 0
    for p in candidates:
        if k == unused.size:
            break
        v = column[p]
        if counts[v] >= 2:
            counts[v] -= 1
            column[p] = unused[k]
            k += 1
    return k


# --------------------------------------------------------------------------- generation


def _repair(column: np.ndarray, dim: int, candidates: np.ndarray, rng: np.random.Generator, what: str) -> None:
    used = np.bincount(column, minlength=dim)
    unused = np.flatnonzero(used == 0)
    if unused.size == 0:
        return
    done = _cover(column, dim, candidates, rng.permutation(unused))
    if done < unused.size:
        raise DatasetError(f"internal: {unused.size - done} unused indices left in {what}")


def _long_count(lengths: np.ndarray) -> int:
    """How many fibers are placed jointly: those of length >= the smallest l >= 2 that leaves
    at most 1/8 of the fibers (the rest have many equal-length partners for dedupe swaps)."""
    at_least = np.cumsum(np.bincount(lengths)[::-1])[::-1]  # at_least[l] = #fibers with length >= l
    for length in range(2, len(at_least)):
        if at_least[length] <= len(lengths) // 8:
            return int(at_least[length])
    return 0


def generate(profile_or_name: TensorProfile | str, scale: float, seed: int) -> SparseTensor:
    """The stand-in for a FROSTT tensor at ``scale`` (1: published size), deterministic in ``seed``."""
    profile = _resolve(profile_or_name)
    plan = _plan(profile, scale)
    # Its coordinates and values, before anything of that size is allocated.
    memory.check_fits(plan.nnz * 8 * (profile.order + 1), f"{profile.name}@{scale:g}: the stand-in ({plan.nnz} nonzeros)",
                      "choose a smaller scale")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise DatasetError(f"{profile.name}: seed must be an integer, got {seed!r}")
    sig = _sigmas(profile)
    dims, nnz, n_fibers = plan.dims, plan.nnz, plan.fibers
    n_modes, nl = len(dims), len(dims) - 1
    seq = np.random.SeedSequence([int(seed) % 2**64, zlib.crc32(profile.name.encode())])
    rng = np.random.default_rng(seq)
    numba_seeds = rng.integers(0, 2**31 - 1, size=4 + nl)

    # 1. slice targets of the fiber modes: heavy index at a random position, the rest permuted
    targets = []
    for m in range(nl):
        heavy, rest_cap = _slice_layout(profile, m, dims[m], nnz, nnz)
        rest = _counts(dims[m] - (1 if heavy else 0), nnz - heavy, sig.modes[m], rest_cap)
        t = rest[rng.permutation(len(rest))]
        if heavy:
            t = np.insert(t, int(rng.integers(0, dims[m])), heavy)
        targets.append(t)

    # 2. fiber lengths, and the fibers longest first (ties in random order)
    if profile.functional_of is not None:
        lengths = np.ones(n_fibers, dtype=np.int64)
        order = np.arange(n_fibers)
    else:
        cap = min([dims[-1]] + [int(t.max()) for t in targets])
        if n_fibers * cap < nnz:
            raise DatasetError(f"{profile.name}@{scale:g}: {nnz} nonzeros do not fit in {n_fibers} fibers"
                               f" of at most {cap}")
        perm = rng.permutation(n_fibers)
        lengths = _counts(n_fibers, nnz, sig.fiber, cap)[perm]  # ascending counts, shuffled
        order = np.empty(n_fibers, dtype=np.int64)
        order[n_fibers - 1 - perm] = np.arange(n_fibers)  # order[k]: the fiber with the k-th longest

    # 3. fiber tuples: the longest fibers jointly (distinct as placed, slices by deficit^2),
    # the rest mode by mode on the remaining deficits, then swaps make all tuples distinct
    offsets = np.concatenate([[0], np.cumsum(dims[:-1])]).astype(np.int64)
    deficit = np.concatenate(targets)
    n_long = _long_count(lengths)
    idx = _place(order[:n_long], lengths, deficit, offsets, _POWER, int(numba_seeds[0]))
    short = order[n_long:]
    for m in range(nl):
        _deal(short, lengths, deficit[offsets[m]:offsets[m + 1]], idx[:, m], int(numba_seeds[4 + m]))
    movable = short[::-1].copy()  # shortest first
    _dedupe(idx, np.array(dims[:-1], dtype=np.int64), movable, int(numba_seeds[2]), _SWAP_WINDOW, 64)
    for m in range(nl):
        col = np.ascontiguousarray(idx[:, m])
        _repair(col, dims[m], order[::-1], rng, f"mode {m + 1}")
        idx[:, m] = col

    # 4. last mode
    if profile.functional_of is not None:
        src = dims[profile.functional_of]
        per_year = _counts(dims[-1], src, sig.modes[-1], src)[rng.permutation(dims[-1])]
        g = rng.permutation(np.repeat(np.arange(dims[-1]), per_year))
        last = g[idx[:, profile.functional_of]]
    else:
        heavy, rest_cap = _slice_layout(profile, nl, dims[-1], nnz, n_fibers)
        rest = _counts(dims[-1] - (1 if heavy else 0), nnz - heavy, sig.modes[-1], rest_cap)
        counts = rest[rng.permutation(len(rest))]
        if heavy:
            counts = np.insert(counts, int(rng.integers(0, dims[-1])), heavy)
        last = _fill_last(order[:n_long], lengths, counts, int(numba_seeds[3]))
        if np.bincount(last, minlength=dims[-1]).min() == 0:
            _repair(last, dims[-1], rng.permutation(nnz), rng, f"mode {n_modes}")

    coords = np.empty((nnz, n_modes), dtype=np.int64)
    _expand(idx, lengths, last, coords)
    values = rng.geometric(VALUE_P, size=nnz).astype(np.float64)
    return SparseTensor(dims, coords, values)


# --------------------------------------------------------------------------- measurement


def _cv(x: np.ndarray) -> float:
    mean = float(x.mean()) if x.size else 0.0
    return float(x.std() / mean) if mean > 0 else 0.0


def skew_summary(tensor: SparseTensor) -> dict[str, Any]:
    """Per mode: largest slice's share of nnz, CV of nonzeros per slice, empty slices;
    mode-N fibers: count, mean/CV/max of nonzeros per fiber; duplicate coordinates."""
    out: dict[str, Any] = {}
    nnz = max(tensor.nnz, 1)
    for m in range(tensor.order):
        c = tensor.slice_counts(m)
        out[f"mode {m + 1}"] = {
            "max_share": round(float(c.max()) / nnz, 6) if c.size else 0.0,
            "max": int(c.max()) if c.size else 0,
            "mean": round(float(c.mean()), 4) if c.size else 0.0,
            "cv": round(_cv(c), 4),
            "empty": int((c == 0).sum()),
        }
    f = tensor.fiber_lengths(-1)
    out["fibers"] = {
        "count": int(f.size),
        "mean": round(float(f.mean()), 4) if f.size else 0.0,
        "cv": round(_cv(f), 4),
        "max": int(f.max()) if f.size else 0,
    }
    out["duplicates"] = tensor.duplicate_count()
    return out
