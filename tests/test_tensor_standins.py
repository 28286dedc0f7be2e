"""FROSTT stand-ins: exact shape, full coverage, no duplicates, determinism, and the published skew.

Tolerances: a stand-in's CV targets are calibrated at the published size (scale 1) and a smaller
stand-in is a subsample of the same distribution, so statistics are checked at scale 1 where the
tensor is cheap (lbnl, nips' shape, uber) and within the subsample's band elsewhere.
"""

from __future__ import annotations

import numpy as np
import pytest

from portabench.datasets import get_dataset, load
from portabench.datasets.errors import DatasetError
from portabench.datasets.tensors.standin import PROFILES, generate, scaled_shape, skew_summary

SMALL = 0.02  # every tensor has at least a few tens of thousands of nonzeros at this scale...
SMALL_BY_NAME = {"delicious-4d": 0.001, "enron": 0.002, "nell-2": 0.002, "vast-2015-mc1-5d": 0.002}  # ...or this


def _small(name: str) -> float:
    return SMALL_BY_NAME.get(name, SMALL)


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_standin_shape_coverage_and_values(name: str) -> None:
    scale = _small(name)
    tensor = generate(name, scale, seed=11)
    dims, nnz = scaled_shape(name, scale)
    profile = PROFILES[name]
    assert tensor.nnz == nnz == round(scale * profile.nnz)
    assert tensor.dims == dims and len(dims) == profile.order
    # every index of every mode is used: dims inferred from the coordinates are the target dims
    assert tuple(int(c) + 1 for c in tensor.coords.max(axis=0)) == dims
    assert tensor.coords.min() == 0
    assert tensor.duplicate_count() == 0
    # positive counts, mostly ones, not a constant
    assert tensor.values.min() >= 1 and np.all(tensor.values == np.round(tensor.values))
    assert 0.55 < np.mean(tensor.values == 1) < 0.75 and tensor.values.max() > 2
    # proportions kept (hypersparse modes are capped at nnz / 2 indices): no mode grows, the
    # smallest mode stays the smallest
    assert all(d <= real for d, real in zip(dims, profile.dims))
    assert np.argmin(dims) == np.argmin(profile.dims)


@pytest.mark.parametrize("name", ["lbnl-network", "nips"])
def test_full_scale_is_the_published_shape(name: str) -> None:
    assert scaled_shape(name, 1.0) == (PROFILES[name].dims, PROFILES[name].nnz)


def test_deterministic_for_a_seed_and_different_across_seeds() -> None:
    a = generate("uber", 0.01, seed=5)
    b = generate("uber", 0.01, seed=5)
    c = generate("uber", 0.01, seed=6)
    assert np.array_equal(a.coords, b.coords) and np.array_equal(a.values, b.values)
    assert a.dims == c.dims and a.nnz == c.nnz
    assert not np.array_equal(a.sorted().coords, c.sorted().coords)


def test_lbnl_heavy_hitters_and_flat_last_mode_at_full_size() -> None:
    tensor = generate("lbnl-network", 1.0, seed=2)
    assert tensor.dims == PROFILES["lbnl-network"].dims and tensor.nnz == 1_698_825
    assert tensor.duplicate_count() == 0
    skew = skew_summary(tensor)
    # paper [002] TABLE II: max / nnz per mode, std / mean per mode
    published_share = [397413, 768321, 310733, 676548]
    published_cv = [11906.86 / 1058.46, 12242.96 / 404.67, 11183.01 / 1041.59, 11906.86 / 403.62, 0.86 / 1.96]
    for m, mx in enumerate(published_share):
        assert skew[f"mode {m + 1}"]["max_share"] == pytest.approx(mx / tensor.nnz, abs=0.01)
    for m, cv in enumerate(published_cv):
        assert skew[f"mode {m + 1}"]["cv"] == pytest.approx(cv, rel=0.05)
    # mode 5 is flat: no heavy hitter, at most the published 13 nonzeros per time stamp
    assert skew["mode 5"]["max"] <= 13 and skew["mode 5"]["max_share"] < 1e-5
    assert skew["fibers"]["cv"] == pytest.approx(26.0, rel=0.05)


def test_lbnl_skew_survives_scaling_down() -> None:
    skew = skew_summary(generate("lbnl-network", 0.05, seed=3))
    assert skew["mode 1"]["max_share"] == pytest.approx(0.234, abs=0.01)
    assert skew["mode 2"]["max_share"] == pytest.approx(0.452, abs=0.01)
    assert skew["mode 5"]["max_share"] < 1e-3 and skew["mode 5"]["cv"] < 0.6
    assert skew["fibers"]["cv"] > 5  # a subsample's heavy tail: shorter, still far from uniform


def test_nips_one_nonzero_per_fiber_and_year_a_function_of_paper() -> None:
    tensor = generate("nips", 0.05, seed=4)
    skew = skew_summary(tensor)
    assert skew["fibers"]["max"] == 1 and skew["fibers"]["count"] == tensor.nnz
    paper, year = tensor.coords[:, 0], tensor.coords[:, 3]
    years_per_paper = np.unique(np.stack([paper, year], axis=1), axis=0)[:, 0]
    assert np.unique(years_per_paper).size == years_per_paper.size  # one year per paper


@pytest.mark.parametrize("name, scale, lo, hi", [
    ("uber", 1.0, 0.5, 1.0),  # published band "~0.5-1"
    ("chicago-crime-comm", 0.1, 0.5, 1.0),
    ("nell-2", 0.01, 0.5, 1.0),
    ("enron", 0.02, 1.6, 2.0),  # published 1.8
])
def test_fiber_cv_in_published_band(name: str, scale: float, lo: float, hi: float) -> None:
    skew = skew_summary(generate(name, scale, seed=7))
    assert lo <= skew["fibers"]["cv"] <= hi


def test_registry_load_and_specs() -> None:
    dataset = get_dataset("lbnl-network")
    assert dataset.standin is not None and dataset.default_scale > 0
    tensor = load("lbnl-network@0.01", seed=1)
    assert tensor.nnz == round(0.01 * 1_698_825) and tensor.duplicate_count() == 0
    assert np.array_equal(tensor.coords, generate("lbnl-network", 0.01, seed=1).coords)


@pytest.mark.parametrize("scale", [0, -1.0, float("nan"), float("inf"), "0.1", True])
def test_bad_scale_is_a_clear_error(scale: object) -> None:
    with pytest.raises(DatasetError, match="scale"):
        generate("uber", scale, seed=0)  # type: ignore[arg-type]


def test_too_small_and_unknown_are_clear_errors() -> None:
    with pytest.raises(DatasetError, match="lbnl-network@1e-07"):
        generate("lbnl-network", 1e-7, seed=0)
    with pytest.raises(DatasetError, match="no stand-in profile"):
        generate("not-a-tensor", 0.1, seed=0)
    with pytest.raises(DatasetError, match="seed"):
        generate("uber", 0.01, seed=1.5)  # type: ignore[arg-type]
