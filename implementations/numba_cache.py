"""Numba's on-disk cache kept safe for processes forked from one parent (asv's forkserver).

Numba names each compiled function after a per-process counter (``FunctionIdentity._unique_ids``),
and a ``prange`` loop's kernel after the address of an object as well. Processes forked from one
parent count alike and allocate alike, so two of them can compile different kernels under one
symbol name; a process that then loads both from the cache links one kernel for both and computes
a wrong answer (numba/numba#10486). Seen here in CI: after the main job's asv processes had cached
STREAM's kernels, the tests' process ran nstream with triad's loop (``a = b + s c``). ``init``, run
through Numba's ``numba_extensions`` entry point before a process creates its first jitted function,
starts that counter at a random value in the process and again in each child it forks, so that
symbols compiled by different processes differ.
"""

from __future__ import annotations

import itertools
import os
import secrets

_installed = False


def reseed() -> None:
    """Start Numba's function counter at a random value (where this Numba has that counter)."""
    try:
        from numba.core.bytecode import FunctionIdentity
    except ImportError:
        return
    if isinstance(getattr(FunctionIdentity, "_unique_ids", None), itertools.count):
        FunctionIdentity._unique_ids = itertools.count(secrets.randbits(40))


def init() -> None:
    """Numba's extension hook: reseed now and in every forked child."""
    global _installed
    if not _installed:
        _installed = True
        reseed()
        os.register_at_fork(after_in_child=reseed)
