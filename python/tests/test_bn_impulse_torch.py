"""experiments/bn_impulse_torch.py on the CPU: single impulses give one saved mean per position and
pairs one per pair of units, each the mean F.batch_norm saves for that channel (1 or 2 over n,
PyTorch's CPU kernel summing in float64); bad unit sizes and shapes are one line, exit 2, nothing
written."""

import contextlib
import io
import os
import tempfile
import unittest

import numpy as np

from fplab_command import experiment_script
from torch_reference import needs_torch


@needs_torch
class BnImpulse(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.script = experiment_script("bn_impulse_torch")

    def test_single_and_paired_impulses(self):
        with tempfile.TemporaryDirectory() as folder:
            single, pairs = os.path.join(folder, "s.npz"), os.path.join(folder, "p.npz")
            with contextlib.redirect_stdout(io.StringIO()):
                self.assertEqual(self.script.main(["--device", "cpu", "--shape", "4x2@4", "--out", single]), 0)
                self.assertEqual(self.script.main(["--device", "cpu", "--shape", "4x2@4", "--pairs", "2",
                                                   "--out", pairs]), 0)
            n = 4 * 16
            with np.load(single) as d:
                self.assertEqual(d["mean"].shape, (n,))
                self.assertTrue(np.all(d["mean"] == np.float32(1 / n)))
                self.assertTrue(np.all(d["invstd"] > 0))
            with np.load(pairs) as d:
                self.assertEqual(tuple(d["grid"]), (2, 8))  # 2 x 2 units: 2 image pairs by 8 pixel pairs
                self.assertEqual(len(d["pairs"]), 16 * 15 // 2)
                self.assertTrue(np.all(d["mean"] == np.float32(2 / n)))

    def test_bad_input_is_one_line(self):
        with tempfile.TemporaryDirectory() as folder:
            out = os.path.join(folder, "x.npz")
            for argv, says in ((["--shape", "4x2@3", "--pairs", "2"], "divides"), (["--shape", "4x2"], "@SIZE"),
                               (["--out", os.path.join(folder, "no", "x.npz")], "cannot write")):
                with contextlib.redirect_stderr(io.StringIO()) as errors:
                    self.assertEqual(self.script.main(["--device", "cpu", "--out", out] + argv), 2)
                self.assertIn(says, errors.getvalue())
                self.assertEqual(len(errors.getvalue().strip().splitlines()), 1)
            self.assertEqual(os.listdir(folder), [])


if __name__ == "__main__":
    unittest.main()
