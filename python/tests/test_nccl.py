"""fplab.nccl_all_reduce against plain float32 (and bf16) folds in orders worked out by hand."""

import os
import subprocess
import sys
import unittest

import numpy as np

import fplab

HERE = os.path.dirname(os.path.abspath(__file__))


def buffers(seed, ranks, n):
    """Values of widely varying magnitude and both signs, so that the order shows in the bits."""
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((ranks, n)) * np.exp(3 * rng.standard_normal((ranks, n)))).astype(np.float32)


def fold32(x, order):
    """x[order[0]] + x[order[1]] + ... in float32, element by element (NumPy rounds each addition)."""
    acc = x[order[0]].astype(np.float32)
    for r in order[1:]:
        acc = acc + x[r].astype(np.float32)
    return acc


class NcclAllReduce(unittest.TestCase):
    def test_tree_within_a_node_is_the_chain_from_the_leaf(self):
        for ranks in (1, 2, 3, 4, 8):
            x = buffers(ranks, ranks, 1000)
            with self.subTest(ranks=ranks):
                got = fplab.nccl_all_reduce(x, "Tree", channels=4)
                want = fold32(x, list(range(ranks - 1, -1, -1)))
                np.testing.assert_array_equal(got.astype(np.float32).view(np.uint32), want.view(np.uint32))

    def test_a_short_ring_loop_cuts_the_buffer_into_one_chunk_per_rank(self):
        # One channel, a buffer far below a chunk (2 MiB): the last, short loop's R chunks of
        # ceil(n / R) elements rounded up to 16 bytes; chunk c is finished by rank c, so its sum
        # starts at rank c + 1 and goes round.
        for ranks, n in ((2, 10), (3, 12), (4, 1000), (5, 77)):
            x = buffers(10 + ranks, ranks, n)
            got = fplab.nccl_all_reduce(x, "Ring", "Simple", 1).astype(np.float32)
            chunk = -(-(-(-n // ranks)) // 4) * 4
            for c in range(ranks):
                lo, hi = c * chunk, min(n, (c + 1) * chunk)
                order = [(c + 1 + k) % ranks for k in range(ranks)]
                with self.subTest(ranks=ranks, n=n, chunk=c):
                    want = fold32(x[:, lo:hi], order)
                    np.testing.assert_array_equal(got[lo:hi].view(np.uint32), want.view(np.uint32))

    def test_rings_other_than_the_identity(self):
        # One channel, 3 ranks, ring (2, 0, 1): chunk c is finished by ring position c, its sum
        # starts at position c + 1: chunk 0 takes ranks 0, 1, 2; chunk 1 ranks 1, 2, 0; chunk 2
        # ranks 2, 0, 1.
        x = buffers(5, 3, 12)
        got = fplab.nccl_all_reduce(x, rings=[[2, 0, 1]]).astype(np.float32)
        for c, order in enumerate(([0, 1, 2], [1, 2, 0], [2, 0, 1])):
            want = fold32(x[:, 4 * c : 4 * c + 4], order)
            np.testing.assert_array_equal(got[4 * c : 4 * c + 4].view(np.uint32), want.view(np.uint32))
        for rings, message in (([[0, 0, 1]], "a ring must hold each rank 0 .. 2 once"),
                               ([[0, 1]], "a ring of 2 ranks for an all-reduce over 3"),
                               (["012"], "a ring is a list of rank numbers")):
            with self.assertRaises(fplab.Error) as caught:
                fplab.nccl_all_reduce(x, rings=rings)
            self.assertIn(message, str(caught.exception))
        with self.assertRaises(fplab.Error) as caught:
            fplab.nccl_all_reduce(x, "Tree", rings=[[2, 0, 1]])
        self.assertIn("rings are the Ring algorithm's", str(caught.exception))

    def test_two_channels_of_a_million_elements(self):
        # docs/results/nccl.md's worked case (4 ranks, 2 channels, 10^6 fp32, Simple): element
        # 300000 is summed in the order 3, 0, 1, 2 and element 600000 in 1, 2, 3, 0.
        x = buffers(7, 4, 1_000_000)
        got = fplab.nccl_all_reduce(x, "Ring", "Simple", 2).astype(np.float32)
        for e, order in ((300000, [3, 0, 1, 2]), (600000, [1, 2, 3, 0])):
            with self.subTest(element=e):
                want = fold32(x[:, e : e + 1], order)
                self.assertEqual(got[e].view(np.uint32), want[0].view(np.uint32))

    def test_bf16_rounds_every_addition(self):
        # bf16: 1 + 2^-8 + 2^-8 is 1 when the ones come first (each 2^-8 is half an ulp: a tie to
        # even), 1 + 2^-7 when the two small terms meet first.
        x = np.array([[1.0], [2.0**-8], [2.0**-8]])
        self.assertEqual(fplab.nccl_all_reduce(x, "Tree", format="bf16")[0], 1.0 + 2.0**-7)  # (x2 + x1) + x0
        x = np.array([[2.0**-8], [1.0], [2.0**-8]])
        self.assertEqual(fplab.nccl_all_reduce(x, "Tree", format="bf16")[0], 1.0)  # (2^-8 + 1) + 2^-8

    def test_a_pytorch_tensor_of_any_float_type(self):
        try:
            import torch
        except ImportError:
            self.skipTest("PyTorch is not installed")
        # bf16 (NumPy has none): the values are kept; 1 + 2^-8 is a tie that stays 1 in bf16.
        t = torch.tensor([[1.0, 2.0**-8], [2.0**-8, 1.0]], requires_grad=True).bfloat16()
        self.assertEqual(list(fplab.nccl_all_reduce(t, "Tree", format="bf16")), [1.0, 1.0])

    def test_bad_input_is_one_line(self):
        x = np.ones((2, 4))
        for call, message in (
            (lambda: fplab.nccl_all_reduce(x, "Rung"), "unknown NCCL algorithm 'Rung' (Ring or Tree)"),
            (lambda: fplab.nccl_all_reduce(x, protocol="LL64"), "unknown NCCL protocol 'LL64'"),
            (lambda: fplab.nccl_all_reduce(x, format="fp64"), "fp32, bf16 or fp16 buffers here, not fp64"),
            (lambda: fplab.nccl_all_reduce(x[0]), "buffers must be 2-D, one row per rank"),
            (lambda: fplab.nccl_all_reduce(x, channels=0), "channel"),
            (lambda: fplab.nccl_all_reduce(x, "Tree", channels=0), "channel"),
            (lambda: fplab.nccl_all_reduce(np.array([[1.0, 0.1], [1.0, 1.0]])),
             "nccl_all_reduce: buffer 0, element 1: 0.1 is not a value of fp32, the buffers' type"),
            (lambda: fplab.nccl_all_reduce(x, channels=2.0), "channels must be a whole number from 1 to 64"),
            (lambda: fplab.nccl_all_reduce(x, format=None), "format must be a name"),
            (lambda: fplab.nccl_all_reduce(np.ones((2, 3), complex)), "buffers must hold real numbers"),
        ):
            with self.assertRaises(fplab.Error) as caught:
                call()
            self.assertIn(message, str(caught.exception))
            self.assertNotIn("\n", str(caught.exception))


def gloo_available():
    try:
        import torch.distributed as dist
    except ImportError:
        return False
    return dist.is_available() and dist.is_gloo_available()


class DataParallelScript(unittest.TestCase):
    @unittest.skipUnless(gloo_available(), "torch.distributed with gloo is not available")
    def test_two_ranks_through_gloo_equal_the_replay(self):
        # experiments/nccl_training.py, the GPU check of issue 22, on CPU processes: two ranks'
        # sums have one order, so gloo's equal fplab's, and the replay ends on the same weights.
        script = os.path.join(HERE, "..", "..", "experiments", "nccl_training.py")
        done = subprocess.run([sys.executable, script, "--backend", "gloo", "--ranks", "2", "--steps", "2",
                               "--shard", "4"], capture_output=True, text=True, timeout=600)
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
        self.assertIn("843284/843284 gradient sums = fplab's, replay == GLOO run", done.stdout)


if __name__ == "__main__":
    unittest.main()
