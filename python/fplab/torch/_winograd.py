"""A 3x3 stride-1 convolution's weight gradient by F(4x4, 3x3)'s transforms, where a profile's layer
rule says ``conv_wgrad = "winograd"`` (cuDNN's winograd_nonfused: docs/results/calibration_torch.md).

The bits of the C++ layer's (sim/winograd_wgrad.cpp, models/conv2d.cpp): the input in 6x6 tiles
and the output gradient in 4x4 tiles transformed (B^T X B and A dY A^T, columns first, then rows;
each output a left-to-right sum of products rounded in fp32, no product where the coefficient is
+-1), per transformed position p the engine's GEMM over (image, tile) in the wgrad schedule
(reduction part p), and the 36 sums transformed back (G^T M G). The transforms are float32 torch
operations, one rounding each, on the tensors' own device, so that CPU and CUDA tensors give the
same bits; only the 36 GEMMs go through fplab's engine.
"""

from __future__ import annotations

from typing import List, Sequence

import numpy as np
import torch
import torch.nn.functional as F

POSITIONS = 36

# G's entries as float32 values (Python floats holding them exactly): T(1) / T(6) etc. in the C++.
_QUARTER = float(np.float32(0.25))
_SIXTH = float(np.float32(1) / np.float32(6))
_TWELFTH = float(np.float32(1) / np.float32(12))
_TWENTY_FOURTH = float(np.float32(1) / np.float32(24))


def _data(x: Sequence[torch.Tensor]) -> List[torch.Tensor]:
    """B^T (6 x 6) applied along one axis: six slices in, six out."""
    return [(x[0] * 4 + x[2] * -5) + x[4],
            ((x[1] * -4 + x[2] * -4) + x[3]) + x[4],
            ((x[1] * 4 + x[2] * -4) - x[3]) + x[4],
            ((x[1] * -2 - x[2]) + x[3] * 2) + x[4],
            ((x[1] * 2 - x[2]) + x[3] * -2) + x[4],
            (x[1] * 4 + x[3] * -5) + x[5]]


def _delta(d: Sequence[torch.Tensor]) -> List[torch.Tensor]:
    """A (6 x 4), A^T being F(4x4, 3x3)'s output transform, along one axis: four slices in, six out."""
    return [d[0],
            ((d[0] + d[1]) + d[2]) + d[3],
            ((d[0] - d[1]) + d[2]) - d[3],
            ((d[0] + d[1] * 2) + d[2] * 4) + d[3] * 8,
            ((d[0] + d[1] * -2) + d[2] * 4) + d[3] * -8,
            d[3]]


def _output(m: Sequence[torch.Tensor]) -> List[torch.Tensor]:
    """G^T (3 x 6), G being F(4x4, 3x3)'s filter transform, along one axis: six slices in, three out."""
    return [(((m[0] * _QUARTER + m[1] * -_SIXTH) + m[2] * -_SIXTH) + m[3] * _TWENTY_FOURTH) + m[4] * _TWENTY_FOURTH,
            ((m[1] * -_SIXTH + m[2] * _SIXTH) + m[3] * _TWELFTH) + m[4] * -_TWELFTH,
            (((m[1] * -_SIXTH + m[2] * -_SIXTH) + m[3] * _SIXTH) + m[4] * _SIXTH) + m[5]]


def _both_ways(tiles: torch.Tensor, transform) -> torch.Tensor:
    """transform applied to the columns of every tile (its second-last axis), then to the rows."""
    columns = torch.stack(transform(tiles.unbind(-2)), dim=-2)
    return torch.stack(transform(columns.unbind(-1)), dim=-1)


def fits(weight: torch.Tensor, stride, padding, dilation, groups: int) -> bool:
    """Whether the transforms take the convolution: 3x3, stride 1, no dilation, one group, the same
    padding on every side (the C++ layer's only form; a rule admits 3x3 stride-1 layers only, and
    the others, which no C++ model has, keep the GEMM form)."""
    return (tuple(weight.shape[2:]) == (3, 3) and tuple(stride) == (1, 1) and tuple(dilation) == (1, 1)
            and groups == 1 and padding[0] == padding[1])


def weight_grad(em, op: str, site, x: torch.Tensor, gy: torch.Tensor, padding: int) -> torch.Tensor:
    """dW (C_out, C, 3, 3) of y = conv2d(x, W, stride 1, padding) for x (B, C, H, W) and the output
    gradient gy (B, C_out, Ho, Wo), the 36 sums in ``wgrad``'s schedule for ``site``'s layer."""
    batch, channels, h, w = x.shape
    cout, ho, wo = gy.shape[1], gy.shape[2], gy.shape[3]
    tiles_y, tiles_x = (ho + 3) // 4, (wo + 3) // 4
    terms = batch * tiles_y * tiles_x
    # Input tiles of 6x6 every 4 pixels, zeros past the image; output-gradient tiles of 4x4.
    x_tiles = F.pad(x, (padding, 4 * tiles_x + 2 - w - padding, padding, 4 * tiles_y + 2 - h - padding))
    x_tiles = x_tiles.unfold(2, 6, 4).unfold(3, 6, 4)  # (B, C, ty, tx, 6, 6)
    g_tiles = F.pad(gy, (0, 4 * tiles_x - wo, 0, 4 * tiles_y - ho)).unfold(2, 4, 4).unfold(3, 4, 4)
    v = _both_ways(x_tiles, _data).permute(4, 5, 0, 2, 3, 1).reshape(POSITIONS, terms, channels)
    u = _both_ways(g_tiles, _delta).permute(4, 5, 1, 0, 2, 3).reshape(POSITIONS, cout, terms)
    sums = [em.engine.matmul(op, "wgrad", u[p].contiguous(), v[p].contiguous(), site, part=p)
            for p in range(POSITIONS)]
    m = torch.stack(sums).reshape(6, 6, cout, channels).permute(2, 3, 0, 1)  # (C_out, C, 6, 6)
    return _both_ways(m, _output).contiguous()
