"""experiments/bn_formula_torch.py on the CPU: its inputs are what make a formula visible (every
channel's float32 sums, in any order, are the exact ones), and it runs against PyTorch's own CPU
BatchNorm, writing a share per candidate. Which candidate PyTorch's CPU kernel is, is not asserted
(it keeps its statistics in float64); the mean, exact for these inputs in any order, is."""

import contextlib
import io
import json
import os
import tempfile
import unittest

import numpy as np

from fplab_command import experiment_script
from torch_reference import needs_torch


@needs_torch
class BnFormula(unittest.TestCase):
    def test_inputs_sum_exactly_in_any_order(self):
        script = experiment_script("bn_formula_torch")
        x, centres = script.exact_inputs((6, 3, 10), trial=1)
        self.assertEqual(x.dtype, np.float32)
        n = x.size // 3
        for c in range(3):
            values = x[:, c].reshape(-1)
            deviations = (values - centres[c]).astype(np.float32)
            for order in (values, values[::-1], np.random.default_rng(c).permutation(values)):
                self.assertEqual(np.cumsum(order, dtype=np.float32)[-1], np.float32(n * float(centres[c])))
            for order in (deviations, deviations[::-1]):
                self.assertEqual(np.cumsum(order * order, dtype=np.float32)[-1],
                                 np.float32((deviations.astype(np.float64) ** 2).sum()))

    def test_an_offset_keeps_the_sums_exact(self):
        script = experiment_script("bn_formula_torch")
        shape = (4, 2, 8)
        self.assertTrue(script.sums_stay_exact(shape, 64.0))
        x, centres = script.exact_inputs(shape, trial=0, offset=64.0)
        self.assertTrue(np.all(centres >= 62))
        n = x.size // 2
        for c in range(2):
            values = x[:, c].reshape(-1)
            for order in (values, values[::-1]):
                self.assertEqual(np.cumsum(order, dtype=np.float32)[-1], np.float32(n * float(centres[c])))
        # 64 x 784 values near 64 would pass 2^24 sixteenths: refused before anything runs.
        self.assertFalse(script.sums_stay_exact((64, 16, 28), 64.0))
        with contextlib.redirect_stderr(io.StringIO()) as errors:
            self.assertEqual(script.main(["--device", "cpu", "--shapes", "64x16@28", "--offset", "64"]), 2)
            self.assertEqual(script.main(["--device", "cpu", "--shapes", "8x4@6", "--offset", "0.01"]), 2)
        self.assertIn("would not be exact", errors.getvalue())
        self.assertIn("a multiple of 1/16", errors.getvalue())

    def test_runs_against_pytorchs_cpu_kernel(self):
        script = experiment_script("bn_formula_torch")
        with tempfile.TemporaryDirectory() as folder:
            out = os.path.join(folder, "bn.json")
            table = io.StringIO()
            with contextlib.redirect_stdout(table):
                rc = script.main(["--device", "cpu", "--shapes", "8x4@6", "--trials", "2", "--json", out])
            self.assertEqual(rc, 0)
            with open(out) as f:
                rows = json.load(f)["rows"]
        self.assertEqual(len(rows), 2)
        for r in rows:
            self.assertEqual(r["mean_exact"], 1.0)
            self.assertEqual(set(r["invstd"]), set(script.INVSTD))
            self.assertEqual(set(r["output"]), set(script.OUTPUT))
            self.assertTrue(all(0 <= v <= 1 for v in list(r["invstd"].values()) + list(r["output"].values())))
        self.assertIn("| 8x4@6 | 2 |", table.getvalue())

    def test_an_odd_count_is_refused(self):
        script = experiment_script("bn_formula_torch")
        errors = io.StringIO()
        with contextlib.redirect_stderr(errors):
            self.assertEqual(script.main(["--device", "cpu", "--shapes", "3x2@3"]), 2)
        self.assertIn("even", errors.getvalue().strip().splitlines()[-1])


if __name__ == "__main__":
    unittest.main()
