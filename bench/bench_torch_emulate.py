#!/usr/bin/env python3
"""One ResNet-18 training step under fplab.torch.emulate(PROFILE) against PyTorch's own, on the CPU
or on a CUDA device (--device cuda).

The benchmark of issue 17 ("Speed"): a CIFAR-style ResNet-18 (BasicBlocks [2, 2, 2, 2], a 3x3 stem
without max-pooling, global average pooling, 10 classes) written in plain PyTorch below, one
training step = forward, cross-entropy, backward, SGD (momentum 0.9) step, on one thread
(torch.set_num_threads(1)). For every profile asked for (all shipped ones by default), the native
step and the emulated step run alternately, each on its own copy of the same initial weights and
the same batch, so that both see the same machine load; after the warm-up steps, the medians of
the rest are reported: wall-clock time (time.perf_counter) and the process's CPU time
(time.process_time, which other jobs on a shared machine disturb less).

Memory: every configuration (native, and each profile) runs again in a fresh subprocess of its
own, so that peaks do not mix, with glibc's mmap threshold fixed at 128 KiB (freed large blocks go
back to the system at once, so the resident set follows live memory). There the resident set
size (VmRSS) is noted after the imports (the interpreter, PyTorch, NumPy, fplab: "libraries"),
the model, optimiser and batch are made, one step runs (it also makes the gradients and momentum
buffers), VmRSS is noted again ("before") and the kernel's peak (VmHWM) is reset
(/proc/self/clear_refs); then --memory-steps steps run. Reported: the peak above the libraries
(VmHWM - libraries: weights, gradients, momentum, the batch and the step's activations and
temporaries, PyTorch's tensors, NumPy arrays and fplab's C++ buffers alike), the analogue of
PyTorch's peak allocated memory on a GPU and the measure of the 2x target; and the step's own
peak (VmHWM - before: activations and temporaries). The same subprocess lists what ran natively
(fplab.torch.coverage()) and which NativeOpWarnings were raised.

On a CUDA device (--device cuda; PyTorch's default mode, cuDNN's own choice of kernels, TF32 as
PyTorch's defaults leave it: off for matmuls, on for convolutions unless --no-tf32), a timed step
ends with torch.cuda.synchronize() (its CPU time is then mostly waiting) and the memory
subprocess reports PyTorch's peak allocated memory over the steps after the first
(torch.cuda.max_memory_allocated after reset_peak_memory_stats) plus the device memory fplab's
kernels hold for their workspaces (fplab._core.cuda_workspace_bytes: outside PyTorch's allocator).

Output: progress on stderr, a Markdown table on stdout (and --json FILE for the numbers).
Issue 17's targets: emulate("h100") within 3x PyTorch's step time (3.5x for deterministic
profiles on the GPU); peak memory within 2x.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import warnings
from typing import Dict, List, Optional

EXAMPLE = "PYTHONPATH=build/python python3 bench/bench_torch_emulate.py --profiles h100,cpu-seq --steps 2 --batch 8"

INPUTS = {"cifar": (3, 32, 32), "mnist": (1, 28, 28)}


def _torch():
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    return torch, nn, F


def resnet18(in_channels: int, classes: int = 10):
    """The CIFAR-style ResNet-18 (fplab.torch.resnet), plain PyTorch."""
    _torch()
    from fplab.torch.resnet import resnet18 as build

    return build(in_channels, classes)


class Setup:
    """The model, its optimiser and one batch, the same for every configuration (seeded)."""

    def __init__(self, args: argparse.Namespace) -> None:
        torch, _, _ = _torch()
        torch.manual_seed(args.seed)
        channels, height, width = INPUTS[args.input]
        self.model = resnet18(channels).to(args.device)
        self.x = torch.randn(args.batch, channels, height, width).to(args.device)
        self.y = torch.randint(0, 10, (args.batch,)).to(args.device)

    def fresh(self):
        """A copy of the initial model and an SGD optimiser for it."""
        torch, _, _ = _torch()
        model = copy.deepcopy(self.model)
        return model, torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)


def training_step(model, optimizer, x, y) -> None:
    """Forward, cross-entropy, backward, SGD step."""
    _, _, F = _torch()
    optimizer.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()


def step_under(emulation, model, optimizer, x, y) -> None:
    """One training step, inside ``emulation`` (an fplab.torch.emulate context) or natively (None)."""
    with emulation if emulation is not None else contextlib.nullcontext():
        training_step(model, optimizer, x, y)


def synchronize() -> None:
    """Waits for the GPU's queued work, where there is a GPU."""
    torch, _, _ = _torch()
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


def timed(function) -> Dict[str, float]:
    synchronize()
    wall, cpu = time.perf_counter(), time.process_time()
    function()
    synchronize()
    return {"wall": time.perf_counter() - wall, "cpu": time.process_time() - cpu}


def configure(args: argparse.Namespace) -> None:
    """Threads, and on a GPU PyTorch's default mode with the TF32 switch asked for."""
    torch, _, _ = _torch()
    torch.set_num_threads(args.threads)
    if args.device == "cuda":
        torch.backends.cudnn.allow_tf32 = not args.no_tf32
        torch.backends.cuda.matmul.allow_tf32 = False


# --- memory (a subprocess per configuration) -------------------------------------------------


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field}")


def memory_child(args: argparse.Namespace) -> None:
    """Runs in the subprocess: one configuration's peak memory and coverage, as JSON on stdout."""
    torch, _, _ = _torch()
    configure(args)
    import fplab.torch  # both configurations import it, so that both baselines hold it

    libraries = _status_kib("VmRSS")  # the interpreter, PyTorch, NumPy, fplab
    setup = Setup(args)
    model, optimizer = setup.fresh()
    x, y = setup.x, setup.y
    del setup
    emulation = None if args.memory_child == "native" else fplab.torch.emulate(args.memory_child)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", fplab.torch.NativeOpWarning)

        step_under(emulation, model, optimizer, x, y)  # the first step also makes the gradients and the momentum buffers
        if args.device == "cuda":
            torch.cuda.synchronize()
            before = torch.cuda.memory_allocated() // 1024
            torch.cuda.reset_peak_memory_stats()
            for _ in range(args.memory_steps):
                step_under(emulation, model, optimizer, x, y)
            torch.cuda.synchronize()
            fplab_kib = (fplab._core.cuda_workspace_bytes() if hasattr(fplab._core, "cuda_workspace_bytes") else 0) // 1024
            peak = torch.cuda.max_memory_allocated() // 1024 + fplab_kib
            result = {"libraries_kib": 0, "before_step_kib": before, "peak_kib": peak, "above_libraries_kib": peak,
                      "step_kib": peak - before, "fplab_workspace_kib": fplab_kib, "hwm_reset": True}
        else:
            before = _status_kib("VmRSS")
            try:
                with open("/proc/self/clear_refs", "w") as f:
                    f.write("5")  # resets VmHWM to the current VmRSS (Linux >= 4.0)
                reset = True
            except OSError:
                reset = False
            for _ in range(args.memory_steps):
                step_under(emulation, model, optimizer, x, y)
            peak = _status_kib("VmHWM")
            result = {"libraries_kib": libraries, "before_step_kib": before, "peak_kib": peak,
                      "above_libraries_kib": peak - libraries, "step_kib": peak - before, "hwm_reset": reset}
    if emulation is not None:
        cover = emulation.coverage()
        result["emulated"] = sorted({f"{e.op_kind}" for e in cover.emulated})
        result["emulated_calls"] = sum(e.count for e in cover.emulated) // (1 + args.memory_steps)
        result["native_ops"] = sorted(cover.ops(emulated=False))
        result["warned"] = sorted({str(w.message) for w in caught if issubclass(w.category, fplab.torch.NativeOpWarning)})
    json.dump(result, sys.stdout)


def measure_memory(args: argparse.Namespace, configuration: str) -> dict:
    command = [sys.executable, os.path.abspath(__file__), "--memory-child", configuration, "--batch", str(args.batch),
               "--input", args.input, "--seed", str(args.seed), "--threads", str(args.threads),
               "--memory-steps", str(args.memory_steps), "--device", args.device] + (["--no-tf32"] if args.no_tf32 else [])
    # A fixed mmap threshold: glibc then returns every freed block of 128 KiB or more at once, so
    # that the resident set follows what is live rather than what malloc keeps for later.
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads), MALLOC_MMAP_THRESHOLD_="131072")
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise SystemExit(f"bench_torch_emulate: the memory run of {configuration} failed:\n{done.stderr}")
    return json.loads(done.stdout)


# --- timing (this process, native and emulated alternately) -----------------------------------


def measure_time(args: argparse.Namespace, setup: Setup, profile: str, index: int, total: int) -> dict:
    import fplab.torch

    native_model, native_optimizer = setup.fresh()
    model, optimizer = setup.fresh()
    emulation = fplab.torch.emulate(profile)
    native: List[Dict[str, float]] = []
    emulated: List[Dict[str, float]] = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fplab.torch.NativeOpWarning)  # the memory run lists them
        for step in range(args.warmup + args.steps):
            n = timed(lambda: training_step(native_model, native_optimizer, setup.x, setup.y))
            with emulation:
                e = timed(lambda: training_step(model, optimizer, setup.x, setup.y))
            if args.max_step and e["wall"] > args.max_step:
                # a step this slow on a GPU is fplab's host engine at work: say which reductions went there
                host = sorted({f"{c.op_kind} {c.schedule}" for c in emulation.coverage().emulated
                               if args.device == "cuda" and c.where.startswith("cpu")})
                why = f"a step took {e['wall']:.1f} s (> --max-step {args.max_step:g} s)" + \
                    (f"; on the host: {'; '.join(host)}" if host else "")
                print(f"[{index}/{total} {profile}] skipped: {why}", file=sys.stderr, flush=True)
                return {"skipped": why}
            kept = step >= args.warmup
            if kept:
                native.append(n)
                emulated.append(e)
            print(f"[{index}/{total} {profile}] step {step + 1}/{args.warmup + args.steps}"
                  f"{'' if kept else ' (warm-up)'}: native {n['wall']:.3f} s, emulated {e['wall']:.3f} s "
                  f"(cpu {n['cpu']:.3f} / {e['cpu']:.3f} s)", file=sys.stderr, flush=True)

    def median(runs, key):
        return statistics.median(r[key] for r in runs)

    return {key: {"native": median(native, key), "emulated": median(emulated, key)} for key in ("wall", "cpu")}


def skipped_row(profile: str, why: str) -> str:
    return "| " + " | ".join([profile, "—", "—", "—", "skipped: " + why.replace("|", "\\|")] + [""] * 5) + " |"


def top_kernels(args: argparse.Namespace, setup: Setup, profile: Optional[str]) -> List[dict]:
    """One more step of a configuration (native: profile None) under torch.profiler: the --kernels
    entries that took the most time of their own: on the device the kernels (every kernel of the
    process, fplab's included), on the CPU the operators. Where the emulated step's time goes."""
    import fplab.torch
    from torch.profiler import ProfilerActivity, profile as profiler

    model, optimizer = setup.fresh()
    emulation = None if profile is None else fplab.torch.emulate(profile)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if args.device == "cuda" else [])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fplab.torch.NativeOpWarning)
        step_under(emulation, model, optimizer, setup.x, setup.y)  # makes the buffers (and the emulation's plans)
        synchronize()
        with profiler(activities=activities) as recorded:
            step_under(emulation, model, optimizer, setup.x, setup.y)
            synchronize()
    events = list(recorded.key_averages())
    if args.device == "cuda":
        # the kernels themselves: an operator also carries the device time of the kernels it launched
        events = [e for e in events if str(getattr(e, "device_type", "")).endswith("CUDA")]

    def own_us(event) -> float:  # PyTorch 2.x names the device's time "device", 1.x "cuda"
        if args.device == "cuda":
            return getattr(event, "self_device_time_total", None) or getattr(event, "self_cuda_time_total", 0)
        return event.self_cpu_time_total

    ranked = sorted(events, key=own_us, reverse=True)[:args.kernels]
    total = sum(own_us(e) for e in events) or 1
    return [{"name": e.key, "calls": e.count, "ms": own_us(e) / 1000, "share": own_us(e) / total} for e in ranked]


def print_kernels(label: str, kernels: List[dict]) -> None:
    print(f"\n{label}: the step's {len(kernels)} entries of most time of their own\n")
    print("| entry | calls | own ms | share of the step's own time |")
    print("|---|---|---|---|")
    for k in kernels:
        name = k["name"] if len(k["name"]) <= 90 else k["name"][:87] + "..."
        print(f"| `{name.replace('|', '/')}` | {k['calls']} | {k['ms']:.2f} | {100 * k['share']:.1f}% |")


def machine() -> str:
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{model}, {os.cpu_count()} logical CPUs"


def verdict(ratios: List[float], target: float) -> str:
    """"yes" if every measure of a ratio meets the target, "no" if none does, else "borderline"."""
    met = [r <= target for r in ratios]
    return "yes" if all(met) else "no" if not any(met) else "borderline"


def coverage_text(memory: dict) -> str:
    if "emulated" not in memory:
        return ""
    warned = memory["warned"]
    text = f"{memory['emulated_calls']} emulated reductions a step ({', '.join(memory['emulated'])}); " \
           f"{len(memory['native_ops'])} ops native"
    if warned:
        text += "; **may reduce natively: " + "; ".join(w.replace("fplab.torch: ", "") for w in warned) + "**"
    return text


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog=f"example (about a minute):\n  {EXAMPLE}\n\nthe full run (every shipped profile; about an hour on "
               f"a 2-core machine):\n  PYTHONPATH=build/python python3 bench/bench_torch_emulate.py --json out.json",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--profiles", default="all", help="comma-separated profile names, or 'all' (fplab.profiles())")
    parser.add_argument("--batch", type=int, default=32, help="batch size (32)")
    parser.add_argument("--input", choices=sorted(INPUTS), default="cifar",
                        help="cifar: 3x32x32 (default); mnist: 1x28x28")
    parser.add_argument("--steps", type=int, default=5, help="timed steps per configuration, after the warm-up (5)")
    parser.add_argument("--warmup", type=int, default=1, help="untimed steps first (1)")
    parser.add_argument("--memory-steps", type=int, default=2, help="steps of each memory subprocess (2)")
    parser.add_argument("--no-memory", action="store_true", help="skip the memory and coverage subprocesses")
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (1)")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="where the step runs (cpu)")
    parser.add_argument("--no-tf32", action="store_true",
                        help="on cuda: TF32 off for cuDNN's convolutions too (PyTorch's default leaves it on)")
    parser.add_argument("--seed", type=int, default=0, help="torch.manual_seed for the weights and the batch (0)")
    parser.add_argument("--json", metavar="FILE", help="also write every number to FILE")
    parser.add_argument("--max-step", type=float, default=0, metavar="SECONDS",
                        help="skip a profile once one of its emulated steps (the warm-up's included) takes longer; "
                             "on cuda it names the reductions that ran on the host (default 0: no limit)")
    parser.add_argument("--kernels", type=int, default=0, metavar="N",
                        help="also run two more steps of each configuration, the second under torch.profiler, and "
                             "list its N entries of most time of their own: kernels on cuda, operators on cpu "
                             "(default 0: none)")
    parser.add_argument("--memory-child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    for option, value, least in (("--batch", args.batch, 1), ("--steps", args.steps, 1), ("--warmup", args.warmup, 0),
                                 ("--memory-steps", args.memory_steps, 1), ("--threads", args.threads, 1),
                                 ("--kernels", args.kernels, 0), ("--max-step", args.max_step, 0)):
        if value < least:
            parser.error(f"{option} {value:g}: must be {'positive' if least else 'zero or more'}")
    if args.memory_child:
        memory_child(args)
        return 0

    torch, _, _ = _torch()
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: no CUDA device here (torch.cuda.is_available() is False)")
    configure(args)
    import fplab.torch

    profiles = [p for p in args.profiles.split(",") if p]
    if args.profiles == "all":  # every shipped profile fplab.torch can emulate (not yet those with layer rules)
        profiles = [p for p in fplab.profiles() if not fplab.profile(p).layer_rules["default"]]
    for p in profiles:
        fplab.torch.emulate(p)  # fplab.Error for an unknown one, before any work
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    setup = Setup(args)
    results = {}
    native_memory = None if args.no_memory else measure_memory(args, "native")
    native_kernels = top_kernels(args, setup, None) if args.kernels else None
    for index, profile in enumerate(profiles, 1):
        results[profile] = {"time": measure_time(args, setup, profile, index, len(profiles))}
        if "skipped" in results[profile]["time"]:
            continue
        if args.kernels:
            results[profile]["kernels"] = top_kernels(args, setup, profile)
        if not args.no_memory:
            results[profile]["memory"] = measure_memory(args, profile)
            m = results[profile]["memory"]
            print(f"[{index}/{len(profiles)} {profile}] peak above the libraries: native "
                  f"{native_memory['above_libraries_kib'] / 1024:.0f} MiB, emulated {m['above_libraries_kib'] / 1024:.0f} "
                  f"MiB", file=sys.stderr, flush=True)

    channels, height, width = INPUTS[args.input]
    where = f"{torch.cuda.get_device_name()} (TF32 for convolutions {'off' if args.no_tf32 else 'on'})" \
        if args.device == "cuda" else f"{args.threads} thread(s)"
    print(f"ResNet-18 (CIFAR-style), batch {args.batch} x {channels}x{height}x{width}, {where}, "
          f"median of {args.steps} step{'s' if args.steps > 1 else ''} after {args.warmup} warm-up; {machine()}; "
          f"torch {torch.__version__}; "
          f"started {started}\n")
    print("| profile | native s/step (wall / cpu) | emulated s/step (wall / cpu) | time ratio (wall / cpu) | target met | "
          "peak MiB above libraries (native / emulated) | memory ratio | <= 2x | step's own MiB (native / emulated) | "
          "coverage |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for profile, r in results.items():
        t = r["time"]
        if "skipped" in t:
            print(skipped_row(profile, t["skipped"]))
            continue
        ratios = [t[k]["emulated"] / t[k]["native"] for k in ("wall", "cpu")]
        # On a GPU the CPU time is mostly waiting for the device: only the wall-clock ratio counts.
        # Issue 17 allows deterministic tables 3.5x there (cuDNN's own deterministic mode costs too).
        target = 3.5 if args.device == "cuda" and not fplab.torch.emulate(profile).table.nondeterministic else 3
        row = [profile, f"{t['wall']['native']:.3f} / {t['cpu']['native']:.3f}",
               f"{t['wall']['emulated']:.3f} / {t['cpu']['emulated']:.3f}", f"{ratios[0]:.2f} / {ratios[1]:.2f}",
               f"{verdict(ratios[:1] if args.device == 'cuda' else ratios, target)} (<= {target}x)"]
        if "memory" in r:
            m, n = r["memory"], native_memory
            ratio = m["above_libraries_kib"] / n["above_libraries_kib"]
            row += [f"{n['above_libraries_kib'] / 1024:.0f} / {m['above_libraries_kib'] / 1024:.0f}", f"{ratio:.2f}",
                    verdict([ratio], 2), f"{n['step_kib'] / 1024:.0f} / {m['step_kib'] / 1024:.0f}", coverage_text(m)]
        else:
            row += [""] * 5
        print("| " + " | ".join(row) + " |")
    if args.kernels:
        print_kernels("native", native_kernels)
        for profile, r in results.items():
            if "kernels" in r:
                print_kernels(profile, r["kernels"])
    if native_memory is not None and not native_memory["hwm_reset"]:
        print("\n(VmHWM could not be reset here: the peaks include the first step's)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "machine": machine(), "torch": torch.__version__, "started": started,
                       "native_memory": native_memory, "native_kernels": native_kernels, "results": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
