"""experiments/gpu_rsqrt_table.py on the CPU:

- its correctly rounded 1/sqrt is the float32 nearest the exact value (checked in 60-digit decimal
  arithmetic on seeded values of [1, 4), and on the values whose float64 result lies nearest a
  float32 midpoint, where its exact rational decision gives the same);
- emulate() of a table gives, for x = m 4^k, the table's value of m scaled by 2^-k (a synthetic
  table of seeded +-1 differences);
- measure on PyTorch's CPU rsqrt writes a table that check then finds bit for bit on other floats
  (the CPU's rsqrt is not correctly rounded either: the table is not all zeros); a partial table is
  refused by check, an --out folder that does not exist by measure, before any work;
- pack's two-bit form unpacks to the table, samples covers subnormals and the special values, and
  the table fplab carries (fp/data/cuda_rsqrt_delta.bin.gz) is whole.
"""

import contextlib
import decimal
import io
import os
import tempfile
import unittest

import numpy as np

from fplab_command import experiment_script
from torch_reference import needs_torch


def _nearest_is(bits: int, m: float) -> bool:
    """Whether float32 `bits` is (one of) the float32 nearest 1/sqrt(m), in 60-digit decimals."""
    decimal.getcontext().prec = 60
    exact = 1 / decimal.Decimal(m).sqrt()
    here = decimal.Decimal(float(np.array([bits], dtype=np.uint32).view(np.float32)[0]))
    for other in (bits - 1, bits + 1):
        there = decimal.Decimal(float(np.array([other], dtype=np.uint32).view(np.float32)[0]))
        if abs(there - exact) < abs(here - exact):
            return False
    return True


@needs_torch
class RsqrtTable(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.script = experiment_script("gpu_rsqrt_table")

    def test_correctly_rounded(self):
        rng = np.random.default_rng(5)
        m = (rng.integers(0, 1 << 24, 3000, dtype=np.uint32) + self.script.ONE).view(np.float32)
        # Values whose float64 1/sqrt lies closest to a float32 midpoint: the exact path's cases.
        every = (np.arange(1 << 20, dtype=np.uint32) * 16 + self.script.ONE).view(np.float32)
        approx = 1.0 / np.sqrt(every.astype(np.float64))
        spacing = np.spacing(approx.astype(np.float32)).astype(np.float64)
        offset = np.abs(np.mod(approx, spacing) / spacing - 0.5)
        m = np.concatenate([m, every[np.argsort(offset)[:200]]])
        bits = self.script.correctly_rounded(m)
        wrong = [float(v) for v, b in zip(m, bits) if not _nearest_is(int(b), float(v))]
        self.assertEqual(wrong, [])
        # The exact decision itself, on the values nearest a midpoint.
        self.assertEqual([self.script._exact(float(v)) for v in m[-200:]], [int(b) for b in bits[-200:]])

    def test_emulate_scales_the_table(self):
        rng = np.random.default_rng(6)
        delta = rng.integers(-1, 2, 1 << 24).astype(np.int8)
        x = self.script._random_normals(5000, 7)
        x = x[(x > 2.0 ** -120) & (x < 2.0 ** 120)]
        y = self.script.emulate(x, delta)
        exponent = (x.view(np.uint32).astype(np.int64) >> 23) - 127
        k = np.floor_divide(exponent, 2)
        m = (x.astype(np.float64) / np.exp2(2.0 * k)).astype(np.float32)
        self.assertTrue(np.all((m >= 1) & (m < 4)))
        index = m.view(np.uint32).astype(np.int64) - self.script.ONE
        expected = (self.script.correctly_rounded(m).astype(np.int64) + delta[index]).astype(np.uint32)
        expected = (expected.view(np.float32).astype(np.float64) * np.exp2(-k)).astype(np.float32)
        self.assertTrue(np.array_equal(y.view(np.uint32), expected.view(np.uint32)))

    def test_measure_then_check_on_the_cpu(self):
        with tempfile.TemporaryDirectory() as folder:
            table = os.path.join(folder, "rsqrt.npz")
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                self.assertEqual(self.script.main(["measure", "--device", "cpu", "--out", table,
                                                   "--samples", "20000"]), 0)
            self.assertIn("scaling: ", out.getvalue())
            with np.load(table) as data:
                delta = data["delta"]
            self.assertEqual(len(delta), 1 << 24)
            self.assertGreater(int(np.count_nonzero(delta)), 0)  # PyTorch's CPU rsqrt: not correctly rounded
            scaling = [line for line in out.getvalue().splitlines() if line.startswith("scaling: ")][0]
            agreed, _, total = scaling.split()[1:4]
            self.assertEqual(agreed, total)
            with contextlib.redirect_stdout(io.StringIO()):
                self.assertEqual(self.script.main(["check", table, "--device", "cpu", "--samples", "20000"]), 0)
            partial = os.path.join(folder, "partial.npz")
            with contextlib.redirect_stdout(io.StringIO()):
                self.assertEqual(self.script.main(["measure", "--device", "cpu", "--out", partial,
                                                   "--first", "4096"]), 0)
            with contextlib.redirect_stderr(io.StringIO()) as errors:
                self.assertEqual(self.script.main(["check", partial, "--device", "cpu"]), 2)
                self.assertEqual(self.script.main(["measure", "--device", "cpu", "--first", "16",
                                                   "--out", os.path.join(folder, "missing", "r.npz")]), 2)
            self.assertIn("not the whole [1, 4)", errors.getvalue())
            self.assertIn("cannot write into", errors.getvalue())

    def test_pack_unpacks_to_the_table_and_samples_cover_every_kind(self):
        rng = np.random.default_rng(8)
        delta = rng.integers(-2, 2, 1 << 24).astype(np.int8)
        self.assertTrue(np.array_equal(self.script.unpack_table(self.script.pack_table(delta)), delta))
        with self.assertRaises(ValueError):
            self.script.pack_table(np.array([2, 0, 0, 0], dtype=np.int8))  # +2 has no two-bit code
        with tempfile.TemporaryDirectory() as folder:
            npz, packed = os.path.join(folder, "t.npz"), os.path.join(folder, "t.bin.gz")
            np.savez_compressed(npz, delta=delta)
            with contextlib.redirect_stdout(io.StringIO()):
                self.assertEqual(self.script.main(["pack", npz, packed]), 0)
            self.assertTrue(np.array_equal(self.script.read_table(packed), delta))
            samples = os.path.join(folder, "s.bin")
            with contextlib.redirect_stdout(io.StringIO()):
                self.assertEqual(self.script.main(["samples", "--device", "cpu", "--count", "4096",
                                                   "--out", samples]), 0)
            pairs = np.fromfile(samples, dtype="<u4").reshape(-1, 2)
            self.assertEqual(len(pairs), 4096)
            x = pairs[:, 0].view(np.float32)
            self.assertGreater(int(np.count_nonzero((x > 0) & (x < np.float32(2.0 ** -126)))), 400)  # subnormals
            self.assertTrue(np.isnan(x).any() and np.isinf(x).any() and (x < 0).any() and (x == 0).any())
        # The table fplab carries is a whole one, of the four differences a GPU's rsqrt shows.
        shipped = self.script.read_table(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "fp",
                                                      "data", "cuda_rsqrt_delta.bin.gz"))
        self.assertEqual(len(shipped), 1 << 24)
        self.assertEqual(sorted(np.unique(shipped).tolist()), [-2, -1, 0, 1])
