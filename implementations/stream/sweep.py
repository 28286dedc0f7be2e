"""Launch-configuration sweep of the CuPy STREAM kernels (run on a GPU node).

    python -m portabench.implementations.stream.sweep [--n 268435456]

Times each configuration, after a verified first run, with CUDA events (best and
median of --repeats) and with the host clock, and prints GB/s and % of the device's
theoretical bandwidth. The asv suite remains the measurement of record; this picks
the registered defaults.
"""

from __future__ import annotations

import argparse
import itertools
import time

import numpy as np

from .. import hardware

from ..gpu import cupy, cupy_unavailable
from ..verification import run_once
from . import KERNEL
from .cupy_rawkernel import CupyRawKernel

def _time(cp, run, repeats: int) -> tuple[float, float, float]:
    """Best and median by CUDA events, and best by the host clock around a synchronised
    call (what asv sees: launch and synchronisation overheads included)."""
    events, wall = [], []
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    for _ in range(repeats):
        start.record()
        run()
        stop.record()
        stop.synchronize()
        events.append(cp.cuda.get_elapsed_time(start, stop) / 1e3)
        t0 = time.perf_counter()
        run()
        wall.append(time.perf_counter() - t0)
    return min(events), float(np.median(events)), min(wall)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=None, help="elements per array (default: the benchmark size)")
    parser.add_argument("--ops", default="copy,scale,add,triad,dot,nstream")
    parser.add_argument("--threads", default="256,384,512,640,768", help="threads per block to try")
    parser.add_argument("--repeats", type=int, default=20, help="timed runs per configuration")
    args = parser.parse_args()
    if cupy_unavailable():
        raise SystemExit(f"no GPU: {cupy_unavailable()}")
    cp = cupy()
    n = args.n or KERNEL.default_size("gpu")
    gpu = hardware.detect_gpus()[0]
    peak = hardware.gpu_peaks(gpu)["peak_bandwidth_gbs"]
    print(f"{gpu.name}: theoretical {peak:.0f} GB/s; n = {n}")
    threads = [int(t) for t in args.threads.split(",")]
    configs = {
        "elementwise": [dict(threads_per_block=t, vector_width=w, unroll=u, streaming=st)
                        for t, w, u, st in itertools.product(threads, (1, 2), (1, 2), (False,))],
        "dot": [dict(threads_per_block=t, vector_width=w, dot_blocks_per_sm=b)
                for t, w, b in itertools.product((256, 512, 1024), (1, 2), (4, 8, 16)) if t * b <= 8192],
    }
    print(f"{'op':8} {'variant / config':44} {'best GB/s':>10} {'median':>8} {'% peak':>7} {'% wall':>7}")
    for op in args.ops.split(","):
        problem = KERNEL.problem(op, n, seed=1)
        reference = KERNEL.oracle(problem)
        candidates = [("cupy-builtin", None)]
        candidates += [("cupy-rawkernel", c) for c in configs["dot" if op == "dot" else "elementwise"]]
        for name, config in candidates:
            try:
                result = run_once(KERNEL, name if config is None else CupyRawKernel(**config), problem, reference)
            except ValueError as e:  # a configuration this GPU cannot launch
                print(f"{op:8} {config}: {e}")
                continue
            if not result.check.passed:
                print(f"{op:8} {name} {config}: WRONG ANSWER ({result.check.max_rel_error:.2e})")
                continue
            best, median, wall = _time(cp, result.variant.run, args.repeats)
            nbytes = KERNEL.work(op, n).bytes
            gbs = nbytes / best / 1e9
            label = name if config is None else result.variant.config
            print(f"{op:8} {label:44} {gbs:10.0f} {nbytes / median / 1e9:8.0f} {100 * gbs / peak:7.1f} {100 * nbytes / wall / 1e9 / peak:7.1f}")
            del result
            cp.get_default_memory_pool().free_all_blocks()


if __name__ == "__main__":
    main()
