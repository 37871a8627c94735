"""experiments/bn_trials_torch.py on the CPU: it keeps, per mode, shape and trial, what
F.batch_norm's kernels computed (the same bits as F.batch_norm under autograd, which it checks
itself), channel 0 of the 4-D tensors and every channel of the statistics; the inputs are the
trial's seed's; bad shapes and modes are one line and exit 2, before any file is written."""

import contextlib
import io
import json
import os
import tempfile
import unittest

import numpy as np

from fplab_command import experiment_script
from torch_reference import needs_torch, torch


@needs_torch
class BnTrials(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.script = experiment_script("bn_trials_torch")

    def test_trials_hold_the_kernels_bits(self):
        with tempfile.TemporaryDirectory() as folder:
            with contextlib.redirect_stdout(io.StringIO()):
                self.assertEqual(self.script.main(["--device", "cpu", "--shapes", "4x3@5,6x2@1", "--trials", "2",
                                                   "--modes", "default", "--out", folder]), 0)
            with open(os.path.join(folder, "bn_trials.json")) as f:
                report = json.load(f)
            self.assertTrue(report["shapes"]["4x3@5"]["default"]["autograd_same_bits"])
            with np.load(os.path.join(folder, "bn_trials_default.npz")) as data:
                self.assertEqual(data["4x3@5/1/x"].shape, (4, 1, 5, 5))  # channel 0 of (4, 3, 5, 5)
                self.assertEqual(data["4x3@5/1/mean"].shape, (3,))
                inputs = self.script.inputs((4, 3, 5), 1)
                self.assertTrue(np.array_equal(data["4x3@5/1/x"], inputs["x"][:, :1]))
                x = torch.from_numpy(inputs["x"]).requires_grad_()
                gamma = torch.from_numpy(inputs["gamma"]).requires_grad_()
                beta = torch.from_numpy(inputs["beta"]).requires_grad_()
                y = torch.nn.functional.batch_norm(x, None, None, gamma, beta, training=True, eps=1e-5)
                y.backward(torch.from_numpy(inputs["g"]))
                self.assertTrue(np.array_equal(data["4x3@5/1/y"], y.detach().numpy()[:, :1]))
                self.assertTrue(np.array_equal(data["4x3@5/1/dx"], x.grad.numpy()[:, :1]))
                self.assertTrue(np.array_equal(data["4x3@5/1/dgamma"], gamma.grad.numpy()))
                self.assertTrue(np.allclose(data["4x3@5/1/mean"], inputs["x"].mean(axis=(0, 2, 3)), rtol=1e-5))
                # the running statistics after one update from 0 and 1 (momentum 0.1)
                self.assertTrue(np.allclose(data["4x3@5/1/running_mean"], 0.1 * data["4x3@5/1/mean"], rtol=1e-6))

    def test_counter_values_are_splitmix64_of_the_position(self):
        # the hash written out in Python's unbounded integers: NumPy's wrapping uint64 must agree
        def splitmix64(z):
            mask = (1 << 64) - 1
            z = (z + 0x9E3779B97F4A7C15) & mask
            z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
            z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
            return z ^ (z >> 31)
        values = self.script.counter_values(3, (2, 3, 4)).reshape(-1)
        expected = [(splitmix64(3 * (1 << 40) + i) >> 40) / 2.0 ** 24 - 0.5 for i in range(values.size)]
        self.assertEqual(values.tolist(), expected)
        inputs = self.script.inputs((2, 3, 4), 1, "counter")
        self.assertFalse(np.array_equal(inputs["x"], self.script.inputs((2, 3, 4), 1)["x"]))
        self.assertEqual(inputs["x"].dtype, np.float32)

    def test_bad_input_is_one_line(self):
        with tempfile.TemporaryDirectory() as folder:
            for argv, says in ((["--shapes", "4x3"], "BATCHxCHANNELS@SIZE"), (["--modes", "fast"], "--modes"),
                               (["--trials", "0"], "--trials")):
                out = os.path.join(folder, "out")
                with contextlib.redirect_stderr(io.StringIO()) as errors:
                    self.assertEqual(self.script.main(["--device", "cpu", "--out", out] + argv), 2)
                self.assertIn(says, errors.getvalue())
                self.assertEqual(len(errors.getvalue().strip().splitlines()), 1)
                self.assertFalse(os.path.exists(out))


if __name__ == "__main__":
    unittest.main()
