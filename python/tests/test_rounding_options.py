"""fplab.round's stochastic rounding with few or given random bits, its saturation of infinities
and its NaN payloads, and fplab.exact_sum's two references, each against an independent
evaluation: exact rationals, NumPy's casts (the host's conversion instructions)."""

from fractions import Fraction
import math
import unittest

import numpy as np

import fplab
from reference import FORMATS, _floor_log2, round_fraction


def grid_position(x, fmt):
    """(lower neighbour's magnitude, quantum) of |x| on the IEEE-like format's grid, exactly."""
    exp_bits, man_bits = FORMATS[fmt]
    a = abs(Fraction(x))
    e = max(_floor_log2(a), 2 - 2 ** (exp_bits - 1))
    quantum = Fraction(2) ** (e - man_bits)
    return math.floor(a / quantum) * quantum, quantum


class StochasticBits(unittest.TestCase):
    def test_given_bits_round_up_exactly_on_a_carry(self):
        rng = np.random.default_rng(19)
        for fmt in ("bf16", "fp16"):
            x = rng.standard_normal(3000) * np.exp2(rng.integers(-8, 8, 3000))
            for r_bits in (1, 3, 8, 13, 32, 64):
                top = 2**r_bits
                given = rng.integers(0, min(top, 2**63), x.size, dtype=np.uint64)
                got = fplab.round(x, fmt, "sr", sr_bits=r_bits, random_bits=given)
                for xi, ri, gi in zip(x, given, got):
                    low, quantum = grid_position(xi, fmt)
                    t = math.floor((abs(Fraction(xi)) - low) / quantum * top)
                    magnitude = low + quantum if t + int(ri) >= top else low
                    want = float(-magnitude if xi < 0 else magnitude)
                    self.assertEqual(gi, want, f"{fmt} x={xi!r} R={r_bits} r={ri}")

    def test_few_bits_bias_the_mean_by_the_truncated_fraction(self):
        # 1 + 0.7 ulp of bf16: with 2 random bits the chance of rounding up is 2/4, not 0.7.
        x = np.full(200000, 1 + 0.7 * 2.0**-7)
        up = np.mean(fplab.round(x, "bf16", "sr", seed=3, sr_bits=2) > x)
        self.assertLess(abs(up - 0.5), 5 * math.sqrt(0.25 / x.size))
        up = np.mean(fplab.round(x, "bf16", "sr", seed=3) > x)
        self.assertLess(abs(up - 0.7), 5 * math.sqrt(0.21 / x.size))

    def test_bad_bits_are_one_line_errors(self):
        for kwargs in ({"sr_bits": 0}, {"sr_bits": 65}, {"random_bits": [16], "sr_bits": 4}, {"random_bits": [1, 2]}):
            with self.assertRaises(fplab.Error) as caught:
                fplab.round([1.3], "e2m1fn", "sr", **kwargs)
            self.assertNotIn("\n", str(caught.exception))
        with self.assertRaises(fplab.Error):
            fplab.round([1.3], "e2m1fn", "rne", sr_bits=4)
        with self.assertRaises(fplab.Error):
            fplab.Arithmetic("bf16", "rne", sr_bits=8)

    def test_sums_draw_few_bits_too(self):
        # A long sum of 1/3 in bf16 with 2-bit SR: each addition's chance of rounding up is the
        # truncated fraction, so the result differs from full-resolution SR's on the same seed.
        x = np.full(300, 1 / 3)
        a = fplab.Arithmetic("bf16", "sr", sr_bits=2)
        self.assertEqual(a.sr_bits, 2)
        self.assertIn("sr_bits=2", a.text)
        few = [fplab.reduce(x, "seq", "bf16", "sr", impl_seed=s, sr_bits=2) for s in range(20)]
        full = [fplab.reduce(x, "seq", "bf16", "sr", impl_seed=s) for s in range(20)]
        self.assertNotEqual(few, full)


class Saturation(unittest.TestCase):
    def test_infinities_saturate_only_when_asked(self):
        x = np.array([np.inf, -np.inf, 1e6, np.nan])
        plain = fplab.round(x, "e5m2", saturate=True)
        self.assertEqual(list(plain[:3]), [np.inf, -np.inf, 57344.0])
        sat = fplab.round(x, "e5m2", saturate_infinities=True)
        self.assertEqual(list(sat[:3]), [57344.0, -57344.0, 57344.0])
        self.assertTrue(np.isnan(sat[3]))


class NanPayloads(unittest.TestCase):
    def test_payload_and_sign_as_numpy_casts_keep_them(self):
        rng = np.random.default_rng(7)
        payload = rng.integers(0, 2**51, 2000, dtype=np.uint64)
        sign = rng.integers(0, 2, 2000, dtype=np.uint64) << np.uint64(63)
        quiet_nans = (sign | np.uint64(0x7FF8000000000000) | payload).view(np.float64)
        for fmt, dtype in (("fp32", np.float32), ("fp16", np.float16)):
            want = quiet_nans.astype(dtype).astype(np.float64).view(np.uint64)
            got = fplab.round(quiet_nans, fmt).view(np.uint64)
            np.testing.assert_array_equal(got, want, err_msg=fmt)


class ExactSumReferences(unittest.TestCase):
    def test_inputs_or_terms_rounded_first(self):
        rng = np.random.default_rng(5)
        for fmt in ("fp16", "bf16"):
            for _ in range(200):
                x = rng.standard_normal(int(rng.integers(2, 40))) * 2.0 ** int(rng.integers(-5, 5))
                inputs = sum(Fraction(v) for v in x)
                terms = sum(Fraction(round_fraction(v, fmt)) for v in x)
                self.assertEqual(fplab.exact_sum(x, fmt), round_fraction(inputs, fmt))
                self.assertEqual(fplab.exact_sum(x, fmt, round_terms=True), round_fraction(terms, fmt))
        self.assertEqual(fplab.exact_sum([1.0004] * 3, "fp16"), 3.001953125)
        self.assertEqual(fplab.exact_sum([1.0004] * 3, "fp16", round_terms=True), 3.0)


if __name__ == "__main__":
    unittest.main()
