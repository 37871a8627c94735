#!/usr/bin/env python3
"""The orders of PyTorch's own kernels, revealed: torch.sum, matmul (cuBLAS SGEMM on a GPU) and
every Linear and Conv2d layer shape of fplab's shipped models and a ResNet-18, forward and both
backward passes, with TF32 off and on, in PyTorch's default and deterministic modes.

  experiments/reveal_torch.py run --device cuda --out results/reveal-h100
  experiments/reveal_torch.py run --device cpu --ops sum,mm --max-n 4096 --out /tmp/reveal-cpu
  experiments/reveal_torch.py table results/reveal-h100          # one Markdown table
  experiments/reveal_torch.py table docs/results/reveal_torch/h100.jsonl.xz   # the H100's, shipped
  experiments/reveal_torch.py kernels --ops conv_wgrad --resnet-input cifar     # cuDNN's kernel names only

``run`` probes one output element of each target with fplab.reveal_dot (fplab.reveal_sum for
torch.sum): the kernel is called with all operands 0 but the n pairs that make that element, one
operand set to the probe and the other to 1 (docs/reveal.md). Each revealed tree is then replayed
on --verify random inputs in each candidate arithmetic, and every target is called twice on the
same random inputs (--repeat times) to count outputs that differ run to run. Targets whose replay
gives the kernel's bits on fewer than all trials keep their trials (a, b and the kernel's output)
in trials/KEY.npz, so the arithmetic can be worked out offline. One JSON line per target goes to
reveal.jsonl in --out, which --resume reads to skip targets done (a run can be split).

TF32 "off" sets torch.backends.cuda.matmul.allow_tf32 and torch.backends.cudnn.allow_tf32 to
False, "on" to True. Deterministic mode is torch.use_deterministic_algorithms(True) with
cudnn.deterministic; CUBLAS_WORKSPACE_CONFIG=:4096:8 is set for both modes (the deterministic
mode needs it, and the default mode then picks from the same workspace).
docs/results/reveal_torch.md has the H100's results.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import dataclass
from typing import Callable, Dict, Iterator, List, Optional, Tuple

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

OPS = ("sum", "sum0", "nll_loss", "mm", "linear_fwd", "linear_dgrad", "linear_wgrad", "linear_bias", "conv_fwd", "conv_dgrad",
       "conv_wgrad", "conv_bias", "bn_mean", "bn_mean_shifted", "bn_mean_unit",
       "bn_beta_grad")
SUM_SIZES = (64, 1000, 4096, 16384)
MM_SHAPES = ((128, 128, 4096), (1024, 1024, 1024), (64, 64, 16384))  # (M, N, K): K is the sum's n


RESNET_INPUTS = {"mnist": (1, 28), "cifar": (3, 32)}  # (channels, height) of the ResNet-18's images


def layer_shapes(resnet_input: str = "mnist") -> List[Tuple[str, str, tuple]]:
    """Every distinct Linear, Conv2d and BatchNorm2d of the shipped models (batch 64, the recipes')
    and of the ResNet-18 (batch 128, docs/results.md section 9; on 1x28x28 images as there, or on
    3x32x32 as bench/bench_torch_emulate.py's default): (models, kind, shape), where a linear shape
    is (batch, in, out), a convolution's (batch, cin, cout, k, stride, pad, height) and a batch
    norm's (batch, channels, height)."""
    import torch
    import fplab.torch.models as models
    from fplab.torch.resnet import resnet18

    found: Dict[tuple, List[str]] = {}
    resnet_channels, resnet_height = RESNET_INPUTS[resnet_input]
    nets = [(name, models.build(name), 64, 1, 28) for name in ("mlp", "small_cnn", "small_cnn_bn", "medium_cnn")]
    nets.append(("resnet18", resnet18(in_channels=resnet_channels, classes=10), 128, resnet_channels, resnet_height))
    for name, net, batch, channels, height in nets:
        hooks = []

        def record(module, inputs, _output, name=name):
            x = inputs[0]
            if isinstance(module, torch.nn.Linear):
                key = ("linear", (x.shape[0], module.in_features, module.out_features))
            elif isinstance(module, torch.nn.BatchNorm2d):
                key = ("bn", (x.shape[0], module.num_features, x.shape[2]))
            else:
                key = ("conv", (x.shape[0], module.in_channels, module.out_channels, module.kernel_size[0],
                                module.stride[0], module.padding[0], x.shape[2]))
            if name not in found.setdefault(key, []):
                found[key].append(name)

        for module in net.modules():
            if isinstance(module, (torch.nn.Linear, torch.nn.Conv2d, torch.nn.BatchNorm2d)):
                hooks.append(module.register_forward_hook(record))
        with torch.no_grad():
            net.eval()(torch.zeros(batch, channels, height, height))
        for h in hooks:
            h.remove()
    return [(",".join(names), kind, shape) for (kind, shape), names in found.items()]


@dataclass
class Target:
    """One output element of one kernel call, as fplab.reveal_dot's fn(a, b) (or reveal_sum's fn(x))."""

    key: str
    op: str
    shape: tuple
    models: str
    n: int
    call: Callable
    is_sum: bool = False


def _targets(device: str, ops: List[str], batch: int = 0, resnet_input: str = "mnist",
             wgrad_images: Optional[List[int]] = None) -> Iterator[Target]:
    import torch
    import torch.nn.functional as F

    dev = torch.device(device)

    def tensor(values):  # a probe vector onto the device
        return torch.from_numpy(values).to(dev)

    if "sum" in ops:
        for n in SUM_SIZES:
            yield Target(f"sum-{n}", "sum", (n,), "", n, lambda x: torch.sum(tensor(x)).item(), is_sum=True)
    if "sum0" in ops:  # a bias gradient: a (batch, features) tensor summed over the batch
        for rows, cols in ((64, 128), (128, 512)):
            def column_sum(x, rows=rows, cols=cols):
                m = torch.zeros(rows, cols, device=dev)
                m[:, 0] = tensor(x)
                return m.sum(0)[0].item()
            yield Target(f"sum0-{rows}x{cols}", "sum0", (rows, cols), "", rows, column_sum, is_sum=True)
    if "nll_loss" in ops:  # the mean loss: F.nll_loss of (batch, 10) log-probabilities, every label 0
        for rows in (64, 128):
            def loss_sum(x, rows=rows):
                logp = torch.zeros(rows, 10, device=dev)
                logp[:, 0] = tensor(x)
                labels = torch.zeros(rows, dtype=torch.long, device=dev)
                return -rows * F.nll_loss(logp, labels).item()  # the sum: a power of two times the mean
            yield Target(f"nll_loss-{rows}x10", "nll_loss", (rows, 10), "", rows, loss_sum, is_sum=True)
    if "mm" in ops:
        for m_, n_, k in MM_SHAPES:
            A, B = torch.zeros(m_, k, device=dev), torch.zeros(k, n_, device=dev)

            def mm(a, b, A=A, B=B):
                A[0] = tensor(a)
                B[:, 0] = tensor(b)
                return torch.mm(A, B)[0, 0].item()
            yield Target(f"mm-{m_}x{n_}x{k}", "mm", (m_, n_, k), "", k, mm)
    for models, kind, shape in layer_shapes(resnet_input):
        if batch:  # the layer at another batch: a weight gradient's sum has batch x H x W terms
            shape = (batch,) + tuple(shape[1:])
        if kind == "linear":
            yield from _linear_targets(dev, tensor, models, shape, ops)
        elif kind == "bn":
            yield from _bn_targets(dev, tensor, models, shape, ops)
        else:
            yield from _conv_targets(dev, tensor, models, shape, ops, wgrad_images)


def _linear_targets(dev, tensor, models: str, shape: tuple, ops: List[str]) -> Iterator[Target]:
    """F.linear forward, and its backward as aten's linear backward computes it (grad.mm(W),
    grad.t().mm(x))."""
    import torch
    import torch.nn.functional as F

    batch, fin, fout = shape
    name = f"{batch}x{fin}->{fout}"
    x, w, bias, g = (torch.zeros(batch, fin, device=dev), torch.zeros(fout, fin, device=dev),
                     torch.zeros(fout, device=dev), torch.zeros(batch, fout, device=dev))
    if "linear_fwd" in ops:
        def fwd(a, b):
            x[0], w[0] = tensor(a), tensor(b)
            return F.linear(x, w, bias)[0, 0].item()
        yield Target(f"linear_fwd-{name}", "linear_fwd", shape, models, fin, fwd)
    if "linear_dgrad" in ops:
        def dgrad(a, b):
            g[0], w[:, 0] = tensor(a), tensor(b)
            return g.mm(w)[0, 0].item()
        yield Target(f"linear_dgrad-{name}", "linear_dgrad", shape, models, fout, dgrad)
    if "linear_wgrad" in ops:
        def wgrad(a, b):
            g[:, 0], x[:, 0] = tensor(a), tensor(b)
            return g.t().mm(x)[0, 0].item()
        yield Target(f"linear_wgrad-{name}", "linear_wgrad", shape, models, batch, wgrad)
    if "linear_bias" in ops:
        def bias_grad(a):  # autograd's bias gradient of F.linear: the output gradient summed over the batch
            g[:, 0] = tensor(a)
            return g.sum(0)[0].item()
        yield Target(f"linear_bias-{name}", "linear_bias", shape, models, batch, bias_grad, is_sum=True)


def _bn_targets(dev, tensor, models: str, shape: tuple, ops: List[str]) -> Iterator[Target]:
    """F.batch_norm in training, channel 0 over its batch x H x W terms: the mean (read from the
    running mean with momentum 1, times the count: a whole number again, however the division
    rounded) and beta's gradient (the output gradient's sum). The mean's tree is the sum's, but its
    replays on random inputs cannot match: what is read is the rounded quotient, not the sum."""
    import torch
    import torch.nn.functional as F

    batch, channels, h = shape
    count = batch * h * h
    name = f"{batch}x{channels}@{h}"
    x = torch.zeros(batch, channels, h, h, device=dev)
    weight, bias = torch.ones(channels, device=dev), torch.zeros(channels, device=dev, requires_grad=True)

    def channel_sum() -> float:
        """Channel 0's mean of x, read back through the running mean (momentum 1), times the count:
        a sum's quotient brings the count back to within its rounding; anything further (a running
        update, not a sum) is passed on as it is, for the probe to refuse."""
        running_mean, running_var = torch.zeros(channels, device=dev), torch.ones(channels, device=dev)
        F.batch_norm(x, running_mean, running_var, weight, bias.detach(), training=True, momentum=1.0)
        total = running_mean[0].item() * count
        whole = round(total)
        return whole if abs(total - whole) <= count * 2.0 ** -20 else total

    if "bn_mean" in ops:
        def mean_sum(a):
            x[:, 0] = tensor(a).reshape(batch, h, h)
            return channel_sum()
        yield Target(f"bn_mean-{name}", "bn_mean", shape, models, count, mean_sum, is_sum=True)
    if "bn_mean_shifted" in ops:
        # A kernel that sums x - x[0] (the channel's first value as a shift, for a one-pass variance
        # that keeps its bits) is no tree over all of x (the probe's pivot at x[0] moves the shift),
        # but is one over the other count - 1 values with x[0] = 0.
        def shifted_sum(a):
            x[:, 0] = torch.cat([torch.zeros(1, device=x.device), tensor(a)]).reshape(batch, h, h)
            return channel_sum()
        yield Target(f"bn_mean_shifted-{name}", "bn_mean_shifted", shape, models, count - 1, shifted_sum, is_sum=True)
    if "bn_mean_unit" in ops:
        # The first block of (up to) 16 images by 16 pixels, zeros elsewhere: in cuDNN's 28x28 kernel
        # each value of such a block is another thread's, so the reveal draws the tree the threads'
        # partials meet in (docs/results/calibration_torch.md, "The 28x28 kernels"), where the whole
        # channel's Welford chains are no tree.
        images, pixels = min(batch, 16), min(h * h, 16)

        def unit_sum(a):
            x.zero_()
            x[:images, 0].view(images, h * h)[:, :pixels] = tensor(a).reshape(images, pixels)
            return channel_sum()
        yield Target(f"bn_mean_unit-{name}", "bn_mean_unit", shape, models, images * pixels, unit_sum, is_sum=True)
    if "bn_beta_grad" in ops:
        g = torch.zeros(batch, channels, h, h, device=dev)

        def beta_grad(a):
            g[:, 0] = tensor(a).reshape(batch, h, h)
            bias.grad = None
            F.batch_norm(x, None, None, weight, bias, training=True).backward(g)
            return bias.grad[0].item()
        yield Target(f"bn_beta_grad-{name}", "bn_beta_grad", shape, models, count, beta_grad, is_sum=True)


def _conv_targets(dev, tensor, models: str, shape: tuple, ops: List[str],
                  wgrad_images: Optional[List[int]] = None) -> Iterator[Target]:
    """F.conv2d forward and aten.convolution_backward's two gradients (what autograd calls), for
    one output element near the middle. Each term of its sum is a pair of elements of two of the
    operands x (input), w (weight), g (output gradient); the probe writes a and b there, one
    index_put each, and every other element stays 0. ``wgrad_images``: the weight gradient's terms
    of these images of the batch only (the others' products stay 0, which no sum changes), so that a
    large batch's kernel can be probed where all its terms would be too many."""
    import torch
    import torch.nn.functional as F

    batch, cin, cout, k, stride, pad, h = shape
    oh = (h + 2 * pad - k) // stride + 1
    name = f"{batch}x{cin}->{cout}k{k}s{stride}@{h}"
    x, w = torch.zeros(batch, cin, h, h, device=dev), torch.zeros(cout, cin, k, k, device=dev)
    g = torch.zeros(batch, cout, oh, oh, device=dev)

    def flat(t, *index):  # the flat index of t[index]
        return sum(i * st for i, st in zip(index, t.stride()))

    def target(op, n_terms, a_in, a_idx, b_in, b_idx, result, suffix=""):
        a_idx = torch.tensor(a_idx, dtype=torch.long, device=dev)
        b_idx = torch.tensor(b_idx, dtype=torch.long, device=dev)

        def call(a, b):
            a_in.view(-1)[a_idx] = tensor(a)
            b_in.view(-1)[b_idx] = tensor(b)
            return result().item()
        return Target(f"{op}-{name}{suffix}", op, shape, models, n_terms, call)

    def backward(mask):
        return torch.ops.aten.convolution_backward(g, x, w, [0], [stride] * 2, [pad] * 2, [1, 1], False, [0, 0], 1,
                                                   mask)

    if "conv_fwd" in ops:
        # out[0, 0, r, r] = sum over (ci, i, j) of w[0, ci, i, j] * x[0, ci, r * stride - pad + i, ...], over
        # the taps that fall inside the image (a 1x1 image with padding 1 has only the centre tap)
        r = oh // 2
        taps = [i for i in range(k) if 0 <= r * stride - pad + i < h]
        terms = [(ci, i, j) for ci in range(cin) for i in taps for j in taps]
        yield target("conv_fwd", len(terms), w, [flat(w, 0, ci, i, j) for ci, i, j in terms],
                     x, [flat(x, 0, ci, r * stride - pad + i, r * stride - pad + j) for ci, i, j in terms],
                     lambda: F.conv2d(x, w, None, stride, pad)[0, 0, r, r])
    if "conv_dgrad" in ops:
        # grad_x[0, 0, y, y] = sum over (co, i, j) of g[0, co, (y + pad - i) / stride, ...] * w[co, 0, i, j], over
        # the taps where the division is whole and inside the output; y the middle row that has taps
        def taps_of(y):
            return [i for i in range(k) if (y + pad - i) % stride == 0 and 0 <= (y + pad - i) // stride < oh]
        y = next(y for y in list(range(h // 2, h)) + list(range(h // 2)) if taps_of(y))
        taps = taps_of(y)
        terms = [(co, i, j) for co in range(cout) for i in taps for j in taps]
        yield target("conv_dgrad", len(terms),
                     g, [flat(g, 0, co, (y + pad - i) // stride, (y + pad - j) // stride) for co, i, j in terms],
                     w, [flat(w, co, 0, i, j) for co, i, j in terms],
                     lambda: backward([True, False, False])[0][0, 0, y, y])
    if "conv_wgrad" in ops:
        # grad_w[0, 0, c, c] (the centre tap) = sum over (b, oy, ox) of g[b, 0, oy, ox] * x[b, 0, oy * stride - pad + c, ...]
        c = k // 2
        valid = [o for o in range(oh) if 0 <= o * stride - pad + c < h]
        images = list(range(batch)) if wgrad_images is None else [b for b in wgrad_images if b < batch]
        terms = [(b, oy, ox) for b in images for oy in valid for ox in valid]
        suffix = "" if wgrad_images is None else "+images" + ".".join(str(b) for b in images)
        yield target("conv_wgrad", len(terms), g, [flat(g, b, 0, oy, ox) for b, oy, ox in terms],
                     x, [flat(x, b, 0, oy * stride - pad + c, ox * stride - pad + c) for b, oy, ox in terms],
                     lambda: backward([False, True, False])[1][0, 0, c, c], suffix)
    if "conv_bias" in ops:
        # grad_bias[0] = sum over (b, oy, ox) of g[b, 0, oy, ox], as convolution_backward computes it
        def bias_grad(a):
            g[:, 0] = tensor(a).reshape(batch, oh, oh)
            return torch.ops.aten.convolution_backward(g, x, w, [cout], [stride] * 2, [pad] * 2, [1, 1], False,
                                                       [0, 0], 1, [False, False, True])[2][0].item()
        yield Target(f"conv_bias-{name}", "conv_bias", shape, models, batch * oh * oh, bias_grad, is_sum=True)


def _set_mode(mode: str, tf32: str) -> None:
    from fplab.torch.census import set_torch_mode

    set_torch_mode(mode, tf32)


def _random_inputs(rng, n: int, trial: int):
    import numpy as np

    kind = trial % 3
    if kind == 0:
        return rng.standard_normal(n).astype(np.float32)
    if kind == 1:
        return rng.random(n).astype(np.float32)
    return (np.ldexp(1 + rng.random(n), rng.integers(-20, 20, n)) * rng.choice([-1, 1], n)).astype(np.float32)


def _factor_conversion(target: Target) -> str:
    """How the kernel converts an fp32 factor before multiplying, seen in one product with 1:
    1 + 2^-11 lies halfway between two tf32 values (10 fraction bits) and 1 + 3 * 2^-11 halfway
    with an odd lower neighbour. 'fp32' when both come back whole."""
    import numpy as np

    seen = []
    for value in (1 + 2.0 ** -11, 1 + 3 * 2.0 ** -11):
        a, b = np.zeros(target.n, np.float32), np.zeros(target.n, np.float32)
        a[0], b[0] = value, 1
        seen.append(float(target.call(a, b)))
    known = {(1 + 2.0 ** -11, 1 + 3 * 2.0 ** -11): "fp32", (1.0, 1 + 2.0 ** -10): "tf32, truncated",
             (1.0, 1 + 2.0 ** -9): "tf32, to nearest even", (1 + 2.0 ** -10, 1 + 2.0 ** -9): "tf32, to nearest, ties away"}
    return known.get(tuple(seen), f"other ({seen[0]!r}, {seen[1]!r})")


def _probe_varying(target: Target, runs: int, verify: int, seed: int, seconds: float = 0) -> dict:
    """A target that is not one tree, probed again with every pair asked `runs` times: its
    deterministic parts and how they were combined (docs/reveal.md, "Orders that vary"), and
    whether some order of the replayed parts gives each call's bits on `verify` random inputs."""
    import fplab

    reveal = fplab.reveal_sum if target.is_sum else fplab.reveal_dot
    try:
        r = reveal(target.call, target.n, runs=runs, verify=verify, seed=seed, seconds=seconds)
    except fplab.Error as e:
        return {"error": str(e)}
    sizes = sorted({len(p) for p in r["parts"]})
    return {"varies": r["varies"], "parts": len(r["parts"]), "part_sizes": sizes, "schedules": r["schedules"][:4],
            "chain_of_parts": r["chain_of_parts"], "parts_met": {str(k): v for k, v in r["parts_met"].items()},
            "uniform_order_distance": r["uniform_order_distance"], "runs": runs, "calls": r["calls"],
            "seconds": round(r["seconds"], 3), "skeleton_head": r["skeleton"][:240],
            "first_parts": r["parts"][:4], "replays": r["replays"]}


def _left(deadline: float) -> float:
    """Seconds until ``deadline`` (a time.monotonic()), at least a tenth of one; 0 for no deadline."""
    return max(0.1, deadline - time.monotonic()) if deadline else 0


def _probe(target: Target, verify: int, repeat: int, seed: int, trials_dir: str, key: str,
           varying_runs: int = 0, varying_max_n: int = 0, deadline: float = 0) -> dict:
    """One target's row. ``deadline``: a time.monotonic() past which its probes give up (0: none)."""
    import numpy as np
    import fplab

    row: dict = {}
    rng = np.random.default_rng(seed)
    # Run to run: the same random inputs twice.
    differ = 0
    for t in range(repeat):
        a = _random_inputs(rng, target.n, t)
        b = _random_inputs(rng, target.n, t + 1)
        args = (a,) if target.is_sum else (a, b)
        differ += np.float32(target.call(*args)).view(np.uint32) != np.float32(target.call(*args)).view(np.uint32)
    row["run_to_run_differ"] = int(differ)
    row["run_to_run_trials"] = repeat
    if not target.is_sum:
        row["factor_conversion"] = _factor_conversion(target)
    reveal = fplab.reveal_sum if target.is_sum else fplab.reveal_dot
    try:
        r = reveal(target.call, target.n, verify=verify, seed=seed, seconds=_left(deadline))
    except fplab.Error as e:
        row["error"] = str(e)
        if varying_runs and "contradict one tree" in row["error"] and target.n <= varying_max_n:
            row["varying"] = _probe_varying(target, varying_runs, min(verify, 20), seed, _left(deadline))
        return row
    widths: Dict[int, int] = {}
    for children in r["nodes"]:
        widths[len(children)] = widths.get(len(children), 0) + 1
    row.update(calls=r["calls"], seconds=round(r["seconds"], 3), depth=r["depth"], additions=r["additions"],
               node_widths={str(k): v for k, v in sorted(widths.items())}, schedules=r["schedules"][:4],
               schedule_count=len(r["schedules"]), replays=r["replays"], tree_head=r["tree"][:240],
               nodes=r["nodes"], root=r["root"])
    best = max((p["identical"] for p in r["replays"]), default=0)
    if verify and best < verify and target.n <= 4608:  # kept for working out the arithmetic offline
        keep = min(verify, 8)
        a_s, b_s, out = [], [], []
        for t in range(keep):
            a = _random_inputs(rng, target.n, t)
            b = _random_inputs(rng, target.n, t + 2)
            a_s.append(a)
            b_s.append(b)
            out.append(target.call(a) if target.is_sum else target.call(a, b))
        os.makedirs(trials_dir, exist_ok=True)
        path = os.path.join(trials_dir, key + ".npz")
        np.savez_compressed(path + ".tmp.npz", a=np.array(a_s), b=np.array(b_s), out=np.array(out, dtype=np.float32))
        os.replace(path + ".tmp.npz", path)
        row["trials_file"] = os.path.relpath(path, os.path.dirname(trials_dir))
    return row


def _checked_ops(args: argparse.Namespace) -> Optional[List[str]]:
    """The ops asked for, or None after one line on stderr saying what is wrong with the options."""
    import torch

    if args.batch < 0:
        print(f"Error: --batch {args.batch}: a batch is a positive number (0: the models' own)", file=sys.stderr)
        return None
    if args.device == "cuda" and not torch.cuda.is_available():
        print("Error: --device cuda, but PyTorch sees no GPU here", file=sys.stderr)
        return None
    try:
        args.wgrad_image_list = [int(b) for b in args.wgrad_images.split(",")] if args.wgrad_images else None
    except ValueError:
        args.wgrad_image_list = [-1]
    if args.wgrad_image_list is not None and (min(args.wgrad_image_list) < 0 or
                                              len(set(args.wgrad_image_list)) != len(args.wgrad_image_list)):
        print(f"Error: --wgrad-images {args.wgrad_images}: distinct image indices from 0, comma-separated",
              file=sys.stderr)
        return None
    ops = args.ops.split(",")
    unknown = [o for o in ops if o not in OPS]
    if unknown:
        print(f"Error: unknown op {unknown[0]!r} (known: {', '.join(OPS)})", file=sys.stderr)
        return None
    return ops


def _chosen_targets(args: argparse.Namespace, ops: List[str]) -> List[Target]:
    targets = list(_targets(args.device, ops, args.batch, args.resnet_input, args.wgrad_image_list))
    if args.shapes:
        wanted = args.shapes.split(",")
        targets = [t for t in targets if any(t.key.startswith(w) for w in wanted)]
    return targets


def kernels(args: argparse.Namespace) -> int:
    """Which CUDA kernels each target's call runs, without probing it: whether the kernel a probe
    at a small --batch revealed is the one the library picks at the batch a model trains with."""
    import torch

    ops = _checked_ops(args)
    if ops is None:
        return 2
    if args.device != "cuda":
        print("Error: kernels: --device cuda only (the CPU's kernels have no profiler names)", file=sys.stderr)
        return 2
    targets = _chosen_targets(args, ops)
    for mode, tf32 in [(m, t) for m in args.modes.split(",") for t in args.tf32.split(",")]:
        _set_mode(mode, tf32)
        for target in targets:
            names = _kernels_of(target)
            print(json.dumps({"key": f"{target.key}-{mode}-tf32{tf32}", "n": target.n, "models": target.models,
                              "kernels": names, "gpu": torch.cuda.get_device_name()}), flush=True)
    return 0


def run(args: argparse.Namespace) -> int:
    import torch

    ops = _checked_ops(args)
    if ops is None:
        return 2
    os.makedirs(args.out, exist_ok=True)
    results = os.path.join(args.out, "reveal.jsonl")
    done = set()
    if args.resume and os.path.exists(results):
        with open(results) as f:
            rows = [json.loads(line) for line in f if line.strip()]
        # the newest row of a key counts; one that gave up at the budget is probed again only if asked
        latest = {row["key"]: row for row in rows}
        done = {key for key, row in latest.items() if not (args.retry_gave_up and row.get("gave_up"))}
    backend = {"torch": torch.__version__, "device": args.device,
               "gpu": torch.cuda.get_device_name() if args.device == "cuda" else "",
               "cudnn": torch.backends.cudnn.version() if args.device == "cuda" else None,
               "threads": torch.get_num_threads()}
    print(json.dumps(backend))
    targets = [t for t in _chosen_targets(args, ops) if t.n <= args.max_n]
    combos = [(m, t) for m in args.modes.split(",") for t in args.tf32.split(",")]
    total = len(targets) * len(combos)
    count = 0
    started = None
    with open(results, "a") as out:
        for mode, tf32 in combos:
            _set_mode(mode, tf32)
            # The budget is the probes': making the targets (building models) and the first switch of
            # PyTorch's modes (which starts CUDA where there is a GPU: seconds on an H200) are not in it.
            started = time.monotonic() if started is None else started
            for target in targets:
                count += 1
                key = f"{target.key}-{mode}-tf32{tf32}"
                if key in done:
                    continue
                if args.budget and time.monotonic() - started > args.budget:
                    print(f"[{count}/{total}] {key}: budget of {args.budget} s spent, stopping (--resume goes on)")
                    return 1
                t0 = time.monotonic()
                row = {"key": key, "op": target.op, "shape": list(target.shape), "models": target.models,
                       "n": target.n, "mode": mode, "tf32": tf32, **backend}
                if args.device == "cuda":
                    row["kernels"] = _kernels_of(target)
                deadline = started + args.budget if args.budget else 0
                row.update(_probe(target, args.verify, args.repeat, args.seed, os.path.join(args.out, "trials"), key,
                                  args.varying_runs, args.varying_max_n, deadline))
                gave_up = [e for e in (row.get("error", ""), row.get("varying", {}).get("error", ""))
                           if "gave up after" in e]
                if gave_up:  # the budget ran out inside this target: recorded as such, so that --resume goes on
                    row["gave_up"] = True
                    out.write(json.dumps(row) + "\n")
                    print(f"[{count}/{total}] {key}: {gave_up[0]}; recorded as given up (--resume skips it, "
                          "--resume --retry-gave-up probes it again)")
                    return 1
                out.write(json.dumps(row) + "\n")
                out.flush()
                print(f"[{count}/{total}] {key}: n={target.n} {_summary(row)} ({time.monotonic() - t0:.1f} s)"
                      + (f"; kernels: {'; '.join(row['kernels'])}" if row.get("kernels") else ""), flush=True)
    return 0


def _kernels_of(target: Target) -> List[str]:
    """The CUDA kernels one call of the target runs on random inputs, in order of their first launch
    (torch.profiler): which cuDNN or cuBLAS kernel a revealed tree belongs to, since the library
    picks by shape and batch. Copies and fills (the probe writing its inputs) left out."""
    import numpy as np
    import torch
    from torch.profiler import ProfilerActivity, profile

    values = [np.random.default_rng(0).standard_normal(target.n).astype(np.float32) for _ in range(1 if target.is_sum else 2)]
    with profile(activities=[ProfilerActivity.CUDA]) as recorded:
        target.call(*values)
        torch.cuda.synchronize()
    names = []
    for event in recorded.events():
        name = event.name
        if event.device_type == torch.autograd.DeviceType.CUDA and name not in names and \
                not any(word in name.lower() for word in ("memcpy", "memset", "fill", "copy", "index_put", "indexing")):
            names.append(name)
    return names


def _summary(row: dict) -> str:
    if "error" in row:
        v = row.get("varying")
        if v and "error" not in v:
            return (f"not one tree; with --varying-runs {v['runs']}: {v['parts']} parts of {v['part_sizes']} terms, "
                    f"{v['schedules'][0] if v['schedules'] else 'no schedule'}, chain {v['chain_of_parts']}, "
                    f"parts met {v['parts_met']}, distance from a random order {v['uniform_order_distance']:.3f}, "
                    f"{v['calls']} calls" + (f"; replay in some order {v['replays'][0]['identical']}/"
                                             f"{v['replays'][0]['trials']} {v['replays'][0]['arithmetic']}"
                                             if v.get("replays") else ""))
        return f"not one tree: {row['error']}" + (f"; with runs: {v['error']}" if v else "")
    best = row["replays"][0] if row["replays"] else None
    replay = f"{best['identical']}/{best['trials']} {best['arithmetic']}" if best else "no replay"
    schedule = row["schedules"][0] if row["schedules"] else "no schedule"
    factors = f" factors {row['factor_conversion']};" if "factor_conversion" in row else ""
    return (f"{row['calls']} calls,{factors} depth {row['depth']}, nodes {row['node_widths']}, {schedule}; replay {replay}; "
            f"run to run {row['run_to_run_differ']}/{row['run_to_run_trials']} differ")


# kernels around the one that computes: layout transforms and workspace set-up
_HELPER_KERNELS = ("nchwToNhwc", "nhwcToNchw", "init_device_workspace", "scalePackedTensor")


def _main_kernel(signatures: List[str]) -> str:
    """The first kernel of a call that is not a layout transform or a workspace's set-up."""
    return next((s for s in signatures if not any(h in s for h in _HELPER_KERNELS)), signatures[0])


def _kernel_name(signature: str) -> str:
    """A kernel's name without its parameter list: `wgrad_alg0_engine<float, 128, ...>`."""
    name = signature.split("(", 1)[0].strip()
    name = name[5:] if name.startswith("void ") else name
    return "`" + (name if len(name) <= 70 else name[:67] + "...") + "`"


def table(args: argparse.Namespace) -> int:
    import lzma

    rows = []
    for given in args.folders:  # a run's --out, or a reveal.jsonl (.xz) itself
        path = os.path.join(given, "reveal.jsonl") if os.path.isdir(given) else given
        if not os.path.exists(path):
            print(f"Error: {path}: no such file (run `run --out {given}` first)", file=sys.stderr)
            return 2
        with (lzma.open(path, "rt") if path.endswith(".xz") else open(path)) as f:
            rows += [json.loads(line) for line in f if line.strip()]
    latest = {row["key"]: index for index, row in enumerate(rows)}  # a key probed again: its newest row
    rows = [row for index, row in enumerate(rows) if latest[row["key"]] == index]
    if args.rename:  # each stored tree named by today's matcher (a grammar word or candidate added since)
        import fplab

        for r in rows:
            if r.get("nodes") and not r.get("error"):
                try:
                    names = fplab.name_tree(r["nodes"], r["n"])
                except fplab.Error as e:
                    print(f"Warning: {r['key']}: its stored tree is not named again ({e})", file=sys.stderr)
                    continue
                r["schedules"], r["schedule_count"] = names[:4], len(names)  # as `run` stores them
    print("| target | models | n | mode | TF32 | factors | calls | depth | nodes (children: count) | schedule | replay (best) "
          "| run to run | kernel |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        varying = r.get("varying") or {}
        if r.get("gave_up"):
            cells = ["—"] * 3 + ["gave up at the budget", "—"]
        elif "error" in r and varying and "error" not in varying:  # an order that varies, its skeleton revealed
            replay = (varying.get("replays") or [None])[0]
            named = "`" + varying["schedules"][0].replace("|", "\\|") + "`" if varying["schedules"] else "no schedule"
            cells = [str(varying["calls"]), "—", f"{varying['parts']} parts of {varying['part_sizes']} terms",
                     f"varies: {named}",
                     f"{replay['identical']}/{replay['trials']} {replay['arithmetic']}, in some order" if replay else "—"]
        elif "error" in r:
            cells = ["—"] * 3 + ["not one tree of additions", "—"]
        else:
            widths = ", ".join(f"{k}: {v}" for k, v in r["node_widths"].items())
            best = r["replays"][0] if r["replays"] else None
            cells = [str(r["calls"]), str(r["depth"]), widths, "`" + r["schedules"][0].replace("|", "\\|") + "`" if r["schedules"] else "none",
                     f"{best['identical']}/{best['trials']} {best['arithmetic']}" if best else "—"]
        target = r["key"].rsplit("-", 2)[0]
        factors = r.get("factor_conversion", "—")
        kernel = _kernel_name(_main_kernel(r["kernels"])) if r.get("kernels") else "—"
        print(f"| {target} | {r['models'] or '—'} | {r['n']} | {r['mode']} | {r['tf32']} | {factors} | " + " | ".join(cells) +
              f" | {r['run_to_run_differ']}/{r['run_to_run_trials']} | {kernel} |")
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n"
               "  %(prog)s run --device cpu --ops sum,mm,linear_fwd --max-n 1024 --verify 20 --out /tmp/reveal-cpu\n"
               "  %(prog)s table /tmp/reveal-cpu\n"
               "  %(prog)s kernels --ops conv_wgrad --modes default --tf32 off --resnet-input cifar "
               "--shapes conv_wgrad-128x64\n")
    commands = parser.add_subparsers(dest="command", required=True)
    r = commands.add_parser("run", help="reveal every target and write reveal.jsonl into --out")
    k = commands.add_parser("kernels", help="print each target's CUDA kernels (torch.profiler) without probing it")
    for p in (r, k):
        p.add_argument("--device", default="cuda", help="cuda or cpu (default: %(default)s)")
        p.add_argument("--ops", default=",".join(OPS), help="comma-separated, of: " + ", ".join(OPS))
        p.add_argument("--modes", default="default,deterministic", help="default: %(default)s")
        p.add_argument("--tf32", default="off,on", help="default: %(default)s")
        p.add_argument("--batch", type=int, default=0,
                       help="the layers at this batch instead of the models' own (default 0: theirs, 64, and 128 "
                            "for the ResNet-18): a weight gradient of fewer terms, e.g. --batch 16 --shapes "
                            "'conv_wgrad-16x1->16'")
        p.add_argument("--wgrad-images", default="", metavar="LIST",
                       help="a weight gradient's terms of these images of the batch only (comma-separated "
                            "indices; the others stay 0), so that a large batch's kernel can be probed: e.g. "
                            "--shapes conv_wgrad-64x1 --wgrad-images 0,1,63 (key suffix +images0.1.63)")
        p.add_argument("--resnet-input", choices=sorted(RESNET_INPUTS), default="mnist",
                       help="the ResNet-18's images: mnist 1x28x28 (default, docs/results.md) or cifar 3x32x32 "
                            "(bench/bench_torch_emulate.py's)")
        p.add_argument("--shapes", default="",
                       help="only the targets whose key starts with one of these (comma-separated)")
    r.add_argument("--max-n", type=int, default=16384, help="skip targets of more terms (default: %(default)s)")
    r.add_argument("--verify", type=int, default=60, help="random replays per target (default: %(default)s)")
    r.add_argument("--repeat", type=int, default=10, help="run-to-run pairs per target (default: %(default)s)")
    r.add_argument("--seed", type=int, default=1)
    r.add_argument("--varying-runs", type=int, default=6,
                   help="probe a target that is not one tree again, every pair this many times (0: no)")
    r.add_argument("--varying-max-n", type=int, default=6400,
                   help="only for targets of at most this many terms (about n x parts / 2 + runs x n calls)")
    r.add_argument("--budget", type=float, default=0,
                   help="stop after this many seconds, a target's probe in progress included (0: no limit)")
    r.add_argument("--resume", action="store_true", help="skip the targets reveal.jsonl in --out has")
    r.add_argument("--retry-gave-up", action="store_true",
                   help="with --resume, probe again the targets whose probe gave up at the budget")
    r.add_argument("--out", required=True)
    t = commands.add_parser("table", help="a Markdown table of the folders' reveal.jsonl")
    t.add_argument("folders", nargs="+", metavar="FOLDER_OR_FILE", help="a run's --out, or a reveal.jsonl(.xz)")
    t.add_argument("--rename", action="store_true",
                   help="name every stored tree again with this fplab's candidates (fplab.name_tree)")
    args = parser.parse_args(argv)
    return {"run": run, "kernels": kernels, "table": table}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
