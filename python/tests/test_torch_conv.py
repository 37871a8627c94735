"""fplab.torch: 2-D convolutions (forward, weight, bias and input gradients) under cpu-seq against
direct NumPy float32 loops over the kernel and the image, not im2col."""

import unittest

import numpy as np

import os
import tempfile

from torch_reference import (conv2d_forward, conv2d_input_grad, conv2d_input_grad_direct, conv2d_weight_grad,
                             needs_torch, seq_columns, torch)

if torch is not None:
    import fplab.torch


def bits(t):
    return np.asarray(t.detach() if hasattr(t, "detach") else t, np.float32).view(np.uint32)


@needs_torch
class Conv2dUnderCpuSeq(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        # cpu-seq with its input gradients added as cuDNN adds them (conv_dgrad = "direct")
        cls.folder = tempfile.TemporaryDirectory()
        text = open(os.path.join(os.path.dirname(__file__), "..", "..", "profiles", "shipped", "cpu-seq.toml")).read()
        text = text.replace('name = "cpu-seq"', 'name = "cpu-seq-direct"').replace(
            'dgrad = "all:seq"\n', 'dgrad = "all:seq"\nconv_dgrad = "direct"\n')
        cls.direct = os.path.join(cls.folder.name, "cpu-seq-direct.toml")
        with open(cls.direct, "w") as f:
            f.write(text)

    @classmethod
    def tearDownClass(cls):
        cls.folder.cleanup()

    def run_case(self, batch, channels, out, size, kernel, stride, padding, groups=1):
        for profile in ("cpu-seq", self.direct):
            with self.subTest(profile=os.path.basename(profile)):
                self.run_profile(profile, batch, channels, out, size, kernel, stride, padding, groups)

    def run_profile(self, profile, batch, channels, out, size, kernel, stride, padding, groups):
        input_grad = conv2d_input_grad if profile == "cpu-seq" else conv2d_input_grad_direct
        torch.manual_seed(batch * 100 + kernel * 10 + stride + padding)
        conv = torch.nn.Conv2d(channels, out, kernel, stride=stride, padding=padding, groups=groups)
        x = (torch.randn(batch, channels, size, size) * torch.exp(torch.randn(batch, channels, size, size)))
        x.requires_grad_()
        with fplab.torch.emulate(profile):
            y = conv(x)
            g = torch.randn(y.shape)
            y.backward(g)
        xn, wn, bn, gn = (t.detach().numpy() for t in (x, conv.weight, conv.bias, g))
        cin, cout = channels // groups, out // groups
        for k in range(groups):
            xs, ws, gs = xn[:, k * cin:(k + 1) * cin], wn[k * cout:(k + 1) * cout], gn[:, k * cout:(k + 1) * cout]
            outs, ins = slice(k * cout, (k + 1) * cout), slice(k * cin, (k + 1) * cin)
            with self.subTest(group=k):
                np.testing.assert_array_equal(bits(y[:, outs]), bits(conv2d_forward(xs, ws, bn[outs], stride, padding)))
                np.testing.assert_array_equal(bits(conv.weight.grad[outs]),
                                              bits(conv2d_weight_grad(xs, gs, kernel, stride, padding)))
                rows = gs.transpose(0, 2, 3, 1).reshape(-1, cout)  # (b, oy, ox) in order
                np.testing.assert_array_equal(bits(conv.bias.grad[outs]), bits(seq_columns(rows)))
                np.testing.assert_array_equal(bits(x.grad[:, ins]),
                                              bits(input_grad(gs, ws, xs.shape, stride, padding)))
        kinds = {e.op_kind for e in fplab.torch.coverage().emulated if e.op == "torch.nn.functional.conv2d"}
        self.assertEqual(kinds, {"fwd", "wgrad", "bias_grad", "dgrad"})

    def test_3x3_padding_1(self):
        self.run_case(batch=2, channels=3, out=4, size=6, kernel=3, stride=1, padding=1)

    def test_stride_2_overlapping_windows(self):
        self.run_case(batch=2, channels=2, out=3, size=7, kernel=3, stride=2, padding=1)

    def test_5x5_no_padding(self):
        self.run_case(batch=1, channels=1, out=2, size=8, kernel=5, stride=1, padding=0)

    def test_groups(self):
        self.run_case(batch=2, channels=4, out=6, size=5, kernel=3, stride=1, padding=1, groups=2)

    def test_the_direct_input_gradient_in_slabs_of_images_is_the_same(self):
        from fplab.torch import _ops_conv
        torch.manual_seed(4)
        conv = torch.nn.Conv2d(3, 5, 3, padding=1)
        x = torch.randn(7, 3, 6, 6).requires_grad_()
        g = torch.randn(7, 5, 6, 6)
        grads = []
        for slab in (_ops_conv.SLAB_FLOATS, 2 * 36 * 5 * 9):  # whole, then slabs of two images
            x.grad = None
            saved, _ops_conv.SLAB_FLOATS = _ops_conv.SLAB_FLOATS, slab
            try:
                with fplab.torch.emulate(self.direct):
                    conv(x).backward(g)
            finally:
                _ops_conv.SLAB_FLOATS = saved
            grads.append(bits(x.grad))
        np.testing.assert_array_equal(grads[0], grads[1])
        np.testing.assert_array_equal(grads[0], bits(conv2d_input_grad_direct(g.numpy(), conv.weight.detach().numpy(),
                                                                              x.shape, 1, 1)))

    def test_the_two_input_gradient_forms_differ(self):
        torch.manual_seed(9)
        x, w, g = torch.randn(2, 8, 6, 6), torch.randn(16, 8, 3, 3), torch.randn(2, 16, 6, 6)
        want = [conv2d_input_grad(g.numpy(), w.numpy(), x.shape, 1, 1),
                conv2d_input_grad_direct(g.numpy(), w.numpy(), x.shape, 1, 1)]
        self.assertFalse(np.array_equal(bits(want[0]), bits(want[1])))


if __name__ == "__main__":
    unittest.main()
