#!/usr/bin/env python3
"""Which outputs of a nondeterministic convolution weight gradient share one arrival order.

A weight gradient whose parts meet by atomics (cuDNN's default-mode kernels at 28x28 and 14x14)
draws an order of its parts run by run. fplab draws one order per tile of outputs (a GEMM's 4x64
block, docs/schedules.md "Implementation noise"); how the chip's outputs share orders sets how
correlated their perturbations are, which moves churn. This probe measures it on any device and
under any profile, the same way:

- the inputs make every output's terms the same three numbers: the output gradient is one impulse
  of 1 at an interior pixel of three images (every channel), zero elsewhere; each of those images
  is one constant (its part value) in every channel and pixel, the others zero. Every output
  dW[k, c, r, s] is then the sum of the three part values in the order its kernel's parts arrive
  (the zero parts add nothing), and the three values are chosen so that the three orders that
  differ (which part comes last) give three different fp32 sums;
- the call runs --runs times (natively, or under fplab.torch.emulate with impl seeds 1..runs);
  each output's sequence of labels (which part came last, run by run) is its arrival history.
  Outputs with the same history shared their order in every run: they are one group.

  experiments/atomic_groups_torch.py run --device cuda --out /tmp/groups          # the chip
  experiments/atomic_groups_torch.py run --profile h100-torch --out /tmp/groups   # fplab, CPU

One JSON line per (layer, images, source) goes to groups.jsonl in --out; a table is printed.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys
from typing import Dict, List, Sequence, Tuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

# The first-layer weight gradients of the shipped CNNs (batch 64): (batch, cin, cout, k, stride, pad, height)
DEFAULT_LAYERS = ("64x1x16x3x1x1x28", "64x16x32x3x1x1x14")
DEFAULT_IMAGES = ("0,1,2", "0,32,63")


def part_values() -> Tuple[float, float, float]:
    """Three values, each exact in TF32 (so that TF32 convolutions multiply them exactly), whose
    fp32 sums in the three orders that differ (the part added last) are three different numbers."""
    import numpy as np

    # 1 + 2^-24 and 1 - 1.5 * 2^-24 are ties that round apart, and 2^-24 - 1.5 * 2^-24 is exact: the
    # three orders end at 1, 1 - 2^-24 and 1 - 2^-23
    a, b, c = 1.0, 2.0 ** -24, -1.5 * 2.0 ** -24
    assert len({float(sum_last(np.float32(a), np.float32(b), np.float32(c), last)) for last in range(3)}) == 3
    return a, b, c


def sum_last(a, b, c, last: int):
    """The fp32 sum of the three parts from zero with part ``last`` added last."""
    parts = [a, b, c]
    first = [p for i, p in enumerate(parts) if i != last]
    return (first[0] + first[1]) + parts[last]


def parse_layer(text: str) -> Tuple[int, ...]:
    fields = text.split("x")
    if len(fields) != 7 or not all(f.isdigit() for f in fields):
        raise SystemExit(f"Error: --layers {text!r}: BATCHxCINxCOUTxKxSTRIDExPADxHEIGHT, e.g. 64x1x16x3x1x1x28")
    return tuple(int(f) for f in fields)


def parse_images(text: str, batch: int) -> Tuple[int, int, int]:
    try:
        images = tuple(int(i) for i in text.split(","))
    except ValueError:
        images = ()
    if len(images) != 3 or len(set(images)) != 3 or not all(0 <= i < batch for i in images):
        raise SystemExit(f"Error: --images {text!r}: three distinct image indices in 0..{batch - 1}, e.g. 0,1,2")
    return images  # type: ignore[return-value]


def probe_inputs(layer: Tuple[int, ...], images: Sequence[int], device: str):
    """(x, grad of the output, the three part values) of one layer's probe."""
    import torch

    batch, cin, cout, k, stride, pad, height = layer
    out_height = (height + 2 * pad - k) // stride + 1
    x = torch.zeros(batch, cin, height, height)
    dy = torch.zeros(batch, cout, out_height, out_height)
    values = part_values()
    centre = out_height // 2  # every tap of an interior pixel reads the image, none the padding
    for image, value in zip(images, values):
        x[image] = value
        dy[image, :, centre, centre] = 1.0
    return x.to(device), dy.to(device), values


def weight_gradient(x, dy, layer: Tuple[int, ...]):
    import torch
    import torch.nn.functional as F

    _batch, cin, cout, k, stride, pad, _height = layer
    w = torch.zeros(cout, cin, k, k, device=x.device, requires_grad=True)
    F.conv2d(x, w, stride=stride, padding=pad).backward(dy)
    return w.grad.detach().to("cpu")


def labels_of(grad, values) -> List[int]:
    """Each output's label: the part that came last (0, 1, 2), or -1 for a sum of none of the three
    orders (a kernel that is not a fold of the three parts)."""
    import numpy as np

    sums = {float(sum_last(*(np.float32(v) for v in values), last)): last for last in range(3)}
    return [sums.get(float(np.float32(v)), -1) for v in grad.reshape(-1).tolist()]


def groups_of(histories: List[Tuple[int, ...]]) -> List[List[int]]:
    """Output indices grouped by identical histories, each group in index order, groups by first index."""
    by_history: Dict[Tuple[int, ...], List[int]] = collections.defaultdict(list)
    for index, history in enumerate(histories):
        by_history[history].append(index)
    return sorted(by_history.values(), key=lambda g: g[0])


def describe(groups: List[List[int]], rows: int, cols: int) -> Dict:
    """Each group as rows (output channels) x columns (input channel and tap, c*k*k + r*k + s):
    whether it is a rectangle of contiguous ranges, and the shapes' counts."""
    shapes: Dict[str, int] = collections.Counter()
    rectangles = 0
    for group in groups:
        group_rows = sorted({i // cols for i in group})
        group_cols = sorted({i % cols for i in group})
        contiguous = (group_rows == list(range(group_rows[0], group_rows[-1] + 1)) and
                      group_cols == list(range(group_cols[0], group_cols[-1] + 1)))
        if len(group_rows) * len(group_cols) == len(group) and contiguous:
            rectangles += 1
            shapes[f"{len(group_rows)}x{len(group_cols)}"] += 1
        else:
            shapes[f"other ({len(group)} outputs)"] += 1
    return {"groups": len(groups), "rectangles": rectangles, "shapes": dict(shapes)}


def measure(layer, images, device: str, runs: int, profile: str) -> Dict:
    import torch

    x, dy, values = probe_inputs(layer, images, device)
    per_run = []
    for run in range(runs):
        if profile:
            import fplab.torch

            with fplab.torch.emulate(profile, impl_seed=run + 1):
                grad = weight_gradient(x, dy, layer)
        else:
            grad = weight_gradient(x, dy, layer)
            if device == "cuda":
                torch.cuda.synchronize()
        per_run.append(labels_of(grad, values))
    histories = list(zip(*per_run))
    rows, cols = layer[2], layer[1] * layer[3] * layer[3]
    label_counts = collections.Counter(label for run_labels in per_run for label in run_labels)
    varied = sum(1 for h in histories if len(set(h)) > 1)
    return {"labels": {str(k): v for k, v in sorted(label_counts.items())}, "outputs_varying": varied,
            "outputs": len(histories), **describe(groups_of(histories), rows, cols)}


def run(args: argparse.Namespace) -> int:
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        print("Error: --device cuda: no CUDA device here", file=sys.stderr)
        return 2
    if args.runs < 2:
        print("Error: --runs must be at least 2", file=sys.stderr)
        return 2
    layers = [parse_layer(text) for text in args.layers.split(",")]
    image_sets = [[parse_images(text, layer[0]) for text in args.images.split(";")] for layer in layers]
    if args.profile:
        import fplab

        try:
            fplab.profile(args.profile.split(":")[0])
        except fplab.Error as e:
            print(f"Error: --profile: {e}", file=sys.stderr)
            return 2
    from fplab.torch.census import set_torch_mode

    os.makedirs(args.out, exist_ok=True)
    source = f"fplab {args.profile}" if args.profile else f"torch {args.mode}, TF32 {args.tf32}"
    if not args.profile:
        set_torch_mode(args.mode, args.tf32)
    print("| layer | images | source | outputs varying | labels (last part: count) | groups | shapes |")
    print("|---|---|---|---|---|---|---|")
    with open(os.path.join(args.out, "groups.jsonl"), "a") as out:
        for layer, images_of_layer in zip(layers, image_sets):
            for images in images_of_layer:
                image_text = ",".join(map(str, images))
                row = {"layer": "x".join(map(str, layer)), "images": list(images), "source": source,
                       "device": args.device, "runs": args.runs,
                       "gpu": torch.cuda.get_device_name() if args.device == "cuda" else "",
                       **measure(layer, images, args.device, args.runs, args.profile)}
                out.write(json.dumps(row) + "\n")
                out.flush()
                shapes = ", ".join(f"{count} of {shape}" for shape, count in row["shapes"].items())
                labels = ", ".join(f"{k}: {v}" for k, v in row["labels"].items())
                print(f"| {row['layer']} | {image_text} | {source} | {row['outputs_varying']} of {row['outputs']} | "
                      f"{labels} | {row['groups']} | {shapes} |", flush=True)
    return 0


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="example (seconds, on the CPU under fplab's h100-torch profile):\n"
               "  PYTHONPATH=build/python python3 experiments/atomic_groups_torch.py run --profile h100-torch "
               "--runs 8 --out /tmp/groups\n")
    commands = parser.add_subparsers(dest="command", required=True)
    p = commands.add_parser("run", help="measure and print the groups")
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    p.add_argument("--profile", default="", help="under fplab.torch.emulate(PROFILE) instead of natively")
    p.add_argument("--mode", default="default", choices=("default", "deterministic"), help="PyTorch's mode (native)")
    p.add_argument("--tf32", default="conv", choices=("off", "on", "conv"),
                   help="TF32 for cuBLAS and cuDNN (native; conv: cuDNN only, PyTorch's default)")
    p.add_argument("--layers", default=",".join(DEFAULT_LAYERS),
                   help="comma list of BATCHxCINxCOUTxKxSTRIDExPADxHEIGHT (default: the shipped CNNs' first two)")
    p.add_argument("--images", default=";".join(DEFAULT_IMAGES),
                   help="semicolon list of three image indices each, the images that hold the parts")
    p.add_argument("--runs", type=int, default=24, help="calls of each layer (24)")
    p.add_argument("--out", required=True, help="folder for groups.jsonl (appended to)")
    args = parser.parse_args(argv)
    return run(args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
