"""fplab._core's data movement for fplab.torch (im2col, col2im, transpose_batches, reduce_planes, and
the out= of matmul and im2col) against plain NumPy loops: copies exact, col2im's additions in
float32 in the C++ Conv2d's order (rows in turn), the batch norm gather the same sums as
reduce_batch of the rows."""

import itertools
import unittest

import numpy as np

import fplab
from fplab import _core

# (batch, channels, height, width), kernel, stride, padding, dilation: square and not, strided,
# dilated, padded more than the kernel reaches, 1x1.
GEOMETRIES = [
    ((2, 3, 6, 5), (3, 3), (1, 1), (1, 1), (1, 1)),
    ((1, 2, 7, 9), (3, 5), (2, 1), (1, 2), (1, 1)),
    ((2, 2, 9, 8), (3, 3), (2, 2), (2, 2), (2, 2)),
    ((1, 4, 5, 5), (1, 1), (2, 2), (0, 0), (1, 1)),
    ((1, 1, 3, 4), (2, 3), (1, 3), (3, 0), (2, 1)),
]


def values(seed, shape):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) * np.exp(3 * rng.standard_normal(shape))).astype(np.float32)


def out_size(size, kernel, stride, padding, dilation):
    return (size + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1


def reference_columns(x, kernel, stride, padding, dilation, c0=0, channels=None):
    """im2col by its definition: row (b, oy, ox), column (c, i, j), zero outside the image."""
    batch, total, h, w = x.shape
    channels = total - c0 if channels is None else channels
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = kernel, stride, padding, dilation
    ho, wo = out_size(h, kh, sh, ph, dh), out_size(w, kw, sw, pw, dw)
    cols = np.zeros((batch * ho * wo, channels * kh * kw), np.float32)
    for b, oy, ox in itertools.product(range(batch), range(ho), range(wo)):
        for c, i, j in itertools.product(range(channels), range(kh), range(kw)):
            y, xx = oy * sh - ph + i * dh, ox * sw - pw + j * dw
            if 0 <= y < h and 0 <= xx < w:
                cols[(b * ho + oy) * wo + ox, (c * kh + i) * kw + j] = x[b, c0 + c, y, xx]
    return cols


def reference_col2im(dcols, shape, kernel, stride, padding, dilation):
    """Every input element the float32 sum, from +0, of its terms taken row by row."""
    batch, channels, h, w = shape
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = kernel, stride, padding, dilation
    ho, wo = out_size(h, kh, sh, ph, dh), out_size(w, kw, sw, pw, dw)
    dx = np.zeros(shape, np.float32)
    for b, oy, ox in itertools.product(range(batch), range(ho), range(wo)):
        for c, i, j in itertools.product(range(channels), range(kh), range(kw)):
            y, xx = oy * sh - ph + i * dh, ox * sw - pw + j * dw
            if 0 <= y < h and 0 <= xx < w:
                dx[b, c, y, xx] = np.float32(dx[b, c, y, xx] + dcols[(b * ho + oy) * wo + ox, (c * kh + i) * kw + j])
    return dx


def bits(a):
    return np.ascontiguousarray(a, np.float32).view(np.uint32)


class Im2col(unittest.TestCase):
    def test_rows_and_transposed_columns_are_the_definitions(self):
        for n, (shape, kernel, stride, padding, dilation) in enumerate(GEOMETRIES):
            x = values(n, shape)
            expected = reference_columns(x, kernel, stride, padding, dilation)
            with self.subTest(geometry=n):
                np.testing.assert_array_equal(bits(_core.im2col(x, kernel, stride, padding, dilation)), bits(expected))
                np.testing.assert_array_equal(bits(_core.im2col(x, kernel, stride, padding, dilation, 0, -1, True)),
                                              bits(expected.T))

    def test_a_channel_range_is_one_groups_columns(self):
        x = values(7, (2, 6, 5, 4))
        for c0, channels in ((0, 2), (2, 2), (4, 2), (1, 5)):
            cols = _core.im2col(x, (3, 3), (1, 1), (1, 1), (1, 1), c0, channels)
            np.testing.assert_array_equal(bits(cols), bits(reference_columns(x, (3, 3), (1, 1), (1, 1), (1, 1),
                                                                              c0, channels)))

    def test_into_out_when_given(self):
        x = values(8, (1, 2, 4, 4))
        out = np.full((16, 18), np.nan, np.float32)
        result = _core.im2col(x, (3, 3), (1, 1), (1, 1), (1, 1), out=out)
        self.assertTrue(np.shares_memory(result, out))
        np.testing.assert_array_equal(bits(out), bits(reference_columns(x, (3, 3), (1, 1), (1, 1), (1, 1))))
        with self.assertRaisesRegex(fplab.Error, "im2col: out must be a writeable C-contiguous array of the result"):
            _core.im2col(x, (3, 3), (1, 1), (1, 1), (1, 1), 0, -1, True, out=out)

    def test_bad_geometry_is_a_one_line_error(self):
        x = values(9, (1, 1, 2, 2))
        with self.assertRaisesRegex(fplab.Error, "im2col: the kernel is larger than the padded input"):
            _core.im2col(x, (3, 3), (1, 1), (0, 0), (1, 1))
        with self.assertRaisesRegex(fplab.Error, "im2col: x must be a 4-D float32 array"):
            _core.im2col(x.astype(np.float64), (1, 1), (1, 1), (0, 0), (1, 1))


class Col2im(unittest.TestCase):
    def test_every_element_adds_its_terms_row_by_row_in_float32(self):
        for n, (shape, kernel, stride, padding, dilation) in enumerate(GEOMETRIES):
            rows = shape[0] * out_size(shape[2], kernel[0], stride[0], padding[0], dilation[0]) * \
                out_size(shape[3], kernel[1], stride[1], padding[1], dilation[1])
            dcols = values(20 + n, (rows, shape[1] * kernel[0] * kernel[1]))
            with self.subTest(geometry=n):
                np.testing.assert_array_equal(bits(_core.col2im(dcols, shape, kernel, stride, padding, dilation)),
                                              bits(reference_col2im(dcols, shape, kernel, stride, padding, dilation)))


def reference_dgrad_taps(g, input_hw, kernel, stride, padding, dilation, c0=0, channels=None):
    """conv_dgrad "direct"'s terms by their definition: row (b, y, x), column (c, i, j), the output
    gradient where y + ph - i*dh = oy*sh and x + pw - j*dw = ox*sw lie on the output, else 0."""
    batch, total, ho, wo = g.shape
    channels = total - c0 if channels is None else channels
    (h, w), (kh, kw), (sh, sw), (ph, pw), (dh, dw) = input_hw, kernel, stride, padding, dilation
    taps = np.zeros((batch * h * w, channels * kh * kw), np.float32)
    for b, y, x, c, i, j in itertools.product(range(batch), range(h), range(w), range(channels), range(kh), range(kw)):
        ys, xs = y + ph - i * dh, x + pw - j * dw
        if ys >= 0 and xs >= 0 and ys % sh == 0 and xs % sw == 0 and ys // sh < ho and xs // sw < wo:
            taps[(b * h + y) * w + x, (c * kh + i) * kw + j] = g[b, c0 + c, ys // sh, xs // sw]
    return taps


class DgradTaps(unittest.TestCase):
    def test_the_definition_at_every_geometry_and_channel_range(self):
        for k, ((batch, channels, h, w), kernel, stride, padding, dilation) in enumerate(GEOMETRIES):
            shape = (batch, channels, out_size(h, kernel[0], stride[0], padding[0], dilation[0]),
                     out_size(w, kernel[1], stride[1], padding[1], dilation[1]))
            g = values(40 + k, shape)
            for c0, count in ((0, None), (channels - 1, 1)):
                with self.subTest(geometry=k, c0=c0):
                    want = reference_dgrad_taps(g, (h, w), kernel, stride, padding, dilation, c0, count)
                    got = _core.dgrad_taps(g, (h, w), kernel, stride, padding, dilation, c0,
                                           -1 if count is None else count)
                    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))

    def test_the_device_engines_gather_is_the_same(self):
        try:
            import torch
            from fplab.torch._engine_cuda import _tap_index
        except ImportError:
            self.skipTest("PyTorch is not installed")
        (batch, channels, h, w), kernel, stride, padding, dilation = GEOMETRIES[2]
        ho, wo = out_size(h, kernel[0], stride[0], padding[0], dilation[0]), out_size(w, kernel[1], stride[1],
                                                                                     padding[1], dilation[1])
        g = torch.from_numpy(values(7, (batch, channels, ho, wo)))
        index = _tap_index(h, w, ho, wo, kernel, stride, padding, dilation, g.device)
        planes = torch.cat([g.new_zeros(batch, channels, 1), g.reshape(batch, channels, ho * wo)], dim=2)
        gathered = planes[:, :, index].permute(0, 2, 1, 3).reshape(batch * h * w, -1).numpy()
        want = reference_dgrad_taps(g.numpy(), (h, w), kernel, stride, padding, dilation)
        np.testing.assert_array_equal(gathered.view(np.uint32), want.view(np.uint32))

    def test_an_output_that_is_not_the_inputs_is_a_one_line_error(self):
        with self.assertRaisesRegex(fplab.Error, "dgrad_taps: g's planes are not the output"):
            _core.dgrad_taps(np.zeros((1, 2, 4, 4), np.float32), (9, 9), (3, 3), (1, 1), (1, 1), (1, 1))


class Layouts(unittest.TestCase):
    def test_transpose_batches(self):
        x = values(30, (3, 17, 9))
        np.testing.assert_array_equal(bits(_core.transpose_batches(x)), bits(x.transpose(0, 2, 1)))

    def test_reduce_planes_is_reduce_batch_of_the_rows(self):
        arithmetic = fplab.Arithmetic("fp32", "rne", "fused")
        for schedule in ("seq", "pairwise", "strided(64):atomic | all:atomic"):
            for shape in ((3, 5, 7), (2, 70, 33), (1, 1, 1)):
                x = values(40, shape)
                rows = x.transpose(0, 2, 1).reshape(-1, shape[1])
                s = fplab.Schedule(schedule)
                with self.subTest(schedule=schedule, shape=shape):
                    np.testing.assert_array_equal(_core.reduce_planes(x, s, arithmetic, 3, 4, 5),
                                                  _core.reduce_batch(rows, s, arithmetic, 3, 4, 5))

    def test_matmul_into_out(self):
        a, b = values(50, (5, 7)), values(51, (7, 3))
        schedule, arithmetic = fplab.Schedule("splitk(2)"), fplab.Arithmetic()
        out = np.empty((5, 3), np.float32)
        result = _core.matmul(a, b, schedule, arithmetic, out=out)
        self.assertTrue(np.shares_memory(result, out))
        np.testing.assert_array_equal(bits(out), bits(_core.matmul(a, b, schedule, arithmetic)))
        with self.assertRaisesRegex(fplab.Error, "matmul: out must be a writeable C-contiguous array"):
            _core.matmul(a, b, schedule, arithmetic, out=np.empty((3, 5), np.float32))
        square = values(52, (4, 4))
        with self.assertRaisesRegex(fplab.Error, "matmul: out must not share memory with a or b"):
            _core.matmul(square, square, schedule, arithmetic, out=square)


if __name__ == "__main__":
    unittest.main()
