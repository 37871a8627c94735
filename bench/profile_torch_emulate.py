#!/usr/bin/env python3
"""Where an emulated ResNet-18 training step's time goes: every call into fplab.torch's engine
(GEMMs by op kind and shape, batched sums, im2col, col2im, transposes, exp/log/sqrt), timed one
by one, against the whole step.

Each engine call is bracketed by a synchronisation (on CUDA), so the calls' own times add up,
and the step as a whole gets slower than bench_torch_emulate.py measures it: read the shares,
not the total. The model and step are bench_torch_emulate.py's (same seed, SGD with momentum).
Output: per profile, the step's time, the engine's part, and the costliest entries.

--kernels (CUDA only) answers another question: is the step waiting on the GPU or on Python?
The steps then run unsynchronized under torch.profiler, which sees every kernel on the device
(fplab's as well as PyTorch's, through CUPTI); printed are the wall time a step, the GPU's busy
time a step (the kernels' summed durations) and the kernels that take the most of it.

--host answers where the host's time goes, with the least disturbance: per configuration (native,
then each profile) the steps run unsynchronized and the time the host takes to issue them is set
against the wall time to their end (host close to wall: the step waits on Python, not on the
device); then a sampling thread reads the main thread's Python stack every --interval ms over
more steps (nothing is traced: the sampled code runs at its own speed) and prints the functions
seen most, inclusive (anywhere on the stack) and innermost (the frame running, or the frame
waiting on the C++ or CUDA call it made). A sample is a share of the host's time, so the
milliseconds are shares of the measured host time.
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
import threading
import time
import warnings
from typing import Callable, Dict, List, Optional, Tuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_torch_emulate import INPUTS, resnet18, step_under, training_step  # noqa: E402

EXAMPLE = "PYTHONPATH=build/python python3 bench/profile_torch_emulate.py --profiles h100 --batch 8 --steps 1"
METHODS = ("matmul", "sum_rows", "sum_planes", "im2col", "col2im", "transposed", "exp", "log", "sqrt", "conv2d_forward",
           "conv2d_backward", "batch_norm_forward", "batch_norm_backward")


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
            if _name == "matmul" or _name.startswith("conv2d"):  # (a, b) and (x, weight)
                shape = f"{tuple(args[2].shape)} x {tuple(args[3].shape)}"
            else:
                shape = str(tuple(args[2].shape)) if _name.startswith("batch_norm") else ""
            times[(_name, kind, shape)] += time.perf_counter() - start
            counts[(_name, kind, shape)] += 1
            return result

        setattr(engine_class, name, timed)


def kernel_profile(profile: str, model, optimizer, x, y, steps: int, top: int, trace: Optional[str]) -> None:
    """Prints wall time, GPU busy time and the busiest kernels a step, for a profile or "native"."""
    import contextlib

    import torch
    from torch.profiler import ProfilerActivity, profile as torch_profile

    import fplab.torch

    # One emulation entered for every step, as bench_torch_emulate.py does: a new one would watch
    # its first step's aten operations (emulate(watch="first-step")), a cost the timed steps do not have.
    emulation = None if profile == "native" else fplab.torch.emulate(profile)

    def context():
        return contextlib.nullcontext() if emulation is None else emulation

    with context():
        training_step(model, optimizer, x, y)  # warm-up
    torch.cuda.synchronize()
    warnings.filterwarnings("ignore", message=".*Profiler clears events")  # one profiling cycle: nothing is lost
    with torch_profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        start = time.perf_counter()
        for _ in range(steps):
            with context():
                training_step(model, optimizer, x, y)
        torch.cuda.synchronize()
        wall = (time.perf_counter() - start) / steps
    if trace:
        prof.export_chrome_trace(trace.replace("PROFILE", profile.replace(":", "-")))
    busy: Dict[str, float] = collections.defaultdict(float)
    launches: collections.Counter = collections.Counter()
    for event in prof.events():
        if getattr(event, "device_type", None) == torch.autograd.DeviceType.CUDA:
            busy[event.name] += event.time_range.elapsed_us()
            launches[event.name] += 1
    total = sum(busy.values()) / 1000 / steps  # microseconds to ms
    share = 100 * total / (wall * 1000)
    print(f"== {profile}: {wall * 1000:.1f} ms a step (profiled), GPU busy {total:.1f} ms ({share:.0f}%),"
          f" {sum(launches.values()) // steps} kernels")
    for name, micros in sorted(busy.items(), key=lambda kv: -kv[1])[:top]:
        print(f"{micros / 1000 / steps:9.2f} ms {launches[name] // steps:5d}x  {name[:110]}")


def python_profile(profile: str, model, optimizer, x, y, steps: int, top: int,
                   synchronize: Callable[[], None]) -> None:
    """Prints the step's wall time and the functions with the most time of their own (cProfile)."""
    import cProfile
    import pstats

    import fplab.torch

    emulation = fplab.torch.emulate(profile)
    with emulation:
        training_step(model, optimizer, x, y)  # warm-up
    synchronize()
    profiler = cProfile.Profile()
    start = time.perf_counter()
    profiler.enable()
    for _ in range(steps):
        with emulation:
            training_step(model, optimizer, x, y)
    synchronize()
    profiler.disable()
    wall = (time.perf_counter() - start) / steps
    print(f"== {profile}: {wall * 1000:.1f} ms a step under cProfile; the {top} functions with most time of their own:")
    pstats.Stats(profiler, stream=sys.stdout).sort_stats("tottime").print_stats(top)


class StackSampler:
    """A thread that reads the Python stacks of the process's other threads every ``interval``
    seconds while on.

    sys._current_frames() is read under the GIL, so a sample waits for the running thread to reach
    a point where it yields it (a GIL-releasing call, or Python's switch interval, lowered here to
    the sampling interval meanwhile): the time of a long call that keeps the GIL lands on the
    frames around it. A backward pass on CUDA tensors runs on autograd's device thread while the
    main thread waits in the engine: a sample then takes that thread's stack (under the label
    "[autograd thread]") in place of the waiting main thread's. Labels are "file:function" with
    the file's base name, and the line for the innermost frame."""

    WAITING = "_engine_run_backward"  # torch.autograd.graph's call into the C++ engine (PyTorch 2.x)

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self.samples = 0
        self.inclusive: collections.Counter = collections.Counter()
        self.innermost: collections.Counter = collections.Counter()
        self._main = threading.main_thread().ident
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._switch = sys.getswitchinterval()

    def __enter__(self) -> "StackSampler":
        sys.setswitchinterval(self.interval)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        sys.setswitchinterval(self._switch)

    @staticmethod
    def _labels(frame) -> List[str]:
        """The stack's labels, innermost first; the innermost with its line as well."""
        labels = []
        line = frame.f_lineno if frame is not None else 0
        while frame is not None:
            code = frame.f_code
            labels.append(f"{os.path.basename(code.co_filename)}:{code.co_name}")
            frame = frame.f_back
        if labels:
            labels[0] += f":{line}"
        return labels

    def _run(self) -> None:
        me = threading.get_ident()
        while not self._stop.wait(self.interval):
            frames = sys._current_frames()
            main = self._labels(frames.get(self._main))
            others = [self._labels(f) + ["[autograd thread]"] for ident, f in frames.items()
                      if ident not in (me, self._main) and f is not None]
            waiting = main and main[0].rsplit(":", 1)[0].endswith(self.WAITING)
            stacks = others if others and waiting else [main] if main else []
            for labels in stacks:
                self.samples += 1
                self.innermost[labels[0]] += 1
                self.inclusive.update(set(labels))


def host_profile(profile: str, model, optimizer, x, y, steps: int, top: int, interval: float,
                 synchronize: Callable[[], None]) -> None:
    """Prints a step's host and wall time, then where the host's time goes (sampled stacks)."""
    import fplab.torch

    emulation = None if profile == "native" else fplab.torch.emulate(profile)
    for _ in range(2):  # warm-up; the second after the aten watch stepped off (emulate(watch="first-step"))
        step_under(emulation, model, optimizer, x, y)
    synchronize()
    start = time.perf_counter()
    for _ in range(steps):
        step_under(emulation, model, optimizer, x, y)
    host = (time.perf_counter() - start) / steps
    synchronize()
    wall = (time.perf_counter() - start) / steps
    with StackSampler(interval) as sampler:
        for _ in range(steps):
            step_under(emulation, model, optimizer, x, y)
        synchronize()
    print(f"== {profile}: host {host * 1000:.2f} ms to issue a step, wall {wall * 1000:.2f} ms "
          f"({steps} steps unsynchronized); {sampler.samples} samples over {steps} more steps")
    if not sampler.samples:
        return
    for title, counts in (("inclusive", sampler.inclusive), ("innermost", sampler.innermost)):
        print(f"-- {title}: ms of host time a step (share of samples)")
        for label, count in counts.most_common(top):
            print(f"{count / sampler.samples * host * 1000:9.2f} ms {100 * count / sampler.samples:5.1f}%  {label}")


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, epilog=f"example:\n  {EXAMPLE}",
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--profiles", default="h100", help="comma-separated profiles (h100)")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="where the step runs (cpu)")
    parser.add_argument("--batch", type=int, default=32, help="batch size (32)")
    parser.add_argument("--input", choices=sorted(INPUTS), default="cifar", help="input shape (cifar: 3x32x32)")
    parser.add_argument("--steps", type=int, default=2, help="profiled steps after one warm-up (2)")
    parser.add_argument("--top", type=int, default=25, help="entries listed per profile (25)")
    parser.add_argument("--kernels", action="store_true",
                        help="CUDA only: the kernels' busy time against wall time (torch.profiler), not engine calls")
    parser.add_argument("--trace", metavar="FILE",
                        help="with --kernels: also a Chrome trace per profile (PROFILE in FILE: the profile's name)")
    parser.add_argument("--python", action="store_true",
                        help="where the CPU's time goes: cProfile over the steps, not engine calls")
    parser.add_argument("--host", action="store_true",
                        help="host against wall time, unsynchronized, and sampled Python stacks (native first)")
    parser.add_argument("--interval", type=float, default=0.5, help="with --host: ms between stack samples (0.5)")
    args = parser.parse_args(argv)
    if sum((args.kernels, args.python, args.host)) > 1:
        parser.error("--kernels, --python and --host: one at a time")
    if args.interval <= 0:
        parser.error("--interval must be positive")
    if args.batch < 1 or args.steps < 1 or args.top < 1:
        parser.error("--batch, --steps and --top must be positive")
    if args.kernels and args.device != "cuda":
        parser.error("--kernels needs --device cuda")

    import torch

    import fplab.torch
    from fplab.torch import _engine, _engine_cuda

    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: no CUDA device here (torch.cuda.is_available() is False)")
    synchronize = torch.cuda.synchronize if args.device == "cuda" else (lambda: None)
    times: Dict[Tuple[str, str, str], float] = collections.defaultdict(float)
    counts: collections.Counter = collections.Counter()
    if not args.kernels and not args.python and not args.host:
        instrument(_engine_cuda.CudaEngine if args.device == "cuda" else _engine.Engine, times, counts, synchronize)

    torch.manual_seed(0)
    channels, height, width = INPUTS[args.input]
    model = resnet18(channels).to(args.device)
    x = torch.randn(args.batch, channels, height, width).to(args.device)
    y = torch.randint(0, 10, (args.batch,)).to(args.device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    names = [p for p in args.profiles.split(",") if p]
    if args.python:
        for profile in names:
            python_profile(profile, model, optimizer, x, y, args.steps, args.top, synchronize)
        return 0
    if args.host:
        for profile in ["native"] + names:
            host_profile(profile, model, optimizer, x, y, args.steps, args.top, args.interval / 1000, synchronize)
        return 0
    if args.kernels:
        for profile in ["native"] + names:
            kernel_profile(profile, model, optimizer, x, y, args.steps, args.top, args.trace)
        return 0
    for profile in names:
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
