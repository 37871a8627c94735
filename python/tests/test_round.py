"""fplab.round against NumPy's casts (fp32, fp16) and exact rational rounding (bf16, every mode)."""

from fractions import Fraction
import unittest

import numpy as np

import fplab
from reference import round_fraction


def samples(seed, n=4000):
    """Doubles over a wide range of magnitudes, with both signs, zeros and infinities."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(n) * np.exp2(rng.integers(-140, 140, n))
    return np.concatenate([x, [0.0, -0.0, np.inf, -np.inf, 1.0, 65504.0, 65520.0, 1e-8]])


def bits(x):
    """The float64 bit patterns, so that -0 and NaN compare exactly."""
    return np.asarray(x, dtype=np.float64).view(np.uint64)


def cast(x, dtype):
    """NumPy's own rounding to nearest even (overflow to infinity is expected here)."""
    with np.errstate(over="ignore"):
        return x.astype(dtype)


class RoundToNearest(unittest.TestCase):
    def test_fp32_equals_numpy_float32_cast(self):
        x = samples(1)
        np.testing.assert_array_equal(bits(fplab.round(x, "fp32")), bits(cast(x, np.float32)))

    def test_fp16_equals_numpy_float16_cast(self):
        x = samples(2)
        np.testing.assert_array_equal(bits(fplab.round(x, "fp16")), bits(cast(x, np.float16)))

    def test_bf16_equals_exact_rounding_including_ties(self):
        rng = np.random.default_rng(3)
        x = samples(3, 1000)
        x = x[np.isfinite(x)]
        # Exact ties between two bf16 neighbours: a bf16 value plus half its spacing.
        base = np.float32(rng.standard_normal(200)).astype(np.float64)
        base = np.array([round_fraction(v, "bf16", "rz") for v in base])
        ties = base + np.sign(base) * np.exp2(np.floor(np.log2(np.abs(base))) - 8)
        for v in np.concatenate([x, ties]):
            with self.subTest(value=float(v).hex()):
                self.assertEqual(float(fplab.round(v, "bf16")), round_fraction(Fraction(v), "bf16"))

    def test_output_is_float64_of_the_input_shape(self):
        x = np.arange(12, dtype=np.float32).reshape(3, 4) / 3
        y = fplab.round(x, "bf16")
        self.assertEqual(y.dtype, np.float64)
        self.assertEqual(y.shape, (3, 4))
        self.assertEqual(fplab.round(0.1, "bf16").shape, ())


class DirectedModes(unittest.TestCase):
    def test_every_deterministic_mode_equals_exact_rounding(self):
        x = samples(4, 300)
        x = x[np.isfinite(x)]
        for mode in ("rne", "rna", "rz", "ru", "rd"):
            got = fplab.round(x, "bf16", mode)
            for v, r in zip(x, got):
                with self.subTest(mode=mode, value=float(v).hex()):
                    self.assertEqual(float(r), round_fraction(Fraction(v), "bf16", mode))

    def test_saturate_gives_the_largest_finite_value(self):
        self.assertTrue(np.isnan(fplab.round(500.0, "e4m3")))  # e4m3 has no infinity: NaN
        self.assertEqual(float(fplab.round(500.0, "e4m3", saturate=True)), 448.0)
        self.assertEqual(float(fplab.round(1e6, "fp16", saturate=True)), 65504.0)
        self.assertEqual(float(fplab.round(1e6, "fp16")), np.inf)

    def test_flush_subnormals(self):
        tiny = 1e-6  # an fp16 subnormal (the smallest normal is 6.1e-05)
        self.assertEqual(float(fplab.round(tiny, "fp16")), float(np.float16(tiny)))
        self.assertEqual(float(fplab.round(tiny, "fp16", flush_subnormals=True)), 0.0)
        self.assertEqual(float(fplab.round(-tiny, "fp16", flush_subnormals=True)), 0.0)
        self.assertTrue(np.signbit(fplab.round(-tiny, "fp16", flush_subnormals=True)))


class StochasticRounding(unittest.TestCase):
    def setUp(self):
        # 1 + a quarter of bf16's spacing at 1 (2^-7), many times over.
        self.x = np.full(20000, 1 + 2.0**-9)

    def test_same_seed_same_bits_and_another_seed_others(self):
        a, b = fplab.round(self.x, "bf16", "sr", seed=5), fplab.round(self.x, "bf16", "sr", seed=5)
        np.testing.assert_array_equal(bits(a), bits(b))
        self.assertFalse(np.array_equal(a, fplab.round(self.x, "bf16", "sr", seed=6)))

    def test_each_result_is_a_neighbour_and_unbiased_on_average(self):
        y = fplab.round(self.x, "bf16", "sr", seed=1)
        self.assertTrue(set(np.unique(y)) <= {1.0, 1 + 2.0**-7})
        up = np.mean(y > 1)
        self.assertAlmostEqual(up, 0.25, delta=0.02)  # a fixed seed: this number never changes

    def test_an_element_depends_on_its_index_not_on_the_shape(self):
        y = fplab.round(self.x, "bf16", "sr", seed=2)
        z = fplab.round(self.x.reshape(100, 200), "bf16", "sr", seed=2)
        np.testing.assert_array_equal(bits(z.reshape(-1)), bits(y))


if __name__ == "__main__":
    unittest.main()
