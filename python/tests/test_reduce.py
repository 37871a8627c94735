"""fplab.reduce, dot, matmul and exact_sum against plain float32 loops, NumPy and exact rationals."""

from fractions import Fraction
import unittest

import numpy as np

import fplab
from reference import fma_chain, fp32_pairwise, fp32_rev, fp32_seq, round_fraction, seq_sum


def data(seed, n, dtype=np.float32):
    """Values of widely varying magnitude and both signs, so that the order matters."""
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(n) * np.exp(3 * rng.standard_normal(n))).astype(dtype)


def same_bits(test, got, expected):
    test.assertEqual(float(got).hex(), float(expected).hex())


class ReduceOrders(unittest.TestCase):
    def test_seq_and_rev_equal_float32_loops(self):
        for n in (1, 2, 3, 17, 1000):
            x = data(n, n)
            with self.subTest(n=n):
                same_bits(self, fplab.reduce(x, "seq"), fp32_seq(x))
                same_bits(self, fplab.reduce(x, "rev"), fp32_rev(x))

    def test_pairwise_equals_a_recursive_float32_tree(self):
        for n in (2, 5, 64, 999):
            x = data(100 + n, n)
            with self.subTest(n=n):
                same_bits(self, fplab.reduce(x, "pairwise"), fp32_pairwise(x))

    def test_orders_differ_on_cancelling_data(self):
        x = [1e8, 1.0, -1e8, 1.0]
        self.assertEqual(fplab.reduce(x, "seq"), 1.0)
        self.assertEqual(fplab.reduce(x, "rev"), 0.0)
        self.assertEqual(fplab.exact_sum(x), 2.0)

    def test_numpy_presets_equal_numpy_sum_of_float32(self):
        # NumPy 2.3 stopped cutting a contiguous axis into 8192-element buffers (docs/schedules.md):
        # this NumPy is held to the preset of its version, and the other one must part from it.
        major, minor = (int(part) for part in np.__version__.split(".")[:2])
        matching, other = ("numpy", "numpy-2.2") if (major, minor) >= (2, 3) else ("numpy-2.2", "numpy")
        differs = 0
        for n in (1, 7, 8, 9, 127, 128, 129, 1000, 8191, 8192, 8193, 24581, 100000):
            x = data(200 + n, n)
            with self.subTest(n=n):
                same_bits(self, fplab.reduce(x, matching), np.sum(x))
            differs += fplab.reduce(x, other) != np.sum(x)
        self.assertGreater(differs, 0, f"{other} should part from NumPy {np.__version__} past 8192 terms")

    def test_held_stage_equals_a_float16_running_sum_updated_in_float32(self):
        # "@fp32>fp16": each addition rounded to float32, then to float16, where the sum is held;
        # a seq starts from zero. NumPy's own scalar float32 addition and float16 cast are the referee.
        rng = np.random.default_rng(19)
        for n in (1, 2, 3, 17, 300, 2000):
            x = (rng.standard_normal(n) * np.exp2(rng.integers(-12, 12, n))).astype(np.float32)
            acc = np.float16(0)
            for v in x:
                acc = np.float16(np.float32(acc) + v)
            with self.subTest(n=n):
                same_bits(self, fplab.reduce(x, "all:seq@fp32>fp16", "fp16"), acc)
        # Without the hold the float32 running sum is rounded to float16 once, at the end.
        x = data(3, 2000)
        self.assertNotEqual(fplab.reduce(x, "all:seq@fp32>fp16", "fp16"), fplab.reduce(x, "all:seq@fp32", "fp16"))

    def test_fp64_seq_equals_a_python_float_loop(self):
        x = data(5, 500, np.float64) * np.pi
        acc = float(x[0])
        for v in x[1:]:
            acc += float(v)
        same_bits(self, fplab.reduce(x, "seq", "fp64"), acc)

    def test_bf16_and_directed_modes_equal_exact_rounding_per_addition(self):
        x = data(6, 300).astype(np.float64)
        for fmt, mode in (("bf16", "rne"), ("fp16", "rne"), ("fp32", "rz"), ("bf16", "ru")):
            with self.subTest(format=fmt, mode=mode):
                same_bits(self, fplab.reduce(x, "seq", fmt, mode), seq_sum(list(x), fmt, mode))

    def test_float64_values_enter_exactly(self):
        # 0.1 is not a float32: the first addition alone rounds.
        x = [0.1, 0.2]
        same_bits(self, fplab.reduce(x, "seq"), round_fraction(Fraction(0.1) + Fraction(0.2), "fp32"))

    def test_schedule_object_and_text_agree(self):
        x = data(7, 5000)
        s = fplab.Schedule("strided(32):seq | all:shfl_down")
        same_bits(self, fplab.reduce(x, s), fplab.reduce(x, s.text))


class ImplementationNoise(unittest.TestCase):
    def test_same_seed_same_bits_other_seeds_other_results(self):
        x = data(8, 4096)
        results = {fplab.reduce(x, "cuda-naive-sum(32,16)", impl_seed=seed).hex() for seed in range(20)}
        self.assertGreater(len(results), 1)
        for seed in (0, 3):
            same_bits(self, fplab.reduce(x, "atomic", impl_seed=seed), fplab.reduce(x, "atomic", impl_seed=seed))
        self.assertGreater(len({fplab.reduce(x, "atomic", impl_seed=s).hex() for s in range(10)}), 1)

    def test_deterministic_schedules_ignore_the_seed(self):
        x = data(9, 4096)
        same_bits(self, fplab.reduce(x, "pairwise", impl_seed=1), fplab.reduce(x, "pairwise", impl_seed=2))


class ExactSum(unittest.TestCase):
    def test_equals_the_rational_sum_rounded_once(self):
        for seed in range(5):
            x = data(300 + seed, 2000, np.float64) * np.exp2(np.random.default_rng(seed).integers(-60, 60, 2000))
            exact = sum(map(Fraction, x))
            with self.subTest(seed=seed):
                same_bits(self, fplab.exact_sum(x), float(exact))  # float(Fraction) rounds correctly
                same_bits(self, fplab.exact_sum(x, "bf16"), round_fraction(exact, "bf16"))

    def test_any_shape_and_layout(self):
        x = data(10, 600, np.float64).reshape(20, 30)
        same_bits(self, fplab.exact_sum(x[:, ::3]), float(sum(map(Fraction, x[:, ::3].ravel()))))


class Dot(unittest.TestCase):
    def test_fused_seq_equals_an_exact_fma_chain(self):
        a, b = data(11, 500), data(12, 500)
        same_bits(self, fplab.dot(a, b, "seq"), fma_chain(list(a), list(b), "fp32"))
        # The same float values as float64 arrays take the same (fast) path and give the same bits.
        same_bits(self, fplab.dot(a.astype(np.float64), b.astype(np.float64), "seq"), fma_chain(list(a), list(b), "fp32"))

    def test_rounded_products_equal_a_float32_loop(self):
        a, b = data(13, 400), data(14, 400)
        acc = np.float32(a[0] * b[0])
        for x, y in zip(a[1:], b[1:]):
            acc = np.float32(acc + np.float32(x * y))
        same_bits(self, fplab.dot(a, b, "seq", products="rounded"), acc)

    def test_fp64_values_in_fp64_equal_a_python_loop(self):
        a, b = data(15, 300, np.float64) / 3, data(16, 300, np.float64) / 7
        acc = float(a[0] * b[0])
        for x, y in zip(a[1:], b[1:]):
            acc = acc + float(x) * float(y)
        same_bits(self, fplab.dot(a, b, "seq", "fp64", products="rounded"), acc)

    def test_lengths_must_match(self):
        with self.assertRaises(fplab.Error):
            fplab.dot([1, 2], [1, 2, 3], "seq")


class Matmul(unittest.TestCase):
    def test_seq_rounded_products_equal_a_float32_loop_over_k(self):
        rng = np.random.default_rng(17)
        a = rng.standard_normal((9, 70)).astype(np.float32)
        b = rng.standard_normal((70, 5)).astype(np.float32)
        c = np.zeros((9, 5), np.float32)
        c[:] = a[:, :1] * b[:1, :]
        for t in range(1, 70):
            c = c + a[:, t : t + 1] * b[t : t + 1, :]  # float32 arithmetic, one rounding each
        got = fplab.matmul(a, b, "seq", products="rounded")
        self.assertEqual(got.dtype, np.float32)
        np.testing.assert_array_equal(got.view(np.uint32), c.view(np.uint32))

    def test_fused_equals_exact_fma_chains(self):
        rng = np.random.default_rng(18)
        a = rng.standard_normal((3, 40)).astype(np.float32)
        b = rng.standard_normal((40, 4)).astype(np.float32)
        got = fplab.matmul(a, b, "seq")
        for i in range(3):
            for j in range(4):
                same_bits(self, got[i, j], fma_chain(list(a[i]), list(b[:, j]), "fp32"))

    def test_noise_key_fields_choose_the_run(self):
        rng = np.random.default_rng(19)
        a = (rng.standard_normal((8, 512)) * np.exp(3 * rng.standard_normal((8, 512)))).astype(np.float32)
        b = rng.standard_normal((512, 8)).astype(np.float32)
        s = "splitk-atomic(16)"
        base = fplab.matmul(a, b, s, impl_seed=1, op_id=2, call=3)
        np.testing.assert_array_equal(base, fplab.matmul(a, b, s, impl_seed=1, op_id=2, call=3))
        for other in (dict(impl_seed=2, op_id=2, call=3), dict(impl_seed=1, op_id=3, call=3),
                      dict(impl_seed=1, op_id=2, call=4)):
            with self.subTest(**other):
                self.assertFalse(np.array_equal(base, fplab.matmul(a, b, s, **other)))

    def test_non_contiguous_input_is_copied_not_refused(self):
        a = np.arange(12, dtype=np.float32).reshape(3, 4)
        np.testing.assert_array_equal(fplab.matmul(a.T, a, "seq"), a.T @ a)  # small integers: exact

    def test_refuses_other_dtypes_and_shapes(self):
        a = np.ones((2, 3), np.float32)
        for bad in (lambda: fplab.matmul(a.astype(np.float64), a.T, "seq"),
                    lambda: fplab.matmul(a, a, "seq"),
                    lambda: fplab.matmul(a[0], a.T, "seq"),
                    lambda: fplab.matmul([[1.0]], a, "seq")):
            with self.assertRaises(fplab.Error):
                bad()


if __name__ == "__main__":
    unittest.main()
