"""Numba's cache across forked processes (``implementations/numba_cache.py``)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

# A parent that has created a jitted function forks two children; each compiles the same prange loop
# and reports the mangled symbols its code names (the function's and its loop kernel's). Without the reseeded
# counter both children name them alike, and kernels that two such processes cache under one name
# get mixed up when a third process loads both.
SCRIPT = textwrap.dedent('''
    import multiprocessing, re, sys
    import numpy as np
    from numba import njit, prange

    @njit(parallel=True)
    def nstream(a, b, c, s):
        for i in prange(a.shape[0]):
            a[i] += b[i] + s * c[i]

    def compile_in_child(queue):
        a = np.ones(8)
        nstream(a, a.copy(), a.copy(), 0.5)
        (signature,) = nstream.signatures
        symbols = re.findall(r"@\\"?([\\w.$]*_ZN[\\w.$]*(?:nstream|parfor_gufunc)[\\w.$]*)", nstream.inspect_llvm(signature))
        queue.put(sorted(set(symbols)))

    if __name__ == "__main__":
        context = multiprocessing.get_context("fork")
        queue = context.Queue()
        names = []
        for _ in range(2):
            child = context.Process(target=compile_in_child, args=(queue,))
            child.start()
            names.append(queue.get(timeout=120))
            child.join()
        print(repr(names))
''')


def test_forked_processes_compile_under_different_symbols(tmp_path) -> None:
    script = tmp_path / "fork_compile.py"
    script.write_text(SCRIPT)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    first, second = eval(done.stdout.strip().splitlines()[-1])
    assert any("parfor_gufunc" in name for name in first), first
    assert first and second and not set(first) & set(second), (first, second)
