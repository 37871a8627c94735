"""fplab.mx_quantize: shapes, the scale rule recomputed in Python, elements against fplab.round of
v / X (exact: X is a power of two), and the errors. tests/test_mx_block.cpp holds the conversion to
MPFR and tests/test_mx_gfloat_oracle.cpp to gfloat."""

import math
import unittest

import numpy as np

import fplab

ELEMENTS = {"e4m3": 8, "e5m2": 15, "e3m2fn": 4, "e2m3fn": 2, "e2m1fn": 2}  # emax of the largest normal


def scale_exponent(block, emax):
    """floor(log2(max |v|)) - emax, clamped to e8m0's [-127, 127]; -127 for an all-zero block."""
    amax = float(np.max(np.abs(block)))
    if amax == 0:
        return -127
    return min(max(math.frexp(amax)[1] - 1 - emax, -127), 127)


class MxQuantize(unittest.TestCase):
    def test_docstring_example(self):
        scales, elements, values = fplab.mx_quantize([1000.0, 1.0, 0.01], "e4m3")
        self.assertEqual(scales.dtype, np.uint8)
        np.testing.assert_array_equal(scales, [128])
        np.testing.assert_array_equal(elements, [448.0, 0.5, 3 * 2.0**-9])
        np.testing.assert_array_equal(values, [896.0, 1.0, 6 * 2.0**-9])

    def test_blocks_along_the_last_axis_and_the_rule(self):
        rng = np.random.default_rng(19)
        x = rng.standard_normal((3, 70)) * np.exp2(rng.integers(-30, 30, (3, 70)))
        x[1, 32:64] = 0.0
        for name, emax in ELEMENTS.items():
            for mode in ("rne", "rna", "rz", "ru", "rd"):
                scales, elements, values = fplab.mx_quantize(x, name, mode=mode)
                self.assertEqual(scales.shape, (3, 3))
                self.assertEqual(elements.shape, x.shape)
                for r in range(3):
                    for b in range(3):
                        block = x[r, 32 * b : 32 * b + 32]
                        s = scale_exponent(block, emax)
                        self.assertEqual(int(scales[r, b]), s + 127)
                        want = fplab.round(np.ldexp(block, -s), name, mode, saturate=True)
                        np.testing.assert_array_equal(elements[r, 32 * b : 32 * b + 32], want)
                        np.testing.assert_array_equal(values[r, 32 * b : 32 * b + 32], np.ldexp(want, s))

    def test_specials_and_block_size(self):
        scales, _, values = fplab.mx_quantize([np.nan, 1.0, 2.0, np.inf], "e2m1fn", block=2)
        np.testing.assert_array_equal(scales, [0xFF, 254])
        self.assertTrue(np.isnan(values[:2]).all())
        self.assertEqual(values[3], 6 * 2.0**127)

    def test_stochastic_rounding_is_seeded_per_row(self):
        x = np.random.default_rng(5).standard_normal((4, 64))
        first = fplab.mx_quantize(x, "e2m1fn", mode="sr", seed=7)[2]
        np.testing.assert_array_equal(first, fplab.mx_quantize(x, "e2m1fn", mode="sr", seed=7)[2])
        self.assertFalse(np.array_equal(first, fplab.mx_quantize(x, "e2m1fn", mode="sr", seed=8)[2]))

    def test_errors_are_one_line(self):
        with self.assertRaisesRegex(fplab.Error, "cannot hold MX elements"):
            fplab.mx_quantize([1.0], "e8m0")
        with self.assertRaisesRegex(fplab.Error, "block size must be at least 1"):
            fplab.mx_quantize([], "e4m3", block=0)
        with self.assertRaises(fplab.Error):
            fplab.mx_quantize([1.0], "e4m3", mode="nearest")


if __name__ == "__main__":
    unittest.main()
