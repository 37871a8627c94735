"""fplab.torch: Linear layers and matrix products under a profile, against plain NumPy float32 loops
(cpu-seq: every sum a left fold, products rounded) and exact rationals (h100: FMA chains)."""

import unittest

import numpy as np

from reference import fma_chain
from torch_reference import needs_torch, seq_columns, seq_matmul, torch

if torch is not None:
    import fplab.torch


def bits(t):
    return np.asarray(t.detach() if hasattr(t, "detach") else t, np.float32).view(np.uint32)


@needs_torch
class LinearUnderCpuSeq(unittest.TestCase):
    def setUp(self):
        torch.manual_seed(0)
        self.layer = torch.nn.Linear(13, 5)
        self.x = (torch.randn(9, 13) * torch.exp(2 * torch.randn(9, 13))).requires_grad_()
        self.g = torch.randn(9, 5)

    def assertSameBits(self, got, expected):
        np.testing.assert_array_equal(bits(got), bits(expected))

    def test_forward_and_every_gradient_equal_float32_loops(self):
        with fplab.torch.emulate("cpu-seq"):
            y = self.layer(self.x)
            y.backward(self.g)
        x, w, b, g = (t.detach().numpy() for t in (self.x, self.layer.weight, self.layer.bias, self.g))
        self.assertSameBits(y, seq_matmul(x, w.T) + b)
        self.assertSameBits(self.x.grad, seq_matmul(g, w))              # dgrad: over outputs
        self.assertSameBits(self.layer.weight.grad, seq_matmul(g.T, x))  # wgrad: over the batch
        self.assertSameBits(self.layer.bias.grad, seq_columns(g))        # bias_grad: over the batch

    def test_results_may_be_changed_in_place(self):
        with fplab.torch.emulate("cpu-seq"):
            y = self.layer(self.x[:4])  # a slice of a leaf: its aten slice is no concern of fplab.torch
            y.relu_()  # as nn.ReLU(inplace=True) does: refused if y were a view made inside the op
            y.backward(self.g[:4])
        g = self.g[:4].numpy() * (y > 0).numpy()
        np.testing.assert_array_equal(bits(self.layer.bias.grad), bits(seq_columns(g)))
        self.assertEqual({e.reason for e in fplab.torch.coverage().native},
                         {"no reduction (elementwise, shape, indexing or selection)"})

    def test_leading_dimensions_fold_into_rows(self):
        x = torch.randn(2, 3, 13)
        with fplab.torch.emulate("cpu-seq"):
            y = self.layer(x)
        w, b = self.layer.weight.detach().numpy(), self.layer.bias.detach().numpy()
        self.assertEqual(tuple(y.shape), (2, 3, 5))
        self.assertSameBits(y.reshape(6, 5), seq_matmul(x.reshape(6, 13).numpy(), w.T) + b)

    def test_matmul_mm_bmm_and_vectors(self):
        a, b, s = torch.randn(4, 6), torch.randn(6, 3), torch.randn(2, 4, 6)
        with fplab.torch.emulate("cpu-seq"):
            results = [a @ b, torch.mm(a, b), torch.matmul(s, b), torch.bmm(s, s.transpose(1, 2)), a @ b[:, 0],
                       torch.addmm(b[0], a, b)]
        an, bn, sn = a.numpy(), b.numpy(), s.numpy()
        expected = [seq_matmul(an, bn), seq_matmul(an, bn), np.stack([seq_matmul(m, bn) for m in sn]),
                    np.stack([seq_matmul(m, m.T) for m in sn]), seq_matmul(an, bn[:, :1])[:, 0],
                    seq_matmul(an, bn) + bn[0]]
        for got, want in zip(results, expected):
            self.assertSameBits(got, want)
        kinds = {(e.op, e.op_kind) for e in fplab.torch.coverage().emulated}
        self.assertIn(("torch.bmm", "fwd"), kinds)
        self.assertIn(("torch.addmm", "fwd"), kinds)


@needs_torch
class LinearUnderH100(unittest.TestCase):
    def test_forward_is_one_fma_chain_per_output(self):
        torch.manual_seed(1)
        layer, x = torch.nn.Linear(5, 2, bias=False), torch.randn(3, 5)
        with fplab.torch.emulate("h100"):
            y = layer(x).detach().numpy()
        w = layer.weight.detach().numpy()
        for i in range(3):
            for j in range(2):
                self.assertEqual(float(y[i, j]).hex(), fma_chain(x[i].numpy(), w[j], "fp32").hex())


@needs_torch
class LinearUnderH100Torch(unittest.TestCase):
    def test_a_layer_rule_may_name_the_rows(self):
        # h100-torch: the 512 -> 10 layer's forward in cuBLAS's split K whatever the rows, its weight
        # gradient in blocks of 8 rows at 128 rows (the ResNet-18's batch) and one chain at 64 (revealed)
        torch.manual_seed(2)
        layer = torch.nn.Linear(512, 10)
        for rows, wgrad in ((128, "contig(8):seq | all:seq"), (64, "all:seq"), (32, "all:seq")):
            with fplab.torch.emulate("h100-torch"):
                layer(torch.randn(rows, 512)).sum().backward()
            used = {e.op_kind: e.schedule for e in fplab.torch.coverage().emulated
                    if e.op == "torch.nn.functional.linear"}
            self.assertEqual(used["fwd"], "contig(104):seq | all:seq")
            self.assertEqual(used["wgrad"], wgrad, rows)
        # rows of an input of more dimensions count: 2 x 64 positions are 128 rows
        with fplab.torch.emulate("h100-torch"):
            layer(torch.randn(2, 64, 512)).sum().backward()
        used = {e.op_kind: e.schedule for e in fplab.torch.coverage().emulated if e.op == "torch.nn.functional.linear"}
        self.assertEqual(used["wgrad"], "contig(8):seq | all:seq")


if __name__ == "__main__":
    unittest.main()
