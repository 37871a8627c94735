"""The engine for each device an emulation's tensors are on: the CPU engine (_engine.py) for CPU
tensors and NumPy arrays, one CUDA engine (_engine_cuda.py) per CUDA device, made when first
needed. The handlers call these methods; each goes to the engine of its first tensor's device.
"""

from __future__ import annotations

from typing import Dict, Sequence, Tuple

import numpy as np
import torch

from ._coverage import CoverageRecorder
from ._engine import Engine
from ._engine_cuda import CudaEngine
from ._keys import Site
from ._table import Table

Pair = Tuple[int, int]


class Engines:
    """Sends each reduction and copy to the engine of the device its tensors are on."""

    def __init__(self, table: Table, impl_seed: int, coverage: CoverageRecorder) -> None:
        self.table = table
        self.impl_seed = impl_seed
        self.coverage = coverage
        self.cpu = Engine(table, impl_seed, coverage)
        self._cuda: Dict[torch.device, CudaEngine] = {}

    def on(self, where) -> "Engine | CudaEngine":
        """The engine for a tensor, an array (the CPU's) or a device."""
        if isinstance(where, np.ndarray):
            return self.cpu
        device = where if isinstance(where, torch.device) else where.device
        if device.type != "cuda":
            return self.cpu
        if device.index is None:
            device = torch.device("cuda", torch.cuda.current_device())
        engine = self._cuda.get(device)
        if engine is None:
            engine = self._cuda[device] = CudaEngine(self.table, self.impl_seed, self.coverage, device)
        return engine

    def scratch(self, rows: int, cols: int, device: torch.device):
        return self.on(device).scratch(rows, cols)

    def matmul(self, op: str, op_kind: str, a, b, site: Site, part: int = 0, out=None) -> torch.Tensor:
        return self.on(a).matmul(op, op_kind, a, b, site, part, out=out)

    def sum_rows(self, op: str, op_kind: str, terms: torch.Tensor, site: Site, part: int = 0) -> torch.Tensor:
        return self.on(terms).sum_rows(op, op_kind, terms, site, part)

    def sum_planes(self, op: str, op_kind: str, x: torch.Tensor, site: Site, part: int = 0) -> torch.Tensor:
        return self.on(x).sum_planes(op, op_kind, x, site, part)

    def im2col(self, x: torch.Tensor, kernel: Pair, stride: Pair, padding: Pair, dilation: Pair, first: int,
               channels: int, transposed: bool = False):
        return self.on(x).im2col(x, kernel, stride, padding, dilation, first, channels, transposed)

    def col2im(self, dcols, shape: Sequence[int], kernel: Pair, stride: Pair, padding: Pair,
               dilation: Pair) -> torch.Tensor:
        return self.on(dcols).col2im(dcols, shape, kernel, stride, padding, dilation)

    def dgrad_taps(self, g: torch.Tensor, input_hw: Pair, kernel: Pair, stride: Pair, padding: Pair, dilation: Pair,
                   first: int, channels: int):
        return self.on(g).dgrad_taps(g, input_hw, kernel, stride, padding, dilation, first, channels)

    def transposed(self, x: torch.Tensor, shape: Sequence[int]) -> torch.Tensor:
        return self.on(x).transposed(x, shape)

    def sqrt(self, x: torch.Tensor) -> torch.Tensor:
        return self.on(x).sqrt(x)

    def exp(self, x: torch.Tensor) -> torch.Tensor:
        return self.on(x).exp(x)

    def log(self, x: torch.Tensor) -> torch.Tensor:
        return self.on(x).log(x)
