"""small_cnn_bn's recipes' last batch of 8 images, where cuBLAS and cuDNN change kernels, against the
H200's own bits through fplab.torch (on this machine's CPU, and on CUDA tensors where a GPU is
present). Each fixture in docs/results/calibration_torch/last_batch_h200/ is the block that
`recipe_torch.py diverge --culprit` saved at step 79 of `batchnorm` (fp32) or `batchnorm_sgd` with
TF32 (algo seed 1): its inputs and the chip's output.
- the 288->32 linear forward at 8 rows: cuBLAS's small-N kernel, deal(16,1)[contig(16):seq | all:seq]
  | all:seq (the 64-row rule's split K misses most values);
- the 1->16 weight gradient at 28x28 in deterministic mode: 32 strided FMA chains, where at 64
  images cuDNN runs Winograd (two output channels of the gradient kept, the others zero);
- the 32->32 input gradient at 7x7 in deterministic mode with TF32: one tensor-core chain over the
  kernel positions in reverse.
docs/results/calibration_torch.md ("The last batch") says how each was found."""

import os
import unittest

import numpy as np

from shipped_profile_edits import EditedProfiles
from torch_reference import needs_torch, torch

if torch is not None:
    import fplab.torch
    import torch.nn.functional as F

FOLDER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs", "results", "calibration_torch",
                      "last_batch_h200")


def share(a, b) -> float:
    """The share of elements of a and b with the same float32 bits."""
    a = np.asarray(a.detach().cpu() if hasattr(a, "detach") else a, np.float32)
    return float(np.mean(a.view(np.uint32) == np.asarray(b, np.float32).view(np.uint32)))


def devices():
    return ["cpu"] + (["cuda"] if torch is not None and torch.cuda.is_available() else [])


def fixture(name):
    with np.load(os.path.join(FOLDER, name)) as z:
        return {k: torch.from_numpy(z[k]) for k in z.files}


@needs_torch
class LastBatch(unittest.TestCase):
    """Each check has its control: the same profile without the batch-8 rule misses the chip's bits."""

    @classmethod
    def setUpClass(cls):
        cls.edited = EditedProfiles()

    @classmethod
    def tearDownClass(cls):
        cls.edited.close()

    def test_linear_forward_at_8_rows(self):
        z = fixture("linear_step79_8x288to32.npz")
        without = self.edited.without("h100-torch", 'layer = "linear", in = 288, out = 32, batch = 8')
        for device in devices():
            for profile in ("h100-torch", "h100-torch:deterministic", "h100-torch-tf32", without):
                with fplab.torch.emulate(profile):
                    y = F.linear(z["input"].to(device), z["weight"].to(device), z["bias"].to(device))
                with self.subTest(device=device, profile=os.path.basename(profile)):
                    if profile == without:  # the 64-row rule's split K
                        self.assertLess(share(y, z["chip_y"]), 0.5)
                    else:
                        self.assertEqual(share(y, z["chip_y"]), 1.0)

    def test_first_layer_weight_gradient_at_8_images(self):
        z = fixture("conv_wgrad_step79_8x1to16at28.npz")
        kept = z["output_gradient"].shape[1]  # the fixture's output channels; the layer has 16
        gy = torch.zeros(8, 16, 28, 28)
        gy[:, :kept] = z["output_gradient"]
        without = self.edited.without(
            "h100-torch", 'layer = "conv", in = 1, out = 16, kernel = 3, stride = 1, height = 28, batch = 8')
        for device in devices():
            for profile in ("h100-torch:deterministic", without + ":deterministic"):
                w = torch.zeros(16, 1, 3, 3, device=device, requires_grad=True)
                with fplab.torch.emulate(profile):
                    F.conv2d(z["input"].to(device), w, None, padding=1).backward(gy.to(device))
                with self.subTest(device=device, profile=os.path.basename(profile)):
                    if profile.startswith(without):  # Winograd, the 64-image rule
                        self.assertLess(share(w.grad[:kept], z["chip_dw"]), 0.5)
                    else:
                        self.assertEqual(share(w.grad[:kept], z["chip_dw"]), 1.0)

    def test_input_gradient_at_7x7_with_tf32(self):
        z = fixture("conv_dgrad_step79_8x32to32at7_tf32.npz")
        gy, weight = z["output_gradient"], z["weight"]
        without = self.edited.without(
            "h100-torch-tf32", 'layer = "conv", in = 32, out = 32, kernel = 3, stride = 1, height = 7, batch = 8')
        for device in devices():
            for profile in ("h100-torch-tf32:deterministic", without + ":deterministic"):
                x = torch.zeros(gy.shape[0], weight.shape[1], 7, 7, device=device, requires_grad=True)
                with fplab.torch.emulate(profile):
                    F.conv2d(x, weight.to(device), None, padding=1).backward(gy.to(device))
                with self.subTest(device=device, profile=os.path.basename(profile)):
                    if profile.startswith(without):  # the table's fp32 chain
                        self.assertLess(share(x.grad, z["chip_dx"]), 0.5)
                    else:
                        self.assertEqual(share(x.grad, z["chip_dx"]), 1.0)


if __name__ == "__main__":
    unittest.main()
