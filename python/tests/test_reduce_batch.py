"""fplab._core.reduce_batch (many sums sharing one order) and noise_op_id (the C++ training's
noise-key op ids), which fplab.torch builds on, against plain float32 loops and each other."""

import unittest

import numpy as np

import fplab
from fplab import _core
from reference import fp32_pairwise, fp32_seq


def terms(seed, k, outputs):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((k, outputs)) * np.exp(3 * rng.standard_normal((k, outputs)))).astype(np.float32)


def arithmetic():
    return fplab.Arithmetic("fp32", "rne", "fused")


class ReduceBatch(unittest.TestCase):
    def test_every_column_is_summed_in_the_schedules_order(self):
        for k, outputs in ((1, 3), (7, 1), (33, 70), (200, 5)):
            x = terms(k + outputs, k, outputs)
            seq = _core.reduce_batch(x, fplab.Schedule("seq"), arithmetic())
            pairwise = _core.reduce_batch(x, fplab.Schedule("pairwise"), arithmetic())
            with self.subTest(k=k, outputs=outputs):
                self.assertEqual(seq.dtype, np.float64)
                self.assertEqual(seq.shape, (outputs,))
                self.assertEqual([v.hex() for v in seq], [fp32_seq(x[:, m]).hex() for m in range(outputs)])
                self.assertEqual([v.hex() for v in pairwise], [fp32_pairwise(x[:, m]).hex() for m in range(outputs)])

    def test_a_nondeterministic_order_follows_its_key(self):
        x = terms(5, 300, 130)
        atomic = fplab.Schedule("strided(64):atomic | all:atomic")
        run = lambda seed, op_id=0, call=0: _core.reduce_batch(x, atomic, arithmetic(), seed, op_id, call)  # noqa: E731
        np.testing.assert_array_equal(run(1), run(1))
        for other in (run(2), run(1, op_id=1), run(1, call=1)):
            self.assertTrue((other != run(1)).any())

    def test_bad_terms_are_one_line_errors(self):
        with self.assertRaisesRegex(fplab.Error, "reduce_batch: terms must be two-dimensional"):
            _core.reduce_batch(np.ones(3), fplab.Schedule("seq"), arithmetic())
        with self.assertRaisesRegex(fplab.Error, "reduce_batch: terms must be an array of numbers"):
            _core.reduce_batch([["a"]], fplab.Schedule("seq"), arithmetic())


class NoiseOpId(unittest.TestCase):
    def test_positions_kinds_and_parts_each_give_their_own_id(self):
        ids = {_core.noise_op_id(layer, kind, part)
               for layer in range(4) for kind in ("fwd", "dgrad", "wgrad", "bias_grad") for part in range(3)}
        self.assertEqual(len(ids), 4 * 4 * 3)
        self.assertEqual(_core.noise_op_id(2, "wgrad", 1), _core.noise_op_id(2, "wgrad", 1))

    def test_an_unknown_kind_is_a_one_line_error(self):
        with self.assertRaisesRegex(fplab.Error, r"unknown operation kind 'conv' \(known: fwd, dgrad"):
            _core.noise_op_id(0, "conv")


if __name__ == "__main__":
    unittest.main()
