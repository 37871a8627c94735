#!/usr/bin/env python3
"""A census of run-to-run nondeterminism in a training step of fplab's shipped models and a
ResNet-18: PyTorch's own kernels in its default and deterministic modes (TF32 off and on), beside
fplab's emulation of the same step under hardware profiles (fplab.torch.census).

  experiments/census_torch.py run --device cuda --out results/census-h100
  experiments/census_torch.py run --device cpu --models small_cnn --profiles h100 --out /tmp/census
  experiments/census_torch.py table results/census-h100          # Markdown tables
  experiments/census_torch.py table docs/results/census/h100.jsonl

``run`` builds each model with fplab's initial weights (algo seed 1; the ResNet-18 with PyTorch's
initialisation under torch.manual_seed(1)), one seeded batch of images in [0, 1) with random
labels (64 images, the recipes' batch; 128 for the ResNet-18), and measures:

- ``gradients``: the whole step --runs times from the same state, each parameter's gradient (and
  the loss) compared with the first run's. Natively for each mode and TF32 setting; under each
  --profiles entry through fplab.torch.emulate with implementation seeds 1..runs (on --device).
- ``kernels`` (native only): every aten kernel of the step called again on copies of its inputs.

One JSON line per (model, source, view) goes to census.jsonl in --out. TF32 "off" sets
torch.backends.cuda.matmul.allow_tf32 and torch.backends.cudnn.allow_tf32 to False, "on" to True;
deterministic mode is torch.use_deterministic_algorithms(True) with cudnn.deterministic;
CUBLAS_WORKSPACE_CONFIG=:4096:8 is set for both. docs/results/census.md has the H100's tables.
"""

from __future__ import annotations

import argparse
import json
import lzma
import os
import sys
import time
from typing import Iterator, List, Optional, Tuple

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

MODELS = ("mlp", "small_cnn", "small_cnn_bn", "medium_cnn", "resnet18")


def _build(name: str, device: str):
    import torch
    import fplab.torch.models as models
    from fplab.torch.resnet import resnet18

    if name == "resnet18":
        torch.manual_seed(1)
        return resnet18(in_channels=1, classes=10).to(device), 128
    if name not in MODELS:
        raise SystemExit(f"Error: unknown model '{name}' (known: {', '.join(MODELS)})")
    return models.build(name).to(device), 64


def _batch(batch: int, device: str):
    import torch

    generator = torch.Generator().manual_seed(7)
    x = torch.rand(batch, 1, 28, 28, generator=generator)
    y = torch.randint(0, 10, (batch,), generator=generator)
    return x.to(device), y.to(device)


def _set_mode(mode: str, tf32: str) -> None:
    from fplab.torch.census import set_torch_mode

    set_torch_mode(mode, tf32)


def _sources(args: argparse.Namespace) -> Iterator[Tuple[str, Optional[str], str, str]]:
    """(label, profile or None, mode, tf32) of every measurement asked for."""
    for mode in _split(args.modes):
        for tf32 in _split(args.tf32):
            yield f"torch {mode}, TF32 {tf32}", None, mode, tf32
    for profile in _split(args.profiles):
        yield f"fplab {profile}", profile, "default", "off"


def _split(text: str) -> List[str]:
    return [part for part in text.split(",") if part]


def run(args: argparse.Namespace) -> int:
    import torch
    from fplab.torch import census

    if args.device == "cuda" and not torch.cuda.is_available():
        print("Error: --device cuda but PyTorch sees no CUDA device", file=sys.stderr)
        return 2
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "census.jsonl")
    machine = torch.cuda.get_device_name() if args.device == "cuda" else "cpu"
    with open(path, "a", encoding="utf-8") as out:
        for name in _split(args.models):
            net, batch = _build(name, args.device)
            x, y = _batch(batch, args.device)
            for label, profile, mode, tf32 in _sources(args):
                _set_mode(mode, tf32)
                views = [("gradients", lambda: census.gradient_census(net, x, y, profile=profile, runs=args.runs))]
                if profile is None and args.kernels:
                    views.append(("kernels", lambda: census.kernel_census(net, x, y, runs=args.runs)))
                for view, measure in views:
                    start = time.monotonic()
                    rows = measure()
                    seconds = time.monotonic() - start
                    differing = sum(1 for row in rows if row.runs_differing)
                    print(f"{name:12s} {label:32s} {view:9s} {differing:3d} of {len(rows):3d} tensors differ "
                          f"({seconds:.1f} s)", flush=True)
                    record = {"model": name, "source": label, "profile": profile, "mode": mode, "tf32": tf32,
                              "view": view, "runs": args.runs, "batch": batch, "device": machine,
                              "torch": torch.__version__, "cudnn": torch.backends.cudnn.version(),
                              "seconds": round(seconds, 3), "rows": [row.as_dict() for row in rows]}
                    out.write(json.dumps(record) + "\n")
                    out.flush()
    _set_mode("default", "off")
    print(f"wrote {path}")
    return 0


def _records(paths: List[str], file_name: str = "census.jsonl") -> Iterator[dict]:
    """Every JSON line of each path: a .jsonl(.xz) file, or a run's folder holding ``file_name``."""
    for path in paths:
        if os.path.isdir(path):
            path = os.path.join(path, file_name)
        opener = lzma.open if path.endswith(".xz") else open
        try:
            with opener(path, "rt", encoding="utf-8") as lines:
                for line in lines:
                    if line.strip():
                        yield json.loads(line)
        except OSError as error:
            raise SystemExit(f"Error: cannot read {path}: {error.strerror or error}")


def table(args: argparse.Namespace) -> int:
    from fplab.torch.census import CensusRow, format_table

    records = list(_records(args.paths))
    if not records:
        print("Error: no census records in " + ", ".join(args.paths), file=sys.stderr)
        return 2
    print("| model | source | gradients that differ (of the parameters) | largest share of elements | "
          "median ulps | kernels that differ |")
    print("|---|---|---|---|---|---|")
    by_key = {}
    for record in records:
        by_key.setdefault((record["model"], record["source"]), {})[record["view"]] = record
    for (model, source), views in by_key.items():
        grads = views.get("gradients", {}).get("rows", [])
        params = [row for row in grads if row["name"] != "loss"]
        differing = [row for row in params if row["runs_differing"]]
        share = max((row["differing"] for row in params), default=0.0)
        medians = sorted(row["ulp_median"] for row in differing)
        median = f"{medians[len(medians) // 2]:g}" if medians else "-"
        kernels = views.get("kernels")
        kernel_text = "-" if kernels is None else \
            ", ".join(row["name"].rsplit(" #", 1)[0] for row in kernels["rows"] if row["runs_differing"]) or "none"
        print(f"| {model} | {source} | {len(differing)} of {len(params)} | {100 * share:.1f}% | {median} | "
              f"{kernel_text} |")
    if args.details:
        for (model, source), views in by_key.items():
            for view, record in views.items():
                rows = [CensusRow(r["name"], tuple(r["shape"]), r["inputs"], r["elements"], r["differing"],
                                  r["runs_differing"], r["runs"], r["ulp_max"], r["ulp_median"]) for r in record["rows"]]
                print(f"\n### {model}, {source}: {view}\n")
                print(format_table(rows, differing_only=view == "kernels"))
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n\n".join(__doc__.split("\n\n")[1:2]))
    commands = parser.add_subparsers(dest="command", required=True)
    r = commands.add_parser("run", help="measure (see the module's help)")
    r.add_argument("--device", default="cuda", help="cuda or cpu (default: %(default)s)")
    r.add_argument("--models", default=",".join(MODELS), help="comma-separated, of: " + ", ".join(MODELS))
    r.add_argument("--modes", default="default,deterministic", help="PyTorch's modes (default: %(default)s)")
    r.add_argument("--tf32", default="off,on", help="default: %(default)s")
    r.add_argument("--profiles", default="h100,h100-torch",
                   help="fplab profiles emulated on --device, comma-separated ('' for none; default: %(default)s)")
    r.add_argument("--runs", type=int, default=6, help="steps (or kernel calls) compared (default: %(default)s)")
    r.add_argument("--no-kernels", dest="kernels", action="store_false", help="skip the per-kernel census")
    r.add_argument("--out", required=True, help="folder for census.jsonl (appended to)")
    t = commands.add_parser("table", help="Markdown tables of one or more runs")
    t.add_argument("paths", nargs="+", metavar="FOLDER_OR_FILE", help="a run's --out, or a census.jsonl(.xz)")
    t.add_argument("--details", action="store_true", help="every tensor of every measurement too")
    args = parser.parse_args(argv)
    if args.command == "run" and args.runs < 2:
        parser.error("--runs must be at least 2")
    return run(args) if args.command == "run" else table(args)


if __name__ == "__main__":
    sys.exit(main())
