#!/usr/bin/env python3
"""Which formula a BatchNorm kernel computes in training mode: its statistics and its output,
told apart bit by bit on inputs whose sums no order can change.

  experiments/bn_formula_torch.py --device cuda --shapes 64x16@28,64x32@14,64x32@7 --trials 4
  experiments/bn_formula_torch.py --device cpu --shapes 8x4@6 --trials 2 --json /tmp/bn.json

A sum's order hides a formula: two kernels with the same formula and other orders differ in their
last bits. So every channel's values here are c + k/16 with k in -8..8, in pairs c + v, c - v:
every partial sum of them, of their deviations and of their squares is exact in float32 (the
magnitudes stay under 2^24 units of 1/256), whatever the order; the sums are the float64 sums. What
is left to round is the formula itself:
- the mean: sum / n (exactly c here), or something else (an online update, say, rounds on the way);
- the inverse standard deviation from var = sum((x - mean)^2) / n (or sum * (1/n), the reciprocal
  rounded first): 1 / sqrt(var + eps) in float32 with its roundings, or one rounding (a correctly
  rounded rsqrt, or the whole in float64), or the device's own rsqrt (a GPU's is an approximation,
  not correctly rounded), or another the candidates do not name;
- the output from the kernel's own mean and inverse standard deviation (aten._batch_norm_impl_index,
  what F.batch_norm calls, returns both, and which backend ran: cuDNN's on a GPU): (x - mean) * invstd * gamma + beta in fplab's order, the scale gamma * invstd
  first, or x * scale + shift with shift = beta - mean * scale (one fused multiply-add or two
  roundings; scale and shift in float32 or float64).
With --offset C every centre moves by C: the values' sums stay exact while n (|C| + 2.5) 16 < 2^24
(checked), and so do the deviations and their squares, but a one-pass variance E[x^2] - mean^2
would lose most of its bits: an invstd that still matches the exact variance's says the kernel
subtracts the mean first (two passes, or Welford's updates).
For each shape and trial (gamma and beta random), the share of channels or elements each candidate
reproduces bit for bit; a candidate at 100% in every trial is the kernel's formula (on these inputs).
fplab's BatchNorm is the first candidate of each (models/batch_norm.cpp).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Callable, Dict, List, Tuple

import numpy as np

EPS = 1e-5


def batch_norm_shape(text: str) -> Tuple[int, int, int]:
    """'BxC@S' -> (batch, channels, size), every number positive (the BatchNorm experiments' shapes:
    bn_trials_torch.py and bn_impulse_torch.py take theirs from here); argparse.ArgumentTypeError
    with one line otherwise."""
    try:
        dims, size = text.split("@")
        batch, channels = (int(v) for v in dims.split("x"))
        shape = (batch, channels, int(size))
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}': a shape is BATCHxCHANNELS@SIZE, e.g. 64x16@28") from None
    if min(shape) < 1:
        raise argparse.ArgumentTypeError(f"'{text}': positive numbers")
    return shape


def _shape(text: str) -> Tuple[int, int, int]:
    """batch_norm_shape, the values of a channel in +- pairs."""
    shape = batch_norm_shape(text)
    if (shape[0] * shape[2] * shape[2]) % 2:
        raise argparse.ArgumentTypeError(f"'{text}': batch x size x size even (values in pairs)")
    return shape


def exact_inputs(shape: Tuple[int, int, int], trial: int, offset: float = 0.0) -> Tuple[np.ndarray, np.ndarray]:
    """x (B, C, S, S) of c + k/16 values in +-pairs per channel, and each channel's c (float32);
    the centres moved by `offset` (a multiple of 1/16)."""
    batch, channels, size = shape
    rng = np.random.default_rng(100 + trial)
    n = batch * size * size
    centres = (rng.integers(-32, 33, channels) / 16 + offset).astype(np.float32)
    half = rng.integers(-8, 9, (channels, n // 2)) / 16
    values = np.concatenate([half, -half], axis=1)
    for row in values:
        rng.shuffle(row)
    x = (centres[:, None] + values).astype(np.float32).reshape(channels, batch, size, size).transpose(1, 0, 2, 3)
    return np.ascontiguousarray(x), centres


def _f32(v) -> np.ndarray:
    return np.asarray(v, dtype=np.float32)


def _var_divided(squares, n) -> np.ndarray:
    return _f32(squares / n)


def _var_by_reciprocal(squares, n) -> np.ndarray:
    return _f32(_f32(squares) * np.float32(1 / n))


def _plus_eps(var) -> np.ndarray:
    return _f32(var + np.float32(EPS))


def _two_roundings(v) -> np.ndarray:
    return _f32(np.float32(1) / np.sqrt(v))


def _one_rounding(v) -> np.ndarray:
    return _f32(1 / np.sqrt(v.astype(np.float64)))


INVSTD: Dict[str, Callable[..., np.ndarray]] = {
    # (squares: the exact sum of squared deviations as float64, n, rsqrt: the device's float32
    # torch.rsqrt, its own approximation on a GPU) -> invstd
    "1 / sqrt(var + eps) (fplab)": lambda q, n, rsqrt: _two_roundings(_plus_eps(_var_divided(q, n))),
    "rsqrt(var + eps), one rounding": lambda q, n, rsqrt: _one_rounding(_plus_eps(_var_divided(q, n))),
    "1 / sqrt(var + eps) in float64, one rounding": lambda q, n, rsqrt: _f32(1 / np.sqrt(q / n + EPS)),
    "the device's rsqrt(var + eps)": lambda q, n, rsqrt: rsqrt(_plus_eps(_var_divided(q, n))),
    "var = sum * (1/n); 1 / sqrt(var + eps)": lambda q, n, rsqrt: _two_roundings(_plus_eps(_var_by_reciprocal(q, n))),
    "var = sum * (1/n); rsqrt, one rounding": lambda q, n, rsqrt: _one_rounding(_plus_eps(_var_by_reciprocal(q, n))),
    "var = sum * (1/n); the device's rsqrt": lambda q, n, rsqrt: rsqrt(_plus_eps(_var_by_reciprocal(q, n))),
}

OUTPUT: Dict[str, Callable[..., np.ndarray]] = {
    # (x, mean, invstd, gamma, beta) float32, per-channel values broadcast -> y
    "gamma * ((x - mean) * invstd) + beta (fplab)":
        lambda x, m, s, g, b: _f32(_f32(g * _f32(_f32(x - m) * s)) + b),
    "(x - mean) * (gamma * invstd) + beta":
        lambda x, m, s, g, b: _f32(_f32(_f32(x - m) * _f32(g * s)) + b),
    "fma(x, gamma * invstd, beta - mean * gamma * invstd)":
        lambda x, m, s, g, b: _fma(x, _f32(g * s), _f32(b - _f32(m * _f32(g * s)))),
    "fma(x - mean, gamma * invstd, beta)":
        lambda x, m, s, g, b: _fma(_f32(x - m), _f32(g * s), b),
    "fma((x - mean) * invstd, gamma, beta)":
        lambda x, m, s, g, b: _fma(_f32(_f32(x - m) * s), g, b),
    "x * (gamma * invstd) + (beta - mean * gamma * invstd), two roundings":
        lambda x, m, s, g, b: _f32(_f32(x * _f32(g * s)) + _f32(b - _f32(m * _f32(g * s)))),
    "x * scale + shift, scale and shift in float64, two roundings":
        lambda x, m, s, g, b: _f32(_f32(x * _f32(_scale64(s, g))) + _f32(_shift64(m, s, g, b))),
    "fma(x, scale, shift), scale and shift in float64":
        lambda x, m, s, g, b: _fma(x, _f32(_scale64(s, g)), _f32(_shift64(m, s, g, b))),
    "fma(x, gamma * invstd, fma(-mean, gamma * invstd, beta))":
        lambda x, m, s, g, b: _fma(x, _f32(g * s), _fma(-m, _f32(g * s), b)),
    "fma(x * invstd - mean * invstd, gamma, beta)":
        lambda x, m, s, g, b: _fma(_f32(_f32(x * s) - _f32(m * s)), g, b),
    "fma(fma(x, invstd, -mean * invstd), gamma, beta)":
        lambda x, m, s, g, b: _fma(_fma(x, s, _f32(-m * s)), g, b),
}


def _scale64(s, g) -> np.ndarray:
    return s.astype(np.float64) * g.astype(np.float64)


def _shift64(m, s, g, b) -> np.ndarray:
    return b.astype(np.float64) - m.astype(np.float64) * _scale64(s, g)


def _fma(a, b, c) -> np.ndarray:
    """a * b + c rounded once to float32 (float64 holds a float32 product exactly; the sum is then
    rounded twice, to float64 and to float32, which can differ from one rounding only on float64
    ties: none at these magnitudes for our inputs)."""
    return _f32(a.astype(np.float64) * b.astype(np.float64) + c.astype(np.float64))


def sums_stay_exact(shape: Tuple[int, int, int], offset: float) -> bool:
    """Whether every partial sum of a channel's values is exact in float32: n values of at most
    |offset| + 2.5, on a grid of 1/16, stay under 2^24 units of it."""
    batch, _, size = shape
    return batch * size * size * (abs(offset) + 2.5) * 16 < 2 ** 24


def probe(torch, shape, trial: int, device, offset: float = 0.0) -> dict:
    """One trial: the kernel's mean, invstd and output against every candidate."""
    x, centres = exact_inputs(shape, trial, offset)
    channels = shape[1]
    rng = np.random.default_rng(500 + trial)
    gamma = (1 + rng.standard_normal(channels) / 4).astype(np.float32)
    beta = (rng.standard_normal(channels) / 4).astype(np.float32)
    xt = torch.from_numpy(x).to(device)
    # What F.batch_norm calls in training (cuDNN's kernels on a GPU), with the statistics it saves
    # for the backward pass: the mean and the inverse standard deviation.
    y, mean, invstd, _, backend = torch.ops.aten._batch_norm_impl_index(
        xt, torch.from_numpy(gamma).to(device), torch.from_numpy(beta).to(device),
        torch.zeros(channels, device=device), torch.ones(channels, device=device), True, 0.1, EPS,
        torch.backends.cudnn.enabled)
    y, mean, invstd = (t.detach().cpu().numpy() for t in (y, mean, invstd))
    n = x.size // channels
    deviations = x.astype(np.float64) - centres[None, :, None, None].astype(np.float64)
    squares = (deviations ** 2).sum(axis=(0, 2, 3))  # exact in float32 and float64 alike

    def rsqrt(v: np.ndarray) -> np.ndarray:
        return torch.rsqrt(torch.from_numpy(_f32(v)).to(device)).cpu().numpy()

    per_channel = lambda v: v[None, :, None, None]  # noqa: E731
    row = {"shape": "%dx%d@%d" % shape, "trial": trial, "backend": {0: "native", 1: "cudnn", 2: "miopen"}.get(backend),
           "mean_exact": float(np.mean(mean == centres)),
           "invstd": {name: float(np.mean(f(squares, n, rsqrt) == invstd)) for name, f in INVSTD.items()},
           "output": {name: float(np.mean(f(x, per_channel(mean), per_channel(invstd), per_channel(gamma),
                                            per_channel(beta)) == y)) for name, f in OUTPUT.items()}}
    return row


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="examples:\n  %(prog)s --device cpu --shapes 8x4@6 --trials 2\n")
    parser.add_argument("--device", default="cuda", help="cuda or cpu (default: %(default)s)")
    parser.add_argument("--shapes", type=lambda t: [_shape(s) for s in t.split(",")],
                        default=[(64, 16, 28), (64, 32, 14), (64, 32, 7)],
                        help="comma-separated BATCHxCHANNELS@SIZE (default: small_cnn_bn's three)")
    parser.add_argument("--trials", type=int, default=4, help="draws per shape (default: %(default)s)")
    parser.add_argument("--deterministic", action="store_true", help="PyTorch's deterministic mode")
    parser.add_argument("--offset", type=float, default=0.0,
                        help="move every channel's centre by this multiple of 1/16 (default: 0). Far from 0 "
                             "(64, say) the deviations and the mean stay exact but a one-pass variance, "
                             "E[x^2] - mean^2, loses most of its bits: whether invstd still matches the exact "
                             "variance tells a two-pass (or Welford) kernel from a one-pass one")
    parser.add_argument("--json", metavar="FILE", help="also write every number to FILE")
    try:
        args = parser.parse_args(argv)
    except SystemExit as stop:
        return int(stop.code or 0)
    if args.trials < 1:
        print("bn_formula_torch.py: --trials must be at least 1", file=sys.stderr)
        return 2
    import torch

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print(f"bn_formula_torch.py: --device {args.device}, but this PyTorch sees no CUDA device", file=sys.stderr)
        return 2
    torch.use_deterministic_algorithms(args.deterministic)
    if args.offset * 16 != round(args.offset * 16):
        print(f"bn_formula_torch.py: --offset {args.offset}: a multiple of 1/16", file=sys.stderr)
        return 2
    for shape in args.shapes:
        if not sums_stay_exact(shape, args.offset):
            print(f"bn_formula_torch.py: {'%dx%d@%d' % shape} with --offset {args.offset}: a channel's sums would "
                  f"not be exact in float32 (fewer values or a smaller offset)", file=sys.stderr)
            return 2
    rows = [probe(torch, shape, trial, args.device, args.offset) for shape in args.shapes
            for trial in range(args.trials)]
    print(f"backend: {', '.join(sorted({str(r['backend']) for r in rows}))}")
    print("| shape | trials | mean exact | " + " | ".join(f"invstd: {k}" for k in INVSTD) + " | "
          + " | ".join(f"y: {k}" for k in OUTPUT) + " |")
    print("|---|---|---|" + "---|" * (len(INVSTD) + len(OUTPUT)))
    for shape in dict.fromkeys(r["shape"] for r in rows):
        mine = [r for r in rows if r["shape"] == shape]
        cells = ["%.1f%%" % (100 * min(r["mean_exact"] for r in mine))]
        cells += ["%.1f%%" % (100 * min(r["invstd"][k] for r in mine)) for k in INVSTD]
        cells += ["%.1f%%" % (100 * min(r["output"][k] for r in mine)) for k in OUTPUT]
        print(f"| {shape} | {len(mine)} | " + " | ".join(cells) + " |")
    print("(the least share over the trials of channels, or elements, each candidate reproduces bit for bit)")
    if args.json:
        from fplab import _core

        try:
            _core.write_file_atomically(args.json, json.dumps({"device": args.device, "torch": torch.__version__,
                                                               "deterministic": args.deterministic, "rows": rows},
                                                              indent=1))
        except ValueError as error:  # fplab.Error: one line naming the file
            print(f"bn_formula_torch.py: {error}", file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
