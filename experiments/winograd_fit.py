#!/usr/bin/env python3
"""cuDNN's Winograd weight gradient, stage by stage, against fplab's model of it.

  experiments/winograd_fit.py check DIR                       # every probe file in DIR, each stage
  experiments/winograd_fit.py fixture DIR --out tests/data/cudnn_winograd_h200.bin

DIR holds what experiments/winograd_workspace_torch.py wrote on the GPU: per shape x, dy, the
kernel's dw and its workspace, whose three regions are (the probe's impulses located them):
V (36, terms, C), the input's tiles transformed; U (36, terms, K), the output gradient's; M (36, K,
C), their 36 GEMMs over (image, tile). `check` computes each stage from the previous one's chip
values with the model below (a NumPy evaluation of the orders sim/winograd_wgrad.cpp takes, written
separately from it; fused multiply-adds correctly rounded through float64 by rounding to odd)
and prints the share of identical bits; `fixture` writes a sample of every stage
(inputs and the chip's outputs) that tests/test_winograd_wgrad.cpp and python/tests hold fplab to.

How the model was found (docs/results/calibration_torch.md, "cuDNN's Winograd, bit for bit"): single
ones in x and dy give each transform's matrix exactly (their products are exact); on normal data
each row's candidate orders of roundings — every association of its terms, products fused or not,
common factors taken out or not — were evaluated and the one identical on every element kept,
first on rows whose other pass is exact (dy's rows 0 and 5 copy or scale by 4), then jointly.
"""

from __future__ import annotations

import argparse
import glob
import os
import struct
import sys
import tempfile
from typing import Dict, List

import numpy as np

MAGIC = b"FPWINO1\0"


def _f32(v):
    return np.asarray(v, np.float64).astype(np.float32)


def _wide(v):
    return np.asarray(v, np.float64)


def _add(a, b):
    return _f32(_wide(a) + _wide(b))


def _mul(c, a):
    return _f32(_wide(np.float32(c)) * _wide(a))


def _fma_exact_product(p, b):
    """float32(p + b) correctly rounded, for an exact float64 p (a product of two floats) and a
    float32 b: the float64 sum rounded to odd (its TwoSum error sets the last bit), from which the
    rounding to float32 is the exact sum's."""
    b = _wide(b)
    s = p + b
    bp = s - p
    error = (p - (s - bp)) + (b - bp)
    even = (s.view(np.int64) & 1) == 0
    return _f32(np.where((error != 0) & even & np.isfinite(s), np.nextafter(s, np.where(error > 0, np.inf, -np.inf)), s))


def _fma(c, a, b):
    """fma(c, a, b) in float32, one rounding."""
    return _fma_exact_product(_wide(np.float32(c)) * _wide(a), b)


def data_row(i: int, x):
    """D's row i (the input's transform) in cuDNN's order."""
    return [lambda: _add(_add(_mul(0.25, x[0]), _mul(-1.25, x[2])), x[4]),
            lambda: _add(_add(_mul(-0.25, x[1]), x[3]), _add(_mul(-0.25, x[2]), x[4])),
            lambda: _add(_add(_mul(0.25, x[1]), -x[3]), _add(_mul(-0.25, x[2]), x[4])),
            lambda: _add(_add(_mul(-0.5, x[1]), _mul(0.5, x[3])), _add(-x[2], x[4])),
            lambda: _add(_add(_mul(0.5, x[1]), _mul(-0.5, x[3])), _add(-x[2], x[4])),
            lambda: _add(_add(_mul(0.25, x[1]), _mul(-1.25, x[3])), x[5])][i]()


TWO_THIRDS, FOUR_THIRDS, EIGHT_THIRDS, THIRD = (np.float32(2 / 3), np.float32(4 / 3), np.float32(8 / 3),
                                                np.float32(1 / 3))


def delta_row(j: int, d, fused: bool = True):
    """A''s row j (the output gradient's transform) in cuDNN's order."""
    if j == 0:
        return _mul(4, d[0])
    if j == 5:
        return d[3]
    if j in (1, 2):
        s = np.float32(1 if j == 1 else -1)
        if fused:
            return _add(_fma(TWO_THIRDS, d[0], _mul(TWO_THIRDS, d[2])), _fma(s * TWO_THIRDS, d[1], _mul(s * TWO_THIRDS, d[3])))
        return _add(_add(_mul(TWO_THIRDS, d[0]), _mul(TWO_THIRDS, d[2])),
                    _add(_mul(s * TWO_THIRDS, d[1]), _mul(s * TWO_THIRDS, d[3])))
    s = np.float32(1 if j == 4 else -1)
    return _add(_fma(-EIGHT_THIRDS, d[0], _mul(-TWO_THIRDS, d[2])), _fma(s * FOUR_THIRDS, d[1], _mul(s * THIRD, d[3])))


def output_row(a: int, m):
    """O's row a (the sums' transform) in cuDNN's order; row 1 in double."""
    if a == 0:
        return _add(_add(m[0], _add(m[1], m[2])), _add(m[3], m[4]))
    if a == 1:
        return _f32((_wide(_add(m[1], -m[2])) + 0.5 * _wide(m[3])) - 0.5 * _wide(m[4]))
    return _add(_add(_add(m[1], m[2]), m[5]), _mul(0.25, _add(m[3], m[4])))


def data_tiles(tiles):
    """(..., 6, 6) -> (6, 6, ...): columns first, then rows."""
    cols = [[data_row(i, [tiles[..., r, q] for r in range(6)]) for q in range(6)] for i in range(6)]
    return np.array([[data_row(j, cols[i]) for j in range(6)] for i in range(6)])


def delta_tiles(tiles):
    """(..., 4, 4) -> (6, 6, ...); the row pass of row 5 (dY's row 3 as it is) unfused in rows 1, 2."""
    cols = [[delta_row(i, [tiles[..., r, q] for r in range(4)]) for q in range(4)] for i in range(6)]
    return np.array([[delta_row(j, cols[i], fused=i != 5) for j in range(6)] for i in range(6)])


def output_tiles(m):
    """(6, 6, ...) -> (3, 3, ...)."""
    cols = [[output_row(a, [m[r][q] for r in range(6)]) for q in range(6)] for a in range(3)]
    return np.array([[output_row(b, cols[a]) for b in range(3)] for a in range(3)])


def fma_chains(u, v):
    """(P, T, K) x (P, T, C) -> (P, K, C): one FMA chain over t from +0 per output."""
    acc = np.zeros((u.shape[0], u.shape[2], v.shape[2]), np.float32)
    for t in range(u.shape[1]):
        acc = _fma_exact_product(_wide(u[:, t, :, None]) * _wide(v[:, t, None, :]), acc)
    return acc


def gemv_order(u, v):
    """One output of `strided(32):seq | all:shfl_down`: 32 FMA chains over t = l, l+32, ..., then the
    warp's halving sums (lane l adds lane l + w for w = 16, 8, 4, 2, 1)."""
    lanes = [np.float32(0)] * 32
    for t in range(u.size):
        lanes[t % 32] = _fma_exact_product(_wide(u[t]) * _wide(v[t]), lanes[t % 32])
    width = 16
    while width:
        lanes = [_add(lanes[l], lanes[l + width]) if l < width else lanes[l] for l in range(32)]
        width //= 2
    return lanes[0]


class Probe:
    """One shape's file of winograd_workspace_torch.py, trial `trial`, split into its stages."""

    def __init__(self, path: str, trial: int):
        z = np.load(path)
        self.batch, self.c, self.k, self.size = (int(v) for v in z["shape"])
        self.tiles = (self.size + 3) // 4
        self.terms = self.batch * self.tiles * self.tiles
        words = z[f"ws{trial}"].view(np.float32)
        nv, nu = 36 * self.terms * self.c, 36 * self.terms * self.k
        self.v = words[:nv].reshape(36, self.terms, self.c)
        self.u = words[nv:nv + nu].reshape(36, self.terms, self.k)
        self.m = words[nv + nu:nv + nu + 36 * self.k * self.c].reshape(36, self.k, self.c)
        self.x, self.dy, self.dw = z[f"x{trial}"], z[f"dy{trial}"], z[f"dw{trial}"]

    def input_tiles(self):
        """(terms, C, 6, 6): the 6x6 input tiles, padding 1, terms (image, tile row, tile column)."""
        n, s = self.tiles, self.size
        padded = np.zeros((self.batch, self.c, 4 * n + 2, 4 * n + 2), np.float32)
        padded[:, :, 1:1 + s, 1:1 + s] = self.x
        rows = [np.stack([padded[:, :, 4 * a:4 * a + 6, 4 * b:4 * b + 6] for b in range(n)], 1) for a in range(n)]
        return np.stack(rows, 1).reshape(self.terms, self.c, 6, 6)

    def gradient_tiles(self):
        """(terms, K, 4, 4): the 4x4 output-gradient tiles, zeros past the edge."""
        n, s = self.tiles, self.size
        padded = np.zeros((self.batch, self.k, 4 * n, 4 * n), np.float32)
        padded[:, :, :s, :s] = self.dy
        return padded.reshape(self.batch, self.k, n, 4, n, 4).transpose(0, 2, 4, 1, 3, 5).reshape(self.terms, self.k, 4, 4)


def _same(a, b) -> float:
    return float(np.mean(np.asarray(a, np.float32).view(np.uint32) == np.asarray(b, np.float32).view(np.uint32)))


def _probe_files(folder: str) -> List[str]:
    files = sorted(glob.glob(os.path.join(folder, "**", "wgrad_*.npz"), recursive=True))
    if not files:
        raise SystemExit(f"winograd_fit: no wgrad_*.npz under {folder} (winograd_workspace_torch.py writes them)")
    return files


def check(folder: str) -> int:
    print("| shape | trial | V (input tiles) | U (gradient tiles) | M (36 GEMMs) | GEMM order | dW |")
    print("|---|---|---|---|---|---|---|")
    worst = 1.0
    for path in _probe_files(folder):
        z = np.load(path)
        for trial in range(sum(1 for key in z.files if key.startswith("ws"))):
            p = Probe(path, trial)
            v = data_tiles(p.input_tiles()).reshape(36, p.terms, p.c)
            u = delta_tiles(p.gradient_tiles()).reshape(36, p.terms, p.k)
            if p.c == 1:  # cuBLAS's gemv (the kernels' names in the probe): 32 strided chains, a warp's sums
                m = np.array([[[gemv_order(p.u[q, :, k], p.v[q, :, 0])] for k in range(p.k)] for q in range(36)])
                order = "strided(32):seq | all:shfl_down"
            else:
                m, order = fma_chains(p.u, p.v), "all:seq"
            dw = output_tiles(p.m.reshape(6, 6, p.k, p.c)).transpose(2, 3, 0, 1)
            shares = [_same(v, p.v), _same(u, p.u), _same(m, p.m), _same(dw, p.dw)]
            worst = min(worst, *shares)
            name = "{}x{}x{}@{}".format(p.batch, p.c, p.k, p.size)
            cell = order.replace("|", "\\|")  # a Markdown table's cell
            print(f"| {name} | {trial} | {shares[0]:.2%} | {shares[1]:.2%} | {shares[2]:.2%} | `{cell}` | {shares[3]:.2%} |")
    return 0 if worst == 1.0 else 1


def fixture(folder: str, out: str) -> int:
    """A sample of every stage: 128 input and 128 gradient tiles of the 28x28 shape (no padding but
    at its edges), 128 (k, c) sums of a C > 1 shape, 32 GEMM outputs of a 3x3 shape and 2 of the
    gemv shape, with the chip's results."""
    files = {os.path.basename(f): f for f in _probe_files(folder)}
    need = ["wgrad_64x1x16_at_28.npz", "wgrad_64x32x32_at_7.npz", "wgrad_64x64x128_at_3.npz"]
    missing = [n for n in need if n not in files]
    if missing:
        raise SystemExit(f"winograd_fit: {', '.join(missing)} not under {folder}")
    rng = np.random.default_rng(5)
    wide, small, tiny = (Probe(files[n], 0) for n in need)
    picks = rng.choice(wide.terms, 128, replace=False)
    sections: Dict[str, np.ndarray] = {
        "data_in": wide.input_tiles()[picks, 0].reshape(128, 36),
        "data_out": wide.v[:, picks, 0].T.copy(),
        "delta_in": wide.gradient_tiles()[picks, picks % wide.k].reshape(128, 16),
        "delta_out": wide.u[:, picks, picks % wide.k].T.copy(),
    }
    kc = rng.choice(small.k * small.c, 128, replace=False)
    sections["output_in"] = small.m.reshape(36, -1)[:, kc].T.copy()
    sections["output_out"] = small.dw.reshape(small.k * small.c, 9)[kc]
    chain = [(q, k, c) for q, k, c in zip(rng.integers(0, 36, 32), rng.integers(0, tiny.k, 32), rng.integers(0, tiny.c, 32))]
    sections["chain_u"] = np.array([tiny.u[q, :, k] for q, k, c in chain])
    sections["chain_v"] = np.array([tiny.v[q, :, c] for q, k, c in chain])
    sections["chain_m"] = np.array([tiny.m[q, k, c] for q, k, c in chain])
    gemv = [(7, 3), (29, 12)]
    sections["gemv_u"] = np.array([wide.u[q, :, k] for q, k in gemv])
    sections["gemv_v"] = np.array([wide.v[q, :, 0] for q, _ in gemv])
    sections["gemv_m"] = np.array([wide.m[q, k, 0] for q, k in gemv])
    header = struct.pack("<8s7I", MAGIC, 128, 128, 128, len(chain), tiny.terms, len(gemv), wide.terms)
    handle, temporary = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(out)), suffix=".part")
    with os.fdopen(handle, "wb") as f:
        f.write(header)
        for name in ("data_in", "data_out", "delta_in", "delta_out", "output_in", "output_out", "chain_u",
                     "chain_v", "chain_m", "gemv_u", "gemv_v", "gemv_m"):
            f.write(np.ascontiguousarray(sections[name], dtype="<f4").tobytes())
    os.replace(temporary, out)
    print(f"{out}: {os.path.getsize(out)} bytes")
    return 0


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("check", help="the model against every probe file, stage by stage").add_argument("folder")
    fix = sub.add_parser("fixture", help="write the tests' sample of the chip's stages")
    fix.add_argument("folder")
    fix.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    if not os.path.isdir(args.folder):
        parser.error(f"{args.folder}: no such folder")
    return check(args.folder) if args.command == "check" else fixture(args.folder, args.out)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
