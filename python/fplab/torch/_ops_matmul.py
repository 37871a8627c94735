"""Matmul-like operations through fplab: F.linear, torch.matmul / @, mm, bmm, addmm, baddbmm.

Every one becomes ``_Gemm``: C_i = A_i B_i (+ bias) over a stack of matrices, whose forward is
op kind ``fwd`` and whose backward knows its reductions: dA_i = dC_i B_i^T is ``dgrad`` (the
reduction over output features), dB_i = A_i^T dC_i is ``wgrad`` (the reduction over the batch),
and the bias gradient, dC summed over its rows, is ``bias_grad``. Each GEMM is laid out as the C++
Linear layer lays out its own (models/linear.cpp: y = x W with W (in x out), dW = x^T dy,
dx = dy W^T), so that the same schedule, noise key and output tiles meet the same sums. For a
matmul of two activations (attention scores), the left operand plays the input and the right
one the weight. Matrix i of a batch is reduction ``part`` i of its kind.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Optional

import torch
from torch.autograd.function import once_differentiable

from ._handler import Handler, handles, owned
from ._table import Layer
from ._native import Native, unsupported


def _stack(matrices) -> torch.Tensor:
    """The matrices as one (T, rows, cols) tensor; a single one without a copy."""
    return matrices[0].unsqueeze(0) if len(matrices) == 1 else torch.stack(matrices)


class _Gemm(torch.autograd.Function):
    """C_i = A_i B_i (+ bias) for a (T, m, k) and b (T, k, n); bias (n,) or None (T = 1 only)."""

    @staticmethod
    def forward(ctx, em, op, site, a, b, bias):
        ctx.em, ctx.op, ctx.site = em, op, site
        ctx.save_for_backward(a, b)
        c = _stack([em.engine.matmul(op, "fwd", a[i], b[i], site, part=i) for i in range(a.shape[0])])
        return c + bias if bias is not None else owned(c)

    @staticmethod
    @once_differentiable  # computed by the C++ engine, outside autograd
    def backward(ctx, gc):
        em, op, site = ctx.em, ctx.op, ctx.site
        a, b = ctx.saved_tensors
        need_a, need_b, need_bias = ctx.needs_input_grad[3:6]
        ga = gb = gbias = None
        with em.backward():
            if need_b:
                gb = _stack([em.engine.matmul(op, "wgrad", a[i].t(), gc[i], site, part=i) for i in range(a.shape[0])])
            if need_bias:
                gbias = em.engine.sum_rows(op, "bias_grad", gc.reshape(-1, gc.shape[-1]), site)
            if need_a:
                ga = _stack([em.engine.matmul(op, "dgrad", gc[i], b[i].t(), site, part=i) for i in range(a.shape[0])])
        return None, None, None, ga, gb, gbias


def gemm(em, op: str, a: torch.Tensor, b: torch.Tensor, bias: Optional[torch.Tensor] = None,
         layer: Optional[Layer] = None) -> torch.Tensor:
    """The emulated C = A B (+ bias) for a (T, m, k), b (T, k, n): one forward operation (one Site);
    ``layer``: the linear layer it is, for the profile's layer rules (F.linear)."""
    return _Gemm.apply(em, op, replace(em.next_site(), layer=layer), a, b, bias)


def _linear_params(input, weight, bias=None): ...
def _matmul_params(input, other, *, out=None): ...
def _mm_params(input, mat2, *, out=None): ...
def _addmm_params(input, mat1, mat2, *, beta=1, alpha=1, out=None): ...


def _empty(*tensors: torch.Tensor) -> bool:
    """True if a tensor has no elements (PyTorch answers those itself)."""
    return any(t.numel() == 0 for t in tensors)


@handles(_linear_params)
def linear(em, op: str, p: dict) -> Any:
    """F.linear(x, W, b) = x W^T + b, x (..., in), W (out, in), b (out,)."""
    x, w, bias = p["input"], p["weight"], p["bias"]
    why = unsupported(x, w, bias)
    if why:
        return why
    if w.dim() != 2 or x.dim() < 1 or x.shape[-1] != w.shape[1] or _empty(x, w):
        return Native("shapes fplab.torch does not take (or that PyTorch refuses)")
    if bias is not None and tuple(bias.shape) != (w.shape[0],):
        return Native("a bias that is not one value per output")
    layer = ("linear", int(w.shape[1]), int(w.shape[0]), 0, 0, 0, x.numel() // x.shape[-1])  # batch: the rows
    c = gemm(em, op, x.reshape(1, -1, x.shape[-1]), w.t().unsqueeze(0), bias, layer)
    return c.reshape(*x.shape[:-1], w.shape[0])


def _product(em, op: str, a: torch.Tensor, b: torch.Tensor) -> Any:
    """torch.matmul's meaning for a @ b, emulated, or Native."""
    why = unsupported(a, b)
    if why:
        return why
    if a.dim() == 0 or b.dim() == 0 or _empty(a, b):
        return Native("shapes fplab.torch does not take (or that PyTorch refuses)")
    a2 = a.unsqueeze(0) if a.dim() == 1 else a
    b2 = b.unsqueeze(-1) if b.dim() == 1 else b
    m, k, n = a2.shape[-2], a2.shape[-1], b2.shape[-1]
    if b2.shape[-2] != k:
        return Native("shapes that do not chain (PyTorch says why)")
    if b2.dim() == 2:  # (..., m, k) @ (k, n): one GEMM over every row, as torch.matmul folds it
        c = gemm(em, op, a2.reshape(1, -1, k), b2.unsqueeze(0)).reshape(*a2.shape[:-1], n)
    elif a2.shape[:-2] == b2.shape[:-2]:
        batch = a2.shape[:-2]
        c = gemm(em, op, a2.reshape(-1, m, k), b2.reshape(-1, k, n)).reshape(*batch, m, n)
    else:
        return Native("broadcast batch dimensions are not emulated yet")
    if a.dim() == 1:
        c = c.squeeze(-2)
    if b.dim() == 1:
        c = c.squeeze(-1)
    return c


@handles(_matmul_params)
def matmul(em, op: str, p: dict) -> Any:
    """torch.matmul, Tensor.matmul, a @ b (vectors, matrices, stacks of matrices)."""
    if p["out"] is not None:
        return Native("out= is not emulated")
    return _product(em, op, p["input"], p["other"])


def _dims_exactly(count: int) -> Handler:
    @handles(_mm_params)
    def run(em, op: str, p: dict) -> Any:
        """torch.mm (2-D operands) or torch.bmm (3-D)."""
        a, b = p["input"], p["mat2"]
        if p["out"] is not None:
            return Native("out= is not emulated")
        if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)) or a.dim() != count or b.dim() != count:
            return Native(f"operands that are not {count}-D (PyTorch says why)")
        return _product(em, op, a, b)

    return run


def _plus_product(count: int) -> Handler:
    @handles(_addmm_params)
    def run(em, op: str, p: dict) -> Any:
        """torch.addmm (2-D) or torch.baddbmm (3-D): input + a b, with beta = alpha = 1."""
        bias, a, b = p["input"], p["mat1"], p["mat2"]
        if p["out"] is not None:
            return Native("out= is not emulated")
        if p["beta"] != 1 or p["alpha"] != 1:
            return Native("beta or alpha other than 1 are not emulated")
        why = unsupported(bias, a, b)
        if why:
            return why
        if a.dim() != count or b.dim() != count or a.shape[-1] != b.shape[-2] or _empty(a, b):
            return Native("shapes fplab.torch does not take (or that PyTorch refuses)")
        shape = (*a.shape[:-1], b.shape[-1])
        if count == 2 and tuple(bias.shape) in ((shape[-1],), (1, shape[-1])):  # a Linear layer's bias
            return gemm(em, op, a.unsqueeze(0), b.unsqueeze(0), bias.reshape(-1))[0]
        if tuple(bias.shape) == shape:  # no reduction in its gradient: the sum stays native
            return _product(em, op, a, b) + bias
        return Native("an added term that is neither a bias nor of the result's shape")

    return run


HANDLERS = {
    torch.nn.functional.linear: linear,
    torch.matmul: matmul,
    torch.Tensor.matmul: matmul,
    torch.Tensor.__matmul__: matmul,
    torch.mm: _dims_exactly(2),
    torch.Tensor.mm: _dims_exactly(2),
    torch.bmm: _dims_exactly(3),
    torch.Tensor.bmm: _dims_exactly(3),
    torch.addmm: _plus_product(2),
    torch.Tensor.addmm: _plus_product(2),
    torch.baddbmm: _plus_product(3),
    torch.Tensor.baddbmm: _plus_product(3),
}
