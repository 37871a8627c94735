"""fplab.torch: implementation noise follows its keys. A deterministic table gives the same bits for
every impl seed; the h100 default table (atomic bias gradients) the same bits for the same seed
and other bits for another; every training step draws its own stream, and evaluating between
steps leaves the training bits as they were."""

import unittest

import numpy as np

from torch_reference import needs_torch, torch

if torch is not None:
    import torch.nn.functional as F

    import fplab.torch


def small_mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(20, 32), torch.nn.ReLU(), torch.nn.Linear(32, 10))


def batch():
    generator = torch.Generator().manual_seed(1)
    return torch.randn(64, 20, generator=generator), torch.randint(0, 10, (64,), generator=generator)


def step_bits(model, x, y):
    """One forward and backward: the loss and every gradient, as their float32 bit patterns."""
    model.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    values = [loss.detach().reshape(1)] + [p.grad.reshape(-1) for p in model.parameters()]
    return torch.cat(values).numpy().view(np.uint32)


def one_step(profile, impl_seed, call=0):
    model, (x, y) = small_mlp(), batch()
    with fplab.torch.emulate(profile, impl_seed=impl_seed, call=call):
        return step_bits(model, x, y)


@needs_torch
class ImplSeeds(unittest.TestCase):
    def test_deterministic_tables_give_the_same_bits_for_every_seed(self):
        for profile in ("h100:deterministic", "v100:deterministic"):
            runs = [one_step(profile, seed) for seed in (0, 1, 12345)]
            with self.subTest(profile=profile):
                np.testing.assert_array_equal(runs[0], runs[1])
                np.testing.assert_array_equal(runs[0], runs[2])

    def test_default_h100_same_seed_same_bits_other_seed_other_bits(self):
        self.assertTrue(fplab.profile("h100").default["bias_grad"].nondeterministic)
        np.testing.assert_array_equal(one_step("h100", 3), one_step("h100", 3))
        self.assertTrue((one_step("h100", 3) != one_step("h100", 4)).any())

    def test_the_deterministic_table_differs_from_the_default_only_where_it_may(self):
        # bias gradients (atomics vs TF's column reduction) differ; the loss does not
        default, deterministic = one_step("h100", 3), one_step("h100:deterministic", 3)
        self.assertEqual(default[0], deterministic[0])


@needs_torch
class Steps(unittest.TestCase):
    def test_every_step_draws_its_own_stream_and_call_resumes_one(self):
        model, (x, y) = small_mlp(), batch()
        emulation = fplab.torch.emulate("h100", impl_seed=5)
        with emulation:
            first = step_bits(model, x, y)
        with emulation:  # entered again: the next step (call 1), the same weights and batch
            second = step_bits(model, x, y)
        self.assertEqual(emulation.call, 1)
        self.assertTrue((first != second).any())
        np.testing.assert_array_equal(first, one_step("h100", 5, call=0))
        np.testing.assert_array_equal(second, one_step("h100", 5, call=1))

    def test_evaluating_between_steps_leaves_training_bits_unchanged(self):
        runs = []
        for evaluate in (False, True):
            model, (x, y) = small_mlp(), batch()
            with fplab.torch.emulate("h100", impl_seed=2):
                step_bits(model, x, y)
                if evaluate:
                    with torch.no_grad():
                        model(x).argmax(1)
                runs.append(step_bits(model, x, y))
        np.testing.assert_array_equal(runs[0], runs[1])


if __name__ == "__main__":
    unittest.main()
