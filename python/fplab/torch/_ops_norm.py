"""Batch normalisation through fplab: F.batch_norm (nn.BatchNorm1d/2d/3d).

The C++ BatchNorm layer's formulas (models/batch_norm.cpp), on the input as rows
(batch·positions) x channels:

- training: mean = sum(x) / n and var = sum((x - mean)^2) / n, the two sums op kind ``bn_stats``
  (parts 0 and 1); the running statistics move by momentum in double precision, the variance
  unbiased (n / (n - 1)); in evaluation the running statistics are used as they are;
- y = gamma · (x - mean) / sqrt(var + eps) + beta, elementwise in float32;
- backward: dbeta = sum(g) and dgamma = sum(g · xhat), op kind ``bias_grad`` (parts 0 and 1),
  and dx = gamma · inv_std / n · (n · g - dbeta - xhat · dgamma) (evaluation: g · gamma · inv_std).
"""

from __future__ import annotations

from typing import Any

import torch
from torch.autograd.function import once_differentiable

from ._handler import handles, owned
from ._native import Native, unsupported


def _rows(x: torch.Tensor) -> torch.Tensor:
    """(B, C, ...) as rows (b, position) x channels: models/batch_norm.cpp's to_rows."""
    return x.movedim(1, -1).reshape(-1, x.shape[1])


def _unrows(rows: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    return rows.reshape(like.movedim(1, -1).shape).movedim(-1, 1)


class _BatchNorm(torch.autograd.Function):
    """y = batch_norm(x) over dimension 1, statistics from the batch (training) or the running ones."""

    @staticmethod
    def forward(ctx, em, op, site, x, weight, bias, running_mean, running_var, training, momentum, eps):
        rows = _rows(x)
        n = rows.shape[0]
        if training:
            mean = em.engine.sum_rows(op, "bn_stats", rows, site, part=0) / n
            centred = rows - mean
            var = em.engine.sum_rows(op, "bn_stats", centred * centred, site, part=1) / n
            if running_mean is not None:
                running_mean.copy_(((1 - momentum) * running_mean.double() + momentum * mean.double()).float())
            if running_var is not None:
                unbiased = var * n / (n - 1) if n > 1 else var
                running_var.copy_(((1 - momentum) * running_var.double() + momentum * unbiased.double()).float())
        else:
            mean, var = running_mean, running_var
        inv_std = 1 / torch.sqrt(var + eps)
        xhat = (rows - mean) * inv_std
        y = xhat if weight is None else weight * xhat
        if bias is not None:
            y = y + bias
        ctx.em, ctx.op, ctx.site, ctx.training = em, op, site, training
        ctx.save_for_backward(xhat, inv_std, weight)
        return owned(_unrows(y, x))

    @staticmethod
    @once_differentiable  # computed by the C++ engine, outside autograd
    def backward(ctx, gy):
        em, op, site = ctx.em, ctx.op, ctx.site
        xhat, inv_std, weight = ctx.saved_tensors
        need_x, need_weight, need_bias = ctx.needs_input_grad[3:6]
        g = _rows(gy)
        n = g.shape[0]
        gamma = weight if weight is not None else torch.ones_like(inv_std)
        with em.backward():
            dbeta = em.engine.sum_rows(op, "bias_grad", g, site, part=0)
            dgamma = em.engine.sum_rows(op, "bias_grad", g * xhat, site, part=1)
            dx = None
            if need_x:
                if ctx.training:
                    dx = gamma * inv_std / n * (n * g - dbeta - xhat * dgamma)
                else:
                    dx = g * (gamma * inv_std)
                dx = _unrows(dx, gy)
        return (None, None, None, dx, dgamma if need_weight else None, dbeta if need_bias else None,
                None, None, None, None, None)


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
    return _BatchNorm.apply(em, op, em.next_site(), x, weight, bias, mean, var, training, float(momentum),
                            float(eps))


HANDLERS = {torch.nn.functional.batch_norm: batch_norm}
