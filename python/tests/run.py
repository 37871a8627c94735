#!/usr/bin/env python3
"""Runs the fplab package's tests (python/tests/test_*.py) with unittest; ctest's `python` entry.

Exit code 77 (ctest: skipped) when NumPy is missing: the package needs it. PYTHONPATH must name
the folder that holds the built package (ctest sets it to build/python).
"""
import os
import sys
import unittest

try:
    import numpy  # noqa: F401
except ImportError:
    print("SKIPPED: numpy is not installed for " + sys.executable + " (Debian: python3-numpy)")
    sys.exit(77)

# Guarded: fplab.torch.experiment(workers=N) starts processes that import the main script again.
if __name__ == "__main__":
    here = os.path.dirname(os.path.abspath(__file__))
    suite = unittest.defaultTestLoader.discover(here, pattern="test_*.py", top_level_dir=here)
    result = unittest.TextTestRunner(verbosity=2).run(suite)
    sys.exit(0 if result.wasSuccessful() else 1)
