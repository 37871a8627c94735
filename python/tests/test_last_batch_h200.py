"""small_cnn_bn's recipes' last batch of 8 images, where cuBLAS and cuDNN change kernels, against the
H200's own bits through fplab.torch (on this machine's CPU, and on CUDA tensors where a GPU is
present). Each fixture in docs/results/calibration_torch/last_batch_h200/ is the block that
`recipe_torch.py diverge --culprit` saved at step 79 of `batchnorm` (fp32) or `batchnorm_sgd` with
TF32 (algo seed 1): its inputs and the chip's output.
- the 288->32 linear forward at 8 rows: cuBLAS's small-N kernel, deal(16,1)[contig(16):seq | all:seq]
  | all:seq (h100's one chain per output, and the 64-row rule before, miss most values);
- the 1->16 weight gradient at 28x28 in deterministic mode: 32 strided FMA chains, where at 64
  images cuDNN runs Winograd (two output channels kept);
- the 32->32 input gradient at 7x7 in deterministic mode with TF32: one tensor-core chain over the
  kernel positions in reverse.
docs/results/calibration_torch.md ("The last batch") says how each was found."""

import os
import unittest

import numpy as np

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
    def test_linear_forward_at_8_rows(self):
        z = fixture("linear_step79_8x288to32.npz")
        for device in devices():
            for profile in ("h100-torch", "h100-torch:deterministic", "h100-torch-tf32", "h100"):
                with fplab.torch.emulate(profile):
                    y = F.linear(z["input"].to(device), z["weight"].to(device), z["bias"].to(device))
                with self.subTest(device=device, profile=profile):
                    if profile == "h100":
                        self.assertLess(share(y, z["chip_y"]), 0.9)
                    else:
                        self.assertEqual(share(y, z["chip_y"]), 1.0)

    def test_first_layer_weight_gradient_at_8_images(self):
        z = fixture("conv_wgrad_step79_8x1to16at28.npz")
        gy = z["output_gradient"]
        for device in devices():
            w = torch.zeros(gy.shape[1], 1, 3, 3, device=device, requires_grad=True)
            with fplab.torch.emulate("h100-torch:deterministic"):
                F.conv2d(z["input"].to(device), w, None, padding=1).backward(gy.to(device))
            with self.subTest(device=device):
                self.assertEqual(share(w.grad, z["chip_dw"]), 1.0)

    def test_winograd_misses_it(self):
        # the control: the 64-image rule (Winograd) on the same terms
        z = fixture("conv_wgrad_step79_8x1to16at28.npz")
        gy = z["output_gradient"]
        x = torch.cat([z["input"]] * 8)  # 64 images: the Winograd rule's batch; the sum scales by 8 exactly
        w = torch.zeros(gy.shape[1], 1, 3, 3, requires_grad=True)
        with fplab.torch.emulate("h100-torch:deterministic"):
            F.conv2d(x, w, None, padding=1).backward(torch.cat([gy] * 8))
        self.assertLess(share(w.grad / 8, z["chip_dw"]), 0.5)

    def test_input_gradient_at_7x7_with_tf32(self):
        z = fixture("conv_dgrad_step79_8x32to32at7_tf32.npz")
        gy, weight = z["output_gradient"], z["weight"]
        for device in devices():
            x = torch.zeros(gy.shape[0], weight.shape[1], 7, 7, device=device, requires_grad=True)
            with fplab.torch.emulate("h100-torch-tf32:deterministic"):
                F.conv2d(x, weight.to(device), None, padding=1).backward(gy.to(device))
            with self.subTest(device=device):
                self.assertEqual(share(x.grad, z["chip_dx"]), 1.0)


if __name__ == "__main__":
    unittest.main()
