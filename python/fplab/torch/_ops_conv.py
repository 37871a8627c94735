"""2-D convolutions through fplab: F.conv2d (nn.Conv2d) as im2col and the GEMMs of matmul.

The layout is the C++ Conv2d layer's (models/conv2d.cpp), so that the same schedule, key and
output tiles meet the same sums: the columns ``cols`` (B·Ho·Wo rows, C·kh·kw columns ordered
(c, i, j), made by the engine's im2col: a copy, no arithmetic), the weight as W (C·kh·kw x C_out), and

- forward: out = cols W (op kind ``fwd``), plus the bias per element;
- weight gradient: dW = cols^T g (``wgrad``: the reduction over batch and positions), with g the
  output gradient as (B·Ho·Wo) x C_out;
- bias gradient: g summed over its rows (``bias_grad``);
- input gradient: dcols = g W^T (``dgrad``), then the engine's col2im: every input element
  receives its terms in the order of the C++ loop over (output row, output column), i.e. kernel
  offsets from the last to the first; or, where the table's conv_dgrad is "direct" (as cuDNN
  adds), one ``dgrad`` reduction per input element over (output channel, kernel row, kernel
  column): the output gradient's taps gathered into (B·H·W) x (C_out·kh·kw) rows, times the weight
  as (C_out·kh·kw) x C (a tap off the output is a zero term), as the C++ Conv2d computes it;
- weight gradient where a layer rule says conv_wgrad = "winograd" (cuDNN's Winograd kernels): by
  cuDNN's F(4x4, 3x3) transforms and roundings and 36 ``wgrad`` GEMMs over (image, tile) (_winograd.py), 3x3 stride-1
  convolutions of one group.

The copies between layouts (im2col, the transposed columns of the weight gradient, NCHW and the
GEMMs' rows) and col2im are the engine's: for CPU tensors in C++ (python/src/conv_columns.cpp)
without the GIL; for CUDA tensors fplab's kernels run the whole forward, and the whole backward, in
one call where they take the geometry and the schedules (CudaEngine.conv2d_forward/backward),
else these steps one by one on the device (_engine_cuda.py).

Stride, zero padding (numbers, pairs, "valid", symmetric "same"), dilation and groups (group g is
reduction part g) are taken; the columns are made again in the backward rather than stored.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Optional, Tuple

import torch
from torch.autograd.function import once_differentiable

from . import _winograd
from ._engine import output_size
from ._handler import handles
from ._native import Native, unsupported

Pair = Tuple[int, int]

#: the gathered taps of a direct input gradient, at most about this many floats at a time
SLAB_FLOATS = 1 << 24


class _Conv2d(torch.autograd.Function):
    """y = conv2d(x, weight, bias) for x (B, C, H, W), weight (C_out, C/groups, kh, kw)."""

    @staticmethod
    def forward(ctx, em, op, site, x, weight, bias, stride, padding, dilation, groups):
        ctx.em, ctx.op, ctx.site, ctx.geometry = em, op, site, (stride, padding, dilation, groups)
        ctx.save_for_backward(x, weight)
        fused = em.engine.on(x).conv2d_forward(op, site, x, weight, bias, stride, padding, dilation, groups)
        if fused is not None:
            return fused
        batch, _, h, w = x.shape
        cout, cg, kh, kw = weight.shape
        co = cout // groups
        ho = output_size(h, kh, stride[0], padding[0], dilation[0])
        wo = output_size(w, kw, stride[1], padding[1], dilation[1])
        outs = []
        for g in range(groups):
            cols = em.engine.im2col(x, (kh, kw), stride, padding, dilation, g * cg, cg)  # (B·Ho·Wo) x (C·kh·kw)
            w_cols = weight[g * co:(g + 1) * co].reshape(co, -1).t()  # (C·kh·kw) x C_out, as the C++ W
            outs.append(em.engine.matmul(op, "fwd", cols, w_cols, site, part=g).reshape(batch, ho * wo, co))
        y = torch.cat(outs, dim=2) if groups > 1 else outs[0]
        if bias is not None:
            y = y + bias
        return em.engine.transposed(y, (batch, cout, ho, wo))  # (B, Ho·Wo, C_out) as NCHW

    @staticmethod
    @once_differentiable  # computed by the C++ engine, outside autograd
    def backward(ctx, gy):
        em, op, site = ctx.em, ctx.op, ctx.site
        stride, padding, dilation, groups = ctx.geometry
        x, weight = ctx.saved_tensors
        need_x, need_w, need_bias = ctx.needs_input_grad[3:6]
        direct = need_x and em.table.conv_dgrad == "direct"
        if direct:
            with em.backward():
                gx_direct = _direct_input_grad(em, op, site, gy, weight, x.shape, stride, padding, dilation, groups)
            need_x = False
        winograd = (need_w and em.table.conv_wgrad(site.layer) == "winograd"
                    and _winograd.fits(weight, stride, padding, dilation, groups))
        if winograd:
            with em.backward():
                gw_winograd = _winograd.weight_grad(em, op, site, x, gy, padding[0])
            need_w = False
        with em.backward():
            fused = em.engine.on(gy).conv2d_backward(op, site, x, weight, gy, stride, padding, dilation, groups,
                                                     need_x, need_w, need_bias)
        if fused is not None:
            gx, gw, gb = fused
            return (None, None, None, gx_direct if direct else gx, gw_winograd if winograd else gw, gb, None, None,
                    None, None)
        batch, (cout, cg, kh, kw) = x.shape[0], weight.shape
        co = cout // groups
        rows = em.engine.transposed(gy.reshape(batch, cout, -1), (-1, cout))  # (B·Ho·Wo) x C_out
        taps, positions = cg * kh * kw, rows.shape[0]
        gx, gw, gb = [], [], []
        with em.backward():  # the transposed columns, then dcols, in the engine's scratch memory
            for g in range(groups):
                g_rows = rows[:, g * co:(g + 1) * co] if groups > 1 else rows
                if need_w:
                    cols_t = em.engine.im2col(x, (kh, kw), stride, padding, dilation, g * cg, cg,  # (C·kh·kw) x rows
                                              transposed=True)
                    dw = em.engine.matmul(op, "wgrad", cols_t, g_rows, site, part=g)  # (C·kh·kw) x C_out
                    gw.append(dw.t().reshape(co, cg, kh, kw))
                if need_bias:
                    gb.append(em.engine.sum_rows(op, "bias_grad", g_rows, site, part=g))
                if need_x:
                    dcols = em.engine.matmul(op, "dgrad", g_rows, weight[g * co:(g + 1) * co].reshape(co, -1), site,
                                             part=g, out=em.engine.scratch(positions, taps, x.device))
                    shape = (x.shape[0], cg, x.shape[2], x.shape[3])
                    gx.append(em.engine.col2im(dcols, shape, (kh, kw), stride, padding, dilation))
        if direct:
            gx = [gx_direct]
        if winograd:
            gw = [gw_winograd]
        return (None, None, None, _joined(gx, dim=1), _joined(gw), _joined(gb), None, None, None, None)


def _joined(pieces: list, dim: int = 0) -> Optional[torch.Tensor]:
    """The groups' pieces of a gradient as one tensor (the one piece itself, uncopied); None for none."""
    return None if not pieces else pieces[0] if len(pieces) == 1 else torch.cat(pieces, dim=dim)


def _direct_input_grad(em, op, site, gy, weight, x_shape, stride, padding, dilation, groups) -> torch.Tensor:
    """The input gradient as conv_dgrad "direct" adds it: per group, the gathered taps (B·H·W) x
    (C_out·kh·kw), in the order (output channel, kernel row, kernel column), times the weight."""
    batch, _, h, w = x_shape
    cout, cg, kh, kw = weight.shape
    co = cout // groups
    # The taps of a large layer are kh·kw times its output gradient: gathered a slab of whole images
    # at a time (about SLAB_FLOATS), each slab's GEMM rows are its own images'. A dgrad that draws
    # noise keys it by the GEMM's tiles, as the C++ layer's one GEMM does: it runs whole.
    per_image = h * w * co * kh * kw
    noisy = em.table.choice("dgrad", site.layer).nondeterministic
    images = batch if noisy else max(1, min(batch, SLAB_FLOATS // per_image))
    if groups == 1:  # on a GPU whose kernels take it: the slabs' gathers, GEMMs and copies in one call
        fused = em.engine.on(gy).conv2d_direct_dgrad(op, site, gy, weight, x_shape, stride, padding, dilation, images)
        if fused is not None:
            return fused
    parts = []
    for g in range(groups):
        w_taps = weight[g * co:(g + 1) * co].permute(0, 2, 3, 1).reshape(co * kh * kw, cg).contiguous()
        slabs = []
        for first in range(0, batch, images):
            last = min(batch, first + images)
            taps = em.engine.dgrad_taps(gy[first:last], (h, w), (kh, kw), stride, padding, dilation, g * co, co)
            rows = em.engine.matmul(op, "dgrad", taps, w_taps, site, part=g)  # (b·H·W) x C
            slabs.append(rows.reshape(last - first, h, w, cg))
        parts.append((torch.cat(slabs) if len(slabs) > 1 else slabs[0]).permute(0, 3, 1, 2))
    return (torch.cat(parts, dim=1) if groups > 1 else parts[0]).contiguous()


def _conv2d_params(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1): ...


def _pair(value: Any) -> Optional[Pair]:
    """(a, b) from a number or a sequence of one or two numbers; None if it is neither."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value, value
    if isinstance(value, (tuple, list)) and len(value) in (1, 2) and all(isinstance(v, int) for v in value):
        return (value[0], value[-1])
    return None


@handles(_conv2d_params)
def conv2d(em, op: str, p: dict) -> Any:
    """F.conv2d(input, weight, bias, stride, padding, dilation, groups) with zero padding."""
    x, weight, bias, groups = p["input"], p["weight"], p["bias"], p["groups"]
    why = unsupported(x, weight, bias)
    if why:
        return why
    stride, dilation = _pair(p["stride"]), _pair(p["dilation"])
    if stride is None or dilation is None or not isinstance(groups, int) or groups < 1:
        return Native("stride, dilation or groups fplab.torch does not take")
    if x.dim() not in (3, 4) or weight.dim() != 4 or x.numel() == 0 or weight.numel() == 0:
        return Native("shapes fplab.torch does not take (or that PyTorch refuses)")
    cout, cg, kh, kw = weight.shape
    if x.shape[-3] != cg * groups or cout % groups or (bias is not None and tuple(bias.shape) != (cout,)):
        return Native("shapes fplab.torch does not take (or that PyTorch refuses)")
    padding = p["padding"]
    if padding == "valid":
        padding = (0, 0)
    elif padding == "same":
        total = (dilation[0] * (kh - 1), dilation[1] * (kw - 1))
        if stride != (1, 1) or total[0] % 2 or total[1] % 2:
            return Native("padding='same' that pads one side more is not emulated")
        padding = (total[0] // 2, total[1] // 2)
    else:
        padding = _pair(padding)
    if padding is None or min(*stride, *dilation) < 1 or min(padding) < 0:
        return Native("stride, padding or dilation fplab.torch does not take")
    batched = x.dim() == 4
    xb = x if batched else x.unsqueeze(0)
    reach = (dilation[0] * (kh - 1) + 1, dilation[1] * (kw - 1) + 1)  # the kernel's extent
    if xb.shape[2] + 2 * padding[0] < reach[0] or xb.shape[3] + 2 * padding[1] < reach[1]:
        return Native("a kernel larger than the padded input (PyTorch says why)")
    # As the C++ Conv2d describes itself to layer rules: a square kernel and stride, or 0 (no rule
    # naming a kernel or stride matches then), and the batch's images.
    layer = ("conv", int(xb.shape[1]), int(cout), int(kh) if kh == kw and dilation == (1, 1) else 0,
             stride[0] if stride[0] == stride[1] else 0, int(xb.shape[2]), int(xb.shape[0]))
    y = _Conv2d.apply(em, op, replace(em.next_site(), layer=layer), xb, weight, bias, stride, padding, dilation,
                      groups)
    return y if batched else y.squeeze(0)


HANDLERS = {torch.nn.functional.conv2d: conv2d}
