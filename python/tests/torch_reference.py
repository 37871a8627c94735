"""Independent references for the fplab.torch tests: the sums of a Linear layer, a convolution,
cross-entropy and batch normalisation written as plain NumPy float32 loops in one fixed order
(every product rounded to float32, then added: the cpu-seq profile's arithmetic). Nothing here
calls fplab; PyTorch is used only for exp and log (elementwise, not emulated)."""

import unittest

import numpy as np

try:
    import torch
except ImportError:  # the tests say so and skip
    torch = None

needs_torch = unittest.skipIf(torch is None, "torch is not installed for this python3 (Debian: python3-torch)")

F32 = np.float32


def seq_matmul(a, b):
    """C = A B, every output the left fold over k of the float32-rounded products a[i, t] * b[t, j]."""
    a, b = np.asarray(a, F32), np.asarray(b, F32)
    acc = a[:, 0:1] * b[0:1, :]
    for t in range(1, a.shape[1]):
        acc = acc + a[:, t:t + 1] * b[t:t + 1, :]
    return acc


def seq_columns(x):
    """Every column of the 2-D x summed top to bottom in float32."""
    x = np.asarray(x, F32)
    acc = x[0].copy()
    for row in x[1:]:
        acc = acc + row
    return acc


def conv2d_forward(x, w, bias, stride, padding):
    """y[b, o, oy, ox]: the fold over (c, i, j) in that order of x[b, c, .., ..] * w[o, c, i, j]."""
    xp = np.pad(np.asarray(x, F32), ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    batch, channels, h, wd = xp.shape
    out, _, kh, kw = w.shape
    ho, wo = (h - kh) // stride + 1, (wd - kw) // stride + 1
    acc = None
    for c in range(channels):
        for i in range(kh):
            for j in range(kw):
                patch = xp[:, c, i:i + (ho - 1) * stride + 1:stride, j:j + (wo - 1) * stride + 1:stride]
                term = patch[:, None] * w[None, :, c, i, j, None, None]
                acc = term if acc is None else acc + term
    return acc + np.asarray(bias, F32)[None, :, None, None]


def conv2d_weight_grad(x, g, kernel, stride, padding):
    """dW[o, c, i, j]: the fold over (b, oy, ox) in that order of g[b, o, oy, ox] * x[b, c, ...]."""
    xp = np.pad(np.asarray(x, F32), ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    batch, _, ho, wo = g.shape
    acc = None
    for b in range(batch):
        for oy in range(ho):
            for ox in range(wo):
                window = xp[b, :, oy * stride:oy * stride + kernel, ox * stride:ox * stride + kernel]
                term = g[b, :, oy, ox][:, None, None, None] * window[None]
                acc = term if acc is None else acc + term
    return acc


def conv2d_input_grad(g, w, input_shape, stride, padding):
    """dx: per (b, oy, ox) the column gradient sum over o in order, then added into dx in the loop
    order (oy, ox, c, i, j) of the C++ layer's col2im."""
    batch, channels, h, wd = input_shape
    out, _, kh, kw = w.shape
    _, _, ho, wo = g.shape
    dxp = np.zeros((batch, channels, h + 2 * padding, wd + 2 * padding), F32)
    wm = np.asarray(w, F32).reshape(out, -1)
    for oy in range(ho):
        for ox in range(wo):
            dcols = seq_matmul(g[:, :, oy, ox], wm).reshape(batch, channels, kh, kw)
            for i in range(kh):
                for j in range(kw):
                    dxp[:, :, oy * stride + i, ox * stride + j] += dcols[:, :, i, j]
    return dxp[:, :, padding:padding + h, padding:padding + wd]


def conv2d_input_grad_direct(g, w, input_shape, stride, padding):
    """dx as conv_dgrad "direct" adds it: per input element one left fold, products rounded, over
    (output channel, kernel row, kernel column) of the taps that meet an output."""
    batch, channels, h, wd = input_shape
    out, _, kh, kw = w.shape
    _, _, ho, wo = g.shape
    g, w = np.asarray(g, F32), np.asarray(w, F32)
    dx = np.zeros(input_shape, F32)
    for y in range(h):
        for x in range(wd):
            acc = np.zeros((batch, channels), F32)
            for o in range(out):
                for i in range(kh):
                    for j in range(kw):
                        oy, ox = y + padding - i, x + padding - j
                        if oy < 0 or ox < 0 or oy % stride or ox % stride or oy // stride >= ho or ox // stride >= wo:
                            continue
                        acc = acc + g[:, o, oy // stride, ox // stride][:, None] * w[o, :, i, j][None, :]
            dx[:, :, y, x] = acc
    return dx


def cross_entropy(logits, target, exp=None, log=None):
    """The mean softmax cross-entropy and its gradient as the C++ layer computes them, sums in order;
    exp and log: functions of float32 arrays (default: PyTorch's)."""
    exp = exp or (lambda a: torch.exp(torch.from_numpy(a)).numpy())
    log = log or (lambda a: torch.log(torch.from_numpy(a)).numpy())
    x = torch.as_tensor(logits)
    row_max = x.max(dim=1, keepdim=True).values
    exps = exp((x - row_max).numpy())
    sums = seq_columns(exps.T)
    picked = x.numpy()[np.arange(len(target)), target]
    losses = (log(sums) + row_max.numpy()[:, 0]) - picked
    loss = seq_columns(losses[:, None])[0] / F32(len(target))
    d = exps / sums[:, None]
    d[np.arange(len(target)), target] -= F32(1)
    return loss, d / F32(len(target))


def log_softmax_nll(logits, target):
    """The mean cross-entropy and its gradient as PyTorch composes it: log_softmax (sums in order),
    then nll_loss (the losses summed in order, divided by the batch); the gradient
    d - exp(logp) * sum(d), with d = -(1 / batch) at each label."""
    x = torch.as_tensor(logits)
    shifted = (x - x.max(dim=1, keepdim=True).values).numpy()
    sums = seq_columns(torch.exp(torch.from_numpy(shifted)).numpy().T)
    logp = shifted - torch.log(torch.from_numpy(sums)).numpy()[:, None]
    rows = np.arange(len(target))
    loss = seq_columns(-logp[rows, target][:, None])[0] / F32(len(target))
    d = np.zeros_like(logp)
    d[rows, target] = -(F32(1) / F32(len(target)))
    return loss, d - torch.exp(torch.from_numpy(logp)).numpy() * seq_columns(d.T)[:, None]


def fma32(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """fma(a, b, c) of float32 tensors (broadcast together), one rounding, as a float32 tensor: the
    float64 product of two float32 values is exact, TwoSum gives the float64 sum's error exactly, and
    a sum on a float32 midpoint moves one float64 step the error's way before it is rounded."""
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
