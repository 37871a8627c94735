#!/usr/bin/env python3
"""The research at its scale: a ResNet-18 trained on the whole of Fashion-MNIST, replicas of the
noise variants under an emulated profile beside PyTorch's own kernels (the ``native`` profile).

  experiments/resnet18_fashion_mnist.py run --profiles h100,native --device cuda --workers 3 --out results/r18
  experiments/resnet18_fashion_mnist.py table results/r18-*        # one Markdown table of several runs
  experiments/resnet18_fashion_mnist.py figure --out r18.png results/r18-*   # churn and L2, side by side

``run`` is fplab.torch.experiment with this model, the data set and the recipe given; it writes
``fplab run``'s files into --out and, with --resume, trains only the replicas missing there, so a
run too long for one sitting can be split (by --variants or --profiles, each in its own --out).
``table`` reads the summary.json of each folder given and prints one row per (profile, variant):
accuracy, churn and L2 with their 95% intervals (bootstrap over replicas), per-class sd. ``figure``
draws churn and L2 per variant, one bar per profile, with those intervals (gnuplot; .png, .svg, .pdf).

PyTorch's TF32 switches are off unless --tf32 on: the emulated profiles model fp32 arithmetic, and
the native replicas should do the same sums. docs/results.md, "ResNet-18 at scale", has the runs.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import List

DEFAULT_DATA = "/usr/share/datasets/fashion-mnist"


def resnet18_fashion_mnist(seed: int):
    """model_fn: one grey channel in, ten classes out (torch.manual_seed(seed) has run)."""
    from fplab.torch.resnet import resnet18

    return resnet18(in_channels=1, classes=10)


def _arguments(argv: List[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n"
               "  %(prog)s run --train-subset 256 --test-subset 200 --epochs 1 --replicas 2 "
               "--variants impl,control --out /tmp/r18-small\n"
               "  %(prog)s table /tmp/r18-small\n")
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="train the replicas and write fplab run's files")
    run.add_argument("--profiles", default="h100,native",
                     help="comma-separated profile names, 'native' for PyTorch's own kernels (default: %(default)s)")
    run.add_argument("--variants", default="algo+impl,algo,impl,control", help="default: %(default)s")
    run.add_argument("--replicas", type=int, default=8, help="per profile and variant (default: %(default)s)")
    run.add_argument("--epochs", type=int, default=3)
    run.add_argument("--batch", type=int, default=128)
    run.add_argument("--lr", type=float, default=0.05)
    run.add_argument("--momentum", type=float, default=0.9)
    run.add_argument("--weight-decay", type=float, default=5e-4)
    run.add_argument("--lr-decay-every", type=int, default=2, help="epochs between decays, 0: none")
    run.add_argument("--lr-decay-factor", type=float, default=0.1)
    run.add_argument("--train-subset", type=int, default=0, help="the first N training images (0: all)")
    run.add_argument("--test-subset", type=int, default=0, help="the first N test images (0: all)")
    run.add_argument("--data-dir", default=DEFAULT_DATA, help="the four IDX files (default: %(default)s)")
    run.add_argument("--device", default="cpu", help="cpu or cuda[:N] (default: %(default)s)")
    run.add_argument("--workers", type=int, default=1, help="replicas trained at a time (default: %(default)s)")
    run.add_argument("--tf32", choices=("off", "on"), default="off", help="PyTorch's TF32 switches (default: off)")
    run.add_argument("--out", required=True, help="the results folder")
    run.add_argument("--resume", action="store_true", help="keep the replicas already in --out")
    table = commands.add_parser("table", help="one Markdown table of the summary.json of several runs")
    table.add_argument("folders", nargs="+")
    figure = commands.add_parser("figure", help="churn and L2 per variant and profile, from several runs")
    figure.add_argument("--out", required=True, help="the figure: .png, .svg or .pdf")
    figure.add_argument("folders", nargs="+")
    return parser.parse_args(argv)


def _run(args: argparse.Namespace) -> None:
    import numpy as np
    import torch

    import fplab
    import fplab.torch

    torch.backends.cuda.matmul.allow_tf32 = args.tf32 == "on"
    torch.backends.cudnn.allow_tf32 = args.tf32 == "on"
    data = fplab._core.load_image_dataset(args.data_dir)

    def split(name: str, subset: int):
        x, y = np.array(data.images(name)), np.array(data.labels(name))
        if subset:
            x, y = x[:subset], y[:subset]
        return torch.from_numpy(x), torch.from_numpy(y.astype(np.int64))

    recipe = dict(epochs=args.epochs, batch=args.batch, optimizer="sgd", lr=args.lr, momentum=args.momentum,
                  weight_decay=args.weight_decay, lr_decay_every=args.lr_decay_every,
                  lr_decay_factor=args.lr_decay_factor)
    fplab.torch.experiment(
        resnet18_fashion_mnist, split("train", args.train_subset), split("test", args.test_subset), recipe,
        args.profiles.split(","), args.variants.split(","), args.replicas, args.out, name="resnet18_fashion_mnist",
        description="A CIFAR-style ResNet-18 (fplab.torch.resnet) on Fashion-MNIST, SGD with momentum and step "
                    f"decay; PyTorch's TF32 switches {args.tf32}.",
        class_names=data.class_names, resume=args.resume, device=args.device, workers=args.workers)


def _figure(folders: List[str], out: str) -> None:
    """Two panels, churn % and L2 of the final weights, one cluster per variant and one bar per
    profile, each with its 95% interval over replicas."""
    from fplab import _core
    from fplab.torch.summary_table import groups as summary_groups

    groups = summary_groups(folders)
    profiles = list(dict.fromkeys(g["profile"] for g in groups))
    variants = list(dict.fromkeys(g["variant"] for g in groups))
    by_key = {(g["profile"], g["variant"]): g for g in groups}
    lines = []
    for v in variants:
        cells = ['"' + v.replace('"', "'") + '"']  # a data file's string column: double quotes
        for p in profiles:
            g = by_key.get((p, v))
            if g is None:
                cells += ["NaN"] * 6
                continue
            churn, l2 = 100 * g["churn_mean"], g["l2_mean"]
            (c_low, c_high), (l_low, l_high) = g["churn_ci95_replicas"], g["l2_ci95_replicas"]
            cells += [f"{churn:.6g}", f"{100 * c_low:.6g}", f"{100 * c_high:.6g}", f"{l2:.6g}", f"{l_low:.6g}",
                      f"{l_high:.6g}"]
        lines.append(" ".join(cells))
    titles = [f"{_core.gnuplot_quoted(p + ' (' + ('PyTorch on the GPU' if p == 'native' else 'emulated') + ')')}"
              for p in profiles]

    def panel(first_column: int, ylabel: str, title: str) -> str:
        plots = ", ".join(f"'data.dat' using {2 + 6 * k + first_column}:{3 + 6 * k + first_column}:"
                          f"{4 + 6 * k + first_column}:xtic(1) title {titles[k]}" for k in range(len(profiles)))
        return (f"set title {_core.gnuplot_quoted(title)}\nset ylabel {_core.gnuplot_quoted(ylabel)}\n"
                f"plot {plots}\n")

    script = ("set multiplot layout 1,2\nset style data histogram\nset style histogram errorbars gap 1 lw 1\n"
              "set style fill solid 0.6 border -1\nset yrange [0:*]\nset grid ytics\nset key below horizontal\n"
              "set datafile missing 'NaN'\n"
              + panel(0, "churn % (test predictions that differ)", "Churn between replicas, 95% CI over replicas")
              + panel(3, "L2 distance of the final weights", "Weight distance, 95% CI over replicas")
              + "unset multiplot\n")
    _core.render_gnuplot(out, script, "\n".join(lines) + "\n", 1200, 480)


def main(argv: List[str]) -> int:
    args = _arguments(argv)
    if args.command in ("table", "figure"):
        try:
            if args.command == "table":
                from fplab.torch.summary_table import markdown

                sys.stdout.write(markdown(args.folders))
            else:
                _figure(args.folders, args.out)
        except (OSError, KeyError, ValueError, RuntimeError) as error:
            print(f"resnet18_fashion_mnist.py: {error}", file=sys.stderr)
            return 2
        return 0
    import fplab

    try:
        _run(args)
    except fplab.Error as error:
        print(error, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
