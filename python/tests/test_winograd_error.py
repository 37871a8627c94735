"""experiments/winograd_error.py on the CPU: a convolution weight gradient's error against float64,
for PyTorch's kernel, fplab's Winograd model and its GEMM form. The numbers asserted: every form is
close to the exact gradient (a float32 computation), the Winograd model's bits are not the GEMM
form's, and its normwise error is larger (its transforms' roundings are spread over every weight of
a tile); bad input is one line."""

import contextlib
import io
import json
import os
import tempfile
import unittest

from fplab_command import experiment_script
from torch_reference import needs_torch


@needs_torch
class WinogradError(unittest.TestCase):
    def test_three_forms_against_the_exact_gradient(self):
        script = experiment_script("winograd_error")
        with tempfile.TemporaryDirectory() as folder:
            out = os.path.join(folder, "w.json")
            table = io.StringIO()
            with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(table):
                rc = script.main(["--device", "cpu", "--shapes", "6x4x5@7", "--trials", "3", "--json", out])
            self.assertEqual(rc, 0)
            with open(out) as f:
                rows = json.load(f)["rows"]
        self.assertEqual(len(rows), 3 * 3)
        by_form = {}
        for r in rows:
            self.assertLess(r["normwise"], 1e-5, r)
            self.assertGreater(r["normwise"], 0, r)
            by_form.setdefault(r["form"], []).append(r["normwise"])
        self.assertEqual(set(by_form), {"pytorch", "fplab winograd", "fplab gemm"})
        self.assertNotEqual(by_form["fplab winograd"], by_form["fplab gemm"])
        self.assertGreater(sorted(by_form["fplab winograd"])[1], sorted(by_form["fplab gemm"])[1])
        self.assertIn("| 6x4x5@7 | fplab winograd |", table.getvalue())

    def test_bad_shape_is_one_line(self):
        script = experiment_script("winograd_error")
        errors = io.StringIO()
        with contextlib.redirect_stderr(errors):
            rc = script.main(["--device", "cpu", "--shapes", "6x4@7"])
        self.assertEqual(rc, 2)
        self.assertIn("BATCHxINxOUT@SIZE", errors.getvalue().strip().splitlines()[-1])  # argparse: usage, then it


if __name__ == "__main__":
    unittest.main()
