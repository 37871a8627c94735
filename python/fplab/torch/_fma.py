"""a * b + c rounded once to float32, elementwise, on a tensor's own device.

cuDNN's BatchNorm kernels compute their outputs and input gradients with fused multiply-adds
(docs/results/calibration_torch.md), and PyTorch has no elementwise fma. In float64 the product of
two float32 values is exact, and the float64 sum s of it and c differs from the exact sum by an
error e that TwoSum gives exactly. Rounding s to float32 gives the fma's result unless s lies
exactly on a float32 midpoint (a float64 value, nearer the exact sum than s otherwise): there the
exact sum lies on the side e says, and s moved one float64 step that way rounds as it would.
"""

from __future__ import annotations

import torch

from .. import _core


def channel_fma(x: torch.Tensor, scale: torch.Tensor, addend: torch.Tensor) -> torch.Tensor:
    """fma(x, scale per channel (dimension 1), addend per channel or per element), one rounding:
    on the CPU in one pass of the C library's fma (fplab._core.channel_fma), elsewhere fma32."""
    shape = (1, x.shape[1]) + (1,) * (x.dim() - 2)
    if x.device.type != "cpu":
        return fma32(x, scale.view(shape), addend.view(shape) if addend.dim() == 1 else addend)
    planes = (x.shape[0], x.shape[1], -1)
    add = addend.detach().contiguous().numpy() if addend.dim() == 1 else \
        addend.detach().contiguous().numpy().reshape(planes)
    out = _core.channel_fma(x.detach().contiguous().numpy().reshape(planes), scale.detach().contiguous().numpy(), add)
    return torch.from_numpy(out).reshape(x.shape)


def fma32(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """fma(a, b, c) of float32 tensors (broadcast together), one rounding, as a float32 tensor."""
    p = a.double() * b.double()
    cd = c.double()
    s = p + cd
    back = s - p
    error = (p - (s - back)) + (cd - back)  # TwoSum: s + error == p + cd exactly
    r = s.float()
    other = torch.nextafter(r, torch.where(r.double() > s, torch.full_like(r, -float("inf")),
                                           torch.full_like(r, float("inf"))))
    midpoint = (r.double() + other.double()) / 2 == s
    fix = midpoint & (error != 0) & torch.isfinite(s)
    if bool(fix.any()):
        toward = torch.where(error > 0, torch.full_like(s, float("inf")), torch.full_like(s, -float("inf")))
        r = torch.where(fix, torch.nextafter(s, toward).float(), r)
    return r
