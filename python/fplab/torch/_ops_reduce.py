"""The reductions of training through fplab: sums and means over dimensions, softmax and
log-softmax, cross-entropy and NLL losses.

Op kinds (profiles/op_table.hpp):

- ``softmax``: the softmax denominator, a sum over the classes of each row (part 0); the sums
  over classes in the backward of softmax and log_softmax are part 1;
- ``loss``: the sum of the per-example losses of cross_entropy and nll_loss (then divided by the
  batch for reduction="mean"); also any sum or mean over every dimension (a scalar loss such as
  ``((y - t) ** 2).mean()``);
- ``softmax`` again for a sum or mean over the last dimension only (a row reduction, as TF's
  RowReduceKernel does the softmax's); ``bn_stats`` for any other sum or mean over some dimensions
  (column and spatial statistics: BatchNorm's, global average pooling's, which
  F.adaptive_avg_pool2d to 1 x 1 is).

The formulas are PyTorch's (its CUDA and CPU kernels'): log_softmax ``(x - max) - log(sum)`` with
the sum of ``exp(x - max)`` in the table's order, its gradient ``g - exp(y) * sum(g)``;
cross_entropy as log_softmax, then nll_loss (losses ``-y[label]``, summed in ``loss``'s order,
gradient ``-(g / batch)`` at the labels; an example whose target is ``ignore_index`` has loss and
gradient 0 and the mean divides by the others' count, as PyTorch's). With
``emulate(..., math="libm")`` they are instead the C++ SoftmaxCrossEntropy's
(models/softmax_cross_entropy.cpp), as ``fplab train`` computes them:
losses ``(log(sum) + max) - x[label]``, gradient ``(p - onehot) / batch`` with ``p = exps / sum``;
and the exponential and logarithm themselves are the C library's (_math.py), where "torch" takes
PyTorch's (elementwise: no order to emulate).
"""

from __future__ import annotations

from typing import Any, List, Optional

import torch
from torch.autograd.function import once_differentiable

from . import _math
from ._divide import divided
from ._handler import Handler, handles, owned
from ._native import Native, unsupported


# --- sum and mean ---------------------------------------------------------------------------


def reduction_kind(dims: List[int], ndim: int) -> str:
    """The op kind of a sum over ``dims`` (sorted) of an ``ndim``-D tensor."""
    if len(dims) == ndim:
        return "loss"
    if dims == [ndim - 1]:
        return "softmax"
    return "bn_stats"


class _Sum(torch.autograd.Function):
    """x summed (or averaged) over ``dims`` in the order of ``kind``'s schedule."""

    @staticmethod
    def forward(ctx, em, op, site, x, dims, keepdim, mean, kind):
        rest = [d for d in range(x.dim()) if d not in dims]
        k = 1
        for d in dims:
            k *= x.shape[d]
        terms = x.permute(*dims, *rest).reshape(k, -1)  # term t of output m at [t, m], as sum_rows takes
        sums = em.engine.sum_rows(op, kind, terms, site)
        if mean:
            sums = divided(sums, k)
        ctx.em, ctx.shape, ctx.k, ctx.mean = em, x.shape, k, mean
        ctx.kept = [1 if d in dims else x.shape[d] for d in range(x.dim())]
        return owned(sums.reshape(ctx.kept if keepdim else [x.shape[d] for d in rest]))

    @staticmethod
    def backward(ctx, g):
        with ctx.em.backward():  # no reduction here; the next forward opens a new step
            g = g.reshape(ctx.kept)
            if ctx.mean:
                g = divided(g, ctx.k)
            return None, None, None, g.expand(ctx.shape), None, None, None, None


def _sum_params(input, dim=None, keepdim=False, dtype=None): ...
def _adaptive_avg_pool2d_params(input, output_size): ...


def _summing(mean: bool) -> Handler:
    @handles(_sum_params)
    def run(em, op: str, p: dict) -> Any:
        """torch.sum or torch.mean (and the Tensor methods) over dimensions."""
        x, dim, keepdim = p["input"], p["dim"], p["keepdim"]
        why = unsupported(x)
        if why:
            return why
        if p["dtype"] is not None:
            return Native("dtype= is not emulated")
        if x.dim() == 0:
            return Native("a single value: nothing to add", warn=False)
        if dim is None:
            dim = list(range(x.dim()))
        elif isinstance(dim, int) and not isinstance(dim, bool):
            dim = [dim]
        if not isinstance(dim, (list, tuple)) or not all(isinstance(d, int) for d in dim) or not dim:
            return Native("dimensions fplab.torch does not take (named or empty)")
        if not all(-x.dim() <= d < x.dim() for d in dim):
            return Native("dimensions out of range (PyTorch says why)")
        dims = sorted({d % x.dim() for d in dim})
        if len(dims) != len(dim) or x.numel() == 0:
            return Native("repeated dimensions or an empty tensor")
        kind = reduction_kind(dims, x.dim())
        return _Sum.apply(em, op, em.next_site(), x, dims, bool(keepdim), mean, kind)

    return run


@handles(_adaptive_avg_pool2d_params)
def global_average_pool(em, op: str, p: dict) -> Any:
    """F.adaptive_avg_pool2d to one value per plane: the mean over the last two dimensions (bn_stats,
    as the C++ GlobalAvgPool's sum over positions); other output sizes run natively."""
    x, size = p["input"], p["output_size"]
    why = unsupported(x)
    if why:
        return why
    if size not in (1, (1, 1), [1, 1]) or x.dim() not in (3, 4) or x.numel() == 0:
        return Native("output sizes other than 1 x 1 are not emulated yet")
    dims = [x.dim() - 2, x.dim() - 1]
    return _Sum.apply(em, op, em.next_site(), x, dims, True, True, reduction_kind(dims, x.dim()))


# --- softmax and log_softmax ----------------------------------------------------------------


def _rows(x: torch.Tensor, dim: int) -> torch.Tensor:
    """x with ``dim`` moved last, as rows (R, C)."""
    return x.movedim(dim, -1).reshape(-1, x.shape[dim])


def _unrows(rows: torch.Tensor, like: torch.Tensor, dim: int) -> torch.Tensor:
    return rows.reshape(like.movedim(dim, -1).shape).movedim(-1, dim)


class _Softmax(torch.autograd.Function):
    """softmax or log_softmax of x along ``dim``, its denominators in ``softmax``'s order."""

    @staticmethod
    def forward(ctx, em, op, site, x, dim, log):
        rows = _rows(x, dim)
        shifted = rows - rows.max(dim=1, keepdim=True).values
        exps = _math.exp(em, shifted)
        sums = em.engine.sum_rows(op, "softmax", exps.t(), site).unsqueeze(1)  # classes x rows, as the C++
        y = shifted - _math.log(em, sums) if log else exps / sums
        ctx.em, ctx.op, ctx.site, ctx.dim, ctx.log = em, op, site, dim, log
        ctx.save_for_backward(y)
        return owned(_unrows(y, x, dim))

    @staticmethod
    @once_differentiable  # computed by the C++ engine, outside autograd
    def backward(ctx, g):
        em, op, site = ctx.em, ctx.op, ctx.site
        (y,) = ctx.saved_tensors
        rows = _rows(g, ctx.dim)
        with em.backward():
            if ctx.log:  # dx = g - exp(y) * sum(g)
                sums = em.engine.sum_rows(op, "softmax", rows.t(), site, part=1).unsqueeze(1)
                dx = rows - _math.exp(em, y) * sums
            else:  # dx = y * (g - sum(g * y))
                sums = em.engine.sum_rows(op, "softmax", (rows * y).t(), site, part=1).unsqueeze(1)
                dx = y * (rows - sums)
        return None, None, None, _unrows(dx, g, ctx.dim), None, None


def _functional_softmax_params(input, dim=None, _stacklevel=3, dtype=None): ...
def _softmax_params(input, dim, dtype=None): ...


def _softmaxing(log: bool, functional: bool) -> Handler:
    @handles(_functional_softmax_params if functional else _softmax_params)
    def run(em, op: str, p: dict) -> Any:
        """softmax or log_softmax along one dimension."""
        x, dim = p["input"], p["dim"]
        why = unsupported(x)
        if why:
            return why
        if p["dtype"] is not None:
            return Native("dtype= is not emulated")
        if not isinstance(dim, int) or isinstance(dim, bool) or x.dim() == 0 or not -x.dim() <= dim < x.dim():
            return Native("an implicit, named or out-of-range dim")
        if x.numel() == 0:
            return Native("an empty tensor")
        return _Softmax.apply(em, op, em.next_site(), x, dim % x.dim(), log)

    return run


# --- losses ---------------------------------------------------------------------------------


def _kept(target: torch.Tensor, ignore_index: int) -> tuple:
    """(labels, kept): the targets with ignored ones (== ignore_index) read as class 0, and where
    the targets are not ignored (bool)."""
    kept = target != ignore_index
    return target.masked_fill(~kept, 0), kept


def _count(kept: torch.Tensor) -> torch.Tensor:
    """How many examples count towards a mean: the kept ones, as float32 on their device (PyTorch's
    nll_loss adds a weight of 1 for each, exactly)."""
    return kept.sum(dtype=torch.float32)


def _total(em, op: str, site, losses: torch.Tensor, reduction: str, count: torch.Tensor) -> torch.Tensor:
    """The per-example losses summed in ``loss``'s order (divided by ``count`` for "mean"; an ignored
    example's loss is 0, a term that changes no sum)."""
    total = em.engine.sum_rows(op, "loss", losses.reshape(-1, 1), site)[0]
    return torch.div(total, count) if reduction == "mean" else total


def _scaled(d: torch.Tensor, g: torch.Tensor, reduction: str, count: torch.Tensor) -> torch.Tensor:
    """The gradient of every example's loss times the output gradient g."""
    if reduction == "mean":
        d = torch.div(d, count)
    return d * (g.unsqueeze(1) if reduction == "none" else g)


class _CrossEntropy(torch.autograd.Function):
    """Softmax cross-entropy of logits (N, C) with class indices (N,), as the C++ layer computes it."""

    @staticmethod
    def forward(ctx, em, op, site, logits, target, reduction, ignore_index):
        labels, kept = _kept(target, ignore_index)
        row_max = logits.max(dim=1, keepdim=True).values
        exps = _math.exp(em, logits - row_max)
        sums = em.engine.sum_rows(op, "softmax", exps.t(), site)
        losses = (_math.log(em, sums) + row_max.squeeze(1)) - logits.gather(1, labels.unsqueeze(1)).squeeze(1)
        losses = losses.masked_fill(~kept, 0)
        count = _count(kept)
        ctx.em, ctx.reduction = em, reduction
        ctx.save_for_backward(exps / sums.unsqueeze(1), labels, kept, count)
        return owned(losses if reduction == "none" else _total(em, op, site, losses, reduction, count))

    @staticmethod
    @once_differentiable  # computed by the C++ engine, outside autograd
    def backward(ctx, g):
        p, labels, kept, count = ctx.saved_tensors
        with ctx.em.backward():
            d = p.clone()
            d[torch.arange(d.shape[0], device=d.device), labels] -= 1
            d.masked_fill_(~kept.unsqueeze(1), 0)  # an ignored example has no gradient
            return None, None, None, _scaled(d, g, ctx.reduction, count), None, None, None


class _NllLoss(torch.autograd.Function):
    """The negative log-likelihood of log-probabilities (N, C) at class indices (N,)."""

    @staticmethod
    def forward(ctx, em, op, site, logp, target, reduction, ignore_index):
        labels, kept = _kept(target, ignore_index)
        losses = (-logp.gather(1, labels.unsqueeze(1)).squeeze(1)).masked_fill(~kept, 0)
        count = _count(kept)
        ctx.em, ctx.reduction, ctx.shape = em, reduction, logp.shape
        ctx.save_for_backward(labels, kept, count)
        return owned(losses if reduction == "none" else _total(em, op, site, losses, reduction, count))

    @staticmethod
    @once_differentiable  # computed by the C++ engine, outside autograd
    def backward(ctx, g):
        labels, kept, count = ctx.saved_tensors
        with ctx.em.backward():
            # As PyTorch's kernels: -(g / N) at each label for "mean" (N the kept examples), -g for
            # "sum", -g[i] for "none"; 0 for an ignored example
            if ctx.reduction == "mean":
                g = torch.div(g, count)
            picked = torch.where(kept, -g, 0.0)  # g may be one value: broadcast over the examples
            d = torch.zeros(ctx.shape, dtype=g.dtype, device=g.device)
            d[torch.arange(ctx.shape[0], device=g.device), labels] = picked
            return None, None, None, d, None, None, None


def _cross_entropy_params(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
                          reduction="mean", label_smoothing=0.0): ...
def _nll_loss_params(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
                     reduction="mean"): ...


def _loss_inputs(p: dict) -> Optional[Native]:
    """Why a loss call runs natively, or None: 2-D float32 input, class indices, plain options."""
    x, target = p["input"], p["target"]
    why = unsupported(x)
    if why:
        return why
    if p["weight"] is not None or p["size_average"] is not None or p["reduce"] is not None:
        return Native("class weights or legacy size_average/reduce are not emulated")
    if p.get("label_smoothing", 0.0) != 0.0:
        return Native("label smoothing is not emulated")
    if p["reduction"] not in ("mean", "sum", "none"):
        return Native("a reduction PyTorch does not know (PyTorch says why)")
    if not isinstance(target, torch.Tensor) or target.dtype != torch.int64 or target.device != x.device:
        return Native("targets that are not class indices (int64) on the input's device")
    if x.dim() != 2 or target.shape != (x.shape[0],) or x.numel() == 0:
        return Native("shapes other than (N, C) with N targets are not emulated")
    if not isinstance(p["ignore_index"], int) or isinstance(p["ignore_index"], bool):
        return Native("an ignore_index that is not a whole number (PyTorch says why)")
    # A target outside 0..C-1 that is not ignore_index: PyTorch's error. Looked for on the CPU only:
    # for CUDA targets it would wait for the GPU to finish the forward pass; a wrong target there
    # stops the emulated gather with a device-side assertion, as it stops PyTorch's own kernel.
    if target.device.type == "cpu":
        wrong = (target != p["ignore_index"]) & ((target < 0) | (target >= x.shape[1]))
        if bool(wrong.any()):
            return Native("targets outside 0..C-1 that are not ignore_index (PyTorch says why)")
    return None


def _loss(function: type) -> Handler:
    """The handler of a loss over class indices computed by the autograd.Function ``function``."""

    def run(em, op: str, p: dict) -> Any:
        why = _loss_inputs(p)
        return why or function.apply(em, op, em.next_site(), p["input"], p["target"], p["reduction"], p["ignore_index"])

    return run


@handles(_cross_entropy_params)
def cross_entropy(em, op: str, p: dict) -> Any:
    """F.cross_entropy over class indices: with math="torch", PyTorch's own composition (log_softmax,
    then nll_loss: losses -(x - max - log(sum)), gradient g - exp(log_softmax) * sum(g)); with
    math="libm", the C++ layer's formulas (losses (log(sum) + max) - x, gradient (p - onehot) / N)."""
    why = _loss_inputs(p)
    if why:
        return why
    if em.math == "libm":
        return _CrossEntropy.apply(em, op, em.next_site(), p["input"], p["target"], p["reduction"], p["ignore_index"])
    logp = _Softmax.apply(em, op, em.next_site(), p["input"], 1, True)
    return _NllLoss.apply(em, op, em.next_site(), logp, p["target"], p["reduction"], p["ignore_index"])
nll_loss = handles(_nll_loss_params)(_loss(_NllLoss))


HANDLERS = {
    torch.sum: _summing(mean=False),
    torch.Tensor.sum: _summing(mean=False),
    torch.mean: _summing(mean=True),
    torch.Tensor.mean: _summing(mean=True),
    torch.nn.functional.adaptive_avg_pool2d: global_average_pool,
    torch.nn.functional.softmax: _softmaxing(log=False, functional=True),
    torch.softmax: _softmaxing(log=False, functional=False),
    torch.Tensor.softmax: _softmaxing(log=False, functional=False),
    torch.nn.functional.log_softmax: _softmaxing(log=True, functional=True),
    torch.log_softmax: _softmaxing(log=True, functional=False),
    torch.Tensor.log_softmax: _softmaxing(log=True, functional=False),
    torch.nn.functional.cross_entropy: cross_entropy,
    torch.nn.functional.nll_loss: nll_loss,
}
