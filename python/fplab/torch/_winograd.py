"""A 3x3 stride-1 convolution's weight gradient the way cuDNN's winograd_nonfused kernels compute it,
where a profile's layer rule says ``conv_wgrad = "winograd"`` (docs/results/calibration_torch.md,
"cuDNN's Winograd, bit for bit").

The bits of the C++ layer's (sim/winograd_wgrad.cpp, models/conv2d.cpp), which are cuDNN's on an
H200: the input in 6x6 tiles and the output gradient in 4x4 tiles transformed (D X D^T and A' dY A'^T,
columns first, then rows; each output in cuDNN's order of roundings, A''s products fused), per
transformed position p the engine's GEMM over (image, tile) in the wgrad schedule (reduction part
p), and the 36 sums transformed back (O M O^T, one of O's rows in float64). The transforms are torch
operations on the CPU (the fused multiply-adds the engine's channel_fma) and only the 36 GEMMs go
through fplab's engine; on a CUDA device the engine runs all of it in one call of its kernels
(sim/cuda/gpu_winograd.cu, the same transforms as the C++ layer's), where they take the schedule,
else the same torch operations there. Either way the same bits.
"""

from __future__ import annotations

from typing import Callable, List, Sequence

import numpy as np
import torch
import torch.nn.functional as F

POSITIONS = 36

# A''s constants as float32 values (Python floats holding them exactly): T(2) / T(3) etc. in the C++.
_TWO_THIRDS = float(np.float32(2) / np.float32(3))
_FOUR_THIRDS = float(np.float32(4) / np.float32(3))
_EIGHT_THIRDS = float(np.float32(8) / np.float32(3))
_THIRD = float(np.float32(1) / np.float32(3))

Fma = Callable[[float, torch.Tensor, torch.Tensor], torch.Tensor]  # fma(c, a, b): c * a + b, one rounding


def _data_row(x: Sequence[torch.Tensor], i: int) -> torch.Tensor:
    """Row i of D (6 x 6) along one axis: six slices in; products rounded."""
    if i == 0:
        return (x[0] * 0.25 + x[2] * -1.25) + x[4]
    if i in (1, 2):
        return (x[1] * (-0.25 if i == 1 else 0.25) + (x[3] if i == 1 else -x[3])) + (x[2] * -0.25 + x[4])
    if i in (3, 4):
        half = -0.5 if i == 3 else 0.5
        return (x[1] * half + x[3] * -half) + (x[4] - x[2])
    return (x[1] * 0.25 + x[3] * -1.25) + x[5]


def _data(x: Sequence[torch.Tensor]) -> List[torch.Tensor]:
    """D (6 x 6) along one axis: six slices in, six out."""
    return [_data_row(x, i) for i in range(6)]


def _delta_row(d: Sequence[torch.Tensor], i: int, fma: Fma, fused_pairs: bool = True) -> torch.Tensor:
    """Row i of A' (6 x 4) along one axis: four slices in; rows 1 and 2 with their products rounded
    where ``fused_pairs`` is false (cuDNN's row pass of the tile's last row)."""
    if i == 0:
        return d[0] * 4
    if i == 5:
        return d[3]
    if i in (1, 2):
        c = _TWO_THIRDS if i == 1 else -_TWO_THIRDS
        if not fused_pairs:
            return (d[0] * _TWO_THIRDS + d[2] * _TWO_THIRDS) + (d[1] * c + d[3] * c)
        return fma(_TWO_THIRDS, d[0], d[2] * _TWO_THIRDS) + fma(c, d[1], d[3] * c)
    sign = -1.0 if i == 3 else 1.0
    return fma(-_EIGHT_THIRDS, d[0], d[2] * -_TWO_THIRDS) + fma(sign * _FOUR_THIRDS, d[1], d[3] * (sign * _THIRD))


def _delta(d: Sequence[torch.Tensor], fma: Fma, fused_pairs: bool = True) -> List[torch.Tensor]:
    """A' (6 x 4) along one axis: four slices in, six out."""
    return [_delta_row(d, i, fma, fused_pairs) for i in range(6)]


def _output(m: Sequence[torch.Tensor]) -> List[torch.Tensor]:
    """O (3 x 6) along one axis: six slices in, three out; the middle row's halves added in float64."""
    sum12, sum34 = m[1] + m[2], m[3] + m[4]
    middle = ((m[1] - m[2]).double() + m[3].double() * 0.5) - m[4].double() * 0.5
    return [(m[0] + sum12) + sum34, middle.float(), (sum12 + m[5]) + sum34 * 0.25]


def _data_positions(x_rows: Sequence[torch.Tensor], i: int) -> List[torch.Tensor]:
    """Row i of D X D^T: the column pass's row i of the tiles (their rows ``x_rows``), then the row
    pass: the six positions (i, 0..5)."""
    return _data(_data_row(x_rows, i).unbind(-1))


def _delta_positions(d_rows: Sequence[torch.Tensor], i: int, fma: Fma) -> List[torch.Tensor]:
    """Row i of A' dY A'^T, the six positions (i, 0..5); row 5 (dY's last row as it is) with the
    2/3-products of its row pass rounded, as cuDNN's kernel computes it."""
    return _delta(_delta_row(d_rows, i, fma).unbind(-1), fma, fused_pairs=i != 5)


def _engine_fma(engine) -> Fma:
    """fma(c, a, b) elementwise through the engine's channel_fma (one channel, the scale c)."""
    scales = {}  # c -> its one-element tensor on the device: made once, not at every call

    def fma(c: float, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        a, b = torch.broadcast_tensors(a, b)
        if c not in scales:
            scales[c] = torch.tensor([c], dtype=torch.float32, device=a.device)
        return engine.channel_fma(a.reshape(1, 1, -1), scales[c], b.reshape(1, 1, -1)).reshape(a.shape)
    return fma


def data_tiles(tiles: torch.Tensor) -> torch.Tensor:
    """D X D^T of (..., 6, 6) tiles."""
    rows = tiles.unbind(-2)
    return torch.stack([torch.stack(_data_positions(rows, i), dim=-1) for i in range(6)], dim=-2)


def delta_tiles(tiles: torch.Tensor, fma: Fma) -> torch.Tensor:
    """A' dY A'^T of (..., 4, 4) tiles, -> (..., 6, 6)."""
    rows = tiles.unbind(-2)
    return torch.stack([torch.stack(_delta_positions(rows, i, fma), dim=-1) for i in range(6)], dim=-2)


def output_tiles(m: torch.Tensor) -> torch.Tensor:
    """O M O^T of (..., 6, 6) sums, -> (..., 3, 3): columns first, then rows."""
    columns = torch.stack(_output(m.unbind(-2)), dim=-2)
    return torch.stack(_output(columns.unbind(-1)), dim=-1)


def fits(weight: torch.Tensor, stride, padding, dilation, groups: int) -> bool:
    """Whether the transforms take the convolution: 3x3, stride 1, no dilation, one group, the same
    padding on every side (the form of the C++ layer, which takes any padding; a rule admits 3x3
    stride-1 layers only, and the others, which no C++ model has, keep the GEMM form)."""
    return (tuple(weight.shape[2:]) == (3, 3) and tuple(stride) == (1, 1) and tuple(dilation) == (1, 1)
            and groups == 1 and padding[0] == padding[1])


def weight_grad(em, op: str, site, x: torch.Tensor, gy: torch.Tensor, padding: int) -> torch.Tensor:
    """dW (C_out, C, 3, 3) of y = conv2d(x, W, stride 1, padding) for x (B, C, H, W) and the output
    gradient gy (B, C_out, Ho, Wo), the 36 sums in ``wgrad``'s schedule for ``site``'s layer."""
    on_kernels = em.engine.on(x).winograd_weight_grad(op, site, x, gy, padding)
    if on_kernels is not None:
        return on_kernels
    batch, channels, h, w = x.shape
    cout, ho, wo = gy.shape[1], gy.shape[2], gy.shape[3]
    tiles_y, tiles_x = (ho + 3) // 4, (wo + 3) // 4
    terms = batch * tiles_y * tiles_x
    # Input tiles of 6x6 every 4 pixels, zeros past the image; output-gradient tiles of 4x4.
    x_tiles = F.pad(x, (padding, 4 * tiles_x + 2 - w - padding, padding, 4 * tiles_y + 2 - h - padding))
    x_tiles = x_tiles.unfold(2, 6, 4).unfold(3, 6, 4)  # (B, C, ty, tx, 6, 6)
    g_tiles = F.pad(gy, (0, 4 * tiles_x - wo, 0, 4 * tiles_y - ho)).unfold(2, 4, 4).unfold(3, 4, 4)
    fma = _engine_fma(em.engine.on(x))
    # One row i of the 6x6 domain at a time, column pass and row pass, and its six positions'
    # GEMMs before the next: the transformed tensors never exist whole (a ResNet-18's 64-channel
    # layer at batch 128 would hold 2 x 75 MB of them, and their copies).
    x_rows, g_rows = x_tiles.unbind(-2), g_tiles.unbind(-2)
    sums = []
    for i in range(6):
        v = torch.stack(_data_positions(x_rows, i), dim=-1)
        u = torch.stack(_delta_positions(g_rows, i, fma), dim=-1)
        v = v.permute(4, 0, 2, 3, 1).reshape(6, terms, channels)
        u = u.permute(4, 1, 0, 2, 3).reshape(6, cout, terms)
        sums += [em.engine.matmul(op, "wgrad", u[j].contiguous(), v[j].contiguous(), site, part=6 * i + j)
                 for j in range(6)]
        del u, v
    m = torch.stack(sums).reshape(6, 6, cout, channels).permute(2, 3, 0, 1)  # (C_out, C, 6, 6)
    return output_tiles(m).contiguous()
