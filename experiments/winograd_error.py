#!/usr/bin/env python3
"""How large and how shaped a convolution weight gradient's rounding error is: PyTorch's own kernel
(on an H100, cuDNN's Winograd kernel for the layers docs/results/calibration_torch.md names),
fplab's Winograd model (`conv_wgrad = "winograd"`) and fplab's GEMM form, each against the exact
gradient (float64 of the same float32 inputs).

  experiments/winograd_error.py --device cuda --shapes 64x32x32@7,64x1x16@28 --trials 8
  experiments/winograd_error.py --device cpu --shapes 8x4x4@7 --trials 2 --json /tmp/w.json

Per shape (batch x in x out @ size: a 3x3 convolution, stride 1, padding 1) and trial, inputs and
output gradients drawn as the trial's kind (0: normal, 1: uniform [0, 1), 2: normal times a
log-uniform scale over 2^-8..2^8), and for each of the three:
- normwise: ||dW - exact|| / ||exact||;
- componentwise: the median and the 99th percentile over the weights of |dW - exact| / the weight's
  own scale (the sum of |terms|, which a dot product's error is bounded by), and the share of
  weights whose sign differs from the exact one's.
A Winograd kernel's error is normwise — its componentwise error, relative to each weight's own
terms, is far larger than a dot product's where the weight is small — and that is what the
emulation has to match for churn (docs/results/calibration_torch.md). PyTorch runs in its
deterministic mode (cuDNN's deterministic choice: Winograd for these layers on an H100);
the emulated forms run under `h100-torch:deterministic` and the same profile without its
Winograd rules.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from typing import Dict, List, Tuple

SHIPPED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "profiles", "shipped")


def _shape(text: str) -> Tuple[int, int, int, int]:
    """'BxCxK@S' -> (batch, in channels, out channels, size)."""
    try:
        dims, size = text.split("@")
        batch, cin, cout = (int(v) for v in dims.split("x"))
        shape = (batch, cin, cout, int(size))
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}': a shape is BATCHxINxOUT@SIZE, e.g. 64x32x32@7") from None
    if min(shape) < 1 or shape[3] < 2:
        raise argparse.ArgumentTypeError(f"'{text}': every number at least 1, the size at least 2")
    return shape


def _inputs(torch, shape, trial: int, device):
    batch, cin, cout, size = shape
    g = torch.Generator().manual_seed(1000 + trial)
    kind = trial % 3

    def draw(*dims):
        if kind == 0:
            t = torch.randn(*dims, generator=g)
        elif kind == 1:
            t = torch.rand(*dims, generator=g)
        else:
            t = torch.randn(*dims, generator=g) * torch.exp2(torch.randint(-8, 9, dims, generator=g).float())
        return t.to(device)
    return draw(batch, cin, size, size), draw(batch, cout, size, size), torch.randn(cout, cin, 3, 3, generator=g).to(device)


def _measures(torch, got, exact, scale) -> Dict[str, float]:
    error = (got.double() - exact).abs()
    relative = (error / scale.clamp_min(1e-300)).flatten()
    return {"normwise": float(error.norm() / exact.norm()),
            "median_componentwise": float(relative.median()),
            "p99_componentwise": float(torch.quantile(relative, 0.99)),
            "sign_differs": float(((got.double() > 0) != (exact > 0)).double().mean())}


def _gemm_profile(folder: str) -> str:
    """h100-torch without its Winograd rules, as a file in folder."""
    with open(os.path.join(SHIPPED, "h100-torch.toml")) as f:
        text = f.read().replace('name = "h100-torch"', 'name = "h100-torch-gemm"').replace('conv_wgrad = "winograd"\n', "")
    path = os.path.join(folder, "h100-torch-gemm.toml")
    with open(path, "w") as f:
        f.write(text)
    return path


def _winograd_profile(folder: str) -> str:
    """h100-torch with a Winograd rule for every 3x3 stride-1 convolution, as a file in folder."""
    with open(os.path.join(SHIPPED, "h100-torch.toml")) as f:
        text = f.read().replace('name = "h100-torch"', 'name = "h100-torch-winograd-all"')
    rule = ('\n[[deterministic.layers]]\nmatch = { layer = "conv", kernel = 3, stride = 1 }\n'
            'conv_wgrad = "winograd"\nwgrad = "all:seq"\n')
    path = os.path.join(folder, "h100-torch-winograd-all.toml")
    with open(path, "w") as f:
        f.write(text + rule)
    return path


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="examples:\n  %(prog)s --device cpu --shapes 8x4x4@7 --trials 2\n")
    parser.add_argument("--device", default="cuda", help="cuda or cpu (default: %(default)s)")
    parser.add_argument("--shapes", type=lambda t: [_shape(s) for s in t.split(",")], default=[(64, 32, 32, 7)],
                        help="comma-separated BATCHxINxOUT@SIZE (default: 64x32x32@7, small_cnn's third layer)")
    parser.add_argument("--trials", type=int, default=6, help="draws per shape (default: %(default)s)")
    parser.add_argument("--json", metavar="FILE", help="also write every number to FILE")
    try:
        args = parser.parse_args(argv)
    except SystemExit as stop:
        return int(stop.code or 0)
    import torch
    import torch.nn.functional as F

    import fplab.torch
    from fplab.torch.census import set_torch_mode

    if args.trials < 1:
        print("winograd_error.py: --trials must be at least 1", file=sys.stderr)
        return 2
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print(f"winograd_error.py: --device {args.device}, but this PyTorch sees no CUDA device", file=sys.stderr)
        return 2
    set_torch_mode("deterministic", "off")
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        forms = {"pytorch": None, "fplab winograd": _winograd_profile(folder) + ":deterministic",
                 "fplab gemm": _gemm_profile(folder) + ":deterministic"}
        for shape in args.shapes:
            for trial in range(args.trials):
                x, dy, w = _inputs(torch, shape, trial, args.device)
                xd, dyd = x.double().cpu(), dy.double().cpu()
                exact = torch.ops.aten.convolution_backward(dyd, xd, w.double().cpu(), None, [1, 1], [1, 1], [1, 1],
                                                            False, [0, 0], 1, [False, True, False])[1]
                scale = torch.ops.aten.convolution_backward(dyd.abs(), xd.abs(), w.double().cpu(), None, [1, 1],
                                                            [1, 1], [1, 1], False, [0, 0], 1, [False, True, False])[1]
                for form, profile in forms.items():
                    conv = torch.nn.Conv2d(shape[1], shape[2], 3, padding=1, bias=False).to(args.device)
                    with torch.no_grad():
                        conv.weight.copy_(w)
                    if profile is None:
                        F.conv2d(x, conv.weight, None, 1, 1).backward(dy)
                    else:
                        with fplab.torch.emulate(profile, impl_seed=1):
                            F.conv2d(x, conv.weight, None, 1, 1).backward(dy)
                    row = {"shape": "%dx%dx%d@%d" % shape, "trial": trial, "form": form,
                           **_measures(torch, conv.weight.grad.cpu(), exact, scale)}
                    rows.append(row)
                    print(f"{row['shape']} trial {trial} {form:15s} normwise {row['normwise']:.3g}  componentwise "
                          f"median {row['median_componentwise']:.3g} p99 {row['p99_componentwise']:.3g}  "
                          f"signs {100 * row['sign_differs']:.3f}%", file=sys.stderr, flush=True)
    print("| shape | form | normwise (median over trials) | componentwise median | componentwise p99 | signs differ |")
    print("|---|---|---|---|---|---|")
    for shape in dict.fromkeys(r["shape"] for r in rows):
        for form in forms:
            mine = [r for r in rows if r["shape"] == shape and r["form"] == form]

            def median(key):
                values = sorted(r[key] for r in mine)
                return values[len(values) // 2]
            print(f"| {shape} | {form} | {median('normwise'):.3g} | {median('median_componentwise'):.3g} | "
                  f"{median('p99_componentwise'):.3g} | {100 * median('sign_differs'):.3f}% |")
    if args.json:
        from fplab import _core

        try:
            _core.write_file_atomically(args.json, json.dumps({"device": args.device, "torch": torch.__version__,
                                                               "rows": rows}, indent=1))
        except ValueError as error:  # fplab.Error: one line naming the file
            print(f"winograd_error.py: {error}", file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
