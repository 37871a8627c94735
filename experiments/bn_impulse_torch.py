#!/usr/bin/env python3
"""How a BatchNorm kernel merges its partial statistics, seen through impulses: the mean it saves
for a channel that is all zeros but for ones at chosen (image, pixel) positions.

  experiments/bn_impulse_torch.py --device cuda --shape 64x16@28 --out results/bn-impulse.npz
  experiments/bn_impulse_torch.py --device cuda --shape 64x16@28 --pairs 16 --out results/bn-pairs.npz
  experiments/bn_impulse_torch.py --device cpu --shape 4x2@4 --pairs 2 --out /tmp/bn-impulse.npz

A kernel that sums a channel and multiplies by 1/n saves the same mean wherever a single 1 lies.
One that merges partial means (Welford's or Chan's updates) does not: the rounding of each merge
depends on which side of it the 1 arrives from, so the mean as a function of the position draws
the partition and the merge order (cuDNN's bn_fw_tr_1C11_kernel_NCHW on the H200 gives four
values over 196 blocks of 16 images x 16 pixels: docs/results/calibration_torch.md).

Single impulses: every position p of channel 0 (n = batch x height x width calls), the saved mean
and inverse standard deviation of each. With --pairs U: the positions are grouped into units of
U x U (U images by U pixels, the blocks whose means single impulses found equal), and for every
pair of units a 1 at the first position of each: which units meet early shows in the pair's mean.
Written to --out (.npz, under a temporary name, then renamed): mean, invstd (and for pairs the
unit grid's shape and the pairs' indices), with the device, PyTorch and the kernels' names.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from typing import List, Tuple

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bn_formula_torch import batch_norm_shape  # noqa: E402  (the BatchNorm experiments' shapes)


class Channel:
    """Channel 0 of a (B, C, S, S) zero tensor on a device, set one or two positions at a time, and
    the statistics F.batch_norm's kernels save for it (training mode)."""

    def __init__(self, torch, shape: Tuple[int, int, int], device: str):
        batch, channels, size = shape
        self.torch, self.pixels = torch, size * size
        self.x = torch.zeros(batch, channels, size, size, device=device)
        self.gamma = torch.ones(channels, device=device)
        self.beta = torch.zeros(channels, device=device)

    def _at(self, position: int):
        image, pixel = divmod(position, self.pixels)
        return self.x[image, 0].view(-1), pixel

    def statistics(self, positions: List[int]) -> Tuple[float, float]:
        for p in positions:
            plane, pixel = self._at(p)
            plane[pixel] = 1.0
        _, mean, invstd, _, _ = self.torch.ops.aten._batch_norm_impl_index(
            self.x, self.gamma, self.beta, None, None, True, 0.1, 1e-5, self.torch.backends.cudnn.enabled)
        result = float(mean[0]), float(invstd[0])
        for p in positions:
            plane, pixel = self._at(p)
            plane[pixel] = 0.0
        return result


def kernel_names(torch, channel: Channel, device: str) -> List[str]:
    if device != "cuda":
        return []
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        channel.statistics([0])
        torch.cuda.synchronize()
    return sorted({e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA})


def _save(path: str, **arrays) -> None:
    handle, temporary = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(path)), prefix=".bn-impulse-",
                                         suffix=".npz")
    try:
        with os.fdopen(handle, "wb") as f:
            np.savez_compressed(f, **arrays)
        os.chmod(temporary, 0o644)
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="example:\n  %(prog)s --device cpu --shape 4x2@4 --pairs 2 "
                                            "--out /tmp/bn-impulse.npz\n")
    parser.add_argument("--device", default="cuda", help="cuda or cpu (default: %(default)s)")
    parser.add_argument("--shape", default="64x16@28", help="BATCHxCHANNELS@SIZE (default: %(default)s)")
    parser.add_argument("--pairs", type=int, default=0, metavar="U",
                        help="pairs of U x U units (U images by U pixels) instead of single positions")
    parser.add_argument("--out", required=True, help="the .npz to write")
    args = parser.parse_args(argv)
    try:
        shape = batch_norm_shape(args.shape)
    except argparse.ArgumentTypeError as e:
        print(f"bn_impulse_torch.py: {e}", file=sys.stderr)
        return 2
    batch, _, size = shape
    pixels = size * size
    if args.pairs < 0 or (args.pairs and (batch % args.pairs or pixels % args.pairs)):
        print(f"bn_impulse_torch.py: --pairs {args.pairs}: a unit size that divides the batch ({batch}) and the "
              f"pixels of an image ({pixels})", file=sys.stderr)
        return 2
    folder = os.path.dirname(os.path.abspath(args.out))
    if not os.path.isdir(folder) or not os.access(folder, os.W_OK):
        print(f"bn_impulse_torch.py: cannot write into {folder} (--out)", file=sys.stderr)
        return 2
    import torch
    if args.device == "cuda" and not torch.cuda.is_available():
        print("bn_impulse_torch.py: --device cuda, but PyTorch sees no GPU here", file=sys.stderr)
        return 2
    channel = Channel(torch, shape, args.device)
    info = dict(device=np.array([args.device]), torch=np.array([torch.__version__]),
                shape=np.array(shape), kernels=np.array(kernel_names(torch, channel, args.device) or [""]))
    if not args.pairs:
        stats = np.array([channel.statistics([p]) for p in range(batch * pixels)], dtype=np.float32)
        _save(args.out, mean=stats[:, 0], invstd=stats[:, 1], **info)
        print(f"{len(stats)} positions: {len(np.unique(stats[:, 0]))} distinct means; wrote {args.out}")
        return 0
    u = args.pairs
    grid = (batch // u, pixels // u)
    units = grid[0] * grid[1]
    first = [(i // grid[1]) * u * pixels + (i % grid[1]) * u for i in range(units)]  # a unit's first position
    pairs = [(i, j) for i in range(units) for j in range(i + 1, units)]
    stats = np.array([channel.statistics([first[i], first[j]]) for i, j in pairs], dtype=np.float32)
    _save(args.out, mean=stats[:, 0], invstd=stats[:, 1], pairs=np.array(pairs, dtype=np.int32),
          grid=np.array(grid), **info)
    print(f"{len(pairs)} pairs of {units} units: {len(np.unique(stats[:, 0]))} distinct means; wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
