"""fplab.torch.step_compare: a training step compared layer by layer with a reference step."""

import unittest

from fplab_command import experiment_script

try:
    import torch
    import fplab.torch.models as models
    from fplab import Error
    from fplab.torch.step_compare import compare_step, format_rows
except ImportError:  # pragma: no cover - depends on the environment
    torch = None


def batch(size=16):
    generator = torch.Generator().manual_seed(7)
    return torch.rand(size, 1, 28, 28, generator=generator), torch.randint(0, 10, (size,), generator=generator)


@unittest.skipIf(torch is None, "PyTorch is not installed")
class StepCompare(unittest.TestCase):
    def test_a_deterministic_emulation_reproduces_itself(self):
        net = models.build("small_cnn")
        x, y = batch()
        rows = compare_step(net, x, y, "h100-torch:deterministic", reference="h100-torch:deterministic")
        self.assertEqual([row for row in rows if row.differing], [])
        # every layer's output, the loss and its gradient, and below the first convolution every
        # input gradient; each parameter's gradient; in both views
        layers = len(net.blocks)
        parameters = sum(1 for _ in net.parameters())
        self.assertEqual(len(rows), 2 * (layers + 2 + (layers - 1) + parameters))
        self.assertEqual({row.view for row in rows}, {"isolated", "chained"})

    def test_noise_keys_are_the_steps_own_in_both_views(self):
        # h100-torch adds the weight gradients at 28 and 14 pixels by atomics: the same seed on both
        # sides gives the same bits in both views, another seed other bits where the atomics are
        net = models.build("small_cnn")
        x, y = batch()
        same = compare_step(net, x, y, "h100-torch", impl_seed=1, reference="h100-torch", reference_seed=1)
        self.assertEqual([row for row in same if row.differing], [])
        other = compare_step(net, x, y, "h100-torch", impl_seed=2, reference="h100-torch", reference_seed=1,
                             views=("isolated",))
        differing = {row.layer.split(" ")[1] + " " + row.quantity for row in other if row.differing}
        self.assertEqual(differing, {"0 weight gradient", "3 weight gradient"})

    def test_another_order_differs_where_it_sums_and_only_there(self):
        net = models.build("small_cnn")
        x, y = batch()
        before = [p.detach().clone() for p in net.parameters()]
        rows = compare_step(net, x, y, "h100-torch:deterministic", reference="exact")
        isolated = {(row.layer, row.quantity): row for row in rows if row.view == "isolated"}
        # ReLU, max-pooling and flattening add nothing: given the reference's inputs they agree
        for (layer, quantity), row in isolated.items():
            if any(word in layer for word in ("relu", "maxpool", "flatten")):
                self.assertEqual(row.differing, 0, f"{layer} {quantity}")
        # a 144-term convolution in one FMA chain is not the exactly rounded sum everywhere
        second_conv = next(row for (layer, quantity), row in isolated.items()
                           if layer.startswith("layer 3 conv2d") and quantity == "output")
        self.assertGreater(second_conv.differing, 0)
        self.assertTrue(all(torch.equal(a, b) for a, b in zip(before, net.parameters())))
        self.assertIn("| layer 3 conv2d(16->32, 3x3, stride 1, pad 1) | output |", format_rows(rows))

    def test_pytorch_itself_as_the_reference(self):
        net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(784, 32), torch.nn.ReLU(), torch.nn.Linear(32, 10))
        x, y = batch()
        rows = compare_step(net, x, y, "h100-torch:deterministic", views=("isolated",))
        names = [(row.layer, row.quantity) for row in rows]
        self.assertIn(("loss", "logits gradient"), names)
        self.assertIn(("1 Linear", "weight gradient"), names)
        self.assertNotIn(("1 Linear", "input gradient"), names)  # nothing below it takes a gradient
        self.assertTrue(all(row.differing == 0 for row in rows if row.layer in ("0 Flatten", "2 ReLU")))

    def test_refusals(self):
        x, y = batch()
        with self.assertRaisesRegex(Error, "unknown view 'both'"):
            compare_step(models.build("mlp"), x, y, "h100", views=("both",))
        with self.assertRaisesRegex(Error, "nn.Sequential"):
            compare_step(torch.nn.Linear(784, 10), x, y, "h100")


@unittest.skipIf(torch is None, "PyTorch is not installed")
class StepCompareScript(unittest.TestCase):
    """experiments/step_compare_torch.py run and table on the CPU, and its refusals."""

    def test_run_then_table_and_refusals(self):
        import contextlib
        import io
        import json
        import os
        import tempfile

        script = experiment_script("step_compare_torch")
        with tempfile.TemporaryDirectory() as out:
            with contextlib.redirect_stdout(io.StringIO()):
                self.assertEqual(script.main(["run", "--device", "cpu", "--models", "mlp", "--settings",
                                              "deterministic,off,h100-torch:deterministic", "--out", out]), 0)
            with open(os.path.join(out, "step_compare.jsonl"), encoding="utf-8") as f:
                records = [json.loads(line) for line in f]
            self.assertEqual([(r["model"], r["mode"], r["tf32"], r["profile"]) for r in records],
                             [("mlp", "deterministic", "off", "h100-torch:deterministic")])
            self.assertEqual({row["view"] for row in records[0]["rows"]}, {"isolated", "chained"})
            text = io.StringIO()
            with contextlib.redirect_stdout(text):
                self.assertEqual(script.main(["table", out]), 0)
            self.assertIn("| mlp | deterministic, TF32 off | h100-torch:deterministic |", text.getvalue())
            for arguments, message in ((["--models", "resnet18"], "unknown model 'resnet18'"),
                                       (["--settings", "deterministic,off,nosuch"], "unknown hardware profile")):
                errors = io.StringIO()
                with contextlib.redirect_stderr(errors):
                    self.assertEqual(script.main(["run", "--device", "cpu", "--out", out] + arguments), 2)
                self.assertIn(message, errors.getvalue())
                self.assertEqual(errors.getvalue().count("\n"), 1)


if __name__ == "__main__":
    unittest.main()
