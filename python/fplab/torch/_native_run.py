"""PyTorch's own kernels, in its default or its deterministic mode: the ``native`` profile of
fplab.torch.experiment, the real hardware's replicas to set beside an emulated profile's.

A replica of the ``native`` profile trains exactly as an emulated one (same initial weights,
batches, optimiser arithmetic and evaluation) with nothing intercepted. The variants that use a
profile's deterministic table (algo, control, ...) run with PyTorch's deterministic switches
(``torch.use_deterministic_algorithms(True)``, cuDNN deterministic, no cuDNN benchmarking); the
others (algo+impl, impl) in PyTorch's default mode, where cuDNN and atomics may vary run to run.
"""

from __future__ import annotations

import os
import platform
from typing import Any, Dict

import torch

#: cuBLAS's deterministic mode needs a fixed workspace, set before the process's first GEMM
#: (PyTorch refuses deterministic cuBLAS calls without it): ":4096:8" is the setting PyTorch documents.
CUBLAS_DETERMINISTIC_WORKSPACE = ":4096:8"


class NativeMode:
    """A ``with`` block (entered again per step) in PyTorch's deterministic or default mode; the
    switches are put back as they were on leaving."""

    def __init__(self, deterministic: bool) -> None:
        self.deterministic = deterministic
        self._saved: Any = None

    def __enter__(self) -> "NativeMode":
        cudnn = torch.backends.cudnn
        self._saved = (torch.are_deterministic_algorithms_enabled(), cudnn.deterministic, cudnn.benchmark)
        torch.use_deterministic_algorithms(self.deterministic)
        cudnn.deterministic = self.deterministic
        cudnn.benchmark = False  # a timing-based choice of algorithm would be one more noise source
        return self

    def __exit__(self, *exc: Any) -> None:
        algorithms, deterministic, benchmark = self._saved
        torch.use_deterministic_algorithms(algorithms)
        torch.backends.cudnn.deterministic = deterministic
        torch.backends.cudnn.benchmark = benchmark


def prepare_deterministic_cublas(device: torch.device) -> None:
    """Sets CUBLAS_WORKSPACE_CONFIG for deterministic replicas on a GPU, unless the caller has: it
    takes effect only if no cuBLAS handle exists yet in this process (PyTorch then says so)."""
    if device.type == "cuda":
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", CUBLAS_DETERMINISTIC_WORKSPACE)


def switches() -> Dict[str, Any]:
    """PyTorch's numeric switches of this process, which a spawned worker does not inherit."""
    return {"matmul_tf32": torch.backends.cuda.matmul.allow_tf32, "cudnn_tf32": torch.backends.cudnn.allow_tf32,
            "matmul_precision": torch.get_float32_matmul_precision()}


def set_switches(given: Dict[str, Any]) -> None:
    """The switches of switches() set in this process (a worker's, from its parent's)."""
    torch.set_float32_matmul_precision(given["matmul_precision"])
    torch.backends.cuda.matmul.allow_tf32 = given["matmul_tf32"]
    torch.backends.cudnn.allow_tf32 = given["cudnn_tf32"]


def backend(device: torch.device) -> str:
    """What the native replicas ran on, in one line: PyTorch, cuDNN, the TF32 switches and the
    device (recorded in the experiment's description and in what a replica file depends on)."""
    parts = [f"PyTorch {torch.__version__}"]
    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        parts += [f"cuDNN {torch.backends.cudnn.version()}",
                  f"TF32 matmul {'on' if torch.backends.cuda.matmul.allow_tf32 else 'off'}",
                  f"TF32 cuDNN {'on' if torch.backends.cudnn.allow_tf32 else 'off'}",
                  torch.cuda.get_device_name(index)]
    else:
        parts += [f"{torch.get_num_threads()} CPU thread(s)", platform.processor() or platform.machine()]
    return ", ".join(parts)
