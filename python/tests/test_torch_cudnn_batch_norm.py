"""fplab.torch's BatchNorm under h100-torch against cuDNN's own bits.

tests/data/cudnn_batch_norm_h200.npz holds what cuDNN 9.19 computed on an H200 (PyTorch 2.11,
experiments/bn_trials_torch.py, 2026-11-29) for random inputs: the outputs, input gradients and
gamma's and beta's gradients of F.batch_norm in training for the BatchNorm layers of small_cnn_bn
and medium_cnn at 14x14 pixels and below (batch 64) and of a ResNet-18's at 8x8, 7x7 and 4x4 (batch
128): cuDNN's singleread kernels, channel 0 of each. Under
fplab.torch.emulate("h100-torch") on the CPU, whose layer rules give those layers cuDNN's
revealed orders and arithmetic (batch_norm = "cudnn"), every element must be cuDNN's, in both
modes; under h100 (fplab's formulas) most are not, so the check can fail. Trained layers' outputs
at 8 images (docs/results/calibration_torch/bn_h200/trained_step79_8x16at28.npz and
trained_step79_8x32at14.npz: small_cnn_bn's two BatchNorms at step 79 of `batchnorm`, its last
batch, two channels of each kept) are cuDNN's singleread kernels' too, under h100-torch and
h100-torch-tf32, and so is the gamma gradient of the third (7x7, four channels of
trained_step79_8x32at7_backward.npz), whose warps meet by shuffles up. Also torch_reference.fma32 against
exact rational arithmetic, on random values and on products that land on float32 midpoints.
"""

import os
import unittest
from fractions import Fraction

import numpy as np

from shipped_profile_edits import EditedProfiles
from torch_reference import fma32, needs_torch, torch

if torch is not None:
    import fplab.torch

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "data",
                    "cudnn_batch_norm_h200.npz")
TRAINED_BATCH8 = [os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs", "results",
                               "calibration_torch", "bn_h200", name)
                  for name in ("trained_step79_8x16at28.npz", "trained_step79_8x32at14.npz")]
TRAINED_7_BATCH8_BACKWARD = os.path.join(os.path.dirname(TRAINED_BATCH8[0]), "trained_step79_8x32at7_backward.npz")


def _emulated(profile: str, x, gamma, beta, g, device="cpu"):
    """y, dx, dgamma, dbeta of F.batch_norm in training under emulate(profile), one channel."""
    xt = torch.from_numpy(x).to(device).requires_grad_()
    gt = torch.from_numpy(gamma).to(device).requires_grad_()
    bt = torch.from_numpy(beta).to(device).requires_grad_()
    with fplab.torch.emulate(profile):
        y = torch.nn.functional.batch_norm(xt, None, None, gt, bt, training=True, eps=1e-5)
        y.backward(torch.from_numpy(g).to(device))
    return [t.detach().cpu().numpy() for t in (y, xt.grad, gt.grad, bt.grad)]


def _same(a, b) -> float:
    return float(np.mean(np.asarray(a, np.float32).view(np.uint32) == np.asarray(b, np.float32).view(np.uint32)))


@needs_torch
class CudnnBatchNorm(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        with np.load(DATA) as data:
            cls.data = {k: data[k] for k in data.files}
        cls.trials = sorted({k.rsplit("/", 1)[0] for k in cls.data})

    def trial(self, key):
        d = {name: self.data[f"{key}/{name}"] for name in ("x", "g", "y", "dx", "gamma", "beta", "dgamma", "dbeta")}
        return d, (d["x"], d["gamma"][:1].copy(), d["beta"][:1].copy(), d["g"])

    def test_h100_torch_gives_cudnn_bits(self):
        self.assertGreaterEqual(len(self.trials), 24)  # batch 64 (18 trials), batch 128 (6)
        devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])  # CUDA tensors: on a GPU machine
        for device in devices:
            for profile in ("h100-torch", "h100-torch:deterministic"):
                for key in self.trials:
                    self.check_trial(device, profile, key)

    def check_trial(self, device, profile, key):
        d, inputs = self.trial(key)
        y, dx, dgamma, dbeta = _emulated(profile, *inputs, device=device)
        with self.subTest(device=device, profile=profile, trial=key):
            self.assertEqual(_same(y, d["y"]), 1.0)
            self.assertEqual(_same(dx, d["dx"]), 1.0)
            self.assertEqual(_same(dgamma, d["dgamma"][:1]), 1.0)
            self.assertEqual(_same(dbeta, d["dbeta"][:1]), 1.0)

    def test_trained_layers_at_8_images(self):
        for path in TRAINED_BATCH8:
            self.check_trained_layer(path)

    def check_trained_layer(self, path):
        with np.load(path) as z:
            x, w, b, chip = (torch.from_numpy(z[k]) for k in ("input", "weight", "bias", "chip_y"))
        devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
        for device in devices:
            for profile in ("h100-torch", "h100-torch:deterministic", "h100-torch-tf32:deterministic", "h100"):
                with self.subTest(fixture=os.path.basename(path), device=device, profile=profile):
                    with fplab.torch.emulate(profile):
                        y = torch.nn.functional.batch_norm(x.to(device), None, None, w.to(device), b.to(device),
                                                           training=True, eps=1e-5)
                    same = _same(y.cpu().numpy(), chip.numpy())
                    if profile == "h100":  # fplab's formulas: not cuDNN's bits
                        self.assertLess(same, 0.9)
                    else:
                        self.assertEqual(same, 1.0)

    def test_a_trained_layers_gamma_gradient_at_8_images_of_7x7(self):
        # 392 values a channel: the backward's 13 warps meet as by shuffles up (the 7x7 batch-8 rule);
        # without it, the tree of the other singleread rules misses these 4 channels (chosen so)
        with np.load(TRAINED_7_BATCH8_BACKWARD) as z:
            x, g, w, b, chip = (z[k] for k in ("input", "output_gradient", "weight", "bias", "chip_dgamma"))
        edited = EditedProfiles()
        self.addCleanup(edited.close)
        without = edited.without("h100-torch", 'layer = "bn", height = 7, batch = 8')
        devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
        for device in devices:
            for profile in ("h100-torch", "h100-torch:deterministic", "h100-torch-tf32:deterministic", without):
                with self.subTest(device=device, profile=os.path.basename(profile)):
                    _, _, dgamma, _ = _emulated(profile, x, w, b, g, device=device)
                    self.assertEqual(_same(dgamma, chip), 0.0 if profile == without else 1.0)

    def test_fplab_formulas_differ(self):
        """The control: h100's BatchNorm (fplab's formulas, other orders) misses many of cuDNN's bits."""
        shares = []
        for key in self.trials:
            d, inputs = self.trial(key)
            y, dx, _, _ = _emulated("h100", *inputs)
            shares += [_same(y, d["y"]), _same(dx, d["dx"])]
        self.assertLess(float(np.mean(shares)), 0.9)


@needs_torch
class Fma32(unittest.TestCase):
    @staticmethod
    def exact(a, b, c) -> np.float32:
        """fma(a, b, c) rounded once to nearest even, in rationals."""
        value = Fraction(float(a)) * Fraction(float(b)) + Fraction(float(c))
        near = np.float32(float(value))
        candidates = [np.nextafter(near, np.float32(-np.inf)), near, np.nextafter(near, np.float32(np.inf))]
        return min(candidates, key=lambda t: (abs(Fraction(float(t)) - value),
                                              int(np.array([t], np.float32).view(np.uint32)[0]) & 1))

    def test_against_rationals(self):
        rng = np.random.default_rng(9)
        a, b, c = rng.standard_normal((3, 4000)).astype(np.float32)
        c = (c * 10.0 ** rng.integers(-9, 9, 4000)).astype(np.float32)
        # (1 + 2^-12)^2 = 1 + 2^-11 + 2^-24, a float32 midpoint: c decides the side, or the even one.
        m = np.float32(1 + 2 ** -12)
        a = np.concatenate([a, [m, m, m, -m]]).astype(np.float32)
        b = np.concatenate([b, [m, m, m, m]]).astype(np.float32)
        c = np.concatenate([c, [0, 2 ** -70, -2 ** -70, 2 ** -70]]).astype(np.float32)
        got = fma32(torch.from_numpy(a), torch.from_numpy(b), torch.from_numpy(c)).numpy()
        wrong = [i for i in range(len(a)) if got[i] != self.exact(a[i], b[i], c[i])]
        self.assertEqual(wrong, [])
        self.assertNotEqual(got[-3], got[-2])  # the midpoint cases did take the correction

    def test_channel_fma_is_fma32_with_one_factor_per_channel(self):
        """The CPU's one-pass form (fplab._core.channel_fma), and on a GPU machine the CUDA engine's
        kernel (cuda_channel_fma), against fma32's, addend per channel and per element, with values
        that meet float32 midpoints among them."""
        from fplab.torch._fma import channel_fma
        rng = np.random.default_rng(10)
        x = torch.from_numpy(rng.standard_normal((3, 4, 5, 6)).astype(np.float32))
        x[0, 0, 0, 0] = 1 + 2 ** -12
        scale = torch.from_numpy(rng.standard_normal(4).astype(np.float32))
        scale[0] = 1 + 2 ** -12
        per_channel = torch.from_numpy(rng.standard_normal(4).astype(np.float32) * 1e-3)
        per_channel[0] = 2 ** -70
        per_element = torch.from_numpy(rng.standard_normal((3, 4, 5, 6)).astype(np.float32))
        shape = (1, 4, 1, 1)
        for addend, broadcast in ((per_channel, per_channel.view(shape)), (per_element, per_element)):
            want = fma32(x, scale.view(shape), broadcast)
            self.assertTrue(torch.equal(channel_fma(x, scale, addend), want))
        self.assertNotEqual(float(channel_fma(x, scale, per_channel)[0, 0, 0, 0]),
                            float(((x[0, 0, 0, 0].double() * scale[0].double()).float() + per_channel[0])))
        if torch.cuda.is_available() and hasattr(fplab._core, "cuda_channel_fma"):  # the CUDA engine's kernel
            for addend, broadcast in ((per_channel, per_channel.view(shape)), (per_element, per_element)):
                on = [t.cuda().contiguous() for t in (x, scale, addend)]
                out = torch.empty_like(on[0])
                fplab._core.cuda_channel_fma(on[0].data_ptr(), on[1].data_ptr(), on[2].data_ptr(), addend.dim() != 1,
                                             (3, 4, 30), out.data_ptr(), torch.cuda.current_device())
                torch.cuda.synchronize()
                self.assertTrue(torch.equal(out.cpu(), fma32(x, scale.view(shape), broadcast)))


if __name__ == "__main__":
    unittest.main()
