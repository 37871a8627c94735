"""fplab.torch: cross-entropy, NLL, softmax, log-softmax, sums, means and batch normalisation under
cpu-seq against NumPy float32 loops with the sums in index order, and the op kind each takes."""

import unittest
import warnings

import numpy as np

from torch_reference import F32, cross_entropy, log_softmax_nll, needs_torch, seq_columns, torch

if torch is not None:
    import torch.nn.functional as F

    import fplab.torch


def bits(t):
    return np.asarray(t.detach() if hasattr(t, "detach") else t, np.float32).view(np.uint32)


def kinds(op):
    return {e.op_kind for e in fplab.torch.coverage().emulated if e.op == op}


@needs_torch
class Losses(unittest.TestCase):
    def setUp(self):
        torch.manual_seed(2)
        self.logits = (3 * torch.randn(37, 10)).requires_grad_()
        self.target = torch.randint(0, 10, (37,))

    def test_cross_entropy_and_its_gradient_equal_pytorchs_composition(self):
        with fplab.torch.emulate("cpu-seq"):
            loss = F.cross_entropy(self.logits, self.target)
            loss.backward()
        want_loss, want_grad = log_softmax_nll(self.logits.detach().numpy(), self.target.numpy())
        self.assertEqual(float(loss).hex(), float(want_loss).hex())
        np.testing.assert_array_equal(bits(self.logits.grad), bits(want_grad))
        self.assertEqual(kinds("torch.nn.functional.cross_entropy"), {"softmax", "loss"})

    def test_with_libm_cross_entropy_is_the_c_layers_formulas(self):
        with fplab.torch.emulate("cpu-seq", math="libm"):
            loss = F.cross_entropy(self.logits, self.target)
            loss.backward()
        want_loss, want_grad = cross_entropy(self.logits.detach().numpy(), self.target.numpy(),
                                             fplab._core.exp, fplab._core.log)
        self.assertEqual(float(loss).hex(), float(want_loss).hex())
        np.testing.assert_array_equal(bits(self.logits.grad), bits(want_grad))
        # and the two formulas do round differently, so that the test above could fail
        other_loss, other_grad = log_softmax_nll(self.logits.detach().numpy(), self.target.numpy())
        self.assertFalse(np.array_equal(bits(other_grad), bits(want_grad)))

    def test_nll_loss_sums_in_order(self):
        logp = torch.randn(37, 10)
        with fplab.torch.emulate("cpu-seq"):
            total = F.nll_loss(logp, self.target, reduction="sum")
            mean = F.nll_loss(logp, self.target)
        picked = -logp.numpy()[np.arange(37), self.target.numpy()]
        self.assertEqual(float(total).hex(), float(seq_columns(picked[:, None])[0]).hex())
        self.assertEqual(float(mean).hex(), float(seq_columns(picked[:, None])[0] / F32(37)).hex())

    def test_ignored_targets_add_zeros_and_leave_the_mean_to_the_others(self):
        target = self.target.clone()
        target[[0, 5, 6]] = -100
        target[9] = 4
        in_range = torch.where(target < 0, 7, target)  # with ignore_index 4: row 9 and any other of class 4 ignored
        logp = torch.randn(37, 10, requires_grad=True)
        for ignore_index, target in ((-100, target), (4, in_range)):
            kept = (target != ignore_index).numpy()
            for reduction in ("mean", "sum", "none"):
                logp.grad = None
                with fplab.torch.emulate("cpu-seq"):
                    loss = F.nll_loss(logp, target, ignore_index=ignore_index, reduction=reduction)
                self.assertEqual(kinds("torch.nn.functional.nll_loss"), {"loss"} if reduction != "none" else set())
                self.assertFalse({e.op for e in fplab.torch.coverage().native})
                loss.backward(torch.ones_like(loss))
                labels = np.where(kept, target.numpy(), 0)
                picked = np.where(kept, -logp.detach().numpy()[np.arange(37), labels], F32(0))
                want = {"sum": seq_columns(picked[:, None])[0], "none": picked,
                        "mean": seq_columns(picked[:, None])[0] / F32(kept.sum())}[reduction]
                np.testing.assert_array_equal(bits(loss), bits(np.asarray(want, dtype=F32)))
                # the gradient is PyTorch's own: ignored rows 0, the others -1 (/ kept count) at the label
                native = logp.detach().clone().requires_grad_()
                reference = F.nll_loss(native, target, ignore_index=ignore_index, reduction=reduction)
                reference.backward(torch.ones_like(reference))
                np.testing.assert_array_equal(bits(logp.grad), bits(native.grad))
        # under the C++ formulas (libm) too: an ignored example adds a 0 to the sequential sum and has
        # no gradient, so the batch gives the bits of the batch without it
        target = self.target.clone()
        target[[0, 5, 6]] = -100
        kept = target != -100
        subset = self.logits.detach()[kept].clone().requires_grad_()
        self.logits.grad = None
        with fplab.torch.emulate("cpu-seq", math="libm"):
            whole = F.cross_entropy(self.logits, target)
            whole.backward()
            alone = F.cross_entropy(subset, target[kept])
            alone.backward()
        self.assertEqual(float(whole).hex(), float(alone).hex())
        np.testing.assert_array_equal(bits(self.logits.grad[kept]), bits(subset.grad))
        np.testing.assert_array_equal(bits(self.logits.grad[~kept]), np.zeros((3, 10), np.uint32))
        self.assertEqual(int(kept.sum()), 34)

    def test_a_target_out_of_range_runs_natively_for_pytorch_to_refuse(self):
        target = self.target.clone()
        target[0] = 10
        with fplab.torch.emulate("cpu-seq"), self.assertWarns(fplab.torch.NativeOpWarning), \
                self.assertRaises((IndexError, RuntimeError)):
            F.cross_entropy(self.logits, target)
        reasons = {e.reason for e in fplab.torch.coverage().native if e.op == "torch.nn.functional.cross_entropy"}
        self.assertEqual(reasons, {"targets outside 0..C-1 that are not ignore_index (PyTorch says why)"})


@needs_torch
class Softmax(unittest.TestCase):
    def test_softmax_and_log_softmax_along_a_middle_dimension(self):
        torch.manual_seed(3)
        x = (2 * torch.randn(3, 7, 4)).requires_grad_()
        g = torch.randn(3, 7, 4)
        for log in (False, True):
            x.grad = None
            with fplab.torch.emulate("cpu-seq"):
                y = F.log_softmax(x, dim=1) if log else torch.softmax(x, 1)
                y.backward(g)
            rows = x.detach().movedim(1, -1).reshape(-1, 7)
            gr = g.movedim(1, -1).reshape(-1, 7).numpy()
            shifted = rows - rows.max(dim=1, keepdim=True).values
            exps = torch.exp(shifted).numpy()
            sums = seq_columns(exps.T)[:, None]
            if log:
                want = shifted.numpy() - torch.log(torch.from_numpy(sums)).numpy()
                want_grad = gr - torch.exp(torch.from_numpy(want)).numpy() * seq_columns(gr.T)[:, None]
            else:
                want = exps / sums
                want_grad = want * (gr - seq_columns((gr * want).T)[:, None])
            with self.subTest(log=log):
                np.testing.assert_array_equal(bits(y.movedim(1, -1).reshape(-1, 7)), bits(want))
                np.testing.assert_array_equal(bits(x.grad.movedim(1, -1).reshape(-1, 7)), bits(want_grad))


@needs_torch
class SumsAndMeans(unittest.TestCase):
    def test_values_and_op_kinds(self):
        torch.manual_seed(4)
        x = torch.randn(5, 3, 4, 6) * torch.exp(2 * torch.randn(5, 3, 4, 6))
        with fplab.torch.emulate("cpu-seq"):
            total, rows, stats, kept = x.sum(), x.sum(-1), torch.mean(x, (0, 2, 3)), x.mean(dim=1, keepdim=True)
        xn = x.numpy()
        self.assertEqual(float(total).hex(), float(seq_columns(xn.reshape(-1, 1))[0]).hex())
        np.testing.assert_array_equal(bits(rows), bits(seq_columns(xn.reshape(-1, 6).T).reshape(5, 3, 4)))
        channels_last = xn.transpose(0, 2, 3, 1).reshape(-1, 3)
        np.testing.assert_array_equal(bits(stats), bits(seq_columns(channels_last) / F32(120)))
        self.assertEqual(tuple(kept.shape), (5, 1, 4, 6))
        self.assertEqual(kinds("torch.Tensor.sum"), {"loss", "softmax"})
        self.assertEqual(kinds("torch.mean"), {"bn_stats"})

    def test_integer_sums_run_natively_without_a_warning(self):
        with warnings.catch_warnings(record=True) as caught, fplab.torch.emulate("cpu-seq"):
            warnings.simplefilter("always")
            self.assertEqual(int(torch.arange(10).sum()), 45)
        self.assertEqual(caught, [])
        (entry,) = [e for e in fplab.torch.coverage().native if e.op == "torch.Tensor.sum"]
        self.assertIn("integers add exactly", entry.reason)


@needs_torch
class BatchNorm(unittest.TestCase):
    def test_training_step_equals_the_c_layers_formulas(self):
        torch.manual_seed(5)
        bn = torch.nn.BatchNorm2d(3)
        with torch.no_grad():
            bn.weight.uniform_(0.5, 1.5)
            bn.bias.uniform_(-0.5, 0.5)
        x = (torch.randn(4, 3, 5, 5) * 3 + 1).requires_grad_()
        g = torch.randn(4, 3, 5, 5)
        with fplab.torch.emulate("cpu-seq"):
            y = bn(x)
            y.backward(g)
        rows = x.detach().numpy().transpose(0, 2, 3, 1).reshape(-1, 3)
        gr = g.numpy().transpose(0, 2, 3, 1).reshape(-1, 3)
        n = F32(rows.shape[0])
        gamma, beta = bn.weight.detach().numpy(), bn.bias.detach().numpy()
        mean = seq_columns(rows) / n
        var = seq_columns((rows - mean) * (rows - mean)) / n
        inv_std = F32(1) / np.sqrt(var + F32(1e-5))
        xhat = (rows - mean) * inv_std
        dbeta, dgamma = seq_columns(gr), seq_columns(gr * xhat)
        dx = gamma * inv_std / n * (n * gr - dbeta - xhat * dgamma)
        running_var = (0.9 * 1.0 + 0.1 * (var * n / F32(n - 1)).astype(np.float64)).astype(F32)
        back = lambda t: t.numpy().transpose(0, 2, 3, 1).reshape(-1, 3)  # noqa: E731
        np.testing.assert_array_equal(bits(back(y.detach())), bits(gamma * xhat + beta))
        np.testing.assert_array_equal(bits(back(x.grad)), bits(dx))
        np.testing.assert_array_equal(bits(bn.bias.grad), bits(dbeta))
        np.testing.assert_array_equal(bits(bn.weight.grad), bits(dgamma))
        np.testing.assert_array_equal(bits(bn.running_mean), bits((0.1 * mean.astype(np.float64)).astype(F32)))
        np.testing.assert_array_equal(bits(bn.running_var), bits(running_var))
        self.assertEqual(kinds("torch.nn.functional.batch_norm"), {"bn_stats", "bias_grad"})


if __name__ == "__main__":
    unittest.main()
