#!/usr/bin/env python3
"""Where an emulated ResNet-18 training step's time goes: every call into fplab.torch's engine
(GEMMs by op kind and shape, batched sums, im2col, col2im, transposes, exp/log/sqrt), timed one
by one, against the whole step.

Each engine call is bracketed by a synchronisation (on CUDA), so the calls' own times add up,
and the step as a whole gets slower than bench_torch_emulate.py measures it: read the shares,
not the total. The model and step are bench_torch_emulate.py's (same seed, SGD with momentum).
Output: per profile, the step's time, the engine's part, and the costliest entries.
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
import time
from typing import Callable, Dict, List, Optional, Tuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_torch_emulate import INPUTS, resnet18, training_step  # noqa: E402

EXAMPLE = "PYTHONPATH=build/python python3 bench/profile_torch_emulate.py --profiles h100 --batch 8 --steps 1"
METHODS = ("matmul", "sum_rows", "sum_planes", "im2col", "col2im", "transposed", "exp", "log", "sqrt")


def instrument(engine_class: type, times: Dict[Tuple[str, str, str], float], counts: collections.Counter,
               synchronize: Callable[[], None]) -> None:
    """Wraps the engine class's methods so that each call adds its time under (method, op kind, shape)."""
    for name in METHODS:
        method = getattr(engine_class, name)

        def timed(self, *args, _method=method, _name=name, **kwargs):
            synchronize()
            start = time.perf_counter()
            result = _method(self, *args, **kwargs)
            synchronize()
            kind = args[1] if _name in ("matmul", "sum_rows", "sum_planes") else ""
            shape = f"{tuple(args[2].shape)} x {tuple(args[3].shape)}" if _name == "matmul" else ""
            times[(_name, kind, shape)] += time.perf_counter() - start
            counts[(_name, kind, shape)] += 1
            return result

        setattr(engine_class, name, timed)


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, epilog=f"example:\n  {EXAMPLE}",
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--profiles", default="h100", help="comma-separated profiles (h100)")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="where the step runs (cpu)")
    parser.add_argument("--batch", type=int, default=32, help="batch size (32)")
    parser.add_argument("--input", choices=sorted(INPUTS), default="cifar", help="input shape (cifar: 3x32x32)")
    parser.add_argument("--steps", type=int, default=2, help="profiled steps after one warm-up (2)")
    parser.add_argument("--top", type=int, default=25, help="entries listed per profile (25)")
    args = parser.parse_args(argv)
    if args.batch < 1 or args.steps < 1 or args.top < 1:
        parser.error("--batch, --steps and --top must be positive")

    import torch

    import fplab.torch
    from fplab.torch import _engine, _engine_cuda

    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: no CUDA device here (torch.cuda.is_available() is False)")
    synchronize = torch.cuda.synchronize if args.device == "cuda" else (lambda: None)
    times: Dict[Tuple[str, str, str], float] = collections.defaultdict(float)
    counts: collections.Counter = collections.Counter()
    instrument(_engine_cuda.CudaEngine if args.device == "cuda" else _engine.Engine, times, counts, synchronize)

    torch.manual_seed(0)
    channels, height, width = INPUTS[args.input]
    model = resnet18(channels).to(args.device)
    x = torch.randn(args.batch, channels, height, width).to(args.device)
    y = torch.randint(0, 10, (args.batch,)).to(args.device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    for profile in [p for p in args.profiles.split(",") if p]:
        emulation = fplab.torch.emulate(profile)  # fplab.Error for an unknown one
        with emulation:
            training_step(model, optimizer, x, y)  # warm-up: allocations, first launches
        times.clear()
        counts.clear()
        synchronize()
        start = time.perf_counter()
        for _ in range(args.steps):
            with emulation:
                training_step(model, optimizer, x, y)
        synchronize()
        step = (time.perf_counter() - start) / args.steps
        inside = sum(times.values()) / args.steps
        print(f"== {profile} on {args.device}, batch {args.batch}: {step * 1000:.1f} ms a step, "
              f"{inside * 1000:.1f} ms of it in fplab's engine ({100 * inside / step:.0f}%)")
        for key, seconds in sorted(times.items(), key=lambda kv: -kv[1])[:args.top]:
            method, kind, shape = key
            print(f"{seconds / args.steps * 1000:9.2f} ms {counts[key] // args.steps:5d}x  {method:<10} {kind:<9} {shape}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
