#!/usr/bin/env python3
"""A training step of fplab's shipped models in PyTorch, kernel by kernel against fplab's emulation
of it: which layers' outputs and gradients does a profile reproduce bit for bit?

  experiments/step_compare_torch.py run --device cuda --out results/step-h200
  experiments/step_compare_torch.py run --device cpu --models small_cnn --settings deterministic,off,h100-torch:deterministic --out /tmp/step
  experiments/step_compare_torch.py table results/step-h200            # Markdown tables
  experiments/step_compare_torch.py table docs/results/step_compare/h200.jsonl

``run`` builds each model with fplab's initial weights (algo seed 1) and the census's seeded batch
(64 images in [0, 1), random labels), sets PyTorch's mode and TF32 switch of each --settings entry
and compares its step with the step under that entry's profile on the same device
(fplab.torch.step_compare): ``isolated``, each layer emulated on PyTorch's own input and output
gradient (is this kernel reproduced?), and ``chained``, the whole step emulated (is the step?).
One JSON line per (model, setting) goes to step_compare.jsonl in --out; the isolated rows that
differ are printed as they come.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import List, Optional, Tuple

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from census_torch import MODELS, _batch, _build, _records, _split  # noqa: E402  (the census's models, batch, files)

#: the models compare_step can cut into layers (fplab.torch.models' networks)
COMPARABLE = tuple(m for m in MODELS if m != "resnet18")

# h100-torch-tf32 models PyTorch's default switches: TF32 in cuDNN's convolutions, not in cuBLAS
SETTINGS = "deterministic,off,h100-torch:deterministic;deterministic,conv,h100-torch-tf32:deterministic;" \
           "default,off,h100-torch"


def _settings(text: str) -> List[Tuple[str, str, str]]:
    settings = []
    for entry in text.split(";"):
        parts = entry.split(",")
        if len(parts) != 3 or parts[0] not in ("default", "deterministic") or parts[1] not in ("off", "on", "conv"):
            raise SystemExit(f"Error: --settings entry '{entry}' is not MODE,TF32,PROFILE "
                             "(MODE default or deterministic, TF32 off, on or conv)")
        settings.append((parts[0], parts[1], parts[2]))
    return settings


def run(args: argparse.Namespace) -> int:
    import torch
    from fplab.torch.census import set_torch_mode
    from fplab.torch.step_compare import compare_step

    from fplab import Error
    from fplab.torch._table import load_table

    if args.device == "cuda" and not torch.cuda.is_available():
        print("Error: --device cuda but PyTorch sees no CUDA device", file=sys.stderr)
        return 2
    settings = _settings(args.settings)
    unknown = [name for name in _split(args.models) if name not in COMPARABLE]
    if unknown:
        print(f"Error: unknown model '{unknown[0]}' (known: {', '.join(COMPARABLE)})", file=sys.stderr)
        return 2
    try:
        for _, _, profile in settings:
            load_table(profile)
    except Error as error:
        print(f"Error: {error}", file=sys.stderr)
        return 2
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "step_compare.jsonl")
    machine = torch.cuda.get_device_name() if args.device == "cuda" else "cpu"
    with open(path, "a", encoding="utf-8") as out:
        for name in _split(args.models):
            net, batch = _build(name, args.device)
            x, y = _batch(batch, args.device)
            for mode, tf32, profile in settings:
                set_torch_mode(mode, tf32)
                start = time.monotonic()
                rows = compare_step(net, x, y, profile, impl_seed=1)
                seconds = time.monotonic() - start
                isolated = [row for row in rows if row.view == "isolated"]
                chained = [row for row in rows if row.view == "chained"]
                print(f"{name:12s} {mode} TF32 {tf32} vs {profile}: {sum(1 for r in isolated if r.differing)} of "
                      f"{len(isolated)} tensors differ alone, {sum(1 for r in chained if r.differing)} in the whole "
                      f"step ({seconds:.1f} s)", flush=True)
                for row in isolated:
                    if row.differing:
                        print(f"    {row.layer} {row.quantity}: {row.differing} of {row.elements} "
                              f"(up to {row.ulp_max} ulps)", flush=True)
                record = {"model": name, "mode": mode, "tf32": tf32, "profile": profile, "batch": batch,
                          "device": machine, "torch": torch.__version__, "cudnn": torch.backends.cudnn.version(),
                          "seconds": round(seconds, 3), "rows": [row.as_dict() for row in rows]}
                out.write(json.dumps(record) + "\n")
                out.flush()
    set_torch_mode("default", "off")
    print(f"wrote {path}")
    return 0


def table(args: argparse.Namespace) -> int:
    from fplab.torch.step_compare import StepRow, format_rows

    records = list(_records(args.paths, "step_compare.jsonl"))
    if not records:
        print("Error: no step comparisons in " + ", ".join(args.paths), file=sys.stderr)
        return 2
    print("| model | PyTorch | profile | tensors reproduced alone | tensors reproduced in the whole step | "
          "not reproduced alone |")
    print("|---|---|---|---|---|---|")
    for record in records:
        rows = [StepRow(r["view"], r["layer"], r["quantity"], tuple(r["shape"]), r["elements"], r["differing"],
                        r["ulp_max"]) for r in record["rows"]]
        alone = [row for row in rows if row.view == "isolated"]
        whole = [row for row in rows if row.view == "chained"]
        missed = ", ".join(f"{row.layer.split(' ', 2)[-1]} {row.quantity}" for row in alone if row.differing) or "none"
        print(f"| {record['model']} | {record['mode']}, TF32 {record['tf32']} | {record['profile']} | "
              f"{sum(1 for r in alone if not r.differing)} of {len(alone)} | "
              f"{sum(1 for r in whole if not r.differing)} of {len(whole)} | {missed} |")
        record["_rows"] = rows
    if args.details:
        for record in records:
            print(f"\n### {record['model']}, {record['mode']} TF32 {record['tf32']}, against {record['profile']}\n")
            print(format_rows(record["_rows"]))
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n\n".join(__doc__.split("\n\n")[1:2]))
    commands = parser.add_subparsers(dest="command", required=True)
    r = commands.add_parser("run", help="measure (see the module's help)")
    r.add_argument("--device", default="cuda", help="cuda or cpu (default: %(default)s)")
    r.add_argument("--models", default=",".join(COMPARABLE),
                   help="comma-separated, of: " + ", ".join(COMPARABLE) + " (default: %(default)s)")
    r.add_argument("--settings", default=SETTINGS,
                   help="MODE,TF32,PROFILE entries separated by ';': PyTorch's mode (default or deterministic) and "
                        "TF32 switch (off, on, or conv: cuDNN's only), and the profile whose emulation is compared with them "
                        "(default: %(default)s)")
    r.add_argument("--out", required=True, help="folder for step_compare.jsonl (appended to)")
    t = commands.add_parser("table", help="Markdown tables of one or more runs")
    t.add_argument("paths", nargs="+", metavar="FOLDER_OR_FILE", help="a run's --out, or a step_compare.jsonl(.xz)")
    t.add_argument("--details", action="store_true", help="every tensor of every comparison too")
    args = parser.parse_args(argv)
    return run(args) if args.command == "run" else table(args)


if __name__ == "__main__":
    sys.exit(main())
