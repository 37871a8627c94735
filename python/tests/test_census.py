"""fplab.torch.census: ulp distances against a direct count on the float line; the gradient census
finds no difference where the step is deterministic and exactly the noisy gradients where a
profile draws noise (h100: the bias gradients, by atomics; its deterministic table: none); the
kernel census replays every reduction kernel of a step and finds PyTorch's CPU kernels stable."""

import unittest

import numpy as np

from fplab_command import experiment_script
from torch_reference import needs_torch, torch

if torch is not None:
    from fplab.torch import census, models


@needs_torch
class UlpDistance(unittest.TestCase):
    def test_against_stepping_along_the_float_line(self):
        rng = np.random.default_rng(3)
        a = rng.standard_normal(200).astype(np.float32)
        steps = rng.integers(-40, 40, 200)
        b = a.copy()
        for i, k in enumerate(steps):  # walk k representable floats from a[i]
            for _ in range(abs(int(k))):
                b[i] = np.nextafter(b[i], np.float32(np.inf if k > 0 else -np.inf), dtype=np.float32)
        got = census.ulp_distance(torch.from_numpy(a), torch.from_numpy(b)).numpy()
        np.testing.assert_array_equal(got, np.abs(steps))

    def test_signed_zero_and_across_zero(self):
        t = lambda *v: torch.tensor(v, dtype=torch.float32)  # noqa: E731
        tiny = float(np.nextafter(np.float32(0), np.float32(1)))
        self.assertEqual(census.ulp_distance(t(0.0), t(-0.0)).tolist(), [1])
        self.assertEqual(census.ulp_distance(t(tiny), t(-tiny)).tolist(), [3])  # tiny, +0, -0, -tiny
        self.assertEqual(census.ulp_distance(t(1.5), t(1.5)).tolist(), [0])
        self.assertGreater(census.ulp_distance(t(float("nan")), t(1.0)).item(), 2**60)


@needs_torch
class RowStatistics(unittest.TestCase):
    def test_share_runs_max_and_median_over_every_later_run(self):
        def walked(values, steps):  # each value moved `step` floats up
            out = np.array(values, np.float32)
            for i, k in enumerate(steps):
                for _ in range(k):
                    out[i] = np.nextafter(out[i], np.float32(np.inf), dtype=np.float32)
            return torch.from_numpy(out)

        first = torch.tensor([1.0, 2.0, 3.0, 4.0])
        later = [walked([1.0, 2.0, 3.0, 4.0], [1, 0, 3, 0]), walked([1.0, 2.0, 3.0, 4.0], [0, 2, 0, 0]),
                 first.clone()]
        row = census._compare(census.CensusRow("t", ()), first, later)
        self.assertEqual((row.elements, row.runs, row.runs_differing), (4, 3, 2))
        self.assertEqual(row.differing, 0.5)  # two of four in the first later run
        self.assertEqual(row.ulp_max, 3)
        self.assertEqual(row.ulp_median, 2.0)  # of 1, 3, 2
        row = census._compare(census.CensusRow("t", ()), first, later[:1])
        self.assertEqual(row.ulp_median, 2.0)  # of 1 and 3: the mean of the middle two


@needs_torch
class GradientCensus(unittest.TestCase):
    def setUp(self):
        self.net = models.build("small_cnn")
        generator = torch.Generator().manual_seed(1)
        self.x = torch.rand(16, 1, 28, 28, generator=generator)
        self.y = torch.randint(0, 10, (16,), generator=generator)

    def differing(self, rows):
        return {row.name for row in rows if row.runs_differing}

    def test_native_cpu_step_is_reproducible_and_state_is_kept(self):
        before = {k: v.clone() for k, v in self.net.state_dict().items()}
        rows = census.gradient_census(self.net, self.x, self.y, runs=3)
        self.assertEqual(self.differing(rows), set())
        self.assertEqual(rows[0].name, "loss")
        self.assertEqual(len(rows), 1 + len(list(self.net.parameters())))
        self.assertTrue(all(row.runs == 2 for row in rows))
        for k, v in self.net.state_dict().items():
            self.assertTrue(torch.equal(v, before[k]), k)
        self.assertTrue(all(p.grad is None for p in self.net.parameters()))

    def test_h100_draws_noise_in_bias_gradients_only(self):
        rows = census.gradient_census(self.net, self.x, self.y, profile="h100", runs=3)
        noisy = self.differing(rows)
        self.assertTrue(noisy)
        self.assertTrue(all(name.endswith(" bias") for name in noisy), noisy)
        row = next(r for r in rows if r.name in noisy)
        self.assertGreater(row.ulp_max, 0)
        self.assertGreater(row.differing, 0)

    def test_a_deterministic_table_draws_none(self):
        rows = census.gradient_census(self.net, self.x, self.y, profile="h100:deterministic", runs=3)
        self.assertEqual(self.differing(rows), set())

    def test_kernel_census_replays_the_step_reductions(self):
        rows = census.kernel_census(self.net, self.x, self.y, runs=2)
        names = [row.name for row in rows]
        self.assertIn("convolution_backward wgrad #1", names)
        self.assertIn("convolution_backward bias_grad #1", names)
        self.assertTrue(any(name.startswith("addmm") for name in names))
        self.assertEqual(self.differing(rows), set())
        self.assertIn("| convolution #1 | 16x16x28x28 |", census.format_table(rows))

    def test_runs_below_two_is_an_error(self):
        import fplab
        with self.assertRaisesRegex(fplab.Error, "runs must be at least 2"):
            census.gradient_census(self.net, self.x, self.y, runs=1)


@needs_torch
class CensusScript(unittest.TestCase):
    """experiments/census_torch.py run and table, on the CPU, as docs/results/census.md runs them."""

    def test_run_then_table(self):
        import contextlib
        import io
        import json
        import os
        import tempfile

        script = experiment_script("census_torch")
        with tempfile.TemporaryDirectory() as out:
            with contextlib.redirect_stdout(io.StringIO()):
                self.assertEqual(script.main(["run", "--device", "cpu", "--models", "mlp", "--modes", "default",
                                              "--tf32", "off", "--profiles", "h100", "--runs", "2", "--out", out]), 0)
            with open(os.path.join(out, "census.jsonl"), encoding="utf-8") as f:
                records = [json.loads(line) for line in f]
            self.assertEqual([(r["source"], r["view"]) for r in records],
                             [("torch default, TF32 off", "gradients"), ("torch default, TF32 off", "kernels"),
                              ("fplab h100", "gradients")])
            text = io.StringIO()
            with contextlib.redirect_stdout(text):
                self.assertEqual(script.main(["table", out]), 0)
            self.assertIn("| mlp | torch default, TF32 off | 0 of 4 | 0.0% | - | none |", text.getvalue())
            self.assertIn("| mlp | fplab h100 | 2 of 4 |", text.getvalue())


if __name__ == "__main__":
    unittest.main()
