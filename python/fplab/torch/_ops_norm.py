"""Batch normalisation through fplab: F.batch_norm (nn.BatchNorm1d/2d/3d).

The C++ BatchNorm layer's formulas (models/batch_norm.cpp), on the input as rows
(batch·positions) x channels:

- training: mean = sum(x) / n and var = sum((x - mean)^2) / n, the two sums op kind ``bn_stats``
  (parts 0 and 1); the running statistics move by momentum in double precision, the variance
  unbiased (n / (n - 1)); in evaluation the running statistics are used as they are;
- y = gamma · (x - mean) / sqrt(var + eps) + beta, elementwise in float32;
- backward: dbeta = sum(g) and dgamma = sum(g · xhat), op kind ``bias_grad`` (parts 0 and 1),
  and dx = gamma · inv_std / n · (n · g - dbeta - xhat · dgamma) (evaluation: g · gamma · inv_std).

Where a layer rule of the profile says ``batch_norm = "cudnn"`` for the layer (match = { layer =
"bn", in = CHANNELS, height = H, batch = B }), training on inputs that PyTorch sends to cuDNN (3 or
more dimensions, gamma and beta given, eps >= 1e-5) takes cuDNN's singleread kernels' formulas, as
the C++ layer's forward_cudnn and backward_cudnn: mean = S(x) · (1/n); var = S(d·d) · (1/n) with
d = x - mean, the squares fused into the chains (Engine.dot_planes: per channel a 1 x n by n x 1
GEMM, part 1 + c);
invstd = the GPU's rsqrt (fplab._core.cuda_rsqrt, on the host: C values) of var + eps;
y = fma(x, scale, shift). Backward: dbeta = S(g), dgamma = S(g·d) · invstd (fused, part 1 + c),
dx = fma(d, a, fma(g, scale, b)). The fused multiply-adds are the engine's channel_fma (the C
library's fma on the CPU, fplab's kernel on CUDA).

``batch_norm = "cudnn-nchw"``: cuDNN's kernels for larger planes (bn_fw_tr_1C11_kernel_NCHW,
bn_bw_1C11_kernel_new: per-thread Welford chains with the GPU's approximate reciprocal, xor trees;
sim/cudnn_nchw_batch_norm.hpp, as models/batch_norm.cpp), their own orders whatever the schedules,
on the CPU engine or, for CUDA tensors, its device twin (sim/cuda/gpu_batch_norm_cudnn), for the
shapes measured (64 images of 28x28; 128 of 16x16 and 32x32). ``"cudnn-nchw-backward"``: the
singleread forward (as "cudnn") with that backward kernel, the pair cuDNN runs at 128 images of 14x14.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import torch
from torch.autograd.function import once_differentiable

from .. import _core
from ._divide import divided
from ._handler import handles
from ._native import Native, unsupported


def _per_channel(x: torch.Tensor) -> tuple:
    """The shape that broadcasts a (C,) tensor along dimension 1 of x: (1, C, 1, ...)."""
    return (1, x.shape[1]) + (1,) * (x.dim() - 2)


class _BatchNorm(torch.autograd.Function):
    """y = batch_norm(x) over dimension 1, statistics from the batch (training) or the running ones.

    The C++ layer works on rows (b, position) x channels; here the elementwise steps run on x's own
    (B, C, ...) layout with the per-channel values broadcast (the same float32 operation on every
    element), and only the sums see the rows' order (Engine.sum_planes). On a GPU whose kernels run
    the sums, fplab's fused kernels take every step (CudaEngine.batch_norm_forward/backward: the
    same operations, each rounded, in a handful of kernels instead of some fifty PyTorch calls);
    elsewhere _forward_steps and _backward_steps run them as PyTorch operations."""

    @staticmethod
    def forward(ctx, em, op, site, x, weight, bias, running_mean, running_var, training, momentum, eps):
        # PyTorch sends a batch norm to cuDNN only with positions (3 or more dimensions), gamma and
        # beta, and eps >= cuDNN's least (1e-5); the others run its own kernel: fplab's formula here.
        to_cudnn = training and x.dim() > 2 and weight is not None and bias is not None and eps >= 1e-5
        form = em.table.batch_norm(site.layer) if to_cudnn else "fplab"
        # cudnn-nchw-backward: the singleread forward (cudnn's), bn_bw_1C11_kernel_new's backward
        ctx.cudnn, ctx.nchw = form in ("cudnn", "cudnn-nchw-backward"), form == "cudnn-nchw"
        ctx.nchw_backward = form == "cudnn-nchw-backward"
        if ctx.nchw_backward:
            why = _core.cudnn_nchw_why_not(x.shape[0], x.numel() // (x.shape[0] * x.shape[1]), backward=True)
            if why:
                raise _core.Error(f'batch_norm = "cudnn-nchw-backward" for a batch norm of {tuple(x.shape)}: {why}')
        if ctx.nchw:
            y, mean, inv_std = _forward_cudnn_nchw(em, op, site, x, weight, bias, running_mean, running_var, momentum,
                                                   eps)
            ctx.em, ctx.op, ctx.site, ctx.training = em, op, site, training
            ctx.save_for_backward(x, mean, inv_std, weight)
            return y
        if ctx.cudnn:
            fused = em.engine.on(x).batch_norm_cudnn_forward(op, site, x, weight, bias, running_mean, running_var,
                                                             momentum, eps)
            y, centred, inv_std = fused if fused is not None else _forward_cudnn(
                em, op, site, x, weight, bias, running_mean, running_var, momentum, eps)
            ctx.em, ctx.op, ctx.site, ctx.training = em, op, site, training
            ctx.save_for_backward(centred, inv_std, weight)
            return y
        fused = em.engine.on(x).batch_norm_forward(op, site, x, weight, bias, running_mean, running_var, training,
                                                  momentum, eps)
        y, xhat, inv_std = fused if fused is not None else _forward_steps(em, op, site, x, weight, bias, running_mean,
                                                                          running_var, training, momentum, eps)
        ctx.em, ctx.op, ctx.site, ctx.training = em, op, site, training
        ctx.save_for_backward(xhat, inv_std, weight)
        return y

    @staticmethod
    @once_differentiable  # computed by the C++ engine, outside autograd
    def backward(ctx, gy):
        em, op, site = ctx.em, ctx.op, ctx.site
        need_x, need_weight, need_bias = ctx.needs_input_grad[3:6]
        if ctx.nchw:
            x, mean, inv_std, weight = ctx.saved_tensors
            with em.backward():
                dx, dgamma, dbeta = _backward_cudnn_nchw(em, op, site, gy, x, mean, inv_std, weight)
            return (None, None, None, dx if need_x else None, dgamma if need_weight else None,
                    dbeta if need_bias else None, None, None, None, None, None)
        xhat, inv_std, weight = ctx.saved_tensors
        if ctx.nchw_backward:  # xhat holds x - mean as the forward rounded it: the kernel's d with a mean of 0
            with em.backward():
                dx, dgamma, dbeta = _backward_cudnn_nchw(em, op, site, gy, xhat, torch.zeros_like(inv_std), inv_std,
                                                         weight)
            return (None, None, None, dx if need_x else None, dgamma if need_weight else None,
                    dbeta if need_bias else None, None, None, None, None, None)
        with em.backward():
            if ctx.cudnn:
                fused = em.engine.on(gy).batch_norm_cudnn_backward(op, site, gy, xhat, inv_std, weight, need_x)
                dx, dgamma, dbeta = fused if fused is not None else _backward_cudnn(em, op, site, gy, xhat, inv_std,
                                                                                    weight, need_x)
                return (None, None, None, dx, dgamma if need_weight else None, dbeta if need_bias else None,
                        None, None, None, None, None)
            fused = em.engine.on(gy).batch_norm_backward(op, site, gy, xhat, inv_std, weight, ctx.training, need_x)
            dx, dgamma, dbeta = fused if fused is not None else _backward_steps(em, op, site, gy, xhat, inv_std, weight,
                                                                                ctx.training, need_x)
        return (None, None, None, dx, dgamma if need_weight else None, dbeta if need_bias else None,
                None, None, None, None, None)


def _move_running(running_mean, running_var, mean, var, n: int, momentum: float) -> None:
    """The running statistics (where given) move by momentum in double precision, the variance
    unbiased as the float32 var·n / (n − 1), every form alike (models/batch_norm.cpp's move_running)."""
    if running_mean is not None:
        running_mean.copy_(((1 - momentum) * running_mean.double() + momentum * mean.double()).float())
    if running_var is not None:
        unbiased = divided(var * n, n - 1) if n > 1 else var
        running_var.copy_(((1 - momentum) * running_var.double() + momentum * unbiased.double()).float())


def _forward_steps(em, op, site, x, weight, bias, running_mean, running_var, training, momentum, eps) -> tuple:
    """(y, xhat, inv_std) as PyTorch operations on x's device, the sums through the engine."""
    shape = _per_channel(x)
    n = x.numel() // x.shape[1]
    if training:
        mean = divided(em.engine.sum_planes(op, "bn_stats", x, site, part=0), n)
        centred = x - mean.view(shape)
        var = divided(em.engine.sum_planes(op, "bn_stats", centred * centred, site, part=1), n)
        del centred
        _move_running(running_mean, running_var, mean, var, n, momentum)
    else:
        mean, var = running_mean, running_var
    # The correctly rounded square root and quotient, as the C++ layer's: PyTorch 2.11's CPU
    # sqrt is not correctly rounded (seen on x86-64), and 1 / tensor is reciprocal() * 1.
    root = em.engine.sqrt(var + eps)
    inv_std = torch.div(torch.ones_like(root), root)
    xhat = (x - mean.view(shape)) * inv_std.view(shape)
    y = xhat if weight is None else weight.view(shape) * xhat
    if bias is not None:
        y = y + bias.view(shape)
    return (y.clone() if y is xhat else y), xhat, inv_std  # y is not the saved xhat (an in-place ReLU on it)


def _reciprocal(n: int, like: torch.Tensor) -> torch.Tensor:
    """1/n rounded to float32, as a tensor on like's device (multiplied by, as cuDNN does)."""
    return torch.full((1,), 1.0, dtype=torch.float32, device=like.device) / torch.full(
        (1,), float(n), dtype=torch.float32, device=like.device)


def _forward_cudnn(em, op, site, x, weight, bias, running_mean, running_var, momentum, eps) -> tuple:
    """(y, x - mean, inv_std) as cuDNN's bn_fw_tr_1C11_singleread computes them (models/batch_norm.cpp)."""
    shape = _per_channel(x)
    n = x.numel() // x.shape[1]
    inv_n = _reciprocal(n, x)
    mean = em.engine.sum_planes(op, "bn_stats", x, site, part=0).to(x.device) * inv_n
    centred = x - mean.view(shape)
    var = em.engine.on(x).dot_planes(op, "bn_stats", centred, centred, site) * inv_n
    _move_running(running_mean, running_var, mean, var, n, momentum)
    # The GPU's rsqrt of C values, on the host: the measured table, the same bits on any device.
    inv_std = torch.from_numpy(_core.cuda_rsqrt((var + eps).cpu().numpy())).to(x.device)
    scale = weight * inv_std  # gamma and beta are given: PyTorch sends no other batch norm to cuDNN
    shift = bias - mean * scale
    return em.engine.on(x).channel_fma(x, scale, shift), centred, inv_std


def _backward_cudnn(em, op, site, gy, centred, inv_std, weight, need_x) -> tuple:
    """(dx or None, dgamma, dbeta) as cuDNN's bn_bw_1C11_singleread computes them."""
    n = gy.numel() // gy.shape[1]
    inv_n = _reciprocal(n, gy)
    dbeta = em.engine.sum_planes(op, "bias_grad", gy, site, part=0).to(gy.device)
    dgamma = em.engine.on(gy).dot_planes(op, "bias_grad", gy, centred, site) * inv_std
    dx = None
    if need_x:
        scale = weight * inv_std
        a = -(scale * ((dgamma * inv_std) * inv_n))
        b = -(scale * (dbeta * inv_n))
        engine = em.engine.on(gy)
        dx = engine.channel_fma(centred, a, engine.channel_fma(gy, scale, b))
    return dx, dgamma, dbeta


def _nchw_record(em, op: str, site, op_kind: str, device: torch.device) -> None:
    """Coverage for cuDNN's NCHW kernels' two sums (their own orders): on the tensors' device, or on
    the host for CUDA tensors where the device twin did not pass its check."""
    why = em.engine.on(device).nchw_why_not()
    where = f"cpu (from cuda: {why})" if why else device.type
    choice = em.table.choice(op_kind, site.layer)
    for _ in range(2):
        em.engine.cpu.coverage.emulated(op, op_kind, choice, where)


def _host_planes(t: torch.Tensor):
    """t (B, C, ...) as a float32 NumPy array (B, C, P) on the host."""
    return t.detach().to("cpu").contiguous().numpy().reshape(t.shape[0], t.shape[1], -1)


def _forward_cudnn_nchw(em, op, site, x, weight, bias, running_mean, running_var, momentum, eps) -> tuple:
    """(y, mean, inv_std) as cuDNN's bn_fw_tr_1C11_kernel_NCHW computes them (sim/cudnn_nchw_batch_norm,
    on the host; models/batch_norm.cpp's forward_cudnn_nchw). The running statistics move as
    _forward_cudnn's, from the kernel's variance fl(Q rcp(n))."""
    n = x.numel() // x.shape[1]
    why = _core.cudnn_nchw_why_not(x.shape[0], n // x.shape[0])
    if why:
        raise _core.Error(f'batch_norm = "cudnn-nchw" for a batch norm of {tuple(x.shape)}: {why}')
    _nchw_record(em, op, site, "bn_stats", x.device)
    # Running statistics the device's kernel can move in place, in the same launch (else moved here).
    in_place = all(t is None or (t.is_contiguous() and t.dtype == torch.float32 and t.device == x.device)
                   for t in (running_mean, running_var))
    fused = em.engine.on(x).batch_norm_nchw_forward(x, weight, bias, eps, *(
        (running_mean, running_var, momentum) if in_place else ()))
    if fused is not None:
        y, mean, inv_std, var = fused
        if in_place:
            return y, mean, inv_std
    else:
        y, mean, inv_std, var = _core.cudnn_nchw_forward(_host_planes(x), weight.detach().cpu().numpy(),
                                                         bias.detach().cpu().numpy(), eps)
        y = torch.from_numpy(y).reshape(x.shape).to(x.device)
        mean, inv_std, var = (torch.from_numpy(a).to(x.device) for a in (mean, inv_std, var))
    _move_running(running_mean, running_var, mean, var, n, momentum)
    return y, mean, inv_std


def _backward_cudnn_nchw(em, op, site, gy, x, mean, inv_std, weight) -> tuple:
    """(dx, dgamma, dbeta) as cuDNN's bn_bw_1C11_kernel_new computes them."""
    _nchw_record(em, op, site, "bias_grad", gy.device)
    fused = em.engine.on(gy).batch_norm_nchw_backward(gy, x, mean, inv_std, weight, True)
    if fused is not None:
        return fused
    dx, dgamma, dbeta = _core.cudnn_nchw_backward(_host_planes(gy), _host_planes(x), mean.cpu().numpy(),
                                                  inv_std.cpu().numpy(), weight.detach().cpu().numpy())
    return tuple(torch.from_numpy(a).to(gy.device) for a in (dx.reshape(gy.shape), dgamma, dbeta))


def _backward_steps(em, op, site, gy, xhat, inv_std, weight, training, need_x) -> tuple:
    """(dx or None, dgamma, dbeta) as PyTorch operations on gy's device, the sums through the engine."""
    shape = _per_channel(gy)
    n = gy.numel() // gy.shape[1]
    gamma = weight if weight is not None else torch.ones_like(inv_std)
    dbeta = em.engine.sum_planes(op, "bias_grad", gy, site, part=0)
    dgamma = em.engine.sum_planes(op, "bias_grad", gy * xhat, site, part=1)
    dx = None
    if need_x:
        if training:
            dx = divided(gamma * inv_std, n).view(shape) * (n * gy - dbeta.view(shape) - xhat * dgamma.view(shape))
        else:
            dx = gy * (gamma * inv_std).view(shape)
    return dx, dgamma, dbeta


def _batch_norm_params(input, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1,
                       eps=1e-05): ...


@handles(_batch_norm_params)
def batch_norm(em, op: str, p: dict) -> Any:
    """F.batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)."""
    x, mean, var, weight, bias = p["input"], p["running_mean"], p["running_var"], p["weight"], p["bias"]
    why = unsupported(x, mean, var, weight, bias)
    if why:
        return why
    training, momentum, eps = bool(p["training"]), p["momentum"], p["eps"]
    if not isinstance(momentum, (int, float)) or not isinstance(eps, (int, float)):
        return Native("a momentum or eps that is not a number")
    if x.dim() < 2 or x.numel() == 0:
        return Native("shapes fplab.torch does not take (or that PyTorch refuses)")
    channels = (x.shape[1],)
    if any(t is not None and tuple(t.shape) != channels for t in (mean, var, weight, bias)):
        return Native("statistics or parameters that are not one value per channel (PyTorch says why)")
    if not training and (mean is None or var is None):
        return Native("evaluation without running statistics (PyTorch says why)")
    if training and x.numel() // x.shape[1] < 2:
        return Native("one value per channel (PyTorch says why)")
    layer = ("bn", x.shape[1], 0, 0, 0, x.shape[2] if x.dim() > 2 else 1, x.shape[0])
    return _BatchNorm.apply(em, op, replace(em.next_site(), layer=layer), x, weight, bias, mean, var, training,
                            float(momentum), float(eps))


HANDLERS = {torch.nn.functional.batch_norm: batch_norm}
