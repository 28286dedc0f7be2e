import os

import numpy as np
import pytest

# The environment before any test ran: loading MKL sets MKL_RT in os.environ, which a fresh
# interpreter must not inherit from the tests before it.
STARTING_ENVIRONMENT = dict(os.environ)


@pytest.fixture
def fresh_seed() -> int:
    """A new seed every test run (printed on failure through the test's parameters)."""
    return int(np.random.SeedSequence().entropy % (2**32))


@pytest.fixture
def fresh_interpreter():
    """Runs Python source in a new interpreter, in the environment the tests started with (a loaded
    library, a cached ``unavailable()`` or a variable set on loading cannot leak in from other
    tests; ``env``: variables to add); returns the completed process."""
    import subprocess
    import sys

    def run(source: str, **env: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-c", source], capture_output=True, text=True, timeout=300,
                              env={**STARTING_ENVIRONMENT, **env})

    return run
