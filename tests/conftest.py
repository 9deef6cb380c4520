"""Test-session settings shared by every test file.

``make test`` runs everything; ``make test-fast`` deselects ``@pytest.mark.slow`` (browser viewer,
CLI subprocesses, Dask clusters, benchmark runs, example programs) for a library-only inner loop.
"""
from __future__ import annotations

import os

# The one-line "compiling the solver kernels once" notice (invkin.cache) goes to stderr on a
# cold cache; tests that check a command's stderr must not depend on whether the cache was warm.
# Subprocesses inherit it. tests/test_package.py checks the notice itself with INVKIN_QUIET="".
os.environ.setdefault("INVKIN_QUIET", "1")
# Kernels compile in the test process (as Numba does by default), not on the interpreter beside a
# background compile (invkin._tiers, the product's default): tests compare results bit for bit
# across routes. tests/test_tiers.py runs the other modes in subprocesses.
os.environ.setdefault("INVKIN_COMPILE", "wait")
