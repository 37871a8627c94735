"""experiments/bn_nchw_model.py: fplab's model of cuDNN's 28x28 BatchNorm forward against the H200's
saved means, inverse standard deviations and outputs (docs/results/calibration_torch/bn_h200: the
first trial's 16 random channels and channel 0's outputs, a sample of the impulse pairs; the script
checks all), and controls: the plain sum times 1/n and the singleread kernels' output form, which
this kernel does not compute, miss."""

import contextlib
import io
import os
import unittest

import numpy as np

from fplab import _core
from fplab_command import experiment_script

FOLDER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs", "results", "calibration_torch",
                      "bn_h200")


class BnNchwModel(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.script = experiment_script("bn_nchw_model")
        cls.trials = experiment_script("bn_trials_torch")

    def test_random_channels_bit_for_bit(self):
        x = self.trials.inputs(self.script.SHAPE, 0, "counter")["x"]
        with np.load(os.path.join(FOLDER, "counter_64x16at28.npz")) as saved:
            y, mean, inv_std = self.script.forward(x, saved["64x16@28/0/gamma"], saved["64x16@28/0/beta"])
            self.assertTrue(np.array_equal(mean.view(np.uint32), saved["64x16@28/0/mean"].view(np.uint32)))
            self.assertTrue(np.array_equal(inv_std.view(np.uint32), saved["64x16@28/0/invstd"].view(np.uint32)))
            y = y[:, 0]
            self.assertTrue(np.array_equal(y.view(np.uint32), saved["64x16@28/0/y"][:, 0].view(np.uint32)))
            # the singleread kernels' output form is not this kernel's (fma by the C library, channel 0)
            scale = saved["64x16@28/0/gamma"][:1] * inv_std[:1]
            shift = saved["64x16@28/0/beta"][:1] - mean[:1] * scale
            other = _core.channel_fma(np.ascontiguousarray(x[:, :1]).reshape(64, 1, -1), scale, shift).reshape(y.shape)
            self.assertLess(float((other == saved["64x16@28/0/y"][:, 0]).mean()), 0.9)
            # the control: a float32 sum in any one order, times fl(1/n), is not what the kernel saved
            plain = (x.astype(np.float64).sum(axis=(0, 2, 3)).astype(np.float32) * (np.float32(1) / np.float32(50176)))
            self.assertLess(int((plain.astype(np.float32) == saved["64x16@28/0/mean"]).sum()), 16)

    def test_pairs_of_impulses(self):
        with np.load(os.path.join(FOLDER, "impulse_pairs_64x16at28.npz")) as pairs:
            chosen = np.arange(0, len(pairs["pairs"]), 97)
            grid = pairs["grid"]
            first = [(u // grid[1]) * 16 * 784 + (u % grid[1]) * 16 for u in range(grid[0] * grid[1])]
            positions = [[first[i], first[j]] for i, j in pairs["pairs"][chosen]]
            model = self.script.impulse_means(positions)
            self.assertTrue(np.array_equal(model, pairs["mean"][chosen]))

    def test_missing_file_is_one_line(self):
        with contextlib.redirect_stderr(io.StringIO()) as errors:
            self.assertEqual(self.script.main([os.path.dirname(FOLDER)]), 2)
        self.assertEqual(len(errors.getvalue().strip().splitlines()), 1)


if __name__ == "__main__":
    unittest.main()
