import numpy as np
import pytest


@pytest.fixture
def fresh_seed() -> int:
    """A new seed every test run (printed on failure through the test's parameters)."""
    return int(np.random.SeedSequence().entropy % (2**32))
