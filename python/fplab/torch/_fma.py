"""x * scale + addend rounded once to float32 on the CPU, the scale per channel.

cuDNN's BatchNorm kernels compute their outputs and input gradients with fused multiply-adds
(docs/results/calibration_torch.md), and PyTorch has no elementwise fma: the CPU engine takes the C
library's (fplab._core.channel_fma), the CUDA engine a kernel of fplab's (CudaEngine.channel_fma).
"""

from __future__ import annotations

import torch

from .. import _core


def channel_fma(x: torch.Tensor, scale: torch.Tensor, addend: torch.Tensor) -> torch.Tensor:
    """fma(x, scale per channel (dimension 1), addend per channel or per element), one rounding, for
    CPU tensors: one pass of the C library's fma (fplab._core.channel_fma)."""
    planes = (x.shape[0], x.shape[1], -1)
    add = addend.detach().contiguous().numpy() if addend.dim() == 1 else \
        addend.detach().contiguous().numpy().reshape(planes)
    out = _core.channel_fma(x.detach().contiguous().numpy().reshape(planes), scale.detach().contiguous().numpy(), add)
    return torch.from_numpy(out).reshape(x.shape)
