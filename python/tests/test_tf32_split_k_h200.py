"""h100-torch-tf32's revealed TF32 convolution kernels against the H200's own bits, through
fplab.torch on this machine's CPU (and on CUDA tensors where a GPU is present):
- the 16->32 weight gradient at 14x14 and 64 images, deal(90,64)[all:fused(tc-h100-tf32-rna)] |
  cols(89) | all:seq, in both modes: the chip's dW of calibration_torch/tf32_wgrad_14x14_h200.npz,
  whose x (64x16x14x14) and gy (64x32x14x14) are torch.randn of torch.Generator().manual_seed(7);
- the 1->16 weight gradient at 28x28 and 64 images in deterministic mode, deal(20,64)[...] | cols(19)
  | all:seq (tf32_h200/wgrad_1to16_at28_batch64_step1.npz: step 1 of `hardware` with TF32, algo seed
  1, one output channel's gradient kept);
- the 32->32 input gradient at 7x7 and 32 images in deterministic mode, one tensor-core chain over
  the kernel positions in reverse (tf32_h200/dgrad_32to32_at7_batch32_step63.npz: step 63, the
  recipe's last, partial batch).
docs/results/reveal_torch.md and docs/results/calibration_torch.md say how each was found."""

import os
import unittest

import numpy as np

from torch_reference import needs_torch, torch

FOLDER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs", "results", "calibration_torch")


def same(a, b) -> int:
    return int((np.asarray(a, np.float32).view(np.uint32) == np.asarray(b, np.float32).view(np.uint32)).sum())


def devices():
    return ["cpu"] + (["cuda"] if torch is not None and torch.cuda.is_available() else [])


@needs_torch
class Tf32SplitK(unittest.TestCase):
    def weight_gradient(self, profile, x, gy, device, bias=True):
        import fplab.torch
        import torch.nn.functional as F
        w = torch.zeros(gy.shape[1], x.shape[1], 3, 3, device=device, requires_grad=True)
        b = torch.zeros(gy.shape[1], device=device, requires_grad=True) if bias else None
        with fplab.torch.emulate(profile):
            F.conv2d(x.to(device), w, b, padding=1).backward(gy.to(device))
        return w.grad.cpu().numpy()

    def test_16_to_32_at_14x14_both_modes(self):
        chip = np.load(os.path.join(FOLDER, "tf32_wgrad_14x14_h200.npz"))
        g = torch.Generator().manual_seed(7)
        x, gy = torch.randn(64, 16, 14, 14, generator=g), torch.randn(64, 32, 14, 14, generator=g)
        for device in devices():
            for mode, key in (("", "dw_0_default"), (":deterministic", "dw_0_det")):
                with self.subTest(device=device, mode=mode or "default"):
                    dw = self.weight_gradient("h100-torch-tf32" + mode, x, gy, device)
                    self.assertEqual(same(dw, chip[key]), dw.size)
        # The assumption it replaced, one tensor-core chain with truncated factors, meets none of them.
        import fplab
        xp = torch.nn.functional.pad(x, (1, 1, 1, 1)).numpy()
        for co, ci, r, c in ((0, 0, 1, 1), (5, 3, 0, 2), (31, 15, 2, 0)):
            one_chain = fplab.dot(np.ascontiguousarray(xp[:, ci, r:r + 14, c:c + 14].reshape(-1)),
                                  np.ascontiguousarray(gy.numpy()[:, co].reshape(-1)), "tc-h100-tf32", format="fp32")
            self.assertNotEqual(np.float32(one_chain), chip["dw_0_det"][co, ci, r, c])

    def test_1_to_16_at_28x28_deterministic(self):
        z = np.load(os.path.join(FOLDER, "tf32_h200", "wgrad_1to16_at28_batch64_step1.npz"))
        channel = int(z["channel"])
        gy = torch.zeros(64, 16, 28, 28)
        gy[:, channel] = torch.from_numpy(z["output_gradient"][:, 0])
        for device in devices():
            with self.subTest(device=device):
                dw = self.weight_gradient("h100-torch-tf32:deterministic", torch.from_numpy(z["input"]), gy, device)
                self.assertEqual(same(dw[channel], z["chip_dw"][0]), 9)
                # h100-torch's rule (Winograd, TF32 off) is another kernel: not these bits.
                other = self.weight_gradient("h100-torch:deterministic", torch.from_numpy(z["input"]), gy, device)
                self.assertLess(same(other[channel], z["chip_dw"][0]), 9)

    def test_32_to_32_input_gradient_at_7x7_32_images(self):
        import fplab.torch
        import torch.nn.functional as F
        z = np.load(os.path.join(FOLDER, "tf32_h200", "dgrad_32to32_at7_batch32_step63.npz"))
        w, b, gy = (torch.from_numpy(z[k]) for k in ("weight", "bias", "output_gradient"))
        for device in devices():
            for profile, expect_all in (("h100-torch-tf32:deterministic", True), ("h100-torch:deterministic", False)):
                with self.subTest(device=device, profile=profile):
                    x = torch.zeros(32, 32, 7, 7, device=device, requires_grad=True)
                    with fplab.torch.emulate(profile):
                        F.conv2d(x, w.to(device), b.to(device), padding=1).backward(gy.to(device))
                    matched = same(x.grad.cpu().numpy(), z["chip_dx"])
                    if expect_all:
                        self.assertEqual(matched, z["chip_dx"].size)
                    else:
                        self.assertLess(matched, z["chip_dx"].size // 2)


if __name__ == "__main__":
    unittest.main()
