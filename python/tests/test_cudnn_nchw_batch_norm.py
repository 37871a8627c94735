"""fplab._core.cudnn_nchw_forward/backward (sim/cudnn_nchw_batch_norm): cuDNN's BatchNorm kernels for
larger planes (bn_fw_tr_1C11_kernel_NCHW, bn_bw_1C11_kernel_new) against the H200's bits in
docs/results/calibration_torch/bn_h200: at 64x16@28 (counter_64x16at28.npz) every channel's mean,
inverse standard deviation, dgamma and dbeta of 8 trials (inputs rebuilt from their counter values)
and channel 0's y and dx of trials 0 and 1; a ResNet-18's shapes at batch 128
(counter_resnet_batch128.npz: 16x16, 32x32, and 14x14's backward) and on 28x28 images
(counter_128x64at28.npz, both modes' bits alike); a trained layer's channel, whose threads' means lie
apart (trained_step7_64x16at28.npz: small_cnn_bn's first BatchNorm at step 7 of `batchnorm`, algo seed 1,
the one channel where the variance's partials fl(M2 + fl(fl(k dm) dm)) missed the chip's inv_std by an
ulp and fma(k, fl(dm dm), M2) does not); the shapes it does not take refused in one line."""

import os
import unittest

import numpy as np

import fplab
from fplab import _core
from fplab_command import experiment_script
from torch_reference import needs_torch, torch

FOLDER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs", "results", "calibration_torch",
                      "bn_h200")
DATA = os.path.join(FOLDER, "counter_64x16at28.npz")
RESNET = os.path.join(FOLDER, "counter_resnet_batch128.npz")
AT28_128 = os.path.join(FOLDER, "counter_128x64at28.npz")
TRAINED = os.path.join(FOLDER, "trained_step7_64x16at28.npz")


def same(a, b) -> int:
    return int((np.asarray(a, np.float32).view(np.uint32) == np.asarray(b, np.float32).view(np.uint32)).sum())


class CudnnNchw(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.trials = experiment_script("bn_trials_torch")

    def _model_against_saved(self, path: str, shape: tuple, trials) -> None:
        """_core's forward and backward on each trial's counter inputs of shape (batch, channels,
        size) against the H200's bits saved in path: every channel's mean, inv_std, dgamma and
        dbeta; channel 0's y and dx where the trial saved them (at least one did)."""
        batch, channels, size = shape
        name = "%dx%d@%d" % shape
        with np.load(path) as saved:
            self.assertIn(f"{name}/0/y", saved.files)
            for trial in trials:
                key = f"{name}/{trial}/"
                inputs = self.trials.inputs(shape, trial, "counter")
                x, g = (inputs[k].reshape(batch, channels, size * size) for k in ("x", "g"))
                y, mean, inv_std, _ = _core.cudnn_nchw_forward(x, saved[key + "gamma"], saved[key + "beta"], 1e-5)
                dx, dgamma, dbeta = _core.cudnn_nchw_backward(g, x, mean, inv_std, saved[key + "gamma"])
                with self.subTest(shape=name, trial=trial):
                    for stat, have in (("mean", mean), ("invstd", inv_std), ("dgamma", dgamma), ("dbeta", dbeta)):
                        self.assertEqual(same(have, saved[key + stat]), channels, stat)
                    if key + "y" in saved.files:
                        self.assertEqual(same(y[:, 0], saved[key + "y"].reshape(batch, -1)), batch * size * size)
                        self.assertEqual(same(dx[:, 0], saved[key + "dx"].reshape(batch, -1)), batch * size * size)

    def test_the_h200s_bits(self):
        self._model_against_saved(DATA, (64, 16, 28), range(8))

    def test_a_trained_layers_channel(self):
        # The chip's outputs of the first four images follow from its mean and inv_std: all 3136 equal.
        with np.load(TRAINED) as saved:
            x = saved["x"].reshape(64, 1, 784)
            y, _, _, _ = _core.cudnn_nchw_forward(x, saved["gamma"], saved["beta"], 1e-5)
            self.assertEqual(same(y[:4, 0], saved["y"]), 4 * 784)

    @needs_torch
    def test_fplab_torch_under_h100_torch(self):
        """F.batch_norm at 64x16@28 under both modes of h100-torch (its cudnn-nchw rule): cuDNN's bits,
        forward and backward, on the CPU and (on a GPU machine) on CUDA tensors, by the device twin."""
        import fplab.torch
        import torch.nn.functional as F
        devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
        moved: dict = {}
        with np.load(DATA) as saved:
            key = "64x16@28/1/"
            inputs = self.trials.inputs((64, 16, 28), 1, "counter")
            for profile, device in ((p, d) for p in ("h100-torch", "h100-torch:deterministic") for d in devices):
                x = torch.from_numpy(inputs["x"]).to(device).requires_grad_()
                gamma = torch.from_numpy(saved[key + "gamma"].copy()).to(device).requires_grad_()
                beta = torch.from_numpy(saved[key + "beta"].copy()).to(device).requires_grad_()
                running_mean, running_var = torch.zeros(16, device=device), torch.ones(16, device=device)
                with fplab.torch.emulate(profile):
                    y = F.batch_norm(x, running_mean, running_var, gamma, beta, training=True, momentum=0.1, eps=1e-5)
                    y.backward(torch.from_numpy(inputs["g"]).to(device))
                    self.assertEqual({e.where for e in fplab.torch.coverage().emulated}, {device})
                y, dx = y.detach().cpu(), x.grad.cpu()
                dgamma, dbeta, running_mean = gamma.grad.cpu(), beta.grad.cpu(), running_mean.cpu()
                # moved by the device's kernel on CUDA tensors, by _move_running on the CPU: the same bits
                moved.setdefault(profile, []).append(np.concatenate([running_mean.numpy(), running_var.cpu().numpy()]))
                with self.subTest(profile=profile, device=device):
                    self.assertEqual(same(y[:, 0].reshape(64, 784), saved[key + "y"].reshape(64, 784)), 50176)
                    self.assertEqual(same(dx[:, 0].reshape(64, 784), saved[key + "dx"].reshape(64, 784)), 50176)
                    self.assertEqual(same(dgamma, saved[key + "dgamma"]), 16)
                    self.assertEqual(same(dbeta, saved[key + "dbeta"]), 16)
                    # the running mean moved from the kernel's mean
                    self.assertTrue(np.allclose(running_mean.numpy(), 0.1 * saved[key + "mean"], rtol=1e-6))
        for profile, stats in moved.items():
            for other in stats[1:]:
                self.assertEqual(same(other, stats[0]), 32, profile)

    def test_a_resnet18s_shapes(self):
        """Batch 128 at 16x16 and 32x32 (the forward kernels' template 32 and 128: 16 warps of 32
        pixel lanes, 4 groups of 128) and the backward at 14x14 (after the singleread forward)."""
        with np.load(RESNET) as saved:
            for shape, forward in (((128, 128, 16), True), ((128, 64, 32), True), ((128, 128, 14), False)):
                name = "%dx%d@%d" % shape
                for trial in (0, 1):
                    key = f"{name}/{trial}/"
                    inputs = self.trials.inputs(shape, trial, "counter")
                    batch, channels, size = shape
                    x, g = (inputs[k].reshape(batch, channels, size * size) for k in ("x", "g"))
                    with self.subTest(shape=name, trial=trial):
                        if forward:
                            y, mean, inv_std, _ = _core.cudnn_nchw_forward(x, saved[key + "gamma"], saved[key + "beta"],
                                                                            1e-5)
                            self.assertEqual(same(mean, saved[key + "mean"]), channels)
                            self.assertEqual(same(inv_std, saved[key + "invstd"]), channels)
                            if key + "y" in saved.files:
                                self.assertEqual(same(y[:, 0], saved[key + "y"].reshape(batch, -1)),
                                                 batch * size * size)
                        mean, inv_std = saved[key + "mean"], saved[key + "invstd"]  # the forward's, whichever ran
                        dx, dgamma, dbeta = _core.cudnn_nchw_backward(g, x, mean, inv_std, saved[key + "gamma"])
                        self.assertEqual(same(dgamma, saved[key + "dgamma"]), channels)
                        self.assertEqual(same(dbeta, saved[key + "dbeta"]), channels)
                        if key + "dx" in saved.files:
                            self.assertEqual(same(dx[:, 0], saved[key + "dx"].reshape(batch, -1)), batch * size * size)

    def test_28x28_at_batch_128(self):
        """A ResNet-18's first BatchNorms on Fashion-MNIST (128 images of 28x28, 196 values a thread):
        every channel's statistics and gradients of two trials, channel 0's outputs and input
        gradients of the first (the H200 gave the same bits in both modes)."""
        self._model_against_saved(AT28_128, (128, 64, 28), (0, 1))

    @needs_torch
    def test_fplab_torch_at_a_resnet18s_shapes(self):
        """F.batch_norm under h100-torch at batch 128: 16x16 and 32x32 in the NCHW kernels' form, 14x14 in
        cudnn-nchw-backward's (the singleread forward, the NCHW backward): the H200's bits."""
        import fplab.torch
        import torch.nn.functional as F
        with np.load(RESNET) as saved:
            for shape in ((128, 128, 14), (128, 128, 16), (128, 64, 32)):
                batch, channels, size = shape
                key = "%dx%d@%d/0/" % shape
                inputs = self.trials.inputs(shape, 0, "counter")
                x = torch.from_numpy(inputs["x"]).requires_grad_()
                gamma = torch.from_numpy(saved[key + "gamma"].copy()).requires_grad_()
                beta = torch.from_numpy(saved[key + "beta"].copy()).requires_grad_()
                running_mean = torch.zeros(channels)
                with fplab.torch.emulate("h100-torch"):
                    y = F.batch_norm(x, running_mean, torch.ones(channels), gamma, beta, training=True, momentum=1.0,
                                     eps=1e-5)
                    y.backward(torch.from_numpy(inputs["g"]))
                with self.subTest(shape=shape):
                    self.assertEqual(same(running_mean, saved[key + "mean"]), channels)  # momentum 1: the mean
                    if key + "y" in saved.files:
                        self.assertEqual(same(y.detach()[:, 0].reshape(batch, -1), saved[key + "y"].reshape(batch, -1)),
                                         batch * size * size)
                    self.assertEqual(same(x.grad[:, 0].reshape(batch, -1), saved[key + "dx"].reshape(batch, -1)),
                                     batch * size * size)
                    self.assertEqual(same(gamma.grad, saved[key + "dgamma"]), channels)
                    self.assertEqual(same(beta.grad, saved[key + "dbeta"]), channels)

    @needs_torch
    @unittest.skipUnless(torch is not None and torch.cuda.is_available()
                         and hasattr(_core, "cuda_batch_norm_nchw_forward"),
                         "no CUDA device (or fplab built without CUDA): the device twin is not run")
    def test_the_device_twin(self):
        """sim/cuda/gpu_batch_norm_cudnn's kernels give _core's (the host model's) bits at every measured
        layout, forward and backward."""
        for shape in ((64, 16, 28), (128, 128, 16), (128, 64, 32), (128, 32, 14)):
            batch, channels, size = shape
            inputs = self.trials.inputs(shape, 0, "counter")
            x, g = (inputs[k].reshape(batch, channels, size * size) for k in ("x", "g"))
            gamma, beta = inputs["gamma"], inputs["beta"]
            forward = size != 14  # at 14x14 the forward is the singleread kernel: the backward alone is this one
            if forward:
                want_y, mean, inv_std, var = _core.cudnn_nchw_forward(x, gamma, beta, 1e-5)
            else:
                mean = x.mean(axis=(0, 2)).astype(np.float32)
                inv_std = (1 / np.sqrt(x.var(axis=(0, 2)) + 1e-5)).astype(np.float32)
            want_dx, want_dgamma, want_dbeta = _core.cudnn_nchw_backward(g, x, mean, inv_std, gamma)
            on = {k: torch.from_numpy(v).cuda() for k, v in dict(x=x, g=g, gamma=gamma, beta=beta).items()}
            stats = torch.empty(3, channels, device="cuda")
            y = torch.empty_like(on["x"])
            if forward:
                _core.cuda_batch_norm_nchw_forward(on["x"].data_ptr(), on["gamma"].data_ptr(), on["beta"].data_ptr(),
                                                   stats.data_ptr(), y.data_ptr(), (batch, channels, size * size),
                                                   1e-5, torch.cuda.current_device())
            grads, dx = torch.empty(4, channels, device="cuda"), torch.empty_like(on["x"])
            mean_d, inv_d = torch.from_numpy(mean).cuda(), torch.from_numpy(inv_std).cuda()
            _core.cuda_batch_norm_nchw_backward(on["g"].data_ptr(), on["x"].data_ptr(), mean_d.data_ptr(),
                                                inv_d.data_ptr(), on["gamma"].data_ptr(), grads.data_ptr(),
                                                dx.data_ptr(), (batch, channels, size * size),
                                                torch.cuda.current_device())
            torch.cuda.synchronize()
            stats, grads = stats.cpu().numpy(), grads.cpu().numpy()
            with self.subTest(shape=shape):
                if forward:
                    self.assertEqual(same(stats[0], mean) + same(stats[1], inv_std) + same(stats[2], var),
                                     3 * channels)
                    self.assertEqual(same(y.cpu().numpy(), want_y), want_y.size)
                self.assertEqual(same(grads[0], want_dgamma) + same(grads[1], want_dbeta), 2 * channels)
                self.assertEqual(same(dx.cpu().numpy(), want_dx), want_dx.size)

    def test_other_shapes_are_refused(self):
        for batch, positions in ((64, 784), (32, 784), (128, 256), (128, 1024)):
            self.assertEqual(_core.cudnn_nchw_why_not(batch, positions), "")
        # at 14x14 only the backward kernel is this one (its forward the singleread kernel)
        self.assertEqual(_core.cudnn_nchw_why_not(128, 196, backward=True), "")
        self.assertIn("measured at 16x16", _core.cudnn_nchw_why_not(128, 196))
        for batch, positions in ((60, 784), (64, 1000), (96, 784), (130, 1024), (1024, 1024)):
            self.assertIn("cuDNN's NCHW BatchNorm model", _core.cudnn_nchw_why_not(batch, positions))
            with self.assertRaises((ValueError, fplab.Error)) as raised:
                _core.cudnn_nchw_forward(np.zeros((batch, 2, positions), np.float32), np.ones(2, np.float32),
                                         np.zeros(2, np.float32), 1e-5)
            self.assertEqual(len(str(raised.exception).splitlines()), 1)


if __name__ == "__main__":
    unittest.main()
