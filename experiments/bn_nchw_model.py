#!/usr/bin/env python3
"""fplab's model of cuDNN's BatchNorm kernels for larger planes (sim/cudnn_nchw_batch_norm, through
fplab._core.cudnn_nchw_forward) against everything the H200 saved for the 28x28 forward kernel
(bn_fw_tr_1C11_kernel_NCHW<float, float, int, 32, ...>, batch 64: small_cnn_bn's first BatchNorm;
docs/results/calibration_torch.md, "The 28x28 kernels").

  PYTHONPATH=build/python experiments/bn_nchw_model.py docs/results/calibration_torch/bn_h200

Checked against the files of `scripts/gpu-check --only calibrate` (in FOLDER): the 128 channels of
counter_64x16at28.npz (their inputs rebuilt with bn_trials_torch's counter values; y where the file
keeps channel 0's, trials 0 and 1), the single impulses of impulse_64x16at28.npz and the 19 110
pairs of impulse_pairs_64x16at28.npz (a channel of zeros but for one or two ones: which threads'
Welford chains and tree the ones go through shows in the mean's rounding). Exit status 0 when every
one matches, 1 otherwise, 2 on a missing file.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Dict, List, Tuple

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bn_trials_torch  # noqa: E402  (counter_values: the trials' inputs)

SHAPE = (64, 16, 28)  # batch, channels, height: the 28x28 kernel's shape as measured


def forward(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(y, mean, inv_std) of x (B, C, H, W) as the model computes them (eps 1e-5)."""
    from fplab import _core
    batch, channels = x.shape[:2]
    y, mean, inv_std, _ = _core.cudnn_nchw_forward(np.ascontiguousarray(x, np.float32).reshape(batch, channels, -1),
                                                   np.asarray(gamma, np.float32), np.asarray(beta, np.float32), 1e-5)
    return y.reshape(x.shape), mean, inv_std


def impulse_means(positions: List[List[int]]) -> np.ndarray:
    """The saved mean of channel 0 when it is 0 but for a 1 at each of the listed flat positions."""
    batch, _, height = SHAPE
    x = np.zeros((len(positions), batch, 1, height, height), np.float32)
    for i, where in enumerate(positions):
        x[i].reshape(-1)[where] = 1
    # the channels of one call are independent: the impulses ride as channels of one tensor
    stacked = x.transpose(1, 0, 2, 3, 4).reshape(batch, len(positions), height, height)
    ones, zeros = np.ones(len(positions), np.float32), np.zeros(len(positions), np.float32)
    return forward(stacked, ones, zeros)[1]


def check(folder: str) -> Dict[str, Tuple[int, int]]:
    found: Dict[str, Tuple[int, int]] = {}
    with np.load(os.path.join(folder, "counter_64x16at28.npz")) as saved:
        trials = sorted({int(k.split("/")[1]) for k in saved.files})
        means, stds, outputs = (0, 0), (0, 0), (0, 0)
        for trial in trials:
            key = f"64x16@28/{trial}/"
            x = bn_trials_torch.inputs(SHAPE, trial, "counter")["x"]
            y, mean, inv_std = forward(x, saved[key + "gamma"], saved[key + "beta"])
            means = (means[0] + int((mean == saved[key + "mean"]).sum()), means[1] + mean.size)
            stds = (stds[0] + int((inv_std == saved[key + "invstd"]).sum()), stds[1] + inv_std.size)
            if key + "y" in saved.files:  # channel 0's outputs, from the model's own statistics
                outputs = (outputs[0] + int((y[:, :1] == saved[key + "y"]).sum()), outputs[1] + y[:, :1].size)
        found["random channels: mean"], found["random channels: inv_std"] = means, stds
        found["channel 0's outputs y"] = outputs
    pixels = SHAPE[2] * SHAPE[2]
    units = (SHAPE[0] // 16, pixels // 16)
    first = [(u // units[1]) * 16 * pixels + (u % units[1]) * 16 for u in range(units[0] * units[1])]
    with np.load(os.path.join(folder, "impulse_64x16at28.npz")) as single:
        # every position's mean depends on its unit only (the file shows it): one a unit is checked
        model = impulse_means([[p] for p in first])
        measured = single["mean"][first]
        found["single impulses (one a 16x16 unit)"] = (int((model == measured).sum()), len(first))
    with np.load(os.path.join(folder, "impulse_pairs_64x16at28.npz")) as pairs:
        positions = [[first[i], first[j]] for i, j in pairs["pairs"]]
        model = np.concatenate([impulse_means(positions[s:s + 2048]) for s in range(0, len(positions), 2048)])
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
