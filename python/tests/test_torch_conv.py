"""fplab.torch: 2-D convolutions (forward, weight, bias and input gradients) under cpu-seq against
direct NumPy float32 loops over the kernel and the image, not im2col."""

import unittest

import numpy as np

import os
import sys
import tempfile

from torch_reference import (conv2d_forward, conv2d_input_grad, conv2d_input_grad_direct, conv2d_weight_grad,
                             needs_torch, seq_columns, torch)

if torch is not None:
    import fplab.torch


def bits(t):
    return np.asarray(t.detach() if hasattr(t, "detach") else t, np.float32).view(np.uint32)


def cpu_seq_variant(folder, name, old, new):
    """The shipped cpu-seq profile renamed `name`, its `old` text replaced by `new`, as a file in folder."""
    with open(os.path.join(os.path.dirname(__file__), "..", "..", "profiles", "shipped", "cpu-seq.toml")) as f:
        text = f.read()
    path = os.path.join(folder, name + ".toml")
    with open(path, "w") as f:
        f.write(text.replace('name = "cpu-seq"', f'name = "{name}"').replace(old, new))
    return path


@needs_torch
class Conv2dUnderCpuSeq(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        # cpu-seq with its input gradients added as cuDNN adds them (conv_dgrad = "direct")
        cls.folder = tempfile.TemporaryDirectory()
        cls.direct = cpu_seq_variant(cls.folder.name, "cpu-seq-direct", 'dgrad = "all:seq"\n',
                                     'dgrad = "all:seq"\nconv_dgrad = "direct"\n')

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


# cuDNN's Winograd arithmetic in NumPy, written apart from fplab's (experiments/winograd_fit.py: the
# model the chip's workspace was checked against): tiles (..., T, T) in, (R, R, ...) out.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "experiments"))
import winograd_fit  # noqa: E402


def winograd_weight_grad_seq(x, g, padding):
    """The Winograd weight gradient with cuDNN's transforms and the 36 sums under cpu-seq's arithmetic
    (every product rounded, left folds): x (B, C, H, W), g (B, K, Ho, Wo) -> (K, C, 3, 3)."""
    batch, channels, h, w = x.shape
    cout, ho, wo = g.shape[1:]
    ty, tx = (ho + 3) // 4, (wo + 3) // 4
    xp = np.zeros((batch, channels, 4 * ty + 2, 4 * tx + 2), np.float32)
    xp[:, :, padding:padding + h, padding:padding + w] = x
    gp = np.zeros((batch, cout, 4 * ty, 4 * tx), np.float32)
    gp[:, :, :ho, :wo] = g
    m = np.zeros((6, 6, cout, channels), np.float32)
    for b in range(batch):
        for i in range(ty):
            for j in range(tx):
                v = winograd_fit.data_tiles(xp[b, :, 4 * i:4 * i + 6, 4 * j:4 * j + 6])  # (6, 6, C)
                u = winograd_fit.delta_tiles(gp[b, :, 4 * i:4 * i + 4, 4 * j:4 * j + 4])  # (6, 6, K)
                m = (m + (u[:, :, :, None] * v[:, :, None, :]).astype(np.float32)).astype(np.float32)
    return np.moveaxis(winograd_fit.output_tiles(m), (0, 1), (2, 3))  # (K, C, 3, 3)


def chip_sample():
    """tests/data/cudnn_winograd_h200.bin (experiments/winograd_fit.py fixture): cuDNN's stages on an H200."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "data", "cudnn_winograd_h200.bin")
    with open(path, "rb") as f:
        raw = f.read()
    assert raw[:8] == winograd_fit.MAGIC
    data, delta, sums, chains, chain_terms, gemvs, gemv_terms = np.frombuffer(raw[8:36], "<u4")
    values = np.frombuffer(raw[36:], "<f4")
    sizes = [("data_in", data * 36), ("data_out", data * 36), ("delta_in", delta * 16), ("delta_out", delta * 36),
             ("output_in", sums * 36), ("output_out", sums * 9)]
    out, at = {}, 0
    for name, size in sizes:
        out[name], at = values[at:at + size], at + size
    return out


@needs_torch
class WinogradAgainstTheChip(unittest.TestCase):
    """fplab.torch's Winograd transforms (CPU tensors, the engine's fma) give cuDNN's bits on the
    chip's own tiles."""

    def test_every_transform(self):
        from types import SimpleNamespace
        from fplab.torch import _fma, _winograd
        chip = chip_sample()
        fma = _winograd._engine_fma(SimpleNamespace(channel_fma=_fma.channel_fma))  # the CPU engine's
        cases = [(_winograd.data_tiles(torch.from_numpy(chip["data_in"].reshape(-1, 6, 6).copy())), chip["data_out"], 36),
                 (_winograd.delta_tiles(torch.from_numpy(chip["delta_in"].reshape(-1, 4, 4).copy()), fma),
                  chip["delta_out"], 36),
                 (_winograd.output_tiles(torch.from_numpy(chip["output_in"].reshape(-1, 6, 6).copy())),
                  chip["output_out"], 9)]
        for got, want, size in cases:
            np.testing.assert_array_equal(bits(got).reshape(-1, size), want.view(np.uint32).reshape(-1, size))
        # The NumPy model of the tests above gives them too.
        np.testing.assert_array_equal(
            bits(np.moveaxis(winograd_fit.delta_tiles(chip["delta_in"].reshape(-1, 4, 4)), (0, 1), (-2, -1))).reshape(-1),
            chip["delta_out"].view(np.uint32))


@needs_torch
class WinogradWeightGradient(unittest.TestCase):
    """conv_wgrad = "winograd" under cpu-seq's arithmetic against cuDNN's transforms evaluated in NumPy."""

    @classmethod
    def setUpClass(cls):
        cls.folder = tempfile.TemporaryDirectory()
        cls.profile = cpu_seq_variant(cls.folder.name, "cpu-seq-winograd", "\n[deterministic]",
                                      '\n[[default.layers]]\nmatch = { layer = "conv", kernel = 3, stride = 1 }\n'
                                      'conv_wgrad = "winograd"\n\n[deterministic]')

    @classmethod
    def tearDownClass(cls):
        cls.folder.cleanup()

    def check(self, batch, channels, out, h, w, padding):
        torch.manual_seed(batch + channels + h + padding)
        conv = torch.nn.Conv2d(channels, out, 3, padding=padding)
        x = torch.randn(batch, channels, h, w) * torch.exp(torch.randn(batch, channels, h, w))
        with fplab.torch.emulate(self.profile):
            y = conv(x)
            g = torch.randn(y.shape)
            y.backward(g)
        want = winograd_weight_grad_seq(x.numpy(), g.numpy(), padding)
        np.testing.assert_array_equal(bits(conv.weight.grad), bits(want))
        direct = conv2d_weight_grad(x.numpy(), g.numpy(), 3, 1, padding)  # the GEMM form: close, other bits
        self.assertFalse(np.array_equal(bits(conv.weight.grad), bits(direct)))
        scale = np.linalg.norm(direct.astype(np.float64))
        self.assertLess(np.linalg.norm(conv.weight.grad.numpy().astype(np.float64) - direct), 1e-5 * scale)

    def test_7x7_padding_1(self):
        self.check(batch=3, channels=4, out=5, h=7, w=7, padding=1)

    def test_tiles_past_both_edges(self):
        self.check(batch=2, channels=2, out=3, h=9, w=6, padding=1)

    def test_no_padding(self):
        self.check(batch=1, channels=3, out=2, h=10, w=10, padding=0)


if __name__ == "__main__":
    unittest.main()
