#!/usr/bin/env python3
"""cuDNN's BatchNorm statistics at 28x28 (bn_fw_tr_1C11_kernel_NCHW<float, float, int, 32, ...>,
batch 64, the first BatchNorm of small_cnn_bn), modelled in float32 and checked bit for bit
against what the H200 saved (docs/results/calibration_torch.md, "The 28x28 kernel's statistics").

  experiments/bn_nchw_model.py docs/results/calibration_torch/bn_h200

The model, per channel of n = 64 x 784 values: 512 threads, warp w (16) takes the images
w, w + 16, w + 32, w + 48 and lane l (32) the pixels l, l + 32, ..., images outer, pixels inner.
Each thread runs Welford's update over its values (k += 1; d = x - m; m = fma(d, r(k), m);
M2 = fma(d, x - m, M2), r the GPU's approximate reciprocal rcp.approx), then turns its mean back
into a partial sum fl(k m); the 512 partials are added in float32 by a butterfly over the lanes
(xor 16, 8, 4, 2, 1), then over the warps (xor 8, 4, 2, 1); mean = fl(S r(n)). The variance's
partials are fl(M2 + fl(fl(k dm) dm)) with dm = m - mean, added in the same tree; inv_std =
the GPU's rsqrt of fma(Q, r(n), eps). The output: y = fma(inv_std, fl(gamma fl(x - mean)), beta),
gamma first and inv_std fused last.

Checked against the files of `scripts/gpu-check --only calibrate` (in FOLDER): the 128 channels of
counter_64x16at28.npz (their inputs rebuilt with bn_trials_torch's counter values; y where the file
keeps channel 0's, trials 0 and 1), the single
impulses of impulse_64x16at28.npz and the 19 110 pairs of impulse_pairs_64x16at28.npz. Exit
status 0 when every one matches, 1 otherwise, 2 on a missing file.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Dict, List, Tuple

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bn_trials_torch  # noqa: E402  (counter_values: the trials' inputs)
import gpu_rsqrt_table  # noqa: E402  (the GPU's rsqrt, from fplab's table)

F32 = np.float32
SHAPE = (64, 16, 28)  # batch, channels, height: the one shape this kernel was worked out at
EPS = F32(1e-5)
WARPS, LANES = 16, 32

# rcp.approx.ftz.f32 of the counts 1 .. 128 where it differs from the correctly rounded 1/k, in
# ulps (tools/gpu/gpu_reciprocal_table --integers 128 on the H200); fl(1/50176) it gives exactly.
RECIPROCAL_DELTAS = {33: -1, 37: -1, 61: 1, 66: -1, 67: 1, 74: -1, 75: -1, 83: 1, 97: 1, 122: 1, 123: 1}
MEASURED_COUNTS = 128


def reciprocals(most: int) -> np.ndarray:
    """rcp.approx of the counts 0 .. most (entry 0 unused: 0)."""
    counts = np.arange(1, most + 1, dtype=F32)
    bits = (F32(1) / counts).view(np.int32) + np.array([RECIPROCAL_DELTAS.get(k, 0) for k in range(1, most + 1)],
                                                       dtype=np.int32)
    return np.concatenate([[F32(0)], bits.view(F32)])


def fma(a, b, c) -> np.ndarray:
    """a·b + c rounded once to float32, elementwise: the float64 product is exact, TwoSum gives the
    float64 sum's error, and a sum on a float32 midpoint moves one float64 step the error's way."""
    a, b, c = (np.asarray(v, dtype=F32).astype(np.float64) for v in (a, b, c))
    p = a * b
    s = p + c
    back = s - p
    error = (p - (s - back)) + (c - back)
    r = s.astype(F32)
    other = np.nextafter(r, np.where(r.astype(np.float64) > s, -np.inf, np.inf).astype(F32))
    midpoint = (r.astype(np.float64) + other.astype(np.float64)) / 2 == s
    fix = midpoint & (error != 0) & np.isfinite(s)
    return np.where(fix, np.nextafter(s, np.where(error > 0, np.inf, -np.inf)).astype(F32), r)


def butterfly(values: np.ndarray) -> np.ndarray:
    """(..., WARPS, LANES) float32 partials added by xor shuffles over lanes, then over warps."""
    for offset in (16, 8, 4, 2, 1):
        values = (values + values[..., np.arange(LANES) ^ offset]).astype(F32)
    values = values[..., 0]
    for offset in (8, 4, 2, 1):
        values = (values + values[..., np.arange(WARPS) ^ offset]).astype(F32)
    return values[..., 0]


def statistics(x: np.ndarray, rsqrt_table: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """The saved mean and inverse standard deviation of every channel of x (64, C, 28, 28)."""
    batch, channels, height, _ = x.shape
    pixels = height * height
    chunks = -(-pixels // LANES)
    padded = np.zeros((channels, batch, chunks * LANES), F32)
    padded[..., :pixels] = x.reshape(batch, channels, pixels).transpose(1, 0, 2)
    terms = padded.reshape(channels, batch // WARPS, WARPS, chunks, LANES)  # (c, image group, warp, chunk, lane)
    count = np.zeros((WARPS, LANES), np.int64)
    mean = np.zeros((channels, WARPS, LANES), F32)
    m2 = np.zeros((channels, WARPS, LANES), F32)
    lanes = np.arange(LANES)
    if (batch // WARPS) * chunks > MEASURED_COUNTS:
        raise ValueError("bn_nchw_model: more values a thread than the reciprocals measured")
    table = reciprocals((batch // WARPS) * chunks)
    for group in range(batch // WARPS):
        for chunk in range(chunks):
            holds = np.broadcast_to(chunk * LANES + lanes < pixels, (WARPS, LANES))
            value = terms[:, group, :, chunk, :]
            k = count + holds
            r = table[k]
            d = (value - mean).astype(F32)
            new_mean = fma(d, r, mean)
            new_m2 = fma(d, (value - new_mean).astype(F32), m2)
            mean, m2, count = np.where(holds, new_mean, mean), np.where(holds, new_m2, m2), k
    n = batch * pixels
    r_n = F32(1) / F32(n)
    k = count.astype(F32)
    channel_mean = (butterfly((k * mean).astype(F32)) * r_n).astype(F32)
    dm = (mean - channel_mean[:, None, None]).astype(F32)
    squares = butterfly((m2 + ((k * dm).astype(F32) * dm).astype(F32)).astype(F32))
    inv_std = gpu_rsqrt_table.emulate(fma(squares, r_n, EPS), rsqrt_table)
    return channel_mean, inv_std


def output(x: np.ndarray, mean: F32, inv_std: F32, gamma: F32, beta: F32) -> np.ndarray:
    """The kernel's y for one channel's values x (any shape) from its saved statistics."""
    scaled = (F32(gamma) * (x - F32(mean)).astype(F32)).astype(F32)
    return fma(np.full_like(scaled, inv_std), scaled, np.full_like(scaled, beta))


def impulse_means(positions: List[List[int]], rsqrt_table: np.ndarray) -> np.ndarray:
    """The saved mean of channel 0 when it is 0 but for a 1 at each of the listed flat positions."""
    batch, _, height = SHAPE
    x = np.zeros((len(positions), batch, 1, height, height), F32)
    for i, where in enumerate(positions):
        x[i].reshape(-1)[where] = 1
    # the channels of one call are independent: the impulses ride as channels of one tensor
    stacked = x.transpose(1, 0, 2, 3, 4).reshape(batch, len(positions), height, height)
    return statistics(stacked, rsqrt_table)[0]


def check(folder: str) -> Dict[str, Tuple[int, int]]:
    rsqrt_table = gpu_rsqrt_table.read_table(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fp",
                                                          "data", "cuda_rsqrt_delta.bin.gz"))
    found: Dict[str, Tuple[int, int]] = {}
    with np.load(os.path.join(folder, "counter_64x16at28.npz")) as saved:
        trials = sorted({int(k.split("/")[1]) for k in saved.files})
        means, stds, outputs = (0, 0), (0, 0), (0, 0)
        for trial in trials:
            x = bn_trials_torch.inputs(SHAPE, trial, "counter")["x"]
            mean, inv_std = statistics(x, rsqrt_table)
            key = f"64x16@28/{trial}/"
            means = (means[0] + int((mean == saved[key + "mean"]).sum()), means[1] + mean.size)
            stds = (stds[0] + int((inv_std == saved[key + "invstd"]).sum()), stds[1] + inv_std.size)
            if key + "y" in saved.files:  # channel 0's outputs, from the model's own statistics
                y = output(x[:, 0], mean[0], inv_std[0], saved[key + "gamma"][0], saved[key + "beta"][0])
                outputs = (outputs[0] + int((y == saved[key + "y"][:, 0]).sum()), outputs[1] + y.size)
        found["random channels: mean"], found["random channels: inv_std"] = means, stds
        found["channel 0's outputs y"] = outputs
    pixels = SHAPE[2] * SHAPE[2]
    units = (SHAPE[0] // 16, pixels // 16)
    first = [(u // units[1]) * 16 * pixels + (u % units[1]) * 16 for u in range(units[0] * units[1])]
    with np.load(os.path.join(folder, "impulse_64x16at28.npz")) as single:
        # every position's mean depends on its unit only (the file shows it): one a unit is checked
        model = impulse_means([[p] for p in first], rsqrt_table)
        measured = single["mean"][first]
        found["single impulses (one a 16x16 unit)"] = (int((model == measured).sum()), len(first))
    with np.load(os.path.join(folder, "impulse_pairs_64x16at28.npz")) as pairs:
        positions = [[first[i], first[j]] for i, j in pairs["pairs"]]
        model = np.concatenate([impulse_means(positions[s:s + 2048], rsqrt_table)
                                for s in range(0, len(positions), 2048)])
        found["pairs of impulses"] = (int((model == pairs["mean"]).sum()), len(positions))
    return found


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="example:\n  %(prog)s docs/results/calibration_torch/bn_h200\n")
    parser.add_argument("folder", help="where counter_64x16at28.npz and the impulse files lie")
    args = parser.parse_args(argv)
    for name in ("counter_64x16at28.npz", "impulse_64x16at28.npz", "impulse_pairs_64x16at28.npz"):
        if not os.path.isfile(os.path.join(args.folder, name)):
            print(f"bn_nchw_model.py: {name} is not in {args.folder}", file=sys.stderr)
            return 2
    found = check(args.folder)
    for what, (same, total) in found.items():
        print(f"{what}: {same} of {total} bit for bit")
    return 0 if all(same == total for same, total in found.values()) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
