#!/usr/bin/env python3
"""A BatchNorm kernel's bits on random inputs, forward and backward, kept for working out its
arithmetic offline (beside the sums' trees that experiments/reveal_torch.py's bn_mean and
bn_beta_grad targets reveal).

  experiments/bn_trials_torch.py --device cuda --out results/bn-trials
  experiments/bn_trials_torch.py --device cpu --shapes 8x4@6 --trials 2 --out /tmp/bn-trials

For each mode (PyTorch's default, deterministic), shape (BATCHxCHANNELS@SIZE; default: the
BatchNorm layers of small_cnn_bn and medium_cnn at batch 64) and trial: x with each channel's own
centre and spread, gamma, beta and an output gradient g, all seeded; then what F.batch_norm calls in
training (aten._batch_norm_impl_index: cuDNN's kernels on a GPU) and its backward
(aten._batch_norm_impl_index_backward). Kept in bn_trials_MODE.npz under "SHAPE/TRIAL/NAME": the
whole of mean and invstd (the saved statistics), the running mean and variance after one update
(momentum 0.1 from 0 and 1), gamma, beta and the gradients of gamma and beta; x, y, g and the input
gradient dx of channel 0 only (the files come back from a GPU machine whole, 16 MiB at most).
bn_trials.json names, per mode and shape, the kernels torch.profiler saw (on CUDA) and whether
autograd's F.batch_norm gave the same bits as the direct calls.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Dict, List, Tuple

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bn_formula_torch import batch_norm_shape  # noqa: E402  (the BatchNorm experiments' shapes)

EPS = 1e-5
DEFAULT_SHAPES = "64x16@28,64x32@14,64x32@7,64x64@7,64x128@3,64x256@1"


def _shape(text: str) -> Tuple[int, int, int]:
    """batch_norm_shape, at least two values a channel (training mode needs them)."""
    shape = batch_norm_shape(text)
    if shape[0] * shape[2] * shape[2] < 2:
        raise argparse.ArgumentTypeError(f"'{text}': at least two values a channel")
    return shape


def counter_values(stream: int, shape: Tuple[int, int, int]) -> np.ndarray:
    """Uniform values in [-0.5, 0.5) of 24 random bits for every element of a (B, C, S, S) tensor,
    a 64-bit hash (SplitMix64's finaliser, in NumPy's wrapping uint64 arithmetic) of (stream,
    index): the same numbers on any machine with any NumPy, so that a file need not carry them."""
    batch, channels, size = shape
    z = np.arange(batch * channels * size * size, dtype=np.uint64) + np.uint64(stream) * np.uint64(1 << 40)
    with np.errstate(over="ignore"):
        z = z + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    return ((z >> np.uint64(40)).astype(np.float64) / 2.0 ** 24 - 0.5).reshape(batch, channels, size, size)


def inputs(shape: Tuple[int, int, int], trial: int, values: str = "normal") -> Dict[str, np.ndarray]:
    """x (B, C, S, S) with a centre and a spread per channel, gamma, beta and g, from the trial's
    seed. values "counter": x's and g's unit values from counter_values (streams 2 trial and
    2 trial + 1) instead of NumPy's normal draws, so that every channel can be rebuilt offline
    (the files keep channel 0 only)."""
    batch, channels, size = shape
    rng = np.random.default_rng(1000 + trial)
    centre = rng.normal(0, 2, channels)
    spread = rng.uniform(0.25, 3, channels)
    counter = values == "counter"  # NumPy's draws in the order the first files were made with
    unit_x = counter_values(2 * trial, shape) * 3.4 if counter else rng.standard_normal((batch, channels, size, size))
    x = centre[None, :, None, None] + spread[None, :, None, None] * unit_x
    gamma = (1 + rng.standard_normal(channels) / 4).astype(np.float32)
    beta = (rng.standard_normal(channels) / 4).astype(np.float32)
    unit_g = counter_values(2 * trial + 1, shape) * 3.4 if counter else rng.standard_normal((batch, channels, size, size))
    return {"x": x.astype(np.float32), "gamma": gamma, "beta": beta,
            "g": (unit_g / (batch * size * size)).astype(np.float32)}


def run_kernels(torch, data: Dict[str, np.ndarray], device: str) -> Dict[str, np.ndarray]:
    """The forward and backward kernels' outputs on one trial's inputs."""
    t = {k: torch.from_numpy(v).to(device) for k, v in data.items()}
    channels = data["gamma"].size
    running_mean, running_var = torch.zeros(channels, device=device), torch.ones(channels, device=device)
    y, mean, invstd, reserve, impl = torch.ops.aten._batch_norm_impl_index(
        t["x"], t["gamma"], t["beta"], running_mean, running_var, True, 0.1, EPS, torch.backends.cudnn.enabled)
    dx, dgamma, dbeta = torch.ops.aten._batch_norm_impl_index_backward(
        impl, t["x"], t["g"], t["gamma"], running_mean, running_var, mean, invstd, True, EPS,
        [True, True, True], reserve)
    out = {"y": y, "mean": mean, "invstd": invstd, "dx": dx, "dgamma": dgamma, "dbeta": dbeta,
           "running_mean": running_mean, "running_var": running_var}
    return {k: v.detach().cpu().numpy() for k, v in out.items()}


def autograd_agrees(torch, data: Dict[str, np.ndarray], device: str, direct: Dict[str, np.ndarray]) -> bool:
    """Whether F.batch_norm and its autograd backward give the direct calls' bits (the same kernels)."""
    t = {k: torch.from_numpy(v).to(device) for k, v in data.items()}
    x = t["x"].clone().requires_grad_()
    gamma, beta = t["gamma"].clone().requires_grad_(), t["beta"].clone().requires_grad_()
    y = torch.nn.functional.batch_norm(x, None, None, gamma, beta, training=True, eps=EPS)
    y.backward(t["g"])
    pairs = [(y, "y"), (x.grad, "dx"), (gamma.grad, "dgamma"), (beta.grad, "dbeta")]
    return all(np.array_equal(a.detach().cpu().numpy().view(np.uint32), direct[k].view(np.uint32)) for a, k in pairs)


def kernel_names(torch, data: Dict[str, np.ndarray], device: str) -> List[str]:
    """The CUDA kernels one forward and backward run (empty on the CPU)."""
    if device != "cuda":
        return []
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        run_kernels(torch, data, device)
        torch.cuda.synchronize()
    names = []
    for event in prof.events():
        if event.device_type == torch.autograd.DeviceType.CUDA and event.name not in names:
            names.append(event.name)
    return names


def set_mode(torch, mode: str) -> None:
    torch.use_deterministic_algorithms(mode == "deterministic")
    torch.backends.cudnn.deterministic = mode == "deterministic"


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="example:\n  %(prog)s --device cpu --shapes 8x4@6 --trials 2 "
                                            "--out /tmp/bn-trials\n")
    parser.add_argument("--device", default="cuda", help="cuda or cpu (default: %(default)s)")
    parser.add_argument("--shapes", default=DEFAULT_SHAPES, help="comma-separated BATCHxCHANNELS@SIZE "
                        "(default: %(default)s)")
    parser.add_argument("--trials", type=int, default=4, help="random inputs a shape (default: %(default)s)")
    parser.add_argument("--modes", default="default,deterministic", help="default: %(default)s")
    parser.add_argument("--values", choices=("normal", "counter"), default="normal",
                        help="x's and g's draws: NumPy's normal, or counter (a hash of the position, every "
                        "channel rebuilt offline with counter_values; default: %(default)s)")
    parser.add_argument("--out", required=True, help="a folder for bn_trials_MODE.npz and bn_trials.json")
    args = parser.parse_args(argv)
    try:
        shapes = [_shape(s) for s in args.shapes.split(",")]
    except argparse.ArgumentTypeError as e:
        print(f"bn_trials_torch.py: {e}", file=sys.stderr)
        return 2
    modes = args.modes.split(",")
    if args.trials < 1 or any(m not in ("default", "deterministic") for m in modes):
        print("bn_trials_torch.py: --trials at least 1; --modes of default, deterministic", file=sys.stderr)
        return 2
    import torch
    if args.device == "cuda" and not torch.cuda.is_available():
        print("bn_trials_torch.py: --device cuda, but PyTorch sees no GPU here", file=sys.stderr)
        return 2
    os.makedirs(args.out, exist_ok=True)
    report: Dict[str, dict] = {"torch": torch.__version__, "device": args.device,
                               "gpu": torch.cuda.get_device_name() if args.device == "cuda" else "",
                               "cudnn": torch.backends.cudnn.version() if args.device == "cuda" else None,
                               "values": args.values, "shapes": {}}
    for mode in modes:
        set_mode(torch, mode)
        arrays: Dict[str, np.ndarray] = {}
        for shape in shapes:
            name = "%dx%d@%d" % shape
            agree = True
            for trial in range(args.trials):
                data = inputs(shape, trial, args.values)
                out = run_kernels(torch, data, args.device)
                agree &= autograd_agrees(torch, data, args.device, out)
                for key, value in {**data, **out}.items():
                    arrays[f"{name}/{trial}/{key}"] = value[:, :1] if value.ndim == 4 else value
            report["shapes"].setdefault(name, {})[mode] = {
                "kernels": kernel_names(torch, inputs(shape, 0), args.device), "autograd_same_bits": bool(agree)}
            print(f"{mode} {name}: {args.trials} trials; kernels: "
                  f"{'; '.join(k[:90] for k in report['shapes'][name][mode]['kernels']) or '(cpu)'}", flush=True)
        path = os.path.join(args.out, f"bn_trials_{mode}.npz")
        np.savez_compressed(path + ".tmp.npz", **arrays)
        os.replace(path + ".tmp.npz", path)
    path = os.path.join(args.out, "bn_trials.json")
    with open(path + ".tmp", "w") as f:
        json.dump(report, f, indent=1)
    os.replace(path + ".tmp", path)
    print(f"wrote {args.out}/bn_trials_*.npz and bn_trials.json")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
