"""fplab.torch on whole, unchanged models: a small CNN and an MLP train two steps under h100, and
coverage() says what ran through fplab and what natively; an operation fplab.torch does not know
runs natively, is listed and warned about; bad profiles are one-line fplab.Errors."""

import itertools
import os
import unittest
import warnings

import numpy as np

from torch_reference import needs_torch, torch

if torch is not None:
    import torch.nn as nn
    import torch.nn.functional as F

    import fplab
    import fplab.torch

REPOSITORY = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def train_two_steps(model, x, y, optimizer):
    """Two optimiser steps under emulate("h100"): the losses, and the weights before and after."""
    before = [p.detach().clone() for p in model.parameters()]
    losses = []
    with fplab.torch.emulate("h100", impl_seed=1) as emulation:
        for _ in range(2):
            optimizer.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
            losses.append(float(loss))
    return emulation, losses, before


@needs_torch
class UnchangedModels(unittest.TestCase):
    def check(self, emulation, losses, before, model, emulated_ops):
        self.assertTrue(all(np.isfinite(losses)), losses)
        self.assertEqual(emulation.call, 1)
        for old, new in zip(before, model.parameters()):
            self.assertFalse(torch.equal(old, new.detach()))
        coverage = fplab.torch.coverage()
        for op, kinds in emulated_ops.items():
            with self.subTest(op=op):
                self.assertEqual({e.op_kind for e in coverage.emulated if e.op == op}, kinds)
        for entry in coverage.emulated:
            choice = fplab.profile("h100").default[entry.op_kind]
            self.assertEqual((entry.schedule, entry.arithmetic), (choice.schedule.text, choice.arithmetic.text))

    def test_small_cnn(self):
        torch.manual_seed(0)
        model = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                              nn.Conv2d(4, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                              nn.Flatten(), nn.Linear(8 * 7 * 7, 10))
        x, y = torch.randn(16, 1, 28, 28), torch.randint(0, 10, (16,))
        run = train_two_steps(model, x, y, torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9))
        self.check(*run, model, {
            "torch.nn.functional.conv2d": {"fwd", "dgrad", "wgrad", "bias_grad"},  # dgrad: the second one
            "torch.nn.functional.linear": {"fwd", "dgrad", "wgrad", "bias_grad"},
            "torch.nn.functional.cross_entropy": {"softmax", "loss"},
        })
        native = {e.op: e.reason for e in fplab.torch.coverage().native}
        self.assertIn("no reduction", native["torch.nn.functional.max_pool2d"])

    def test_mlp_with_adam(self):
        torch.manual_seed(0)
        model = nn.Sequential(nn.Flatten(), nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10))
        x, y = torch.randn(32, 1, 28, 28), torch.randint(0, 10, (32,))
        run = train_two_steps(model, x, y, torch.optim.Adam(model.parameters(), lr=1e-3))
        self.check(*run, model, {"torch.nn.functional.linear": {"fwd", "dgrad", "wgrad", "bias_grad"}})

    def test_residual_cnn_with_batch_norm_leaves_nothing_that_reduces_native(self):
        class Block(nn.Module):
            def __init__(self, channels):
                super().__init__()
                self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
                self.bn1 = nn.BatchNorm2d(channels)
                self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
                self.bn2 = nn.BatchNorm2d(channels)

            def forward(self, x):
                return F.relu(x + self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x)), inplace=True))))

        torch.manual_seed(0)
        # No bias before a BatchNorm (as in ResNets): its gradient is zero but for rounding, and an
        # emulation may well compute it exactly zero (PyTorch 2.11 did).
        model = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(8),
                              nn.ReLU(inplace=True),
                              Block(8), nn.Dropout(0.1), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 10))
        x, y = torch.randn(8, 3, 16, 16), torch.randint(0, 10, (8,))
        run = train_two_steps(model, x, y, torch.optim.SGD(model.parameters(), lr=0.05))
        self.check(*run, model, {
            "torch.nn.functional.batch_norm": {"bn_stats", "bias_grad"},
            "torch.nn.functional.adaptive_avg_pool2d": {"bn_stats"},
        })
        model.eval()
        with fplab.torch.emulate("h100"), torch.no_grad():
            self.assertEqual(tuple(model(x).shape), (8, 10))
        self.assertEqual([e for e in fplab.torch.coverage().native if not e.reason.startswith("no reduction")], [])


@needs_torch
class NativeOperations(unittest.TestCase):
    def test_an_unknown_operation_runs_natively_is_listed_and_warned_about(self):
        x = torch.randn(6, 4, requires_grad=True)
        with warnings.catch_warnings(record=True) as caught, fplab.torch.emulate("h100"):
            warnings.simplefilter("always")
            y = torch.cumsum(x, 0)  # a running sum: fplab.torch does not emulate it
            z = torch.einsum("ij,kj->ik", x, x)  # einsum runs natively; the aten bmm under it is seen
        self.assertTrue(torch.equal(y, torch.cumsum(x, 0)))  # PyTorch's own bits
        self.assertEqual(tuple(z.shape), (6, 6))
        native = {(e.op, e.reason) for e in fplab.torch.coverage().native}
        self.assertIn(("torch.cumsum", "not emulated by fplab.torch (it may reduce in its own order)"), native)
        self.assertIn(("aten.bmm.default", "a reduction run natively inside torch.functional.einsum"), native)
        self.assertNotIn("torch.cumsum", fplab.torch.coverage().ops(emulated=True))
        messages = [str(w.message) for w in caught if issubclass(w.category, fplab.torch.NativeOpWarning)]
        self.assertIn("fplab.torch: torch.cumsum ran natively: not emulated by fplab.torch (it may reduce in its own "
                      "order)", messages)

    def test_the_aten_watch_sees_the_first_step_or_every_step(self):
        """The aten watch lists a reduction that runs natively underneath (here autograd's sum for a
        broadcast addition) while it is on: the first training step whole by default, then it steps
        off the dispatch stack; watch="always" keeps it on."""
        from torch.utils import _python_dispatch
        for watch, late_one_listed in (("first-step", False), ("always", True)):
            with self.subTest(watch=watch):
                torch.manual_seed(1)
                layer, shift = nn.Linear(4, 3), torch.zeros(1, 3, requires_grad=True)
                x = torch.randn(5, 4)
                with warnings.catch_warnings(), fplab.torch.emulate("h100", watch=watch):
                    warnings.simplefilter("ignore")
                    for step in range(3):
                        out = layer(x)
                        if step in (0, 2):  # the step's only native reduction: a broadcast's gradient
                            out = out + (shift if step == 2 else shift.view(3) * 0)
                        out.square().mean().backward()
                        if step >= 1:
                            off = _python_dispatch._get_current_dispatch_mode() is None
                            self.assertEqual(off, watch == "first-step")
                (entry,) = [e for e in fplab.torch.coverage().native if e.op == "aten.sum.dim_IntList"]
                self.assertTrue(entry.reason.startswith("a reduction run natively inside the backward pass"))
                self.assertEqual(entry.count, 1 + late_one_listed)  # step 0's, and step 2's when watched
        with self.assertRaisesRegex(fplab.Error, "watch must be one of first-step, always"):
            fplab.torch.emulate("h100", watch="sometimes")

    def test_float64_runs_natively(self):
        layer = nn.Linear(3, 2).double()
        with fplab.torch.emulate("h100"):
            layer(torch.randn(4, 3, dtype=torch.float64))
        (entry,) = [e for e in fplab.torch.coverage().entries if e.op == "torch.nn.functional.linear"]
        self.assertEqual((entry.emulated, entry.reason), (False, "dtype float64: only float32 is emulated"))


@needs_torch
class HandlerBinding(unittest.TestCase):
    """A handler's direct binding of plain parameter lists gives inspect.Signature.bind's arguments,
    defaults applied, and refuses (None) exactly the calls bind refuses."""

    def test_direct_binding_equals_inspect(self):
        import inspect
        from fplab.torch._handler import handles

        def params(input, weight, bias=None, stride=1, padding=0): ...

        def keyword_only(input, *, scale=2): ...  # not plain: bound by inspect itself

        for stub in (params, keyword_only):
            handler = handles(stub)(lambda em, op, p: p)
            names = list(inspect.signature(stub).parameters) + ["other"]
            calls = 0
            for n_args in range(0, 7):
                args = tuple(range(n_args))
                for keys in itertools.chain.from_iterable(itertools.combinations(names, r) for r in range(3)):
                    kwargs = {k: f"k{k}" for k in keys}
                    try:
                        bound = inspect.signature(stub).bind(*args, **kwargs)
                        bound.apply_defaults()
                        want = dict(bound.arguments)
                    except TypeError:
                        want = None
                    self.assertEqual(handler._bound(args, kwargs), want, (stub.__name__, args, kwargs))
                    calls += 1
            self.assertGreaterEqual(calls, 49)  # 7 argument counts x every keyword set of up to two


@needs_torch
class Profiles(unittest.TestCase):
    def test_names_modes_and_paths(self):
        path = os.path.join(REPOSITORY, "profiles", "shipped", "v100.toml")
        for spec, mode in (("h100", "default"), ("h100:default", "default"), ("v100:deterministic", "deterministic"),
                           (path, "default"), (path + ":deterministic", "deterministic")):
            with self.subTest(spec=spec):
                emulation = fplab.torch.emulate(spec)
                self.assertEqual(emulation.mode, mode)
        self.assertEqual(fplab.torch.emulate(path).profile, "v100")

    def test_bad_profiles_are_one_line_errors(self):
        for spec, message in (("nope", "fplab.torch.emulate: unknown hardware profile 'nope' (known: a100-tf32,"),
                              ("h100:fast", "fplab.torch.emulate: profile takes NAME, NAME:default or "
                                            "NAME:deterministic (or a .toml path), not 'h100:fast'"),
                              ("./missing.toml", "fplab.torch.emulate: ./missing.toml: cannot open")):
            with self.subTest(spec=spec), self.assertRaises(fplab.Error) as raised:
                fplab.torch.emulate(spec)
            self.assertTrue(str(raised.exception).startswith(message), str(raised.exception))
            self.assertNotIn("\n", str(raised.exception))
        with self.assertRaisesRegex(fplab.Error, "impl_seed must be a whole number"):
            fplab.torch.emulate("h100", impl_seed=-1)

    def test_emulations_do_not_nest(self):
        with fplab.torch.emulate("h100"):
            with self.assertRaisesRegex(fplab.Error, "an emulation is already active"):
                with fplab.torch.emulate("cpu-seq"):
                    pass


if __name__ == "__main__":
    unittest.main()


@needs_torch
class OptimizerOnADevice(unittest.TestCase):
    """fplab's optimiser with PyTorch's operations (what CUDA parameters take) == its NumPy form, bit
    for bit, over several steps of SGD and Adam with weight decay: on a GPU where there is one,
    else on CPU tensors (the order of operations and the scalars; but not under PyTorch 2.x's CPU
    sqrt, which is not correctly rounded: that form is for CUDA parameters only)."""

    def test_the_two_updates_agree(self):
        from fplab.torch.models import Optimizer

        where = "cuda" if torch.cuda.is_available() else "cpu"
        if where == "cpu" and not torch.__version__.startswith("1."):
            self.skipTest("no GPU, and PyTorch 2.x's CPU sqrt is not correctly rounded")
        rng = np.random.default_rng(5)
        for kind in ("sgd", "adam"):
            w0 = rng.standard_normal(1000).astype(np.float32)
            host = torch.nn.Parameter(torch.from_numpy(w0.copy()))
            device = torch.nn.Parameter(torch.from_numpy(w0.copy()).to(where))
            opts = [Optimizer([(p, True)], kind, lr=0.01, weight_decay=0.003, decay_every=2) for p in (host, device)]
            for step in range(5):
                g = torch.from_numpy((rng.standard_normal(1000) * 10.0 ** rng.integers(-6, 2)).astype(np.float32))
                host.grad, device.grad = g.clone(), g.to(where)
                opts[0].step(epoch=step)
                # the device form, called directly on CPU tensors
                opts[1].steps += 1
                lr = np.float32(opts[1].lr_at(step))
                opts[1]._update_on_device(device.detach(), device.grad, opts[1].state[device], lr,
                                          np.float32(0.003))
                self.assertTrue(torch.equal(host.detach().view(torch.int32), device.detach().cpu().view(torch.int32)),
                                f"{kind}, step {step + 1}")
