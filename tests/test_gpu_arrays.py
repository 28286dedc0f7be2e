"""The GPU variants' shared plumbing (``gpu.CupyArrays``), exercised without a GPU through a stand-in
``cupy`` module: every GPU variant of the tensor and BCSR kernels gets it, and an out-of-memory
error in ``prepare`` becomes one line naming what did not fit, with the prepared state dropped."""

from __future__ import annotations

import types

import numpy as np
import pytest

from portabench.implementations import PortabenchError, gpu, list_variants


class _OutOfMemory(Exception):
    pass


def _fake_cupy(freed: list[bool]) -> types.SimpleNamespace:
    pool = types.SimpleNamespace(free_all_blocks=lambda: freed.append(True))
    cuda = types.SimpleNamespace(memory=types.SimpleNamespace(OutOfMemoryError=_OutOfMemory),
                                 Device=lambda: types.SimpleNamespace(mem_info=(3 * 2**30, 80 * 2**30)))
    return types.SimpleNamespace(cuda=cuda, get_default_memory_pool=lambda: pool,
                                 asarray=np.asarray, asnumpy=np.asarray)


@pytest.mark.parametrize("kernel", ["mttkrp", "phi", "pi", "bcsr"])
def test_gpu_variants_share_the_plumbing(kernel: str) -> None:
    variants = list_variants(kernel, device="gpu")
    assert variants and all(issubclass(v, gpu.CupyArrays) and v.devices() == ("gpu",) for v in variants)


def test_out_of_memory_is_one_line_and_drops_the_prepared_state(monkeypatch: pytest.MonkeyPatch) -> None:
    from portabench.implementations import get_kernel

    freed: list[bool] = []
    monkeypatch.setattr(gpu, "cupy", lambda: _fake_cupy(freed))
    kernel = get_kernel("phi")
    problem = kernel.problem("uber", 2000, seed=1)
    variant = kernel.variant("cupy-segmented")()

    def fail(self, problem) -> None:
        self._out = np.zeros(3)
        raise _OutOfMemory()

    from portabench.implementations.phi.variant import PhiVariant

    monkeypatch.setattr(PhiVariant, "prepare", fail)
    with pytest.raises(PortabenchError, match=r"cupy-segmented: the tensor, Π and B \(.* GiB, plus .*\) do not fit "
                                              r"in GPU memory \(3\.0 GiB free\): choose fewer nonzeros"):
        variant.prepare(problem)
    assert freed and not hasattr(variant, "_out") and variant.threads == 256


def test_a_launch_beyond_the_kernels_register_limit_is_a_skip_with_the_reason() -> None:
    from portabench.implementations.verification import VariantUnavailable

    kernel = types.SimpleNamespace(max_threads_per_block=640, num_regs=96)
    assert gpu.launchable(kernel, 512, "cupy-x") == 512
    assert gpu.launchable(kernel, 640, "cupy-x") == 640
    with pytest.raises(VariantUnavailable, match=r"cupy-x: 1024 threads per block exceed .*640: 96 registers"):
        gpu.launchable(kernel, 1024, "cupy-x")


@pytest.mark.parametrize("dtype", [np.float64, np.int32, np.uint8])
def test_staged_copies_are_exact_both_ways(cupy_gpu, dtype, fresh_seed: int) -> None:
    """Arrays past the staging size, not a multiple of a stage, 2-D and non-contiguous: every element
    arrives in each direction."""
    rng = np.random.default_rng(fresh_seed)
    count = gpu.STAGED_FROM_BYTES * 2 // np.dtype(dtype).itemsize + 12345
    host = rng.integers(0, 100, (count // 3, 3)).astype(dtype)
    for source in (host, host[:, 1:]):
        device = gpu.to_device(source)
        assert device.dtype == dtype and device.shape == source.shape
        back = gpu.to_host(device)
        assert isinstance(back, np.ndarray) and np.array_equal(back, source)
        assert np.array_equal(gpu.to_host(device[::2]), source[::2])  # a strided device array
